"""What a platform's probes ask a worker: is it ready (``/readyz``), which build is it (``/version``)."""
from __future__ import annotations

import os
import platform
import tempfile
from typing import Any

__all__ = ["books_dir_problem", "version_info"]


def books_dir_problem(directory: str) -> str | None:
    """Why ``directory`` cannot hold books right now (missing, not a directory, not writable), or None.

    Writability is tried by creating and removing a file: permission bits alone say nothing on a
    read-only mount, and nothing at all for root."""
    if not os.path.exists(directory):
        return f"the books directory {directory} does not exist"
    if not os.path.isdir(directory):
        return f"the books directory {directory} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".ready-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"the books directory {directory} is not writable: {exc.strerror or exc}"
    return None


def version_info() -> dict[str, Any]:
    """The package version, the kernels in use (``native`` or ``python``) and the Python running them."""
    from .. import BACKEND, __version__  # import-cost: the kernels load when a worker first answers /version
    return {"version": __version__, "backend": BACKEND, "python": platform.python_version(),
            "implementation": platform.python_implementation(), "api": "v1"}
