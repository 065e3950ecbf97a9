"""Fuzzing what callers and storage hand the engines (issue 15): timed-effects state, slot
state, settings and arguments. Whatever the value, only a LorebookError (or subclass)
escapes, and every state that comes back is strict JSON (``allow_nan=False``).

Examples per property come from the hypothesis profile (``HYPOTHESIS_PROFILE=ci``: 1,000).
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lorescan import ChatMessage, ChatScan, LorebookError, STEngine, STSettings, SlotEngine
from lorescan.formats.load import load_data
from lorescan.st import BookSource

# Values storage may hold where a number or a flag belongs: every JSON type, the non-finite
# floats Python's json accepts by default, integers past any float, and the strings that
# look like numbers or booleans.
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**20, max_value=10**400),
    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 2.0**53, 2.0**53 + 2]),
    st.text(max_size=6), st.sampled_from(["false", "true", "0", "1e999", "NaN", ""]),
)
# The values that broke state handling before (issue 15), drawn often on purpose.
NASTY = st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -10**400, "false", "1", 1e308, 2**53 + 2,
                         -1, None, True, False, [], {}])
ANY_JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)


def _deep(n: int) -> list:
    v: list = []
    for _ in range(n):
        v = [v]
    return v


@pytest.fixture(scope="module")
def st_engine() -> tuple[STEngine, str]:
    book = load_data({"entries": {
        "0": {"uid": 0, "key": ["dragon"], "content": "A dragon.", "sticky": 3, "cooldown": 2},
        "1": {"uid": 1, "key": ["cave"], "content": "A cave.", "cooldown": 1}}}, source="fuzz")
    engine = STEngine([BookSource(book, ("global",))], count_tokens=len)
    return engine, f"{engine.world_names[0]}.0"


CHAT = [ChatMessage("u", "a dragon in a cave", True)] * 4


def _record(key_hash: st.SearchStrategy) -> st.SearchStrategy:
    field = st.one_of(st.integers(min_value=-3, max_value=8), NASTY, SCALARS, ANY_JSON)
    return st.one_of(
        st.fixed_dictionaries({"hash": key_hash, "start": field, "end": field},
                              optional={"protected": st.one_of(st.booleans(), NASTY, SCALARS)}),
        ANY_JSON)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_timed_effects_state_gives_a_located_error_or_strict_json(st_engine, data):
    engine, key = st_engine
    real_hash = engine.tables.entries[0].hash
    # mostly well-formed around the real entry, so the corruption reaches evaluation
    record = _record(st.one_of(st.just(real_hash), st.just(real_hash), NASTY, SCALARS))
    kind = st.one_of(st.dictionaries(st.sampled_from([key, key, "x.1"]), record, min_size=1, max_size=2),
                     ANY_JSON)
    state = data.draw(st.one_of(
        st.fixed_dictionaries({"sticky": kind}, optional={"cooldown": kind}),
        st.fixed_dictionaries({}, optional={"sticky": kind, "cooldown": kind}), ANY_JSON))
    try:
        result = engine.scan(CHAT, max_context=1000, timed_effects=state)
        json.dumps(result.timed_effects.to_json(), allow_nan=False)
    except LorebookError:
        pass


@pytest.fixture(scope="module")
def slot_engine() -> SlotEngine:
    book = load_data({"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "A dragon."}}}, source="fuzz")
    return SlotEngine([book], count_tokens=len)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(state=st.one_of(
    st.fixed_dictionaries({}, optional={
        "version": st.one_of(st.just(1), SCALARS),
        "first_matched_turn": st.one_of(
            st.dictionaries(st.text(max_size=3), st.dictionaries(st.text(max_size=3), ANY_JSON, max_size=2),
                            max_size=2), ANY_JSON),
        "notes": st.one_of(ANY_JSON, st.integers(min_value=200, max_value=2000).map(_deep))}),
    ANY_JSON))
def test_any_slot_state_gives_a_located_error_or_strict_json(slot_engine, state):
    try:
        result = slot_engine.run([("user", "a dragon")], turn_id="t", state=state)
    except LorebookError:
        return
    json.dumps(result.state, allow_nan=False)


SETTING_NAMES = sorted(STSettings.__dataclass_fields__)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(settings_map=st.dictionaries(st.sampled_from(SETTING_NAMES + ["bogus"]), st.one_of(NASTY, ANY_JSON),
                                    max_size=3),
       max_context=st.one_of(NASTY, ANY_JSON), trigger=ANY_JSON, dry_run=ANY_JSON,
       injects=st.one_of(st.lists(st.one_of(st.text(max_size=5), SCALARS), max_size=2)),
       gsd=st.one_of(st.none(), st.dictionaries(st.sampled_from(["personaDescription", "scenario", "x"]),
                                                ANY_JSON, max_size=2)))
def test_any_settings_and_arguments_give_a_located_error_or_a_result(settings_map, max_context, trigger,
                                                                    dry_run, injects, gsd):
    book = load_data({"entries": {"0": {"uid": 0, "key": ["dragon"], "content": "A dragon."}}}, source="fuzz")
    try:
        engine = STEngine([BookSource(book, ("global",))], settings_map, count_tokens=len)
        engine.scan(CHAT, max_context=max_context, trigger=trigger, dry_run=dry_run, injects=injects,
                    global_scan_data=gsd)
    except LorebookError:
        pass


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turn_id=ANY_JSON, greeting_index=ANY_JSON, at_greeting=ANY_JSON, dry_run=ANY_JSON,
       messages=st.one_of(st.lists(st.tuples(st.sampled_from(["user", "assistant", "system", "x"]),
                                             st.one_of(st.text(max_size=8), SCALARS)), max_size=3), ANY_JSON))
def test_any_slot_arguments_give_a_located_error_or_a_result(slot_engine, turn_id, greeting_index, at_greeting,
                                                             dry_run, messages):
    try:
        slot_engine.run(messages, turn_id=turn_id, greeting_index=greeting_index, at_greeting=at_greeting,
                        dry_run=dry_run)
    except LorebookError:
        pass


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(max_texts=ANY_JSON, max_bytes=ANY_JSON)
def test_any_chatscan_bounds_give_a_located_error_or_a_cache(max_texts, max_bytes):
    try:
        ChatScan(max_texts=max_texts, max_bytes=max_bytes)
    except LorebookError:
        pass
