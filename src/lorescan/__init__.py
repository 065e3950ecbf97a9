"""lorescan: an exact, fast lorebook (World Info) engine.

SillyTavern mode: :class:`STEngine` (exact World Info, with diagnostics). Lorebook-slot
mode: :class:`SlotEngine`. Files in any supported format: :func:`load`, :func:`convert`.
"""
from ._kernels import BACKEND
from .compile import CompiledBook, compile_book
from .errors import FormatError, LorebookError, RegexKeyError, SettingsError
from .formats import convert, load
from .hitcache import ChatScan
from .lsc import load_compiled, save_compiled
from .model import Compat, Entry, Lorebook, MatchOptions, STSettings
from .scan import BookSource, Character, ChatMessage, Diagnostic, EntryId, STEngine, STResult
from .slot import BookSettings, SlotBook, SlotEngine, SlotResult
from .timed import TimedEffects
from .tokens import IncrementalCount, TiktokenCounter, count_words

__all__ = [
    "BACKEND",
    "STEngine", "STResult", "STSettings", "BookSource", "Character", "ChatMessage", "Diagnostic",
    "EntryId", "TimedEffects", "Compat",
    "SlotEngine", "SlotResult", "SlotBook", "BookSettings",
    "load", "convert", "Entry", "Lorebook",
    "compile_book", "CompiledBook", "MatchOptions", "ChatScan", "load_compiled", "save_compiled",
    "TiktokenCounter", "IncrementalCount", "count_words",
    "LorebookError", "FormatError", "SettingsError", "RegexKeyError",
]
