"""lorescan: an exact, fast lorebook (World Info) engine."""
from .errors import FormatError, LorebookError, RegexKeyError, SettingsError
from .model import Entry, Lorebook, MatchOptions, STSettings

__all__ = [
    "Entry", "Lorebook", "MatchOptions", "STSettings",
    "LorebookError", "FormatError", "SettingsError", "RegexKeyError",
]
