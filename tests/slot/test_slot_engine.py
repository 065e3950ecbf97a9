"""SPEC 15.1-15.11: the lorebook-slot pipeline, one rule per test."""
from __future__ import annotations

import copy
import hashlib
import json

import pytest
from tests.support.slot_helpers import cc_book, cc_book_in_fields, chat, contents, engine, inserted_ids, outcomes, raw_book, st_book

from lorescan.errors import LorebookError, SettingsError
from lorescan.slot import BookSettings, SlotBook, SlotEngine, roll_percent
from lorescan.tokens import TiktokenCounter


def turn_id_with(book: str, entry_id, wanted, prefix: str = "t") -> str:
    return next(t for t in (f"{prefix}{n}" for n in range(2000)) if wanted(roll_percent(t, book, entry_id)))


# -- 15.1 books and the pool -------------------------------------------------------------

def test_pool_order_is_attachment_order_then_stored_order():
    a = st_book("a", [{"constant": True, "content": "a0"}, {"constant": True, "content": "a1"}])
    b = st_book("b", [{"constant": True, "content": "b0"}])
    result = engine(b, a).run(chat("x"), turn_id="t")
    assert [(r.book, r.position) for r in result.log] == [("b", (0, 0)), ("a", (1, 0)), ("a", (1, 1))]
    assert contents(result) == ["b0", "a0", "a1"]          # all ties: pool position decides


def test_entry_identity_uses_the_cc_id_or_the_st_uid():
    cc = cc_book("cc", [{"id": 42, "constant": True, "content": "x"}, {"constant": True, "content": "y"}])
    st = st_book("st", [{"uid": 7, "constant": True, "content": "z"}])
    result = engine(cc, st).run(chat("x"), turn_id="t")
    # A missing id is the index in the book; readers present entries ids ascending.
    assert [(r.book, r.id) for r in result.log] == [("cc", 1), ("cc", 42), ("st", 7)]


def test_cc_only_fields_are_read_from_the_card_fields_the_reader_kept():
    book = cc_book("cc", [{"id": 1, "keys": ["Wolf"], "content": "c", "priority": 3, "case_sensitive": True,
                           "use_regex": False, "name": "The wolf", "enabled": True}])
    e = engine(book).pool[0]
    assert (e.priority, e.case_sensitive, e.use_regex, e.name) == (3, True, False, "The wolf")


def test_both_spellings_side_by_side_in_fields_are_read():
    book = cc_book_in_fields("cc", [{"id": 5, "keys": ["Wolf"], "content": "c", "priority": 3,
                                     "case_sensitive": True, "use_regex": True, "insertion_order": 8,
                                     "extensions": {"role": "user", "match_whole_words": True}}])
    e = engine(book).pool[0]
    assert (e.id, e.keys, e.priority, e.order, e.case_sensitive, e.use_regex, e.role, e.whole_words) == (
        5, ("Wolf",), 3, 8, True, True, "user", True)


def test_a_cc_entry_without_enabled_is_enabled():
    book = cc_book("cc", [{"id": 1, "constant": True, "content": "c"},
                          {"id": 2, "constant": True, "content": "d", "enabled": False}])
    assert outcomes(engine(book).run(chat("x"), turn_id="t")) == {1: "inserted", 2: "disabled"}


def test_two_books_with_the_same_id_are_refused_unless_renamed():
    a, b = st_book("same", []), st_book("same", [])
    with pytest.raises(SettingsError, match="same"):
        engine(a, b)
    eng = engine(SlotBook(a, id="first"), SlotBook(b, id="second"))
    assert [sb.id for sb in eng.books] == ["first", "second"]


# -- 15.2 book settings -------------------------------------------------------------------

def test_book_settings_default_to_depth_5_no_budget_recursion_on():
    assert BookSettings.from_book(st_book("b", [])) == BookSettings(5, None, True)
    assert engine(st_book("b", [])).budget == 800          # the pool default


@pytest.mark.parametrize("stored, expected", [
    ({"scan_depth": 500, "token_budget": 5}, (100, 100)),
    ({"scan_depth": -3, "token_budget": 99999}, (0, 32000)),
    ({"scanDepth": 7.9, "tokenBudget": 1234}, (7, 1234)),
])
def test_out_of_range_settings_are_clamped(stored, expected):
    s = BookSettings.from_book(cc_book("b", [], **stored))
    assert (s.scan_depth, s.token_budget) == expected


def test_settings_of_a_wrong_type_are_an_error_naming_the_field():
    with pytest.raises(SettingsError, match="token_budget"):
        BookSettings.from_book(cc_book("b", [], token_budget="lots"))
    with pytest.raises(SettingsError, match="recursive_scanning"):
        BookSettings.from_book(cc_book("b", [], recursive_scanning="yes"))


def test_settings_are_read_from_original_data_of_an_imported_book():
    book = st_book("b", [], originalData={"scan_depth": 2, "token_budget": 300, "recursive_scanning": False})
    assert BookSettings.from_book(book) == BookSettings(2, 300, False)


def test_each_entry_uses_its_own_books_scan_depth():
    msgs = chat("old dragon", "new", "newer")          # "dragon" is 3 messages back
    near = cc_book("near", [{"id": 1, "keys": ["dragon"], "content": "near"}], scan_depth=2)
    far = cc_book("far", [{"id": 1, "keys": ["dragon"], "content": "far"}], scan_depth=3)
    assert contents(engine(near, far).run(msgs, turn_id="t")) == ["far"]


def test_scan_depth_decorator_overrides_the_book():
    msgs = chat("old dragon", "new", "newer")
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "@@scan_depth 3\ndeep"},
                         {"id": 2, "keys": ["dragon"], "content": "shallow"}], scan_depth=1)
    assert contents(engine(book).run(msgs, turn_id="t")) == ["deep"]


def test_the_budget_is_the_largest_among_books_and_settings_can_be_given_explicitly():
    a = st_book("a", [], token_budget=400)
    eng = engine(SlotBook(a, settings=BookSettings(token_budget=3000)), st_book("b", []))
    assert eng.budget == 3000


# -- 15.3 entry fields ---------------------------------------------------------------------

def test_comment_is_never_sent_to_the_model():
    book = cc_book("b", [{"id": 1, "constant": True, "comment": "SECRET TITLE", "content": "body"}])
    result = engine(book).run(chat("x"), turn_id="t")
    assert contents(result) == ["body"] and result.log[0].name == "SECRET TITLE"


@pytest.mark.parametrize("stored, role", [
    ({"extensions": {"role": 1}}, "user"), ({"extensions": {"role": "assistant"}}, "assistant"),
    ({"extensions": {"role": 0}}, "system"), ({}, "system"),
])
def test_role_comes_from_extensions_role_as_number_or_name(stored, role):
    # cc_book_in_fields: the CCv3 reader (model validation) refuses a string role today.
    book = cc_book_in_fields("b", [{"id": 1, "constant": True, "content": "c", **stored}])
    assert engine(book).run(chat("x"), turn_id="t").messages[0].role == role


def test_st_role_field_is_read_too():
    book = st_book("b", [{"constant": True, "content": "c", "role": 2}])
    assert engine(book).run(chat("x"), turn_id="t").messages[0].role == "assistant"


def test_an_unknown_role_is_an_error_naming_the_entry():
    with pytest.raises(LorebookError, match="role"):
        engine(cc_book_in_fields("b", [{"id": 3, "constant": True, "content": "c",
                                         "extensions": {"role": "narrator"}}]))


def test_priority_defaults_to_order():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "c", "insertion_order": 37},
                         {"id": 2, "constant": True, "content": "d", "insertion_order": 37, "priority": 2}])
    log = engine(book).run(chat("x"), turn_id="t").log
    assert [(r.priority, r.order) for r in log] == [(37, 37), (2, 37)]


def test_st_position_and_depth_are_ignored():
    book = st_book("b", [{"constant": True, "content": "c", "position": 4, "depth": 0, "outletName": "o"}])
    assert contents(engine(book).run(chat("x"), turn_id="t")) == ["c"]


def test_ill_typed_keys_are_an_error_naming_the_field():
    with pytest.raises(LorebookError, match=r"keys\[1\]"):
        engine(raw_book("b", [{"keys": ["ok", 5], "content": "c"}]))


def test_keys_stored_as_a_comma_separated_string_are_split():
    book = raw_book("b", [{"keys": "wolf, bear", "content": "beast"}])
    assert contents(engine(book).run(chat("a bear"), turn_id="t")) == ["beast"]


# -- 15.4 scan text and key matching -----------------------------------------------------------

def test_only_the_last_scan_depth_messages_are_scanned_greeting_included():
    book = cc_book("b", [{"id": 1, "keys": ["castle"], "content": "c"}], scan_depth=3)
    eng = engine(book)
    assert contents(eng.run(chat("a castle", "x", "y"), turn_id="t")) == ["c"]       # greeting scanned
    assert eng.run(chat("a castle", "x", "y", "z"), turn_id="t").messages == ()


def test_scan_depth_zero_scans_no_message_but_constants_still_fire():
    book = cc_book("b", [{"id": 1, "keys": ["castle"], "content": "keyed"},
                         {"id": 2, "constant": True, "content": "constant"}], scan_depth=0)
    result = engine(book).run(chat("castle"), turn_id="t")
    assert contents(result) == ["constant"] and outcomes(result)[1] == "not_matched"


def test_keys_never_match_across_two_messages():
    book = cc_book("b", [{"id": 1, "keys": ["blue bar"], "content": "c"}])
    eng = engine(book)
    assert eng.run(chat("the blue", "bar"), turn_id="t").messages == ()
    assert contents(eng.run(chat("the blue bar"), turn_id="t")) == ["c"]


def test_keys_never_match_across_two_recursion_texts():
    book = cc_book("b", [{"id": 1, "keys": ["ping"], "content": "the blue"},
                         {"id": 2, "keys": ["pong"], "content": "bar"},
                         {"id": 3, "keys": ["blue\nbar", "blue bar"], "content": "joined"}])
    result = engine(book).run(chat("ping pong"), turn_id="t")
    assert outcomes(result)[3] == "not_matched"


def test_messages_carry_no_speaker_name():
    book = cc_book("b", [{"id": 1, "keys": ["user:"], "content": "c"}])
    assert engine(book).run([("user", "hello")], turn_id="t").messages == ()


def test_keys_are_trimmed_and_empty_keys_ignored():
    book = cc_book("b", [{"id": 1, "keys": ["", "   ", "  tower "], "content": "c"},
                         {"id": 2, "keys": ["", "  "], "content": "blank"}])
    result = engine(book).run(chat("the tower"), turn_id="t")
    assert contents(result) == ["c"] and result.log[0].matched_key == "  tower "


def test_matching_is_case_insensitive_unless_case_sensitive():
    book = cc_book("b", [{"id": 1, "keys": ["Paris"], "content": "any case"},
                         {"id": 2, "keys": ["Paris"], "content": "exact case", "case_sensitive": True}])
    eng = engine(book)
    assert contents(eng.run(chat("PARIS"), turn_id="t")) == ["any case"]
    assert contents(eng.run(chat("Paris"), turn_id="t")) == ["any case", "exact case"]


def test_whole_words_apply_unicode_boundaries_and_no_space_scripts():
    book = cc_book("b", [{"id": 1, "keys": ["東京"], "content": "tokyo", "extensions": {"match_whole_words": True}},
                         {"id": 2, "keys": ["red dragon"], "content": "red", "extensions": {"match_whole_words": True}},
                         {"id": 3, "keys": ["cat"], "content": "cat", "extensions": {"match_whole_words": True}}])
    result = engine(book).run(chat("東京都 shred dragons caté"), turn_id="t")
    assert contents(result) == ["tokyo"]


def test_whole_word_decorators_override_the_entry_flag():
    book = cc_book("b", [{"id": 1, "keys": ["cat"], "content": "@@match_full_word\nfull"},
                         {"id": 2, "keys": ["cat"], "content": "@@match_partial_word\npartial",
                          "extensions": {"match_whole_words": True}}])
    assert contents(engine(book).run(chat("concatenate"), turn_id="t")) == ["partial"]


def test_use_regex_keys_are_ecmascript_regexes():
    book = cc_book("b", [{"id": 1, "keys": ["/dra+gon/i"], "content": "c", "use_regex": True}])
    eng = engine(book)
    assert contents(eng.run(chat("DRAAAGON"), turn_id="t")) == ["c"]
    assert eng.run(chat("drgon"), turn_id="t").messages == ()


def test_strict_use_regex_plain_or_invalid_keys_never_match():
    book = cc_book("b", [{"id": 1, "keys": ["dragon", "/[/", "/(/"], "content": "c", "use_regex": True}])
    result = engine(book, regex_keys="strict").run(chat("dragon /[/ /(/"), turn_id="t")
    assert result.messages == ()


def test_use_regex_regexes_see_each_text_alone():
    book = cc_book("b", [{"id": 1, "keys": ["/^hello$/"], "content": "c", "use_regex": True}])
    eng = engine(book)
    assert contents(eng.run(chat("  hello  "), turn_id="t")) == ["c"]      # texts are trimmed
    assert eng.run(chat("hello", "world"), turn_id="t").log[0].outcome == "inserted"


def test_strict_use_regex_ignores_secondary_keys():
    book = cc_book("b", [{"id": 1, "keys": ["/sword/"], "secondary_keys": ["/nothing-here/"], "selective": True,
                          "content": "c", "use_regex": True}])
    assert contents(engine(book, regex_keys="strict").run(chat("a sword"), turn_id="t")) == ["c"]


def test_strict_use_regex_false_keeps_slash_keys_literal():
    book = cc_book("b", [{"id": 1, "keys": ["/dra+gon/"], "content": "c", "use_regex": False}])
    eng = engine(book, regex_keys="strict")
    assert eng.run(chat("draaagon"), turn_id="t").messages == ()
    result = eng.run(chat("the key /DRA+GON/ itself"), turn_id="t")
    assert contents(result) == ["c"] and result.log[0].matched_key == "/dra+gon/"


def test_without_use_regex_keys_are_auto_detected_as_in_sillytavern():
    book = st_book("b", [{"key": ["/dra+gon/"], "content": "c"}])
    assert contents(engine(book).run(chat("draaagon"), turn_id="t")) == ["c"]


def test_regex_keys_auto_mode_ignores_use_regex():
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "c", "use_regex": True}])
    assert contents(engine(book, regex_keys="auto").run(chat("dragon"), turn_id="t")) == ["c"]


def test_secondary_keys_apply_only_to_selective_entries():
    book = cc_book("b", [{"id": 1, "keys": ["sword"], "secondary_keys": ["fire"], "content": "c"}])
    assert contents(engine(book).run(chat("a sword"), turn_id="t")) == ["c"]


# -- 15.5 gates -------------------------------------------------------------------------------

def gate_outcome(content: str, text: str = "nothing", *, n_messages: int = 1, state=None, **fields) -> str:
    book = cc_book("g", [{"id": 1, "keys": ["key"], "content": content, **fields}])
    msgs = chat(*([f"m{i}" for i in range(n_messages - 1)] + [text]))
    return engine(book).run(msgs, turn_id="t", state=state).log[0].outcome


def test_gate_1_disabled_beats_everything():
    assert gate_outcome("@@activate\nx", enabled=False) == "disabled"


def test_gate_2_dont_activate_beats_constant_and_keys():
    assert gate_outcome("@@dont_activate\nx", "key", constant=True) == "blocked:dont_activate"


def test_gate_3_activate_beats_dont_activate_and_needs_no_key():
    assert gate_outcome("@@activate\n@@dont_activate\nx") == "inserted"


def earlier_state(turn: int) -> dict:
    return {"version": 1, "first_matched_turn": {"g": {"1": turn}}}


def test_gate_4_dont_activate_after_match_beats_keep():
    content = "@@dont_activate_after_match\n@@keep\nx"
    assert gate_outcome(content, "key", n_messages=5, state=earlier_state(2)) == "blocked:dont_activate_after_match"


def test_gate_5_keep_matches_after_an_earlier_insertion():
    assert gate_outcome("@@keep\nx", n_messages=5, state=earlier_state(2)) == "inserted"
    assert gate_outcome("@@keep_activate_after_match\nx", n_messages=5, state=earlier_state(2)) == "inserted"
    assert gate_outcome("@@keep\nx", n_messages=5, state=None) == "not_matched"


def test_matched_in_an_earlier_turn_means_strictly_before_this_turn():
    assert gate_outcome("@@keep\nx", n_messages=5, state=earlier_state(5)) == "not_matched"
    assert gate_outcome("@@dont_activate_after_match\nx", "key", n_messages=5,
                        state=earlier_state(5)) == "inserted"


def test_gate_6_is_greeting_holds_only_until_the_first_reply():
    book = cc_book("g", [{"id": 1, "constant": True, "content": "@@is_greeting\nhello"}])
    eng = engine(book)
    assert eng.run([("assistant", "Hi!")], turn_id="t").log[0].outcome == "inserted"
    assert eng.run([("assistant", "Hi!"), ("user", "hey")], turn_id="t").log[0].outcome == "inserted"
    assert eng.run([("assistant", "Hi!"), ("user", "hey"), ("assistant", "so")],
                   turn_id="t").log[0].outcome == "blocked:is_greeting"
    assert eng.run([("assistant", "Hi!")], turn_id="t", at_greeting=False).log[0].outcome == "blocked:is_greeting"


def test_gate_6_is_greeting_with_an_index_checks_the_active_greeting_when_known():
    book = cc_book("g", [{"id": 1, "constant": True, "content": "@@is_greeting 2\nhello"}])
    eng = engine(book)
    greeting = [("assistant", "Hi!")]
    assert eng.run(greeting, turn_id="t", greeting_index=2).log[0].outcome == "inserted"
    assert eng.run(greeting, turn_id="t", greeting_index=0).log[0].outcome == "blocked:is_greeting"
    assert eng.run(greeting, turn_id="t").log[0].outcome == "inserted"      # index unknown: ignored


def test_is_user_icon_gate_when_enabled():
    book = cc_book("g", [{"id": 1, "constant": True, "content": "@@is_user_icon cat\nmeow"}])
    eng = engine(book, user_icon_decorator=True)
    assert eng.run(chat("x"), turn_id="t", user_icon="cat").log[0].outcome == "inserted"
    assert eng.run(chat("x"), turn_id="t", user_icon="dog").log[0].outcome == "blocked:is_user_icon"
    assert engine(book).run(chat("x"), turn_id="t").log[0].outcome == "inserted"   # rejected decorator


def test_gate_7_activate_only_after_counts_user_and_assistant_messages():
    assert gate_outcome("@@activate_only_after 3\nx", "key", n_messages=2) == "blocked:activate_only_after"
    assert gate_outcome("@@activate_only_after 3\nx", "key", n_messages=3) == "inserted"


def test_gate_8_activate_only_every():
    assert gate_outcome("@@activate_only_every 3\nx", "key", n_messages=4) == "blocked:activate_only_every"
    assert gate_outcome("@@activate_only_every 3\nx", "key", n_messages=6) == "inserted"


def test_gates_7_and_8_come_before_constant():
    assert gate_outcome("@@activate_only_after 9\nx", constant=True) == "blocked:activate_only_after"


def test_gate_10_additional_keys_each_list_needs_a_match():
    content = "@@additional_keys red, blue\n@@additional_keys big\nx"
    assert gate_outcome(content, "key red") == "not_matched"
    assert gate_outcome(content, "key blue big") == "inserted"


def test_gate_10_exclude_keys_none_may_match():
    content = "@@exclude_keys wolf, bear\nx"
    assert gate_outcome(content, "key") == "inserted"
    assert gate_outcome(content, "key bear") == "not_matched"


def test_gate_10_exclude_keys_all_not_all_may_match():
    content = "@@exclude_keys_all wolf, bear\nx"
    assert gate_outcome(content, "key wolf") == "inserted"
    assert gate_outcome(content, "key wolf bear") == "not_matched"


def test_decorator_keys_may_sit_in_another_message_of_the_window():
    content = "@@additional_keys moon\nx"
    book = cc_book("g", [{"id": 1, "keys": ["key"], "content": content}])
    assert engine(book).run(chat("the moon", "the key"), turn_id="t").log[0].outcome == "inserted"


# -- 15.6 passes and recursion ------------------------------------------------------------------

CHAIN = [{"id": 1, "keys": ["anna"], "content": "Anna knows Bob."},
         {"id": 2, "keys": ["bob"], "content": "Bob owns a boat."}]


def test_recursion_off_gives_one_pass():
    result = engine(cc_book("b", CHAIN, recursive_scanning=False)).run(chat("Anna"), turn_id="t")
    assert inserted_ids(result) == [1] and result.passes == 1


def test_recursive_decorator_feeds_later_passes_despite_the_book():
    entries = [dict(CHAIN[0], content="@@recursive\nAnna knows Bob."), CHAIN[1]]
    result = engine(cc_book("b", entries, recursive_scanning=False)).run(chat("Anna"), turn_id="t")
    assert inserted_ids(result) == [1, 2]


def test_unrecursive_decorator_never_feeds():
    entries = [dict(CHAIN[0], content="@@unrecursive\nAnna knows Bob."), CHAIN[1]]
    assert inserted_ids(engine(cc_book("b", entries)).run(chat("Anna"), turn_id="t")) == [1]


def test_no_recursive_search_entries_only_see_the_messages():
    entries = [CHAIN[0], dict(CHAIN[1], content="@@no_recursive_search\nBob owns a boat.")]
    assert inserted_ids(engine(cc_book("b", entries)).run(chat("Anna"), turn_id="t")) == [1]


def test_recursion_eligibility_follows_the_source_entrys_book():
    quiet = cc_book("quiet", [CHAIN[0]], recursive_scanning=False)
    loud = cc_book("loud", [CHAIN[1]], recursive_scanning=True)
    assert [r.outcome for r in engine(quiet, loud).run(chat("Anna"), turn_id="t").log] == ["inserted", "not_matched"]
    quiet2 = cc_book("quiet", [CHAIN[1]], recursive_scanning=False)
    loud2 = cc_book("loud", [CHAIN[0]], recursive_scanning=True)
    assert [r.outcome for r in engine(loud2, quiet2).run(chat("Anna"), turn_id="t").log] == ["inserted", "inserted"]


def test_an_activated_entry_is_not_evaluated_again():
    book = cc_book("b", [{"id": 1, "keys": ["echo"], "content": "echo echo"}])
    result = engine(book).run(chat("echo"), turn_id="t")
    assert contents(result) == ["echo echo"] and result.log[0].pass_number == 1


def test_a_later_pass_runs_only_when_new_content_feeds_it():
    book = cc_book("b", [{"id": 1, "keys": ["anna"], "content": "@@unrecursive\nx"},
                         {"id": 2, "keys": ["anna"], "content": "@@recursive\n"}])     # empty content
    assert engine(book).run(chat("anna"), turn_id="t").passes == 1


def test_entries_activated_in_recursion_are_budgeted_too():
    book = cc_book("b", CHAIN, token_budget=100)
    eng = engine(book, count_tokens=lambda s: 60)
    result = eng.run(chat("Anna"), turn_id="t")
    assert outcomes(result) == {1: "inserted", 2: "dropped_budget"}


# -- 15.7 probability -----------------------------------------------------------------------

def test_the_roll_is_the_specified_blake2b_hash():
    digest = hashlib.blake2b("turn-9\x1fbook\x1f12".encode()).digest()
    assert roll_percent("turn-9", "book", 12) == 100 * int.from_bytes(digest[:8], "big") / 2**64


def test_probability_zero_never_passes_and_100_always_does():
    book = cc_book("p", [{"id": 1, "constant": True, "content": "@@probability 0\nnever"},
                         {"id": 2, "constant": True, "content": "@@probability 100\nalways"},
                         {"id": 3, "constant": True, "content": "@@probability 250\nclamped"}])
    eng = engine(book)
    for n in range(50):
        assert contents(eng.run(chat("x"), turn_id=f"t{n}")) == ["always", "clamped"]


def test_the_roll_compares_u_below_n():
    tid = turn_id_with("p", 1, lambda u: 30 <= u < 31)
    u = roll_percent(tid, "p", 1)
    book = cc_book("p", [{"id": 1, "constant": True, "content": f"@@probability {u}\nx"}])
    assert engine(book).run(chat("x"), turn_id=tid).log[0].outcome == "probability_failed"   # u < u is false
    book = cc_book("p", [{"id": 1, "constant": True, "content": f"@@probability {u + 1e-9}\nx"}])
    assert engine(book).run(chat("x"), turn_id=tid).log[0].outcome == "inserted"


def test_a_non_numeric_probability_is_ignored_and_its_fallback_used():
    book = cc_book("p", [{"id": 1, "constant": True, "content": "@@probability often\n@@@probability 0\nx"},
                         {"id": 2, "constant": True, "content": "@@probability often\nx"}])
    assert outcomes(engine(book).run(chat("x"), turn_id="t")) == {1: "probability_failed", 2: "inserted"}


def test_the_roll_is_stable_across_runs_dry_runs_and_engines():
    book = cc_book("p", [{"id": i, "constant": True, "content": f"@@probability 50\ne{i}"} for i in range(40)])
    first = engine(book).run(chat("x"), turn_id="chat-7/12")
    again = engine(book).run(chat("x"), turn_id="chat-7/12", dry_run=True)
    assert first.messages == again.messages and 5 < len(first.messages) < 35
    other = engine(book).run(chat("x"), turn_id="chat-7/13")
    assert other.messages != first.messages


def test_a_failed_entry_is_not_retried_in_later_passes():
    fails = turn_id_with("p", 2, lambda u: u >= 50)
    book = cc_book("p", [{"id": 1, "keys": ["start"], "content": "wolf"},
                         {"id": 2, "keys": ["start", "wolf"], "content": "@@probability 50\nx"}])
    result = engine(book).run(chat("start"), turn_id=fails)
    assert result.log[1].outcome == "probability_failed" and result.log[1].pass_number == 1
    assert result.passes == 2


# -- 15.9 token budget -------------------------------------------------------------------------

def budget_run(entries, budget=100, counter=len):
    return engine(cc_book("b", entries, token_budget=budget), count_tokens=counter).run(chat("x"), turn_id="t")


def const(i, tokens, priority=None, order=100, extra=""):
    e = {"id": i, "constant": True, "content": extra + "x" * tokens, "insertion_order": order}
    if priority is not None:
        e["priority"] = priority
    return e


def test_the_budget_keeps_the_longest_prefix_by_priority():
    result = budget_run([const(1, 60, 9), const(2, 50, 8), const(3, 10, 7)])
    assert outcomes(result) == {1: "inserted", 2: "dropped_budget", 3: "dropped_budget"}


def test_an_exact_fit_is_admitted():
    assert outcomes(budget_run([const(1, 60, 9), const(2, 40, 8)])) == {1: "inserted", 2: "inserted"}


def test_priority_ties_break_by_order_then_pool_position():
    result = budget_run([const(1, 60, 5, order=1), const(2, 60, 5, order=2), const(3, 60, 5, order=2)])
    assert inserted_ids(result) == [2]


def test_ignore_on_max_context_ranks_below_every_other_entry():
    result = budget_run([const(1, 60, 99, extra="@@ignore_on_max_context\n"), const(2, 60, 1)])
    assert outcomes(result) == {1: "dropped_budget", 2: "inserted"}
    assert result.log[0].ignore_on_max_context


def test_tokens_are_counted_on_the_content_without_decorators():
    result = budget_run([const(1, 100, extra="@@probability 100\n@@role user\n")])
    assert result.log[0].tokens == 100 and result.log[0].outcome == "inserted"


def test_the_default_counter_is_offline_tiktoken():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "hello world"}])
    eng = SlotEngine([book])
    assert isinstance(eng.count_tokens, TiktokenCounter)
    assert eng.run(chat("x"), turn_id="t").log[0].tokens == 2


def test_token_counts_are_cached_per_entry():
    calls: list[str] = []

    def counter(text: str) -> int:
        calls.append(text)
        return 1
    eng = engine(cc_book("b", [const(1, 3), const(2, 4)]), count_tokens=counter)
    for n in range(5):
        eng.run(chat("x"), turn_id=f"t{n}")
    assert sorted(calls) == ["xxx", "xxxx"]


def test_substituted_contents_are_counted_and_inserted():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "{{char}} waves"}])
    eng = engine(book, substitute=lambda s: s.replace("{{char}}", "Seraphina"))
    result = eng.run(chat("x"), turn_id="t")
    assert contents(result) == ["Seraphina waves"] and result.log[0].tokens == 2
    other = eng.run(chat("x"), turn_id="t", substitute=lambda s: s.replace("{{char}}", "Al B. Sure"))
    assert contents(other) == ["Al B. Sure waves"] and other.log[0].tokens == 4


def test_macros_in_keys_are_substituted():
    book = cc_book("b", [{"id": 1, "keys": ["{{user}}"], "content": "c"}])
    eng = engine(book, substitute=lambda s: s.replace("{{user}}", "Mira"))
    assert contents(eng.run(chat("hi Mira"), turn_id="t")) == ["c"]


# -- 15.10 insertion ---------------------------------------------------------------------------

def test_each_entry_is_its_own_message_with_its_role():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "@@role user\none\ntwo"},
                         {"id": 2, "constant": True, "content": "three", "extensions": {"role": 2}}])
    result = engine(book).run(chat("x"), turn_id="t")
    assert [tuple(m) for m in result.messages] == [("user", "one\ntwo"), ("assistant", "three")]


def test_order_decorator_changes_placement_only():
    book = cc_book("b", [const(1, 1, order=10), const(2, 1, order=20, extra="@@order 5\n")])
    result = engine(book).run(chat("x"), turn_id="t")
    assert [r.order for r in result.log] == [10, 5] and result.log[1].priority == 20
    assert inserted_ids(result) == [1, 2] and contents(result) == ["x", "x"]


def test_an_entry_with_empty_content_produces_no_message_but_counts_as_inserted():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "@@keep"}])
    result = engine(book).run(chat("x"), turn_id="t")
    assert result.messages == () and result.log[0].outcome == "inserted"
    assert result.state["first_matched_turn"] == {"b": {"1": 1}}


def test_first_matched_turn_is_recorded_once_and_only_for_inserted_entries():
    book = cc_book("b", [{"id": 1, "keys": ["a"], "content": "x"},
                         {"id": 2, "keys": ["a"], "content": "y" * 200, "priority": 0}], token_budget=100)
    eng = engine(book, count_tokens=len)
    s2 = eng.run(chat("m", "a"), turn_id="t2").state
    assert s2["first_matched_turn"] == {"b": {"1": 2}}
    s4 = eng.run(chat("m", "a", "m", "a"), turn_id="t4", state=s2).state
    assert s4["first_matched_turn"] == {"b": {"1": 2}}


def test_a_dry_run_returns_the_state_unchanged():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "x"}])
    state = {"version": 1, "first_matched_turn": {}, "note": "kept"}
    result = engine(book).run(chat("x"), turn_id="t", state=state, dry_run=True)
    assert result.state == state and result.state is not state


def test_the_callers_state_is_never_modified():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "x"}])
    state = {"version": 1, "first_matched_turn": {"b": {"9": 1}}, "extra": {"deep": [1]}}
    before = copy.deepcopy(state)
    result = engine(book).run(chat("x", "y"), turn_id="t", state=state)
    assert state == before
    assert result.state == {"version": 1, "first_matched_turn": {"b": {"9": 1, "1": 2}}, "extra": {"deep": [1]}}
    result.state["extra"]["deep"].append(2)
    assert state == before


def test_the_state_is_plain_json():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "x"}])
    state = engine(book).run(chat("x"), turn_id="t").state
    assert json.loads(json.dumps(state)) == state


@pytest.mark.parametrize("state", [[], {"version": 2}, {"first_matched_turn": []},
                                   {"first_matched_turn": {"b": {"1": "three"}}},
                                   {"first_matched_turn": {"b": {"1": -1}}}])
def test_a_malformed_state_is_an_error(state):
    with pytest.raises(SettingsError, match="state"):
        engine(cc_book("b", [])).run(chat("x"), turn_id="t", state=state)


@pytest.mark.parametrize("messages", [["just text"], [("narrator", "x")], [{"role": "user"}], "text"])
def test_malformed_messages_are_an_error(messages):
    with pytest.raises(SettingsError, match="messages"):
        engine(cc_book("b", [])).run(messages, turn_id="t")


def test_openai_style_message_dicts_are_accepted():
    book = cc_book("b", [{"id": 1, "keys": ["moon"], "content": "c"}])
    msgs = [{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "the moon"}]
    assert contents(engine(book).run(msgs, turn_id="t")) == ["c"]


def test_disable_ui_prompt_is_reported_for_inserted_entries():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "@@disable_ui_prompt system_prompt\nx"},
                         {"id": 2, "keys": ["zzz"], "content": "@@disable_ui_prompt post_history_instructions\ny"}])
    assert engine(book).run(chat("x"), turn_id="t").disabled_ui_prompts == {"system_prompt"}


# -- 15.11 request log ---------------------------------------------------------------------------

def test_the_log_has_one_record_per_pool_entry_with_every_field():
    tid = turn_id_with("b", 3, lambda u: u >= 50)
    book = cc_book("b", [
        {"id": 1, "keys": ["wolf"], "content": "@@role user\nwolves", "priority": 4, "insertion_order": 9,
         "comment": "Wolves"},
        {"id": 2, "keys": ["bear"], "content": "bears"},
        {"id": 3, "constant": True, "content": "@@probability 50\nmaybe"},
        {"id": 4, "constant": True, "content": "big " * 200, "priority": -1},
        {"id": 5, "constant": True, "content": "off", "enabled": False},
        {"id": 6, "constant": True, "content": "@@dont_activate\nno"},
    ], token_budget=100)
    result = engine(book).run(chat("a wolf"), turn_id=tid)
    wolf = result.log[0].to_dict()
    assert wolf == {"book": "b", "id": 1, "name": "Wolves", "outcome": "inserted",
                    "reason": wolf["reason"], "pass_number": 1, "matched_by": "key", "matched_key": "wolf",
                    "roll": None, "tokens": 1, "priority": 4, "order": 9, "role": "user",
                    "ignore_on_max_context": False, "position": [0, 0], "detail": None, "span": None}
    assert [r.outcome for r in result.log] == ["inserted", "not_matched", "probability_failed",
                                                "dropped_budget", "disabled", "blocked:dont_activate"]
    assert result.log[2].roll >= 50 and result.log[3].tokens == 200
    assert all(r.reason for r in result.log)
    json.dumps([r.to_dict() for r in result.log])


def test_the_log_names_the_secondary_and_decorator_key_failures():
    book = cc_book("b", [{"id": 1, "keys": ["wolf"], "secondary_keys": ["moon"], "selective": True, "content": "x"},
                         {"id": 2, "keys": ["wolf"], "content": "@@exclude_keys pack\nx"}])
    log = engine(book).run(chat("wolf pack"), turn_id="t").log
    assert "secondary" in log[0].reason and "'pack'" in log[1].reason


# -- sharing ----------------------------------------------------------------------------------

def test_one_engine_serves_many_chats_from_threads():
    from concurrent.futures import ThreadPoolExecutor
    book = cc_book("b", [{"id": i, "keys": [f"k{i}"], "content": f"@@probability 60\nlore k{(i + 1) % 30}"}
                         for i in range(30)])
    eng = engine(book)
    chats = [(chat(f"k{n % 30} and k{(n * 7) % 30}"), f"turn-{n}") for n in range(40)]

    def one(item):
        msgs, tid = item
        r = eng.run(msgs, turn_id=tid)
        return r.messages, r.log, r.state
    serial = [one(c) for c in chats]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(one, chats)) == serial


def test_a_chat_scan_cache_can_be_passed_every_turn():
    from lorescan.match.cache import ChatScan
    book = cc_book("b", [{"id": 1, "keys": ["moon"], "content": "c"}])
    eng, cache = engine(book), ChatScan()
    msgs = chat("hello", "the moon")
    first = eng.run(msgs, turn_id="t1", cache=cache)
    later = eng.run(msgs + [("assistant", "yes")], turn_id="t2", cache=cache)
    assert contents(first) == contents(later) == ["c"]


def test_a_strict_literal_slash_key_with_matcher_secondary_keys():
    book = cc_book("b", [{"id": 1, "keys": ["/x/"], "secondary_keys": ["moon"], "selective": True,
                          "content": "c", "use_regex": False}])
    eng = engine(book, regex_keys="strict")
    assert contents(eng.run(chat("/x/ and the moon"), turn_id="t")) == ["c"]
    assert eng.run(chat("/x/ alone"), turn_id="t").messages == ()


def test_the_log_says_when_strict_use_regex_leaves_no_usable_key():
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "c", "use_regex": True}])
    assert "use_regex" in engine(book, regex_keys="strict").run(chat("dragon"), turn_id="t").log[0].reason


def test_a_record_from_a_rolled_back_later_turn_is_lowered_to_this_turn():
    book = cc_book("b", [{"id": 1, "constant": True, "content": "x"}])
    state = {"version": 1, "first_matched_turn": {"b": {"1": 9}}}
    assert engine(book).run(chat("x", "y"), turn_id="t", state=state).state["first_matched_turn"] == {"b": {"1": 2}}
