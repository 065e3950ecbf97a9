"""Builders shared by the lorebook-slot tests (tests/test_slot_*.py)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from lorescan.formats.card import read_character_book
from lorescan.formats.sillytavern import read_world
from lorescan.model import Entry, Lorebook, entry_from_fields
from lorescan.slot import SlotEngine, SlotResult
from lorescan.tokens import count_words

# What the CCv3 reader does with a character_book entry (SPEC 2.7): CC names mapped to ST
# names, the originals kept beside them.
_CC_TO_ST = {"keys": "key", "secondary_keys": "keysecondary", "insertion_order": "order"}


def st_book(name: str, entries: Sequence[Mapping[str, Any]], **settings: Any) -> Lorebook:
    """A SillyTavern-shaped book (uids default to list positions) with book-level fields."""
    data = {str(e.get("uid", i)): {"uid": i, **e} for i, e in enumerate(entries)}
    return read_world({"entries": data, **settings}, name=name)


def cc_entry_in_fields(fields: Mapping[str, Any], index: int) -> Entry:
    """An entry carrying both the CC names and the ST names they map to, in ``fields``."""
    data = dict(fields)
    for cc, st in _CC_TO_ST.items():
        if cc in fields:
            data[st] = fields[cc]
    if "enabled" in fields:
        data["disable"] = not fields["enabled"]
    data["uid"] = fields.get("id", index)
    return entry_from_fields(data, source="card.json", fill_defaults=True)


def cc_book(name: str, entries: Sequence[Mapping[str, Any]], **settings: Any) -> Lorebook:
    """A Character Card book read by the real CCv3 reader (ST names in ``fields``, the raw CC
    entries kept in ``origin``)."""
    return read_character_book({"name": name, "entries": list(entries), **settings}, source="card.json",
                               fmt="lorebook_v3")


def cc_book_in_fields(name: str, entries: Sequence[Mapping[str, Any]], **settings: Any) -> Lorebook:
    """The same book with CC and ST names side by side in each entry's ``fields``."""
    return Lorebook(name=name, entries=tuple(cc_entry_in_fields(e, i) for i, e in enumerate(entries)),
                    fields=dict(settings), source="card.json", format="ccv3")


def raw_book(name: str, entries: Sequence[Mapping[str, Any]]) -> Lorebook:
    """A book of entries holding only the given fields (CC names left unmapped)."""
    return Lorebook(name=name, entries=tuple(entry_from_fields({"uid": i, **e}, fill_defaults=True)
                                             for i, e in enumerate(entries)))


def engine(*books: Lorebook, count_tokens=count_words, **kw: Any) -> SlotEngine:
    return SlotEngine(list(books), count_tokens=count_tokens, **kw)


def chat(*texts: str) -> list[tuple[str, str]]:
    """Messages oldest first, alternating assistant (the greeting) and user."""
    return [("assistant" if i % 2 == 0 else "user", t) for i, t in enumerate(texts)]


def outcomes(result: SlotResult) -> dict[Any, str]:
    return {r.id: r.outcome for r in result.log}


def inserted_ids(result: SlotResult) -> list[Any]:
    return [r.id for r in result.log if r.outcome == "inserted"]


def contents(result: SlotResult) -> list[str]:
    return [m.content for m in result.messages]
