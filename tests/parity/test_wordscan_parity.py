"""The native whole-word and case filters agree with their twin (results, errors, signatures)."""
from __future__ import annotations

import inspect

import ahocorasick
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import _wordscan_py
from matchgen import ATOMS

MANY = settings(max_examples=1000, deadline=None)
texts = st.one_of(st.text(max_size=40), st.lists(st.sampled_from(ATOMS), max_size=10).map("".join))
models = st.sampled_from([0, 1, 2])


def hits_for(keys: list[str], text: str) -> tuple[list[tuple[int, int]], list[int]]:
    automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
    for i, k in enumerate(keys):
        automaton.add_word(k, i)
    automaton.make_automaton()
    return list(automaton.iter(text)), [len(k) for k in keys]


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - comparing whatever both sides raise
        return (type(exc), str(exc))


def test_signatures_match(native_wordscan):
    for name in ("boundary_ok", "whole_word_hits", "case_filter"):
        native = inspect.signature(getattr(native_wordscan, name))
        twin = inspect.signature(getattr(_wordscan_py, name))
        assert list(native.parameters) == list(twin.parameters), name


@MANY
@given(text=texts, keys=st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=6, unique=True),
       model=models)
def test_whole_word_hits_agree(native_wordscan, text, keys, model):
    hits, lengths = hits_for(keys, text)
    assert native_wordscan.whole_word_hits(text, hits, lengths, model) == \
        _wordscan_py.whole_word_hits(text, hits, lengths, model)


@MANY
@given(text=texts, start=st.integers(-2, 45), length=st.integers(-1, 6), model=st.integers(-1, 3))
def test_boundary_ok_agrees_including_errors(native_wordscan, text, start, length, model):
    args = (text, start, start + length, model)
    assert outcome(native_wordscan.boundary_ok, *args) == outcome(_wordscan_py.boundary_ok, *args)


@MANY
@given(text=texts, keys=st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=6, unique=True),
       data=st.data())
def test_case_filter_agrees(native_wordscan, text, keys, data):
    hits, _ = hits_for(keys, text)
    free = data.draw(st.lists(st.integers(-1, 9), min_size=len(keys), max_size=len(keys)))
    bound = data.draw(st.lists(st.integers(-1, 9), min_size=len(keys), max_size=len(keys)))
    assert native_wordscan.case_filter(hits, free, bound) == _wordscan_py.case_filter(hits, free, bound)


def test_bad_model_is_the_same_error(native_wordscan):
    for fn in ("whole_word_hits",):
        a = outcome(getattr(native_wordscan, fn), "abc", [], [], 7)
        b = outcome(getattr(_wordscan_py, fn), "abc", [], [], 7)
        assert a == b and a[0] is ValueError


def test_every_code_point_has_the_same_boundaries(native_wordscan):
    # one occurrence "a" between every code point and itself covers the class table and the astral path
    for model in (0, 1, 2):
        for cp in list(range(0, 0x3100)) + list(range(0x1F000, 0x1F100)) + list(range(0x20000, 0x20010)):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            text = chr(cp) + "a" + chr(cp)
            assert native_wordscan.boundary_ok(text, 1, 2, model) == _wordscan_py.boundary_ok(text, 1, 2, model)
