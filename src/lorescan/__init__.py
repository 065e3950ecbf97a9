"""lorescan: an exact, fast lorebook (World Info) engine.

SillyTavern mode: :class:`STEngine` (exact World Info, with diagnostics). Lorebook-slot
mode: :class:`SlotEngine`. Files in any supported format: :func:`load`, :func:`convert`.
The rules each mode implements are written down in the repository's ``docs/`` folder.

The public names below are imported on first use (PEP 562), so ``import lorescan`` stays
cheap; ``from lorescan import STEngine`` loads what the engine needs and nothing more.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "BACKEND": "._kernels",
    "STEngine": ".st.engine", "STResult": ".st.engine", "BookSource": ".st.engine", "Character": ".st.engine",
    "ChatMessage": ".st.engine", "Diagnostic": ".st.engine", "EntryId": ".st.engine",
    "STSettings": ".model", "Compat": ".model", "Entry": ".model", "Lorebook": ".model",
    "MatchOptions": ".model",
    "TimedEffects": ".st.timed",
    "SlotEngine": ".slot", "SlotResult": ".slot", "SlotBook": ".slot", "BookSettings": ".slot",
    "load": ".formats", "convert": ".formats",
    "compile_book": ".match.compile", "CompiledBook": ".match.compile",
    "ChatScan": ".match.cache",
    "load_compiled": ".match.lsc", "save_compiled": ".match.lsc",
    "TiktokenCounter": ".tokens", "IncrementalCount": ".tokens", "count_words": ".tokens",
    "LorebookError": ".errors", "FormatError": ".errors", "SettingsError": ".errors",
    "RegexKeyError": ".errors",
    "Limits": ".limits", "DEFAULT_LIMITS": ".limits",
}

__all__ = ["__version__", *_LAZY]

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing alone costs more than the rest
if TYPE_CHECKING:       # what type checkers and IDEs see: the same names, imported eagerly
    from ._kernels import BACKEND
    from .match.compile import CompiledBook, compile_book
    from .errors import FormatError, LorebookError, RegexKeyError, SettingsError
    from .formats import convert, load
    from .match.cache import ChatScan
    from .limits import DEFAULT_LIMITS, Limits
    from .match.lsc import load_compiled, save_compiled
    from .model import Compat, Entry, Lorebook, MatchOptions, STSettings
    from .st.engine import BookSource, Character, ChatMessage, Diagnostic, EntryId, STEngine, STResult
    from .slot import BookSettings, SlotBook, SlotEngine, SlotResult
    from .st.timed import TimedEffects
    from .tokens import IncrementalCount, TiktokenCounter, count_words


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lorescan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value          # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
