"""ChatScan: each text scanned once, reused across turns and chats, bounded memory."""
from __future__ import annotations

import pytest

import lorescan.match.cache as hitcache
from lorescan.formats import book_from_entries
from lorescan.st.compiled import compile_book
from lorescan.match.cache import ChatScan
from lorescan.match.view import Window
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields

BOOK = Lorebook(name="t", entries=tuple(entry_from_fields({"uid": i, "key": [k]}, uid=i)
                                        for i, k in enumerate(["alpha", "beta", "gamma"])))


def test_each_text_is_scanned_once_across_turns():
    compiled = compile_book(BOOK)
    cache = ChatScan()
    chat = ["alpha one", "beta two", "gamma three"]
    for turn in range(1, len(chat) + 1):
        messages = list(reversed(chat[:turn]))
        view = book_view(compiled, messages, cache=cache)
        view.candidates(10, 0)
    # each text scanned once; the older ones are not even looked up again: the window's vid
    # counts, kept in the ChatScan from turn to turn, hold them (ScanView._message_union)
    assert cache.miss_count == 3 and cache.hit_count == 0


def test_other_chats_with_the_same_book_reuse_the_hits():
    compiled = compile_book(BOOK)
    cache = ChatScan()
    book_view(compiled, ["alpha one"], cache=cache).candidates(5, 0)
    book_view(compiled, ["alpha one", "beta"], cache=cache).candidates(5, 0)
    assert cache.miss_count == 2 and cache.hit_count == 1


def test_different_books_do_not_share_entries():
    cache = ChatScan()
    a, b = compile_book(BOOK), compile_book(BOOK)
    assert list(book_view(a, ["alpha"], cache=cache).candidates(1, 0)) == [0]
    assert list(book_view(b, ["alpha"], cache=cache).candidates(1, 0)) == [0]
    assert cache.miss_count == 2


def test_count_bound_evicts_least_recently_used():
    compiled = compile_book(BOOK)
    cache = ChatScan(max_texts=2)
    for text in ("alpha", "beta", "alpha", "gamma"):
        cache.lookup(compiled.keys.matcher, text)
    assert len(cache) == 2
    cache.lookup(compiled.keys.matcher, "alpha")          # still there: it was used after beta
    assert cache.miss_count == 3


def test_byte_bound_is_respected():
    compiled = compile_book(BOOK)
    cache = ChatScan(max_bytes=20_000)
    for i in range(500):
        cache.lookup(compiled.keys.matcher, f"alpha {i} " + "x" * 100)
    assert cache.nbytes <= 20_000 and 0 < len(cache) < 500


def test_cached_hits_are_immutable_values():
    compiled = compile_book(BOOK)
    cache = ChatScan()
    assert isinstance(cache.lookup(compiled.keys.matcher, "alpha beta"), frozenset)


def test_no_module_level_cache_state():
    mutable = [name for name, value in vars(hitcache).items()
               if isinstance(value, (dict, list, set)) and not name.startswith("__")]
    assert mutable == []


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        ChatScan(max_texts=0)


def test_results_do_not_depend_on_the_cache():
    compiled = compile_book(BOOK)
    cache = ChatScan(max_texts=1)
    for messages in (["alpha", "beta"], ["gamma", "alpha"], ["beta"]):
        with_cache = book_view(compiled, messages, cache=cache)
        without = book_view(compiled, messages)
        for i in range(3):
            assert with_cache.match_entry(i, Window(2)) == without.match_entry(i, Window(2))


def test_cached_runs_of_old_messages_give_exact_windows_as_the_chat_grows():
    import random

    from tests.support.reference_matcher import ReferenceScanView
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "x", "", "  ", "Alpha!", "gam", "ma"]
    chat = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 3))) for _ in range(90)]
    compiled = compile_book(BOOK)
    cache = ChatScan(max_texts=50)
    for turn in range(1, len(chat) + 1):
        messages = chat[turn - 1::-1]
        view = book_view(compiled, messages, cache=cache)
        ref = ReferenceScanView(compiled, messages)
        for depth in (1, 3, 4, 5, 17, 33, 64, 100):
            for i in range(3):
                assert view.match_entry(i, Window(depth)) == ref.match_entry(i, Window(depth)), (turn, depth, i)


def test_message_blocks_align_on_chat_positions_so_a_steady_turn_stores_little():
    # An engine passes only the newest messages; with oldest_index the blocks of a window
    # deeper than the counted ones (viewhits._COUNTED_DEPTH) recur from turn to turn (a turn
    # adds its message and now and then one block), while blocks aligned on the passed slice
    # shift with it and are all new every turn. A counted window stores only its new message.
    from lorescan.match.viewhits import _COUNTED_DEPTH
    compiled = compile_book(book_from_entries("L", [{"uid": i, "key": [f"w{i}"], "content": "c"}
                                                    for i in range(10)]))
    chat = [f"msg {i} w{i % 10}" for i in range(400)]

    def stored_per_turn(aligned: bool, depth: int) -> float:
        cache = ChatScan()
        grown = []
        for length in range(depth + 20, depth + 84):
            newest = chat[length - depth:length][::-1]
            before = len(cache)
            view = book_view(compiled, newest, cache=cache, oldest_index=length - depth if aligned else 0)
            expected = book_view(compiled, chat[:length][::-1]).candidates(depth, 0)
            assert view.candidates(depth, 0) == expected
            grown.append(len(cache) - before)
        return sum(grown[8:]) / len(grown[8:])
    deep = 2 * _COUNTED_DEPTH
    assert stored_per_turn(True, deep) < 2 < stored_per_turn(False, deep)
    assert stored_per_turn(True, 20) == stored_per_turn(False, 20) == 1


def test_named_text_gives_the_same_string_object_turn_after_turn_within_its_bound():
    cache = ChatScan(max_bytes=64 * 1024)
    first = cache.named_text("Ann", "hello there")
    assert first == "Ann: hello there" and cache.named_text("Ann", "hello there") is first
    assert cache.named_text("Bob", "hello there") == "Bob: hello there"
    for i in range(2000):                     # far more than the bound holds
        assert cache.named_text("Ann", f"{i} " + "x" * 500) == f"Ann: {i} " + "x" * 500
        assert cache._named_bytes <= cache.max_bytes // 8
    assert len(cache._named) <= 512
    cache.clear()
    assert cache.named_text("Ann", "hello there") is not first     # emptied with the rest


def test_named_texts_is_named_text_of_each_pair_in_order():
    cache = ChatScan(max_bytes=64 * 1024)
    held = cache.named_text("Ann", "hello there")
    pairs = [("Bob", "hi"), ("Ann", "hello there"), ("", "no name"), ("Bob", "hi")]
    out = cache.named_texts(pairs)
    assert out == ["Bob: hi", "Ann: hello there", ": no name", "Bob: hi"]
    assert out[1] is held and out[3] is out[0]          # the held strings, one object per message
    assert [a is b for a, b in zip(cache.named_texts(pairs), out)] == [True] * 4
    for i in range(600):                       # past the bound: emptied meanwhile, still each pair's string
        got = cache.named_texts([("Ann", f"{i} " + "x" * 500), ("Bob", "hi")])
        assert got == [f"Ann: {i} " + "x" * 500, "Bob: hi"]


def test_windows_and_records_kept_for_the_next_turn_are_bounded():
    cache = ChatScan()
    for i in range(3 * hitcache._MAX_WINDOWS):
        cache.put_window(("t", i), ((), (), {}, frozenset()), 10)
    assert len(cache._windows) == hitcache._MAX_WINDOWS and cache.take_window(("t", 0)) is None
    assert cache.take_window(("t", 3 * hitcache._MAX_WINDOWS - 1)) is not None
    big = hitcache._MAX_WINDOW_ITEMS // 4
    for i in range(8):
        cache.put_window(("u", i), ((), (), {}, frozenset()), big)
    assert cache._window_items <= hitcache._MAX_WINDOW_ITEMS
    assert cache._window_items == sum(n for _, n in cache._windows.values())
    cache.put_window(("v", 0), ((), (), {}, frozenset()), big + 1)      # larger than a quarter: not kept
    assert cache.take_window(("v", 0)) is None
    for i in range(5):
        cache.keep_record("slot", i, i)
    assert list(cache.records("slot").items()) == [(i, i) for i in range(5 - hitcache._MAX_RECORDS, 5)]
    cache.clear()
    assert cache.records("slot") is None and not cache._windows and cache._window_items == 0
