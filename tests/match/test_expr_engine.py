"""Key expressions in the engines (docs/improved-profile.md#key-expressions, docs/slot-mode.md#slot-expressions):
evaluated over the window like plain keys, checked against a naive evaluator that searches each atom in
the joined window text with the same word rules."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.match import _kernels
from lorescan.errors import LorebookError
from lorescan.formats import book_from_entries
from lorescan.js.regex import tool_regex
from lorescan.match import MatchOptions
from lorescan.match.view import match_plain_key
from lorescan.st.settings import Compat
from tests.support.slot_helpers import engine as slot_engine, st_book

ATOMS = ["dragon", "red", "wyrm", "baby", "red dragon", "/wy.?rm/i", "/Red|BABY/"]
WORDS = ["dragon", "red", "wyrm", "wyvrm", "baby", "the", "dragons", "Red", "wyrms", "reddish", "x"]


@pytest.fixture(autouse=True)
def backend(hits, monkeypatch):
    """Every test here runs with the pure-Python and the native hit kernel under the matcher."""
    monkeypatch.setattr(_kernels, "hits", hits)
    return hits


# -- random expressions, rendered with the fewest parentheses precedence allows ----------------

def trees():
    atom = st.sampled_from(ATOMS).map(lambda k: ("atom", k))
    return st.recursive(atom, lambda inner: st.one_of(
        inner.map(lambda t: ("NOT", t)),
        st.tuples(st.sampled_from(["AND", "OR"]), st.lists(inner, min_size=2, max_size=3)).map(
            lambda x: (x[0], *x[1]))), max_leaves=6)


_RANK = {"OR": 0, "AND": 1, "NOT": 2, "atom": 3}


def render(tree, extra: bool) -> str:
    kind = tree[0]
    if kind == "atom":
        key = tree[1]
        return f'"{key}"' if extra and not key.startswith("/") else key

    def sub(child, at: int) -> str:
        text = render(child, extra)
        return f"({text})" if _RANK[child[0]] < at or (extra and child[0] != "atom") else text
    if kind == "NOT":
        return "NOT " + sub(tree[1], 2)
    return f" {kind} ".join(sub(c, _RANK[kind] + 1) for c in tree[1:])


def naive(tree, found) -> bool:
    kind = tree[0]
    if kind == "atom":
        return found(tree[1])
    if kind == "NOT":
        return not naive(tree[1], found)
    values = [naive(c, found) for c in tree[1:]]
    return all(values) if kind == "AND" else any(values)


def finder(texts: list[str], options: MatchOptions, whole_words: bool):
    """An atom's truth in the window: searched in the joined texts, the plain-key word rules."""
    hay = "\n".join(texts)

    def found(key: str) -> bool:
        rx = tool_regex(key)
        if rx is not None:
            return rx.search(hay)
        return match_plain_key(hay, key, case_sensitive=False, whole_words=whole_words, options=options)
    return found


def usable(tree) -> bool:
    return not naive(tree, lambda k: False)    # a primary expression true with no key is refused


messages = st.lists(st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join), min_size=1, max_size=4)


def st_fired(keys, chat, *, depth=4, whole_words=False, compat="improved", recursive=False, extra=()):
    book = book_from_entries("bx", [{"uid": 0, "key": list(keys), "content": "E0"}, *extra])
    engine = STEngine([BookSource(book, ("global",))],
                      STSettings(scan_depth=depth, include_names=False, match_whole_words=whole_words,
                                 recursive=recursive), compat=compat)
    result = engine.scan([ChatMessage("u", t, is_user=True) for t in chat], max_context=100_000)
    return "E0" in result.world_info_before.split("\n"), result


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees(), chat=messages, depth=st.integers(1, 4), whole_words=st.booleans(), extra=st.booleans())
def test_st_improved_agrees_with_the_naive_evaluator(tree, chat, depth, whole_words, extra):
    if not usable(tree):
        tree = ("AND", ("atom", "dragon"), tree)
    key = "&expr: " + render(tree, extra)
    window = chat[-depth:]
    want = naive(tree, finder(window, Compat.improved().match_options(match_whole_words=whole_words),
                              whole_words))
    got, _ = st_fired([key], chat, depth=depth, whole_words=whole_words)
    assert got == want, key


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees(), chat=messages)
def test_slot_mode_agrees_with_the_naive_evaluator(tree, chat):
    if not usable(tree):
        tree = ("AND", ("atom", "dragon"), tree)
    key = "&expr: " + render(tree, False)
    eng = slot_engine(st_book("b", [{"key": [key], "content": "E0"}]))
    turns = [("user", t) for t in chat]
    result = eng.run(turns, turn_id="t")
    got = [r.outcome for r in result.log if r.id == 0] == ["inserted"]
    want = naive(tree, finder(chat, MatchOptions.improved(), False))
    assert got == want, key


def test_an_expression_combines_with_plain_keys_and_secondary_expressions():
    keys = ["knight", "&expr: dragon AND NOT baby"]
    assert st_fired(keys, ["a knight"])[0]
    assert st_fired(keys, ["a dragon"])[0]
    assert not st_fired(keys, ["a baby dragon"])[0]
    sel = {"uid": 1, "key": ["castle"], "keysecondary": ["&expr: (sword OR axe) AND NOT shield"],
           "selective": True, "selectiveLogic": 0, "content": "E1"}
    for chat, want in ((["castle sword"], True), (["castle shield axe"], False), (["castle"], False)):
        _, result = st_fired(["zzz"], chat, extra=[sel])
        assert ("E1" in result.world_info_before.split("\n")) == want


def test_not_means_absent_from_the_whole_window():
    key = "&expr: wyrm AND NOT baby"
    assert not st_fired([key], ["a baby", "the wyrm"], depth=2)[0]     # baby is in the window
    assert st_fired([key], ["a baby", "the wyrm"], depth=1)[0]         # baby is outside it


def test_recursion_text_joins_the_window():
    source = {"uid": 1, "key": ["castle"], "content": "a red dragon sleeps here"}
    assert st_fired(["&expr: dragon AND red"], ["the castle"], recursive=True, extra=[source])[0]
    assert not st_fired(["&expr: dragon AND red"], ["the castle"], recursive=False, extra=[source])[0]
    # and NOT sees the recursion text too
    baby = {**source, "content": "a baby dragon sleeps here"}
    assert st_fired(["&expr: dragon AND NOT baby"], ["the castle"], recursive=True, extra=[source])[0]
    assert not st_fired(["&expr: dragon AND NOT baby"], ["the castle"], recursive=True, extra=[baby])[0]


def test_the_sillytavern_profile_reads_an_expression_as_a_plain_key():
    key = "&expr: dragon AND red"
    assert not st_fired([key], ["a red dragon"], compat="sillytavern")[0]
    assert st_fired([key], ["look: &expr: dragon and red"], compat="sillytavern")[0]   # its own text, as ST
    # a malformed one is no error there, and one in the improved profile
    assert not st_fired(["&expr: (dragon"], ["dragon"], compat="sillytavern")[0]
    with pytest.raises(LorebookError) as info:
        st_fired(["ok", "&expr: (dragon"], ["dragon"])
    assert (info.value.entry, info.value.field) == (0, "key[1]") and "column" in info.value.problem


def test_explain_names_the_atoms():
    _, result = st_fired(["&expr: (dragon AND red) OR (wyrm AND NOT baby)"], ["the baby wyrm"])
    text = str(result.explain("bx", 0))
    assert 'matched: "wyrm", "baby"' in text and 'absent: "dragon", "red"' in text
    _, result = st_fired(["&expr: (dragon AND red) OR (wyrm AND NOT baby)"], ["a red dragon"])
    text = str(result.explain("bx", 0))
    assert "is true" in text and 'matched: "dragon", "red"' in text


def test_group_scoring_counts_an_expression_as_one_key():
    common = {"group": "g", "content": "X"}
    entries = [{"uid": 0, "key": ["&expr: dragon AND red", "castle"], "content": "E0", "group": "g", "order": 1},
               {"uid": 1, "key": ["dragon", "red", "castle"], **common, "content": "E1", "order": 2}]
    book = book_from_entries("bx", entries)
    eng = STEngine([BookSource(book, ("global",))],
                   STSettings(scan_depth=2, include_names=False, use_group_scoring=True), compat="improved")
    out = eng.scan([ChatMessage("u", "red dragon castle", is_user=True)], max_context=100_000)
    # E0 scores 2 (the expression and castle), E1 scores 3: E1 alone survives the group
    assert out.world_info_before.split("\n") == ["E1"]


def test_slot_mode_errors_and_reasons():
    with pytest.raises(LorebookError) as info:
        slot_engine(st_book("b", [{"key": ["&expr: a AND"], "content": "x"}]))
    assert info.value.field == "keys" and "column 13" in info.value.problem
    eng = slot_engine(st_book("b", [{"key": ["&expr: dragon AND NOT baby"], "content": "E0"}]))
    rec = eng.run([("user", "baby dragon")], turn_id="t").log[0]
    assert rec.outcome == "not_matched" and 'absent' not in rec.reason and 'matched: "dragon", "baby"' in rec.reason
    rec = eng.run([("user", "a dragon")], turn_id="t").log[0]
    assert rec.outcome == "inserted" and 'matched: "dragon"; absent: "baby"' in rec.reason


def test_slot_mode_key_decorators_take_expressions():
    eng = slot_engine(st_book("b", [{"key": ["knight"], "content": "@@exclude_keys &expr: sword AND NOT shield\nE0"}]))
    outcome = {t: eng.run([("user", t)], turn_id="t").log[0].outcome
               for t in ("knight", "knight sword", "knight sword shield")}
    assert outcome == {"knight": "inserted", "knight sword": "not_matched", "knight sword shield": "inserted"}


def test_a_compiled_book_with_expressions_survives_lsc(tmp_path):
    from lorescan.st.compiled import compile_book, load_compiled
    from lorescan.match.lsc import save_compiled
    book = book_from_entries("bx", [{"uid": 0, "key": ["&expr: dragon AND NOT baby"], "content": "E0"}])
    options = Compat.improved().match_options()
    save_compiled(compile_book(book, options), tmp_path / "b.lsc")
    loaded = load_compiled(tmp_path / "b.lsc")
    assert loaded.options == options and loaded.options.expressions
    engine = STEngine([BookSource(loaded, ("global",))], STSettings(include_names=False), compat="improved")
    fired = [engine.scan([ChatMessage("u", t, is_user=True)], max_context=100_000).world_info_before
             for t in ("a dragon", "a baby dragon")]
    assert fired == ["E0", ""]
