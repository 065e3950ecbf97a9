"""Key plans of lorebook-slot mode (docs/slot-mode.md#slot-keys): how each key of a pool entry
reads under the engine's ``regex_keys`` rule, which keys the shared matcher answers and which
can never match, and the :class:`~lorescan.match.keys.KeySpec` the matcher compiles for the entry.

Built once per engine, one :class:`Plan` per pool entry; a request only reads them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..js.regex import JSRegexError, RegexTooComplex, regex_key
from ..js.text import js_trim
from ..limits import DEFAULT_LIMITS
from ..match.expr import ExprLayout
from ..match.fuzzy import entry_threshold, fuzzy_field
from ..match.keys import KeySpec
from ..model import Lorebook, SelectiveLogic
from .pool import SlotEntry

__all__ = ["RegexKeys", "KeyRef", "Plan", "plan_keys", "regex_kind", "never_reason", "fuzzy_threshold"]

RegexKeys = Literal["form", "strict", "auto"]
_NO_LITERAL: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KeyRef:
    """One key of an entry's plan: answered by the shared matcher, or never matching."""

    text: str
    how: Literal["matcher", "never"]
    slot: int = -1          # index in the entry's KeySpec.primary / KeySpec.secondary (the matcher's keys)
    primary: bool = False   # slot indexes ``KeySpec.primary`` (else ``KeySpec.secondary``)
    literal: bool = False   # in KeySpec.literal: plain text even in /pattern/flags form


@dataclass(frozen=True, slots=True)
class Plan:
    """An entry's keys, grouped as the gates read them (docs/slot-mode.md#slot-keys)."""

    primary: tuple[KeyRef, ...]
    secondary: tuple[KeyRef, ...]
    additional: tuple[tuple[KeyRef, ...], ...]
    exclude: tuple[KeyRef, ...]
    exclude_all: tuple[tuple[KeyRef, ...], ...]
    uses_matcher: bool
    logic: SelectiveLogic   # how ``secondary`` combines (docs/sillytavern-mode.md#st-key-logic)
    never_note: str         # names the primary keys that can never match, for the log
    # where the key expressions find their atoms (match/expr.py; None: no expression, or the
    # engine's match options read ``&expr:`` keys as plain keys)
    exprs: ExprLayout | None = None


def regex_kind(key: str) -> str:
    """How ``key`` reads: ``"regex"`` (a usable ``/pattern/flags`` key), ``"invalid"`` (in
    that form, docs/sillytavern-mode.md#st-regex-keys conditions 1 and 2, but not a usable ECMAScript regex) or
    ``"plain"`` (not in that form: ``/usr/bin``, ``a/b/``)."""
    k = js_trim(key)
    try:
        rx = regex_key(k, max_length=DEFAULT_LIMITS.max_regex_length, max_nesting=DEFAULT_LIMITS.max_regex_nesting,
                       max_expansion=DEFAULT_LIMITS.max_regex_expansion, invalid="raise")
    except RegexTooComplex:     # a regex all the same: compile_book applies the engine's limits
        return "regex"
    except JSRegexError:        # in the form, not a valid regex
        return "invalid"
    return "plain" if rx is None else "regex"


def _never_note(primary: Sequence[KeyRef], strict: bool) -> str:
    never = [ref.text for ref in primary if ref.how == "never"]
    if not never or len(never) == len(primary):     # all of them: the log says so on its own
        return ""
    why = "not a valid /pattern/flags regex" + (" (regex_keys='strict', use_regex true)" if strict else "")
    return f" ({', '.join(map(repr, never))}: {why}, never matches)"


def never_reason(refs: Sequence[KeyRef], mode: RegexKeys) -> str:
    """The log reason of an entry none of whose primary keys ``refs`` can ever match."""
    if mode == "strict" and any(regex_kind(ref.text) == "plain" for ref in refs):
        return "use_regex is true and no key is a valid /pattern/flags regex (regex_keys='strict')"
    bad = ", ".join(repr(ref.text) for ref in refs)
    return f"no usable key: {bad} {'is' if len(refs) == 1 else 'are'} in /pattern/flags form but not a valid regex"


def plan_keys(e: SlotEntry, mode: RegexKeys) -> tuple[Plan, KeySpec]:
    """The entry's key plan, and the key spec the matcher compiles for it (uid: pool index;
    the plan's ``slot`` values index its key lists)."""
    primary_keys: list[str] = []
    secondary_keys: list[str] = []
    literal: set[str] = set()
    strict = mode == "strict" and e.use_regex is not None

    def ref(text: str, target: list[str]) -> KeyRef:
        if mode == "auto" or "{{" in text:
            how = "matcher"                 # SillyTavern auto-detection (macros: decided after substitution)
        elif not strict:                    # docs/slot-mode.md#slot-keys [decision, revised]: the key's form decides
            how = "never" if regex_kind(text) == "invalid" else "matcher"
        else:
            kind = regex_kind(text)
            if e.use_regex:                 # CCv3: every key is /pattern/flags; an invalid one never matches
                how = "matcher" if kind == "regex" else "never"
            else:                           # CCv3 use_regex=false: keys are literal even when /…/-shaped
                how = "literal" if kind == "regex" else "matcher"
        if how == "never":
            return KeyRef(text, "never")
        target.append(text)
        if how == "literal":
            literal.add(text)
        return KeyRef(text, "matcher", len(target) - 1, target is primary_keys, how == "literal")

    d = e.decorators
    primary = tuple(ref(k, primary_keys) for k in e.keys)
    # Secondary keys apply only to selective entries; the strict CCv3 reading ignores them
    # when use_regex is true.
    secondary = tuple(ref(k, secondary_keys) for k in e.secondary_keys) if (
        e.selective and not (strict and e.use_regex)) else ()
    additional = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.additional_keys)
    exclude = tuple(ref(k, secondary_keys) for k in d.exclude_keys)
    exclude_all = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.exclude_keys_all)
    plan = Plan(primary, secondary, additional, exclude, exclude_all,
                uses_matcher=bool(primary_keys or secondary_keys),
                logic=SelectiveLogic(e.selective_logic or SelectiveLogic.AND_ANY),
                never_note=_never_note(primary, strict))
    spec = KeySpec(tuple(primary_keys), tuple(secondary_keys), e.content, e.case_sensitive, e.whole_words,
                   uid=e.pool_index, literal=frozenset(literal) if literal else _NO_LITERAL)
    return plan, spec


class _FuzzyProbe(NamedTuple):
    # What match.fuzzy.entry_threshold reads of an entry.
    content: str
    fields: Mapping[str, Any]
    uid: int


def fuzzy_threshold(e: SlotEntry, entry: Any, book: Lorebook) -> float | None:
    """The fuzzy threshold of pool entry ``e`` (None: exact keys): its ``@@fuzzy`` decorator,
    else its ``extensions.lorescan_fuzzy``, else its book's default (match/fuzzy.py). A content
    that still starts with ``@@`` after the slot decorators are read may hold SillyTavern's
    ``@@fuzzy`` line, which the compiler has always honoured: entry_threshold reads it here."""
    ext = fuzzy_field(e.decorators.fuzzy, entry, book)
    if not ext and not e.content.startswith("@@"):
        return None                     # the common case: no fuzzy setting anywhere
    return entry_threshold(_FuzzyProbe(e.content, ext, e.pool_index), None, "<slot pool>")
