"""The one place that picks the native kernel or its pure-Python twin (once, at first import).

One kernel serves the hot path: ``hits`` (``native/lorescan/_hits_c.pyx``, twin
``_hits_py``), the per-text hit sets and window unions every scan runs. ``LORESCAN_PURE_PYTHON=1``
forces the twin. A kernel that is not built falls back to its twin; a kernel that is built
but fails to import is an error, not a fallback. ``BACKEND`` says which one is live.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["hits", "BACKEND"]


def _native_or_twin(name: str, twin: str) -> tuple[ModuleType, bool]:
    """``(module, is_native)``: ``lorescan.<name>`` if built (and not forced off), else ``lorescan.match.<twin>``."""
    if os.environ.get("LORESCAN_PURE_PYTHON") != "1":
        try:
            return importlib.import_module(f"lorescan.{name}"), True
        except ModuleNotFoundError as exc:
            if exc.name != f"lorescan.{name}":
                raise             # something else is missing: a bug, not a fallback
    return importlib.import_module(f"lorescan.match.{twin}"), False     # not built here, or forced


if TYPE_CHECKING:
    from . import _hits_py as hits
    BACKEND: str
else:
    hits, _native_hits = _native_or_twin("_hits_c", "_hits_py")
    BACKEND = "native" if _native_hits else "python"
