"""Lorebook-slot mode (docs/slot-mode.md): the platform model of one pooled slot of role-tagged
messages, with book settings, decorators, priority vs order and a per-chat state.

One module per stage, as in ``st/``: ``pool`` (book settings, entries), ``decorators``,
``plans`` (keys and the matcher's key specs), ``gates`` (gates and passes), ``budget``,
``explain`` (log records and explanations), ``result`` (inputs and results), ``state``; ``engine``
runs a request through them, and ``spans`` explains a finished one."""
from .decorators import DecoratorLine, Decorators, parse_decorators
from .engine import SlotEngine
from .plans import RegexKeys
from .result import (LOG_DETAILS, MATCHED_BY, NOTE_CODES, OUTCOMES, LogDetail, LogRecord, MatchedBy, NoteCode, Outcome,
                     RequestNote, RoleMessage, SlotMessage, SlotResult)
from .pool import DEFAULT_TOKEN_BUDGET, BookSettings, SlotBook, SlotEntry, slot_entry_from
from .roll import passes_roll, roll_percent
from .state import STATE_VERSION, empty_state

__all__ = [
    "SlotEngine", "SlotResult", "SlotMessage", "LogRecord", "RequestNote", "RoleMessage", "Outcome", "OUTCOMES", "MatchedBy", "MATCHED_BY",
    "LogDetail", "LOG_DETAILS", "NoteCode", "NOTE_CODES", "RegexKeys",
    "SlotBook", "BookSettings", "SlotEntry", "slot_entry_from", "DEFAULT_TOKEN_BUDGET",
    "Decorators", "DecoratorLine", "parse_decorators",
    "roll_percent", "passes_roll", "STATE_VERSION", "empty_state",
]
