"""The compiled matcher vs the naive reference: compile cost, steady-state turn cost.

A turn = what an engine does each generation: build a ScanView over the chat (newest
first), ask for candidates, call match_entry for each candidate. Steady state = only the
newest message is new: every round appends one message the cache has never seen.
Targets (issue 2): turn at 10k entries, depth 50, substring mode >= 1000x faster than the
naive reference; depth 100 < 2x depth 10; compiling 100k entries at most 7x building the bare
automaton of the same keys in the same run (the old absolute target was < 5 s) and < 1 GiB.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_match.py`` (add
``LORESCAN_BENCH_SHORT=1`` for the short mode that CI runs).
"""
from __future__ import annotations

import resource
import statistics
import time

import ahocorasick
import pytest

from conftest import SHORT, make_chat, median_seconds
from lorescan import BACKEND
from lorescan.st.compiled import compile_book
from lorescan.match.cache import ChatScan
from lorescan.match.view import Window
from tests.support import book_view
from tests.support.reference_matcher import ReferenceScanView

GIB = 1 << 30
ROUNDS = 30 if SHORT else 200
NAIVE_RUNS = 1 if SHORT else 3
# Compiling 100k entries: at most this many times the bare automaton of the same keys, built in the
# same run (2.7x to 5x measured here: 5.4 s against 2.0 s, 7.3 s against 1.47 s, both with other work running).
COMPILE_VS_BARE = 7


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


class Chat:
    """A 1,000-message chat plus fresh messages, one per steady-state round."""

    def __init__(self, compiled, depth: int, extra: int) -> None:
        book = compiled.book
        self.all = make_chat(book, 1000 + extra + 1)
        self.compiled, self.depth = compiled, depth
        self.cache = ChatScan()
        self.turn_no = 1000
        self.turn(self.newest_first(self.turn_no))          # warm: the chat so far is cached

    def newest_first(self, n: int) -> list[str]:
        return self.all[n - 1::-1]

    def next_turn(self):
        self.turn_no += 1
        return (self.newest_first(self.turn_no),), {}

    def turn(self, messages: list[str]) -> int:
        view = book_view(self.compiled, messages, cache=self.cache)
        window = Window(self.depth)
        cands = view.candidates(self.depth, 0)
        for i in cands:
            view.match_entry(i, window)
        return len(cands)

    def naive_turn(self) -> None:
        view = ReferenceScanView(self.compiled, self.newest_first(self.turn_no))
        window = Window(self.depth)
        for i in range(len(self.compiled.entries)):
            view.match_entry(i, window)


_COMPILED: dict[int, object] = {}


def _compiled(synthetic_book, n: int):
    if n not in _COMPILED:
        _COMPILED[n] = compile_book(synthetic_book(n))
    return _COMPILED[n]


@pytest.mark.benchmark(group="compile")
@pytest.mark.parametrize("n", [1_000, 10_000, 100_000])
def bench_compile(benchmark, synthetic_book, n):
    book = synthetic_book(n)
    before = _rss_bytes()
    compiled = benchmark.pedantic(compile_book, args=(book,), rounds=1 if (SHORT or n == 100_000) else 3,
                                  iterations=1)
    # peak RSS after minus RSS before bounds the growth during compiling from above
    peak_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    retained = _rss_bytes() - before
    _COMPILED.setdefault(n, compiled)
    benchmark.extra_info.update(backend=BACKEND, variants=len(compiled.keys.specs),
                                peak_growth_mib=round(peak_growth / 2**20, 1), retained_mib=round(retained / 2**20, 1))
    if benchmark.disabled:
        return
    seconds = benchmark.stats.stats.max
    if n == 100_000:
        bare = median_seconds(lambda: _bare_automaton(book), 1 if SHORT else 3)
        benchmark.extra_info.update(seconds=round(seconds, 2), bare_automaton_seconds=round(bare, 3))
        assert seconds / bare <= COMPILE_VS_BARE, (
            f"compiling 100k entries took {seconds:.2f} s, {seconds / bare:.1f}x building the bare automaton of "
            f"the same keys ({bare:.2f} s; target <= {COMPILE_VS_BARE}x)")
        assert peak_growth / GIB < 1, f"compiling 100k entries grew RSS by {peak_growth / 2**20:.0f} MiB"


def _bare_automaton(book) -> None:
    """The irreducible core of compiling, the same-run baseline: every primary and secondary key,
    lower-cased, into one pyahocorasick automaton (no variants, specs, plans or content hits)."""
    automaton = ahocorasick.Automaton()
    for i, entry in enumerate(book.entries):
        for key in (*entry.key, *entry.keysecondary):
            if key:
                automaton.add_word(key.lower(), i)
    automaton.make_automaton()


@pytest.mark.benchmark(group="turn")
@pytest.mark.parametrize("depth", [10, 50, 100])
@pytest.mark.parametrize("n", [1_000, 10_000, 100_000])
def bench_steady_turn(benchmark, synthetic_book, n, depth):
    chat = Chat(_compiled(synthetic_book, n), depth, ROUNDS + 5)
    naive = None
    if n <= 10_000 or (depth == 50 and not SHORT):
        naive = median_seconds(chat.naive_turn, NAIVE_RUNS)       # same run, same book and window
    benchmark.pedantic(chat.turn, setup=chat.next_turn, rounds=ROUNDS, iterations=1)
    if benchmark.disabled:
        return
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(backend=BACKEND, candidates=chat.turn(chat.newest_first(chat.turn_no)))
    if naive is not None:
        ratio = naive / median
        benchmark.extra_info.update(naive_seconds=round(naive, 4), speedup_vs_naive=round(ratio, 1))
        if n == 10_000 and depth == 50:
            assert ratio >= 1000, f"steady-state turn is only {ratio:.0f}x the naive matcher"


@pytest.mark.benchmark(group="depth")
def bench_depth_100_costs_less_than_twice_depth_10(benchmark, synthetic_book):
    compiled = _compiled(synthetic_book, 10_000)
    rounds = 4 * ROUNDS
    shallow, deep = Chat(compiled, 10, rounds + 5), Chat(compiled, 100, rounds + 5)

    def timed(chat: Chat) -> float:
        (messages,), _ = chat.next_turn()
        t = time.perf_counter()
        chat.turn(messages)
        return time.perf_counter() - t
    # interleaved turn by turn, alternating which depth goes first, and the ratio is the median of the
    # per-pair ratios: a slow spell on a shared machine hits both turns of a pair alike (measured
    # one after the other, a CI run once gave 2.05x against 1.1-1.3x here)
    ratios, shallow_times, deep_times = [], [], []
    for r in range(rounds):
        if r % 2:
            d = timed(deep)
            s = timed(shallow)
        else:
            s = timed(shallow)
            d = timed(deep)
        shallow_times.append(s)
        deep_times.append(d)
        ratios.append(d / s)
    benchmark.pedantic(deep.turn, setup=deep.next_turn, rounds=ROUNDS, iterations=1)   # the table's row
    if benchmark.disabled:
        return
    ratio = statistics.median(ratios)
    benchmark.extra_info.update(depth10_seconds=statistics.median(shallow_times),
                                depth100_seconds=statistics.median(deep_times),
                                depth100_over_depth10=round(ratio, 2))
    assert ratio < 2, f"a depth-100 turn costs {ratio:.2f}x a depth-10 turn (median of {rounds} pairs)"
