"""SillyTavern mode, one full engine call: lorescan vs fast-tavern, measured in the same run.

A 10k-entry synthetic book and a 1,000-message chat, whole-word matching and recursion on.
Steady state = only the newest message is new (the live-chat case: the caller passes the
same ChatScan every turn). Cold = the first call on a fresh engine unpickled from bytes
with an empty ChatScan. Targets (issue 3): steady state >= 1000x fast-tavern at depth 50;
cold >= 300x; depth 100 costs < 2x depth 10; a 1,000-message chat costs < 1.5x a
100-message chat at the same depth.
"""
from __future__ import annotations

import os
import pickle
import statistics
import time

import pytest

from conftest import make_book, make_chat, median_seconds
from lorescan.match.cache import ChatScan
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings

SHORT = os.environ.get("LORESCAN_BENCH_SHORT") == "1"
N_ENTRIES = 10_000
CHAT = 1_000
ROUNDS = 15 if SHORT else 60
MAX_CONTEXT = 8192
_medians: dict[str, float] = {}


@pytest.fixture(scope="module")
def world():
    book = make_book(N_ENTRIES, seed=11)
    lines = make_chat(book, CHAT + 3 * ROUNDS + 50, seed=12)
    chat = [ChatMessage(*line.split(": ", 1)) for line in lines]
    return book, chat


def to_fast_tavern(book):
    """The same entries in fast-tavern's WorldBookEntry shape (its get_active_entries input)."""
    return [{"index": i, "enabled": not e.disable, "activationMode": "always" if e.constant else "keyword",
             "key": list(e.key), "secondaryKey": list(e.keysecondary), "selectiveLogic": "andAny",
             "content": e.content, "order": e.order, "probability": 100, "caseSensitive": False,
             "excludeRecursion": e.exclude_recursion, "preventRecursion": e.prevent_recursion}
            for i, e in enumerate(book.entries)]


def _engine(book, depth):
    settings = STSettings(scan_depth=depth, recursive=True, match_whole_words=True)
    return STEngine([BookSource(book, ("global",))], settings)


@pytest.fixture(scope="module")
def fast_tavern_depth50(world):
    from fast_tavern.core.modules.worldbook.get_active_entries import get_active_entries
    book, chat = world
    entries = to_fast_tavern(book)
    window = chat[CHAT - 50:CHAT]
    text = "\n".join(f"{m.name}: {m.text}" for m in window)
    return median_seconds(lambda: get_active_entries({"contextText": text, "globalEntries": entries}),
                           1 if SHORT else 3)


def _steady(benchmark, book, chat, depth, length, between=None):
    """Benchmark calls where each round adds one new message to a warm chat of ``length``.
    ``between``, if given, runs before every round, untimed by the benchmark (a same-run
    baseline sampled alongside the rounds)."""
    engine = _engine(book, depth)
    cache = ChatScan()
    start = length - 5
    for t in range(start, length):             # warm the per-message cache
        engine.scan(chat[:t], max_context=MAX_CONTEXT, cache=cache)
    state = {"t": length}

    def setup():
        if between is not None:
            between()
        state["t"] += 1
        return (chat[:state["t"]],), {"max_context": MAX_CONTEXT, "cache": cache}

    benchmark.pedantic(engine.scan, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)


@pytest.mark.benchmark(group="engine-steady")
@pytest.mark.parametrize("depth", [10, 50, 100])
def bench_steady_state_turn(benchmark, world, depth, fast_tavern_depth50):
    book, chat = world
    _steady(benchmark, book, chat, depth, CHAT)
    if benchmark.disabled:
        return
    median = benchmark.stats.stats.median
    _medians[f"steady{depth}"] = median
    if depth == 50:
        ratio = fast_tavern_depth50 / median
        benchmark.extra_info["speedup_vs_fast_tavern"] = round(ratio, 1)
        assert ratio >= 1000, f"steady state is only {ratio:.0f}x fast-tavern at depth 50"
    if depth == 100 and "steady10" in _medians:
        growth = median / _medians["steady10"]
        benchmark.extra_info["cost_vs_depth10"] = round(growth, 2)
        assert growth < 2, f"depth 100 costs {growth:.2f}x depth 10"


@pytest.mark.benchmark(group="engine-chat-length")
def bench_call_cost_does_not_grow_with_chat_length(benchmark, world):
    book, chat = world
    short_engine = _engine(book, 50)
    cache = ChatScan()
    for t in range(95, 100):
        short_engine.scan(chat[:t], max_context=MAX_CONTEXT, cache=cache)
    # the same window content, but a short chat: compare against the 1,000-message steady state.
    # One short-chat call is timed before each measured round, so both sides sample the same
    # stretch of machine load (measured one after the other, a burst could land on one side).
    short_times: list[float] = []

    def short_call() -> None:
        t = 100 + len(short_times)
        start = time.perf_counter()
        short_engine.scan(chat[:t], max_context=MAX_CONTEXT, cache=cache)
        short_times.append(time.perf_counter() - start)
    _steady(benchmark, book, chat, 50, CHAT + ROUNDS, between=short_call)
    if benchmark.disabled:
        return
    ratio = benchmark.stats.stats.median / statistics.median(short_times)
    benchmark.extra_info["long_vs_short_chat"] = round(ratio, 2)
    assert ratio < 1.5, f"a 1,000-message chat costs {ratio:.2f}x a 100-message one"


@pytest.mark.benchmark(group="engine-cold")
def bench_cold_call_from_pickle(benchmark, world, fast_tavern_depth50):
    book, chat = world
    blob = pickle.dumps(_engine(book, 50))
    window = chat[:CHAT]

    def setup():
        from lorescan.js import regex as jsregex
        jsregex._compile_js_regex.cache_clear()     # a fresh worker has compiled no regex yet
        return (window,), {"max_context": MAX_CONTEXT, "cache": ChatScan(), "_engine": pickle.loads(blob)}

    def cold(window, *, max_context, cache, _engine):
        return _engine.scan(window, max_context=max_context, cache=cache)

    benchmark.pedantic(cold, setup=setup, rounds=max(5, ROUNDS // 3), iterations=1)
    if benchmark.disabled:
        return
    ratio = fast_tavern_depth50 / benchmark.stats.stats.median
    benchmark.extra_info["speedup_vs_fast_tavern"] = round(ratio, 1)
    assert ratio >= 300, f"a cold call is only {ratio:.0f}x fast-tavern at depth 50"
