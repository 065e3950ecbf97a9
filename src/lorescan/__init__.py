"""lorescan: an exact, fast lorebook (World Info) engine."""
from ._kernels import BACKEND
from .errors import FormatError, LorebookError, RegexKeyError, SettingsError
from .model import Entry, Lorebook, MatchOptions, STSettings

__all__ = [
    "BACKEND",
    "Entry", "Lorebook", "MatchOptions", "STSettings",
    "LorebookError", "FormatError", "SettingsError", "RegexKeyError",
]
