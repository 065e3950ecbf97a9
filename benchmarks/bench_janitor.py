"""JanitorAI script engine: a turn of a growing chat, against the straightforward per-entry
implementation (tests/support/janitor_reference.py: a regex search per term per entry, every
turn, with the compiled regexes cached so the baseline is not dominated by compiling).

Books are the synthetic ones of conftest.py turned into ``dynamicLore`` entries (keywords
from the keys, some wildcards, gates, tags and triggers, a few shifts); the chat is the
synthetic chat, five messages a window. Asserted (also in LORESCAN_BENCH_SHORT mode):
a 300-entry book at least 100x the per-entry implementation in the same run; a 30-entry
book under 100 µs a turn (an absolute bound, asserted loosely: 3x in short mode, where the
shared CI runner is noisier), and at least 20x its own per-entry baseline.
"""
from __future__ import annotations

import os
import random

import pytest

from conftest import make_book, make_chat, median_seconds
from lorescan.janitor import JanitorEngine
from tests.support.janitor_reference import run_reference

SHORT = os.environ.get("LORESCAN_BENCH_SHORT") == "1"
ROUNDS = 30 if SHORT else 200
TURNS = 60


def janitor_book(n: int) -> list[dict]:
    rng = random.Random(n)
    book = []
    for e in make_book(n).entries:
        keys = [k.lower() for k in e.key if not k.startswith("/")]
        entry: dict = {"keywords": keys, "personality": e.content, "priority": rng.randint(1, 5)}
        if rng.random() < 0.2:
            entry["keywords"].append(keys[0].split()[0][:4] + "*")
        if rng.random() < 0.15:
            entry["requireNone"] = ["cold", "never"]
        if rng.random() < 0.1:
            entry["requireAny"] = ["the", "river"]
        if rng.random() < 0.2:
            entry["tag"] = f"t{rng.randrange(20)}"
        if rng.random() < 0.2:
            entry["triggers"] = [f"t{rng.randrange(20)}"]
        if rng.random() < 0.05:
            entry["Shifts"] = [{"keywords": ["night"], "personality": "at night"}]
        if rng.random() < 0.1:
            entry["probability"] = "60%"
        book.append(entry)
    return book


def contexts(n: int) -> list[dict]:
    chat = make_chat(make_book(n), TURNS + 5)
    return [{"character": {"name": "Mira", "personality": "Base.", "scenario": "Scene."},
             "chat": {"last_messages": [{"message": m} for m in chat[max(0, t - 5):t]], "message_count": t}}
            for t in range(5, TURNS + 5)]


def _turns(engine: JanitorEngine, ctxs: list[dict]):
    state = {"i": 0}

    def one():
        ctx = ctxs[state["i"] % len(ctxs)]
        state["i"] += 1
        return engine.run(ctx, random=lambda: 0.5)
    return one


def _reference_turns(book: list[dict], ctxs: list[dict]):
    state = {"i": 0}

    def one():
        ctx = ctxs[state["i"] % len(ctxs)]
        state["i"] += 1
        return run_reference(book, ctx, lambda: 0.5)
    return one


def _agree(book, engine, ctxs):
    for ctx in ctxs[:10]:
        assert engine.run(ctx, random=lambda: 0.5).to_json() == run_reference(book, ctx, lambda: 0.5)


@pytest.mark.parametrize("n", [300])
def test_janitor_turn_300_entries_vs_per_entry(benchmark, n):
    book, ctxs = janitor_book(n), contexts(n)
    engine = JanitorEngine(book)
    _agree(book, engine, ctxs)
    baseline = median_seconds(_reference_turns(book, ctxs), max(10, ROUNDS // 10))
    for ctx in ctxs:                       # steady state: the chat's earlier messages are cached
        engine.run(ctx, random=lambda: 0.5)
    benchmark.pedantic(_turns(engine, ctxs), rounds=ROUNDS, iterations=1, warmup_rounds=5)
    ratio = baseline / benchmark.stats.stats.median
    benchmark.extra_info["speedup_vs_per_entry"] = round(ratio, 1)
    assert ratio >= 100, f"a turn is only {ratio:.0f}x the per-entry implementation on {n} entries"


def test_janitor_turn_30_entries(benchmark):
    book, ctxs = janitor_book(30), contexts(30)
    engine = JanitorEngine(book)
    _agree(book, engine, ctxs)
    baseline = median_seconds(_reference_turns(book, ctxs), max(10, ROUNDS // 5))
    benchmark.pedantic(_turns(engine, ctxs), rounds=ROUNDS, iterations=5, warmup_rounds=5)
    median = benchmark.stats.stats.median
    benchmark.extra_info["turn_us"] = round(median * 1e6, 1)
    benchmark.extra_info["speedup_vs_per_entry"] = round(baseline / median, 1)
    assert baseline / median >= 20, f"only {baseline / median:.0f}x the per-entry implementation on 30 entries"
    assert median < (300e-6 if SHORT else 100e-6), f"a 30-entry turn takes {median * 1e6:.0f} µs"
