"""Issue 20, item 6: the per-turn floor of a steady turn, on every keyed corpus book.

A steady turn: a warm engine and a shared ChatScan, one new message appended to a real chat
(the English books over ``en-dmc-group-branch734``, the Chinese ones over ``zh-muyanran-branch214``),
depth 20, whole words, recursion. Measured in the same run, turn by turn and interleaved:

* **lorescan**: ``engine.scan`` of the turn (timed by pytest-benchmark too);
* **floor**: the book's compiled automaton (in memory, as the warm engine holds it), one pass
  over the window's texts it has not seen (``name: text``; in a steady turn, the new message),
  the union of the 20 window messages' hits (each message's held from its one pass): what any
  matcher must at least do in a steady turn, with no entry logic at all;
* **window floor** (reported, not asserted): the same with a pass over all 20 window texts
  every turn, the floor as ``bench_platform.py`` defines it for a cold request, measured over the
  same turns after the timed ones (not between them: see ``_steady_vs_floor``). A steady turn
  scans only its new text, so lorescan is below this one;
* **SillyTavern-shaped loop**: an engine of the same book and settings built with
  ``_view=ReferenceScanView``, the naive reference matcher (every key of
  every entry tested on the assembled haystack, as docs/sillytavern-mode.md#st-scan-text reads
  literally; ``tests/support/reference_matcher.py``), one turn in ``NAIVE_EVERY``. It is a Python
  loop, not SillyTavern's own code under V8.

The issue's targets, asserted: at most 5x the floor on books with at least 100 keyed entries, at
most 10x on every keyed book, never slower than the SillyTavern-shaped loop. The ratio is the
median of the turns' own ratios (each turn against the floor of the same turn, measured just
before it). The floor of a small book is a few microseconds (one automaton pass over the new
message and a union of 20 sets) while a turn has a fixed cost of its own (the chat window, the
loop, the budget, the result). A steady turn keeps its message windows as vid counts from turn
to turn (``ScanView._message_union``) and, when what its loops read decides as last turn's did,
copies their outcome (``lorescan.st.memo``); the books whose windows gain candidates every turn
(weyland) or whose keys read texts (regex keys: roleplay-instructions) run their loops. The
books in ``GUARDS`` are still over their target here: they are asserted at that guard, and the
measured ratio is printed per book (at present no book is guarded).
"""
from __future__ import annotations

import json
import statistics
import time

import pytest

from conftest import SHORT, need_shared
from lorescan import BookSource, ChatMessage, ChatScan, STEngine, STSettings, load
from lorescan.st.compiled import compile_book
from tests.support.reference_matcher import ReferenceScanView, forget_caches

ROUNDS = 40 if SHORT else 120
NAIVE_EVERY = 8
DEPTH = 20
# Keyed corpus books (entries with keys that are neither constant nor disabled), with their count.
BIG = {"en-chub-world-of-arcanthea.json": 108, "en-monster-hunter-387.json": 379, "en-weyland-251.json": 214}
SMALL = ["en-celestia-valid.json", "en-chub-jailbreak-logs.json", "en-chub-lythora-station.json",
         "en-chub-roleplay-instructions.json", "en-chub-yakuza.json", "en-eternal-bonds-expanded.json",
         "en-st-legacy-toaru.json", "en-x-world.json", "en-zh-command-lorebook-export.json",
         "st-default-eldoria.json", "zh-ai-guide-2.0.json", "zh-cheryl.json", "zh-dou-rpg-v3.5.json",
         "zh-earth-online.json", "zh-tingyun.json"]
# The targets: a steady turn at most BIG_TARGET x the floor on the books with >= 100 keyed
# entries, at most EVERY_TARGET x on every keyed book, and never slower than the SillyTavern-shaped loop.
BIG_TARGET = 5
EVERY_TARGET = 10
NAIVE_TARGET = 1.0
# Books still over a target here would be asserted at a guard instead; none is. weyland (214 keyed
# entries) and arcanthea were guarded at 6.5x while the window floor ran between the floor and the
# turn (5.6-6.5x): with it measured after the turns, idle short runs read weyland 4.17-4.43x and
# arcanthea 3.93-3.96x, and 4.11-4.53x / 4.10-4.23x with a busy loop on the other core.
# Measured before the steady-turn replay (three short runs): monster-hunter 10.3-11.7x, arcanthea
# 6.7-7.0x, weyland 4.7-5.5x, zh-cheryl 10.3-12.8x, zh-ai-guide 9.3-10.7x, zh-dou-rpg 9.2-10.6x,
# eldoria 7.5-9.3x, the command-lorebook export 8.7-9.2x.
GUARDS: dict[str, float] = {}
CHATS = {"en": ("corpus/chats/en-dmc-group-branch734.jsonl", 300),
         "zh": ("corpus/chats/zh-muyanran-branch214.jsonl", 80)}


def _chat(relative: str) -> list[ChatMessage]:
    out = []
    for line in need_shared(relative).read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "mes" in m and not m.get("is_system"):
            out.append(ChatMessage(m.get("name", ""), m["mes"]))
    return out


@pytest.fixture(scope="module")
def chats():
    return {lang: (_chat(path), start) for lang, (path, start) in CHATS.items()}


def _steady_vs_floor(benchmark, chats, book_name: str) -> dict:
    book = load(str(need_shared("corpus/books/" + book_name)))
    chat, start = chats["zh" if book_name.startswith("zh-") else "en"]
    settings = STSettings(scan_depth=DEPTH, recursive=True, match_whole_words=True)
    engine = STEngine([BookSource(book, ("global",))], settings)
    # the same book and settings read through the naive reference matcher (the seam the tests use)
    reference = STEngine([BookSource(book, ("global",))], settings, _view=ReferenceScanView)
    matcher = compile_book(book).keys.matcher
    cache = ChatScan()
    for t in range(start - 10, start):
        engine.scan(chat[:t], max_context=16000, cache=cache)
    state = {"t": start}
    floors: list[float] = []
    windows: list[float] = []
    held: dict[int, frozenset[int]] = {}      # the steady floor's own cache: a message's hits
    naives: list[float] = []
    activated: list[int] = []

    def floor(msgs) -> None:
        t0 = time.perf_counter()
        n = len(msgs)
        for i in range(max(0, n - DEPTH), n):
            if i not in held:
                held[i] = matcher.scan(f"{msgs[i].name}: {msgs[i].text}")
        hits = frozenset().union(*[held[i] for i in range(max(0, n - DEPTH), n)])
        floors.append(time.perf_counter() - t0)
        del hits

    def window_floor(msgs) -> None:
        t0 = time.perf_counter()
        hits = frozenset().union(*[matcher.scan(f"{m.name}: {m.text}") for m in msgs[-DEPTH:]])
        windows.append(time.perf_counter() - t0)
        del hits

    def naive(msgs) -> None:
        forget_caches()
        t0 = time.perf_counter()
        reference.scan(msgs, max_context=16000)
        naives.append(time.perf_counter() - t0)

    def turn(msgs) -> None:
        activated.append(len(engine.scan(msgs, max_context=16000, cache=cache).activated))

    def setup():             # the baselines of the same turn first (untimed by pytest-benchmark)
        state["t"] += 1
        msgs = chat[:state["t"]]
        if not benchmark.disabled:
            floor(msgs)
            if (state["t"] - start) % NAIVE_EVERY == 1:
                naive(msgs)
        return (msgs,), {}

    floor(chat[:start])      # the floor's cache warm, as the engine's is
    floors.clear()
    benchmark.pedantic(turn, setup=setup, rounds=ROUNDS, iterations=1)
    if benchmark.disabled:
        return {}
    # The window floor over the same turns, after them: a full pass over 20 texts just before a
    # turn evicted the engine's working set from the CPU caches (weyland: a 185 us turn measured
    # 330 us after it), which the floor the turn is compared with, measured before it, never met.
    for t in range(start + 1, state["t"] + 1):
        window_floor(chat[:t])
    lorescan = benchmark.stats.stats.median
    turns = benchmark.stats.stats.data          # round i is the turn whose floor is floors[i]
    assert len(turns) == len(floors) == ROUNDS
    info = {"lorescan_us": round(lorescan * 1e6, 1), "floor_us": round(statistics.median(floors) * 1e6, 1),
            "window_floor_us": round(statistics.median(windows) * 1e6, 1),
            "vs_window_floor": round(lorescan / statistics.median(windows), 2),
            "naive_us": round(statistics.median(naives) * 1e6, 1),
            # the median of the turns' own ratios (each turn against its own floor, measured just
            # before it): steadier on a shared machine than a ratio of medians (also given)
            "vs_floor": round(statistics.median([t / f for t, f in zip(turns, floors)]), 2),
            "vs_floor_of_medians": round(lorescan / statistics.median(floors), 2),
            "naive_vs_lorescan": round(statistics.median(naives) / lorescan, 1),
            "median_activated": statistics.median(activated)}
    benchmark.extra_info.update(info)
    print(f"\nfloor {book_name}:", json.dumps(info))
    return info


def _check(info: dict, book_name: str, target: float) -> None:
    bound = GUARDS.get(book_name, target)
    assert info["vs_floor"] <= bound, (f"{book_name}: a steady turn is {info['vs_floor']}x the floor "
                                       f"({'guard' if book_name in GUARDS else 'target'} {bound}x)")
    assert info["naive_vs_lorescan"] >= NAIVE_TARGET, \
        f"{book_name}: slower than the SillyTavern-shaped loop ({info['naive_vs_lorescan']}x)"


@pytest.mark.benchmark(group="floor-big")
@pytest.mark.parametrize("book_name", sorted(BIG))
def bench_steady_turn_of_a_big_keyed_book_vs_floor(benchmark, chats, book_name):
    info = _steady_vs_floor(benchmark, chats, book_name)
    if info:
        _check(info, book_name, BIG_TARGET)


@pytest.mark.benchmark(group="floor-small")
@pytest.mark.parametrize("book_name", SMALL)
def bench_steady_turn_of_a_small_keyed_book_vs_floor(benchmark, chats, book_name):
    info = _steady_vs_floor(benchmark, chats, book_name)
    if info:
        _check(info, book_name, EVERY_TARGET)
