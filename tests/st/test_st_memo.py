"""A steady turn replayed from the chat's last turn (st/memo.py) gives exactly what running its
loops gives: result, notes and every entry's explanation, turn after turn.

The oracle is the same engine scanning without a ChatScan (no record, no replay: every turn
runs its loops). The chats repeat filler messages so that most turns see the same message
unions as the turn before (and replay), with new hits, edits, swipes, characters, triggers,
forced entries and timed effects in between.
"""
from __future__ import annotations

import functools
import random

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
# mostly the same character, trigger and no forced entry from turn to turn (a steady chat), now and then not
steps = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "edit", "same"]),
                           st.lists(st.sampled_from(WORDS[:6] + FILLER * 4), max_size=3).map(" ".join),
                           st.one_of(st.just(None), st.just(None), characters),
                           st.sampled_from(["normal"] * 5 + ["continue"]),
                           st.one_of(st.just([]), st.just([]), st.just([]), st.lists(st.integers(0, 6), max_size=1)),
                           st.booleans()),
                 min_size=2, max_size=9)


@st.composite
def steady_entries(draw):
    """The generators' entries, in most examples without what a record refuses (regex and
    macro keys, delays), so that most turns replay."""
    out = draw(st.one_of(entries(), filtered_entries()))
    if draw(st.integers(0, 3)):
        for e in out:
            e["key"] = [k for k in e["key"] if k in WORDS]
            e["delay"] = None
    return out


@given(steady_entries(), st_settings, steps, st.integers(0, 2**32), st.booleans(),
       st.sampled_from(["sillytavern", "improved"]))
@settings(max_examples=300, deadline=None)
def test_a_replayed_turn_is_the_turn(ents, cfg, chat, seed, steady_rolls, compat):
    if seed % 4:
        cfg = {**cfg, "min_activations": 0}     # minimum activations read the chat's length: no record
    book = book_from_entries("Lore", ents)
    # each engine its own generator from the same seed: the same values while both call it as
    # often (a replay that drew one value more or less would shift every later roll); or the
    # same value every call (so that rolls decide alike and turns replay)
    make = functools.partial(STEngine, [BookSource(book, ("global",))], STSettings(**cfg), compat=compat,
                             count_tokens=js_count_words)
    if steady_rolls:
        memo, plain = (make(random=functools.partial(float, (seed % 1000) / 1000)) for _ in range(2))
    else:
        memo, plain = (make(random=random.Random(seed).random) for _ in range(2))
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


def test_a_turn_that_reads_the_chat_length_is_not_recorded(monkeypatch):
    runs = _count_loops(monkeypatch)
    book = book_from_entries("Lore", [{"uid": 0, "key": ["wolf"], "content": "c", "delay": 1}])
    engine = STEngine([book], STSettings(scan_depth=10), count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf")]
    for _ in range(3):
        chat.append(ChatMessage("u", "x"))
        assert [e.uid for e in engine.scan(chat, max_context=1000, cache=cache).activated] == [0]
    assert len(runs) == 3


def test_rolls_replay_while_they_decide_alike_and_random_is_called_as_often(monkeypatch):
    runs = _count_loops(monkeypatch)
    book = book_from_entries("Lore", [
        {"uid": 0, "key": ["wolf"], "content": "c", "useProbability": True, "probability": 50},
        {"uid": 1, "key": ["wolf"], "content": "d", "group": "g", "groupWeight": 50},
        {"uid": 2, "key": ["wolf"], "content": "e", "group": "g", "groupWeight": 50}])
    # per turn the group's roll, then the probability's: turn 2 decides as 1, 3 and 4 decide
    # otherwise and run (each kept beside the others), 5 decides as 4 (a failed roll, its note
    # this turn's value), 6 as 1
    values = [0.1, 0.2, 0.3, 0.4, 0.9, 0.1, 0.2, 0.6, 0.45, 0.7, 0.3, 0.3]

    def scans(cache):
        drawn = iter(values)
        calls = []
        engine = STEngine([book], STSettings(scan_depth=10), count_tokens=js_count_words,
                          random=lambda: (calls.append(1), next(drawn))[1])
        chat = [ChatMessage("u", "a wolf")]
        out = []
        for _ in range(6):
            chat.append(ChatMessage("u", "x"))
            out.append(_observed(engine.scan(chat, max_context=1000, cache=cache)))
        return out, len(calls)
    got, got_calls = scans(ChatScan())
    assert len(runs) == 3
    want, want_calls = scans(None)
    assert got == want and got_calls == want_calls == 12
    assert [[e["uid"] for e in r[0]["activated"]] for r in got] == [[0, 1], [0, 1], [0, 2], [1], [1], [0, 1]]
    assert "roll 60 is above probability 50" in repr(got[3][1]) and "roll 70 is above probability 50" in repr(got[4][1])


def test_a_turn_with_macros_or_other_scalars_is_not_replayed_across_them(monkeypatch):
    runs = _count_loops(monkeypatch)
    engine = STEngine([_book()], STSettings(scan_depth=10), count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf"), ChatMessage("u", "x")]
    engine.scan(chat, max_context=1000, cache=cache)
    engine.scan(chat, max_context=1000, cache=cache, substitute=lambda t: t)     # a hook: no replay
    engine.scan(chat, max_context=40, cache=cache)                             # another budget
    assert len(runs) == 3
    engine.scan(chat, max_context=1000, cache=cache)                           # the first one's again
    assert len(runs) == 3
    engine.scan(chat, max_context=1000, cache=cache, trigger="continue")       # another trigger
    assert len(runs) == 4


def test_a_macro_table_replays_under_an_equal_table_and_never_across_another(monkeypatch):
    from lorescan.macros import macro_table
    runs = _count_loops(monkeypatch)
    book = book_from_entries("Lore", [
        {"uid": 0, "key": ["wolf"], "content": "{{char}} hunts the wolf. river"},
        {"uid": 1, "key": ["river"], "content": "the river of {{user}}"},
        {"uid": 2, "key": ["Seraphina"], "content": "she is here"}])
    settings = STSettings(scan_depth=10, recursive=True)
    engine = STEngine([BookSource(book, ("global",))], settings, count_tokens=js_count_words)
    plain = STEngine([BookSource(book, ("global",))], settings, count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "a wolf, {{user}}")]
    tables = [{"char": "Seraphina", "user": "Anon"}, {"char": "Seraphina", "user": "Anon"},
              {"user": "Anon", "char": "Seraphina"}, {"char": "Bram", "user": "Anon"}, {"char": "Seraphina", "user": "Ida"}]
    got, want = [], []
    for table in tables:          # a new hook object every turn, as a platform's request builds it
        chat.append(ChatMessage("u", "x"))
        got.append(_observed(engine.scan(chat, max_context=1000, cache=cache, substitute=macro_table(table))))
    assert len(runs) == 3
    for n, table in enumerate(tables, 2):
        want.append(_observed(plain.scan(chat[:n], max_context=1000, substitute=macro_table(table))))
    # turns 2 and 3 replay turn 1 (equal tables, the second in another order); turn 4's {{char}}
    # is another name (no "Seraphina" in the recursion: entry 2 does not fire), turn 5's {{user}} another text
    assert got == want
    assert [[e["uid"] for e in r[0]["activated"]] for r in got][:4] == [[0, 1, 2]] * 3 + [[0, 1]]
    engine.scan(chat, max_context=1000, cache=cache, substitute=lambda t: t.replace("{{char}}", "Seraphina"))
    assert len(runs) == 3 + 5 + 1          # any other hook runs its loops


def test_a_chat_whose_replays_keep_missing_backs_off_and_retries(monkeypatch):
    # every turn of the first ten brings a new candidate (no replay can match), then the chat
    # is steady: after four missed replays in a row the chat stops trying (plain turns,
    # doubling), then records once and tries again; once steady, its retry replays and it
    # replays every turn again. Each turn's result is the no-cache engine's.
    runs = _count_loops(monkeypatch)
    tries = []
    real = engine_module.replay
    monkeypatch.setattr(engine_module, "replay", lambda *a: (tries.append(1), real(*a))[1])
    book = book_from_entries("Lore", [{"uid": i, "key": [f"w{i}"], "content": f"c{i}"} for i in range(10)])
    engine = STEngine([book], STSettings(scan_depth=3), count_tokens=js_count_words)
    plain = STEngine([book], STSettings(scan_depth=3), count_tokens=js_count_words)
    cache = ChatScan()
    chat = [ChatMessage("u", "start")]
    for n in range(40):
        chat.append(ChatMessage("u", f"w{n}" if n < 10 else "x"))
        got = engine.scan(chat, max_context=1000, cache=cache)
        assert _observed(got) == _observed(plain.scan(chat, max_context=1000))
        if n == 9:
            # turns 1-4 try and miss; 5-6 plain, 7 records, 8 tries (a miss), 9-10 plain
            assert len(tries) == 5
    assert len(runs) == 40 + 13      # the plain engine ran 40; turns 14-40 (27) replay


def test_a_group_score_read_in_a_decorator_activated_entrys_window_is_part_of_the_record():
    # Two @@activate entries of one scored group, one with a key and scan depth 1: last turn its
    # key scored it the winner; this turn its one-message window lost the key, so the group rolls.
    # The record did not note that window (the entry was activated by its decorator, not its key),
    # so the turn replayed last turn's winner (found by the property test above).
    def entry(uid, key, depth):
        return {"uid": uid, "key": key, "content": "@@activate\n", "group": "g", "groupWeight": 100,
                "scanDepth": depth}
    book = book_from_entries("Lore", [entry(0, ["wolf"], 1), entry(1, [], None)])
    settings = STSettings(scan_depth=2, budget_percent=1, use_group_scoring=True)
    memo, plain = (STEngine([BookSource(book, ("global",))], settings, count_tokens=js_count_words,
                            random=random.Random(0).random) for _ in range(2))
    cache = ChatScan()
    texts: list[str] = []
    for text in ["wolf", ""]:
        texts.append(text)
        msgs = [ChatMessage("User" if i % 2 else "Moon", t) for i, t in enumerate(texts)]
        got = memo.scan(msgs, max_context=200, cache=cache)
        want = plain.scan(msgs, max_context=200)
        assert _observed(got) == _observed(want)
    assert [e.uid for e in want.activated] == [1]          # the roll, not last turn's winner
