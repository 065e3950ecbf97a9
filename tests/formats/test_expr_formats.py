"""Key expressions are key strings: every format writer that carries keys gives them back unchanged
(docs/improved-profile.md#key-expressions), and the book read back activates the same entries."""
from __future__ import annotations

import copy

import pytest

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.formats import book_from_entries
from lorescan.formats.convert import _SAME_ONLY, TARGETS, convert
from lorescan.formats.load import load_data, read_bytes

PRIMARY = '&expr: (dragon AND red) OR ("old wyrm" AND NOT /bab(y|ies)/i)'
SECONDARY = "&expr: castle OR NOT moat"
ENTRIES = [{"uid": 0, "key": [PRIMARY, "knight"], "keysecondary": [SECONDARY], "selective": True,
            "selectiveLogic": 0, "content": "E0", "comment": "expr"},
           {"uid": 1, "key": ["&expr: sword AND shield"], "content": "E1", "comment": "plain"}]
CHATS = [["a red dragon"], ["an old wyrm"], ["an old wyrm and its babies"], ["a knight at the moat"],
         ["a knight at the castle moat"], ["sword and shield"], ["a sword"]]


def fired(book, chat) -> set[str]:
    engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=4, include_names=False),
                      compat="improved")
    out = engine.scan([ChatMessage("u", t, is_user=True) for t in chat], max_context=100_000)
    return set(out.world_info_before.split("\n")) - {""}


def read_back(data):
    return read_bytes(data, source="back") if isinstance(data, bytes) else load_data(copy.deepcopy(data),
                                                                                     source="back")


@pytest.mark.parametrize("target", [t for t in TARGETS if t not in _SAME_ONLY and t != "janitor"])
def test_every_writer_keeps_expression_keys(target):
    book = book_from_entries("exprs", ENTRIES)
    data, _ = convert(book, target)
    back = read_back(data)
    by_content = {e.content: e for e in back.entries}
    assert PRIMARY in by_content["E0"].key
    assert by_content["E1"].key == ("&expr: sword AND shield",) or list(by_content["E1"].key) == [
        "&expr: sword AND shield"]
    if by_content["E0"].keysecondary:            # formats without secondary keys drop the list whole
        assert SECONDARY in by_content["E0"].keysecondary
    for chat in CHATS:
        want = fired(book, chat)
        if not by_content["E0"].keysecondary or not by_content["E0"].selective:
            want.discard("E0")
            got = fired(back, chat) - {"E0"}
        else:
            got = fired(back, chat)
        assert got == want, (target, chat)


def test_the_sillytavern_round_trip_is_exact_and_decides_the_same():
    book = book_from_entries("exprs", ENTRIES)
    data, report = convert(book, "sillytavern")
    back = read_back(data)
    assert [(e.key, e.keysecondary) for e in back.entries] == [(e.key, e.keysecondary) for e in book.entries]
    assert not [x for x in report.losses if x.field in ("key", "keysecondary")]
    assert [fired(back, c) for c in CHATS] == [fired(book, c) for c in CHATS] == [
        {"E0"}, {"E0"}, set(), set(), {"E0"}, {"E1"}, set()]


def test_janitor_cannot_carry_them_and_says_so():
    # a JanitorAI script's window has no punctuation: the writer drops such keys and reports each
    data, report = convert(book_from_entries("exprs", ENTRIES), "janitor")
    lost = {(x.entry, x.field) for x in report.losses}
    assert {(0, "key[0]"), (0, "keysecondary[0]"), (1, "key[0]")} <= lost
    assert all("&expr" not in k for e in read_back(data).entries for k in e.key)
