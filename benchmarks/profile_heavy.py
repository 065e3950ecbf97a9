"""Where a heavy steady-state turn spends its time: cProfile by function, in percent.

The same workload as ``bench_heavy.py`` (10k entries, depth 50, recursion, whole words,
``max_context`` 131072, a warm ChatScan and one new message per turn). Prints the turns'
median wall time, then the functions by own time and by cumulative time, each as a share
of the profiled total, so before/after profiles compare directly::

    PYTHONPATH=src python benchmarks/profile_heavy.py --turns 3 --pyinstrument > profile.txt
    PYTHONPATH=src python benchmarks/profile_heavy.py --mode slot
    PYTHONPATH=src python benchmarks/profile_heavy.py --cold     # bench_heavy's cold turn

Not collected by pytest (benchmarks are ``bench_*.py``).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pickle
import pstats
import statistics
import time
from pathlib import Path

from heavy import heavy_book, heavy_chat          # run as a script, its folder is on the path
from lorescan import BACKEND, BookSource, ChatScan, STEngine, STSettings

MAX_CONTEXT = 131_072
CHAT = 1_000


def _table(stats: pstats.Stats, key: str, limit: int) -> str:
    total = sum(v[2] for v in stats.stats.values())          # own time of every function
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2 if key == "tottime" else 3], reverse=True)
    out = [f"{'own %':>7} {'cum %':>7} {'calls':>9}  function"]
    for (path, line, name), (_, calls, own, cum, _) in rows[:limit]:
        where = f"{Path(path).name}:{line}" if line else path
        out.append(f"{100 * own / total:7.1f} {100 * cum / total:7.1f} {calls:9d}  {name} ({where})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--turns", type=int, default=3, help="profiled turns (one new message each)")
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--mode", choices=("st", "slot"), default="st")
    ap.add_argument("--regex-share", type=float, default=None,
                    help="share of entries with a regex key (default: the benchmark's; 0 shows the rest)")
    ap.add_argument("--limit", type=int, default=30, help="rows per table")
    ap.add_argument("--pyinstrument", action="store_true", help="also print a pyinstrument call tree")
    ap.add_argument("--cold", action="store_true",
                    help="profile cold turns instead (ST mode): each an engine just unpickled, an empty "
                         "ChatScan and no compiled regex, as in bench_heavy's cold benchmark")
    args = ap.parse_args(argv)

    hb = heavy_book(args.entries) if args.regex_share is None else \
        heavy_book(args.entries, regex_share=args.regex_share)
    chat = heavy_chat(hb, CHAT + 2 * args.turns + 5)
    cache = ChatScan()
    if args.mode == "st":
        engine = STEngine([BookSource(hb.book, ("global",))],
                          STSettings(scan_depth=args.depth, recursive=True, match_whole_words=True))

        def turn(t: int) -> object:
            return engine.scan(chat[:t], max_context=MAX_CONTEXT, cache=cache)
    else:
        from lorescan.slot.engine import SlotEngine
        from lorescan.slot.pool import BookSettings, SlotBook
        slot = SlotEngine([SlotBook(hb.book, settings=BookSettings(scan_depth=args.depth, token_budget=32_000))])
        roles = [("assistant" if m.name == "Narrator" else "user", m.text) for m in chat]

        def turn(t: int) -> object:
            return slot.run(roles[:t], turn_id=f"heavy:{t}", cache=cache)

    if args.cold and args.mode == "st":
        from lorescan.js import regex as jsregex
        blob = pickle.dumps(engine)
        engine.scan(chat[:CHAT], max_context=MAX_CONTEXT)       # the process: tokenizer loaded

        loaded = [pickle.loads(blob) for _ in range(4 + 2 * args.turns)]    # loading is not profiled

        def turn(t: int) -> object:                             # noqa: F811 - the cold turn replaces it
            for value in vars(jsregex).values():                # as bench_heavy.clear_regex_caches
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
            return loaded.pop().scan(chat[:CHAT], max_context=MAX_CONTEXT, cache=ChatScan())
    for t in range(CHAT - 3, CHAT + 1):                       # warm: every message but the next is cached
        last = turn(t)
    profiler = cProfile.Profile()
    times = []
    for t in range(CHAT + 1, CHAT + 1 + args.turns):
        start = time.perf_counter()
        profiler.enable()
        last = turn(t)
        profiler.disable()
        times.append(time.perf_counter() - start)
    tree = ""
    if args.pyinstrument:
        from pyinstrument import Profiler
        sampler = Profiler(interval=0.0005)
        with sampler:
            for t in range(CHAT + 1 + args.turns, CHAT + 1 + 2 * args.turns):
                turn(t)
        tree = sampler.output_text(unicode=False, color=False, show_all=False)
    activated = len(getattr(last, "activated", ()) or getattr(last, "inserted", ()))
    stats = pstats.Stats(profiler, stream=io.StringIO())
    regex_keys = sum(k.startswith("/") for e in hb.book.entries for k in e.key)
    print(f"heavy {args.mode} {'cold ' if args.cold else ''}turn: {args.entries} entries ({regex_keys} regex keys), depth {args.depth}, "
          f"backend {BACKEND}, "
          f"{activated} activated, loops/passes {len(getattr(last, 'loops', ())) or getattr(last, 'passes', 0)}")
    print(f"median turn under cProfile: {statistics.median(times) * 1e3:.1f} ms over {args.turns} turns "
          f"(cProfile adds overhead; compare shares, not times)\n")
    print("By own time (share of the profiled total):")
    print(_table(stats, "tottime", args.limit))
    print("\nBy cumulative time:")
    print(_table(stats, "cumtime", args.limit))
    if tree:
        print(f"\npyinstrument, {args.turns} more turns (no cProfile):")
        print(tree)


if __name__ == "__main__":
    main()
