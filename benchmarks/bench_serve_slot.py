"""Issue 19 item 1: a cold lorebook-slot request reads the stored keys part of its book's pool
instead of compiling it (``BookStore.get_keys``, docs/service.md#slot-keys).

A book of the synthetic shape is uploaded once; each round is a cold worker (a fresh
``Runtime`` over the same books directory: nothing in memory) answering one slot request, in
two forms measured round by round in the same run:

* **compile**: the pool's stored keys file is removed first, so the worker compiles the pool's
  keys (what every cold slot engine did before the store kept them) and stores them;
* **stored**: the file is there; the worker reads it.

Both answers must be equal. Asserted: ``stored / compile <= TARGET`` (medians of the per-round
CPU times), and the stored path read two files (the book, its pool's keys) and compiled nothing.
Measured when the store learned to keep them (2,000 entries, load average ~13 on 2 cores, three
runs): compile 255-269 ms, stored 191-197 ms (0.73-0.75x). The rest of a cold slot request is not
the keys: a profile of the stored path gives about a third each to materialising the book's
entries from the compiled file (``CompiledBook.book``), building the pool (``slot_entry_from`` and
``plan_keys`` per entry) and the answer's log (``dataclasses.asdict`` of every entry's record).
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import tempfile
import time

import pytest

from conftest import SHORT, make_book

pytest.importorskip("msgspec", reason="the serve extra is not installed (pip install '.[serve]')")
pytest.importorskip("starlette", reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve import models as m  # noqa: E402
from lorescan.serve.runtime import ServeConfig  # noqa: E402
from lorescan.serve.turns import Runtime  # noqa: E402

N_ENTRIES = 2000
ROUNDS = 3 if SHORT else 7
TARGET = 0.85


@pytest.mark.benchmark(group="serve-slot-cold")
def bench_a_cold_slot_request_reads_its_stored_keys_instead_of_compiling(benchmark):
    book = make_book(N_ENTRIES, seed=5)
    data = json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}).encode()
    times: dict[str, list[float]] = {"compile": [], "stored": []}
    answers: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as d:
        config = ServeConfig(books_dir=d)
        rt = Runtime(config)
        book_id = rt.store.put(data, "synthetic.json", name="synthetic")["id"]
        rt.executor.shutdown()
        text = " ".join(e.fields["key"][0] for e in book.entries[:40:4])
        req = m.SlotRunRequest(books=[m.SlotBookRef(id=book_id)], turn_id="t1",
                               messages=[m.SlotMessageIn(role="user", content=f"Tell me about {text}.")])

        def cold(kind: str) -> None:
            if kind == "compile":
                for f in glob.glob(os.path.join(d, f"{book_id}.keys-*")):
                    os.unlink(f)
            worker = Runtime(config)                    # a new worker: nothing in memory
            try:
                c0 = time.process_time()
                answers[kind] = worker.slot_run(req)
                times[kind].append(time.process_time() - c0)
                store = worker.store
                if kind == "stored":
                    assert store.compiles == 0 and store.file_loads == 2, (store.compiles, store.file_loads)
                else:
                    assert store.compiles == 1
            finally:
                worker.executor.shutdown()

        cold("compile")                                 # the keys file exists from here on
        order = iter(range(10 ** 6))

        def setup():
            cold("compile")
            return ("stored",), {}

        benchmark.pedantic(lambda kind: (next(order), cold(kind)), setup=setup, rounds=ROUNDS, iterations=1)
    assert json.loads(answers["stored"]) == json.loads(answers["compile"])
    info = {k + "_ms": round(statistics.median(v) * 1000, 1) for k, v in times.items()}
    info["stored_vs_compile"] = round(statistics.median(times["stored"]) / statistics.median(times["compile"]), 3)
    benchmark.extra_info.update(info)
    print("\nserve slot cold:", json.dumps(info))
    assert info["stored_vs_compile"] <= TARGET, \
        f"a cold slot request with stored keys costs {info['stored_vs_compile']}x one that compiles them"
