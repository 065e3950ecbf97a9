"""compile_book: one automaton over every key variant, content hits, immutability, sharing."""
from __future__ import annotations

import dataclasses
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest

from lorescan.st.compiled import compile_book
from lorescan.match.cache import ChatScan
from lorescan.match.view import Window
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields
from lorescan.match import MatchOptions


def _book(*entries: dict) -> Lorebook:
    return Lorebook(name="t", entries=tuple(entry_from_fields(dict(e, uid=i), uid=i) for i, e in enumerate(entries)))


BOOK = _book(
    {"key": ["Alice", "the Queen"], "keysecondary": ["crown"], "content": "Alice rules Wonderland with Bob."},
    {"key": ["Bob", "/bo+b/i"], "content": "Bob is the Queen's gardener."},
    {"key": ["alice"], "caseSensitive": True, "matchWholeWords": True, "content": "Lower-case alice."},
    {"key": ["  ", ""], "content": "blank keys"},
    {"key": ["Σίσυφος"], "content": "ΣΊΣΥΦΟΣ"},
)


def _results(compiled, messages, cache=None):
    view = book_view(compiled, messages, cache=cache)
    windows = (Window(1), Window(3), Window(3, recursion=1))
    view.add_recursion_chunk("\n".join(e.content for e in compiled.entries[:2]), entries=[0, 1])
    return [(view.match_entry(i, w), view.score_entry(i, w)) for w in windows for i in range(len(compiled.entries))]


CHATS = [["Alice met bob", "the queen's crown"], ["nothing here", "ALICE?"], ["σίσυφος", "alice"], ["", "  "],
         ["Bobby and Alice", "x"], ["the Queen", "crown"], ["boob", "Bob"], ["Σίσυφος", "ΣΊΣΥΦΟΣ"]] * 4


def test_all_plain_variants_share_one_automaton_and_identical_variants_share_an_id():
    compiled = compile_book(_book({"key": ["Cat", "cat"]}, {"key": ["CAT"]}, {"key": ["cat"], "caseSensitive": True}))
    # "Cat", "cat", "CAT" lowercase to one case-insensitive variant; the case-sensitive "cat" is another
    assert compiled.keys.specs == (("cat", False, False), ("cat", True, False))
    assert len(compiled.keys.matcher.automaton) == 1          # one pattern string serves both passes
    assert compiled.keys.vid_entries == ((0, 1), (2,))


def test_entry_overrides_are_resolved_against_the_options():
    compiled = compile_book(_book({"key": ["Ab c"]}, {"key": ["Ab c"], "matchWholeWords": False}),
                            MatchOptions(match_whole_words=True, multiword="bounded"))
    assert compiled.keys.specs == (("ab c", False, True), ("ab c", False, False))


def test_special_keys_make_the_entry_always_a_candidate():
    compiled = compile_book(BOOK)
    assert compiled.keys.always == (3,)          # the regex key of entry 1 has the literal "bo"
    assert compile_book(BOOK, MatchOptions.improved()).keys.always == ()


def test_content_hits_are_computed_at_compile_time():
    compiled = compile_book(BOOK)
    alice = compiled.keys.specs.index(("alice", False, False))
    bob = compiled.keys.specs.index(("bob", False, False))
    assert alice in compiled.keys.content_hits[0] and bob in compiled.keys.content_hits[0]
    assert compiled.keys.content_hits[3] == frozenset()


def test_compiled_book_is_immutable():
    compiled = compile_book(BOOK)
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.options = MatchOptions()      # type: ignore[misc]


def test_pickle_round_trip_gives_the_same_results():
    compiled = compile_book(BOOK, MatchOptions(match_whole_words=True))
    clone = pickle.loads(pickle.dumps(compiled))
    assert clone.keys.specs == compiled.keys.specs and clone.keys.content_hits == compiled.keys.content_hits
    for chat in CHATS[:8]:
        assert _results(clone, chat) == _results(compiled, chat)


def test_a_shared_book_and_cache_give_the_serial_results_from_eight_threads():
    compiled = compile_book(BOOK, MatchOptions(match_whole_words=True))
    serial = [_results(compiled, chat) for chat in CHATS]
    cache = ChatScan(max_texts=5)          # shared and tiny: concurrent evictions
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda chat: _results(compiled, chat, cache), CHATS))
    assert threaded == serial
