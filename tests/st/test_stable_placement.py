"""Cache-stable placement (docs/improved-profile.md#cache-stable): the option changes the order
inside a placement text only, never which entries fire or what the budget decides; a turn with
the same activated set keeps its placement texts; the layout round-trips and a bad one is a
located error."""
from __future__ import annotations

import functools
import json
import pickle
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan.errors import LorebookError
from lorescan.formats import book_from_entries
from lorescan.js.text import js_count_words
from lorescan.layout import MAX_LAYOUT_ENTRIES, Layout
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings
from lorescan.st.place import place_entries, place_keyed
from tests.st.test_scan_differential import chats, entries, st_settings
from tests.slot.test_slot_properties import budgets, entries as slot_entries, messages


def _engines(book, cfg, rng, compat="improved"):
    make = functools.partial(STEngine, [BookSource(book, ("global",))], compat=compat, count_tokens=js_count_words,
                             random=functools.partial(float, rng))
    return make(STSettings(**cfg)), make(STSettings(**cfg, stable_placement=True))


def _decided(res):
    return {k: (d.outcome, d.reason, d.loop) for k, d in res.decisions().items()}


def _texts(res) -> dict[str, Counter]:
    """Each placement text's entries as a multiset (what order-only changes keep)."""
    out = {}
    p = res.placement
    out["before"] = Counter(p.before.split("\n")) if p.before else Counter()
    out["after"] = Counter(p.after.split("\n")) if p.after else Counter()
    out["an"] = Counter(p.an_top) + Counter(["|"] + p.an_bottom)
    out["depth"] = Counter((g.depth, g.role, c) for g in p.depth for c in g.entries)
    out["groups"] = Counter((g.depth, g.role) for g in p.depth)
    out["examples"] = Counter(p.examples)
    out["outlets"] = Counter((k, c) for k, v in p.outlets.items() for c in v)
    return out


def _replay(off, on, chat, turns_seen):
    layout_off = layout_on = {}
    state_off = state_on = None
    for n in range(1, len(chat) + 1):
        msgs = chat[:n] if isinstance(chat[0], ChatMessage) else \
            [ChatMessage("User" if i % 2 else "Moon", t) for i, t in enumerate(chat[:n])]
        kw = dict(max_context=200 if not isinstance(chat[0], ChatMessage) else 16000)
        a = off.scan(msgs, timed_effects=state_off, layout=layout_off, **kw)
        b = on.scan(msgs, timed_effects=state_on, layout=layout_on, **kw)
        # identical activations, budget decisions and timed effects
        assert a.activated == b.activated
        assert a.budget_overflowed == b.budget_overflowed
        assert _decided(a) == _decided(b)
        assert a.timed_effects.to_json() == b.timed_effects.to_json()
        # only the order inside a placement text may differ
        assert _texts(a) == _texts(b)
        if n > 1 and set(b.activated) == turns_seen[-1]:
            assert b.stability.share >= 0.9, (n, b.stability)
        turns_seen.append(set(b.activated))
        layout_off, layout_on = a.layout.to_json(), b.layout.to_json()
        state_off, state_on = a.timed_effects, b.timed_effects


@given(entries(), st_settings, chats, st.floats(0, 0.999))
@settings(max_examples=300, deadline=None)
def test_the_option_changes_order_only_on_random_books_and_chats(ents, cfg, chat, rng):
    off, on = _engines(book_from_entries("Lore", ents), cfg, rng)
    _replay(off, on, chat + chat[-1:], [])       # the last turn repeats: the same set again


def test_the_option_changes_order_only_on_the_corpus_chats():
    from conftest import need_shared
    from lorescan import load
    corpus = need_shared("corpus")
    chat = []
    for line in (corpus / "chats" / "en-rpg-narrator.jsonl").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "mes" in m and not m.get("is_system"):
            chat.append(ChatMessage(m.get("name", ""), m["mes"]))
    seen = []
    for name in ("en-weyland-251.json", "en-chub-world-of-arcanthea.json"):
        book = load(str(corpus / "books" / name))
        cfg = dict(scan_depth=6, recursive=True, budget_cap=3000)
        off, on = _engines(book, cfg, 0.4)
        _replay(off, on, chat[:40], seen)
    assert sum(bool(s) for s in seen) > 20


def _book(words, positions=None):
    return book_from_entries("B", [{"uid": i, "key": [w], "content": f"about {w}", "order": 100,
                                    "position": 0 if positions is None else positions[i]}
                                   for i, w in enumerate(words)])


def test_kept_entries_keep_their_rank_new_ones_follow_and_dropped_ones_leave():
    _, on = _engines(_book(["wolf", "moon", "fox", "ash"]), {}, 0.5)
    off, _ = _engines(_book(["wolf", "moon", "fox", "ash"]), {}, 0.5)
    layout = {}
    got = []
    for text in ["fox", "wolf fox", "ash wolf fox", "ash fox"]:
        res = on.scan([ChatMessage("u", text)], max_context=8000, layout=layout)
        layout = res.layout.to_json()
        got.append(res.world_info_before)
    assert got == ["about fox", "about fox\nabout wolf", "about fox\nabout wolf\nabout ash", "about fox\nabout ash"]
    # the engine's own order (same order: later-activated first) is what the option keeps away from
    plain = off.scan([ChatMessage("u", "ash wolf fox")], max_context=8000).world_info_before
    assert plain != got[2] and sorted(plain.split("\n")) == sorted(got[2].split("\n"))


def test_the_share_counts_whole_unchanged_entries_and_their_newlines():
    off, on = _engines(_book(["wolf", "moon", "fox"]), {}, 0.5)
    first = on.scan([ChatMessage("u", "wolf")], max_context=8000, layout={})
    assert first.stability.share == 0.0 and first.stability.length == len("about wolf")
    second = on.scan([ChatMessage("u", "wolf moon")], max_context=8000, layout=first.layout)
    assert second.world_info_before == "about wolf\nabout moon"
    assert second.stability.unchanged == len("about wolf")
    assert second.stability.length == len(second.world_info_before)
    third = on.scan([ChatMessage("u", "wolf moon fox")], max_context=8000, layout=second.layout)
    assert third.world_info_before.startswith("about wolf\nabout moon\n")
    assert third.stability.unchanged == len("about wolf\nabout moon")
    same = on.scan([ChatMessage("u", "fox moon wolf")], max_context=8000, layout=third.layout)
    assert same.world_info_before == third.world_info_before and same.stability.share == 1.0
    # without the option the layout is still measured when one is given, and not made when none is
    assert off.scan([ChatMessage("u", "wolf")], max_context=8000).layout is None
    assert off.scan([ChatMessage("u", "wolf")], max_context=8000, layout={}).stability.share == 0.0


def test_the_sillytavern_profile_ignores_the_option():
    book = _book(["wolf", "moon", "fox"])
    plain, stable = _engines(book, {}, 0.5, compat="sillytavern")
    layout = {}
    for text in ["fox", "wolf fox", "moon wolf fox"]:
        a = plain.scan([ChatMessage("u", text)], max_context=8000)
        b = stable.scan([ChatMessage("u", text)], max_context=8000, layout=layout)
        # the same answer; only the layout measuring asked for (layout=) is added
        extra = {k: v for k, v in b.to_json().items() if k not in ("layout", "placement_stability")}
        assert a.to_json() == extra and b.layout is not None
        layout = b.layout


@st.composite
def placed(draw):
    n = draw(st.integers(0, 8))
    ents = [{"uid": i, "key": ["k"], "content": draw(st.sampled_from(["a", "b", "", "c\nd"])) + str(i),
             "order": draw(st.sampled_from([1, 5, 5, 3])), "position": draw(st.integers(0, 8)),
             "depth": draw(st.sampled_from([None, 0, 4, 4.0, 2])), "role": draw(st.sampled_from([None, 0, 1, "0"])),
             "outletName": draw(st.sampled_from(["", "o", "p"]))} for i in range(n)]
    return book_from_entries("B", ents)


@given(placed(), st.booleans(), st.randoms())
@settings(max_examples=300, deadline=None)
def test_place_keyed_is_place_entries_and_arrange_only_reorders(book, note, rnd):
    pairs = [(e, e.content) for e in book.entries]
    keys = [f"B.{e.uid}" for e in book.entries]
    note_text = "NOTE" if note else None
    want = place_entries(pairs, authors_note=note_text)
    got, places = place_keyed(pairs, keys, authors_note=note_text)
    assert got.to_json() == want.to_json()

    def shuffle(name, items):
        items = list(items)
        rnd.shuffle(items)
        return items
    moved, moved_places = place_keyed(pairs, keys, authors_note=note_text, arrange=shuffle)
    a, b = want.to_json(), moved.to_json()
    assert sorted(a["world_info_before"].split("\n")) == sorted(b["world_info_before"].split("\n"))
    assert [(d["depth"], d["role"], sorted(d["entries"])) for d in a["depth_entries"]] == \
        [(d["depth"], d["role"], sorted(d["entries"])) for d in b["depth_entries"]]
    assert [e["position"] for e in a["em_entries"]] == [e["position"] for e in b["em_entries"]]
    assert {k: sorted(v) for k, v in a["outlets"].items()} == {k: sorted(v) for k, v in b["outlets"].items()}
    assert {k: sorted(v) for k, v in places.items()} == {k: sorted(v) for k, v in moved_places.items()}


def test_the_layout_round_trips_through_json_and_pickle():
    _, on = _engines(_book(["wolf", "moon", "fox"], [0, 4, 1]), {}, 0.5)
    res = on.scan([ChatMessage("u", "wolf moon fox")], max_context=8000, layout={})
    text = json.dumps(res.layout.to_json(), allow_nan=False)
    assert Layout.from_json(json.loads(text)) == res.layout
    assert set(res.layout.places) == {"before", "after", "at_depth 4 0"}
    copy = pickle.loads(pickle.dumps(res))
    assert copy.layout == res.layout and copy.stability == res.stability
    again = on.scan([ChatMessage("u", "wolf moon fox")], max_context=8000, layout=json.loads(text))
    assert again.stability.share == 1.0


@pytest.mark.parametrize(("bad", "field"), [
    ([], None),
    ({"version": 2}, "version"),
    ({"places": []}, "places"),
    ({"places": {"before": "x"}}, "places.before"),
    ({"places": {"before": [["B.1"]]}}, "places.before[0]"),
    ({"places": {"before": [["B.1", 3]]}}, "places.before[0]"),
    ({"places": {"before": [["B.1", "ff"], "B.2"]}}, "places.before[1]"),
    ({"places": {"before": [["x" * 2000, "ff"]]}}, "places.before[0]"),
    ({"places": {"before": [["B.1", "ff"]] * (MAX_LAYOUT_ENTRIES + 1)}}, "places"),
    ({"extra": 1}, "extra"),
])
def test_a_bad_layout_is_a_located_error(bad, field):
    _, on = _engines(_book(["wolf"]), {}, 0.5)
    with pytest.raises(LorebookError) as info:
        on.scan([ChatMessage("u", "wolf")], max_context=8000, layout=bad)
    assert info.value.source == "layout" and info.value.field == field


# -- lorebook-slot mode ------------------------------------------------------------------------
def _slot_engines(pool, budget):
    from tests.support.slot_helpers import cc_book

    from lorescan.slot import SlotEngine
    from lorescan.tokens import count_words
    book = cc_book("p", pool, token_budget=budget, recursive_scanning=True)
    make = functools.partial(SlotEngine, [book], count_tokens=lambda text: 8 * count_words(text))
    return make(), make(stable_placement=True)


def _first_matched(state):
    return {k: v for k, v in state.items() if k != "placement_layout"}


@given(slot_entries(), budgets, messages)
@settings(max_examples=300, deadline=None)
def test_slot_mode_the_option_changes_order_only(pool, budget, chat):
    off, on = _slot_engines(pool, budget)
    state_off, state_on = {"version": 1, "placement_layout": {}}, None
    last = None
    for n in range(1, len(chat) + 2):
        msgs = chat[:n]                 # the last turn repeats the whole chat: the same set again
        a = off.run(msgs, turn_id=n, state=state_off)
        b = on.run(msgs, turn_id=n, state=state_on)
        assert [r.to_dict() for r in a.log] == [r.to_dict() for r in b.log]
        assert (a.tokens_used, a.passes) == (b.tokens_used, b.passes)
        assert _first_matched(a.state) == _first_matched(b.state)
        assert Counter(a.messages) == Counter(b.messages)
        assert a.stability is not None and (b.stability is None) == (n == 1)
        inserted = {(r.book, r.id) for r in b.log if r.outcome == "inserted"}
        if last is not None and inserted == last:
            assert b.stability.share >= 0.9
        last = inserted
        state_off, state_on = json.loads(json.dumps(a.state)), json.loads(json.dumps(b.state))


def test_slot_mode_keeps_the_slot_order_and_a_bad_layout_is_located():
    from lorescan.errors import SettingsError
    pool = [{"id": i, "keys": [w], "content": f"about {w}", "insertion_order": 0, "priority": 0}
            for i, w in enumerate(["wolf", "moon", "fox"])]
    _, on = _slot_engines(pool, 1000)
    state = None
    got = []
    for text in ["fox", "fox wolf", "moon fox wolf"]:
        res = on.run([("user", text)], turn_id=1, state=state)
        state = res.state
        got.append([m.content for m in res.messages])
    assert got[1][:1] == got[0] and got[2][:2] == got[1]
    assert res.stability.unchanged == len("\n".join(got[1]))      # the previous slot ended there
    assert res.to_json()["placement_stability"]["share"] == res.stability.share
    with pytest.raises(SettingsError) as info:
        on.run([("user", "fox")], turn_id=1, state={**state, "placement_layout": {"places": {"slot": [1]}}})
    assert info.value.source == "state" and info.value.field == "placement_layout.places.slot[0]"


# -- replay --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sillytavern", "slot"])
def test_replay_measures_the_share_without_and_with_the_option(mode):
    from lorescan.replay.chats import Message
    from lorescan.replay.report import render_report
    from lorescan.replay.single import mean_stable_share, replay_chat
    book = _book(["wolf", "moon", "fox", "ash"])
    texts = ["fox", "hello", "wolf fox", "hi", "ash wolf fox", "yes", "ash wolf fox moon", "ok", "fox wolf ash moon"]
    messages = [Message("u" if i % 2 == 0 else "c", t, i % 2 == 0, False) for i, t in enumerate(texts)]
    settings = {"compat": "improved"} if mode == "sillytavern" else {}
    replay = replay_chat([book], messages, mode=mode, settings=settings)
    assert replay.turns[0].stable_share is None
    shares = [t.stable_share for t in replay.turns[1:]]
    assert all(s is not None for s in shares)
    # kept entries stay in front with the option: every later turn starts with the previous text
    assert all(on == 1.0 or on >= off for off, on in shares)
    without, with_ = mean_stable_share(replay)
    assert with_ > without
    page = render_report(replay)
    assert f"{with_:.3f} with it" in page and 'id="cache-stability"' in page
