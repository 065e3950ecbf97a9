"""Reading the raw ``dynamicLore`` value with the script's own coercions (docs/janitor-mode.md#janitor-entries).

Nothing here rejects input: the script accepts any JSON, and so do we. A book that is not
an array has no entries; an entry that is not an object has no fields (it is always-on and
writes nothing); each field is read as the script reads it:

- ``keywords``, ``triggers``, ``nameBlock``, ``block`` (else ``Block``): only arrays count;
- the text gates take a single value as a one-item list (``null`` as none) and merge aliases;
- ``priority``, ``minMessages``, ``maxMessages``: any value whose ``Number()`` is finite;
- ``probability``: numbers, ``"40%"`` and ``"0.4"`` strings (``parseFloat``), clamped to 0..1;
- ``tag``, tags and texts: any truthy value, compared or appended as ``String(value)``;
- ``Shifts``: a non-empty array of sub-entries read the same way (their own ``Shifts`` unread).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..js.coerce import is_js_number, js_get, js_number_to_string, js_parse_float, js_string, js_to_number
from ..js.text import js_lower, js_trim
from ..model import js_truthy
from .terms import Term, compile_term

__all__ = ["Entry", "read_book", "parse_probability", "read_priority", "TermTable"]


class TermTable:
    """Distinct compiled terms of a book; an entry refers to them by id."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.terms: list[Term] = []
        self.raw: list[str] = []
        self._ids: dict[tuple[str, str, str], int] = {}

    def add(self, value: Any) -> int:
        term = compile_term(value, self.profile)
        ident = (term.kind, term.key, term.text)
        tid = self._ids.get(ident)
        if tid is None:
            tid = self._ids[ident] = len(self.terms)
            self.terms.append(term)
        return tid


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One entry (or shift) as the engine reads it. Term fields hold term ids."""
    index: int                       # position in the book (a shift: position in its parent)
    keywords: tuple[int, ...]
    has_keywords: bool               # a non-empty keyword array, even of blank terms
    tag: str | None                  # String(tag) when truthy
    triggers: tuple[str, ...]
    priority: float                  # 1..5, possibly fractional (the script then throws)
    min_messages: float
    max_messages: float
    count_gated: bool                # minMessages or maxMessages present and not null
    name_block: tuple[str, ...]      # normalised, empty names dropped
    any_of: tuple[int, ...]
    all_of: tuple[int, ...]
    none_of: tuple[int, ...]
    not_all: tuple[int, ...]
    any_tags: tuple[str, ...]
    all_tags: tuple[str, ...]
    none_tags: tuple[str, ...]
    not_all_tags: tuple[str, ...]
    probability: float
    personality: str | None
    scenario: str | None
    shifts: tuple["Entry", ...]
    raw: Any
    always_on: bool = False          # no keywords, no tag, no count bound: the script's isAlwaysOn
    bucket_ok: bool = True           # the priority names one of the five buckets (else pushing throws)
    p_text: str = "3"                # String(priority), as the log prints it


def _arr(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def _array(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_MISSING = object()      # undefined: Number(undefined) is NaN, Number(null) is 0


def _finite_or(value: Any, default: float) -> float:
    if value is _MISSING:
        return default
    n = js_to_number(value)
    return n if math.isfinite(n) else default


def read_priority(value: Any = _MISSING) -> float:
    """The script's ``prio``: 3 unless ``Number(value)`` is finite (``null`` is 0), then
    clamped to 1..5. Call without an argument for a missing field."""
    p = _finite_or(value, 3.0)
    p = min(5.0, max(1.0, p))
    return int(p) if p.is_integer() else p


def _clamp01(v: float) -> float:
    return 0.0 if not math.isfinite(v) else max(0.0, min(1.0, v))


def parse_probability(value: Any) -> float:
    """The script's ``parseProbability``: 1 for ``null`` and for unparsable strings."""
    if value is None:
        return 1.0
    if is_js_number(value):
        return _clamp01(float(value))
    s = js_lower(js_trim(js_string(value)))
    n = js_parse_float(s.replace("%", "", 1))
    if not math.isfinite(n):
        return 1.0
    return _clamp01(n / 100 if "%" in s else n)


def _text(value: Any) -> str | None:
    return js_string(value) if js_truthy(value) else None


def _tags(values: list[Any]) -> tuple[str, ...]:
    return tuple(js_string(v) for v in values)


def read_entry(raw: Any, index: int, table: TermTable, norm: Callable[[str], str], *, shifts: bool) -> Entry:
    e = raw if isinstance(raw, dict) else {}
    kw = e.get("keywords")
    keywords = _array(kw)
    req = e.get("requires")
    r = req if js_truthy(req) else {}
    block = e.get("block")
    blk = block if isinstance(block, list) else _array(e.get("Block"))
    terms = table.add
    any_of = _arr(e.get("requireAny")) + _arr(e.get("andAny")) + _arr(js_get(r, "any"))
    all_of = _arr(e.get("requireAll")) + _arr(e.get("andAll")) + _arr(js_get(r, "all"))
    none_of = _arr(e.get("requireNone")) + _arr(e.get("notAny")) + _arr(js_get(r, "none")) + blk
    sub: tuple[Entry, ...] = ()
    if shifts and isinstance(e.get("Shifts"), list):
        sub = tuple(read_entry(s, i, table, norm, shifts=False) for i, s in enumerate(e["Shifts"]))
    names = (norm("" if n is None else js_string(n)) for n in _array(e.get("nameBlock")))
    tag = js_string(e["tag"]) if js_truthy(e.get("tag")) else None
    count_gated = e.get("minMessages") is not None or e.get("maxMessages") is not None
    priority = read_priority(e.get("priority", _MISSING))
    return Entry(
        index=index,
        keywords=tuple(terms(k) for k in keywords),
        has_keywords=bool(keywords),
        tag=tag,
        triggers=_tags(_array(e.get("triggers"))),
        priority=priority,
        min_messages=_finite_or(e.get("minMessages", _MISSING), -math.inf),
        max_messages=_finite_or(e.get("maxMessages", _MISSING), math.inf),
        count_gated=count_gated,
        name_block=tuple(n for n in names if n),
        any_of=tuple(map(terms, any_of)),
        all_of=tuple(map(terms, all_of)),
        none_of=tuple(map(terms, none_of)),
        not_all=tuple(map(terms, _arr(e.get("notAll")))),
        any_tags=_tags(_arr(e.get("andAnyTags"))),
        all_tags=_tags(_arr(e.get("andAllTags"))),
        none_tags=_tags(_arr(e.get("notAnyTags"))),
        not_all_tags=_tags(_arr(e.get("notAllTags"))),
        probability=parse_probability(e.get("probability")),
        personality=_text(e.get("personality")),
        scenario=_text(e.get("scenario")),
        shifts=sub,
        raw=raw,
        always_on=not keywords and tag is None and not count_gated,
        bucket_ok=priority in (1, 2, 3, 4, 5),
        p_text=js_number_to_string(priority),
    )


def read_book(book: Any, table: TermTable, norm: Callable[[str], str]) -> tuple[Entry, ...]:
    """The entries of a ``dynamicLore`` value (none unless it is an array)."""
    if not isinstance(book, list):
        return ()
    return tuple(read_entry(raw, i, table, norm, shifts=True) for i, raw in enumerate(book))
