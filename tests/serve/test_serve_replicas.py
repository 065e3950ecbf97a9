"""Two ``lorescan serve`` replicas on one ``--books-dir``, as behind a load balancer on shared storage.

An upload to one is served by the other; the same book uploaded to both at once is stored once and
never half-written; a delete on one is a 404 on the other; a replica killed (SIGKILL) in the middle
of writing an upload leaves nothing the other would load.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart", "prometheus_client"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve.store import BookStore, read_compiled  # noqa: E402
from lorescan.serve.testing import ServerProcess  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"
OCTETS = {"Content-Type": "application/octet-stream"}


def scan_request(book_id: str) -> dict:
    return {"books": [{"id": book_id}], "messages": [{"mes": "Who keeps the lighthouse?"}], "max_context": 8192,
            "tokenizer": "words"}


def stored_files(books: Path, book_id: str) -> list[str]:
    return sorted(f.name for f in books.iterdir() if f.name.startswith(book_id + "."))


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    books = tmp_path_factory.mktemp("shared") / "books"
    with ServerProcess(str(books)) as a, ServerProcess(str(books)) as b:
        yield a, b


def test_an_upload_to_one_replica_is_served_by_the_other(replicas):
    a, b = replicas
    ca, cb = a.client(), b.client()
    try:
        status, info = ca.json("POST", "/v1/books?name=Shared", EXAMPLE.read_bytes(), headers=OCTETS)
        assert status == 201
        status, got = cb.json("GET", f"/v1/books/{info['id']}")
        assert status == 200 and got["name"] == "Shared"
        on_b = cb.json("POST", "/v1/st/scan", scan_request(info["id"]))
        on_a = ca.json("POST", "/v1/st/scan", scan_request(info["id"]))
        assert on_b[0] == 200 and on_b[1]["activated"] and on_b == on_a
    finally:
        ca.close()
        cb.close()


def test_the_same_book_uploaded_to_both_at_once_is_stored_once_and_whole(replicas):
    a, b = replicas
    books = Path(a.books_dir)
    data = EXAMPLE.read_bytes()
    for round_no in range(5):                  # a few rounds: the race differs each time
        query = f"/v1/books?name=Race{round_no}"
        start = threading.Barrier(2)
        answers: dict[str, tuple[int, dict]] = {}

        def upload(srv: ServerProcess, tag: str) -> None:
            c = srv.client()
            start.wait()
            answers[tag] = c.json("POST", query, data, headers=OCTETS)
            c.close()

        threads = [threading.Thread(target=upload, args=(srv, tag)) for srv, tag in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        (sa, ia), (sb, ib) = answers["a"], answers["b"]
        assert {sa, sb} <= {200, 201} and 201 in (sa, sb), (sa, sb)
        assert ia["id"] == ib["id"] and ia["entries"] == ib["entries"] == 9
        files = stored_files(books, ia["id"])
        assert len(files) == 2 and files[0].endswith(".lsc") and files[1] == ia["id"] + ".json", files
        assert json.loads((books / files[1]).read_text())["name"] == f"Race{round_no}"
        assert len(read_compiled(str(books / files[0])).book.entries) == 9
        assert not [f for f in os.listdir(books) if f.startswith(".tmp-")]


def test_a_delete_on_one_replica_is_a_404_on_the_other(replicas):
    a, b = replicas
    ca, cb = a.client(), b.client()
    try:
        _, info = ca.json("POST", "/v1/books?name=Doomed", EXAMPLE.read_bytes(), headers=OCTETS)
        assert cb.json("POST", "/v1/st/scan", scan_request(info["id"]))[0] == 200     # b holds it in memory
        status, _, _ = ca.request("DELETE", f"/v1/books/{info['id']}")
        assert status == 204
        assert cb.json("GET", f"/v1/books/{info['id']}")[0] == 404
        status, body = cb.json("POST", "/v1/st/scan", scan_request(info["id"]))
        assert status == 404 and body["path"] == "$.books[0].id"
        assert info["id"] not in [x["id"] for x in cb.json("GET", "/v1/books")[1]["books"]]
        assert cb.request("DELETE", f"/v1/books/{info['id']}")[0] == 404
    finally:
        ca.close()
        cb.close()


def _big_book(entries: int) -> bytes:
    return json.dumps({"entries": {str(i): {"uid": i, "key": [f"keyword{i}", f"alpha{i} beta"],
                                            "content": f"Entry {i}: " + "lore text " * 40, "comment": f"e{i}"}
                                   for i in range(entries)}}).encode()


def test_a_replica_killed_mid_upload_leaves_nothing_the_other_would_load(replicas, tmp_path):
    _, b = replicas
    books = Path(b.books_dir)
    data = _big_book(3000)                          # large enough that writing it takes a while
    book_id = BookStore(str(tmp_path / "scratch")).book_id(data, name="Crashed")
    victim = ServerProcess(str(books))
    outcome: dict[str, object] = {}

    def upload() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", victim.port, timeout=120)
        try:
            conn.request("POST", "/v1/books?name=Crashed", body=data, headers=OCTETS)
            outcome["status"] = conn.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            outcome["error"] = exc
        finally:
            conn.close()

    before = {f for f in os.listdir(books) if f.startswith(".tmp-")}
    thread = threading.Thread(target=upload)
    try:
        thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "status" not in outcome:
            if {f for f in os.listdir(books) if f.startswith(".tmp-")} - before:
                break                                   # the compiled file is being written
            time.sleep(0.001)
        os.killpg(victim.proc.pid, signal.SIGKILL)
        thread.join(60)
    finally:
        victim.stop()
        for line in Path(victim.log_path).read_text().splitlines():   # SIGKILL left its metrics directory behind
            if "metrics_dir" in line:
                shutil.rmtree(json.loads(line)["metrics_dir"], ignore_errors=True)
    assert "status" not in outcome, "the upload finished before the kill: the case did not happen"
    cb = b.client()
    try:
        assert cb.json("GET", f"/v1/books/{book_id}")[0] == 404
        assert book_id not in [x["id"] for x in cb.json("GET", "/v1/books")[1]["books"]]
        assert cb.json("POST", "/v1/st/scan", scan_request(book_id))[0] == 404
        # every file the replicas would read is whole; a torn write can only be a dot-file no one reads
        for f in os.listdir(books):
            if f.endswith(".json") and not f.startswith("."):
                stem = f[:-5]
                assert any(g.startswith(stem + ".") and g.endswith(".lsc") for g in os.listdir(books)), f
                json.loads((books / f).read_text())
            elif f.endswith(".lsc"):
                read_compiled(str(books / f))
        status, info = cb.json("POST", "/v1/books?name=Crashed", data, headers=OCTETS)
        assert status == 201 and info["id"] == book_id and info["entries"] == 3000
    finally:
        cb.close()
