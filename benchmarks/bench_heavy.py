"""Issue 8's heavy workload: a platform-sized turn, against the naive reference engine.

The workload (``heavy.py``): a 10k-entry book whose contents name each other (recursion
activates 150-200 entries at depth 50 over about 11 loops), 2% regex keys of realistic
shapes (alternations, ``\\b``, the ``i`` flag, Cyrillic and CJK), whole words, recursion on,
a 128k-token model (``max_context`` 131072: SillyTavern's default 25% gives a 32,768-token
budget, which this workload never reaches; every benchmark asserts it), over a chat of 1,000+
messages. Steady state = the caller's ``ChatScan`` holds every message but the newest: each
measured call has exactly one message more than the previous one.

The naive reference engine is the whole engine on ``tests.support.reference_matcher``
(every key of every entry tested on the assembled haystack, no hit cache) with a token
counter that caches nothing, so every count is made from scratch; it is measured once per
run (it takes seconds to minutes) and must activate exactly what the engine activates.

Targets (issue 8), all asserted in the short mode (``LORESCAN_BENCH_SHORT=1``):

* steady-state turn at depth 50 >= 1000x the naive reference engine; cold >= 300x;
* depth 100 < 2x depth 10;
* token counting <= 10% of a steady-state turn;
* a steady-state ``SlotEngine.run`` over the same book and window <= 2x the ST-mode turn.
"""
from __future__ import annotations

import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable
from unittest import mock

import pytest

from conftest import SHORT
from heavy import CAST, heavy_book, heavy_chat
from lorescan import BookSource, ChatMessage, ChatScan, STEngine, STSettings, load_compiled, save_compiled
from lorescan.js.regex import tool_regex
from lorescan.slot.engine import SlotEngine
from lorescan.slot.pool import BookSettings, SlotBook
from lorescan.tokens import TiktokenCounter
from tests.support.reference_matcher import ReferenceScanView, forget_caches

N_ENTRIES = 10_000
CHAT = 1_000                     # messages before the first measured turn
MAX_CONTEXT = 131_072            # a 128k-token model; the budget is 25% of it
DEPTH = 50
MIN_ACTIVATED = 100              # issue 8: recursion activates at least 100 entries at depth 50
ROUNDS = 5 if SHORT else 15      # measured turns per benchmark
COLD_ROUNDS = 2 if SHORT else 5
NAIVE_RUNS = 1 if SHORT else 3


# -- the workload ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def heavy():
    """(book, chat): the 10k-entry heavy book and enough messages for every benchmark here."""
    hb = heavy_book(N_ENTRIES)
    chat = heavy_chat(hb, CHAT + 2 * ROUNDS + 10)
    texts = [m.text for m in chat]
    assert len(set(texts)) == len(texts), "every message must be new text (steady state, not a cached repeat)"
    regex_keys = [k for e in hb.book.entries for k in e.key if tool_regex(k) is not None]
    assert len(regex_keys) >= 0.005 * N_ENTRIES, f"only {len(regex_keys)} regex keys"
    shapes = {"\\b and i": lambda k: "\\b" in k and k.endswith("/i"), "alternation": lambda k: "|" in k,
              "Cyrillic": lambda k: any("\u0400" <= c <= "\u04ff" for c in k),
              "CJK": lambda k: any("\u4e00" <= c <= "\u9fff" for c in k)}
    for shape, has in shapes.items():
        assert any(map(has, regex_keys)), f"no regex key with {shape}"
    return hb.book, chat


def st_engine(book, depth: int, **hooks) -> STEngine:
    return STEngine([BookSource(book, ("global",))],
                    STSettings(scan_depth=depth, recursive=True, match_whole_words=True), **hooks)


@pytest.fixture(scope="module")
def engine50(heavy) -> STEngine:
    """The depth-50 engine, built once and shared like a platform's (each benchmark brings its
    own ChatScan, as each chat would)."""
    return st_engine(heavy[0], DEPTH)


def check_heavy_result(result, *, min_activated: int = 0) -> None:
    """The shape the targets assume: nothing cut by the budget, enough recursion."""
    cut = [d for d in result.diagnostics.values() if d.reason == "budget"]
    assert not result.budget_overflowed and not cut, f"the budget cut {len(cut)} entries: raise MAX_CONTEXT"
    assert len(result.activated) >= min_activated, \
        f"only {len(result.activated)} entries activated (want >= {min_activated})"


def clear_regex_caches() -> None:
    """Forget the compiled regexes the process keeps (a fresh worker has compiled none)."""
    from lorescan.js import regex as jsregex
    for value in vars(jsregex).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


def steady_turns(benchmark, engine: STEngine, chat: list[ChatMessage], *, rounds: int = ROUNDS,
                 beside: Callable[[list[ChatMessage]], None] | None = None,
                 cpu: list[float] | None = None) -> list:
    """Benchmark ``rounds`` steady-state turns of ``engine``: a warm ChatScan, one new message each.

    ``beside(messages)`` runs (untimed by the benchmark) before each measured turn, on the same
    messages: the same-run comparison of another engine; ``cpu`` gets each measured turn's CPU
    time (this thread's). Returns the measured turns' results.
    """
    cache = ChatScan()
    for t in range(CHAT - 3, CHAT + 1):          # warm the per-message cache up to chat[:CHAT]
        engine.scan(chat[:t], max_context=MAX_CONTEXT, cache=cache)
    state = {"t": CHAT, "misses": None}
    results = []

    def setup():
        if state["misses"] is not None:
            assert cache.miss_count > state["misses"], "the previous turn scanned nothing new"
        state["misses"] = cache.miss_count
        state["t"] += 1                          # one message more than the previous turn
        messages = chat[:state["t"]]
        if beside is not None:
            beside(messages)
        return (messages,), {}

    def turn(messages):
        c0 = time.thread_time()
        results.append(engine.scan(messages, max_context=MAX_CONTEXT, cache=cache))
        if cpu is not None:
            cpu.append(time.thread_time() - c0)

    benchmark.pedantic(turn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
    assert cache.miss_count > state["misses"], "the last turn scanned nothing new"
    return results


@pytest.fixture(scope="module")
def naive_depth50(heavy, engine50):
    """Median seconds of the naive reference engine's turn at depth 50 on ``chat[:CHAT]``, and
    its result (every run starts from nothing: the reference matcher keeps no cache)."""
    book, chat = heavy
    times, result = [], None
    with mock.patch("lorescan.st.engine.ScanView", ReferenceScanView):
        for _ in range(NAIVE_RUNS):
            # a new engine and counter each run: no count an engine keeps from an earlier turn
            engine = st_engine(book, DEPTH, count_tokens=TiktokenCounter(cache_size=0))
            forget_caches()
            start = time.perf_counter()
            result = engine.scan(chat[:CHAT], max_context=MAX_CONTEXT)
            times.append(time.perf_counter() - start)
    fast = engine50.scan(chat[:CHAT], max_context=MAX_CONTEXT)
    check_heavy_result(fast, min_activated=MIN_ACTIVATED)    # (explanations need the real view)
    assert not result.budget_overflowed
    assert fast.activated == result.activated, "the baseline must do the same work as the engine"
    return statistics.median(times), result


# -- steady state and cold ----------------------------------------------------------------------
@pytest.mark.benchmark(group="heavy-steady")
def bench_heavy_steady_turn_vs_naive_engine(benchmark, heavy, engine50, naive_depth50):
    results = steady_turns(benchmark, engine50, heavy[1])
    for r in results:
        check_heavy_result(r, min_activated=MIN_ACTIVATED)
    naive, naive_result = naive_depth50
    by_regex = {eid for r in results for eid, d in r.diagnostics.items()
                if d.outcome == "activated" and d.key is not None and d.key.startswith("/")}
    assert by_regex, "no entry was activated by a regex key"
    benchmark.extra_info.update(activated=len(results[-1].activated), loops=len(results[-1].loops),
                                activated_by_regex=len(by_regex), naive_seconds=round(naive, 3))
    if benchmark.disabled:
        return
    ratio = naive / benchmark.stats.stats.median
    benchmark.extra_info["speedup_vs_naive"] = round(ratio, 1)
    assert ratio >= 1000, f"a steady-state heavy turn is only {ratio:.0f}x the naive reference engine"


def _pickled(engine: STEngine) -> Callable[[], STEngine]:
    blob = pickle.dumps(engine)
    return lambda: pickle.loads(blob)


def _lsc_file(engine: STEngine) -> Callable[[], STEngine]:
    path = Path(tempfile.mkdtemp(prefix="lorescan-bench-")) / "heavy.lsc"
    save_compiled(engine.compiled[0], path)
    settings = engine.settings
    return lambda: STEngine([BookSource(load_compiled(path), ("global",))], settings)


# How a worker gets its engine back. Each loader takes a built engine and returns a function
# that gives an equal engine from its stored form (called in the untimed setup).
COLD_LOADERS: dict[str, Callable[[STEngine], Callable[[], STEngine]]] = {"pickle": _pickled, "lsc": _lsc_file}

# What a fresh worker process pays once, before its first regex key or token count, whatever
# book it then loads: tiktoken's encoding (kept per process by tiktoken) and the JS case
# tables of regex keys with ``i``. Measured in a new interpreter and reported beside the cold
# turn; the cold turn itself is a worker that has served a request before (see the test).
_PROCESS_FIRST_USE = """
import time
t0 = time.perf_counter()
from lorescan.tokens import TiktokenCounter
TiktokenCounter()("warm")
t1 = time.perf_counter()
from lorescan.js.regex import _case_classes
_case_classes(False), _case_classes(True)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def process_first_use() -> tuple[float, float]:
    """(tokenizer, case tables): seconds a fresh interpreter takes for each (imports included)."""
    out = subprocess.run([sys.executable, "-c", _PROCESS_FIRST_USE], capture_output=True, text=True, check=True)
    tokenizer, tables = map(float, out.stdout.split())
    return tokenizer, tables


@pytest.mark.benchmark(group="heavy-cold")
@pytest.mark.parametrize("form", sorted(COLD_LOADERS))
def bench_heavy_cold_turn_vs_naive_engine(benchmark, heavy, engine50, naive_depth50, form):
    """The first turn of an engine just loaded, with an empty ChatScan and no compiled regex.

    Cold means everything that belongs to the engine or the chat: the engine comes from its
    stored form (pickle or ``.lsc``), its entries, plans and regexes are built on demand, no
    regex is translated, every content is counted from scratch. The process is a worker that
    has served a request before: tiktoken's encoding is loaded (the naive run and the engine
    below loaded it), as it is once per process whatever the book. Its first load and the
    regex case tables are measured in a fresh interpreter and reported in ``extra_info``
    (``process_first_use_s``), not hidden in setup: the JS case tables are cleared before
    every round anyway, so the cold turn rebuilds them.
    """
    chat = heavy[1]
    load = COLD_LOADERS[form](engine50)
    results = []

    def setup():
        clear_regex_caches()
        return (load(), ChatScan()), {}

    def cold(engine, cache):
        results.append(engine.scan(chat[:CHAT], max_context=MAX_CONTEXT, cache=cache))

    benchmark.pedantic(cold, setup=setup, rounds=COLD_ROUNDS, iterations=1, warmup_rounds=0)
    naive, naive_result = naive_depth50
    for r in results:
        assert r.activated == naive_result.activated
    if benchmark.disabled:
        return
    ratio = naive / benchmark.stats.stats.median
    tokenizer, tables = process_first_use()
    benchmark.extra_info.update(speedup_vs_naive=round(ratio, 1), process_first_use_s={
        "tokenizer": round(tokenizer, 3), "regex_case_tables": round(tables, 3)})
    assert ratio >= 300, f"a cold heavy turn ({form}) is only {ratio:.0f}x the naive reference engine"


@pytest.mark.benchmark(group="heavy-depth")
def bench_heavy_depth100_vs_depth10(benchmark, heavy):
    book, chat = heavy
    shallow = st_engine(book, 10)
    shallow_cache = ChatScan()
    for t in range(CHAT - 3, CHAT + 1):
        shallow.scan(chat[:t], max_context=MAX_CONTEXT, cache=shallow_cache)
    shallow_times: list[float] = []

    deep_times: list[float] = []

    def depth10(messages):
        start = time.thread_time()
        r = shallow.scan(messages, max_context=MAX_CONTEXT, cache=shallow_cache)
        shallow_times.append(time.thread_time() - start)
        check_heavy_result(r)

    # on CPU time, both: 5 wall-clock rounds on a loaded 2-core machine measured waits for a core
    # (0.5-3x from run to run on the same tree)
    results = steady_turns(benchmark, st_engine(book, 100), chat, beside=depth10, cpu=deep_times)
    for r in results:
        check_heavy_result(r, min_activated=MIN_ACTIVATED)
    if benchmark.disabled:
        return
    growth = statistics.median(deep_times) / statistics.median(shallow_times)
    benchmark.extra_info.update(cost_vs_depth10=round(growth, 2), activated=len(results[-1].activated))
    assert growth < 2, f"depth 100 costs {growth:.2f}x depth 10 on the heavy workload"


# -- token counting's share ---------------------------------------------------------------------
def _no_tokens(text: str) -> int:
    return 0


@pytest.mark.benchmark(group="heavy-tokens")
def bench_heavy_token_counting_share(benchmark, heavy, engine50):
    """The same steady turn with the default counter (tiktoken cl100k) and with a counter that
    costs nothing. Valid because the budget never cuts here (asserted): both activate exactly
    the same entries, so the difference between the two turns is what counting costs, wherever
    the engine does it (per call, cached per entry, or incrementally)."""
    book, chat = heavy
    free = st_engine(book, DEPTH, count_tokens=_no_tokens)
    free_cache = ChatScan()
    for t in range(CHAT - 3, CHAT + 1):
        free.scan(chat[:t], max_context=MAX_CONTEXT, cache=free_cache)
    free_times: list[float] = []
    free_results = []

    def without_counting(messages):
        start = time.perf_counter()
        free_results.append(free.scan(messages, max_context=MAX_CONTEXT, cache=free_cache))
        free_times.append(time.perf_counter() - start)

    results = steady_turns(benchmark, engine50, chat, beside=without_counting)
    for counted, uncounted in zip(results, free_results):
        check_heavy_result(counted, min_activated=MIN_ACTIVATED)
        assert counted.activated == uncounted.activated
    if benchmark.disabled:
        return
    turn = benchmark.stats.stats.median
    share = max(0.0, turn - statistics.median(free_times)) / turn
    benchmark.extra_info["token_counting_share"] = round(share, 3)
    assert share <= 0.10, f"token counting is {share:.0%} of a heavy turn"


# -- lorebook-slot mode ---------------------------------------------------------------------------
def _slot_messages(chat: list[ChatMessage]) -> list[tuple[str, str]]:
    return [("assistant" if m.name == "Narrator" else "user", m.text) for m in chat]


@pytest.mark.benchmark(group="heavy-slot")
def bench_heavy_slot_run_vs_st_turn(benchmark, heavy, engine50):
    """A steady-state ``SlotEngine.run`` (the book at scan depth 50, the largest budget,
    recursion on) against the ST-mode turn over the same 50 messages, measured alternately.
    Slot mode scans at most 3 passes (SPEC 15.6), so it activates fewer entries than ST mode;
    the target compares what each mode does with the same book and window."""
    book, chat = heavy
    slot = SlotEngine([SlotBook(book, settings=BookSettings(scan_depth=DEPTH, token_budget=32_000,
                                                            recursive_scanning=True))])
    st = engine50
    slot_cache, st_cache = ChatScan(), ChatScan()
    for t in range(CHAT - 3, CHAT + 1):
        slot.run(_slot_messages(chat[:t]), turn_id=f"heavy:{t}", cache=slot_cache)
        st.scan(chat[:t], max_context=MAX_CONTEXT, cache=st_cache)
    st_times: list[float] = []
    state = {"t": CHAT}
    results = []

    def setup():
        state["t"] += 1
        messages = chat[:state["t"]]
        start = time.perf_counter()
        st_result = st.scan(messages, max_context=MAX_CONTEXT, cache=st_cache)
        st_times.append(time.perf_counter() - start)         # the scan alone, not the check below
        check_heavy_result(st_result, min_activated=MIN_ACTIVATED)
        return (_slot_messages(messages),), {"turn_id": f"heavy:{state['t']}", "cache": slot_cache}

    def run(messages, **kw):
        results.append(slot.run(messages, **kw))

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    for r in results:
        outcomes = [rec.outcome for rec in r.log]
        assert "dropped_budget" not in outcomes, "the slot budget cut entries"
        assert outcomes.count("inserted") >= 3 * CAST     # slot mode stops after 3 passes (SPEC 15.6)
    if benchmark.disabled:
        return
    ratio = benchmark.stats.stats.median / statistics.median(st_times)
    benchmark.extra_info.update(slot_vs_st=round(ratio, 2), inserted=len(results[-1].inserted))
    assert ratio <= 2, f"a steady-state slot run costs {ratio:.2f}x an ST-mode turn over the same window"
