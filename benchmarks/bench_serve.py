"""``lorescan serve`` under load, against an in-process ``scan`` of the same turns (issue 12).

The real server (uvicorn, 2 workers, a free loopback port) holds the 10k-entry synthetic
book; 200 chats take warm turns (each request is the whole chat so far, one new message
per turn, the chat's ``chat_id`` so its hit cache stays warm in the worker), each with what a
platform sends on every turn: the chat's ``macros``, a ``seed`` (or a fixed ``random``) and a
``timed_effects`` state (issue 20). The load
phase runs for ``LOAD_SECONDS`` (60; 10 in short mode) and never more than ``MAX_REQUESTS``
requests, then stops by itself. Reported: throughput, p50/p99 latency under load, RSS of the
worker processes at the start and the end (after a warm-up that fills the chat caches).
Asserted: zero errors and RSS flat within 10%. Then, one request in flight, each HTTP turn
follows the in-process scan of the very same turn (so both see the same machine load), and
the service's p50 must be at most max(3x, +2 ms) the scan's: HTTP, JSON and validation
together. The report splits that overhead into decoding+validation, result encoding, and
the rest (HTTP, routing, the hop to the engine thread), and gives the CPU time per turn of the
server's workers beside the in-process scan's (on a machine shared with other work, wall
time also holds the wait for a CPU at each of the two wake-ups a request needs).

The restart benchmark times the first turn of a stored book in a fresh store (read the
compiled file, build the engine, scan) against a compile of the same book.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import statistics
import tempfile
import time

import pytest

from conftest import make_book, make_chat, median_seconds

pytest.importorskip("msgspec", reason="the serve extra is not installed (pip install '.[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.st.compiled import compile_book  # noqa: E402
from lorescan.model import Lorebook, entry_from_fields  # noqa: E402
from lorescan.match.cache import ChatScan  # noqa: E402
from lorescan.st import BookSource, ChatMessage, Compat, STEngine, STSettings  # noqa: E402
from lorescan.serve.app import TOKEN_CACHE_TEXTS, _substitute  # noqa: E402
from lorescan.serve.store import BookStore  # noqa: E402
from lorescan.tokens import TiktokenCounter  # noqa: E402
from lorescan.serve.testing import HOST, ServerProcess, cpu_seconds, rss_bytes  # noqa: E402

SHORT = os.environ.get("LORESCAN_BENCH_SHORT") == "1"
LOAD_SECONDS = 10 if SHORT else 60
MAX_REQUESTS = 200_000
N_ENTRIES = 10_000
N_CHATS = 200
START_LENGTH = 40                  # each chat's first turn: this many messages (plus its index % 20)
CONCURRENCY = 2                    # requests in flight: one keep-alive connection per worker
SETTINGS = {"scan_depth": 10, "recursive": True, "match_whole_words": True}
MAX_CONTEXT = 8192
TURNS_PER_CHAT = 400
CHAT_CACHE_TEXTS = 32              # the server's --chat-cache-texts (depth 10 reuses fewer texts)
WARM_TURNS = 12                    # turns per chat before RSS is read (fills those chat caches)


def _book_json(book) -> bytes:
    return json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}).encode()


@pytest.fixture(scope="module")
def world():
    book = _with_sticky(make_book(N_ENTRIES, seed=11))
    chats = []
    for c in range(N_CHATS):
        lines = make_chat(book, START_LENGTH + 20 + TURNS_PER_CHAT // 4, seed=1000 + c)
        chats.append([ChatMessage(*line.split(": ", 1)) for line in lines])
    return book, chats


@pytest.fixture(scope="module")
def server(world, tmp_path_factory):
    book, _ = world
    books_dir = str(tmp_path_factory.mktemp("serve-books"))
    with ServerProcess(books_dir, workers=2, args=["--time-limit", "30", "--chat-cache-texts", str(CHAT_CACHE_TEXTS)]) as srv:
        c = srv.client(timeout=300)
        status, info = c.json("POST", "/v1/books?name=synthetic", _book_json(book),
                              headers={"Content-Type": "application/json"})
        assert status == 201, info
        c.close()
        srv.book_id = info["id"]
        yield srv


MACROS = {"char": "Narrator", "user": "Rob"}


STICKY = (3, 5, 8)                 # entries with sticky 2: the timed-effects state names them


def _with_sticky(book) -> Lorebook:
    """The book as the server holds it: named as uploaded (fingerprints name the book), a few
    entries sticky."""
    return Lorebook(name="synthetic", entries=tuple(
        entry_from_fields({**e.fields, "sticky": 2}, uid=e.uid) if e.uid in STICKY else e for e in book.entries))


def _timed_state(book) -> dict:
    """A timed-effects state as a platform echoes it back: long sticky records of the sticky
    entries, by their fingerprints (a pure function of the entry, computed here under the
    name the book is uploaded with)."""
    named = Lorebook(name=book.name, entries=tuple(e for e in book.entries if e.uid in STICKY))
    engine = STEngine([BookSource(named, ("global",))], STSettings(**SETTINGS))
    return {"sticky": {f"synthetic.{uid}": {"hash": engine.tables.by_key[f"synthetic.{uid}"].hash, "start": 1,
                                            "end": 10 ** 6, "protected": False} for uid in STICKY},
            "cooldown": {}}


def request_hooks(index: int) -> dict:
    """What a platform sends with every turn: the chat's macros and a seed (one chat in three
    sends a fixed ``random`` instead)."""
    return {"macros": MACROS, **({"random": 0.25} if index % 3 == 0 else {"seed": 1000 + index})}


class _Chat:
    """One chat's turns as request bodies: its messages pre-encoded once."""

    def __init__(self, index: int, messages: list[ChatMessage], book_id: str, *, hooks: bool = True,
                 timed: dict | None = None, chat_id: str | None = None) -> None:
        self.index = index
        self.encoded = [json.dumps({"name": m.name, "mes": m.text, "is_user": m.name == "Rob"}).encode()
                        for m in messages]
        self.length = START_LENGTH + index % 20
        head = {"books": [{"id": book_id}], "settings": SETTINGS, "max_context": MAX_CONTEXT,
                "chat_id": chat_id or f"chat-{index}", **(request_hooks(index) if hooks else {}),
                **({"timed_effects": timed} if timed is not None else {})}
        self.head = json.dumps(head)[:-1].encode() + b', "messages": ['

    def next_body(self) -> tuple[int, bytes]:
        n = self.length
        self.length = n + 1 if n + 1 <= len(self.encoded) else START_LENGTH + self.index % 20
        return n, self.head + b",".join(self.encoded[:n]) + b"]}"


async def _post(reader, writer, body: bytes) -> tuple[int, bytes]:
    writer.write(b"POST /v1/st/scan HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    data = await reader.readexactly(length)
    return status, data


async def _connections(port: int, per_worker: int, workers: int = 2) -> list[tuple]:
    """``per_worker`` keep-alive connections to each worker (the kernel picks the worker of a
    new connection: open, ask, keep or close). Chats keep their connection, so each chat's
    hit cache warms in one worker and stays there."""
    kept: dict[bytes, list[tuple]] = {}
    for _ in range(400):
        if len(kept) == workers and all(len(v) >= per_worker for v in kept.values()):
            break
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(re.search(rb"(?i)content-length: *(\d+)", head).group(1)))
        pid = re.search(rb"(?i)x-lorescan-worker: *(\d+)", head).group(1)
        if len(kept.setdefault(pid, [])) < per_worker:
            kept[pid].append((reader, writer))
        else:
            writer.close()
    conns = [c for pair in zip(*kept.values()) for c in pair]
    assert len(kept) == workers and len(conns) == workers * per_worker, "could not reach every worker"
    return conns


async def _load(conns: list[tuple], chats: list[_Chat], seconds: float,
                max_requests: int) -> tuple[list[float], int, int]:
    """Closed-loop load: each connection takes turns for its own chats, round robin."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    deadline = time.monotonic() + seconds

    async def connection(k: int) -> None:
        nonlocal errors, sent
        reader, writer = conns[k]
        mine = chats[k::len(conns)]
        i = 0
        while time.monotonic() < deadline and sent < max_requests:
            chat = mine[i % len(mine)]
            i += 1
            _, body = chat.next_body()
            sent += 1
            t0 = time.perf_counter()
            status, _ = await _post(reader, writer, body)
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                errors += 1

    await asyncio.gather(*(connection(k) for k in range(len(conns))))
    return latencies, errors, sent


def _workers_rss(srv: ServerProcess) -> int:
    return sum(rss_bytes(p) for p in srv.worker_pids())


def _json_costs(book, chat_msgs, chats: list[_Chat], turn: tuple[int, int]) -> tuple[float, float]:
    """Where the overhead goes: msgspec decode+validation of one request body, and the
    result's conversion to JSON (``to_json`` + encode), for one of the measured turns."""
    import msgspec
    from lorescan.serve import models as m
    c, n = turn
    chats[c].length = n
    _, body = chats[c].next_body()
    decoder = msgspec.json.Decoder(m.STScanRequest)
    decode_s = median_seconds(lambda: decoder.decode(body), 50)
    engine = STEngine([BookSource(book, ("global",))], STSettings(**SETTINGS), compat="sillytavern")
    result = engine.scan(chat_msgs[c][:n], max_context=MAX_CONTEXT)
    encode_s = median_seconds(lambda: msgspec.json.encode(result.to_json()), 50)     # what the st route encodes
    return decode_s, encode_s


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@pytest.mark.benchmark(group="serve")
def bench_serve_load_warm_turns(benchmark, world, server):
    book, chat_msgs = world
    timed = _timed_state(book)
    chats = [_Chat(i, msgs, server.book_id, timed=timed) for i, msgs in enumerate(chat_msgs)]
    # One event loop and one connection per worker for the whole benchmark; chat k always
    # goes through connection k % 2. Warm-up (not measured): both workers build the engine and
    # every chat takes enough turns for its hit cache (the server's --chat-cache-texts) and the
    # token-count cache to fill, so RSS is read at the steady state.
    loop = asyncio.new_event_loop()
    conns = loop.run_until_complete(_connections(server.port, CONCURRENCY // 2))
    loop.run_until_complete(_load(conns, chats, 900, N_CHATS * WARM_TURNS))
    rss_start = _workers_rss(server)
    latencies, errors, sent = loop.run_until_complete(_load(conns, chats, LOAD_SECONDS, MAX_REQUESTS))
    rss_end = _workers_rss(server)
    p50, p99 = _pct(latencies, 0.5), _pct(latencies, 0.99)

    # The latency ratio: one request in flight, each HTTP turn right after the in-process scan
    # of the very same turn (same engine settings, a warm ChatScan per chat), so both see the
    # same machine load. pytest-benchmark times the HTTP turns; setup() times the scans.
    # The same engine configuration as the server's (token-count cache, per-chat cache bound),
    # so the difference is HTTP, JSON and validation alone.
    engine = STEngine([BookSource(book, ("global",))], STSettings(**SETTINGS), compat="sillytavern",
                      count_tokens=TiktokenCounter(cache_size=TOKEN_CACHE_TEXTS))
    caches: dict[int, ChatScan] = {}
    scan_times: list[float] = []
    scan_cpu: list[float] = []
    order = iter(range(10 ** 9))

    def setup():
        chat = chats[next(order) % 20]
        n, body = chat.next_body()
        cache = caches.get(chat.index)
        if cache is None:
            cache = caches[chat.index] = ChatScan(max_texts=CHAT_CACHE_TEXTS)
            engine.scan(chat_msgs[chat.index][:n - 1], max_context=MAX_CONTEXT, cache=cache)
        hooks = request_hooks(chat.index)        # what the worker does with the request's hooks
        constant = hooks.get("random")
        c0, t0 = time.process_time(), time.perf_counter()
        engine.scan(chat_msgs[chat.index][:n], max_context=MAX_CONTEXT, cache=cache, timed_effects=timed,
                    substitute=_substitute(hooks["macros"]),
                    random=(lambda: constant) if constant is not None else random.Random(hooks["seed"]).random)
        scan_times.append(time.perf_counter() - t0)
        scan_cpu.append(time.process_time() - c0)
        return (body, chat.index % len(conns)), {}

    def http_turn(body, k):
        status, _ = loop.run_until_complete(_post(*conns[k], body))
        assert status == 200

    rounds = 120 if SHORT else 300
    workers = server.worker_pids()
    server_cpu0 = sum(cpu_seconds(p) for p in workers)
    benchmark.pedantic(http_turn, setup=setup, rounds=rounds, iterations=1, warmup_rounds=0)
    server_cpu = (sum(cpu_seconds(p) for p in workers) - server_cpu0) / rounds
    for _, writer in conns:
        writer.close()
    loop.close()
    scan_p50 = statistics.median(scan_times)
    http_p50 = benchmark.stats.stats.median if not benchmark.disabled else None
    decode_s, encode_s = _json_costs(book, chat_msgs, chats, (0, chats[0].length))
    info = {"load_seconds": LOAD_SECONDS, "requests": sent, "errors": errors,
            "throughput_rps": round(len(latencies) / LOAD_SECONDS, 1),
            "load_p50_ms": round(p50 * 1000, 3), "load_p99_ms": round(p99 * 1000, 3),
            "rss_start_mib": round(rss_start / 2**20, 1), "rss_end_mib": round(rss_end / 2**20, 1),
            "in_process_scan_p50_ms": round(scan_p50 * 1000, 3),
            "in_process_scan_cpu_ms": round(sum(scan_cpu) / len(scan_cpu) * 1000, 3),
            "server_cpu_per_turn_ms": round(server_cpu * 1000, 3),
            "load_average": os.getloadavg()[0],
            "decode_validate_ms": round(decode_s * 1000, 3), "result_encode_ms": round(encode_s * 1000, 3)}
    if http_p50 is not None:
        info["http_p50_ms"] = round(http_p50 * 1000, 3)
        info["http_and_dispatch_ms"] = round((http_p50 - scan_p50 - decode_s - encode_s) * 1000, 3)
    benchmark.extra_info.update(info)
    print("\nserve load:", json.dumps(info))
    assert errors == 0, f"{errors} of {sent} requests failed"
    assert abs(rss_end - rss_start) <= 0.10 * rss_start, f"RSS went from {rss_start} to {rss_end} bytes"
    if http_p50 is None:
        return
    limit = max(3 * scan_p50, scan_p50 + 0.002)
    assert http_p50 <= limit, (f"service p50 {http_p50 * 1000:.2f} ms is above max(3x, +2 ms) of the in-process "
                               f"scan of the same turns ({scan_p50 * 1000:.2f} ms)")


@pytest.mark.benchmark(group="serve-restart")
def bench_restart_first_turn_vs_compile(benchmark, world):
    book, chat_msgs = world
    options = Compat.sillytavern().match_options(match_whole_words=True)
    compile_time = median_seconds(lambda: compile_book(book, options), 1 if SHORT else 3)
    with tempfile.TemporaryDirectory() as d:
        first = BookStore(d)
        book_id = first.put(_book_json(book), "synthetic.json", name="synthetic")["id"]
        first.get(book_id, options)                       # stored for these rules, as a running server would

        def setup():
            return (BookStore(d),), {}                    # a restarted worker: nothing in memory

        def first_turn(store):
            engine = STEngine([BookSource(store.get(book_id, options), ("global",))], STSettings(**SETTINGS))
            engine.scan(chat_msgs[0][:START_LENGTH], max_context=MAX_CONTEXT)
            assert store.compiles == 0 and store.file_loads == 1

        benchmark.pedantic(first_turn, setup=setup, rounds=3 if SHORT else 7, iterations=1)
    if benchmark.disabled:
        return
    ratio = benchmark.stats.stats.median / compile_time
    benchmark.extra_info["first_turn_vs_compile"] = round(ratio, 3)
    assert ratio < 0.25, f"a restart's first turn costs {ratio:.2f}x a compile"


@pytest.mark.benchmark(group="serve-hooks")
def bench_serve_macros_and_seed_cost_at_most_1_1x_none(benchmark, world, server):
    """Issue 20: a request with macros, a seed and a timed-effects state costs at most 1.1x the
    same request without them. One request in flight; each round sends the same turn twice,
    to two warm chats of the same messages: without the hooks (timed by hand) and with them
    (timed by pytest-benchmark)."""
    book, chat_msgs = world
    timed = _timed_state(book)
    plain = [_Chat(i, chat_msgs[i], server.book_id, hooks=False, timed=timed, chat_id=f"plain-{i}")
             for i in range(4)]
    hooked = [_Chat(i, chat_msgs[i], server.book_id, timed=timed, chat_id=f"hooked-{i}") for i in range(4)]
    loop = asyncio.new_event_loop()
    conns = loop.run_until_complete(_connections(server.port, 1))
    conn = conns[0]                     # one worker: both sides hit the same engine and caches

    def post(body: bytes) -> None:
        status, data = loop.run_until_complete(_post(*conn, body))
        assert status == 200, data[:200]

    for _ in range(8):                  # warm both sides' chat caches
        for a, b in zip(plain, hooked):
            post(a.next_body()[1])
            post(b.next_body()[1])
    plain_times: list[float] = []
    order = iter(range(10 ** 9))

    def setup():
        k = next(order) % len(plain)
        _, body = plain[k].next_body()
        t0 = time.perf_counter()
        post(body)
        plain_times.append(time.perf_counter() - t0)
        return (hooked[k].next_body()[1],), {}

    benchmark.pedantic(post, setup=setup, rounds=150 if SHORT else 400, iterations=1, warmup_rounds=0)
    for _, writer in conns:
        writer.close()
    loop.close()
    if benchmark.disabled:
        return
    ratio = benchmark.stats.stats.median / statistics.median(plain_times)
    benchmark.extra_info.update({"plain_p50_ms": round(statistics.median(plain_times) * 1000, 3),
                                 "hooks_p50_ms": round(benchmark.stats.stats.median * 1000, 3),
                                 "hooks_vs_plain": round(ratio, 3)})
    print("\nserve hooks:", benchmark.extra_info)
    assert ratio <= 1.1, f"a request with macros and a seed costs {ratio:.2f}x one without over HTTP"
