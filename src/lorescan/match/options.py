"""How plain keys match: the options CompiledKeys are built for (docs/sillytavern-mode.md#st-plain-keys)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SettingsError

__all__ = ["MatchOptions"]


def _check(cond: bool, problem: str, name: str) -> None:
    if not cond:
        raise SettingsError(problem, source="settings", field=name)


@dataclass(frozen=True, slots=True)
class MatchOptions:
    """How plain keys match (docs/sillytavern-mode.md#st-plain-keys and 16.1-16.4); part of what CompiledKeys are built for.

    ``case_sensitive`` / ``match_whole_words`` are the defaults for entries whose own
    override is null. ``word_chars``: ``"ascii"`` (SillyTavern) or ``"unicode"``;
    ``nospace_scripts``: treat CJK/Thai/... characters as boundaries (only with unicode);
    ``multiword``: ``"substring"`` (SillyTavern) or ``"bounded"``; ``blank_keys``:
    ``"match_all"`` (SillyTavern) or ``"ignore"``; ``expressions``: keys written ``&expr: ...``
    are boolean expressions over keys (docs/improved-profile.md#key-expressions), compiled as
    their atoms (match/expr.py); off, such a key is a plain key like any other.
    """

    case_sensitive: bool = False
    match_whole_words: bool = False
    word_chars: str = "ascii"
    nospace_scripts: bool = False
    multiword: str = "substring"
    blank_keys: str = "match_all"
    expressions: bool = False

    def __post_init__(self) -> None:
        _check(self.word_chars in ("ascii", "unicode"), f"bad value {self.word_chars!r}", "word_chars")
        _check(self.multiword in ("substring", "bounded"), f"bad value {self.multiword!r}", "multiword")
        _check(self.blank_keys in ("match_all", "ignore"), f"bad value {self.blank_keys!r}", "blank_keys")
        _check(isinstance(self.expressions, bool), f"bad value {self.expressions!r}", "expressions")

    @classmethod
    def sillytavern(cls, *, case_sensitive: bool = False, match_whole_words: bool = False) -> "MatchOptions":
        """SillyTavern's exact rules (the ``compat="sillytavern"`` profile)."""
        return cls(case_sensitive, match_whole_words, "ascii", False, "substring", "match_all")

    @classmethod
    def improved(cls, *, case_sensitive: bool = False, match_whole_words: bool = False) -> "MatchOptions":
        """lorescan's improved rules (docs/improved-profile.md#word-chars to #blank-keys)."""
        return cls(case_sensitive, match_whole_words, "unicode", True, "bounded", "ignore", True)
