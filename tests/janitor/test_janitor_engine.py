"""JanitorEngine's own surface: random sources, contexts the script cannot run on, bad input
as located errors, and the result object (the vectors cover the rules themselves)."""
from __future__ import annotations

import dataclasses
import random

import pytest

from lorescan.errors import LorebookError
from lorescan.janitor import JanitorEngine, JanitorResult

BOOK = [{"keywords": ["dragon"], "probability": 0.5, "personality": "P"}, {"scenario": "S"}]
CTX = {"character": {"name": "Mira", "personality": "Base.", "scenario": ""},
       "chat": {"last_messages": [{"message": "a dragon"}]}}


def test_random_may_be_a_callable_a_sequence_or_the_default():
    engine = JanitorEngine(BOOK)
    assert engine.run(CTX, random=[0.9, 0.1]).personality == "Base."            # 0.9 > 0.5: no
    assert engine.run(CTX, random=lambda: 0.5).personality == "Base.\n\nP"      # equal passes
    seeded = random.Random(3)
    assert engine.run(CTX, random=seeded.random).random_calls == 2
    assert engine.run(CTX).random_calls == 2


def test_too_few_or_junk_random_values_are_located_errors():
    engine = JanitorEngine(BOOK)
    with pytest.raises(LorebookError) as err:
        engine.run(CTX, random=[0.2])
    assert err.value.source == "random" and "ran out after 1" in str(err.value)
    with pytest.raises(LorebookError) as err:
        engine.run(CTX, random=["0.2", 0.1])
    assert err.value.field == "[0]"


def test_a_context_the_script_cannot_run_on_is_its_type_error():
    engine = JanitorEngine(BOOK)
    for context in (None, "text", 5):
        result = engine.run(context, random=[])
        assert result.error is not None and result.error.name == "TypeError"
        assert result.random_calls == 0 and result.personality is None


def test_a_character_that_is_not_an_object_keeps_no_text():
    result = JanitorEngine(BOOK).run({"character": "Mira", "chat": CTX["chat"]}, random=[0.1, 0.1])
    assert result.error is None and result.personality is None and result.scenario is None
    assert result.trace["selected"] == [0, 1]


def test_an_array_like_window_that_would_never_end_is_refused():
    # the script counts i up from length - 5 in doubles: past 2**53, i + 1 == i and it never stops
    with pytest.raises(LorebookError) as err:
        JanitorEngine(BOOK).run({"chat": {"last_messages": {"length": 2**53 + 2}}}, random=[])
    assert err.value.source == "context" and err.value.field == "chat.last_messages.length"
    # while at 1e300, length - 5 == length: no message at all, as in JS
    result = JanitorEngine(BOOK).run({"chat": {"last_messages": {"length": 1e300}}}, random=[0.1])
    assert result.trace["haystack"] == "  " and result.trace["message_count"] == 1e300


def test_the_result_is_frozen_and_serialises_to_the_vector_shape():
    result = JanitorEngine(BOOK).run(CTX, random=[0.1, 0.1])
    assert isinstance(result, JanitorResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.personality = "x"  # type: ignore[misc]
    data = result.to_json()
    assert set(data) == {"personality", "scenario", "error", "random_calls", "trace"}
    assert data["trace"]["selected"] == [0, 1] and data["trace"]["haystack"] == " a dragon "


def test_engines_share_nothing_between_runs():
    engine = JanitorEngine(BOOK)
    first = engine.run(CTX, random=[0.1, 0.1]).to_json()
    engine.run({"chat": {"last_messages": [{"message": "no match"}]}}, random=[0.1])
    assert engine.run(CTX, random=[0.1, 0.1]).to_json() == first
