"""The match core's input (KeySpec, compile_keys) and its special keys (match/keys.py)."""
from __future__ import annotations

import pickle

import pytest

from lorescan.errors import LorebookError, RegexKeyError
from lorescan.formats.sillytavern import book_from_entries
from lorescan.js.regex import regex_key
from lorescan.limits import Limits
from lorescan.match import MatchOptions
from lorescan.match.compile import SKIP, CompiledKeys, compile_keys, load_keys
from lorescan.match.keys import KeySpec, MacroKey, PlainKey, RegexKey
from lorescan.match.lsc import save_compiled
from lorescan.match.view import ScanView, Window
from lorescan.st.compiled import compile_book, key_spec

ENTRIES = [
    {"uid": 0, "key": ["dragon", "/wyrm+s?/i"], "keysecondary": ["fire"], "content": "The dragon sleeps."},
    {"uid": 1, "key": ["{{char}}", " ", "a\x01b"], "content": "A fire burns.", "caseSensitive": True},
    {"uid": 2, "key": ["sleeps"], "content": "wyrmss", "matchWholeWords": True},
    {"uid": 3, "key": [], "content": "constant-ish"},
]
TABLES = ("specs", "plans", "plans_sub", "vid_entries", "content_hits")
VALUES = ("always", "always_sub", "macro_keys", "chunk_union_exact", "regex_lits", "regex_hazards",
          "regex_line_local")


def _specs() -> list[KeySpec]:
    return [key_spec(e) for e in book_from_entries("b", ENTRIES).entries]


@pytest.mark.parametrize("options", [MatchOptions(), MatchOptions.improved()], ids=["sillytavern", "improved"])
def test_compiling_the_key_specs_of_a_book_gives_the_tables_of_the_book(options):
    book = book_from_entries("b", ENTRIES)
    old = compile_book(book, options).keys
    new = compile_keys([key_spec(e) for e in book.entries], options)
    for name in TABLES:
        assert list(getattr(new, name)) == list(getattr(old, name)), name
    for name in VALUES:
        assert getattr(new, name) == getattr(old, name), name


def test_a_key_spec_carries_an_entrys_keys_options_and_content():
    e = book_from_entries("b", ENTRIES).entries[1]
    spec = key_spec(e, 80.0)
    assert spec == KeySpec(("{{char}}", " ", "a\x01b"), (), "A fire burns.", True, None, 80.0, 1)
    with pytest.raises(AttributeError):
        spec.content = "x"              # type: ignore[misc]


def test_keys_compiled_from_key_specs_have_no_book_and_match_by_spec_index():
    cb = compile_keys(_specs(), name="pool")
    assert type(cb) is CompiledKeys and cb.name == "pool" and len(cb) == len(cb.plans) == 4
    for book_part in ("book", "entries", "uids", "entry_order", "entry_flags", "levels", "max_entry_depth"):
        assert not hasattr(cb, book_part), book_part
    view = ScanView(cb, ["Look, WYRMS and fire!"])
    m = view.match_entry(0, Window(1))
    assert (m.primary, m.secondary) == (1, (True,))
    assert view.key_hits(0, Window(1)) == ((False, True), (True,))
    assert view.key_hits(3, Window(1)) == ((), ())


def test_without_entries_a_recursion_chunk_is_scanned_not_taken_from_the_content_hits():
    cb = compile_keys(_specs())
    # The chunk claims to be entry 0's content ("The dragon sleeps.") but is not: with no
    # contents to check the claim against, the view scans the text (trusting the claim would
    # find "sleeps").
    view = ScanView(cb, ["nothing here"])
    view.add_recursion_chunk("a quiet night", entries=(0,))
    assert view.match_entry(2, Window(1, 0, 1)).primary is None
    view.add_recursion_chunk("it sleeps", entries=(0,))
    assert view.match_entry(2, Window(1, 0, 2)).primary == 0
    # With the contents given, a true claim uses the compiled content hits.
    view = ScanView(cb, ["nothing here"], content_of=lambda i: _specs()[i].content)
    view.add_recursion_chunk("The dragon sleeps.", entries=(0,))
    assert view.match_entry(2, Window(1, 0, 1)).primary == 0


@pytest.mark.parametrize("how", ["pickle", "lsc"])
def test_keys_compiled_from_key_specs_survive_the_compact_form(how, tmp_path):
    fresh = compile_keys(_specs(), name="pool")
    if how == "pickle":
        loaded = pickle.loads(pickle.dumps(fresh))
    else:
        save_compiled(fresh, tmp_path / "k.lsc")
        loaded = load_keys(tmp_path / "k.lsc")
    assert type(loaded) is CompiledKeys and loaded.name == "pool" and len(loaded) == 4
    for name in TABLES:
        assert list(getattr(loaded, name)) == list(getattr(fresh, name)), name
    for name in VALUES:
        assert getattr(loaded, name) == getattr(fresh, name), name
    assert pickle.loads(pickle.dumps(loaded)).plans[0] == fresh.plans[0]


def test_key_specs_are_held_to_the_book_limits_naming_the_spec_and_field():
    with pytest.raises(LorebookError, match=r"<pool>, field 'entries': .*max_entries=2"):
        compile_keys(_specs(), limits=Limits(max_entries=2), source="<pool>")
    long_regex = KeySpec(("ok", "/" + "a" * 40 + "/"), uid="e7")
    with pytest.raises(RegexKeyError) as info:
        compile_keys([long_regex], limits=Limits(max_regex_length=20), source="<pool>")
    assert (info.value.source, info.value.entry, info.value.field) == ("<pool>", "e7", "key[1]")
    with pytest.raises(LorebookError, match=r"entry 'e8', field 'keysecondary\[0\]': .*max_key_length=5"):
        compile_keys([KeySpec(("k",), ("x" * 9,), uid="e8")], limits=Limits(max_key_length=5), source="<pool>")


def test_the_special_key_kinds_are_distinct_types_read_by_name():
    rx = regex_key("/a+/i")
    assert rx is not None
    keys = [RegexKey(rx, 0, SKIP, "/a+/i"), PlainKey("a", False, True, "a "), MacroKey("a", False, True)]
    assert len({type(k) for k in keys}) == 3
    assert all(a != b for i, a in enumerate(keys) for b in keys[i + 1:])
    assert PlainKey("a", False, True, "a ") == keys[1] and hash(PlainKey("a", False, True, "a ")) == hash(keys[1])
    for k in keys:
        with pytest.raises(TypeError):
            k[0]                        # type: ignore[index]  # no positional reading
        assert pickle.loads(pickle.dumps(k)) == k


def test_compiled_plans_hold_special_keys_of_the_right_kind():
    cb = compile_book(book_from_entries("b", ENTRIES)).keys
    refs = {type(r) for p in cb.plans for r in p.score_primary}
    assert {RegexKey, PlainKey} <= refs
    assert any(type(r) is MacroKey for p in cb.plans_sub for _, r in p.primary)
    assert all(type(m) is MacroKey for m in cb.macro_keys) and cb.macro_keys


def test_a_literal_key_is_plain_text_even_in_regex_form():
    specs = [KeySpec(("/dra+gon/",), literal=frozenset({"/dra+gon/"})), KeySpec(("/dra+gon/",))]
    cb = compile_keys(specs)
    assert type(cb.plans[0].primary[0][1]) is int and type(cb.plans[1].primary[0][1]) is RegexKey
    view = ScanView(cb, ["a draagon flies"], joined=False)
    assert [view.match_entry(i, Window(1)).primary for i in (0, 1)] == [None, 0]
    view = ScanView(cb, ["it reads /dra+gon/ here"], joined=False)
    assert view.match_entry(0, Window(1)).primary == 0


def test_a_literal_macro_key_stays_literal_after_substitution():
    cb = compile_keys([KeySpec(("{{x}}",), literal=frozenset({"{{x}}"})), KeySpec(("{{x}}",))])
    assert cb.macro_keys == (MacroKey("{{x}}", False, False, True), MacroKey("{{x}}", False, False, False))
    sub = lambda text: text.replace("{{x}}", "/a+/")          # noqa: E731
    view = ScanView(cb, ["aaa"], substitute=sub, joined=False)
    assert [view.match_entry(i, Window(1)).primary for i in (0, 1)] == [None, 0]
    view = ScanView(cb, ["see /a+/"], substitute=sub, joined=False)
    assert view.match_entry(0, Window(1)).primary == 0


def test_fuzzy_thresholds_leave_literal_keys_exact():
    options = MatchOptions.improved()
    cb = compile_keys([KeySpec(("Hermione", "/Hermione/"), fuzzy=80.0, literal=frozenset({"/Hermione/"}))],
                      options)
    view = ScanView(cb, ["Hermoine and /Hermoine/"], joined=False)
    assert view.key_hits(0, Window(1)) == ((True, False), ())
