"""The engine-neutral match core: a book's keys compiled once, the hit cache, the match view.

Compile-level tools (both engines build on them): :func:`compile_book` (a book) or
:func:`compile_keys` (engine-neutral :class:`KeySpec` values) -> :class:`CompiledBook` for given
:class:`MatchOptions`; the special keys of its plans (:class:`RegexKey`, :class:`PlainKey`,
:class:`MacroKey`); the compact ``.lsc`` form (:func:`save_compiled`,
:func:`load_compiled`); :class:`ChatScan`, the caller-owned per-message hit cache;
:class:`ScanView`, one turn's view of the chat. Names load on first use (PEP 562): ``import
lorescan.match`` alone costs nothing, and ``lorescan.model`` can use :class:`MatchOptions`
without loading the compiler.
"""
from __future__ import annotations

import importlib

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "MatchOptions": ".options",
    "compile_book": ".compile", "compile_keys": ".compile", "key_spec": ".compile", "CompiledBook": ".compile", "KeyMatcher": ".compile", "EntryPlan": ".compile",
    "build_matcher": ".compile", "classify_key": ".compile", "word_model": ".compile",
    "load_compiled": ".compile", "restore_compiled": ".compile",
    "save_compiled": ".lsc", "encode_compiled": ".lsc", "CompiledFormError": ".lsc", "FORMAT_VERSION": ".lsc",
    "ChatScan": ".cache",
    "ScanView": ".view", "Window": ".view", "EntryMatch": ".view", "match_plain_key": ".view",
    "SOURCE_NAMES": ".view", "MAX_SCAN_DEPTH": ".view",
    "RegexBudget": ".regexscope",
    "RegexKey": ".keys", "PlainKey": ".keys", "MacroKey": ".keys", "KeySpec": ".keys",
}

__all__ = list(_LAZY)

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing alone costs more than the rest
if TYPE_CHECKING:
    from .cache import ChatScan
    from .keys import KeySpec, MacroKey, PlainKey, RegexKey
    from .compile import (CompiledBook, EntryPlan, KeyMatcher, build_matcher, classify_key, compile_book,
                          compile_keys, key_spec, load_compiled, restore_compiled, word_model)
    from .lsc import FORMAT_VERSION, CompiledFormError, encode_compiled, save_compiled
    from .options import MatchOptions
    from .regexscope import RegexBudget
    from .view import MAX_SCAN_DEPTH, SOURCE_NAMES, EntryMatch, ScanView, Window, match_plain_key


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lorescan.match' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value          # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
