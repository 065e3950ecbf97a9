"""SillyTavern mode on real data: corpus books over a real 700-message group chat.

Steady state (only the newest message new, a shared ChatScan) at depth 20 with whole words
and recursion on, against the same engine on the naive reference matcher (every key of every
entry tested on the assembled haystack, as docs/sillytavern-mode.md#st-scan-text reads literally),
measured in the same run.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from unittest import mock

import pytest

from conftest import need_shared
from lorescan import BookSource, ChatMessage, ChatScan, STEngine, STSettings, load
from tests.support.reference_matcher import ReferenceScanView, forget_caches

ROOT = Path(__file__).resolve().parents[1]
SHORT = os.environ.get("LORESCAN_BENCH_SHORT") == "1"
ROUNDS = 60 if SHORT else 120   # a round costs well under a millisecond
NAIVE_EVERY = 12                 # one naive turn per 12 rounds: 5 samples in short mode
START = 300


@pytest.fixture(scope="module")
def chat():
    out = []
    for line in need_shared("corpus/chats/en-dmc-group-branch734.jsonl").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "mes" in m and not m.get("is_system"):
            out.append(ChatMessage(m.get("name", ""), m["mes"]))
    return out


def _steady_turn_vs_naive(benchmark, chat, book_name: str, count_tokens=None) -> float:
    """A steady-state turn (one new message, the rest cached) of a real book at depth 20 with
    whole words and recursion, and the same engine on the naive matcher: the speed-up."""
    book = load(str(need_shared("corpus/books/" + book_name)))
    engine = STEngine([BookSource(book, ("global",))],
                      STSettings(scan_depth=20, recursive=True, match_whole_words=True), count_tokens=count_tokens)
    cache = ChatScan()
    for t in range(START - 10, START):
        engine.scan(chat[:t], max_context=16000, cache=cache)
    state = {"t": START}
    naive_times: list[float] = []

    def naive_turn() -> None:
        forget_caches()
        with mock.patch("lorescan.st.engine.ScanView", ReferenceScanView):
            engine.scan(chat[:START], max_context=16000)

    def setup():
        # The naive baseline is timed here, between measured rounds (setup is not timed), so
        # both sides of the ratio sample the same stretch of machine noise: a burst of load
        # slows both instead of only the fast turns, which all fall within a few milliseconds.
        if (state["t"] - START) % NAIVE_EVERY == 0 and not benchmark.disabled:
            t = time.perf_counter()
            naive_turn()
            naive_times.append(time.perf_counter() - t)
        state["t"] += 1
        return (chat[:state["t"]],), {"max_context": 16000, "cache": cache}

    benchmark.pedantic(engine.scan, setup=setup, rounds=ROUNDS, iterations=1)
    if benchmark.disabled:
        return float("inf")
    naive = statistics.median(naive_times)
    ratio = naive / benchmark.stats.stats.median
    benchmark.extra_info["speedup_vs_naive"] = round(ratio, 1)
    return ratio


@pytest.mark.benchmark(group="corpus")
@pytest.mark.parametrize("book_name", ["en-weyland-251.json", "en-monster-hunter-387.json"])
def bench_real_book_steady_turn_vs_naive(benchmark, chat, book_name):
    ratio = _steady_turn_vs_naive(benchmark, chat, book_name)
    assert ratio >= 10, f"{book_name}: only {ratio:.1f}x the naive matcher on real data"


@pytest.mark.benchmark(group="corpus-regex")
def bench_regex_heavy_book_matching_vs_naive(benchmark, chat):
    """weyland (128 regex keys) with a word counter, so the matcher and the loop are what is
    measured (token counting has its own benchmarks): at least 300x the naive matcher."""
    from lorescan.js.text import js_count_words
    ratio = _steady_turn_vs_naive(benchmark, chat, "en-weyland-251.json", js_count_words)
    assert ratio >= 300, f"weyland's matching is only {ratio:.1f}x the naive matcher"
