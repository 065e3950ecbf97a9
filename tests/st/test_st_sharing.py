"""A freshly built STEngine is read-only under threads, and a result is a plain, picklable value."""
from __future__ import annotations

import asyncio
import copy
import functools
import pickle
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from lorescan import BookSource, ChatMessage, SettingsError, SlotEngine, STEngine, STSettings
from lorescan.model import Lorebook, entry_from_fields
from lorescan.js.text import js_count_words

NAMES = ["Mira", "Oswin", "Tallow", "Brisk", "Quell", "Ardent", "Vesper", "Cinder", "Hollis", "Wren",
         "Juniper", "Castor"]


def _book() -> Lorebook:
    rng = random.Random(7)
    entries = []
    for uid, name in enumerate(NAMES):
        other = NAMES[(uid + 1) % len(NAMES)]
        fields = {"uid": uid, "key": [name], "keysecondary": [], "comment": name,
                  "content": f"{name} once travelled with {other}.", "order": 100 - uid,
                  "sticky": rng.choice([0, 2, 3]), "cooldown": rng.choice([0, 1, 2]),
                  "group": "crew" if uid % 4 == 0 else "", "position": uid % 3}
        entries.append(entry_from_fields(fields, source="sharing"))
    for uid in range(len(NAMES), len(NAMES) + 3000):     # untimed entries: a large fingerprint index
        fields = {"uid": uid, "key": [f"filler{uid}"], "content": f"filler {uid}", "order": 1}
        entries.append(entry_from_fields(fields, source="sharing"))
    return Lorebook(name="Sharing", entries=tuple(entries))


def _engine() -> STEngine:
    return STEngine([BookSource(_book(), ("global",))], STSettings(scan_depth=3, recursive=True),
                    count_tokens=js_count_words, random=functools.partial(float, 0.4))


def _chats() -> list[list[ChatMessage]]:
    rng = random.Random(3)
    chats = []
    for c in range(16):
        msgs = [ChatMessage("User" if i % 2 else "Bot", f"{rng.choice(NAMES)} and {rng.choice(NAMES)} talk.")
                for i in range(6 + c)]
        chats.append(msgs)
    return chats


def _foreign_state() -> dict:
    # A record whose fingerprint belongs to an untimed entry makes the engine look at every
    # entry's fingerprint (an index built on first use). Found, the record is dropped (the
    # entry has no sticky); an engine that let a thread see a half-built index would keep it.
    filler = _engine().tables.by_key[f"Sharing.{len(NAMES) + 2999}"].hash
    return {"sticky": {"Sharing.1": {"hash": filler, "start": 1, "end": 400, "protected": False}},
            "cooldown": {}}


def _turns(engine: STEngine, chat: list[ChatMessage], state: dict) -> list[dict]:
    out = []
    for n in range(3, len(chat) + 1):
        r = engine.scan(chat[:n], max_context=4000, timed_effects=state)
        out.append(r.to_json())
        state = r.timed_effects.to_json()
    return out


def test_sixteen_threads_over_a_fresh_engine_match_the_serial_run():
    chats = _chats()
    state = _foreign_state()
    reference = _engine()
    serial = [_turns(reference, chat, state) for chat in chats]
    shared = _engine()                 # no warm-up call: every lazy path is first taken under threads
    with ThreadPoolExecutor(16) as pool:
        threaded = list(pool.map(lambda chat: _turns(shared, chat, state), chats))
    assert threaded == serial
    assert all("Sharing.1" not in run[0]["timed_effects"]["sticky"] or run[0]["activated"] for run in serial)
    assert any(turn["activated"] for run in serial for turn in run)
    assert any(turn["timed_effects"]["sticky"] for run in serial for turn in run)


def test_a_pickled_result_keeps_its_explanation():
    engine = _engine()
    chat = _chats()[0]
    result = engine.scan(chat, max_context=4000)
    assert result.activated
    copy = pickle.loads(pickle.dumps(result))
    assert copy.to_json() == result.to_json()
    assert copy.diagnostics == result.diagnostics
    fired = result.activated[0]
    assert copy.explain(fired.world, fired.uid).outcome == "activated"
    assert copy.explain(fired.world, fired.uid).where is not None
    assert "_Run" not in repr(pickle.dumps(result))


def test_ascan_under_asyncio_gives_the_scans_results_concurrently():
    chats = _chats()
    reference = _engine()
    serial = [reference.scan(chat, max_context=4000).to_json() for chat in chats]
    shared = _engine()                 # fresh: the lazy paths are first taken by concurrent tasks

    async def main() -> list[dict]:
        results = await asyncio.gather(*(shared.ascan(chat, max_context=4000) for chat in chats))
        return [r.to_json() for r in results]

    assert asyncio.run(main()) == serial


def test_ascan_raises_what_scan_raises():
    with pytest.raises(SettingsError, match="max_context"):
        asyncio.run(_engine().ascan(_chats()[0], max_context=-1))


def test_a_shallow_copy_shares_the_tables_and_takes_its_own_hooks():
    engine = _engine()
    twin = copy.copy(engine)
    twin.random = functools.partial(float, 0.9)
    assert twin.tables is engine.tables
    assert engine.random() == 0.4 and twin.random() == 0.9


def test_slot_arun_under_asyncio_matches_run():
    engine = SlotEngine([_book()], count_tokens=js_count_words)
    chats = [[("user" if i % 2 else "assistant", m.text) for i, m in enumerate(chat)] for chat in _chats()[:6]]
    serial = [engine.run(chat, turn_id=f"t{n}") for n, chat in enumerate(chats)]

    async def main() -> list:
        return await asyncio.gather(*(engine.arun(chat, turn_id=f"t{n}") for n, chat in enumerate(chats)))

    assert asyncio.run(main()) == serial
