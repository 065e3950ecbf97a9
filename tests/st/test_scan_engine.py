"""STEngine as a platform uses it: shared across threads, caches, state handling, inputs."""
from __future__ import annotations

import copy
import functools
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lorescan import BookSource, ChatMessage, ChatScan, STEngine, STSettings, load
from lorescan.errors import LorebookError
from lorescan.js.text import js_count_words

DATA = Path(__file__).resolve().parent.parent / "data" / "synthetic"     # written for these tests: generate.py
CHAT = DATA / "harbor-watch-chat.jsonl"


def _chat(path: Path, n: int) -> list[ChatMessage]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "mes" in m and not m.get("is_system"):
            out.append(ChatMessage(m.get("name", ""), m["mes"]))
    return out[:n]


@pytest.fixture(scope="module")
def harbor():
    book = load(str(DATA / "harbor-watch.json"))
    settings = STSettings(scan_depth=10, recursive=True, budget_cap=3000)
    return STEngine([BookSource(book, ("global",))], settings, count_tokens=js_count_words,
                    random=functools.partial(float, 0.3))


def test_one_engine_and_one_cache_serve_eight_threads_like_a_serial_loop(harbor):
    chat = _chat(CHAT, 60)
    turns = [chat[:n] for n in range(5, 60, 3)]
    serial = [harbor.scan(t, max_context=16000).to_json() for t in turns]
    cache = ChatScan()
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda t: harbor.scan(t, max_context=16000, cache=cache).to_json(), turns))
    assert threaded == serial
    assert any(r["activated"] for r in serial)


def test_a_cached_turn_gives_the_same_result_as_an_uncached_one(harbor):
    chat = _chat(CHAT, 40)
    cache = ChatScan()
    state_a = state_b = None
    for n in range(10, 40):
        a = harbor.scan(chat[:n], max_context=16000, timed_effects=state_a, cache=cache)
        b = harbor.scan(chat[:n], max_context=16000, timed_effects=state_b)
        assert a.to_json() == b.to_json()
        state_a, state_b = a.timed_effects, b.timed_effects
    assert cache.hit_count > 0


def test_the_callers_timed_effects_state_is_never_changed(harbor):
    chat = _chat(CHAT, 40)
    first = harbor.scan(chat[:30], max_context=16000).timed_effects.to_json()
    assert first["sticky"] or first["cooldown"], "the book has timed entries that fire here"
    before = copy.deepcopy(first)
    harbor.scan(chat[:31], max_context=16000, timed_effects=first)
    harbor.scan(chat[:29], max_context=16000, timed_effects=first)      # a swipe back
    assert first == before


def test_state_round_trips_through_json(harbor):
    chat = _chat(CHAT, 40)
    r1 = harbor.scan(chat[:30], max_context=16000)
    stored = json.loads(json.dumps(r1.timed_effects.to_json()))
    direct = harbor.scan(chat[:31], max_context=16000, timed_effects=r1.timed_effects)
    via_json = harbor.scan(chat[:31], max_context=16000, timed_effects=stored)
    assert direct.to_json() == via_json.to_json()


@pytest.mark.parametrize("bad,field", [
    ({"sticky": {"Lore.1": {"hash": "x", "start": 1, "end": 2}}}, "sticky.hash"),
    ({"sticky": []}, "sticky"),
    ("nonsense", None),
])
def test_a_malformed_timed_effects_state_is_a_located_error(harbor, bad, field):
    with pytest.raises(LorebookError) as exc:
        harbor.scan([ChatMessage("a", "b")], max_context=100, timed_effects=bad)
    if field:
        assert exc.value.field == field


def test_bad_engine_arguments_are_located_errors():
    book = load(str(Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"))
    with pytest.raises(LorebookError, match="roles"):
        STEngine([BookSource(book, ("globl",))])
    with pytest.raises(LorebookError, match="compat"):
        STEngine([BookSource(book, ("global",))], compat="fast")
    with pytest.raises(LorebookError, match="scan_depth"):
        STEngine([BookSource(book, ("global",))], {"scan_depth": -1})
    with pytest.raises(LorebookError, match="unknown setting"):
        STEngine([BookSource(book, ("global",))], {"scan_dept": 3})


def test_an_engine_that_has_already_counted_tokens_still_pickles():
    import pickle
    book = load(str(Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"))
    engine = STEngine([BookSource(book, ("global",))])          # default counter: tiktoken, offline
    first = engine.scan([ChatMessage("a", "the lighthouse")], max_context=1000)
    again = pickle.loads(pickle.dumps(engine))
    assert again.scan([ChatMessage("a", "the lighthouse")], max_context=1000).to_json() == first.to_json()
