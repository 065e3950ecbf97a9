"""Matched spans in lorebook-slot mode (lorescan.slot.spans): every activation by key says where
the key matched, with the same KeySpan and cases as SillyTavern mode (tests/match/test_spans.py).

The purpose-built book: ``race`` occurs only inside "embrace"; ``saltmere`` only in the content of
the Lighthouse entry (so it fires by recursion, in pass 2); the Storm entry's regex needs "storm"
and "is coming", which stand at the end of one message and the start of the one before it (slot
mode scans each text on its own, so it must not fire); a system message sits among the others.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings as hsettings, strategies as st

from lorescan.js.text import js_trim
from lorescan.slot import SlotEngine
from lorescan.slot.spans import message_number, with_spans

from tests.support.matchgen import books, texts
from tests.support.slot_helpers import st_book

ENTRIES = [
    {"key": ["race"], "comment": "Race", "content": "The old races of the plains."},
    {"key": ["/storm\\s+is coming/i"], "comment": "Storm", "content": "A storm front rolls in."},
    {"key": ["lighthouse"], "comment": "Lighthouse", "content": "The keeper talks of the Saltmere guild."},
    {"key": ["saltmere"], "comment": "Saltmere", "content": "The guild keeps the harbour."},
    {"key": ["{{char}}'s lamp"], "comment": "Lamp", "content": "", "scanDepth": 1},
]
MESSAGES = [("assistant", "Is coming, they say."), ("system", "Stay in character."),
            ("user", "The lighthouse holds against the storm"),
            ("assistant", "She ran to embrace her brother by Keeper's lamp.")]


def _explained():
    engine = SlotEngine([st_book("spans", ENTRIES)], substitute=lambda s: s.replace("{{char}}", "Keeper"))
    result = engine.run(MESSAGES, turn_id="t")
    return result, with_spans(engine, MESSAGES, result)


def _record(result, name):
    return next(rec for rec in result.log if rec.name == name)


def test_the_run_itself_builds_no_span():
    plain, explained = _explained()
    assert all(rec.span is None for rec in plain.log)
    assert [rec.outcome for rec in plain.log] == [rec.outcome for rec in explained.log]


def test_a_key_inside_a_longer_word_shows_the_word():
    span = _record(_explained()[1], "Race").span
    assert span is not None and (span.kind, span.index) == ("message", 0)
    assert MESSAGES[3][1][span.start:span.end] == "race" == span.matched
    assert span.inside_word == "embrace" and span.cases == ("inside_word",)
    assert message_number(MESSAGES, span.index) == 3


def test_a_match_in_a_message_before_a_system_message_is_numbered_in_the_request():
    span = _record(_explained()[1], "Lighthouse").span
    assert span is not None and span.cases == () and span.index == 1
    assert message_number(MESSAGES, span.index) == 2       # the system message is not scanned, but counted here
    assert MESSAGES[2][1][span.start:span.end] == "lighthouse"


def test_a_match_across_two_messages_cannot_happen_in_slot_mode():
    rec = _record(_explained()[1], "Storm")
    assert rec.outcome == "not_matched" and rec.span is None
    # the same regex does find "storm ... is coming" in one message
    engine = SlotEngine([st_book("spans", ENTRIES[1:2])])
    one = [("user", "the storm\nis coming")]
    span = with_spans(engine, one, engine.run(one, turn_id="t")).log[0].span
    assert span is not None and not span.across and span.matched == "storm\nis coming"


def test_a_match_in_a_recursion_text_names_the_entry_that_contributed_it():
    result = _explained()[1]
    rec = _record(result, "Saltmere")
    span = rec.span
    assert rec.pass_number == 2 and span is not None and span.cases == ("recursion",)
    # recursion texts in the order pass 1 fed them: Race (pool 0), then Lighthouse (pool 2)
    assert (span.kind, span.index, span.source_entry) == ("recursion", 2, "spans.2")
    assert span.matched == "Saltmere" and ENTRIES[2]["content"][span.start:span.end] == "Saltmere"


def test_a_macro_key_is_located_as_substituted():
    span = _record(_explained()[1], "Lamp").span
    assert span is not None and span.key == "Keeper's lamp" and span.matched == "Keeper's lamp"


def test_the_span_is_in_the_records_json():
    result = _explained()[1]
    data = json.loads(json.dumps(result.to_json()))
    race = next(r for r in data["log"] if r["name"] == "Race")
    assert race["span"]["inside_word"] == "embrace" and race["span"]["cases"] == ["inside_word"]
    assert next(r for r in data["log"] if r["name"] == "Storm")["span"] is None


def _write_inputs(tmp: Path) -> tuple[Path, Path]:
    book = tmp / "book.json"
    book.write_text(json.dumps({"name": "spans", "entries": {
        str(i): {"uid": i, **e} for i, e in enumerate(ENTRIES[:4])}}), encoding="utf-8")
    chat = tmp / "chat.jsonl"
    lines = [{"user_name": "You", "character_name": "Keeper"},
             {"name": "Keeper", "is_user": False, "mes": "Is coming, they say."},
             {"name": "You", "is_user": True, "mes": "The lighthouse holds against the storm"},
             {"name": "Keeper", "is_user": False, "mes": "She ran to embrace her brother."}]
    chat.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return book, chat


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "lorescan", *args], capture_output=True, text=True, check=True)
    return done.stdout


def test_explain_in_slot_mode_shows_each_span_and_its_case(tmp_path):
    book, chat = _write_inputs(tmp_path)
    out = _cli("explain", "--mode", "slot", str(book), "--chat", str(chat))
    race = next(line for line in out.splitlines() if "#0 Race" in line)
    assert 'key "race" matched in message 3, the newest: "She ran to emb[race] her brother."' in race
    assert "inside the longer word 'embrace'" in race
    salt = next(line for line in out.splitlines() if "#3 Saltmere" in line)
    assert "recursion text 2 (the content of #2 Lighthouse)" in salt and "[Saltmere]" in salt
    data = json.loads(_cli("explain", "--mode", "slot", str(book), "--chat", str(chat), "--json"))
    spans = {row["name"]: row["span"] for row in data["entries"]}
    assert spans["Race"]["text"] == "message 3, the newest" and spans["Storm"] is None
    assert spans["Lighthouse"]["text"] == "message 2"


@hsettings(max_examples=150, deadline=None)
@given(book=books(), chat=st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), texts),
                                   min_size=1, max_size=4))
def test_every_key_activation_has_a_span_where_the_engine_matched(book, chat):
    """Differential: whatever the slot engine activated by key (the trap-laden texts and keys of
    tests/support/matchgen.py, macros, recursion), the explanation finds the match again, and the span's
    offsets cut the matched text out of the message it names."""
    engine = SlotEngine([book], substitute=lambda s: s.replace("{{char}}", "Alice").replace("{{user}}", "Bob"))
    result = with_spans(engine, chat, engine.run(chat, turn_id="t"))
    for rec in result.log:
        if rec.matched_by != "key":
            assert rec.span is None
            continue
        span = rec.span
        assert span is not None, (rec, chat)
        assert not span.across
        if span.kind == "message":
            at = message_number(chat, span.index)
            if at is None:      # no user or assistant message: a key that matches the empty window
                assert all(role == "system" for role, _ in chat) and span.matched in ("", "\x01"), (span, chat)
                continue
            text = js_trim(chat[at][1])
            # a match that began at the window's leading U+0001 (not in the message) holds it in
            # ``matched`` but not in its offsets; a message that itself starts with U+0001 holds it in both
            virtual = span.start == 0 and span.matched.startswith("\x01") \
                and span.end - span.start == len(span.matched) - 1
            inner = span.matched[1:] if virtual else span.matched
            assert text[span.start:span.end] == inner, (span, rec.matched_key, chat)


def test_replay_in_slot_mode_flags_the_unusual_matches_with_the_chat_numbering():
    from lorescan.replay.chats import Message
    from lorescan.replay.single import replay_chat, text_summary
    messages = [Message("Keeper", "Is coming, they say.", False, False),
                Message("You", "The lighthouse holds against the storm", True, False),
                Message("Keeper", "Hm.", False, False), Message("You", "She ran to embrace her brother.", True, False)]
    replay = replay_chat([st_book("spans", ENTRIES[:4])], messages, mode="slot", numbers=[1, 3, 4, 5])
    last = text_summary(replay)[-2]
    assert "Race (\"She ran to emb[race] her brother.\": in message 5, the newest; " \
           "inside the longer word 'embrace')" in last
    assert "Saltmere (\"The keeper talks of the [Saltmere] guild.\": in recursion text 2, the content of spans.2)" \
        in last
    race = next(x for x in replay.turns[-1].explained if replay.entries[x.entry].name == "Race")
    assert race.span is not None and "in message 5, the newest" in race.detail
