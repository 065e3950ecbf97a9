"""Boolean key expressions: a turn with 1,000 expression keys against the same book with the same atoms as plain keys.

Books: the synthetic 1,000-entry book; entry ``i`` of the expression book has the one key
``&expr: "<full name>" OR <given> OR (<family> AND NOT "<given> of <a place no text names>")``, entry
``i`` of the plain book has those four atoms as its plain primary keys. Chat: the synthetic
1,000-message chat over the base book. Engine: SillyTavern mode, improved profile (key
expressions on), depth 10, recursion on; steady state = only the newest message is new (the
caller's ChatScan is passed every turn); cold = a fresh engine over the compiled book and an
empty ChatScan. The two books are timed in the same run, alternately; the ratio is the median
of the per-round ratios.
Target (docs/improved-profile.md#key-expressions): expression book / plain book <= 1.2, steady and cold.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_expr.py`` (add
``LORESCAN_BENCH_SHORT=1`` for the short mode that CI runs).
"""
from __future__ import annotations

import random
import statistics
import time

import pytest

from conftest import SHORT, make_book, make_chat
from lorescan import BACKEND
from lorescan.match import MatchOptions
from lorescan.match.cache import ChatScan
from lorescan.st.compiled import compile_book
from lorescan.model import Lorebook, entry_from_fields
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings

N_KEYS = 1_000
CHAT = 1_000
DEPTH = 10
ROUNDS = 20 if SHORT else 100
MAX_CONTEXT = 100_000
TARGET = 1.2
RECURSIVE = True


def _books() -> tuple[Lorebook, Lorebook, Lorebook]:
    base = make_book(N_KEYS, seed=31)
    rng = random.Random(32)
    plain, expr = [], []
    for e in base.entries:
        full = e.key[0]
        given, family = full.split(" ", 1)
        # a name no text holds, so both books activate the same entries in every loop and the
        # ratio is the cost of the expressions alone (the NOT is evaluated all the same)
        other = f"{given} of {rng.choice(['Nowhere', 'Neverfall', 'Hollow Deep'])}"
        atoms = [full, given, family, other]
        common = {"uid": e.uid, "content": e.content, "comment": e.comment}
        plain.append(entry_from_fields({**common, "key": atoms}, uid=e.uid))
        key = f'&expr: "{full}" OR {given} OR ({family} AND NOT "{other}")'
        expr.append(entry_from_fields({**common, "key": [key]}, uid=e.uid))
    return (base, Lorebook(name="plain-atoms", entries=tuple(plain)),
            Lorebook(name="expressions", entries=tuple(expr)))


@pytest.fixture(scope="module")
def world():
    base, plain, expr = _books()
    lines = make_chat(base, CHAT + 2 * ROUNDS + 20, seed=33)
    chat = [ChatMessage(*line.split(": ", 1)) for line in lines]
    compiled = {b.name: compile_book(b, MatchOptions.improved()) for b in (plain, expr)}
    return compiled["plain-atoms"], compiled["expressions"], chat


def _engine(book) -> STEngine:
    return STEngine([BookSource(book, ("global",))], STSettings(scan_depth=DEPTH, recursive=RECURSIVE),
                    compat="improved")


def _alternating(plain, expr, rounds):
    """Median CPU seconds of ``plain`` and ``expr``, called in turn ``rounds`` times (the order
    swapped every round), and the median of the per-round ratios expr / plain: adjacent calls
    see the same load on a shared machine, so the ratio moves less than either time."""
    times: tuple[list[float], list[float]] = ([], [])
    for r in range(rounds):
        pair = ((0, plain), (1, expr)) if r % 2 == 0 else ((1, expr), (0, plain))
        for i, fn in pair:
            t = time.thread_time()      # CPU time: a wait for a core on a loaded machine is not the turn's
            fn()
            times[i].append(time.thread_time() - t)
    ratios = [e / p for p, e in zip(*times)]
    return statistics.median(times[0]), statistics.median(times[1]), statistics.median(ratios)


class Steady:
    """A live chat: the engine and ChatScan kept, one new message per turn."""

    def __init__(self, book, chat: list[ChatMessage]) -> None:
        self.engine, self.chat, self.cache, self.n = _engine(book), chat, ChatScan(), CHAT
        self.activated = 0
        self.turn()

    def turn(self):
        self.n += 1
        out = self.engine.scan(self.chat[:self.n], max_context=MAX_CONTEXT, cache=self.cache)
        self.activated += len(out.activated)
        return out


@pytest.mark.benchmark(group="expr-steady")
def bench_steady_turn_with_1000_expression_keys(benchmark, world):
    plain, expr, chat = world
    sp, se = Steady(plain, chat), Steady(expr, chat)
    plain_median, expr_median, ratio = _alternating(sp.turn, se.turn, ROUNDS)
    activated = (sp.activated, se.activated)
    benchmark.pedantic(se.turn, rounds=3, iterations=1)
    benchmark.extra_info.update(backend=BACKEND, expression_keys=N_KEYS, plain_seconds=round(plain_median, 6),
                                expr_seconds=round(expr_median, 6), expr_over_plain=round(ratio, 3),
                                activated=activated[0])
    print(f"\nsteady turn: plain {plain_median * 1e3:.2f} ms, expressions {expr_median * 1e3:.2f} ms, "
          f"ratio {ratio:.3f} (activations {activated[0]} / {activated[1]})")
    assert activated[0] == activated[1]           # the premise: the same work apart from the expressions
    assert ratio <= TARGET, f"a steady turn with {N_KEYS} expression keys costs {ratio:.2f}x the plain book's"


@pytest.mark.benchmark(group="expr-cold")
def bench_cold_turn_with_1000_expression_keys(benchmark, world):
    plain, expr, chat = world

    def cold(book):
        return _engine(book).scan(chat[:CHAT], max_context=MAX_CONTEXT, cache=ChatScan())
    runs = 4 if SHORT else 10
    plain_median, expr_median, ratio = _alternating(lambda: cold(plain), lambda: cold(expr), runs)
    benchmark.pedantic(cold, args=(expr,), rounds=1, iterations=1)
    benchmark.extra_info.update(backend=BACKEND, expression_keys=N_KEYS, plain_seconds=round(plain_median, 6),
                                expr_seconds=round(expr_median, 6), expr_over_plain=round(ratio, 3))
    print(f"\ncold turn: plain {plain_median * 1e3:.1f} ms, expressions {expr_median * 1e3:.1f} ms, "
          f"ratio {ratio:.3f}")
    assert ratio <= TARGET, f"a cold turn with {N_KEYS} expression keys costs {ratio:.2f}x the plain book's"
