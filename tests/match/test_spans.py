"""Matched spans: every activation by key says where the key matched, the matched text and its
context, and whether the match lies inside a longer word, across two texts of the joined window
or in a recursion text (naming the entry whose content holds it).

The purpose-built book and chat are tests/data/spans/: ``race`` occurs only inside "embrace", a
regex key reaches from the newest-but-one message into the one before it (the haystack runs newest
first), and ``saltmere`` occurs only in the content of the Lighthouse entry, so it fires by
recursion.
"""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings as hsettings, strategies as st

from lorescan import load
from lorescan.formats import book_from_entries
from lorescan.js.regex import tool_regex
from lorescan.js.regex import _compile_js_regex as compile_js_regex   # new RegExp(pattern, flags), memoised
from lorescan.match.options import MatchOptions
from lorescan.match.spans import find_plain_key, locate_key
from lorescan.match.view import WindowPart, match_plain_key
from lorescan.replay.single import load_chat, replay_chat, text_summary
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings

from tests.support.matchgen import KEY_ATOMS, books, texts

DATA = Path(__file__).resolve().parent.parent / "data" / "spans"
BOOK, CHAT = DATA / "book.json", DATA / "chat.jsonl"
# the chat as the engine scans it (names included), newest first
NEWEST_FIRST = ["You: She ran to embrace her brother at the door.", "Keeper: The lighthouse holds against the storm",
                "You: Is coming, they say."]
ST_OPTIONS = MatchOptions.sillytavern()


def _scan(**settings: object):
    book = load(str(BOOK))
    messages = [ChatMessage(m.name, m.text, m.is_user) for m in load_chat(str(CHAT))]
    engine = STEngine([BookSource(book, ("global",))], STSettings(recursive=True, **settings))
    return engine.scan(messages, max_context=8192)


def test_a_key_inside_a_longer_word_shows_the_word():
    d = _scan().explain("spans", 0)
    span = d.span
    assert d.outcome == "activated" and span is not None
    assert (span.kind, span.index) == ("message", 0)
    assert NEWEST_FIRST[0][span.start:span.end] == "race" == span.matched
    assert span.inside_word == "embrace" and span.cases == ("inside_word",)
    assert span.before.endswith("emb") and span.after.startswith(" her brother")
    assert "inside the longer word 'embrace'" in str(d) and "emb[race]" in str(d)


def test_a_regex_match_across_two_messages_names_both():
    span = _scan().explain("spans", 1).span
    assert span is not None and span.across and span.cases == ("across",)
    assert (span.kind, span.index, span.end_kind, span.end_index) == ("message", 1, "message", 2)
    assert NEWEST_FIRST[1][span.start:] == "storm" and NEWEST_FIRST[2][:span.end] == "You: Is coming"
    assert span.matched == "storm\n\x01You: Is coming"
    assert span.inside_word is None


def test_a_match_in_a_recursion_text_names_the_entry_that_contributed_it():
    r = _scan()
    d = r.explain("spans", 3)
    span = d.span
    assert d.loop == 2 and span is not None and span.cases == ("recursion",)
    assert (span.kind, span.index) == ("recursion", 1) and span.source_entry == "spans.2"
    lighthouse = load(str(BOOK)).entries[2].content
    assert "Saltmere" in lighthouse and span.matched == "Saltmere"
    assert "recursion text 1 (the content of entry spans.2)" in str(d)


def test_an_ordinary_match_has_no_unusual_case_and_names_its_message():
    span = _scan().explain("spans", 2).span
    assert span is not None and span.cases == () and span.label == "message 1 (newest = 0)"
    assert NEWEST_FIRST[1][span.start:span.end] == "lighthouse"


def test_spans_survive_pickling_and_serialise_to_json():
    r = _scan()
    copy = pickle.loads(pickle.dumps(r))
    assert copy.explain("spans", 0).span == r.explain("spans", 0).span
    data = json.loads(json.dumps([d.to_json() for d in r.diagnostics.values()]))
    race = next(d for d in data if (d["world"], d["uid"]) == ("spans", 0))
    assert race["span"]["inside_word"] == "embrace" and race["span"]["cases"] == ["inside_word"]


def test_a_macro_key_is_located_as_substituted():
    b = book_from_entries("M", [{"uid": 0, "key": ["{{user}}"], "content": "x"}])
    engine = STEngine([BookSource(b, ("global",))], substitute=lambda s: s.replace("{{user}}", "Ash"))
    r = engine.scan([ChatMessage("N", "Then Ash left.")], max_context=8192)
    span = r.explain("M", 0).span
    assert span is not None and span.key == "Ash" and "N: Then Ash left."[span.start:span.end] == "Ash"


def test_lowercasing_that_changes_lengths_keeps_offsets_in_the_original_text():
    text = "\u0130zmir races"                      # 'İ' lowercases to two characters
    span = find_plain_key(text, "RACE", case_sensitive=False, whole_words=False, options=ST_OPTIONS)
    assert span is not None and text[span[0]:span[1]] == "race"


def test_whole_words_skip_inner_occurrences_to_the_one_at_word_edges():
    text = "embrace the race"
    span = find_plain_key(text, "race", case_sensitive=False, whole_words=True, options=ST_OPTIONS)
    assert span == (12, 16)


@hsettings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="aAbB _-\u0130\u00e9\n\x01", max_size=24), key=st.text(alphabet="aAbB _\u00e9", max_size=4),
       cs=st.booleans(), ww=st.booleans(), improved=st.booleans())
def test_find_plain_key_finds_exactly_when_match_plain_key_matches(text, key, cs, ww, improved):
    options = MatchOptions.improved() if improved else ST_OPTIONS
    found = find_plain_key(text, key, case_sensitive=cs, whole_words=ww, options=options)
    assert (found is not None) == match_plain_key(text, key, case_sensitive=cs, whole_words=ww, options=options)
    if found is not None and key.strip() and text.lower() == "".join(ch.lower() for ch in text) \
            and len(text.lower()) == len(text):
        piece = text[found[0]:found[1]]
        assert (piece if cs else piece.lower()) == (key if cs else key.lower())


def test_regex_find_gives_the_span_search_says_exists():
    cases = [("st(or)?m", "i", "A STORM", (2, 7)), ("\\x01b", "", "\x01a\n\x01b", (3, 5)),
             ("b.c", "", "ab\U0001F600c", None),              # without u, "." takes one UTF-16 unit
             ("b..c", "", "ab\U0001F600c", (1, 4)), ("b.c", "u", "ab\U0001F600c", (1, 4)), ("a", "y", "ba", None)]
    for pattern, flags, text, want in cases:
        rx = compile_js_regex(pattern, flags)
        assert rx.find(text) == want, (pattern, flags, text)
        assert (want is not None) == rx.search(text)


def test_locate_key_without_joining_never_reaches_across_texts():
    parts = [WindowPart("message", 0, "message 0", "a storm"), WindowPart("message", 1, "message 1", "is coming")]
    rx = compile_js_regex("storm\\s+\\x01is", "")
    assert locate_key(parts, "/storm\\s+\\x01is/", regex=rx, options=ST_OPTIONS).across
    assert locate_key(parts, "/storm\\s+\\x01is/", regex=rx, options=ST_OPTIONS, joined=False) is None


def test_explain_shows_each_span_and_its_case():
    r = subprocess.run([sys.executable, "-m", "lorescan", "explain", str(BOOK), "--chat", str(CHAT), "--recursive"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = {line.split("  ")[0]: line for line in r.stdout.splitlines() if line.startswith("#")}
    assert "in message 3, the newest: \"You: She ran to emb[race] her brother at the door.\", " \
           "inside the longer word 'embrace'" in lines["#0 Race"]
    assert "across two texts of the joined window, message 2 and message 1: " \
           "\"…The lighthouse holds against the [storm⏎You: Is coming], they say.\"" in lines["#1 Storm warning"]
    assert "in recursion text 1 (the content of #2 Lighthouse): " in lines["#3 Saltmere guild"]
    assert "[Saltmere] guild." in lines["#3 Saltmere guild"]


def test_explain_json_carries_the_span_with_the_chat_numbering():
    r = subprocess.run([sys.executable, "-m", "lorescan", "explain", str(BOOK), "--chat", str(CHAT), "--recursive",
                        "--json"], capture_output=True, text=True, timeout=300)
    rows = {row["uid"]: row for row in json.loads(r.stdout)["entries"]}
    assert rows[0]["span"]["text"] == "message 3, the newest" and rows[0]["span"]["inside_word"] == "embrace"
    assert (rows[1]["span"]["text"], rows[1]["span"]["end_text"]) == ("message 2", "message 1")
    assert rows[3]["span"]["source_entry"] == "spans.2"


def test_replay_summary_flags_unusual_matches():
    replay = replay_chat([load(str(BOOK))], load_chat(str(CHAT)), settings={"scan_depth": 3, "recursive": True})
    last = text_summary(replay)[-2]
    assert "Race (\"You: She ran to emb[race] her brother at the door.\": in message 3, the newest; " \
           "inside the longer word 'embrace')" in last
    assert "Storm warning (" in last and "across message 2 and message 1" in last
    assert "Saltmere guild (" in last and "in recursion text 1, the content of spans.2" in last
    assert "Lighthouse," in last or last.rstrip().endswith("Lighthouse")


@hsettings(max_examples=150, deadline=None)
@given(book=books(), chat=st.lists(texts, min_size=1, max_size=4), cs=st.booleans(), ww=st.booleans(),
       depth=st.integers(1, 4))
def test_every_key_activation_has_a_span_where_the_engine_matched(book, chat, cs, ww, depth):
    """Differential: whatever the engine fired by key, the explanation finds the match again (the
    trap-laden texts and keys of tests/support/matchgen.py, macros, recursion), and the span's offsets
    cut the matched text out of the message it names."""
    from lorescan.js.text import js_trim
    engine = STEngine([BookSource(book, ("global",))],
                      STSettings(recursive=True, case_sensitive=cs, match_whole_words=ww, scan_depth=depth),
                      substitute=lambda s: s.replace("{{char}}", "Alice").replace("{{user}}", "Bob"))
    messages = [ChatMessage("N", t) for t in chat]
    scanned = [js_trim(f"N: {t}") for t in reversed(chat)]          # newest first, as the haystack runs
    r = engine.scan(messages, max_context=100_000)
    for d in r.diagnostics.values():
        if d.outcome != "activated" or d.reason != "key":
            continue
        span = d.span
        assert span is not None, (d, chat)
        if span.kind == "message" and not span.across:
            # a regex may take in the U+0001 before its text or the "\n" after it: offsets stay in the text
            # (the marker only where the match starts the text: a text may hold a U+0001 of its own)
            inner = span.matched.removeprefix("\x01") if span.start == 0 else span.matched
            inner = inner.removesuffix("\n") if span.end == len(scanned[span.index]) else inner
            assert scanned[span.index][span.start:span.end] == inner, (span, d.key, chat)


_REGEX_KEYS = [rx for rx in (tool_regex(k) for k in KEY_ATOMS) if rx is not None]


@hsettings(max_examples=300, deadline=None)
@given(which=st.integers(0, len(_REGEX_KEYS) - 1), text=texts)
def test_regex_find_agrees_with_search_and_its_span_matches_there(which, text):
    rx = _REGEX_KEYS[which]
    span = rx.find(text)
    assert (span is not None) == rx.search(text)
    if span is not None:
        assert 0 <= span[0] <= span[1] <= len(text)


def test_the_same_span_is_named_the_same_in_explain_the_report_and_replay(tmp_path):
    """docs/sillytavern-mode.md#cli-turns: a message is named by the chat file's number (a system
    message counts), with only the newest marked, in explain's text, the HTML report and replay's
    line alike. The chat here is tests/data/spans/ with a system message after its first one, so
    the file numbers (1, 3, 4) differ from both "newest = 0" and the scanned messages' places."""
    lines = CHAT.read_text(encoding="utf-8").splitlines()
    system = json.dumps({"name": "Narrator", "is_user": False, "is_system": True, "mes": "A note."})
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join([*lines[:2], system, *lines[2:]]) + "\n", encoding="utf-8")
    report = tmp_path / "report.html"
    common = [str(BOOK), "--chat", str(chat), "--recursive"]

    def run(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "lorescan", *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout

    explained = {line.split("  ")[0]: line for line in run("explain", *common).splitlines() if line.startswith("#")}
    replayed = run("replay", *common, "--scan-depth", "3", "--report", str(report)).splitlines()
    page = report.read_text(encoding="utf-8")
    storm_names, race_name = ("message 3", "message 1"), "message 4, the newest"
    assert f"across two texts of the joined window, {storm_names[0]} and {storm_names[1]}:" \
        in explained["#1 Storm warning"]
    assert f"in {race_name}:" in explained["#0 Race"]
    last = next(line for line in reversed(replayed) if line.startswith("turn "))
    assert f"across {storm_names[0]} and {storm_names[1]}" in last and f"in {race_name}; inside the longer" in last
    # the report's page data holds each span's place as one string
    assert json.dumps(f"{storm_names[0]} into {storm_names[1]}") in page
    assert json.dumps(f"{race_name}; inside the longer word \u2018embrace\u2019", ensure_ascii=True) in page
    assert "newest = 0" not in page
