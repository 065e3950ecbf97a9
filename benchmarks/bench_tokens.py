"""Token counting with tiktoken's offline encoding: cached per compiled book, incremental on
concatenations. Each benchmark measures its baseline in the same run and asserts a ratio.

* ``bench_activated_contents_cost_nothing_after_the_first_turn``: a 10k-entry book in
  lorebook-slot mode; the first turn tokenises every activated content (baseline: the same
  contents through a cacheless counter), later turns read the engine's per-entry cache.
* ``bench_incremental_count_vs_reencoding_the_joined_text``: SillyTavern mode counts the
  concatenation of admitted contents after each admission; IncrementalCount keeps that
  count exact without re-tokenising the joined text every time.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_tokens.py -p no:cacheprovider``
"""
from __future__ import annotations

import random

import pytest

from conftest import median_seconds
from lorescan.model import Lorebook, entry_from_fields
from lorescan.slot import SlotEngine
from lorescan.tokens import IncrementalCount, TiktokenCounter

N_ENTRIES = 10_000
CACHED_MIN_SPEEDUP = 20       # measured ~125x (2,744 activated contents) on the 2-core dev box
INCREMENTAL_MIN_SPEEDUP = 10  # measured ~47x for 400 contents

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
