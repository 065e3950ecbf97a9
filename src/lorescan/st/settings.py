"""SillyTavern mode's settings: the global World Info settings (:class:`STSettings`) and the
switches between SillyTavern's behaviour and lorescan's improvements (:class:`Compat`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from ..errors import SettingsError
from ..match.options import MatchOptions

__all__ = ["STSettings", "Compat", "InsertionStrategy", "GENERATION_TRIGGERS", "Trigger"]

InsertionStrategy = Literal["evenly", "character_first", "global_first"]
"""How global and character books interleave (docs/sillytavern-mode.md#st-order)."""
_STRATEGIES: tuple[InsertionStrategy, ...] = ("evenly", "character_first", "global_first")

Trigger = Literal["normal", "continue", "impersonate", "swipe", "regenerate", "quiet"]
"""Generation types an entry's ``triggers`` may name (any other is scanned as ``normal``)."""
GENERATION_TRIGGERS: tuple[Trigger, ...] = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")


def _require(cond: bool, problem: str, name: str) -> None:
    if not cond:
        raise SettingsError(problem, source="settings", field=name)


@dataclass(frozen=True, slots=True)
class STSettings:
    """Global World Info settings of SillyTavern mode (docs/sillytavern-mode.md#st-settings), with the code defaults.

    Names follow the conformance vectors. ``scan_depth`` above 1000 is accepted and capped
    at 1000 by the scan, as in SillyTavern. ``stable_placement`` is lorescan's cache-stable
    placement (docs/improved-profile.md#cache-stable): off by default, ignored by the
    SillyTavern profile (``compat="sillytavern"``).

    Raises:
        SettingsError: a value outside the ranges SillyTavern's UI allows, or of the wrong type.
    """

    scan_depth: int = 2
    budget_percent: float = 25
    budget_cap: int = 0
    min_activations: int = 0
    min_activations_depth_max: int = 0
    max_recursion_steps: int = 0
    recursive: bool = False
    case_sensitive: bool = False
    match_whole_words: bool = False
    use_group_scoring: bool = False
    include_names: bool = True
    insertion_strategy: str = "character_first"
    overflow_alert: bool = False
    stable_placement: bool = False

    def __post_init__(self) -> None:
        for name in ("scan_depth", "budget_cap", "min_activations", "min_activations_depth_max",
                     "max_recursion_steps"):
            v = getattr(self, name)
            _require(isinstance(v, int) and not isinstance(v, bool), f"expected an integer, got {v!r}", name)
            _require(0 <= v <= 10_000_000, f"out of range: {v!r:.40}", name)
        v = self.budget_percent
        _require(isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, int) or math.isfinite(v)),
                 f"expected a finite number, got {v!r:.40}", "budget_percent")
        _require(0 <= v <= 100, f"must be between 0 and 100, got {v!r:.40}", "budget_percent")
        for name in ("recursive", "case_sensitive", "match_whole_words", "use_group_scoring",
                     "include_names", "overflow_alert", "stable_placement"):
            _require(isinstance(getattr(self, name), bool), f"expected true/false, got {getattr(self, name)!r}", name)
        _require(self.insertion_strategy in _STRATEGIES,
                 f"must be one of {', '.join(_STRATEGIES)}, got {self.insertion_strategy!r}",
                 "insertion_strategy")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "STSettings":
        """Settings from a mapping with the conformance names.

        Args:
            data: setting name -> value; missing names keep their defaults.

        Raises:
            SettingsError: ``data`` is not a mapping, names an unknown setting, or holds a bad value.
        """
        if not isinstance(data, Mapping):
            raise SettingsError(f"settings must be an object, got {type(data).__name__}", source="settings")
        known = set(cls.__dataclass_fields__)
        unknown = [k for k in data if k not in known]
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(map(str, unknown))}", source="settings",
                                field=str(unknown[0]))
        return cls(**dict(data))


@dataclass(frozen=True, slots=True)
class Compat:
    """The improvements of docs/improved-profile.md, each an independent switch (docs/improved-profile.md#profiles).

    :meth:`sillytavern` sets every switch to SillyTavern's behaviour (the conformance
    profile); :meth:`improved` to lorescan's.

    Args:
        word_chars, nospace_scripts, multiword, blank_keys: the matching rules (see
            :class:`~lorescan.match.options.MatchOptions`).
        group_bookkeeping: ``"sillytavern"`` (remove-the-last-entry quirk, whole-string
            "already activated" test) or ``"fixed"``.
        decorators: ``"sillytavern"`` or ``"strict_lines"``.
        budget_accounting: ``"recursion_text"`` (SillyTavern) or ``"all_admitted"``.
        key_expressions: keys written ``&expr: ...`` are boolean key expressions
            (docs/improved-profile.md#key-expressions); False (SillyTavern): plain keys.

    Raises:
        SettingsError: a switch set to a value it does not have.
    """

    word_chars: str = "ascii"
    nospace_scripts: bool = False
    multiword: str = "substring"
    blank_keys: str = "match_all"
    group_bookkeeping: str = "sillytavern"
    decorators: str = "sillytavern"
    budget_accounting: str = "recursion_text"
    key_expressions: bool = False

    def __post_init__(self) -> None:
        MatchOptions(False, False, self.word_chars, self.nospace_scripts, self.multiword, self.blank_keys,
                     self.key_expressions)
        _require(self.group_bookkeeping in ("sillytavern", "fixed"), f"bad value {self.group_bookkeeping!r}",
                 "group_bookkeeping")
        _require(self.decorators in ("sillytavern", "strict_lines"), f"bad value {self.decorators!r}",
                 "decorators")
        _require(self.budget_accounting in ("recursion_text", "all_admitted"),
                 f"bad value {self.budget_accounting!r}", "budget_accounting")

    @classmethod
    def sillytavern(cls) -> "Compat":
        """Returns: every switch at SillyTavern's behaviour, quirks included."""
        return cls()

    @classmethod
    def improved(cls) -> "Compat":
        """Returns: every switch at lorescan's improved behaviour."""
        return cls("unicode", True, "bounded", "ignore", "fixed", "strict_lines", "all_admitted", True)

    @classmethod
    def of(cls, value: "Compat | str") -> "Compat":
        """A Compat from a profile name or itself.

        Args:
            value: ``"sillytavern"``, ``"improved"`` or a Compat.

        Raises:
            SettingsError: any other value.
        """
        if isinstance(value, Compat):
            return value
        if value == "sillytavern":
            return cls.sillytavern()
        if value == "improved":
            return cls.improved()
        raise SettingsError(f"compat must be 'sillytavern', 'improved' or a Compat, got {value!r}",
                            source="engine", field="compat")

    def match_options(self, *, case_sensitive: bool = False, match_whole_words: bool = False) -> MatchOptions:
        """The matching rules of this profile.

        Args:
            case_sensitive, match_whole_words: the defaults for entries whose own override is null.
        """
        return MatchOptions(case_sensitive, match_whole_words, self.word_chars, self.nospace_scripts,
                            self.multiword, self.blank_keys, self.key_expressions)
