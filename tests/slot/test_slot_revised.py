"""Issue 14: the five revised decisions of lorebook-slot mode (SPEC 15.2, 15.4, 15.5
[decision, revised]), each met the way a user meets it, plus the log lines that explain them."""
from __future__ import annotations

import json

import pytest
from tests.support.slot_helpers import cc_book, chat, contents, engine, outcomes, st_book

from lorescan import BookSource, ChatMessage, STEngine, STSettings, load
from lorescan.app.cli import main as cli_main
from lorescan.errors import LorebookError
from lorescan.slot import SlotBook

# An ST world as SillyTavern's editor saves it: plain and regex keys, each selective logic,
# a case-sensitive key, a whole-word key reached only by recursion, a constant and a disabled
# entry. (Regexes anchored with ^ differ by design: slot mode tests each text alone.)
WORLD = {"entries": {str(uid): {"uid": uid, **fields} for uid, fields in enumerate([
    {"key": ["lighthouse"], "content": "The light turns all night."},
    {"key": ["/dra+gon/i"], "content": "Wings over the bay."},
    {"key": ["castle"], "keysecondary": ["looms"], "selective": True, "selectiveLogic": 2,
     "content": "Not when it looms."},
    {"key": ["castle"], "keysecondary": ["wyvern"], "selective": True, "selectiveLogic": 2,
     "content": "Unless a wyvern is near."},
    {"key": ["castle"], "keysecondary": ["fog", "looms"], "selective": True, "selectiveLogic": 3,
     "content": "Both fog and shadow."},
    {"key": ["castle"], "keysecondary": ["fog", "looms"], "selective": True, "selectiveLogic": 1,
     "content": "Not both at once."},
    {"key": ["castle"], "keysecondary": ["fog"], "selective": True, "selectiveLogic": 0,
     "content": "Only in fog."},
    {"key": ["castle"], "keysecondary": ["rain", "looms"], "selective": True, "selectiveLogic": 0,
     "content": "Rain or shadow."},
    {"key": ["ship"], "content": "No ship today."},
    {"key": [], "constant": True, "content": "Always here."},
    {"key": ["lighthouse"], "disable": True, "content": "Switched off."},
    {"key": ["KEEPER"], "caseSensitive": True, "content": "Only in capitals."},
    {"key": ["light"], "matchWholeWords": True, "content": "Whole word only."},
])}}
MESSAGES = ["Welcome to Saltmere.", "The castle looms over the lighthouse.",
            "A draaagon circles the keeper's tower.", "the keeper waves"]


def test_an_st_world_exported_by_convert_fires_in_slot_mode_exactly_as_in_sillytavern_mode(tmp_path):
    world_path, card_path = tmp_path / "saltmere.json", tmp_path / "saltmere-card.json"
    world_path.write_text(json.dumps(WORLD), encoding="utf-8")
    assert cli_main(["convert", str(world_path), str(card_path), "--to", "ccv3"]) == 0
    card = json.loads(card_path.read_text(encoding="utf-8"))
    assert all(e["use_regex"] is True for e in card["data"]["character_book"]["entries"])  # as ST exports

    st = STEngine([BookSource(load(str(world_path)), ("global",))],
                  STSettings(scan_depth=5, recursive=True, include_names=False))
    st_result = st.scan([ChatMessage("Rowan" if i % 2 else "Keeper", text, is_user=bool(i % 2))
                         for i, text in enumerate(MESSAGES)], max_context=100_000)
    st_fired = sorted(e.uid for e in st_result.activated)

    slot = engine(load(str(card_path)))        # the card stores no settings: depth 5, recursion on
    slot_result = slot.run(chat(*MESSAGES), turn_id="t")
    slot_fired = sorted(r.id for r in slot_result.log if r.outcome == "inserted")

    assert slot_fired == st_fired
    assert slot_fired == [0, 1, 3, 5, 7, 9, 12]          # plain and regex keys, every logic, recursion


def test_a_not_any_exclusion_keeps_its_entry_out():
    book = st_book("castle", [
        {"key": ["castle"], "keysecondary": ["looms"], "selective": True, "selectiveLogic": 2,
         "content": "The castle stands quiet."},
        {"key": ["castle"], "keysecondary": ["dragon"], "selective": True, "selectiveLogic": 2,
         "content": "No dragon has been seen here."},
    ])
    result = engine(book).run(chat("The castle looms."), turn_id="t")
    assert contents(result) == ["No dragon has been seen here."]
    excluded = result.log[0]
    assert excluded.outcome == "not_matched" and excluded.detail == "secondary_logic"
    assert "'looms' matched" in excluded.reason and "NOT ANY" in excluded.reason


def test_a_plain_world_attached_next_to_a_budget_100_card_keeps_the_budget_at_100():
    card = cc_book("Card", [{"id": 1, "constant": True, "content": "card " * 60, "priority": 10}],
                   token_budget=100)
    world = st_book("World", [{"constant": True, "content": "world " * 60, "order": 1}])
    result = engine(card, world).run(chat("hello"), turn_id="t")
    assert outcomes(result) == {1: "inserted", 0: "dropped_budget"}
    assert (result.budget, result.budget_book) == (100, "Card")
    dropped = result.log[1]
    assert "budget 100 from book 'Card'" in dropped.reason and "'World' stores none" in dropped.reason
    assert result.notes[0].code == "budget_stored" and "from book 'Card'" in result.notes[0].text


def test_a_depth_0_entry_is_reached_by_recursion_text():
    book = cc_book("b", [
        {"id": 1, "keys": ["harbour"], "content": "The harbour master keeps the old ledger."},
        {"id": 2, "keys": ["ledger"], "content": "@@scan_depth 0\nThe ledger names every drowned sailor."},
    ])
    result = engine(book).run(chat("We reach the harbour.", "Who mentions the ledger?"), turn_id="t")
    assert contents(result) == ["The harbour master keeps the old ledger.",
                                "The ledger names every drowned sailor."]
    assert [r.pass_number for r in result.log] == [1, 2]        # the message itself was not scanned


def test_a_system_note_in_the_middle_of_a_chat_is_neither_scanned_nor_counted():
    book = cc_book("b", [
        {"id": 1, "keys": ["castle"], "content": "The castle gate is shut."},
        {"id": 2, "keys": ["dragon"], "content": "A dragon sleeps below."},
        {"id": 3, "constant": True, "content": "@@activate_only_after 3\nThe third message has come."},
    ], scan_depth=2)
    messages = [("assistant", "You stand before the castle."),
                ("system", "[Note: a dragon is coming]"),
                ("user", "I knock.")]
    result = engine(book).run(messages, turn_id="t")
    assert contents(result) == ["The castle gate is shut."]     # depth 2 = greeting + user message
    assert outcomes(result) == {1: "inserted", 2: "not_matched", 3: "blocked:activate_only_after"}
    assert result.log[1].detail == "system_message_only"
    assert "'dragon' occurs only in a system message" in result.log[1].reason
    assert "2 messages" in result.log[2].reason
    skipped = [n for n in result.notes if n.code == "system_message_skipped"]
    assert [n.message for n in skipped] == [1] and "system message: not scanned" in skipped[0].text


# -- finer points of the five rules ----------------------------------------------------------

@pytest.mark.parametrize("logic, text, fires", [
    (0, "k", False), (1, "k", True), (2, "k", True), (3, "k", False),
    (0, "k a", True), (1, "k a", True), (2, "k a", False), (3, "k a", False),
    (0, "k a b", True), (1, "k a b", False), (2, "k a b", False), (3, "k a b", True),
])
def test_selective_logic_follows_the_sillytavern_truth_table(logic, text, fires):
    # SPEC 5.5: primary k, secondaries a, b.
    book = st_book("b", [{"key": ["k"], "keysecondary": ["a", "b"], "selective": True,
                          "selectiveLogic": logic, "content": "x"}])
    assert (engine(book).run(chat(text), turn_id="t").log[0].outcome == "inserted") is fires


def test_without_selective_logic_secondary_keys_mean_primary_and_any():
    book = cc_book("b", [{"id": 1, "keys": ["k"], "secondary_keys": ["a", "b"], "selective": True,
                          "content": "x"}])
    eng = engine(book)
    assert eng.pool[0].selective_logic in (None, 0)
    assert contents(eng.run(chat("k b"), turn_id="t")) == ["x"]
    assert "AND ANY" in eng.run(chat("k"), turn_id="t").log[0].reason


def test_selective_logic_is_read_from_card_extensions():
    book = cc_book("b", [{"id": 1, "keys": ["k"], "secondary_keys": ["a"], "selective": True,
                          "extensions": {"selectiveLogic": 2}, "content": "x"}])
    assert engine(book).run(chat("k a"), turn_id="t").log[0].outcome == "not_matched"


@pytest.mark.parametrize("value", [7, -1, 1.5])
def test_an_unknown_selective_logic_is_an_error_naming_the_entry_and_field(value):
    book = st_book("b", [{"key": ["k"], "keysecondary": ["a"], "selective": True, "selectiveLogic": value,
                          "content": "x"}])
    with pytest.raises(LorebookError, match=r"entry 0, field 'selectiveLogic'.*NOT ANY"):
        engine(book)


def test_an_unknown_selective_logic_that_would_not_be_used_is_no_error():
    book = st_book("b", [{"key": ["k"], "selectiveLogic": 7, "selective": True, "content": "x"},
                         {"key": ["k"], "keysecondary": ["a"], "selectiveLogic": 7, "selective": False,
                          "content": "y"}])
    assert contents(engine(book).run(chat("k"), turn_id="t")) == ["x", "y"]


def test_a_slash_key_is_a_regex_whatever_use_regex_says():
    for use_regex in (True, False):
        book = cc_book("b", [{"id": 1, "keys": ["/dra+gon/"], "content": "c", "use_regex": use_regex}])
        assert contents(engine(book).run(chat("draaagon"), turn_id="t")) == ["c"]


def test_an_invalid_slash_key_never_matches_and_the_log_says_why():
    book = cc_book("b", [{"id": 1, "keys": ["/[/"], "content": "c", "use_regex": True},
                         {"id": 2, "keys": ["/usr/bin"], "content": "path"}])
    result = engine(book).run(chat("/[/ and /usr/bin"), turn_id="t")
    assert contents(result) == ["path"]                      # not in /pattern/flags form: plain text
    assert result.log[0].detail == "invalid_regex" and "'/[/'" in result.log[0].reason
    assert "not a valid regex" in result.log[0].reason


def test_secondary_keys_of_a_use_regex_entry_apply_by_default():
    book = cc_book("b", [{"id": 1, "keys": ["sword"], "secondary_keys": ["fire"], "selective": True,
                          "content": "c", "use_regex": True}])
    eng = engine(book)
    assert eng.run(chat("a sword"), turn_id="t").messages == ()
    assert contents(eng.run(chat("a sword of fire"), turn_id="t")) == ["c"]


def test_the_budget_is_the_default_only_when_no_book_stores_one():
    result = engine(st_book("a", [{"constant": True, "content": "x"}]), st_book("b", [])).run(
        chat("x"), turn_id="t")
    assert (result.budget, result.budget_book) == (800, None)
    assert result.notes[0].code == "budget_default" and "no attached book stores" in result.notes[0].text


def test_explicit_settings_without_a_budget_take_no_part():
    from lorescan.slot import BookSettings
    card = cc_book("card", [], token_budget=150)
    eng = engine(card, SlotBook(st_book("w", []), settings=BookSettings(scan_depth=2)))
    assert (eng.budget, eng.budget_book) == (150, "card")


def test_depth_0_still_scans_no_message():
    book = cc_book("b", [{"id": 1, "keys": ["ledger"], "content": "@@scan_depth 0\nx"}])
    record = engine(book).run(chat("the ledger"), turn_id="t").log[0]
    assert record.outcome == "not_matched" and record.detail == "recursion_only"
    assert record.reason.startswith("scan depth 0: no message is scanned")


def test_depth_0_with_no_recursive_search_sees_nothing():
    book = cc_book("b", [{"id": 1, "keys": ["harbour"], "content": "the ledger"},
                         {"id": 2, "keys": ["ledger"], "content": "@@scan_depth 0\n@@no_recursive_search\nx"}])
    record = engine(book).run(chat("harbour"), turn_id="t").log[1]
    assert record.outcome == "not_matched" and "@@no_recursive_search" in record.reason


def test_a_book_with_scan_depth_0_is_only_reached_by_lore():
    lore = cc_book("lore", [{"id": 1, "keys": ["harbour"], "content": "the ledger"}])
    hidden = cc_book("hidden", [{"id": 1, "keys": ["ledger"], "content": "secret"}], scan_depth=0)
    result = engine(lore, hidden).run(chat("harbour ledger"), turn_id="t")
    assert [(r.book, r.pass_number) for r in result.log] == [("lore", 1), ("hidden", 2)]


def test_when_every_entry_has_depth_0_a_constant_can_still_trigger_lore():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "The ledger is open."},
                         {"id": 2, "keys": ["ledger"], "content": "It names the drowned."}], scan_depth=0)
    result = engine(book).run(chat("ledger"), turn_id="t")
    assert [(r.outcome, r.pass_number) for r in result.log] == [("inserted", 1), ("inserted", 2)]


def test_system_messages_do_not_count_toward_the_scan_depth():
    book = cc_book("b", [{"id": 1, "keys": ["castle"], "content": "c"}], scan_depth=1)
    msgs = [("user", "the castle"), ("system", "note one"), ("system", "note two")]
    assert contents(engine(book).run(msgs, turn_id="t")) == ["c"]


def test_the_turn_index_in_the_state_counts_no_system_message():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "c"}])
    msgs = [("system", "setup"), ("assistant", "hi"), ("system", "note"), ("user", "yo")]
    assert engine(book).run(msgs, turn_id="t").state["first_matched_turn"] == {"b": {"1": 2}}


def test_only_system_messages_inside_the_deepest_window_are_noted_as_skipped():
    book = cc_book("b", [{"id": 1, "keys": ["castle"], "content": "c"}], scan_depth=2)
    msgs = [("system", "setup"), ("assistant", "a"), ("system", "far"), ("user", "b"),
            ("system", "near"), ("assistant", "c")]
    skipped = [n.message for n in engine(book).run(msgs, turn_id="t").notes if n.code == "system_message_skipped"]
    assert skipped == [4]


def test_a_key_in_a_system_message_outside_the_window_is_not_reported():
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "c"}], scan_depth=1)
    msgs = [("system", "dragon"), ("assistant", "old"), ("user", "new")]
    record = engine(book).run(msgs, turn_id="t").log[0]
    assert record.detail is None and record.reason == "no primary key matched"


def test_card_only_fields_have_a_stable_accessor_on_the_entry():
    book = cc_book("b", [{"id": 1, "keys": ["k"], "content": "c", "priority": 3, "use_regex": True,
                          "case_sensitive": True, "name": "The wolf", "comment": "w"}])
    assert dict(book.entries[0].card_fields) == {"priority": 3, "use_regex": True, "case_sensitive": True,
                                                 "name": "The wolf"}
    assert st_book("s", [{"key": ["k"]}]).entries[0].card_fields == {}


def test_the_strict_ccv3_reading_stays_available():
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "plain", "use_regex": True},
                         {"id": 2, "keys": ["/dra+gon/"], "content": "regex", "use_regex": True},
                         {"id": 3, "keys": ["/dra+gon/"], "content": "literal", "use_regex": False}])
    strict = engine(book, regex_keys="strict").run(chat("draaagon"), turn_id="t")
    assert contents(strict) == ["regex"]
    assert "regex_keys='strict'" in strict.log[0].reason
    assert contents(engine(book, regex_keys="ccv3").run(chat("draaagon"), turn_id="t")) == ["regex"]


def test_placement_puts_a_larger_order_first_then_priority_then_book_position_then_entry_id():
    first = cc_book("first", [{"id": 9, "constant": True, "content": "first-9", "insertion_order": 5},
                              {"id": 4, "constant": True, "content": "first-4", "insertion_order": 5}])
    second = cc_book("second", [{"id": 1, "constant": True, "content": "second-1", "insertion_order": 5},
                                {"id": 2, "constant": True, "content": "second-2", "insertion_order": 5,
                                 "priority": 6},
                                {"id": 3, "constant": True, "content": "second-3", "insertion_order": 50}])
    result = engine(first, second).run(chat("x"), turn_id="t")
    # order 50 first (the reverse of SillyTavern); at order 5 the higher priority, then the
    # earlier attached book, then the lower id within a book whatever the stored order.
    assert contents(result) == ["second-3", "second-2", "first-4", "first-9", "second-1"]


def test_every_log_detail_and_note_code_is_a_literal_and_is_documented():
    from pathlib import Path
    from typing import get_args

    from lorescan.slot import LOG_DETAILS, NOTE_CODES, LogDetail, NoteCode
    assert get_args(LogDetail) == LOG_DETAILS and get_args(NoteCode) == NOTE_CODES
    page = (Path(__file__).resolve().parents[2] / "docs" / "slot-mode.md").read_text(encoding="utf-8")
    for code in LOG_DETAILS + NOTE_CODES:
        assert f"| `{code}` |" in page, f"docs/slot-mode.md does not document {code!r}"


def test_an_unknown_regex_keys_reading_is_a_settings_error():
    from lorescan.errors import SettingsError
    with pytest.raises(SettingsError, match="regex_keys"):
        engine(st_book("b", []), regex_keys="ccv2")


def test_the_log_names_an_invalid_regex_key_beside_valid_ones():
    book = cc_book("b", [{"id": 1, "keys": ["castle", "/(/"], "content": "c"}])
    record = engine(book).run(chat("nothing here"), turn_id="t").log[0]
    assert record.reason == "no primary key matched ('/(/': not a valid /pattern/flags regex, never matches)"
