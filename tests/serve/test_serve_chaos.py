"""A bounded chaos test of the service (issue 22's acceptance), loopback only, about 30 s.

Two workers serve concurrent scans (both modes), uploads and deletes while the test kills one
worker with SIGKILL, truncates a stored compiled file in place and keeps slow clients
connected. Afterwards: every stored book scans (the damaged one once uploaded again), no
worker died but the one the test killed, and no request was answered 5xx; a request may fail
to be answered only if it was in flight when the worker was killed.

Marked ``chaos`` (deselected by default; CI runs it as its own step):
``python -m pytest tests/serve/test_serve_chaos.py -m chaos``.
"""
from __future__ import annotations

import http.client
import json
import os
import random
import re
import signal
import socket
import threading
import time

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve.testing import HOST, ServerProcess  # noqa: E402

pytestmark = pytest.mark.chaos

CHAOS_SECONDS = 15
CLIENTS = 6
OCTETS = {"Content-Type": "application/octet-stream"}


def _book(tag: str, entries: int = 40) -> bytes:
    return json.dumps({"entries": {str(j): {"uid": j, "key": [f"{tag}key{j}"], "content": f"{tag} lore {j}"}
                                   for j in range(entries)}}).encode()


def _st(book_id: str, text: str) -> dict:
    return {"books": [{"id": book_id}], "max_context": 10000, "messages": [{"name": "u", "mes": text, "is_user": True}]}


def _slot(book_id: str, text: str) -> dict:
    return {"books": [{"id": book_id}], "turn_id": 1, "messages": [{"role": "user", "content": text}]}


class Journal:
    """Every request the clients made: (method, path, status or the exception's name, start, end)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: list[tuple[str, str, int | str, float, float]] = []

    def add(self, *row) -> None:
        with self.lock:
            self.rows.append(row)


def _client_loop(port: int, stop: threading.Event, journal: Journal, base: dict[str, str], seed: int) -> None:
    rng = random.Random(seed)
    conn: http.client.HTTPConnection | None = None
    own: list[str] = []          # books this client uploaded (it deletes only those)
    n = 0
    while not stop.is_set():
        n += 1
        tag = rng.choice(sorted(base))
        roll = rng.random()
        if roll < 0.45:
            method, path, body = "POST", "/v1/st/scan", json.dumps(_st(base[tag], f"about {tag}key3")).encode()
        elif roll < 0.65:
            method, path, body = "POST", "/v1/slot/run", json.dumps(_slot(base[tag], f"about {tag}key5")).encode()
        elif roll < 0.8 or not own:
            method, path, body = "POST", "/v1/books", _book(f"c{seed}n{n}", 20)
        elif roll < 0.9:
            method, path, body = "DELETE", f"/v1/books/{own.pop(rng.randrange(len(own)))}", None
        else:
            method, path, body = "GET", "/v1/books", None
        start = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, port, timeout=30)
            conn.request(method, path, body=body, headers=OCTETS if path == "/v1/books" else
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            journal.add(method, path, resp.status, start, time.monotonic())
            if path == "/v1/books" and method == "POST" and resp.status in (200, 201):
                own.append(json.loads(data)["id"])
        except (OSError, http.client.HTTPException) as exc:
            journal.add(method, path, type(exc).__name__, start, time.monotonic())
            if conn is not None:
                conn.close()
            conn = None


def _slow_clients(port: int, stop: threading.Event, opened: list[socket.socket]) -> None:
    while not stop.is_set():
        try:
            s = socket.create_connection((HOST, port))
            s.sendall(b"POST /v1/st/scan HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"books\"")
            opened.append(s)
        except OSError:
            pass
        stop.wait(0.5)


def _closed_by_server(s: socket.socket) -> bool:
    s.settimeout(15)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_chaos_two_workers_kill_truncate_and_slow_clients(tmp_path):
    books = tmp_path / "books"
    with ServerProcess(str(books), workers=2, args=["--header-timeout", "2", "--body-timeout", "2",
                                                    "--time-limit", "30"]) as srv:
        c = srv.client()
        base = {}
        for tag in ("amber", "basalt", "cedar", "dune"):
            status, info = c.json("POST", "/v1/books", _book(tag), headers=OCTETS)
            assert status == 201, info
            base[tag] = info["id"]
        workers = srv.worker_pids()
        assert len(workers) == 2, workers
        stop = threading.Event()
        journal = Journal()
        slow: list[socket.socket] = []
        threads = [threading.Thread(target=_client_loop, args=(srv.port, stop, journal, base, i)) for i in range(CLIENTS)]
        threads.append(threading.Thread(target=_slow_clients, args=(srv.port, stop, slow)))
        for t in threads:
            t.start()
        try:
            time.sleep(CHAOS_SECONDS / 3)
            # the book's compiled file (not a slot pool's keys-only file beside it, <id>.keys-<digest>.lsc)
            (victim_lsc,) = [p for p in books.glob(f"{base['cedar']}.*.lsc") if ".keys-" not in p.name]
            with open(victim_lsc, "r+b") as fh:        # truncated in place under the workers
                fh.truncate(os.path.getsize(victim_lsc) // 2)
            killed = workers[0]
            kill_at = time.monotonic()
            os.kill(killed, signal.SIGKILL)
            time.sleep(CHAOS_SECONDS * 2 / 3)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        rows = journal.rows
        assert len(rows) > 50, len(rows)
        answered = [r for r in rows if isinstance(r[2], int)]
        server_errors = [r for r in answered if r[2] >= 500]
        assert not server_errors, server_errors[:10]
        unanswered = [r for r in rows if not isinstance(r[2], int)]
        # only requests in flight at the kill (started before it, failed after it) may go unanswered
        assert all(r[3] <= kill_at + 0.5 and r[4] >= kill_at for r in unanswered), \
            [(r[0], r[1], r[2], round(r[3] - kill_at, 3), round(r[4] - kill_at, 3)) for r in unanswered][:10]
        # the slow clients were closed by the server
        for s in slow:
            assert _closed_by_server(s), "a slow client's connection was never closed"
            s.close()
        # the supervisor replaced the killed worker; no other worker died
        deadline = time.monotonic() + 30
        while len(srv.worker_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        now = srv.worker_pids()
        assert len(now) == 2 and killed not in now, (workers, now)
        log = srv.log_text()
        died = re.findall(r"Child process \[(\d+)\] died", log)
        assert died == [str(killed)], died
        # afterwards every stored book scans, on both workers; the truncated one once uploaded again
        status, _, _ = c.request("POST", "/v1/books", _book("cedar"), headers=OCTETS)
        assert status in (200, 201)
        status, listing = c.json("GET", "/v1/books")
        assert status == 200 and not listing["unreadable"], listing
        ids = [b["id"] for b in listing["books"]]
        assert set(base.values()) <= set(ids)
        seen_workers = set()
        for book_id in ids:
            for _ in range(2):
                fresh = srv.client()            # a new connection: either worker may take it
                status, headers, data = fresh.request("POST", "/v1/st/scan", _st(book_id, "hello"))
                fresh.close()
                assert status == 200, (book_id, status, data[:300])
                seen_workers.add(headers["x-lorescan-worker"])
        for tag, book_id in base.items():
            status, out = c.json("POST", "/v1/st/scan", _st(book_id, f"about {tag}key3"))
            assert status == 200 and [e["uid"] for e in out["activated"]] == [3], (tag, out)
        assert "Traceback" not in log and "SIGSEGV" not in log and "SIGBUS" not in log, log[-3000:]
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[str(r[2])] = statuses.get(str(r[2]), 0) + 1
        print(f"chaos: {len(rows)} requests {dict(sorted(statuses.items()))}, {len(slow)} slow clients, "
              f"worker {killed} killed, answers from workers {sorted(seen_workers)}")
