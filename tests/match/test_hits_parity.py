"""The native hit-set kernels agree with their twin, on random books and on the corpus chats."""
from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import need_shared
from lorescan.match import _hits_py
from lorescan.st.compiled import compile_book
from lorescan.formats.sillytavern import load_world_file
from lorescan.match import MatchOptions
from lorescan.model import Lorebook, entry_from_fields
from tests.support.matchgen import books, options, texts

MANY = settings(max_examples=1000, deadline=None)


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001
        return (type(exc), str(exc))


def test_signatures_match(native_hits):
    for name in ("text_hits", "bounded_text_hits", "window_union", "entries_hit", "count_step"):
        assert list(inspect.signature(getattr(native_hits, name)).parameters) == \
            list(inspect.signature(getattr(_hits_py, name)).parameters), name


@MANY
@given(book=books(), opts=options, text=texts, model=st.integers(-1, 3))
def test_text_hits_agree(native_hits, book, opts, text, model):
    m = compile_book(book, opts).keys.matcher
    if m.automaton is None:
        return
    for raw, low in ((True, True), (True, False), (False, True)):
        args = (text, m.automaton, m.tables, model, raw, low)
        assert outcome(native_hits.text_hits, *args) == outcome(_hits_py.text_hits, *args)


@MANY
@given(book=books(), opts=options, text=texts, model=st.integers(0, 2), budget=st.integers(-1, 40))
def test_bounded_text_hits_agree_on_the_hits_and_the_cut(native_hits, book, opts, text, model, budget):
    # the same first ``budget`` automaton hits taken on both kernels: the same vids, the same cut
    m = compile_book(book, opts).keys.matcher
    if m.automaton is None:
        return
    for raw, low in ((True, True), (True, False), (False, True)):
        args = (text, m.automaton, m.tables, model, raw, low, budget, None)
        got = outcome(native_hits.bounded_text_hits, *args)
        assert got == outcome(_hits_py.bounded_text_hits, *args)
        if budget < 0:
            assert got == ("ok", (_hits_py.text_hits(*args[:6]), False))


@MANY
@given(parts=st.lists(st.frozensets(st.integers(0, 50)), max_size=6), always=st.lists(st.integers(0, 9)))
def test_union_and_entries_agree(native_hits, parts, always):
    assert native_hits.window_union(parts) == _hits_py.window_union(parts)
    vid_entries = [tuple(range(v % 4, v % 7)) for v in range(51)]
    hits = _hits_py.window_union(parts)
    assert native_hits.entries_hit(hits, vid_entries, always) == _hits_py.entries_hit(hits, vid_entries, always)


@MANY
@given(start=st.lists(st.frozensets(st.integers(0, 30)), max_size=5),
       added=st.lists(st.frozensets(st.integers(0, 30)), max_size=4), drop=st.integers(0, 9))
def test_count_steps_agree(native_hits, start, added, drop):
    # counts over ``start``, then ``added`` counted in and some of the sets counted before
    # (``start`` and ``added``) counted out: the same counts and the same answer on both kernels,
    # the keys are the union of the sets still counted, and False says they did not change
    counted = start + added
    removed = counted[:drop]
    out = []
    for kernel in (native_hits, _hits_py):
        counts: dict[int, int] = {}
        kernel.count_step(counts, start, ())
        before = set(counts)
        changed = kernel.count_step(counts, added, removed)
        assert set(counts) == set().union(*counted[drop:]) and (changed or set(counts) == before)
        assert all(c > 0 for c in counts.values())
        out.append((counts, changed))
    assert out[0] == out[1]
    counts = {}
    with pytest.raises(KeyError):
        native_hits.count_step(counts, (), [frozenset({1})])
    with pytest.raises(KeyError):
        _hits_py.count_step(counts, (), [frozenset({1})])


def test_corpus_chats_give_the_same_hits(native_hits):
    corpus_dir = need_shared("corpus")
    books = [load_world_file(str(corpus_dir / "books" / name))
             for name in ("en-monster-hunter-387.json", "zh-ai-guide-2.0.json", "en-weyland-251.json")]
    for path in sorted((corpus_dir / "chats").glob("*.jsonl")):
        msgs = [json.loads(line).get("mes") for line in open(path, encoding="utf-8") if line.strip()]
        msgs = [m for m in msgs if isinstance(m, str)][:150]
        for book in books:
            for opts in (MatchOptions.sillytavern(match_whole_words=True), MatchOptions.improved(match_whole_words=True)):
                m = compile_book(book, opts).keys.matcher
                for text in msgs:
                    args = (text, m.automaton, m.tables, m.model, m.scan_raw, m.scan_lower)
                    assert native_hits.text_hits(*args) == _hits_py.text_hits(*args)


def test_every_code_point_gives_the_same_whole_word_boundaries(native_hits):
    # the key "a" as a whole word between a code point and itself, under each word model:
    # covers the class table, the astral path and each model's boundary rule
    m_by_model = {}
    for opts in (MatchOptions.sillytavern(match_whole_words=True), MatchOptions.improved(match_whole_words=True),
                 MatchOptions(False, True, "unicode", False, "substring", "match_all")):
        book = Lorebook(name="b", entries=(entry_from_fields({"uid": 0, "key": ["a"], "content": "x"}),))
        m = compile_book(book, opts).keys.matcher
        m_by_model[m.model] = m
    assert sorted(m_by_model) == [0, 1, 2]
    for m in m_by_model.values():
        for cp in list(range(0, 0x3100)) + list(range(0x1F000, 0x1F100)) + list(range(0x20000, 0x20010)):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            text = chr(cp) + "a" + chr(cp)
            args = (text, m.automaton, m.tables, m.model, m.scan_raw, m.scan_lower)
            assert native_hits.text_hits(*args) == _hits_py.text_hits(*args), (hex(cp), m.model)
