"""The engine-neutral match core: keys compiled once, the hit cache, the match view.

Compile-level tools (every engine builds on them): :func:`compile_keys` (engine-neutral
:class:`KeySpec` values) -> :class:`CompiledKeys` for given :class:`MatchOptions`; the
special keys of its plans (:class:`RegexKey`, :class:`PlainKey`, :class:`MacroKey`); the
compact ``.lsc`` form (:func:`save_compiled`, :func:`load_keys`, which also reads the keys
part of a compiled book's file); :class:`ChatScan`, the caller-owned per-message hit cache;
:class:`ScanView`, one turn's view of the chat. The match core knows nothing of books:
SillyTavern mode's ``CompiledBook`` (``lorescan.st.compiled``) has a ``CompiledKeys``. Names load on first use (PEP 562): ``import
lorescan.match`` alone costs nothing, and ``lorescan.model`` can use :class:`MatchOptions`
without loading the compiler.
"""
from __future__ import annotations

import importlib

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "MatchOptions": ".options",
    "compile_keys": ".compile", "CompiledKeys": ".compile", "KeyMatcher": ".compile", "EntryPlan": ".compile",
    "build_matcher": ".compile", "classify_key": ".compile", "word_model": ".compile",
    "load_keys": ".compile", "restore_keys": ".compile",
    "save_compiled": ".lsc", "encode_keys": ".lsc", "CompiledFormError": ".lsc", "FORMAT_VERSION": ".lsc",
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
    from .compile import (CompiledKeys, EntryPlan, KeyMatcher, build_matcher, classify_key,
                          compile_keys, load_keys, restore_keys, word_model)
    from .lsc import FORMAT_VERSION, CompiledFormError, encode_keys, save_compiled
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
