"""How a JanitorAI script entry reads (ADVANCED LORE BOOK SYSTEM v12, conformance README), as
JavaScript coerces its values, and what its terms become as SillyTavern keys.

Shared by the reader's SillyTavern-shaped view (:mod:`lorescan.formats.janitor`), the
conversion (:mod:`lorescan.formats.janitor_convert`) and lint (:mod:`lorescan.lint.janitor`).
The script matches every term on the normalised window (lower-cased, every character outside
``a-z 0-9 _ -`` and whitespace made a space, ``-``/``_`` runs a space, whitespace runs one
space, a space added at each end), as a whole word or phrase, or with a trailing ``*`` a
stem followed by ``[a-z]*``; terms themselves are only lower-cased and trimmed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..js.coerce import js_string
from ..js.coerce import js_to_number as js_number
from ..js.text import js_lower, js_trim
from ..limits import DEFAULT_LIMITS
from ..model import SelectiveLogic

__all__ = ["js_string", "js_number", "term_text", "Term", "read_term", "term_key", "gates_of", "is_always_on",
           "keywords_of", "priority_of", "TEXT_GATES", "TAG_GATES", "count_gate_values", "book_links",
           "effective_window_depth", "key_term", "to_st", "StMapping", "JANITOR_FIELDS"]

# The text-gate aliases (merged in this order by the script) and the tag gates.
TEXT_GATES: Mapping[str, tuple[str, ...]] = {
    "any": ("requireAny", "andAny", "requires.any"),
    "all": ("requireAll", "andAll", "requires.all"),
    "none": ("requireNone", "notAny", "requires.none", "block", "Block"),
    "nall": ("notAll",),
}
TAG_GATES = ("andAnyTags", "andAllTags", "notAnyTags", "notAllTags")
# Every entry field the script reads (README "Entries"); other fields are kept but ignored.
JANITOR_FIELDS = frozenset({"keywords", "tag", "triggers", "priority", "probability", "minMessages", "maxMessages",
                            "nameBlock", "requires", "personality", "scenario", "Shifts", *TAG_GATES,
                            *(a for aliases in TEXT_GATES.values() for a in aliases if "." not in a)})

_MATCHABLE = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*")


def term_text(term: Any) -> str:
    """What the script matches for one term: ``String(term).toLowerCase().trim()`` (``null`` is ``""``)."""
    return "" if term is None else js_trim(js_lower(js_string(term)))


@dataclass(frozen=True, slots=True)
class Term:
    """One term as the script reads it.

    ``kind``: ``"word"`` / ``"phrase"`` (whole words), ``"stem"`` (``stem*``), ``"always"``
    (a bare ``*``: every window), ``"never"`` (cannot match the normalised window: blank, or
    a character the normalisation removes, or inner double spaces), ``"odd"`` (a stem the
    script matches in a way no SillyTavern key reproduces: one ending in a space).
    """
    text: str
    kind: str
    why: str = ""


def read_term(term: Any) -> Term:
    """How the script matches one keyword or gate term."""
    t = term_text(term)
    if not t:
        return Term(t, "never", "blank (an empty term never matches)")
    if t.endswith("*"):
        stem = t[:-1]
        if not stem:
            return Term(t, "always", "a bare * matches every window")
        if _MATCHABLE.fullmatch(stem):
            return Term(stem, "stem")
        if stem.endswith(" ") and _MATCHABLE.fullmatch(stem[:-1]):
            return Term(stem, "odd", "a stem ending in a space matches the next word, whatever it is")
        return Term(t, "never", _never_why(stem))
    if _MATCHABLE.fullmatch(t):
        return Term(t, "phrase" if " " in t else "word")
    return Term(t, "never", _never_why(t))


def _never_why(t: str) -> str:
    if "  " in t or any(c in "\t\n\r\f\v" for c in t):
        return "inner double spaces (the window has single spaces)"
    if any(ord(c) > 127 for c in t):
        return "non-ASCII characters (the script drops them from the window)"
    if any(c in ".^$+?()[]{}|\\" for c in t):
        return "regex syntax (matched literally, and the window has no punctuation)"
    return "punctuation, '-' or '_' (the window has none: they become spaces)"


def term_key(term: Term) -> str | None:
    """The SillyTavern key matching what the script matches, or None (``never`` / ``odd``).

    A single word is a plain key (the entry gets whole-word matching); a phrase is a regex
    allowing any run of non-alphanumerics between its words (but not SillyTavern's message
    joiner: the script can match a phrase across two messages, SillyTavern cannot); ``stem*`` is
    ``/(?<![a-z0-9])stem[a-z]*(?![a-z0-9])/i`` (letters only after the stem, as the script's
    ``[a-z]*`` then a space); a bare ``*`` is a regex matching every text.
    """
    if term.kind == "word":
        return term.text
    if term.kind == "phrase":
        return "/(?<![a-z0-9])" + _GAP.join(term.text.split(" ")) + "(?![a-z0-9])/i"
    if term.kind == "stem":
        return "/(?<![a-z0-9])" + _GAP.join(term.text.split(" ")) + "[a-z]*(?![a-z0-9])/i"
    if term.kind == "always":
        return "/(?:)/"
    return None


# Between a phrase's words: what the script's normalisation turns into one space, except
# SillyTavern's message joiner marker (U+0001), so a phrase stays inside one message.
_GAP = "[^a-z0-9\\x01]+"
_KEY_BACK = re.compile(r"/\(\?<!\[a-z0-9\]\)((?:[a-z0-9]+" + re.escape(_GAP) + r")*[a-z0-9]+)(\[a-z\]\*)?"
                       r"\(\?!\[a-z0-9\]\)/i")


def key_term(key: str) -> str | None:
    """The janitor term a key written by :func:`term_key` came from (None: another key)."""
    if key == "/(?:)/":
        return "*"
    m = _KEY_BACK.fullmatch(key)
    if m is None:
        return None
    return m.group(1).replace(_GAP, " ") + ("*" if m.group(2) else "")


def _arr(value: Any) -> list[Any]:
    """The script's ``arr(x)``: a list as is, ``null``/absent as ``[]``, anything else as ``[x]``."""
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def gates_of(raw: Mapping[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """The merged text gates: ``{"any"|"all"|"none"|"nall": [(alias path, term), ...]}``."""
    requires = raw.get("requires")
    requires = requires if isinstance(requires, Mapping) else {}
    out: dict[str, list[tuple[str, Any]]] = {}
    for kind, aliases in TEXT_GATES.items():
        items: list[tuple[str, Any]] = []
        for alias in aliases:
            if alias in ("block", "Block"):
                continue
            value = requires.get(alias[9:]) if alias.startswith("requires.") else raw.get(alias)
            if isinstance(value, list):
                items += [(f"{alias}[{j}]", t) for j, t in enumerate(value)]
            elif value is not None:
                items.append((alias, value))
        if kind == "none":                 # block, else Block, only as arrays
            for alias in ("block", "Block"):
                if isinstance(raw.get(alias), list):
                    items += [(f"{alias}[{j}]", t) for j, t in enumerate(raw[alias])]
                    break
        out[kind] = items
    return out


def keywords_of(raw: Mapping[str, Any]) -> list[Any]:
    """The keyword terms the script reads (only an array counts)."""
    kw = raw.get("keywords")
    return kw if isinstance(kw, list) else []


def _present(raw: Mapping[str, Any], name: str) -> bool:
    return raw.get(name) is not None             # `e.x != null`


def is_always_on(raw: Mapping[str, Any]) -> bool:
    """No keywords (after the script's normalisation), no tag, no count gate."""
    return not keywords_of(raw) and not _truthy(raw.get("tag")) and not _present(raw, "minMessages") \
        and not _present(raw, "maxMessages")


def _truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return True


def priority_of(raw: Mapping[str, Any]) -> float:
    """The script's ``prio(e)``: a finite ``+priority`` clamped to 1..5, else 3 (a fraction stays)."""
    p = js_number(raw.get("priority")) if "priority" in raw else math.nan
    if not math.isfinite(p):
        return 3
    return min(5.0, max(1.0, p))


def count_gate_values(raw: Mapping[str, Any]) -> tuple[float, float]:
    """``(getMin, getMax)``: the inclusive message-count bounds (±inf when unbounded)."""
    lo = js_number(raw.get("minMessages")) if "minMessages" in raw else math.nan
    hi = js_number(raw.get("maxMessages")) if "maxMessages" in raw else math.nan
    return (lo if math.isfinite(lo) else -math.inf), (hi if math.isfinite(hi) else math.inf)


_MAX_KEY = DEFAULT_LIMITS.max_regex_length        # a longer regex key is refused by every reader


def _fits(term: Term) -> Term:
    """``term``, or an ``odd`` one when its SillyTavern key would be over lorescan's regex limit."""
    key = term_key(term)
    if key is not None and len(key) > (_MAX_KEY if key.startswith("/") else DEFAULT_LIMITS.max_key_length):
        return Term(term.text, "odd", f"its SillyTavern key would have {len(key)} characters, above "
                                      "lorescan's limit")
    return term


def _gate_kind_terms(items: list[tuple[str, Any]]) -> tuple[list[tuple[str, Term]], list[tuple[str, Term]]]:
    read = [(path, _fits(read_term(t))) for path, t in items]
    return read, [(p, t) for p, t in read if t.kind == "odd"]


@dataclass
class StMapping:
    """One janitor entry as SillyTavern fields: ``primary`` (its personality text, else its
    scenario text), ``scenario`` (a second entry for the scenario text when it has both),
    and ``losses`` as ``(field, why)``."""
    primary: dict[str, Any]
    scenario: dict[str, Any] | None
    losses: list[tuple[str, str]]


_LOGIC = {"any": SelectiveLogic.AND_ANY, "nall": SelectiveLogic.NOT_ALL, "none": SelectiveLogic.NOT_ANY,
          "all": SelectiveLogic.AND_ALL}
_KIND_WORDS = {"any": "any-of", "all": "all-of", "none": "none-of", "nall": "not-all"}


def to_st(raw: Any, index: int, *, emitted: frozenset[str] = frozenset(), tagged: frozenset[str] = frozenset(),
          window_depth: int = 5) -> StMapping:
    """The SillyTavern entry (or two) closest to janitor entry ``raw`` at ``index``.

    ``emitted``: tags some entry of the book triggers (as strings); ``tagged``: tags some
    entry carries. A tag, trigger or tag gate is a loss only where such a link exists.
    """
    raw = raw if isinstance(raw, Mapping) else {}
    losses: list[tuple[str, str]] = []
    out: dict[str, Any] = {"comment": f"dynamicLore[{index}]"}
    tag = raw.get("tag")
    if _truthy(tag):
        out["comment"] += f" {js_string(tag)}"
    disable = False
    keys: list[str] = []
    for j, t in enumerate(keywords_of(raw)):
        term = _fits(read_term(t))
        key = term_key(term)
        if key is not None:
            keys.append(key)
        elif term.kind == "odd":
            losses.append((f"keywords[{j}]", f"{term.text!r}: {term.why}; no SillyTavern key matches the same"))
    constant = is_always_on(raw)
    kinds: dict[str, list[str]] = {}
    for kind, items in gates_of(raw).items():
        if not items:
            continue
        terms, odd = _gate_kind_terms(items)
        losses += [(p, f"{t.text!r}: {t.why}; no SillyTavern key matches the same") for p, t in odd]
        never = [t for _, t in terms if t.kind == "never"]
        always = [t for _, t in terms if t.kind == "always"]
        usable = [term_key(t) for _, t in terms if t.kind not in ("never", "always", "odd")]
        if kind == "any":
            if always:
                continue                           # the gate always passes
            if not usable and not odd:
                disable = True                     # no term can match: the gate always fails
        elif kind == "all":
            if never:
                disable = True
        elif kind == "none":
            if always:
                disable = True
        elif kind == "nall":
            if never:
                continue                           # never all present: never fails
            if not usable and not odd:
                disable = True                     # only always-present terms: always fails
        if usable:
            kinds[kind] = [k for k in usable if k is not None]
    if len(kinds) > 1:
        names = " + ".join(_KIND_WORDS[k] for k in kinds)
        losses.append(("gates", f"{names} gates together: SillyTavern has one secondary list with one logic "
                                f"(the {_KIND_WORDS[next(iter(kinds))]} gate was kept)"))
    if kinds:
        kind, secondary = next(iter(kinds.items()))
        out["keysecondary"], out["selective"], out["selectiveLogic"] = secondary, True, int(_LOGIC[kind])
        if constant:                               # a constant entry skips secondary keys: match every text
            constant, keys = False, ["/(?:)/"]
    for name in TAG_GATES:
        values = [js_string(v) for v in _arr(raw.get(name))]
        if not values:
            continue
        if name in ("andAnyTags", "andAllTags"):
            disable = True                         # no tags exist in the direct pass: it fails there
        if _truthy(tag) and js_string(tag) in emitted:
            losses.append((name, "tag gates apply to triggered entries, and triggers have no SillyTavern "
                                 "counterpart"))
    if _truthy(tag) and js_string(tag) in emitted:
        losses.append(("tag", "another entry triggers this tag; SillyTavern has no triggers"))
    trg = raw.get("triggers")
    if isinstance(trg, list) and any(js_string(t) in tagged for t in trg):
        losses.append(("triggers", "triggers an entry by its tag; SillyTavern has no triggers"))
    losses += [(k, "not a field the script reads; SillyTavern has no place for it") for k in raw
               if k not in JANITOR_FIELDS]
    shifts = raw.get("Shifts")
    if isinstance(shifts, list) and shifts:
        losses.append(("Shifts", f"{len(shifts)} shift(s): sub-entries applied after their parent have no "
                                 "SillyTavern counterpart"))
    p = priority_of(raw)
    if p != int(p):
        losses.append(("priority", f"priority {p:g} makes the script throw when the entry is accepted"))
    out["order"] = int((5 - int(p)) * 10000 + index)
    prob = _probability(raw.get("probability"))
    if prob < 1:
        out["probability"], out["useProbability"] = prob * 100, True
    lo, hi = count_gate_values(raw)
    if lo > 2**53:
        disable = True                             # no message count reaches it
    elif lo > 0:
        out["delay"] = math.ceil(lo)
    if hi < math.inf:
        if hi < max(lo, 0) or (hi < 1 and "/(?:)/" not in keys):
            disable = True                         # no message count passes (or only 0, with nothing to match)
        else:
            losses.append(("maxMessages", f"fires only up to {hi:g} messages; SillyTavern has no upper bound"))
    names = raw.get("nameBlock")
    if isinstance(names, list) and names:
        out["characterFilter"] = {"isExclude": True, "names": [js_string(n) for n in names if n is not None],
                                  "tags": []}
        losses.append(("nameBlock", "the script also blocks names that contain a listed name (normalised); "
                                    "SillyTavern's character filter matches the exact name"))
    if any(read_term(k).kind == "word" for k in keywords_of(raw)) or any(
            not k.startswith("/") for ks in kinds.values() for k in ks):
        out["matchWholeWords"], out["caseSensitive"] = True, False
    out["key"], out["constant"], out["scanDepth"] = keys, constant, window_depth
    if disable:
        out["disable"] = True
    personality = js_string(raw["personality"]) if _truthy(raw.get("personality")) else ""
    scenario = js_string(raw["scenario"]) if _truthy(raw.get("scenario")) else ""
    second = None
    if personality and scenario:
        second = {**out, "content": scenario, "position": 1, "comment": out["comment"] + " (scenario)"}
    out["content"], out["position"] = (personality, 0) if personality else (scenario, 1)
    return StMapping(out, second, losses)


def _probability(value: Any) -> float:
    """The script's ``parseProbability``."""
    if value is None:
        return 1.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _clamp01(float(value))
    text = js_lower(js_trim(js_string(value)))
    m = re.match(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", js_trim(text.replace("%", "", 1)))
    if m is None:
        return 1.0
    n = float(m.group().replace("Infinity", "inf"))
    if not math.isfinite(n):
        return 1.0
    return _clamp01(n / 100 if "%" in text else n)


def _clamp01(v: float) -> float:
    if not math.isfinite(v):
        return 0.0
    return max(0.0, min(1.0, v))


def effective_window_depth(value: Any) -> int:
    """The script's window: ``parseInt(value, 10)``, 5 when NaN, clamped to 1..20 (None: 5)."""
    if value is None:
        return 5
    if (isinstance(value, (int, float)) and not isinstance(value, bool)):
        n = math.trunc(value) if math.isfinite(value) else math.nan
    else:
        m = re.match(r"\s*([+-]?\d+)", js_string(value))
        n = int(m.group(1)) if m else math.nan
    if n != n:
        return 5
    return int(min(20, max(1, n)))


def book_links(value: Any) -> tuple[frozenset[str], frozenset[str]]:
    """``(emitted, tagged)``: the tags entries (and shifts) trigger, and the tags entries carry."""
    emitted: set[str] = set()
    tagged: set[str] = set()
    for raw in value if isinstance(value, list) else ():
        if not isinstance(raw, Mapping):
            continue
        tag = raw.get("tag")
        if tag not in (None, False, "", 0):
            tagged.add(js_string(tag))
        items = [raw]
        if isinstance(raw.get("Shifts"), list):
            items += [s for s in raw["Shifts"] if isinstance(s, Mapping)]
        for item in items:
            if isinstance(item.get("triggers"), list):
                emitted.update(js_string(t) for t in item["triggers"])
    return frozenset(emitted), frozenset(tagged)
