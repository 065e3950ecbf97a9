"""The syntax of boolean key expressions (match/expr.py, docs/improved-profile.md#key-expressions)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from lorescan.errors import LorebookError
from lorescan.match.expr import (EXPR_PREFIX, And, Atom, ExprError, Not, Or, expand_spec, is_expression, layout_of,
                                 parse_expression)
from lorescan.match.keys import KeySpec


def p(text: str):
    return parse_expression(EXPR_PREFIX + " " + text)


def a(key: str, literal: bool = False) -> Atom:
    return Atom(key, literal)


def column_of_error(text: str) -> tuple[str, int]:
    with pytest.raises(ExprError) as info:
        parse_expression(text)
    return info.value.problem, info.value.column


# -- precedence and nesting --------------------------------------------------------------------

def test_not_binds_tighter_than_and_which_binds_tighter_than_or():
    assert p("a OR b AND NOT c") == Or((a("a"), And((a("b"), Not(a("c"))))))
    assert p("NOT a AND b") == And((Not(a("a")), a("b")))
    assert p("a AND b OR c AND d") == Or((And((a("a"), a("b"))), And((a("c"), a("d")))))


def test_parentheses_override_precedence_and_nest():
    assert p("(a OR b) AND c") == And((Or((a("a"), a("b"))), a("c")))
    assert p("NOT (a OR (b AND NOT (c)))") == Not(Or((a("a"), And((a("b"), Not(a("c")))))))
    assert p("((a))") == a("a")


def test_chains_of_one_operator_are_flat():
    assert p("a OR b OR c") == Or((a("a"), a("b"), a("c")))
    assert p("a AND b AND c") == And((a("a"), a("b"), a("c")))
    assert p("NOT NOT a") == Not(Not(a("a")))


def test_operators_are_capitals_only_and_bare_words_run_together():
    assert p("salt and pepper") == a("salt and pepper")
    assert p("red  dragon OR Or") == Or((a("red  dragon"), a("Or")))
    assert p("ANDROID AND ORB") == And((a("ANDROID"), a("ORB")))


# -- quoting and regex atoms -------------------------------------------------------------------

def test_quoted_phrases_are_literal_atoms_with_escapes():
    assert p('"AND" OR "a \\"b\\" \\\\ c"') == Or((a("AND", True), a('a "b" \\ c', True)))
    assert p('"(x)" AND y') == And((a("(x)", True), a("y")))
    assert p('"/x/i"') == a("/x/i", True)


def test_regex_atoms_keep_their_text_and_flags():
    assert p("/dra(g|k)on/i AND NOT /baby/") == And((a("/dra(g|k)on/i"), Not(a("/baby/"))))
    assert p("(/a b/)") == a("/a b/")           # spaces and ')' inside the regex belong to it
    assert p(r"/a\/b/ OR c") == Or((a(r"/a\/b/"), a("c")))


@given(st.text(alphabet='ab "\\()/', max_size=12))
def test_quoting_any_text_gives_it_back(text):
    quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if text:
        assert p(quoted) == a(text, True)


def test_the_prefix_may_follow_whitespace_and_is_case_sensitive():
    assert is_expression("  &expr: a")
    assert not is_expression("&EXPR: a")
    assert not is_expression("dragon &expr: a")
    assert parse_expression("\t&expr:a") == a("a")


# -- errors, with columns ----------------------------------------------------------------------

@pytest.mark.parametrize("text, problem, column", [
    ("&expr: a AND", "expected a key or '(' here, the expression ends", 13),
    ("&expr: (a OR b", "expected ')' to close the '(' of column 8", 15),
    ("&expr: a) OR b", "unmatched ')'", 9),
    ("&expr: a AND OR b", "expected a key or '(', got 'OR'", 14),
    ('&expr: "abc', "unclosed quote", 8),
    ('&expr: "a\\x"', 'unknown escape (write \\" or \\\\)', 10),
    ('&expr: ""', "empty quoted phrase", 8),
    ("&expr: /(/", "not a valid regex", 8),
    ("&expr: //", "empty regex", 8),
    ("&expr: /abc", "unclosed regex (a / ends it)", 8),
    ("&expr: /a/q", "unknown regex flag", 11),
    ('&expr: a "b"', "expected AND or OR before 'b'", 10),
    ("&expr: /a/ b", "expected AND or OR before 'b'", 12),
    ("&expr:   ", "empty expression", 10),
    ("&expr: ()", "expected a key or '(', got ')'", 9),
])
def test_malformed_expressions_say_what_and_where(text, problem, column):
    assert column_of_error(text) == (problem, column)
    assert f"(column {column})" in str(ExprError(problem, column))


def test_layout_errors_name_the_field_and_refuse_an_expression_true_without_keys():
    with pytest.raises(LorebookError) as info:
        layout_of(["x", "&expr: (a"], [])
    assert info.value.field == "key[1]" and info.value.problem.endswith("(column 10)")
    with pytest.raises(LorebookError) as info:
        layout_of(["&expr: a OR NOT b"], [])
    assert info.value.field == "key[0]" and "true when none of its keys matches" in info.value.problem
    layout_of(["dragon"], ["&expr: NOT b"])      # a secondary NOT is what selective logic does: fine
    with pytest.raises(LorebookError) as info:
        layout_of(["dragon"], ["ok", "&expr: b AND"])
    assert info.value.field == "keysecondary[1]"


# -- layout and compiled form ------------------------------------------------------------------

def test_atoms_are_shared_between_expressions_and_appended_to_the_primary_keys():
    spec = KeySpec(("&expr: a AND NOT b", "plain"), ("&expr: b OR \"/c/\"",), uid=7)
    layout = layout_of(spec.primary, spec.secondary)
    assert layout is not None
    assert layout.atoms == (("a", False), ("b", False), ("/c/", True))
    out = expand_spec(spec)
    # the expression keys themselves are compiled as empty keys (skipped), their atoms appended
    assert out.primary == ("", "plain", "a", "b", "/c/")
    assert out.secondary == ("",)
    assert out.literal == frozenset({"/c/"})          # a quoted /c/ is text, not a regex
    # key_hits order: the entry's primary keys, then the atoms
    prim, sec, hits = layout.resolve((False, True, True, False, False), (False,))
    assert hits == (False, True, True, False, False)
    assert prim == (True, True) and sec == (False,)
    prim, sec, _ = layout.resolve((False, False, True, True, True), (False,))
    assert prim == (False, False) and sec == (True,)


def test_a_spec_without_expressions_is_unchanged_and_errors_are_located():
    spec = KeySpec(("a", "b"), ("c",))
    assert expand_spec(spec) is spec
    with pytest.raises(LorebookError) as info:
        expand_spec(KeySpec(("&expr: a AND",), uid=3), "book.json")
    assert (info.value.source, info.value.entry, info.value.field) == ("book.json", 3, "key[0]")


def test_atom_report_names_matched_and_absent_atoms():
    layout = layout_of(["&expr: (dragon AND red) OR NOT \"baby\" AND wyrm"], [])
    assert layout is not None
    _, _, hits = layout.resolve((False, True, False, True, True), ())
    assert layout.atom_report(layout.primary[0], hits) == 'matched: "dragon", "baby", "wyrm"; absent: "red"'


# -- lint (LS110, LS111, and each atom checked as a key) ----------------------------------------

def test_lint_checks_expressions_in_every_profile_and_their_atoms_as_keys():
    from lorescan.formats import book_from_entries
    from lorescan.lint import lint_book

    def found(key, **fields):
        book = book_from_entries("lx", [{"uid": 0, "key": [key], "content": "c", **fields}])
        return [(f.code, f.field) for f in lint_book(book)]
    assert found("&expr: a AND (b") == [("LS110", "key[0]")]
    assert found("&expr: NOT a") == [("LS111", "key[0]")]
    assert found("&expr: castle AND gate") == []                  # no LS108 for the spaces of the expression
    assert found("&expr: castle AND /(/") == [("LS110", "key[0]")]
    # each atom gets the key checks: whole words and punctuation (LS104), a multi-word atom (LS108)
    assert found("&expr: -sama AND \"iron gate\"", matchWholeWords=True) == [("LS104", "key[0]"),
                                                                             ("LS108", "key[0]")]
    assert found('&expr: "/x(/" AND y') == []                     # a quoted /x(/ is text, not a bad regex
