"""Converting between JanitorAI script books and SillyTavern-shaped books (world JSON, CCv3),
with a report of what did not carry over (docs/janitor-format.md#janitor-to-st).

JanitorAI -> SillyTavern (:func:`janitor_to_st`): each janitor entry becomes the entry
:func:`lorescan.formats._janitor_map.to_st` describes (uid = its index; an entry with both a
personality and a scenario text becomes two, the second with uid ``len(book) + index``).
Emulated exactly, so not losses: keyword kinds (a word as a whole-word key, phrases and
``stem*`` as regex keys, a bare ``*`` as a regex matching every text), terms that can never
match (left out), one text gate, gates on always-on entries (a match-all key plus the
secondary keys), an entry no count, gate or tag gate can pass (disabled), ``WINDOW_DEPTH``
(``scanDepth``), priority buckets and book order (``order``: SillyTavern puts lower orders
first, the script puts higher buckets first), ``minMessages`` (``delay``, exact when
SillyTavern's chat length is the script's message count), probability. Reported: tags that
some entry triggers, triggers that reach a tagged entry, tag gates of triggered entries,
Shifts, a fractional priority (the script throws), a finite ``maxMessages``, a stem the
script matches oddly, two kinds of text gate in one entry, ``APPLY_LIMIT`` when more
entries than the limit can fire, phrases (once per book: the script can match one across two
messages, SillyTavern only inside one), and ``nameBlock``: it becomes an excluding character filter,
but the script compares normalised names by substring, SillyTavern the exact name.

SillyTavern -> JanitorAI (:func:`st_to_janitor`): keys to keywords (plain keys lower-cased; a
regex key only when it is one :func:`~lorescan.formats._janitor_map.term_key` writes),
secondary keys to the gate alias of their logic, constant to always-on, position 0 to
personality and 1 to scenario, ``delay`` to ``minMessages``, an excluding character filter
to ``nameBlock``, probability. The entries are written in the order SillyTavern places their
texts (order ascending), all in bucket 3, with ``APPLY_LIMIT`` 0 (no limit) and
``WINDOW_DEPTH`` the entries' scan depth. Reported: substring matching (SillyTavern's
default; the script matches whole words), case-sensitive keys, keys the script cannot match,
other regex keys, other positions, recursion, timed effects, groups, including filters, and
every other field with a value other than SillyTavern's default.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..js.text import js_lower, js_trim
from ..model import ST_ENTRY_DEFAULTS, Entry, Lorebook, SelectiveLogic, js_truthy
from ._janitor_map import (book_links, effective_window_depth, gates_of, is_always_on, key_term, keywords_of,
                           read_term, to_st)
from ._mapping import Loss, json_equal
from .sillytavern import book_from_entries

__all__ = ["janitor_to_st", "st_to_janitor", "entry_to_janitor", "apply_limit_of"]


def apply_limit_of(value: Any) -> float:
    """The script's limit: a number >= 1 (a fraction lets ``ceil`` entries through), else none (inf)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1:
        return value
    return float("inf")


def janitor_to_st(book: Lorebook, src: Any) -> tuple[Lorebook, list[Loss]]:
    """The closest SillyTavern book to a janitor book, and what it loses (see the module docstring).

    ``src``: the book's :class:`~lorescan.formats.janitor.JanitorSource`.
    """
    raws = src.entries if isinstance(src.entries, list) else []
    emitted, tagged = book_links(raws)
    depth = effective_window_depth(src.window_depth)
    entries: list[dict[str, Any]] = []
    seconds: list[dict[str, Any]] = []
    losses: list[Loss] = []
    can_fire = 0
    for i, raw in enumerate(raws):
        m = to_st(raw, i, emitted=emitted, tagged=tagged, window_depth=depth)
        entries.append({"uid": i, **m.primary})
        if m.scenario is not None:
            seconds.append({**m.scenario, "uid": len(raws) + i})
        losses += [Loss(i, f, w) for f, w in m.losses]
        if not m.primary.get("disable") and (m.primary["key"] or m.primary["constant"]):
            can_fire += 1
    if depth > 1 and any(_has_phrase(raw) for raw in raws):
        losses.append(Loss(None, "keywords", "the script joins the window's messages with a space, so a phrase "
                                             "can match across two messages; in SillyTavern it matches inside one"))
    limit = apply_limit_of(src.apply_limit if "APPLY_LIMIT" in src.written else 6)
    if can_fire > limit:
        losses.append(Loss(None, "APPLY_LIMIT", f"at most {limit:g} of the {can_fire} entries that can fire "
                                                "apply per turn; SillyTavern has no count limit"))
    st_book = book_from_entries(book.name, entries + seconds, source=book.source)
    return st_book, losses


def _has_phrase(raw: Any) -> bool:
    if not isinstance(raw, Mapping):
        return False
    terms = list(keywords_of(raw)) + [t for items in gates_of(raw).values() for _, t in items]
    return any(read_term(t).kind in ("phrase", "stem") and " " in read_term(t).text for t in terms)


_POSITIONS = {0: "personality", 1: "scenario"}
_LOGIC_ALIAS: dict[int, str] = {SelectiveLogic.AND_ANY: "requireAny", SelectiveLogic.NOT_ALL: "notAll",
                                SelectiveLogic.NOT_ANY: "requireNone", SelectiveLogic.AND_ALL: "requireAll"}
# Fields the conversion reads; every other field with a non-default value is reported.
_READ = frozenset({"uid", "key", "keysecondary", "selective", "selectiveLogic", "content", "constant", "position",
                   "order", "probability", "useProbability", "delay", "characterFilter", "comment", "disable",
                   "matchWholeWords", "caseSensitive", "scanDepth", "displayIndex", "addMemo", "automationId",
                   "triggers"})
_DEFAULTS = dict(ST_ENTRY_DEFAULTS)
_WHY = {"sticky": "timed effects", "cooldown": "timed effects", "group": "inclusion groups",
        "groupOverride": "inclusion groups", "groupWeight": "inclusion groups", "useGroupScoring": "inclusion groups",
        "excludeRecursion": "recursion", "preventRecursion": "recursion", "delayUntilRecursion": "recursion",
        "depth": "insertion depth", "role": "insertion depth", "ignoreBudget": "the token budget",
        "vectorized": "vector search", "outletName": "outlets"}


def _key_to_term(key: Any, entry: Entry, j: int, field: str) -> tuple[str | None, list[tuple[str, str]]]:
    if not isinstance(key, str):
        return None, [(f"{field}[{j}]", "not a string key")]
    if key.startswith("/") and key.rfind("/") > 0:
        term = key_term(key)
        if term is None:
            return None, [(f"{field}[{j}]", f"regex key {key[:40]!r}: the script matches only words, phrases "
                                            "and stem*")]
        return term, []
    term = js_lower(js_trim(key))
    if read_term(term).kind == "never":
        return None, [(f"{field}[{j}]", f"{key[:40]!r}: {read_term(term).why}, so the script never matches it")]
    return term, []


def entry_to_janitor(entry: Entry) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The janitor entry closest to SillyTavern entry ``entry``, and ``(field, why)`` losses."""
    f = entry.fields
    out: dict[str, Any] = {}
    losses: list[tuple[str, str]] = []
    plain = False
    if not entry.constant:
        words = []
        for j, k in enumerate(entry.key):
            term, lost = _key_to_term(k, entry, j, "key")
            losses += lost
            if term is not None:
                words.append(term)
                plain = plain or not (isinstance(k, str) and k.startswith("/"))
        out["keywords"] = words
        if not words:
            out["keywords"] = [""]             # no key: never fires, as in SillyTavern
        if entry.selective and entry.keysecondary:
            alias = _LOGIC_ALIAS.get(entry.selective_logic if isinstance(entry.selective_logic, int) else 0,
                                     "requireAny")
            terms = []
            for j, k in enumerate(entry.keysecondary):
                term, lost = _key_to_term(k, entry, j, "keysecondary")
                losses += lost
                if term is not None:
                    terms.append(term)
                    plain = plain or not (isinstance(k, str) and k.startswith("/"))
            out[alias] = terms
    if plain and f.get("matchWholeWords") is not True:
        losses.append(("matchWholeWords", "SillyTavern matches plain keys as substrings here; the script "
                                          "matches whole words"))
    if plain and f.get("caseSensitive") is True:
        losses.append(("caseSensitive", "the script matches without case"))
    position = f.get("position", 0)
    slot = _POSITIONS.get(position)
    if slot is None:
        slot = "scenario"
        losses.append(("position", f"position {position!r} has no JanitorAI place (written to the scenario)"))
    if entry.content:
        out[slot] = entry.content
    if f.get("useProbability", True) and isinstance(f.get("probability"), (int, float)) \
            and f.get("probability") != 100:
        out["probability"] = max(0, min(100, f["probability"])) / 100
    delay = f.get("delay")
    if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay > 0:
        out["minMessages"] = delay
    cf = f.get("characterFilter") or {}
    if isinstance(cf, Mapping) and cf.get("names"):
        if cf.get("isExclude"):
            out["nameBlock"] = list(cf["names"])
        else:
            losses.append(("characterFilter", "only excluding name filters have a JanitorAI counterpart"))
    if isinstance(cf, Mapping) and cf.get("tags"):
        losses.append(("characterFilter", "character tags have no JanitorAI counterpart"))
    for name, value in f.items():
        if name in _READ or name in entry.filled:
            continue
        if name in _DEFAULTS and (value is None or json_equal(value, _DEFAULTS[name])
                                  or (not js_truthy(value) and not js_truthy(_DEFAULTS[name]))):
            continue                           # the default, or off the way the default is off
        if name not in _DEFAULTS and value in (None, False, "", [], {}):
            continue
        losses.append((name, f"{_WHY.get(name, 'this field')} has no JanitorAI counterpart"))
    if entry.constant and not is_always_on(out):
        losses.append(("constant", "a constant entry with a count gate cannot be always-on"))
    return out, losses


def st_to_janitor(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """A SillyTavern-shaped book (any format's view) as janitor data, and what it loses."""
    visit = {e.uid: n for n, e in enumerate(book.entries)}

    def rank(e: Entry) -> tuple[float, int]:
        order = e.order if e.order == e.order else 100
        return (order, -visit[e.uid])          # SillyTavern: order ascending, ties later-visited first
    out: list[dict[str, Any]] = []
    losses: list[Loss] = []
    depths = set()
    for e in sorted(book.entries, key=rank):
        if e.disable:
            losses.append(Loss(e.uid, "disable", "a disabled entry is left out (JanitorAI has no off switch)"))
            continue
        raw, lost = entry_to_janitor(e)
        out.append(raw)
        losses += [Loss(e.uid, f, w) for f, w in lost]
        depths.add(e.fields.get("scanDepth"))
    known = {d for d in depths if isinstance(d, int) and not isinstance(d, bool)}
    depth = next(iter(known)) if len(known) == 1 and None not in depths else 2
    if len(depths - {depth}) and depths != {None}:
        losses.append(Loss(None, "scanDepth", f"entries scan different depths; WINDOW_DEPTH {depth} is used"))
    if _recursive(book):
        losses.append(Loss(None, "recursion", "an entry's content holds another entry's key: SillyTavern's "
                                              "recursive scan has no JanitorAI counterpart"))
    return {"dynamicLore": out, "APPLY_LIMIT": 0, "WINDOW_DEPTH": depth}, losses


def _recursive(book: Lorebook) -> bool:
    live = [e for e in book.entries if not e.disable]
    keys = [(e.uid, js_lower(k)) for e in live if not e.constant and not e.fields.get("excludeRecursion")
            for k in e.key if isinstance(k, str) and k.strip() and not k.startswith("/")]
    for e in live:
        if e.fields.get("preventRecursion") or not e.content:
            continue
        text = js_lower(e.content)
        if any(uid != e.uid and k in text for uid, k in keys):
            return True
    return False
