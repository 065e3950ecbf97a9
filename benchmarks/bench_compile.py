"""Issue 20 item 4: ``lorescan compile`` of a catalogue of small books.

Books: 200 corpus-shaped books (short mode: 60), built as ``bench_platform.py`` builds its
books (20-300 real entries of the corpus books at ``$LORESCAN_SHARED/corpus/books``, log-uniform,
0-2 constants), written as JSON to a temporary folder (nothing of the corpus enters the repository).

Measured in the same run:

* **per book, serial**: what one worker does for each book (``compilecmd.compile_one``: read,
  compile, encode, write the ``.lsc``), interleaved book by book with the **baseline**:
  ``json.load`` of the same file and ``json.dump`` of it to a file in the same folder. The
  asserted figure is their ratio (compile / baseline, summed over the books). At the end of
  issue 20 it measures 3.9-4.3x on a 2-core machine shared with other work (load average 7-15).
* **the command**: ``lorescan compile DIR -o OUT --jobs 2`` in process (a forked pool of two),
  timed by pytest-benchmark; books / (wall x jobs) is reported, with the serial per-core rate;
* **one book a command** (reported): the CPU of ``lorescan compile BOOK -o BOOK.lsc`` as a process
  of its own (0.4-0.55 s here, nearly all of it importing the readers and the compiler), which a
  catalogue pays once per worker.

The issue's target, 30 books a second per core, is an absolute rate: 33 ms a book, on CPU time,
which a loaded machine inflates far less than wall time (on this 2-core machine shared with other
work, wall time swings 2-4x): ``cpu_books_per_s`` is the books over the process CPU time
(``time.process_time``) of the serial ``compile_one`` calls; ``command_cpu_books_per_s`` the books
over the CPU of the command's parent and its workers (fork and pool included). The ``.lsc`` v6
layout (each entry record checked by rebuilding its entry, then deflated on its own against the
book's preset dictionary) had put it out of reach (serial 35 books/s quiet, 24-30 beside other
work; the command 29-38 quiet). Since the record writer sorts values by their types in C and
copies one primed compressor per record, and the reader skips its per-field loops on the usual
path, it measures (short mode, 200 books): quiet, serial 43-44 books/s (22.6-23.3 ms a book), the
command 40-41/s; with both cores kept busy by two spin loops, serial 31.5/s, the command 34.6/s.
Both rates are reported with ``meets_target``; a CPU rate still moves with the load beside it
(caches shared with other work), so they are asserted at the guards ``SERIAL_RATE_GUARD`` and
``COMMAND_RATE_GUARD``, below what a loaded run measured. The ratio to the JSON baseline stays
as a regression guard (``RATIO_GUARD``; present ~2.5x).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench_platform import _book, _corpus_entries
from conftest import SHORT
from lorescan import load_compiled
from lorescan.app.compilecmd import Job, catalogue_command, compile_one
from lorescan.st import Compat

N_BOOKS = 60 if SHORT else 200
JOBS = 2
RATIO_GUARD = 8.0          # compile / (json.load + json.dump) per book; present: ~2.5x
RATE_TARGET = 30.0         # the books a second per core, on CPU time (reported; met quiet and beside two spin loops)
SERIAL_RATE_GUARD = 24.0   # asserted: compile_one's books a CPU second (present 43-44 quiet, 31.5 loaded)
COMMAND_RATE_GUARD = 24.0  # asserted: the command's books a CPU second, parent and workers (present 40-41 quiet, 34.6 loaded)
OPTIONS = Compat.of("sillytavern").match_options(case_sensitive=False, match_whole_words=False)


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory) -> Path:
    keyed, constants = _corpus_entries()
    folder = tmp_path_factory.mktemp("catalogue") / "books"
    folder.mkdir()
    rng = random.Random(4)
    for i in range(N_BOOKS):
        book = _book(i, rng, keyed, constants)
        (folder / f"card-{i}.json").write_text(
            json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}), encoding="utf-8")
    return folder


def _json_round_trip(path: Path, out: Path) -> None:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


@pytest.mark.benchmark(group="compile")
def bench_compile_a_catalogue_vs_json_load_and_dump(benchmark, catalogue, tmp_path):
    books = sorted(catalogue.glob("*.json"))
    serial = tmp_path / "serial"
    serial.mkdir()
    compile_one(Job(str(books[0]), str(serial / "warm.lsc")), OPTIONS, True)      # imports, tables: once
    _json_round_trip(books[0], serial / "warm.json")
    t_compile = t_json = cpu_compile = 0.0
    for i, path in enumerate(books):            # interleaved, alternating which goes first
        for first in ((0, 1) if i % 2 else (1, 0)):
            if first:
                c0, t0 = time.process_time(), time.perf_counter()
                problem = compile_one(Job(str(path), str(serial / f"{path.stem}.lsc")), OPTIONS, True)
                t_compile += time.perf_counter() - t0
                cpu_compile += time.process_time() - c0
                assert problem is None, f"{path}: {problem}"
            else:
                t0 = time.perf_counter()
                _json_round_trip(path, serial / "baseline.json")
                t_json += time.perf_counter() - t0

    out = tmp_path / "out"
    runs = iter(range(100))

    def command() -> int:
        args = argparse.Namespace(book=[str(catalogue)], output=str(out / str(next(runs))), jobs=JOBS, force=False)
        return catalogue_command(args, OPTIONS)

    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    status = benchmark.pedantic(command, rounds=1, iterations=1, warmup_rounds=0)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    # the parent's CPU and its workers' (joined by the end of the command, so counted as children)
    command_cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
    assert status == 0
    written = sorted((out / "0").glob("*.lsc"))
    assert len(written) == len(books)
    assert len(load_compiled(written[0]).book.entries) >= 20

    # the one-book form for comparison: a process per book pays the imports every time (CPU, reported)
    one_cpu = []
    for path in books[:3]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "lorescan", "compile", str(path), "-o", str(tmp_path / "one.lsc"),
                        "--force"], check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        one_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

    ratio = t_compile / t_json
    info = {"books": len(books), "jobs": JOBS, "cpus": os.cpu_count(),
            "serial_ms_per_book": round(1000 * t_compile / len(books), 2),
            "serial_cpu_ms_per_book": round(1000 * cpu_compile / len(books), 2),
            "json_ms_per_book": round(1000 * t_json / len(books), 2),
            "ratio_vs_json": round(ratio, 2),
            "serial_books_per_s": round(len(books) / t_compile, 1),
            "cpu_books_per_s": round(len(books) / cpu_compile, 1),
            "command_wall_s": round(wall, 2),
            "command_cpu_s": round(command_cpu, 2),
            "command_cpu_books_per_s": round(len(books) / command_cpu, 1),
            "books_per_s_per_core": round(len(books) / (wall * JOBS), 1),
            "one_book_command_cpu_ms": round(1000 * sorted(one_cpu)[1], 1),
            "meets_target": min(len(books) / cpu_compile, len(books) / command_cpu) >= RATE_TARGET}
    benchmark.extra_info.update(info)
    print("\ncompile:", json.dumps(info))
    assert ratio <= RATIO_GUARD, f"compiling a book costs {ratio:.1f}x json.load + json.dump of it"
    assert len(books) / cpu_compile >= SERIAL_RATE_GUARD, (
        f"{len(books) / cpu_compile:.1f} books a CPU second compiled one by one ({1000 * cpu_compile / len(books):.1f} "
        f"ms a book), below the guard of {SERIAL_RATE_GUARD:g} a core (the target: {RATE_TARGET:g})")
    assert len(books) / command_cpu >= COMMAND_RATE_GUARD, (
        f"lorescan compile --jobs {JOBS}: {len(books) / command_cpu:.1f} books a CPU second (its workers' and "
        f"its own), below the guard of {COMMAND_RATE_GUARD:g} a core (the target: {RATE_TARGET:g})")
