"""A small turn runs on the worker's event loop (serve.runtime's docstring): when it may, what it
does there, and that its answer is the engine thread's."""
from __future__ import annotations

import asyncio
import gc
import json
import threading

import pytest

pytest.importorskip("msgspec", reason="the serve extra is not installed (pip install '.[serve]')")
pytest.importorskip("starlette", reason="the serve extra is not installed (pip install '.[serve]')")

from lorescan.serve import runtime  # noqa: E402
from lorescan.serve.app import _ST_DECODER  # noqa: E402
from lorescan.serve.decoding import HTTPError, read_request  # noqa: E402
from lorescan.serve.runtime import ServeConfig  # noqa: E402
from lorescan.serve.turns import Runtime  # noqa: E402


def _book(word: str) -> bytes:
    return json.dumps({"entries": {"0": {"uid": 0, "key": [word], "content": f"The {word}."},
                                   "1": {"uid": 1, "key": ["tide"], "content": "The tide turns.",
                                         "probability": 50, "useProbability": True}}}).encode()


def _request(book_id: str, text: str, seed: int = 7):
    body = json.dumps({"books": [{"id": book_id}], "max_context": 10000, "seed": seed,
                       "messages": [{"name": "u", "mes": text, "is_user": True}]}).encode()
    return read_request(_ST_DECODER, body)


@pytest.fixture
def rt(tmp_path):
    worker = Runtime(ServeConfig(books_dir=str(tmp_path / "books"), book_cache_mb=1e-6))   # holds one book
    yield worker
    worker.executor.shutdown(wait=True)


def test_a_small_stored_book_and_body_may_run_inline_and_a_large_or_unknown_one_may_not(rt, monkeypatch):
    book_id = rt.store.put(_book("lantern"), "lantern.json")["id"]
    assert rt.inline_ok([book_id], 1000)
    assert rt.inline_ok([], 1000)                               # a JanitorAI turn: its book is its body
    assert not rt.inline_ok([book_id], runtime.INLINE_BODY_BYTES + 1)
    assert not rt.inline_ok(["0" * 32], 1000)                   # not stored: the engine thread answers 404
    assert not rt.inline_ok([book_id, book_id], 1000) or 2 * rt.store.stored_bytes(book_id) <= runtime.INLINE_BOOK_BYTES
    monkeypatch.setattr(runtime, "INLINE_BOOK_BYTES", rt.store.stored_bytes(book_id) - 1)
    assert not rt.inline_ok([book_id], 1000)


def test_an_inline_turn_runs_on_the_loop_with_the_gc_paused_and_tidies_up_after_its_answer(rt):
    ids = [rt.store.put(_book(w), f"{w}.json")["id"] for w in ("lantern", "harbor")]
    seen: list[tuple] = []

    async def turn(book_id: str, word: str) -> tuple:
        req = _request(book_id, f"a {word} and the tide")
        assert rt.inline_ok([book_id], 1000)

        def job() -> bytes:
            seen.append((threading.get_ident(), gc.isenabled(), runtime.DEADLINE.get() is not None))
            return rt.st_scan(req)

        out = await rt.run(job, 10.0, inline=True)
        due = (len(rt.retired), gc.isenabled())                 # just after the answer: not yet tidied
        for _ in range(3):
            await asyncio.sleep(0)                              # the loop turns: the tidy-up runs
        return json.loads(out), due, (len(rt.retired), gc.isenabled()), threading.get_ident()

    was = gc.isenabled()
    gc.enable()
    try:
        first = asyncio.run(turn(ids[0], "lantern"))
        second = asyncio.run(turn(ids[1], "harbor"))            # evicts the first book (the cache holds one)
    finally:
        if not was:
            gc.disable()
    assert "The lantern." in first[0]["world_info_before"] and "The harbor." in second[0]["world_info_before"]
    assert [s[0] for s in seen] == [first[3], second[3]], "the job ran on the event loop's thread"
    assert [s[1] for s in seen] == [False, False], "the cyclic GC is paused inside the job"
    assert all(s[2] for s in seen), "the job's scans see its deadline"
    assert second[1][0] >= 1 and not second[1][1], "what the job let go (the first book, its engine) waits for the answer"
    assert first[2] == second[2] == (0, True), "then it is freed and the GC runs again"
    assert runtime.DEADLINE.get() is None, "the job's deadline stays in its own context"


def test_an_inline_turn_answers_what_the_engine_thread_answers(rt):
    book_id = rt.store.put(_book("lantern"), "lantern.json")["id"]

    async def both(seed: int) -> tuple[bytes, bytes]:
        req = _request(book_id, "a lantern in the tide", seed)
        threaded = await rt.run(lambda: rt.st_scan(req), 10.0)
        inline = await rt.run(lambda: rt.st_scan(req), 10.0, inline=True)
        return threaded, inline

    for seed in range(12):                  # the tide entry's 50% roll goes both ways over these seeds
        threaded, inline = asyncio.run(both(seed))
        assert inline == threaded


def test_no_turn_runs_inline_while_the_engine_thread_has_a_job(rt):
    book_id = rt.store.put(_book("lantern"), "lantern.json")["id"]
    release = threading.Event()
    started = threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "done"

    async def scenario() -> tuple[bool, bool, str]:
        pending = asyncio.ensure_future(rt.run(slow, 10.0))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        busy = rt.inline_ok([book_id], 1000)
        release.set()
        out = await pending
        await asyncio.get_running_loop().run_in_executor(None, rt.executor.submit(lambda: None).result, 10)
        return busy, rt.inline_ok([book_id], 1000), out

    busy, idle, out = asyncio.run(scenario())
    assert out == "done"
    assert not busy, "a job on the engine thread keeps the next turn behind it, in order"
    assert idle, "once the engine thread is idle again a small turn may run inline"


def test_an_inline_turn_past_its_time_limit_is_a_503(rt):
    def slow() -> bytes:
        threading.Event().wait(0.05)
        return b"{}"

    with pytest.raises(HTTPError) as err:
        asyncio.run(rt.run(slow, 0.001, inline=True))
    assert err.value.status == 503 and "time limit" in str(err.value)
