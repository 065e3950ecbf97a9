"""Lorebook-slot mode (SPEC Part B): the platform model of one pooled slot of role-tagged
messages, with book settings, decorators, priority vs order and a per-chat state."""
from .decorators import DecoratorLine, Decorators, parse_decorators
from .engine import OUTCOMES, ChatMessage, LogRecord, SlotEngine, SlotMessage, SlotResult
from .pool import BookSettings, SlotBook, SlotEntry, slot_entry_from
from .roll import passes_roll, roll_percent
from .state import STATE_VERSION, empty_state

__all__ = [
    "SlotEngine", "SlotResult", "SlotMessage", "LogRecord", "ChatMessage", "OUTCOMES",
    "SlotBook", "BookSettings", "SlotEntry", "slot_entry_from",
    "Decorators", "DecoratorLine", "parse_decorators",
    "roll_percent", "passes_roll", "STATE_VERSION", "empty_state",
]
