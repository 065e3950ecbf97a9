"""The janitor fast path (one automaton, per-message cache) against the per-entry regex oracle
(tests/support/janitor_reference.py), on generated terms, books and growing chats."""
from __future__ import annotations

import random as _random

from hypothesis import given, settings, strategies as st

from lorescan.janitor import JanitorEngine
from lorescan.janitor.entries import TermTable
from lorescan.janitor.normalise import SCRIPT, normalise_script
from lorescan.janitor.scan import TermScanner
from tests.support.janitor_gen import WORDS, random_book as _book
from tests.support.janitor_reference import has_term, normalise, run_reference

NOISE = [" ", "  ", ",", "-", "_", "!", "\t", "\n", "\u00a0", "\u0085", "é", "İ", "\u212a", "*", "'"]

words = st.sampled_from(WORDS)
pieces = st.one_of(words, words.map(str.upper), st.sampled_from(NOISE))
messages = st.one_of(st.lists(pieces, max_size=10).map("".join),
                     st.lists(words, max_size=3).map(" ".join))      # short ones: phrases span messages
terms = st.one_of(
    st.lists(words, min_size=1, max_size=3).map(" ".join),
    st.lists(words, min_size=1, max_size=3).map(lambda ws: " ".join(ws) + "*"),
    st.lists(words, min_size=1, max_size=2).map(lambda ws: " ".join(ws) + " *"),
    st.lists(pieces, max_size=5).map("".join),
    st.sampled_from(["*", "", "  ", "dark  mage", "dark-mage", "ma**", None, 12, True]),
)


def _scanner(term_values):
    table = TermTable(SCRIPT)
    ids = [table.add(v) for v in term_values]
    return TermScanner(table.terms, SCRIPT), ids


@settings(max_examples=400, deadline=None)
@given(term_values=st.lists(terms, min_size=1, max_size=12), windows=st.lists(st.lists(messages, max_size=5),
                                                                               min_size=1, max_size=4))
def test_the_automaton_matches_exactly_the_terms_the_regexes_match(term_values, windows):
    scanner, ids = _scanner(term_values)
    for window in windows:                   # one scanner across windows: the cache is exercised
        norms = [normalise_script(m) for m in window]
        hay = " " + normalise(" ".join(window)) + " "
        got = scanner.scan(norms)
        for value, tid in zip(term_values, ids):
            assert (tid in got) == has_term(hay, value), (value, hay)
        assert scanner.scan_text(hay) == got


def test_a_phrase_across_three_messages_and_a_spaced_stem_at_a_join():
    scanner, (abc, foo_any, foo_end) = _scanner(["dark the mage", "mage *", "x *"])
    assert {abc, foo_any} <= scanner.scan(["dark", "the", "mage", "mages"])
    got = scanner.scan(["mage", "12 dark"])          # the next message's first word has a digit
    assert foo_any not in got
    assert foo_end in scanner.scan(["dark x"]) and foo_end not in scanner.scan(["dark x", "a1"])


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**9), n=st.integers(0, 25), chat=st.lists(messages, min_size=1, max_size=9),
       limit=st.sampled_from([6, 2, 0, 2.5]), depth=st.sampled_from([5, 2, 1, 20]))
def test_the_engine_agrees_with_the_per_entry_oracle_over_a_growing_chat(seed, n, chat, limit, depth):
    rng = _random.Random(seed)
    book = _book(rng, n)
    engine = JanitorEngine(book, apply_limit=limit, window_depth=depth)
    for turn in range(1, len(chat) + 1):           # one engine for the whole chat: caches carry over
        context = {"character": {"name": "Mira", "personality": "Base.", "scenario": ""},
                   "chat": {"last_messages": [{"message": m} for m in chat[:turn]]}}
        values = [rng.random() for _ in range(4 * n + 4)]
        it = iter(values)
        want = run_reference(book, context, lambda: next(it), apply_limit=limit, window_depth=depth)
        got = engine.run(context, random=values[:want["random_calls"]]).to_json()
        assert got == want
