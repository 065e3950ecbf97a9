"""Properties of lorebook-slot mode (hypothesis): budget, priority monotonicity, stable turns,
JSON state, system messages that change nothing, selective logics that are complements."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.slot_helpers import cc_book

from lorescan.slot import SlotEngine, SlotResult
from lorescan.tokens import count_words

WORDS = ["anna", "bar", "dock", "fog", "moon", "wolf"]


@st.composite
def entries(draw, min_size: int = 1, max_size: int = 8):
    """A small CC-shaped pool: constant or keyed entries whose contents mention other keys,
    random sizes, priorities, orders, roles, a few decorators, and secondary keys under each
    selective logic (or none stored)."""
    n = draw(st.integers(min_size, max_size))
    out = []
    for i in range(n):
        header = draw(st.lists(st.sampled_from([
            "@@probability 50", "@@probability 0", "@@keep", "@@dont_activate_after_match",
            "@@ignore_on_max_context", "@@role user", "@@unrecursive", "@@activate_only_every 2",
        ]), max_size=2, unique=True))
        body = " ".join(draw(st.lists(st.sampled_from(WORDS + ["lore"] * 4), min_size=1, max_size=12)))
        e = {
            "id": i,
            "content": "\n".join(header + [body]),
            "insertion_order": draw(st.integers(0, 5)),
            "priority": draw(st.integers(0, 5)),
            "extensions": {"role": draw(st.sampled_from([0, 1, 2]))},
        }
        if draw(st.booleans()):
            e["constant"] = True
        else:
            e["keys"] = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))
            if draw(st.booleans()):
                e["selective"] = True
                e["secondary_keys"] = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))
                logic = draw(st.sampled_from([None, 0, 1, 2, 3]))
                if logic is not None:
                    e["extensions"]["selectiveLogic"] = logic
        out.append(e)
    return out


def _with_roles(items):
    """(is_system, text) items -> messages; user and assistant alternate, system notes anywhere."""
    out, n = [], 0
    for is_system, text in items:
        if is_system:
            out.append(("system", text))
        else:
            out.append(("assistant" if n % 2 == 0 else "user", text))
            n += 1
    return out


texts = st.sampled_from(WORDS + ["hello", "the end"])
messages = st.lists(st.tuples(st.integers(0, 3).map(lambda n: n == 0), texts), min_size=1, max_size=5).map(
    _with_roles)
budgets = st.integers(100, 140)


def build(pool, budget: int, recursive: bool = True) -> SlotEngine:
    book = cc_book("p", pool, token_budget=budget, recursive_scanning=recursive)
    # Contents are counted as words x 8 so a budget of 100-140 holds only a few entries.
    return SlotEngine([book], count_tokens=lambda text: 8 * count_words(text))


def comparable(result: SlotResult):
    return result.messages, tuple(r.to_dict() for r in result.log), result.state


@settings(max_examples=1000, deadline=None)
@given(pool=entries(), budget=budgets, msgs=messages, turn=st.integers(0, 50))
def test_output_never_exceeds_the_budget(pool, budget, msgs, turn):
    eng = build(pool, budget)
    result = eng.run(msgs, turn_id=turn)
    inserted = [r.tokens for r in result.log if r.outcome == "inserted"]
    assert sum(inserted) == result.tokens_used <= result.budget == budget
    assert sum(eng.count_tokens(m.content) for m in result.messages) <= budget


@settings(max_examples=1000, deadline=None)
@given(pool=entries(min_size=2), budget=budgets, data=st.data())
def test_removing_a_low_priority_entry_never_drops_a_higher_priority_one(pool, budget, data):
    # Constant entries, no recursion, no probability: only the budget decides.
    for e in pool:
        e.pop("keys", None)
        e["constant"] = True
        e["content"] = e["content"].split("\n")[-1]
    victim = data.draw(st.integers(0, len(pool) - 1))
    before = build(pool, budget, recursive=False).run([("user", "x")], turn_id="t")
    smaller = [e for i, e in enumerate(pool) if i != victim]
    after = build(smaller, budget, recursive=False).run([("user", "x")], turn_id="t")
    kept_after = {r.id for r in after.log if r.outcome == "inserted"}
    cut = pool[victim]["priority"]
    for r in before.log:
        if r.outcome == "inserted" and r.priority > cut:
            assert r.id in kept_after, f"entry {r.id} (priority {r.priority}) was dropped"


@settings(max_examples=1000, deadline=None)
@given(pool=entries(), budget=budgets, msgs=messages, turn=st.text(max_size=8), state_turn=st.integers(0, 4))
def test_the_same_turn_id_always_gives_the_same_result(pool, budget, msgs, turn, state_turn):
    state = {"version": 1, "first_matched_turn": {"p": {str(i): state_turn for i in range(0, len(pool), 2)}}}
    first = build(pool, budget).run(msgs, turn_id=turn, state=state)
    second = build(pool, budget).run(msgs, turn_id=turn, state=state)
    dry = build(pool, budget).run(msgs, turn_id=turn, state=state, dry_run=True)
    assert comparable(first) == comparable(second)
    assert dry.messages == first.messages and dry.log == first.log and dry.state == state


@settings(max_examples=1000, deadline=None)
@given(pool=entries(), budget=budgets, turns=st.lists(messages, min_size=1, max_size=3))
def test_the_state_round_trips_through_json(pool, budget, turns):
    eng = build(pool, budget)
    state = None
    for n, msgs in enumerate(turns):
        direct = eng.run(msgs, turn_id=n, state=state)
        revived = eng.run(msgs, turn_id=n, state=json.loads(json.dumps(state)))
        assert comparable(direct) == comparable(revived)
        assert json.loads(json.dumps(direct.state)) == direct.state
        state = direct.state


@settings(max_examples=500, deadline=None)
@given(pool=entries(), budget=budgets, msgs=messages, notes=st.lists(st.tuples(st.integers(0, 6), texts),
                                                                         max_size=3), turn=st.integers(0, 50))
def test_system_messages_change_nothing(pool, budget, msgs, notes, turn):
    # SPEC 15.4/15.5 [decision, revised]: not scanned, not counted in M nor toward any depth.
    eng = build(pool, budget)
    plain = [m for m in msgs if m[0] != "system"]
    noisy = list(plain)
    for at, text in notes:
        noisy.insert(min(at, len(noisy)), ("system", text))
    a, b = eng.run(plain, turn_id=turn), eng.run(noisy, turn_id=turn)
    assert a.messages == b.messages and a.state == b.state
    assert [(r.outcome, r.pass_number, r.matched_key) for r in a.log] == \
        [(r.outcome, r.pass_number, r.matched_key) for r in b.log]


@settings(max_examples=500, deadline=None)
@given(keys=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), msgs=messages)
def test_not_any_is_the_complement_of_and_any_and_not_all_of_and_all(keys, msgs):
    # SPEC 5.5: among entries whose primary key matched, each pair of logics splits them.
    pool = [{"id": logic, "keys": ["anna", "bar", "dock", "fog", "moon", "wolf", "hello", "end"],
             "secondary_keys": keys, "selective": True, "content": "x",
             "extensions": {"selectiveLogic": logic}} for logic in range(4)]
    result = build(pool, 140, recursive=False).run(msgs, turn_id="t")
    fired = {r.id: r.outcome == "inserted" for r in result.log}
    if any(r.matched_key or r.detail == "secondary_logic" for r in result.log):
        assert fired[0] != fired[2] and fired[1] != fired[3]
    else:
        assert not any(fired.values())
