"""The one place that picks native kernels or their pure-Python twins (once, at import).

``LORESCAN_PURE_PYTHON=1`` forces the twins. A kernel that is not built falls back to its
twin; a kernel that is built but fails to import is an error, not a fallback.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from . import _hits_py, _wordscan_py

__all__ = ["wordscan", "hits", "BACKEND"]


def _native_or(twin: ModuleType, name: str) -> ModuleType:
    if os.environ.get("LORESCAN_PURE_PYTHON") == "1":
        return twin
    try:
        return importlib.import_module(f"lorescan.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"lorescan.{name}":
            raise             # something else is missing: a bug, not a fallback
        return twin           # not built here


if TYPE_CHECKING:
    wordscan = _wordscan_py
    hits = _hits_py
else:
    wordscan = _native_or(_wordscan_py, "_wordscan_c")
    hits = _native_or(_hits_py, "_hits_c")

BACKEND = "native" if wordscan is not _wordscan_py and hits is not _hits_py else "python"
