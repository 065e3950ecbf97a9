"""What a platform's probes ask a worker: is it ready (``/readyz``), which build is it (``/version``)."""
from __future__ import annotations

import os
import platform
import tempfile
from typing import Any, Mapping

__all__ = ["books_dir_problem", "readiness_problems", "routing_error_text", "version_info"]


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


def readiness_problems(directory: str, *, started: bool) -> list[str]:
    """Why a worker is not ready (empty: ready): its books directory, and whether it has started."""
    problems = [] if started else ["the worker has not finished starting"]
    found = books_dir_problem(directory)
    return [found, *problems] if found else problems


def routing_error_text(method: str, path: str, status: int, headers: Mapping[str, str] | None, detail: str) -> str:
    """The ``error`` text of a routing error: 404 (no such route), 405 (another method), else ``detail``."""
    if status == 404:
        return f"no route {method} {path} (/openapi.json lists the routes)"
    if status == 405:
        allowed = next((v for k, v in (headers or {}).items() if k.lower() == "allow"), "")
        return f"{method} is not allowed on {path}" + (f" (allowed: {allowed})" if allowed else "")
    return str(detail)
