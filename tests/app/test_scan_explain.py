"""The pieces behind ``lorescan scan``/``explain`` as a library caller meets them: the chat
reader, the name macros, near-misses, the words and the one-line cells, and
``Diagnostic.__str__``."""
from __future__ import annotations

import json

import pytest

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.formats import book_from_entries
from lorescan.app.chats import ChatFile, read_chat
from lorescan.app.inputs import make_substitute
from lorescan.app.nearmiss import ChatTexts, near_misses, plural, show_key
from lorescan.app.render import one_line
from lorescan.errors import FormatError
from lorescan.match import MatchOptions


def _entry(i, **fields):
    return {"uid": i, "key": [], "keysecondary": [], "content": f"c{i}", "comment": f"e{i}", "constant": False,
            "selective": True, "selectiveLogic": 0, "order": 100 - i, "position": 0, "disable": False, **fields}


def test_read_chat_numbers_messages_as_in_the_file_and_skips_system_ones(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"user_name": "U", "character_name": "C"},
        {"name": "C", "mes": "one"}, {"name": "S", "mes": "sys", "is_system": True},
        {"name": "U", "mes": "three", "is_user": True}]) + "\n")
    chat = read_chat(str(path))
    assert [m.text for m in chat.messages] == ["one", "three"]
    assert chat.numbers == (1, 3) and chat.total == 3 and chat.roles == ("assistant", "user")
    assert (chat.user_name, chat.character_name) == ("U", "C")


def test_read_chat_errors_name_the_message_not_an_entry(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "user", "content": 5}]))
    with pytest.raises(FormatError) as err:
        read_chat(str(path))
    assert "message 2" in str(err.value) and "entry" not in str(err.value) and str(path) in str(err.value)


def test_the_name_macros():
    sub = make_substitute("Ida", "Rowan")
    assert sub("{{user}} <USER> {{Char}} <bot> <CHAR> {{charIfNotGroup}} {{group}} {{other}}") == \
        "Rowan Rowan Ida Ida Ida Ida Ida {{other}}"
    assert make_substitute(None, "Rowan")("{{char}} {{user}}") == "{{char}} Rowan"
    assert make_substitute(None, None) is None
    assert make_substitute("$1 \\g<0>", None)("{{char}}") == "$1 \\g<0>", "names are not replacement patterns"


def _near(entries, texts, **settings):
    book = book_from_entries("B", [_entry(i, **e) for i, e in enumerate(entries)])
    st = STSettings(**settings)
    msgs = tuple(ChatMessage("N", t) for t in texts)
    chat = ChatFile("<memory>", msgs, tuple(range(1, len(msgs) + 1)), len(msgs), ("assistant",) * len(msgs))
    result = STEngine([BookSource(book, ("global",))], st).scan(list(msgs), max_context=8192)
    view = ChatTexts(chat, st.include_names)
    options = MatchOptions.sillytavern(case_sensitive=st.case_sensitive, match_whole_words=st.match_whole_words)
    return [[n.kind for n in near_misses(e, result.explain("B", e.uid), view, st, options)]
            for e in book.entries], result


def test_near_misses_of_each_kind_and_none_for_a_clean_miss():
    kinds, _ = _near([
        {"key": ["anchor"]},                                        # beyond the depth
        {"key": ["fish"], "matchWholeWords": True},                 # inside a longer word
        {"key": ["Pier"], "caseSensitive": True},                   # another case
        {"key": ["pier"], "keysecondary": ["ale"], "selectiveLogic": 3},   # secondary logic
        {"key": ["nowhere"]},                                       # a plain miss
        {"key": ["/anch?or/i"]},                                    # a regex beyond the depth
        {"key": ["pier"]},                                          # fired: no near-miss
    ], ["the anchor", "b", "the fisherman on the pier"], scan_depth=2)
    assert kinds == [["beyond_depth"], ["inside_word"], ["case"], ["secondary"], [], ["beyond_depth"], []]


def test_a_key_that_only_occurs_beyond_the_depth_inside_a_word_is_still_named():
    kinds, _ = _near([{"key": ["fish"], "matchWholeWords": True}], ["fisherman", "b", "c"], scan_depth=1)
    assert kinds == [["inside_word"]]


def test_words_and_cells():
    assert plural(1, "message") == "1 message" and plural(2, "message") == "2 messages"
    assert plural(1, "entry", "entries") == "1 entry" and plural(0, "entry", "entries") == "0 entries"
    assert show_key(r"/\bstorm\b/i") == r"/\bstorm\b/i"
    assert show_key('say "hi"\n') == '"say \\"hi\\"\\n"'
    assert one_line("a\nb\x1b[31m\tc", 20) == "a⏎b?[31m c"
    assert one_line("x" * 10, 5) == "xxxx…"


def test_a_diagnostic_reads_as_a_sentence():
    book = book_from_entries("B", [_entry(0, key=["lighthouse"]), _entry(1, key=["ida"])])
    r = STEngine([BookSource(book, ("global",))]).scan([ChatMessage("a", "the lighthouse")], max_context=8192)
    assert str(r.explain("B", 0)) == \
        "Entry B.0 fired (key): primary key 'lighthouse' matched in message 0 (newest = 0): \"a: the [lighthouse]\", loop 1."
    assert str(r.explain("B", 1)) == "Entry B.1 did not fire (no_key_match): no primary key matched."
