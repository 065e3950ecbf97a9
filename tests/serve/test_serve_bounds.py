"""The service's bounds against hostile clients (issue 22 item 6), on a real ``lorescan serve``:
read timeouts for slow clients, settings that cannot work refused at start, and the documented
JSON error (never a traceback, never a server path) for every failure.

Needs the ``serve`` extra (skipped without it unless ``LORESCAN_REQUIRE_SERVE=1``).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve.testing import HOST, ServerProcess, rss_bytes  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")
BOOK = json.dumps({"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "The lantern glows."},
                               "1": {"uid": 1, "key": ["harbor"], "content": "Ships wait."}}}).encode()
OCTETS = {"Content-Type": "application/octet-stream"}


def _scan_body(book_id: str, text: str = "a lantern") -> dict:
    return {"books": [{"id": book_id}], "max_context": 10000,
            "messages": [{"name": "u", "mes": text, "is_user": True}]}


def _closed(sock: socket.socket, wait: float) -> bool:
    """Whether the server closed ``sock`` within ``wait`` seconds (EOF or reset)."""
    sock.settimeout(wait)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


# -- slow clients ------------------------------------------------------------------------------

def test_slow_headers_and_stalled_bodies_are_closed_after_their_timeouts(tmp_path):
    with ServerProcess(str(tmp_path / "books"), args=["--header-timeout", "1", "--body-timeout", "2"]) as srv:
        c = srv.client()
        status, info = c.json("POST", "/v1/books", BOOK, headers=OCTETS)
        assert status == 201, info
        slow = []
        for i in range(50):                 # headers that never end
            s = socket.create_connection((HOST, srv.port))
            s.sendall(b"POST /v1/st/scan HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * i)
            slow.append(s)
        stalled = []
        for _ in range(10):                 # a body of 4 MB declared, 1 MB sent, then nothing
            s = socket.create_connection((HOST, srv.port))
            s.sendall(b"POST /v1/st/scan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 4194304\r\n\r\n" + b" " * (1 << 20))
            stalled.append(s)
        idle = socket.create_connection((HOST, srv.port))   # connected, never a byte
        # a well-behaved client is served meanwhile
        status, out = c.json("POST", "/v1/st/scan", _scan_body(info["id"]))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out
        for s in [*slow, *stalled, idle]:
            assert _closed(s, 30), "a slow connection was still open well past its timeout"
            s.close()
        c.close()
        c = srv.client()
        status, out = c.json("POST", "/v1/st/scan", _scan_body(info["id"], "the harbor"))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [1], out
        log = srv.log_text()
    assert "Traceback" not in log and '"level": "error"' not in log, log[-3000:]


def _read_response(s: socket.socket) -> bytes:
    """One whole HTTP/1.1 response (headers and its Content-Length body): a response may
    arrive in several segments, and the next request's reply must not start mid-body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_keep_alive_connection_gets_a_fresh_header_deadline_after_each_response(tmp_path):
    # the header deadline restarts when a response ends: a client that pauses longer than the
    # timeout in the middle of a request is closed, one that sends each request promptly is not
    with ServerProcess(str(tmp_path / "books"), args=["--header-timeout", "2"]) as srv:
        s = socket.create_connection((HOST, srv.port))
        for _ in range(3):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(10)
            reply = _read_response(s)
            assert reply.startswith(b"HTTP/1.1 200"), reply
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert _closed(s, 30)
        s.close()


# -- settings that cannot work ------------------------------------------------------------------

@pytest.mark.parametrize("flag, value, words", [
    ("--time-limit", "0", "must be above 0"), ("--time-limit", "1e-9", "must be 1e-06 to"),
    ("--time-limit", "1e300", "must be 1e-06 to 86400"), ("--upload-time-limit", "-5", "must be"),
    ("--max-body-mb", "-1", "must be"), ("--max-body-mb", "1e-9", "must be 0.001 to"),
    ("--max-upload-mb", "100000", "must be 0.001 to 64"), ("--header-timeout", "0", "must be"),
    ("--body-timeout", "nan", "must be a finite number"),
])
def test_settings_that_cannot_work_are_refused_before_anything_listens(tmp_path, flag, value, words):
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, "-m", "lorescan.app.cli", "serve", "--port", "1",
                           "--books-dir", str(tmp_path), flag, value], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.startswith(f"lorescan: {flag}: {words}"), proc.stderr
    assert "Traceback" not in proc.stderr


# -- the documented JSON error for every failure -------------------------------------------------

def _no_tracebacks(srv: ServerProcess) -> None:
    log = srv.log_text()
    assert "Traceback" not in log and '"level": "error"' not in log, log[-3000:]


@pytest.mark.parametrize("route", ["/v1/st/scan", "/v1/slot/run", "/v1/janitor/run"])
def test_deeply_nested_json_is_a_422_not_a_500_and_logs_no_traceback(tmp_path, route):
    bodies = [b"[" * 100_000 + b"]" * 100_000,                    # the whole body, of the wrong type
              b'{"books":' + b"[" * 5000 + b"]" * 5000 + b"}",      # a typed field
              b'{"macros":' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}"]
    with ServerProcess(str(tmp_path / "books")) as srv:
        c = srv.client()
        for body in bodies:
            status, headers, data = c.request("POST", route, body, headers={"Content-Type": "application/json"})
            assert status == 422 and headers["content-type"] == "application/json", (status, data[:300])
            assert json.loads(data)["path"] == "$", data[:300]
        status, _, _ = c.request("GET", "/healthz")
        assert status == 200
        _no_tracebacks(srv)


def test_broken_multipart_uploads_answer_json_4xx(tmp_path):
    part = b'--zz\r\nContent-Disposition: form-data; name="file"; filename="b.json"\r\n\r\n' + BOOK
    with ServerProcess(str(tmp_path / "books")) as srv:
        c = srv.client()
        for body, ctype in [(b"garbage", "multipart/form-data; boundary=zz"), (b"x", "multipart/form-data"),
                            (part, "multipart/form-data; boundary=zz")]:
            status, headers, data = c.request("POST", "/v1/books", body, headers={"Content-Type": ctype})
            assert status in (400, 422) and headers["content-type"] == "application/json", (status, data)
            assert json.loads(data)["error"], data
        _no_tracebacks(srv)


def test_a_truncated_stored_book_answers_409_without_paths_and_a_reupload_repairs_it(tmp_path):
    books = tmp_path / "books"
    with ServerProcess(str(books)) as srv:
        status, info = srv.client().json("POST", "/v1/books", BOOK, headers=OCTETS)
        assert status == 201, info
    book_id = info["id"]
    (lsc,) = books.glob(f"{book_id}.*.lsc")
    with open(lsc, "r+b") as fh:        # truncated in place while no worker holds it
        fh.truncate(100)
    with ServerProcess(str(books)) as srv:
        c = srv.client()
        status, out = c.json("POST", "/v1/st/scan", _scan_body(book_id))
        assert status == 409 and out["path"] == "$.books[0].id", out
        assert book_id in out["error"] and str(tmp_path) not in out["error"] and "/" not in out["error"], out
        status, out = c.json("POST", "/v1/slot/run", {"books": [{"id": book_id}], "turn_id": 1,
                                                       "messages": [{"role": "user", "content": "a lantern"}]})
        assert status == 409 and str(tmp_path) not in json.dumps(out), out
        status, again = c.json("POST", "/v1/books", BOOK, headers=OCTETS)      # the same book again
        assert status in (200, 201) and again["id"] == book_id, again
        status, out = c.json("POST", "/v1/st/scan", _scan_body(book_id))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out
        _no_tracebacks(srv)
    with ServerProcess(str(books)) as srv:          # repaired on disk, not only in that worker's memory
        status, out = srv.client().json("POST", "/v1/st/scan", _scan_body(book_id))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out


def test_a_stored_book_damaged_in_a_section_read_late_answers_409_at_its_first_use_and_a_reupload_repairs_it(
        tmp_path):
    # Format 5 checks a section when it is first read: a flipped byte in the entry records
    # loads (the keys are intact) and is found by the scan that builds an entry, which answers
    # the documented 409 (not a 422 naming the server's file), and a re-upload rewrites the file.
    # (A book large enough for its sections to be stored one by one: a tiny book's file is one
    # compressed stream, checked whole at load, format 6.)
    import random
    import struct
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9))) for _ in range(3000)]
    entries = json.loads(BOOK)["entries"]
    entries.update({str(i): {"uid": i, "key": [f"filler{i}"], "content": " ".join(rng.choices(words, k=600))}
                    for i in range(2, 62)})
    large = json.dumps({"entries": entries}).encode()
    books = tmp_path / "books"
    with ServerProcess(str(books)) as srv:
        status, info = srv.client().json("POST", "/v1/books", large, headers=OCTETS)
        assert status == 201, info
    book_id = info["id"]
    (lsc,) = books.glob(f"{book_id}.*.lsc")
    data = bytearray(lsc.read_bytes())
    hlen = struct.unpack_from("<I", data, 12)[0]
    start = struct.calcsize("<8sIII") + hlen
    header = json.loads(bytes(data[struct.calcsize("<8sIII"):start]))
    off, n = header["sections"]["book:entries"][3:5]
    data[start + (-start % 8) + off + 1] ^= 0x20          # in entry 0's record, which the scan builds
    with open(lsc, "r+b") as fh:        # changed in place, the same size, while no worker holds it
        fh.write(data)
    with ServerProcess(str(books)) as srv:
        c = srv.client()
        status, out = c.json("POST", "/v1/st/scan", _scan_body(book_id))
        assert status == 409 and "damaged" in out["error"] and "book:entries" in out["error"], out
        assert str(tmp_path) not in json.dumps(out) and "/" not in out["error"], out
        status, again = c.json("POST", "/v1/books", large, headers=OCTETS)     # the same book again
        assert status in (200, 201) and again["id"] == book_id, again
        status, out = c.json("POST", "/v1/st/scan", _scan_body(book_id))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out
        _no_tracebacks(srv)


def test_one_unreadable_description_is_listed_apart_not_a_500_for_every_book(tmp_path):
    books = tmp_path / "books"
    with ServerProcess(str(books)) as srv:
        c = srv.client()
        status, info = c.json("POST", "/v1/books", BOOK, headers=OCTETS)
        assert status == 201
        bad = "0" * 32
        (books / f"{bad}.json").write_bytes(b"{not json\xff")
        status, out = c.json("GET", "/v1/books")
        assert status == 200 and [b["id"] for b in out["books"]] == [info["id"]], out
        assert out["unreadable"] == [bad], out
        status, out = c.json("GET", f"/v1/books/{bad}")
        assert status == 409 and str(books) not in out["error"], out
        _no_tracebacks(srv)


def test_a_full_disk_answers_507_json_and_leaves_no_partial_file(tmp_path):
    # The disk is made full for the server alone: a file size limit (RLIMIT_FSIZE, inherited by
    # the server and its worker) makes writing a large compiled file fail as a full disk does.
    import resource
    books = tmp_path / "books"
    books.mkdir()
    big = json.dumps({"entries": {str(j): {"uid": j, "key": [f"key{j}", f"other{j}"], "content": f"text {j} " * 30}
                                  for j in range(3000)}}).encode()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    try:
        srv = ServerProcess(str(books))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    with srv:
        c = srv.client()
        status, small = c.json("POST", "/v1/books", BOOK, headers=OCTETS)
        assert status == 201, small
        for _ in range(2):
            status, headers, data = c.request("POST", "/v1/books", big, headers=OCTETS)
            assert status == 507 and headers["content-type"] == "application/json", (status, data[:300])
            assert "full" in json.loads(data)["error"] and str(books) not in data.decode(), data
        assert sorted(p.name for p in books.iterdir() if not p.name.startswith("server-")) == \
            sorted([f"{small['id']}.json", *(p.name for p in books.glob(f"{small['id']}.*.lsc"))])
        status, out = c.json("POST", "/v1/st/scan", _scan_body(small["id"]))
        assert status == 200, out
        _no_tracebacks(srv)


# -- the worker-wide bound on request bodies held at once (docs/service.md#body-budget) -------------

MIB = 1 << 20


def _metric(c, name: str) -> float:
    status, _, text = c.request("GET", "/metrics")
    assert status == 200
    for line in text.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in /metrics")


def _held_becomes(c, value: int) -> None:
    """Wait (bounded) until the worker reports ``value`` body bytes held: its reads are asynchronous."""
    for _ in range(600):
        if _metric(c, "lorescan_body_bytes_held") == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"the worker never held {value} body bytes (it holds "
                         f"{_metric(c, 'lorescan_body_bytes_held')})")


def _stalled_body(port: int, declared: int, sent: int) -> socket.socket:
    s = socket.create_connection((HOST, port))
    s.sendall(b"POST /v1/st/scan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % declared + b" " * sent)
    return s


def _answer(s: socket.socket) -> tuple[int, dict[str, str], dict]:
    head, body = _read_response(s).split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = dict(x.lower().split(": ", 1) for x in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_bodies_held_at_once_are_bounded_per_worker_and_the_next_one_is_a_503(tmp_path):
    args = ["--max-body-mb", "1", "--max-upload-mb", "1", "--max-inflight-mb", "3.5", "--body-timeout", "120"]
    with ServerProcess(str(tmp_path / "books"), args=args) as srv:
        c = srv.client()
        status, info = c.json("POST", "/v1/books", BOOK, headers=OCTETS)
        assert status == 201, info
        assert _metric(c, "lorescan_body_budget_bytes") == int(3.5 * MIB)
        held = [_stalled_body(srv.port, MIB, 64 * 1024) for _ in range(3)]      # 3 MiB declared, held open
        _held_becomes(c, 3 * MIB)
        # the 4th declared body does not fit: refused before it is read, the documented JSON 503
        s = _stalled_body(srv.port, MIB, 0)
        status, headers, body = _answer(s)
        s.close()
        assert status == 503 and headers.get("retry-after") == "1", (status, headers, body)
        assert "--max-inflight-mb" in body["error"], body
        # a chunked body is counted as it arrives: refused once it passes what is left (0.5 MiB)
        s = socket.create_connection((HOST, srv.port))
        s.sendall(b"POST /v1/st/scan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(12):                 # 0.75 MiB in 64 KiB chunks
                s.sendall(b"10000\r\n" + b" " * 65536 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass                                # refused while sending: the answer is already there
        status, headers, body = _answer(s)
        s.close()
        assert status == 503 and headers.get("retry-after") == "1", (status, headers, body)
        # requests without a body still pass, and what fits is served
        assert c.request("GET", "/healthz")[0] == 200
        status, out = c.json("POST", "/v1/st/scan", _scan_body(info["id"]))
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out
        assert _metric(c, "lorescan_body_budget_refusals_total") == 2
        # a held request that ends gives its bytes back: a 1 MiB body fits again
        held.pop().close()
        _held_becomes(c, 2 * MIB)
        body_bytes = json.dumps(_scan_body(info["id"], "a lantern" + " " * (MIB - 4096))).encode()
        status, out = c.json("POST", "/v1/st/scan", body_bytes, headers={"Content-Type": "application/json"})
        assert status == 200 and [e["uid"] for e in out["activated"]] == [0], out
        for s in held:
            s.close()
        _held_becomes(c, 0)
        c.close()
        _no_tracebacks(srv)


def test_an_inflight_bound_below_the_largest_request_is_refused_at_start(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    proc = subprocess.run([sys.executable, "-m", "lorescan.app.cli", "serve", "--port", "1",
                           "--books-dir", str(tmp_path), "--max-inflight-mb", "32"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.startswith("lorescan: --max-inflight-mb: must be 0 (the default) or at least"), proc.stderr


# -- what a worker does around a job -------------------------------------------------------------

def test_writes_of_one_loop_turn_go_out_in_one_send_and_close_or_abort_keep_their_order():
    import asyncio
    from lorescan.serve.protocol import _OneSend

    class Transport:
        def __init__(self) -> None:
            self.sent: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            assert not self.closed, "written after close"
            self.sent.append(data)

        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

        abort = close

        def get_extra_info(self, name: str) -> str:
            return f"info:{name}"

    loop = asyncio.new_event_loop()
    try:
        raw = Transport()
        t = _OneSend(raw, loop)  # type: ignore[arg-type]
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        t.write(b"")
        t.write(b"{}")
        assert raw.sent == []                       # nothing sent within the turn
        loop.run_until_complete(asyncio.sleep(0))
        assert raw.sent == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
        t.write(b"tail")
        t.close()                                   # what was written goes out before the close
        assert raw.sent[-1] == b"tail" and raw.closed
        loop.run_until_complete(asyncio.sleep(0))   # the turn's flush finds nothing left
        assert len(raw.sent) == 2
        assert t.get_extra_info("peername") == "info:peername"
        raw2 = Transport()
        t2 = _OneSend(raw2, loop)  # type: ignore[arg-type]
        t2.write(b"dropped")
        t2.abort()
        loop.run_until_complete(asyncio.sleep(0))
        assert raw2.sent == [] and raw2.closed
    finally:
        loop.close()


def test_a_job_frees_what_it_evicted_after_its_answer_and_leaves_the_gc_as_it_found_it(tmp_path):
    import asyncio
    import gc

    from lorescan.serve.app import _ST_DECODER
    from lorescan.serve.decoding import read_request
    from lorescan.serve.runtime import ServeConfig
    from lorescan.serve.turns import Runtime

    rt = Runtime(ServeConfig(books_dir=str(tmp_path / "books"), book_cache_mb=1e-6))   # holds one book
    ids = [rt.store.put(json.dumps({"entries": {"0": {"uid": 0, "key": [word], "content": f"The {word}."}}}).encode(),
                        f"{word}.json")["id"] for word in ("lantern", "harbor", "anchor")]
    seen = []

    async def scan(book_id: str, word: str) -> dict:
        req = read_request(_ST_DECODER, json.dumps(_scan_body(book_id, f"a {word}")).encode())

        def job() -> bytes:
            out = rt.st_scan(req)
            seen.append((gc.isenabled(), len(rt.retired)))
            return out

        return json.loads(await rt.run(job, 10.0))

    was = gc.isenabled()
    gc.enable()
    try:
        for book_id, word in zip(ids + ids[:1], ("lantern", "harbor", "anchor", "lantern")):
            got = asyncio.run(scan(book_id, word))
            assert got["world_info_before"] == f"The {word}.", got
            # the engine thread's next task sees the job's aftermath (it runs after the hand-over)
            after = rt.executor.submit(lambda: (len(rt.retired), gc.isenabled())).result(10)
            assert after == (0, True), "what the job let go is freed after its answer, and the GC runs again"
    finally:
        if not was:
            gc.disable()
    # inside each job the GC was paused, and from the second book on the store evicted one
    assert [enabled for enabled, _ in seen] == [False] * 4
    assert all(n >= 1 for _, n in seen[1:]), seen
    assert rt.store.loaded == 1
    rt.executor.shutdown(wait=True)
