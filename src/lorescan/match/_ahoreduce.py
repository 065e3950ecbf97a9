"""An automaton's pickle state without the references pyahocorasick leaks while making it.

pyahocorasick 2.x (through 2.3.1, upstream issue 219) keeps one reference too many to every
bytes chunk of ``Automaton.__reduce__()`` and to the chunk list and value list it returns:
each call leaks about the automaton's whole size. ``save_compiled`` calls it once per written
book, so a service storing 2,000 distinct books grew by the sum of their automata.

:func:`reduce_automaton` returns the same value and gives back, for each of those objects,
only the references counted above what an unleaked object held the same way has (a probe
measured here), so a pyahocorasick that no longer leaks is left as it is.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["reduce_automaton"]

_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]
_decref.restype = None


def _refs(container: Any, i: int) -> int:
    return sys.getrefcount(container[i])


def _release_extra(container: Any, i: int, baseline: int) -> None:
    """Give back the references ``container[i]`` holds above ``baseline``."""
    for _ in range(_refs(container, i) - baseline):
        _decref(container[i])


def reduce_automaton(automaton: Any) -> tuple[Any, tuple[Any, ...]]:
    """``automaton.__reduce__()[:2]``: its class and constructor arguments (chunk list first)."""
    cls, args = automaton.__reduce__()[:2]
    # fresh objects held only by their container, as the returned ones should be
    probe = ([bytes(64)], None)
    chunk_baseline = _refs(probe[0], 0)
    list_baseline = _refs(probe, 0)
    if type(args[0]) is list:
        for i in range(len(args[0])):
            if type(args[0][i]) is bytes:
                _release_extra(args[0], i, chunk_baseline)
    for i in range(len(args)):
        if type(args[i]) is list:
            _release_extra(args, i, list_baseline)
    return cls, args
