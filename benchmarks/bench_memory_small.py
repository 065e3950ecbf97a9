"""Issue 20 item 3: what a loaded small book holds in memory, against its JSON held as dicts,
and how large its ``.lsc`` file is, against its JSON.

Books: 500 corpus-shaped books (as ``bench_platform.py`` builds them: 20-300 real entries of the
corpus books at ``$LORESCAN_SHARED/corpus/books``, log-uniform, 0-2 constants), each written as
JSON and compiled to ``.lsc`` in a temporary folder (nothing of the corpus enters the repository).

Measured in the same run, each in a fresh subprocess (resident memory, RSS, gained; the
process first loads, builds an engine over and scans one other book, so its one-time costs, the
tokenizer and the case tables, are not counted):

* **baseline**: ``json.load`` of the 500 JSON files, every result held (the book as Python dicts);
* **loaded**: ``load_compiled`` of the 500 ``.lsc`` files, every book held;
* **after a scan**: then, book by book, a fresh ``STEngine`` over it and one scan of a window
  of a real chat that mentions its keys (the engine dropped, the book held: what a book cache
  holds after serving it).

The issue's target, asserted: loaded <= 0.5x the baseline, after a scan too (measured: loaded
0.44x, after a scan 0.48x; before format 6, 0.57x and 0.75x). What a loaded book holds is
mostly its automaton (pyahocorasick's nodes, ~45 % of it) and its entry records, compressed;
after a scan, the plans and hit sets the turn built (the entries it built go with the engine).
The file sizes are asserted too: ``lsc_vs_json`` <= 1.0 for every one of the 500 books, and
for every book of the corpus and of the st-real conformance vectors
(:func:`bench_every_corpus_book_compiles_to_a_file_no_larger_than_its_json`).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench_platform import _book, _chats, _corpus_entries, _window
from conftest import need_shared
from lorescan import LorebookError, load
from lorescan.formats.sillytavern import read_world
from lorescan.match.lsc import save_compiled
from lorescan.st import Compat
from lorescan.st.compiled import compile_book

N_BOOKS = 500
TARGET = 0.5               # the issue's, for both figures (asserted)
SIZE_TARGET = 1.0
OPTIONS = Compat.of("sillytavern").match_options(case_sensitive=False, match_whole_words=False)


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    keyed, constants = _corpus_entries()
    chats = _chats()
    folder = tmp_path_factory.mktemp("small-books")
    rng = random.Random(22)
    books = []
    for i in range(N_BOOKS + 1):
        book = _book(i, rng, keyed, constants)
        lsc, js = folder / f"card-{i}.lsc", folder / f"card-{i}.json"
        save_compiled(compile_book(book, OPTIONS), lsc)
        js.write_text(json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}), encoding="utf-8")
        window = [[m.name, m.text] for m in _window(rng, chats, book)]
        books.append((str(js), str(lsc), window))
    plan = folder / "plan.json"
    plan.write_text(json.dumps(books), encoding="utf-8")
    return plan, books


_SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from lorescan import BookSource, ChatMessage, STEngine, STSettings
    from lorescan.st.compiled import load_compiled

    def rss():
        gc.collect()
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) * 1024

    books = json.load(open(sys.argv[2]))
    settings = STSettings(scan_depth=10, recursive=True, budget_percent=25)

    def scan(cb, window):
        engine = STEngine([BookSource(cb, ("character",))], settings)
        engine.scan([ChatMessage(n, t) for n, t in window], max_context=8192)

    warm_js, warm_lsc, warm_window = books[0]       # one-time costs (tokenizer, tables) before r0
    json.load(open(warm_js))
    scan(load_compiled(warm_lsc), warm_window)
    books = books[1:]
    r0 = rss()
    if sys.argv[1] == "json":
        held = [json.load(open(js, encoding="utf-8")) for js, _, _ in books]
        print(json.dumps({"held": rss() - r0}))
    else:
        held = [load_compiled(lsc) for _, lsc, _ in books]
        r1 = rss()
        for cb, (_, _, window) in zip(held, books):
            scan(cb, window)
        print(json.dumps({"held": r1 - r0, "after_scan": rss() - r0}))
""")


def _run(kind: str, plan: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, kind, str(plan)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.benchmark(group="memory")
def bench_memory_of_500_loaded_small_books_vs_their_json_as_dicts(benchmark, catalogue):
    plan, books = catalogue
    runs = {"json": [], "lsc": []}

    def measure() -> None:                   # one after the other, in the same run
        for kind in ("json", "lsc"):
            runs[kind].append(_run(kind, plan))
    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    base = min(r["held"] for r in runs["json"])
    held = min(r["held"] for r in runs["lsc"])
    after = min(r["after_scan"] for r in runs["lsc"])
    json_bytes = sum(os.path.getsize(js) for js, _, _ in books[1:])
    lsc_bytes = sum(os.path.getsize(lsc) for _, lsc, _ in books[1:])
    worst = max(os.path.getsize(lsc) / os.path.getsize(js) for js, lsc, _ in books[1:])
    info = {"books": len(books) - 1, "json_mb": round(json_bytes / 2**20, 1),
            "dicts_kb_per_book": round(base / 1024 / (len(books) - 1), 1),
            "loaded_kb_per_book": round(held / 1024 / (len(books) - 1), 1),
            "after_scan_kb_per_book": round(after / 1024 / (len(books) - 1), 1),
            "loaded_vs_dicts": round(held / base, 3), "after_scan_vs_dicts": round(after / base, 3),
            "lsc_vs_json": round(lsc_bytes / json_bytes, 3), "worst_lsc_vs_json": round(worst, 3)}
    benchmark.extra_info.update(info)
    print("\nmemory of small books:", json.dumps(info))
    assert info["worst_lsc_vs_json"] <= SIZE_TARGET, f"a .lsc is {worst:.2f}x its JSON"
    info["meets_target"] = info["loaded_vs_dicts"] <= TARGET and info["after_scan_vs_dicts"] <= TARGET
    assert info["loaded_vs_dicts"] <= TARGET, f"a loaded small book holds {held / base:.3f}x its dicts"
    assert info["after_scan_vs_dicts"] <= TARGET, f"after a scan a small book holds {after / base:.3f}x"


def _corpus_books():
    """(name, JSON bytes, book) of every book of the corpus (its file's bytes) and of the st-real
    conformance vectors (the book's data as compact UTF-8 JSON, the least it can be written in)."""
    seen = set()
    for path in sorted(need_shared("corpus/books").glob("*.json")):
        try:
            book = load(path)
        except LorebookError:            # a corpus file lorescan rejects has no compiled form
            continue
        yield path.name, path.stat().st_size, book
    for path in sorted(need_shared("conformance/st-real").glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            for b in case["books"]:
                data = json.dumps(b["data"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
                if data in seen:
                    continue
                seen.add(data)
                yield f"st-real/{path.name}:{b['name']}", len(data), read_world(b["data"], source=path.name,
                                                                                  name=b["name"])


@pytest.mark.benchmark(group="memory")
def bench_every_corpus_book_compiles_to_a_file_no_larger_than_its_json(benchmark):
    books = list(_corpus_books())
    sizes: dict[str, tuple[int, int]] = {}

    def measure() -> None:
        for name, json_bytes, book in books:
            sizes[name] = (json_bytes, len(compile_book(book, OPTIONS).to_lsc()))
    benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    ratios = {name: lsc / js for name, (js, lsc) in sizes.items()}
    worst = max(ratios, key=ratios.__getitem__)
    info = {"books": len(ratios), "worst_lsc_vs_json": round(ratios[worst], 3), "worst_book": worst,
            "tiniest_json_bytes": min(js for js, _ in sizes.values()),
            "total_lsc_vs_json": round(sum(lsc for _, lsc in sizes.values()) / sum(js for js, _ in sizes.values()), 3)}
    benchmark.extra_info.update(info)
    print("\n.lsc of the corpus books:", json.dumps(info))
    over = {name: round(r, 3) for name, r in ratios.items() if r > SIZE_TARGET}
    assert not over, f"a .lsc file larger than its JSON: {over}"
