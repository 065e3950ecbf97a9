"""lorescan: an exact, fast lorebook (World Info) engine.

SillyTavern mode: :class:`STEngine` (exact World Info, with diagnostics). Lorebook-slot
mode: :class:`SlotEngine`. JanitorAI script lorebooks: :class:`JanitorEngine`. Files in any
supported format: :func:`load`, :func:`convert`;
chats as the command line reads them: :func:`read_chat`.
The rules each mode implements are written down in the repository's ``docs/`` folder.

The public names below are imported on first use (PEP 562), so ``import lorescan`` stays
cheap; ``from lorescan import STEngine`` loads what the engine needs and nothing more. The top
level holds what a new user needs; the rest lives in the subpackages (``lorescan.st``,
``lorescan.slot``, ``lorescan.formats``, ``lorescan.match``, ``lorescan.tokens``,
``lorescan.errors``), and a name that moved there still resolves here with a warning.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> the module (relative to this package) that defines it: what a new user needs
_LAZY = {
    "BACKEND": ".match._kernels",
    # SillyTavern mode: the engine, its inputs and its results (more: lorescan.st)
    "STEngine": ".st", "STResult": ".st", "BookSource": ".st", "Character": ".st",
    "ChatMessage": ".st", "Diagnostic": ".st", "EntryId": ".st",
    "STSettings": ".st", "Compat": ".st",
    # lorebook-slot mode (more: lorescan.slot)
    "SlotEngine": ".slot", "SlotResult": ".slot", "SlotBook": ".slot", "BookSettings": ".slot",
    # JanitorAI script lorebooks (the "Advanced Lorebook" v12 script, run exactly)
    "JanitorEngine": ".janitor", "JanitorResult": ".janitor",
    # books: the model, files in any format (more: lorescan.model, lorescan.formats)
    "Entry": ".model", "Lorebook": ".model",
    "load": ".formats", "convert": ".formats",
    "read_chat": ".app.chats",
    # compiled books and the hit cache (more compile-level tools: lorescan.match)
    "compile_book": ".st.compiled", "CompiledBook": ".st.compiled", "load_compiled": ".st.compiled",
    "save_compiled": ".match.lsc", "ChatScan": ".match.cache",
    # errors and limits (every error: lorescan.errors)
    "LorebookError": ".errors", "FormatError": ".errors", "SettingsError": ".errors",
    "Limits": ".limits", "DEFAULT_LIMITS": ".limits",
}

# names the top level exported before it was cut to the ones above: still resolved, with a
# DeprecationWarning naming the subpackage to import them from
_MOVED = {
    "LoopRecord": "lorescan.st", "Placement": "lorescan.st", "DepthGroup": "lorescan.st",
    "TimedEffects": "lorescan.st", "EffectRecord": "lorescan.st",
    "SlotMessage": "lorescan.slot", "LogRecord": "lorescan.slot", "RequestNote": "lorescan.slot",
    "RoleMessage": "lorescan.slot", "Outcome": "lorescan.slot", "OUTCOMES": "lorescan.slot",
    "LogDetail": "lorescan.slot", "NoteCode": "lorescan.slot", "MatchedBy": "lorescan.slot",
    "Origin": "lorescan.model", "entry_from_fields": "lorescan.model",
    "load_data": "lorescan.formats", "Loss": "lorescan.formats", "LossReport": "lorescan.formats",
    "FormatName": "lorescan.formats", "book_from_entries": "lorescan.formats",
    "TiktokenCounter": "lorescan.tokens", "IncrementalCount": "lorescan.tokens", "count_words": "lorescan.tokens",
    "RegexKeyError": "lorescan.errors", "CompiledFormError": "lorescan.match.lsc",
}

__all__ = ["__version__", *_LAZY]

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing alone costs more than the rest
if TYPE_CHECKING:       # what type checkers and IDEs see: the same names, imported eagerly
    from .match._kernels import BACKEND
    from .app.chats import read_chat
    from .errors import FormatError, LorebookError, SettingsError
    from .formats import convert, load
    from .janitor import JanitorEngine, JanitorResult
    from .limits import DEFAULT_LIMITS, Limits
    from .match.cache import ChatScan
    from .st.compiled import CompiledBook, compile_book, load_compiled
    from .match.lsc import save_compiled
    from .model import Entry, Lorebook
    from .slot import BookSettings, SlotBook, SlotEngine, SlotResult
    from .st import (BookSource, Character, ChatMessage, Compat, Diagnostic, EntryId, STEngine, STResult,
                     STSettings)


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value          # later lookups skip this function
        return value
    home = _MOVED.get(name)
    if home is not None:                 # not cached: every use of the old spelling warns
        import warnings
        warnings.warn(f"lorescan.{name} moved: import it from {home} (from {home} import {name})",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module 'lorescan' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
