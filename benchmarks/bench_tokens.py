"""Token counting with tiktoken's offline encoding: cached per compiled book, incremental on
concatenations. Each benchmark measures its baseline in the same run and asserts a ratio.

* ``bench_activated_contents_cost_nothing_after_the_first_turn``: a 10k-entry book in
  lorebook-slot mode; the first turn tokenises every activated content (baseline: the same
  contents through a cacheless counter), later turns read the engine's per-entry cache.
* ``bench_incremental_count_vs_reencoding_the_joined_text``: SillyTavern mode counts the
  concatenation of admitted contents after each admission; IncrementalCount keeps that
  count exact without re-tokenising the joined text every time.
* ``bench_a_turns_counting_costs_its_boundaries_not_its_contents``: the counting of one
  SillyTavern turn with 150 activated entries whose counts are cached (admission counts
  after each entry, three recursion loops prepending to the budget text), against counting
  those contents from scratch as a turn did before (baseline), and against counting a
  single content from scratch (the turn must cost a handful of those, not 150).
* ``bench_a_recursion_chain_costs_linear_time``: a chain of links (entry i's content names
  entry i+1) scanned at 3,000 links (1,500 in the short mode) against a tenth as many: a
  loop costs its own chunk, so ten times the links cost about ten times the time
  (quadratic would be a hundred).

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_tokens.py -p no:cacheprovider``
"""
from __future__ import annotations

import random

import pytest

from conftest import SHORT, median_seconds
from lorescan.model import Lorebook, entry_from_fields
from lorescan.slot import SlotEngine
from lorescan.st import BookSource, STEngine
from lorescan.tokens import ConcatCount, IncrementalCount, PrependCount, TiktokenCounter, count_text

N_ENTRIES = 10_000
CACHED_MIN_SPEEDUP = 20       # measured ~125x (2,744 activated contents) on the 2-core dev box
INCREMENTAL_MIN_SPEEDUP = 10  # measured ~47x for 400 contents
TURN_MIN_SPEEDUP = 20         # cached vs from scratch, 150 contents (measured ~400-750x)
TURN_MAX_CONTENTS = 20        # a cached turn costs at most this many single contents from scratch (measured ~9)
CHAIN_MAX_RATIO = 25          # 3,000 links vs 300: linear is ~10 (measured 10.6-13.4), quadratic ~100

PROSE = ("the", "a", "and", "of", "to", "in", "was", "she", "he", "it", "that", "with", "for", "on", "at",
         "from", "they", "but", "not", "when", "there", "her", "his", "said", "into", "then", "over",
         "night", "door", "road", "light", "hand", "river", "stone", "quiet", "cold", "old", "walked",
         "looked", "turned", "waited", "before", "under", "again", "never", "rain", "wind", "fire",
         "window", "letter", "voice", "shadow", "morning", "market", "bread", "coin", "sword", "lantern")
SYLLABLES = ("ka", "lor", "mi", "rel", "than", "vo", "dra", "sil", "en", "mar", "ith", "gor", "ul", "bre")




@pytest.fixture(scope="module")
def big_book() -> tuple[Lorebook, list[str]]:
    """10k entries named by made-up words; contents are 20-80 words of prose that mention
    another entry now and then; one entry in ten is constant."""
    rng = random.Random(20240515)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < N_ENTRIES:
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 5)))
        if name not in seen:
            seen.add(name)
            names.append(name)
    entries = []
    for i, name in enumerate(names):
        words = [rng.choice(PROSE) for _ in range(rng.randint(20, 80))]
        if rng.random() < 0.3:
            words[rng.randrange(len(words))] = rng.choice(names)
        entries.append(entry_from_fields({"uid": i, "key": [name], "content": " ".join(words).capitalize() + ".",
                                          "constant": i % 10 == 0}, fill_defaults=True))
    return Lorebook(name="synthetic-10k", entries=tuple(entries), fields={"token_budget": 32000}), names


@pytest.fixture(scope="module")
def slot_chat(big_book) -> list[tuple[str, str]]:
    _, names = big_book
    rng = random.Random(7)
    return [("assistant" if i % 2 == 0 else "user",
             " ".join(rng.choice(PROSE + tuple(names[:3000])) for _ in range(60))) for i in range(5)]


@pytest.mark.benchmark(group="tokens")
def bench_activated_contents_cost_nothing_after_the_first_turn(benchmark, big_book, slot_chat):
    book, _ = big_book
    engine = SlotEngine([book])                      # default counter: offline cl100k_base
    first = engine.run(slot_chat, turn_id="turn-1")  # the first turn counts every activated content
    activated = [r.position[1] for r in first.log if r.tokens is not None]
    assert len(activated) >= 1000, len(activated)
    texts = [engine.pool[i].content for i in activated]
    cacheless = TiktokenCounter(cache_size=0)
    first_turn_cost = median_seconds(lambda: [cacheless(t) for t in texts], runs=3)

    counts = benchmark(lambda: [engine.entry_tokens(i) for i in activated])
    assert counts == [cacheless(t) for t in texts]
    if benchmark.disabled:
        return
    ratio = first_turn_cost / benchmark.stats.stats.median
    benchmark.extra_info.update(activated=len(activated), first_turn_ms=round(first_turn_cost * 1e3, 1),
                                cached_speedup=round(ratio, 1))
    assert ratio >= CACHED_MIN_SPEEDUP, f"cached counting is only {ratio:.1f}x the first turn's"


@pytest.mark.benchmark(group="tokens")
def bench_incremental_count_vs_reencoding_the_joined_text(benchmark, big_book):
    book, _ = big_book
    counter = TiktokenCounter(cache_size=0)
    contents = [e.content + "\n" for e in book.entries[:400]]

    def reencode() -> int:
        text, total = "", 0
        for c in contents:
            text += c
            total = counter(text)
        return total

    def incremental() -> int:
        running = IncrementalCount(counter)
        for c in contents:
            running.append(c)
        return running.total

    baseline = median_seconds(reencode, runs=3)
    total = benchmark(incremental)
    assert total == counter("".join(contents))
    if benchmark.disabled:
        return
    ratio = baseline / benchmark.stats.stats.median
    benchmark.extra_info.update(contents=len(contents), reencode_ms=round(baseline * 1e3, 1),
                                incremental_speedup=round(ratio, 1))
    assert ratio >= INCREMENTAL_MIN_SPEEDUP, f"incremental counting is only {ratio:.1f}x re-encoding"


@pytest.mark.benchmark(group="tokens")
def bench_a_turns_counting_costs_its_boundaries_not_its_contents(benchmark, big_book):
    book, _ = big_book
    counter = TiktokenCounter(cache_size=0)
    units = [e.content + "\n" for e in book.entries[:150]]
    cached = [(u, count_text(counter, u)) for u in units]          # what the engine keeps per entry
    loops = [cached[:50], cached[50:100], cached[100:]]

    def cached_turn() -> int:
        budget_text = PrependCount(counter)
        t0 = 0
        for loop in loops:
            running = ConcatCount(counter)
            for unit, tc in loop:
                running.append(unit, tc)
            t0 = budget_text.prepend(loop)
        return t0

    def scratch_turn() -> int:                                      # the counting a turn did before
        budget_text, t0 = "", 0
        for loop in loops:
            running = IncrementalCount(counter)
            for unit, _ in loop:
                running.append(unit)
            budget_text = "".join(u for u, _ in loop) + budget_text
            t0 = counter(budget_text)
        return t0

    one = units[0]
    single = median_seconds(lambda: count_text(counter, one), runs=201)
    scratch = median_seconds(scratch_turn, runs=5)
    total = benchmark(cached_turn)
    assert total == scratch_turn() == counter("".join(units[100:] + units[50:100] + units[:50]))
    if benchmark.disabled:
        return
    turn = benchmark.stats.stats.median
    speedup, in_contents = scratch / turn, turn / single
    benchmark.extra_info.update(scratch_ms=round(scratch * 1e3, 2), turn_ms=round(turn * 1e3, 3),
                                single_content_us=round(single * 1e6, 1), speedup=round(speedup, 1),
                                turn_in_single_contents=round(in_contents, 1))
    assert speedup >= TURN_MIN_SPEEDUP, f"a cached turn's counting is only {speedup:.1f}x counting from scratch"
    assert in_contents <= TURN_MAX_CONTENTS, (f"a cached turn's counting costs {in_contents:.1f} contents "
                                              "counted from scratch")


def _chain_engine(n: int) -> STEngine:
    book = Lorebook(name=f"chain-{n}", entries=tuple(entry_from_fields(
        {"uid": i, "key": [f"link{i}"], "content": f"Link {i} leads on to link{i + 1}."}, fill_defaults=True)
        for i in range(n)))
    return STEngine([BookSource(book, ("global",))], {"recursive": True, "budget_percent": 100})


@pytest.mark.benchmark(group="tokens")
def bench_a_recursion_chain_costs_linear_time(benchmark):
    chat = [{"name": "u", "mes": "start at link0"}]
    links = 1500 if SHORT else 3000
    short, long = _chain_engine(links // 10), _chain_engine(links)
    long.scan(chat, max_context=10 ** 7)                      # load the counter, fill the count caches
    short_time = median_seconds(lambda: short.scan(chat, max_context=10 ** 7), runs=5)
    result = benchmark.pedantic(lambda: long.scan(chat, max_context=10 ** 7), rounds=3, iterations=1)
    assert len(result.activated) == links
    if benchmark.disabled:
        return
    ratio = benchmark.stats.stats.median / short_time
    benchmark.extra_info.update(links=links, tenth_ms=round(short_time * 1e3, 1),
                                all_ms=round(benchmark.stats.stats.median * 1e3, 1), ratio=round(ratio, 1))
    assert ratio <= CHAIN_MAX_RATIO, f"10x the links cost {ratio:.1f}x the time"
