"""The walk's shortcut gives exactly what walking every candidate through the gates gives.

An engine decides its constant, decorator and disabled entries once (``AlwaysGates``):
a walk asks the gates about them only when the turn touches them (sticky, cooldown,
forced) or a static gate applies. Here the same engine without those verdicts (every
candidate goes through :func:`lorescan.st.activate.gate`) is the oracle: activations,
placement, loops, timed effects, the order and content of the decided entries' notes, and
every entry's explanation must be the same, turn after turn, with characters, filters,
triggers, forced entries and timed effects in play.
"""
from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import ChatScan
from lorescan.formats import book_from_entries
from lorescan.js.text import js_count_words
from lorescan.st import BookSource, Character, ChatMessage, STEngine, STSettings
from lorescan.st.activate import AlwaysGates
from tests.st.test_scan_differential import WORDS, entries, st_settings

TAGS = ["t1", "t2"]


@st.composite
def filtered_entries(draw):
    """The differential test's entries plus character filters, tag filters and triggers."""
    out = draw(entries())
    for e in out:
        if draw(st.integers(0, 2)) == 0:
            e["characterFilter"] = {"isExclude": draw(st.booleans()),
                                    "names": draw(st.lists(st.sampled_from(["Ann", "Bob"]), max_size=1)),
                                    "tags": draw(st.lists(st.sampled_from(TAGS), max_size=2))}
        if draw(st.integers(0, 4)) == 0:
            e["triggers"] = draw(st.lists(st.sampled_from(["normal", "continue", "swipe"]), max_size=2))
    return out


characters = st.sampled_from([None, Character("Ann", "Ann.png", ("t1",)), Character("Bob", "Bob.png", None),
                              Character("Cid", "Cid.png", ("t2", "t1"))])
turns = st.lists(st.tuples(st.lists(st.sampled_from(WORDS + ["x", "Moon!"]), max_size=5).map(" ".join),
                           characters, st.sampled_from(["normal", "normal", "continue"]),
                           st.lists(st.integers(0, 6), max_size=2)),
                 min_size=1, max_size=5)


def _observed(result):
    return (result.to_json(), [(k, repr(d)) for k, d in result.decisions().items()],
            [(k, repr(d)) for k, d in result.diagnostics.items()])


def _without_shortcuts(engine: STEngine) -> STEngine:
    gates = AlwaysGates(())           # no verdicts: every always-walked entry goes through gate()
    gates.gpos = engine._gates.gpos
    assert not gates.verdicts
    engine._gates = gates
    return engine


@given(filtered_entries(), st_settings, turns, st.floats(0, 0.999), st.sampled_from(["sillytavern", "improved"]))
@settings(max_examples=400, deadline=None)
def test_the_walks_shortcut_changes_no_result_note_or_explanation(ents, cfg, chat, rng, compat):
    book = book_from_entries("Lore", ents)
    make = functools.partial(STEngine, [BookSource(book, ("global",))], STSettings(**cfg), compat=compat,
                             count_tokens=js_count_words, random=functools.partial(float, rng))
    fast, slow = make(), _without_shortcuts(make())
    cache_f, cache_s = ChatScan(), ChatScan()
    state_f = state_s = None
    texts: list[str] = []
    for text, character, trigger, forced_uids in chat:
        texts.append(text)
        msgs = [ChatMessage("User" if i % 2 else "Moon", t) for i, t in enumerate(texts)]
        kw = dict(max_context=200, character=character, trigger=trigger,
                  forced=[("Lore", u) for u in forced_uids if u < len(ents)])
        got = fast.scan(msgs, timed_effects=state_f, cache=cache_f, **kw)
        want = slow.scan(msgs, timed_effects=state_s, cache=cache_s, **kw)
        assert _observed(got) == _observed(want)
        state_f, state_s = got.timed_effects, want.timed_effects


def test_verdicts_are_made_once_and_a_static_gate_is_asked_only_where_one_applies():
    book = book_from_entries("Lore", [
        {"uid": 0, "key": ["wolf"], "content": "W"},
        {"uid": 1, "key": [], "constant": True, "content": "C"},
        {"uid": 2, "key": [], "constant": True, "disable": True, "content": "D"},
        {"uid": 3, "key": [], "constant": True, "content": "T",
         "characterFilter": {"isExclude": False, "names": [], "tags": ["t1"]}},
        {"uid": 4, "key": [], "constant": True, "content": "N",
         "characterFilter": {"isExclude": False, "names": ["Ann"], "tags": []}},
        {"uid": 5, "key": [], "constant": True, "delayUntilRecursion": 1, "content": "R"},
        {"uid": 6, "key": [], "content": "@@dont_activate\nX"},
    ])
    engine = STEngine([BookSource(book, ("global",))], count_tokens=js_count_words)
    # a tag filter needs a selected character; a name filter is asked every turn; delay until
    # recursion depends on the loop, so that entry has no verdict
    assert {engine.tables.entries[g].entry.uid: v for g, v in engine._gates.verdicts.items()} == {
        1: (True, "constant", "constant entry", 0),
        2: (False, "disabled", "the entry is disabled", 0),
        3: (True, "constant", "constant entry", 2),
        4: (True, "constant", "constant entry", 1),
        6: (False, "dont_activate", "@@dont_activate", 0)}
    result = engine.scan([ChatMessage("u", "a wolf")], max_context=1000)
    assert [e.uid for e in result.activated] == [0, 1, 3]
    assert [(k.uid, d.reason) for k, d in result.decisions().items()] == [
        (0, "key"), (1, "constant"), (2, "disabled"), (3, "constant"), (4, "character_filter"),
        (5, "delay_until_recursion"), (6, "dont_activate")]
    with_ann = engine.scan([ChatMessage("u", "a wolf")], max_context=1000, character=Character("Ann", "Ann.png"))
    assert [e.uid for e in with_ann.activated] == [0, 1, 4]
    assert with_ann.explain("Lore", 3).reason == "tag_filter"
