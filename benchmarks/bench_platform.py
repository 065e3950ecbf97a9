"""Issue 20: the platform's shape. Thousands of small books, every request cold, macros and a seed on
every turn.

Books: 1,000 distinct books in short mode (full: 2,000) of 20-300 entries (log-uniform), each
drawn (seeded, a generator per book) from the real entries of the corpus books at
``$LORESCAN_SHARED/corpus/books`` (their keys, regex keys, contents, timed fields and macros as
written; entries over 8,000 characters left out; 0-2 constants a book), renumbered, named
``card-<i>``. The catalogue is built once per session by two processes (``JOBS``; ~30 s for
1,000 books on an idle 2-core machine, 220 s for 2,000 at a load average of 8): each book's JSON
stored as ``lorescan serve`` stores an upload (``BookStore.put``: read, compile with the contents'
token counts, write the ``.lsc`` and the description) in a temporary books directory, nothing of
the corpus in the repository. The in-process requests read those ``.lsc`` files; the service
bench serves that directory as it is (no upload step).
Requests: one per book, in a seeded shuffled order, each on a 20-message window of a real corpus
chat with two to four of the book's plain keys mentioned in its newest ten messages, the chat's
macros (``{{char}}``, ``{{user}}``), a seed, and a timed-effects state naming the book's timed
entries; depth 10, recursion, a budget of 25% of 8k, the book in the character role.

Measured in the same run, request by request: the two baselines (in alternating order), then
the lorescan request (timed by pytest-benchmark too), each in wall time and in the CPU time of
the thread (``time.thread_time``):

* **lorescan cold**: ``load_compiled`` + ``STEngine(...)`` + ``scan``, then the book, engine
  and result let go (split into the four: load, build, scan, free);
* **floor**: read the compiled automaton (``load_keys``), one pass over the window's
  messages, the union of the hits, then the automaton let go;
* **naive**: ``json.load`` of the book + a per-key substring loop over the window + a
  tiktoken budget over the matched contents (its dicts let go on return).

Each request's frees are inside its timing (since 2026-12-07; before, the lorescan request and
the floor freed after their timers stopped while the naive loop and the worker's CPU count
freed inside): a platform's request pays them, and the service comparison counts the worker's.

The issue's targets, p50 <= 3x the floor and p99 <= 10x, are asserted on CPU time: on this
2-core machine shared by several people the wall time of a 2 ms request holds waits for a CPU
that the 0.8 ms floor mostly escapes (at a load average of 13, wall p50 read 8x the floor
while CPU p50 read 2.7-3x), so wall ratios are reported and held to the old regression guards
(25x / 40x). Present (CPU, 1,000 books, load averages 0.9-1.4, three runs on 2026-12-07, frees
counted): p50 3.01x, 3.12x and 3.28x the floor (the machine's speed moved the floor from 0.78 to
1.05 ms between runs), p99 3.0-3.2x; the free is 0.08-0.15 ms of the 2.3-3.4 ms. Before: 3.31x
(before 2026-12-04's changes: a macro-changed content counted only around its changes, no key
table or record built for timed lookups, one side matcher per expansion shared), 3.08-3.10x
before 2026-12-07's (a plain candidate's record built only when a key of it matches).
So the p50 target is not met: it is reported (``meets_p50_target``) and asserted at
``FLOOR_P50_GUARD_CPU`` until the cold request is cheaper; the p99 target is asserted.

The service part sends the same requests through ``lorescan serve`` (one worker, a book cache
of a quarter of the catalogue: every request loads its book from disk and evicts another)
interleaved with the in-process requests of the same turns, and checks the service activates
the same entries. A request's worker CPU (all its threads, ``/proc/<pid>/task/*/schedstat``) is
counted from just before it to just before the next request, so what the worker does after
answering (it frees evicted books and runs the GC passes a turn made due then) is counted too.
The issue's target (p50 <= in-process p50 + 1 ms) is not met with margin: on 2026-12-07 (frees
counted on both sides, load averages 0.9-1.3) the worker's CPU p50 read 0.90, 1.05 and 1.17 ms
above the in-process request's (1.04-1.41 ms before the in-process frees were counted; 0.73 ms at
a load average of 0.9 on 2026-12-04). A small turn runs on the event loop when the engine thread
is idle (``serve.runtime``: the hand-off to the engine thread and back cost ~0.3 ms of it). Of
what is left, the HTTP layers are little: called in one process, interleaved with the direct
request (a harness outside the repository, thread CPU), the ASGI app cost 0.64 ms more per
request, by the profile's shares mostly in loading the book (about 0.85 ms against 0.5 ms
direct). A guess is that the cache's eviction at every load puts the new book in cold memory,
but a worker with a one-book cache was not cheaper in a try (p50 3.9-4.0 ms against 3.4-4.0 ms),
so that is not settled. Answering a turn without Starlette's router and middleware saved
nothing measurable (-31 us, in the noise). The worker's own process adds the rest: it sleeps
between requests and finds its caches cold (a cold request measured 0.6 ms slower right after an
8 MB sweep of memory than right after another request). So that difference is held to a guard
(``HTTP_EXTRA_CPU_GUARD``) and reported with ``meets_target_1ms``, and the worker's p99 to 4x the
in-process p99 (``HTTP_P99_CPU_GUARD``: a collection of the whole heap inside a turn made it
71-100 ms, now 9-11 ms). Wall time through the service is reported, not asserted: each request
wakes the worker and then the client, and on a loaded machine each wake-up may wait for a CPU (at a load average of 7, the wall p50 read 13.7 ms against 7.6 ms in process).
"""
from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from bench_hooks import macro_hook
from conftest import SHORT, need_shared
from lorescan import BookSource, ChatMessage, STEngine, STSettings, load
from lorescan.js.stdecorators import parse_st_decorators
from lorescan.js.sthash import entry_fingerprint
from lorescan.match.compile import load_keys
from lorescan.st.compiled import load_compiled
from lorescan.model import Lorebook, entry_from_fields
from lorescan.serve.store import DEFAULT_RULES, BookStore
from lorescan.tokens import TiktokenCounter

N_BOOKS = 1000 if SHORT else 2000
ROUNDS = 1
JOBS = 2                            # processes building the catalogue (once per session)
CHUNK = 25                          # books a catalogue task builds
SETTINGS = STSettings(scan_depth=10, recursive=True, budget_percent=25)
MAX_CONTEXT = 8192
BUDGET = 2048                       # 25% of 8k, for the naive baseline
MAX_CONTENT = 8000
# regression guards, not the targets (present: ~12x / ~8-13x the floor; naive / lorescan ~0.34)
FLOOR_P50_TARGET = 3                # the targets, on CPU time (see the module docstring); p50 reported
FLOOR_P50_GUARD_CPU = 3.6           # asserted meanwhile: 3.0-3.3x at load averages of 1 (2026-12-07)
FLOOR_P99_TARGET = 10
FLOOR_P50_GUARD = 25                # wall time, regression guards (a loaded machine's waits included)
FLOOR_P99_GUARD = 40
NAIVE_GUARD = 0.15
HTTP_EXTRA_S = 0.001                # the target: the service adds at most 1 ms at p50 (reported)
HTTP_EXTRA_CPU_GUARD = 0.0025       # asserted: the worker's CPU per request at p50 at most the in-process one's + 2.5 ms
HTTP_P99_CPU_GUARD = 4              # asserted: the worker's CPU p99 at most 4x the in-process request's p99


def _corpus_entries():
    keyed, constants = [], []
    for path in sorted(need_shared("corpus/books").glob("*.json")):
        try:
            book = load(path)
        except Exception:           # noqa: BLE001 - a corpus file lorescan rejects is not a platform book
            continue
        for e in book.entries:
            if len(e.content) > MAX_CONTENT or e.disable:
                continue
            if e.constant:
                constants.append(e)
            elif e.key:
                keyed.append(e)
    return keyed, constants


def _chats() -> list[list[ChatMessage]]:
    out = []
    for path in sorted(need_shared("corpus/chats").glob("*.jsonl")):
        msgs = []
        for line in path.read_text(encoding="utf-8").splitlines():
            m = json.loads(line)
            if "mes" in m and not m.get("is_system") and isinstance(m["mes"], str):
                msgs.append(ChatMessage(str(m.get("name", "")), m["mes"][:4000]))
        if len(msgs) >= 20:
            out.append(msgs)
    return out


def _book(i: int, rng: random.Random, keyed, constants) -> Lorebook:
    n = int(math.exp(rng.uniform(math.log(20), math.log(300))))
    k = rng.choice((0, 0, 0, 1, 2))
    picked = rng.sample(keyed, n - k) + rng.sample(constants, k)
    entries = tuple(entry_from_fields({**e.fields, "uid": uid}, uid=uid) for uid, e in enumerate(picked))
    return Lorebook(name=f"card-{i}", entries=entries)


def _plain_keys(book: Lorebook) -> list[str]:
    return [k for e in book.entries for k in e.key if isinstance(k, str) and k.strip() and not k.startswith("/")]


def _state(book: Lorebook) -> dict:
    """Long sticky / cooldown records of the book's timed entries, by their fingerprints."""
    state: dict = {"sticky": {}, "cooldown": {}}
    for e in book.entries:
        kind = "sticky" if e.sticky else "cooldown" if e.cooldown else None
        if kind is None or len(state[kind]) >= 2:
            continue
        decorators, content = parse_st_decorators(e.content, strict_lines=False)
        h = entry_fingerprint(e.fields, uid=e.uid, world=book.name, content=content, decorators=decorators)
        state[kind][f"{book.name}.{e.uid}"] = {"hash": h, "start": 1, "end": 10 ** 6, "protected": False}
    return state


def _window(rng: random.Random, chats, book: Lorebook | list[str]) -> list[ChatMessage]:
    chat = rng.choice(chats)
    start = rng.randrange(len(chat) - 19)
    msgs = list(chat[start:start + 20])
    plain = _plain_keys(book) if isinstance(book, Lorebook) else book
    for _ in range(rng.randint(2, 4)):
        if plain:
            j = rng.randrange(10, 20)
            msgs[j] = ChatMessage(msgs[j].name, f"{msgs[j].text} {rng.choice(plain)}")
    return msgs


_POOL: list = []                    # a catalogue process's corpus entries (read once per process)


def _store_books(task: tuple[str, str, range]) -> list[tuple]:
    """Build books ``indices`` (each from its own seeded generator, so any process builds the same
    book) and store each as ``lorescan serve`` does at upload (``BookStore.put``: read the JSON,
    compile with the contents' token counts, write ``<id>.json`` and the ``.lsc``) into the books
    directory ``store_dir``; the JSON beside it in ``json_dir`` for the naive baseline.
    Returns (name, id, lsc path, json path, timed-effects state, plain keys) per book."""
    store_dir, json_dir, indices = task
    if not _POOL:
        _POOL.extend(_corpus_entries())
    keyed, constants = _POOL
    store = BookStore(store_dir, cache_bytes=0)        # the books are read back from disk, not kept here
    out = []
    for i in indices:
        book = _book(i, random.Random(20_000 + i), keyed, constants)
        data = json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}).encode()
        js = os.path.join(json_dir, f"card-{i}.json")
        with open(js, "wb") as fh:
            fh.write(data)
        book_id = store.put(data, f"card-{i}.json", name=book.name)["id"]
        out.append((book.name, book_id, store._compiled_path(book_id, DEFAULT_RULES), js, _state(book),
                    _plain_keys(book)))
    return out


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    """The catalogue, built once for both benchmarks by JOBS processes: a books directory as
    ``lorescan serve`` keeps it (the service bench serves it as it is, the in-process requests read
    the same ``.lsc`` files), and the books' JSON for the naive baseline."""
    keyed, constants = _corpus_entries()
    chats = _chats()
    root = tmp_path_factory.mktemp("platform")
    store_dir, json_dir = str(root / "books"), str(root / "json")
    os.makedirs(store_dir)
    os.makedirs(json_dir)
    tasks = [(store_dir, json_dir, range(s, min(s + CHUNK, N_BOOKS))) for s in range(0, N_BOOKS, CHUNK)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(JOBS, mp_context=multiprocessing.get_context("spawn")) as pool:
        requests = [r for chunk in pool.map(_store_books, tasks) for r in chunk]
    print(f"\nplatform catalogue: {len(requests)} books stored in {time.perf_counter() - t0:.1f} s ({JOBS} processes)")
    assert len({r[1] for r in requests}) == N_BOOKS, "two books of the catalogue are the same book"
    return requests, chats, len(keyed) + len(constants), store_dir


def _jobs(requests, chats) -> list[tuple]:
    """The requests in a seeded shuffled order: (lsc, json, state, window, seed, book id) each."""
    rng = random.Random(21)
    jobs = []
    for _ in range(ROUNDS):
        for name, book_id, lsc, js, state, plain in requests:
            jobs.append((lsc, js, state, _window(rng, chats, plain), rng.randrange(1 << 30), book_id))
    rng.shuffle(jobs)
    return jobs


MACROS = {"char": "Seraphina", "user": "Anon"}


def _cold_request(lsc: str, state: dict, msgs: list[ChatMessage], seed: int,
                  macros) -> tuple[float, float, float, float, list]:
    """One cold in-process request: (load, build, scan, free) seconds and the activated entries.
    The book, the engine and the result are let go inside it (``free``), as a platform's request
    lets them go and as the worker's CPU count holds its frees."""
    t0 = time.perf_counter()
    cb = load_compiled(lsc)
    t1 = time.perf_counter()
    engine = STEngine([BookSource(cb, ("character",))], SETTINGS)
    t2 = time.perf_counter()
    r = engine.scan(msgs, max_context=MAX_CONTEXT, substitute=macros, random=random.Random(seed).random,
                    timed_effects=state)
    t3 = time.perf_counter()
    activated = [list(e) for e in r.activated]
    del cb, engine, r
    return t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3, activated


def _naive(js_path: str, texts: list[str], encoding) -> int:
    with open(js_path, encoding="utf-8") as fh:
        entries = json.load(fh)["entries"]
    haystack = "\n".join(texts).lower()
    used = 0
    for e in sorted(entries.values(), key=lambda e: -(e.get("order") or 0)):
        if e.get("disable"):
            continue
        if e.get("constant") or any(isinstance(k, str) and k and k.lower() in haystack for k in e.get("key") or ()):
            used += len(encoding.encode(e.get("content") or ""))
            if used >= BUDGET:
                break
    return used


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@pytest.mark.benchmark(group="platform")
def bench_cold_small_book_requests_vs_floor_and_naive(benchmark, platform):
    requests, chats, pool, _ = platform
    encoding = TiktokenCounter().encoding
    jobs = _jobs(requests, chats)
    times: dict[str, list[float]] = {"lorescan": [], "floor": [], "naive": [], "load": [], "build": [], "scan": [],
                                     "free": [], "lorescan_cpu": [], "floor_cpu": []}
    macros = macro_hook(MACROS)
    at = iter(range(len(jobs)))
    activated = []

    def lorescan_request(lsc, state, msgs, seed) -> None:
        c0 = time.thread_time()
        load_s, build_s, scan_s, free_s, found = _cold_request(lsc, state, msgs, seed, macros)
        times["lorescan_cpu"].append(time.thread_time() - c0)
        times["lorescan"].append(load_s + build_s + scan_s + free_s)
        times["load"].append(load_s)
        times["build"].append(build_s)
        times["scan"].append(scan_s)
        times["free"].append(free_s)
        activated.append(len(found))

    def floor(lsc, msgs) -> None:
        c0, t0 = time.thread_time(), time.perf_counter()
        matcher = load_keys(lsc).matcher
        hits = frozenset().union(*[matcher.scan(f"{m.name}: {m.text}") for m in msgs[-10:]])
        del matcher, hits               # let go inside it, as the lorescan request lets its book go
        times["floor"].append(time.perf_counter() - t0)
        times["floor_cpu"].append(time.thread_time() - c0)

    def naive(js, msgs) -> None:
        t0 = time.perf_counter()
        _naive(js, [f"{m.name}: {m.text}" for m in msgs[-10:]], encoding)
        times["naive"].append(time.perf_counter() - t0)

    def setup():             # the baselines of the same request first, in alternating order
        lsc, js, state, msgs, seed, _ = jobs[next(at)]
        if len(times["floor"]) % 2:
            floor(lsc, msgs)
            naive(js, msgs)
        else:
            naive(js, msgs)
            floor(lsc, msgs)
        return (lsc, state, msgs, seed), {}

    for lsc, js, state, msgs, seed, _ in jobs[:5]:   # process start-up (tokenizer, tables): once per process
        lorescan_request(lsc, state, msgs, seed)
        floor(lsc, msgs)
        naive(js, msgs)
    for v in times.values():
        v.clear()
    activated.clear()
    benchmark.pedantic(lorescan_request, setup=setup, rounds=len(jobs), iterations=1, warmup_rounds=0)
    p50 = {k: statistics.median(v) for k, v in times.items()}
    p99 = {k: _pct(v, 0.99) for k, v in times.items()}
    info = {"books": len(requests), "requests": len(jobs), "entry_pool": pool,
            "median_activated": statistics.median(activated),
            **{f"{k}_p50_ms": round(v * 1000, 3) for k, v in p50.items()},
            **{f"{k}_p99_ms": round(v * 1000, 3) for k, v in p99.items()
               if k in ("lorescan", "floor", "naive", "lorescan_cpu", "floor_cpu")},
            "cpu_p50_vs_floor": round(p50["lorescan_cpu"] / p50["floor_cpu"], 2),
            "cpu_p99_vs_floor": round(p99["lorescan_cpu"] / p99["floor_cpu"], 2),
            "p50_vs_floor": round(p50["lorescan"] / p50["floor"], 2),
            "p99_vs_floor": round(p99["lorescan"] / p99["floor"], 2),
            "median_ratio_vs_floor": round(statistics.median(
                a / b for a, b in zip(times["lorescan"], times["floor"])), 2),
            "naive_vs_lorescan_p50": round(p50["naive"] / p50["lorescan"], 2),
            "load_average": round(os.getloadavg()[0], 1)}
    benchmark.extra_info.update(info)
    print("\nplatform:", json.dumps(info))
    assert statistics.median(activated) > 0, "the requests activate nothing: the benchmark measures no turn"
    info["meets_p50_target"] = info["cpu_p50_vs_floor"] <= FLOOR_P50_TARGET
    benchmark.extra_info["meets_p50_target"] = info["meets_p50_target"]
    print("platform p50 target met:", info["meets_p50_target"])
    assert info["cpu_p50_vs_floor"] <= FLOOR_P50_GUARD_CPU, \
        f"a cold request's CPU p50 is {info['cpu_p50_vs_floor']}x the floor's (guard {FLOOR_P50_GUARD_CPU}x, target 3x)"
    assert info["cpu_p99_vs_floor"] <= FLOOR_P99_TARGET, f"a cold request's CPU p99 is {info['cpu_p99_vs_floor']}x the floor's"
    assert info["p50_vs_floor"] <= FLOOR_P50_GUARD, f"cold p50 is {info['p50_vs_floor']}x the floor"
    assert info["p99_vs_floor"] <= FLOOR_P99_GUARD, f"cold p99 is {info['p99_vs_floor']}x the floor"
    assert info["naive_vs_lorescan_p50"] >= NAIVE_GUARD, \
        f"a cold request costs {1 / info['naive_vs_lorescan_p50']:.1f}x the naive baseline"


def _task_cpu(pid: int) -> float:
    """Seconds of CPU every thread of process ``pid`` has run (Linux ``/proc/<pid>/task/*/schedstat``,
    nanoseconds), so a worker's cost per request is read without the waits of a loaded machine."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, IndexError, ValueError):     # a thread that ended meanwhile
            pass
    return total / 1e9


def _request_body(book_id: str, state: dict, msgs: list[ChatMessage], seed: int) -> bytes:
    """What a platform sends for one cold request: the window, the chat's macros, a seed and the
    timed-effects state, the book in the character role."""
    return json.dumps({
        "books": [{"id": book_id, "roles": ["character"]}], "max_context": MAX_CONTEXT,
        "settings": {"scan_depth": SETTINGS.scan_depth, "recursive": SETTINGS.recursive,
                     "budget_percent": SETTINGS.budget_percent},
        "messages": [{"name": m.name, "mes": m.text} for m in msgs],
        "macros": MACROS, "seed": seed, "timed_effects": state}).encode()


@pytest.mark.benchmark(group="platform-serve")
def bench_cold_small_book_requests_through_serve(benchmark, platform, tmp_path_factory):
    """The same cold requests through ``lorescan serve`` (one worker in a subprocess, one request
    in flight), its book cache a quarter of the catalogue's compiled bytes, so most requests
    read their book from disk. Each HTTP request follows (or, every other one, precedes) the
    in-process cold request of the very same turn, so both see the same machine load; the
    service must answer the same entries."""
    pytest.importorskip("msgspec", reason="the serve extra is not installed (pip install '.[serve]')")
    pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install '.[serve]')")
    import http.client
    from lorescan.serve.testing import HOST, ServerProcess

    requests, chats, _, books_dir = platform
    jobs = _jobs(requests, chats)
    catalogue = sum(os.path.getsize(r[2]) for r in requests)
    cache_mb = catalogue / 4 / (1 << 20)
    macros = macro_hook(MACROS)
    # the worker serves the catalogue's books directory as it is (stored as an upload stores them)
    with ServerProcess(books_dir, workers=1, args=["--book-cache-mb", f"{cache_mb:.3f}", "--time-limit", "30"],
                       log_path=str(tmp_path_factory.mktemp("platform-serve") / "server.log")) as srv:
        conn = http.client.HTTPConnection(HOST, srv.port, timeout=120)

        def post(path: str, body: bytes) -> tuple[int, bytes]:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()

        bodies = [_request_body(book_id, state, msgs, seed) for _, _, state, msgs, seed, book_id in jobs]
        local: list[float] = []
        local_cpu: list[float] = []
        marks: list[float] = []         # the worker's CPU (all threads) just before each HTTP request
        walls: list[float] = []
        same = [0, 0]
        order = iter(range(len(jobs)))
        worker = srv.worker_pids()[0]

        def in_process(k: int) -> list:
            lsc, _, state, msgs, seed, _ = jobs[k]
            c0 = time.thread_time()
            load_s, build_s, scan_s, free_s, found = _cold_request(lsc, state, msgs, seed, macros)
            local_cpu.append(time.thread_time() - c0)
            local.append(load_s + build_s + scan_s + free_s)
            return found

        def http_request(k: int, expect: list | None) -> None:
            marks.append(_task_cpu(worker))
            t0 = time.perf_counter()
            status, data = post("/v1/st/scan", bodies[k])
            walls.append(time.perf_counter() - t0)
            assert status == 200, data[:300]
            if expect is not None:
                same[0] += 1
                same[1] += [[a["world"], a["uid"]] for a in json.loads(data)["activated"]] == expect

        def setup():             # the in-process request of the same turn first, every other one after
            k = next(order)
            return ((k, in_process(k)) if k % 2 == 0 else (k, None)), {}

        def request(k: int, expect: list | None) -> None:
            http_request(k, expect)
            if expect is None:
                in_process(k)

        for k in range(min(5, len(jobs))):          # process start-up on both sides
            http_request(k, None)
            in_process(k)
        local.clear()
        local_cpu.clear()
        marks.clear()
        walls.clear()
        benchmark.pedantic(request, setup=setup, rounds=len(jobs), iterations=1, warmup_rounds=0)
        time.sleep(0.2)                 # what the worker does after the last answer (it frees, collects)
        marks.append(_task_cpu(worker))
        conn.close()
    if benchmark.disabled:
        return
    # a request's worker CPU: from just before it to just before the next one, so what the worker
    # does after answering (freeing evicted books, the GC passes it put off) is counted too
    worker_cpu = [b - a for a, b in zip(marks, marks[1:])]
    http_p50 = statistics.median(walls)
    local_p50 = statistics.median(local)
    worker_p50, local_cpu_p50 = statistics.median(worker_cpu), statistics.median(local_cpu)
    info = {"books": len(requests), "requests": len(jobs), "book_cache_mb": round(cache_mb, 3),
            "catalogue_mb": round(catalogue / (1 << 20), 3),
            "in_process_cpu_p50_ms": round(local_cpu_p50 * 1000, 3), "worker_cpu_p50_ms": round(worker_p50 * 1000, 3),
            "worker_minus_in_process_cpu_ms": round((worker_p50 - local_cpu_p50) * 1000, 3),
            "in_process_cpu_mean_ms": round(statistics.mean(local_cpu) * 1000, 3),
            "worker_cpu_mean_ms": round(statistics.mean(worker_cpu) * 1000, 3),
            "worker_cpu_p99_ms": round(_pct(worker_cpu, 0.99) * 1000, 3),
            "in_process_cpu_p99_ms": round(_pct(local_cpu, 0.99) * 1000, 3),
            "meets_target_1ms": worker_p50 <= local_cpu_p50 + HTTP_EXTRA_S,
            "in_process_p50_ms": round(local_p50 * 1000, 3), "http_p50_ms": round(http_p50 * 1000, 3),
            "http_minus_in_process_ms": round((http_p50 - local_p50) * 1000, 3),
            "same_activated": f"{same[1]}/{same[0]}", "load_average": round(os.getloadavg()[0], 1)}
    benchmark.extra_info.update(info)
    print("\nplatform serve:", json.dumps(info))
    assert same[1] == same[0], f"the service activated other entries than the engine in {same[0] - same[1]} requests"
    assert worker_p50 <= local_cpu_p50 + HTTP_EXTRA_CPU_GUARD, (
        f"the worker's CPU per request is {worker_p50 * 1000:.2f} ms at p50, the in-process cold request's "
        f"{local_cpu_p50 * 1000:.2f} ms")
    assert _pct(worker_cpu, 0.99) <= HTTP_P99_CPU_GUARD * _pct(local_cpu, 0.99), (
        f"the worker's CPU per request is {info['worker_cpu_p99_ms']} ms at p99, the in-process cold request's "
        f"{info['in_process_cpu_p99_ms']} ms (a collection of the whole heap inside a turn?)")

