"""A steady turn replayed from the chat's last turn (st/memo.py) gives exactly what running its
loops gives: result, notes and every entry's explanation, turn after turn.

The oracle is the same engine scanning without a ChatScan (no record, no replay: every turn
runs its loops). The chats repeat filler messages so that most turns see the same message
unions as the turn before (and replay), with new hits, edits, swipes, characters, triggers,
forced entries and timed effects in between.
"""
from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lorescan.st.engine as engine_module
from lorescan import ChatScan
from lorescan.formats import book_from_entries
from lorescan.js.text import js_count_words
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings
from tests.st.test_scan_differential import WORDS, entries, st_settings
from tests.st.test_st_walk import _observed, characters, filtered_entries

FILLER = ["x", "the", "x x", "ok"]
steps = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "edit", "same"]),
                           st.lists(st.sampled_from(WORDS[:6] + FILLER * 3), max_size=4).map(" ".join),
                           characters, st.sampled_from(["normal", "normal", "normal", "continue"]),
                           st.lists(st.integers(0, 6), max_size=1), st.booleans()),
                 min_size=2, max_size=9)


@given(st.one_of(entries(), filtered_entries()), st_settings, steps, st.floats(0, 0.999),
       st.sampled_from(["sillytavern", "improved"]))
@settings(max_examples=300, deadline=None)
def test_a_replayed_turn_is_the_turn(ents, cfg, chat, rng, compat):
    book = book_from_entries("Lore", ents)
    make = functools.partial(STEngine, [BookSource(book, ("global",))], STSettings(**cfg), compat=compat,
                             count_tokens=js_count_words, random=functools.partial(float, rng))
    memo, plain = make(), make()
    cache = ChatScan()
    state_m = state_p = None
    texts: list[str] = []
    for what, text, character, trigger, forced_uids, carry in chat:
        if what == "add" or not texts:
            texts.append(text)
        elif what == "edit":
            texts[-1] = text
        msgs = [ChatMessage("User" if i % 2 else "Moon", t) for i, t in enumerate(texts)]
        kw = dict(max_context=200, character=character, trigger=trigger,
                  forced=[("Lore", u) for u in forced_uids if u < len(ents)])
        got = memo.scan(msgs, timed_effects=state_m if carry else None, cache=cache, **kw)
        want = plain.scan(msgs, timed_effects=state_p if carry else None, **kw)
        assert _observed(got) == _observed(want)
        if carry:
            state_m, state_p = got.timed_effects, want.timed_effects


def _book():
    return book_from_entries("Lore", [
        {"uid": 0, "key": ["wolf"], "content": "the moon rises"},
        {"uid": 1, "key": ["moon"], "content": "a red tower", "group": "g"},
        {"uid": 2, "key": ["tower"], "content": "ash", "group": "g", "groupOverride": True},
        {"uid": 3, "key": ["river"], "content": "river text"},
    ])


def _count_loops(monkeypatch):
    runs = []
    real = engine_module.run_loops
    monkeypatch.setattr(engine_module, "run_loops", lambda turn: (runs.append(1), real(turn)))
    return runs


def test_a_steady_chat_replays_and_a_new_hit_runs_the_loops(monkeypatch):
    runs = _count_loops(monkeypatch)
    engine = STEngine([_book()], STSettings(scan_depth=6, recursive=True), count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf howls")]
    results = []
    for text in ["x", "nothing here", "still nothing", "a river", "x", "y"]:
        chat.append(ChatMessage("u", text))
        results.append(engine.scan(chat, max_context=1000, cache=cache))
    # turn 1 runs; 2-3 replay (the window's hits unchanged); 4 brings "river"; 5 replays; 6
    # drops the wolf's message from the 6-message window: its hits change, the loops run
    assert len(runs) == 3
    assert [sorted(e.uid for e in r.activated) for r in results] == [[0, 1], [0, 1], [0, 1], [0, 1, 3], [0, 1, 3], [3]]
    plain = STEngine([_book()], STSettings(scan_depth=6, recursive=True), count_tokens=js_count_words)
    for n, r in enumerate(results, 2):
        assert _observed(r) == _observed(plain.scan(chat[:n], max_context=1000))
    assert results[1].explain("Lore", 2).reason == "group"
    # the explanation is this turn's: the key found again in this turn's window
    assert results[2].explain("Lore", 0).span.index == 3 and results[0].explain("Lore", 0).span.index == 1


@pytest.mark.parametrize("extra", [{"useProbability": True, "probability": 50}, {"delay": 1}])
def test_a_turn_that_rolls_or_reads_the_chat_length_is_not_recorded(monkeypatch, extra):
    runs = _count_loops(monkeypatch)
    book = book_from_entries("Lore", [{"uid": 0, "key": ["wolf"], "content": "c", **extra}])
    engine = STEngine([book], STSettings(scan_depth=10), count_tokens=js_count_words, random=lambda: 0.25)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf")]
    for _ in range(3):
        chat.append(ChatMessage("u", "x"))
        assert [e.uid for e in engine.scan(chat, max_context=1000, cache=cache).activated] == [0]
    assert len(runs) == 3


def test_a_turn_with_macros_or_other_scalars_is_not_replayed_across_them(monkeypatch):
    runs = _count_loops(monkeypatch)
    engine = STEngine([_book()], STSettings(scan_depth=10), count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf"), ChatMessage("u", "x")]
    engine.scan(chat, max_context=1000, cache=cache)
    engine.scan(chat, max_context=1000, cache=cache, substitute=lambda t: t)     # a hook: no replay
    engine.scan(chat, max_context=40, cache=cache)                             # another budget
    engine.scan(chat, max_context=1000, cache=cache, trigger="continue")       # another trigger
    assert len(runs) == 4
    engine.scan(chat, max_context=1000, cache=cache)                           # the first one's again
    assert len(runs) == 4
