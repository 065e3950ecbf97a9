"""Checks of JanitorAI script books (``LS8xx``), read the way "ADVANCED LORE BOOK SYSTEM v12"
reads them (docs/janitor-format.md, the conformance README's quirks).

Terms that can never match (LS801-LS804), entries that can never fire (LS810-LS813), the
fractional priority that makes the script throw (LS820), tags and triggers that link nothing
or only backwards (LS830-LS832), entries ``APPLY_LIMIT`` always hides (LS840) and
near-duplicate keywords (LS850). Fields are the janitor entry's own names (``keywords[2]``,
``Shifts[0].requireAny[1]``, ``priority``); the entry is its index in ``dynamicLore``.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Mapping, Sequence

from ..formats._janitor_map import (TAG_GATES, _probability, count_gate_values, gates_of, is_always_on,
                                    js_string, keywords_of, priority_of, read_term, term_text)
from ..formats.janitor import janitor_source
from ..formats.janitor_convert import apply_limit_of
from ..model import Lorebook
from .book import NEAR_MIN_LENGTH, _forms_of_each_other, _similar_pairs

__all__ = ["check_janitor"]

Raw = tuple["int | None", str, "str | None", str, str]
_REGEX_CHARS = frozenset("^$()[]{}|\\")
_REGEX_PAIRS = (".*", ".+", ".?", "\\b", "\\w", "\\s", "\\d")


def _never_code(text: str) -> tuple[str, str]:
    """The code and a clause for a term the normalised window can never hold."""
    body = text[:-1] if text.endswith("*") else text
    if any(c in _REGEX_CHARS for c in body) or "*" in body or any(p in body for p in _REGEX_PAIRS):
        return "LS804", "regex syntax is matched literally, and the window has no such characters"
    if any(ord(c) > 127 for c in text):
        return "LS801", "the script turns every non-ASCII character of the chat into a space"
    if "  " in body or any(c.isspace() and c != " " for c in body):
        return "LS803", "the window has single spaces only (runs of whitespace become one space)"
    return "LS802", "the window has no punctuation ('-' and '_' become spaces, the rest too)"


_SUGGEST = {
    "LS801": "spell the keyword in ASCII letters, or use profile=\"improved\"",
    "LS802": "write the keyword with spaces where the punctuation was (\"half elf\")",
    "LS803": "use single spaces between the words",
    "LS804": "list each alternative as its own keyword; only a trailing * is a wildcard",
}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _terms(raw: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    kw = raw.get("keywords")
    if isinstance(kw, list):
        yield from ((f"{prefix}keywords[{j}]", t) for j, t in enumerate(kw))
    for items in gates_of(raw).values():
        yield from ((prefix + path, t) for path, t in items)


def _never_terms(raw: Mapping[str, Any], i: int) -> Iterator[Raw]:
    places = [(raw, "")] + [(s, f"Shifts[{k}].") for k, s in enumerate(_list(raw.get("Shifts")))
                            if isinstance(s, Mapping)]
    for owner, prefix in places:
        for path, t in _terms(owner, prefix):
            term = read_term(t)
            if term.kind != "never" or not term_text(t):
                continue
            code, why = _never_code(term.text)
            yield (i, code, path, f"the term {term.text!r} can never match: {why}", _SUGGEST[code])


def _can_match(raw: Mapping[str, Any]) -> bool:
    return any(read_term(t).kind != "never" for t in keywords_of(raw))


def _never_fires(raw: Mapping[str, Any], i: int) -> Iterator[Raw]:
    kw = keywords_of(raw)
    tagged = raw.get("tag") not in (None, False, "", 0)
    count_fields = [n for n in ("minMessages", "maxMessages") if raw.get(n) is not None]
    if not kw and not tagged and count_fields:
        yield (i, "LS810", count_fields[0], f"{count_fields[0]} without keywords: an entry with a message-count "
               "gate is not always-on, and with no keyword it never fires",
               "add keywords, or remove the count gate to make it always-on")
    if "maxMessages" in raw and raw["maxMessages"] is None:
        yield (i, "LS811", "maxMessages", "maxMessages: null reads as 0, so the entry fires only while the chat "
               "has no messages", "remove maxMessages, or give it a number")
    if kw and not tagged:
        if all(not term_text(t) for t in kw):
            yield (i, "LS812", "keywords", "every keyword is blank: the list is not empty, so the entry is not "
                   "always-on, and no blank keyword matches", "add keywords, or remove the list to make it always-on")
        elif not _can_match(raw):
            yield (i, "LS813", "keywords", "no keyword can match the normalised chat (LS801-LS804), so the entry "
                   "never fires", "fix the keywords")


def _links(raws: Sequence[Any]) -> tuple[dict[str, list[int]], dict[str, list[int]], set[str]]:
    """Tag -> entries carrying it, tag -> entries triggering it, tags shifts trigger."""
    carriers: dict[str, list[int]] = {}
    emitters: dict[str, list[int]] = {}
    shift_tags: set[str] = set()
    for i, raw in enumerate(raws):
        if not isinstance(raw, Mapping):
            continue
        if raw.get("tag") not in (None, False, "", 0):
            carriers.setdefault(js_string(raw["tag"]), []).append(i)
        for t in _list(raw.get("triggers")):
            emitters.setdefault(js_string(t), []).append(i)
        for s in _list(raw.get("Shifts")):
            if isinstance(s, Mapping) and isinstance(s.get("triggers"), list):
                shift_tags.update(js_string(t) for t in s["triggers"])
    return carriers, emitters, shift_tags


def _check_links(raws: Sequence[Any]) -> Iterator[Raw]:
    carriers, emitters, shift_tags = _links(raws)
    for i, raw in enumerate(raws):
        if not isinstance(raw, Mapping):
            continue
        places = [(raw, "")] + [(s, f"Shifts[{k}].") for k, s in enumerate(_list(raw.get("Shifts")))
                                if isinstance(s, Mapping)]
        for owner, prefix in places:
            for j, t in enumerate(_list(owner.get("triggers"))):
                if js_string(t) not in carriers:
                    yield (i, "LS830", f"{prefix}triggers[{j}]", f"the trigger {js_string(t)!r} names no entry's "
                           "tag: it activates nothing", "fix the tag's spelling, or remove the trigger")
        if raw.get("tag") in (None, False, "", 0):
            continue
        tag = js_string(raw["tag"])
        sources = [j for j in emitters.get(tag, ()) if j != i]
        if not sources and tag not in shift_tags:
            alone = "" if _can_match(raw) or is_always_on(raw) else ", and with no keyword the entry never fires"
            yield (i, "LS831", "tag", f"no entry triggers the tag {tag!r}{alone}",
                   "add the tag to another entry's triggers, or remove it")
            continue
        if tag in shift_tags or any(_can_match(raws[j]) or j < i for j in sources):
            continue
        later = ", ".join(str(j) for j in sources)
        yield (i, "LS832", "tag", f"the tag {tag!r} is triggered only by later entries ({later}) that are "
               "themselves only triggered: the script's single trigger pass runs front to back, so this entry "
               "never fires from them", "move this entry after the entries that trigger it")


def _unconditional(raw: Any) -> bool:
    """An always-on entry that passes every gate on every turn."""
    return (isinstance(raw, Mapping) and is_always_on(raw) and not any(gates_of(raw).values())
            and count_gate_values(raw) == (-math.inf, math.inf) and _probability(raw.get("probability")) >= 1
            and not (isinstance(raw.get("nameBlock"), list) and raw["nameBlock"])
            and not any(raw.get(g) not in (None, []) for g in TAG_GATES[:2])
            and priority_of(raw) == int(priority_of(raw)))


def _check_limit(raws: Sequence[Any], limit: float) -> Iterator[Raw]:
    if not math.isfinite(limit):
        return
    slots = math.ceil(limit)
    always = [(-priority_of(r), j) for j, r in enumerate(raws) if _unconditional(r)]
    for i, raw in enumerate(raws):
        if not isinstance(raw, Mapping):
            continue
        p = priority_of(raw)
        if p != int(p):
            continue
        ahead = sum(1 for rank in always if rank < (-p, i))
        if ahead >= slots:
            yield (i, "LS840", "priority", f"{ahead} always-on entries come before it in priority order and "
                   f"APPLY_LIMIT lets {slots} through: its text is never applied",
                   "raise its priority, or raise APPLY_LIMIT")


def _near_duplicates(raws: Sequence[Any]) -> Iterator[Raw]:
    from rapidfuzz import fuzz, process  # import-cost: rapidfuzz loads only for the near-duplicate check
    owners: dict[str, list[tuple[int, int]]] = {}
    for i, raw in enumerate(raws):
        if not isinstance(raw, Mapping):
            continue
        for k, t in enumerate(keywords_of(raw)):
            term = read_term(t)
            if term.kind in ("word", "phrase", "stem"):
                owners.setdefault(term.text, []).append((i, k))
    keys = [k for k in owners if len(k) >= NEAR_MIN_LENGTH]
    for ia, jb, score in sorted(_similar_pairs(keys, process, fuzz.ratio)):
        a, b = keys[ia], keys[jb]
        if _forms_of_each_other(a, b) or {i for i, _ in owners[a]} & {i for i, _ in owners[b]}:
            continue
        i, k = min(owners[b])
        yield (i, "LS850", f"keywords[{k}]", f"the keyword {b!r} is nearly {a!r}, a keyword of entry "
               f"{min(owners[a])[0]} (similarity {score}): a typo, or two things named alike?",
               "if it is a typo, fix it; if they are different, nothing to do")


def check_janitor(book: Lorebook) -> list[Raw]:
    """Every LS8xx finding of a janitor book (entry = index in ``dynamicLore``)."""
    src = janitor_source(book)
    raws = src.entries if isinstance(src.entries, list) else []
    out: list[Raw] = []
    for i, raw in enumerate(raws):
        if not isinstance(raw, Mapping):
            continue
        out.extend(_never_terms(raw, i))
        out.extend(_never_fires(raw, i))
        p = priority_of(raw)
        if p != int(p):
            out.append((i, "LS820", "priority", f"priority {p:g} picks a bucket that does not exist: the script "
                        "throws a TypeError whenever this entry is accepted, and no lore is applied that turn",
                        "use a whole number from 1 to 5"))
    out.extend(_check_links(raws))
    out.extend(_check_limit(raws, apply_limit_of(src.apply_limit if "APPLY_LIMIT" in src.written else 6)))
    out.extend(_near_duplicates(raws))
    return out
