"""lorescan: an exact, fast lorebook (World Info) engine.

SillyTavern mode: :class:`STEngine` (exact World Info, with diagnostics). Lorebook-slot
mode: :class:`SlotEngine`. JanitorAI script lorebooks: :class:`JanitorEngine`. Files in any
supported format: :func:`load`, :func:`convert`;
chats as the command line reads them: :func:`read_chat`.
The rules each mode implements are written down in the repository's ``docs/`` folder.

The public names below are imported on first use (PEP 562), so ``import lorescan`` stays
cheap; ``from lorescan import STEngine`` loads what the engine needs and nothing more.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> the module (relative to this package) that defines it
_LAZY = {
    "BACKEND": ".match._kernels",
    # SillyTavern mode: the engine, its inputs and its results
    "STEngine": ".st", "STResult": ".st", "BookSource": ".st", "Character": ".st",
    "ChatMessage": ".st", "Diagnostic": ".st", "EntryId": ".st", "LoopRecord": ".st",
    "Placement": ".st", "DepthGroup": ".st",
    "TimedEffects": ".st", "EffectRecord": ".st",
    "STSettings": ".st", "Compat": ".st",
    # lorebook-slot mode
    "SlotEngine": ".slot", "SlotResult": ".slot", "SlotMessage": ".slot", "LogRecord": ".slot",
    # JanitorAI script lorebooks (the "Advanced Lorebook" v12 script, run exactly)
    "JanitorEngine": ".janitor", "JanitorResult": ".janitor",
    "RequestNote": ".slot", "RoleMessage": ".slot", "SlotBook": ".slot", "BookSettings": ".slot",
    "Outcome": ".slot", "OUTCOMES": ".slot", "LogDetail": ".slot", "NoteCode": ".slot", "MatchedBy": ".slot",
    # books: the model, files in any format
    "Entry": ".model", "Lorebook": ".model", "Origin": ".model", "entry_from_fields": ".model",
    "load": ".formats", "load_data": ".formats", "convert": ".formats", "Loss": ".formats",
    "LossReport": ".formats", "FormatName": ".formats", "book_from_entries": ".formats",
    "read_chat": ".app.chats",
    # compiled books and the hit cache (more compile-level tools: lorescan.match)
    "compile_book": ".st.compiled", "CompiledBook": ".st.compiled", "load_compiled": ".st.compiled",
    "save_compiled": ".match.lsc", "ChatScan": ".match.cache",
    # token counters (more: lorescan.tokens)
    "TiktokenCounter": ".tokens", "IncrementalCount": ".tokens", "count_words": ".tokens",
    # errors and limits
    "LorebookError": ".errors", "FormatError": ".errors", "SettingsError": ".errors",
    "RegexKeyError": ".errors", "CompiledFormError": ".match.lsc",
    "Limits": ".limits", "DEFAULT_LIMITS": ".limits",
}

__all__ = ["__version__", *_LAZY]

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing alone costs more than the rest
if TYPE_CHECKING:       # what type checkers and IDEs see: the same names, imported eagerly
    from .match._kernels import BACKEND
    from .app.chats import read_chat
    from .errors import FormatError, LorebookError, RegexKeyError, SettingsError
    from .formats import FormatName, Loss, LossReport, book_from_entries, convert, load, load_data
    from .limits import DEFAULT_LIMITS, Limits
    from .match.cache import ChatScan
    from .st.compiled import CompiledBook, compile_book, load_compiled
    from .match.lsc import CompiledFormError, save_compiled
    from .model import Entry, Lorebook, Origin, entry_from_fields
    from .janitor import JanitorEngine, JanitorResult
    from .slot import (OUTCOMES, BookSettings, LogDetail, LogRecord, MatchedBy, NoteCode, Outcome, RequestNote,
                       RoleMessage, SlotBook, SlotEngine, SlotMessage, SlotResult)
    from .st import (BookSource, Character, ChatMessage, Compat, DepthGroup, Diagnostic, EffectRecord, EntryId,
                     LoopRecord, Placement, STEngine, STResult, STSettings, TimedEffects)
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
