"""The one place that picks native kernels or their pure-Python twins (once, at first import).

``LORESCAN_PURE_PYTHON=1`` forces the twins. A kernel that is not built falls back to its
twin; a kernel that is built but fails to import is an error, not a fallback. A twin is
imported only when it is used (the native kernels import ``_wordscan_py`` themselves, for
its character table).
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["wordscan", "hits", "BACKEND"]


def _native_or_twin(name: str, twin: str) -> tuple[ModuleType, bool]:
    """``(module, is_native)``: ``lorescan.<name>`` if built (and not forced off), else ``lorescan.<twin>``."""
    if os.environ.get("LORESCAN_PURE_PYTHON") != "1":
        try:
            return importlib.import_module(f"lorescan.{name}"), True
        except ModuleNotFoundError as exc:
            if exc.name != f"lorescan.{name}":
                raise             # something else is missing: a bug, not a fallback
    return importlib.import_module(f"lorescan.{twin}"), False     # not built here, or forced


if TYPE_CHECKING:
    from . import _hits_py as hits
    from . import _wordscan_py as wordscan
    BACKEND: str
else:
    wordscan, _native_wordscan = _native_or_twin("_wordscan_c", "_wordscan_py")
    hits, _native_hits = _native_or_twin("_hits_c", "_hits_py")
    BACKEND = "native" if _native_wordscan and _native_hits else "python"
