"""The literal prefilter of regex keys (issue 8): ``required_literals`` and its use in scans.

A regex key gets a set of literals one of which every match contains (alternations included,
case-folded under ``i`` as JS ``i`` folds); a text or window holding none of them is skipped
without a regex search. Soundness is checked against V8 (the fixture in tests/data/jsregex/)
and, with hypothesis, against the plain search on generated alternation keys and texts.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lorescan.js.regex import (JSRegexError, RegexTimeout, _case_classes, _literal_char, leading_literals,
                               required_literals, tool_regex)
from lorescan.js.regex import _compile_regex_key as compile_regex_key   # regex_key's compile of a split pattern
from lorescan.match.cache import ChatScan
from lorescan.match.compile import SKIP
from lorescan.st.compiled import compile_book
from lorescan.match.view import JOINER, MARKER, Window
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields
from tests.support.reference_matcher import ReferenceScanView

DATA = json.loads((Path(__file__).parent.parent / "data" / "jsregex" / "v8_cases.json").read_text("utf-8"))


def _seen(text: str, flags: str) -> str:
    """The text the book's automaton matches a literal of this regex against."""
    return text.lower() if "i" in flags else text


def _holds_a_literal(lits: tuple[str, ...], text: str, flags: str) -> bool:
    seen = _seen(text, flags)
    return any(lit in seen for lit in lits)


@pytest.mark.parametrize("pattern, flags, want", [
    ("Kalor.?s (room|house)", "i", ("s house", "s room")),        # longest shortest literal wins
    ("Willow.?s (?:room|dorm)", "", ("Willow",)),
    ("a|b", "", ("a", "b")),                                       # a top-level alternation: a set
    ("ab?cd", "", ("abcd", "acd")),
    ("\\x41bc", "", ("bc",)),                                      # the escape is one (unknown) character
    ("\\bKasha(s|'s)?\\b", "i", ("kasha",)),
    ("\\p{L}xyz", "u", ("xyz",)),
    ("\\k<n>(?<n>q)zz", "", ("qzz",)),
    ("Mass", "iu", ("mass", "masſ", "maſs", "maſſ")),             # U+017F folds to s under iu
    ("bo+b", "i", ("bo",)),                                        # a repeated atom ends or starts a run
    ("(?:ab)+c", "", ("abc",)),
    ("\\b(?:Brena|Tholl)(?:'s)? (?:room|house)\\b", "i",
     ("brena house", "brena room", "brena's house", "brena's room",
      "tholl house", "tholl room", "tholl's house", "tholl's room")),
    ("\\b(?:drako|vel)s?\\b", "i", ("drako", "vel")),
    ("東京|東都", "", ("東京", "東都")),
    ("ΣΑ", "i", ("ςα", "σα")),                                    # Final_Sigma: both lowercase sigmas
    ("огонь", "", ("огонь",)),
    ("^$", "", None), ("x*", "", None), ("a?", "", None), (".", "", None), ("\\w+", "", None),
    ("a\\nb", "", ("a",)),                                          # a literal never holds "\n"
    ("😀x", "", ("x",)), ("\\ud83d", "", None),                   # nor an astral char or a surrogate
    ("(?=abc)", "", None), ("(?<=ab)c", "", ("c",)),              # lookarounds require nothing
    ("\\k<a|b>xyz", "", ("<a", "b>xyz")),                         # no named group: \k is "k"; | splits
])
def test_required_literals_of_hand_picked_keys(pattern, flags, want):
    compile_regex_key(pattern, flags)               # a valid key
    assert required_literals(pattern, flags) == want


def test_a_long_alternation_gives_no_set_past_the_cap():
    pattern = "|".join(f"w{i:02d}" for i in range(40))
    assert required_literals(pattern, "") is None
    assert len(required_literals("|".join(f"w{i:02d}" for i in range(32)), "")) == 32


@pytest.mark.parametrize("unicode_mode", [False, True])
def test_the_ascii_shortcut_agrees_with_the_case_tables(unicode_mode):
    members = _case_classes(unicode_mode)[0]
    for cp in range(128):
        if chr(cp) in "\n\x01":
            continue                     # never in a literal
        want = frozenset(chr(m).lower() for m in members.get(cp, (cp,)))
        assert _literal_char(chr(cp), True, unicode_mode) == want, chr(cp)


def _v8_cases():
    for case in DATA["cases"]:
        if case["throws"] or "v" in case["flags"]:
            continue
        try:
            compile_regex_key(case["pattern"], case["flags"], max_expansion=None)   # every valid V8 case
        except JSRegexError:
            continue
        yield case["pattern"], case["flags"], case["texts"] + DATA["common_texts"], case["results"]
    for key in DATA["keys"]:
        if key["parsed"] is not None:
            yield key["parsed"][0], key["parsed"][1], key["texts"], key["results"]


V8 = list(_v8_cases())
V8_WITH_LITERALS = [c for c in V8 if required_literals(c[0], c[1]) is not None]


def test_the_v8_fixture_exercises_the_prefilter():
    assert len(V8_WITH_LITERALS) > 200
    assert sum("|" in c[0] for c in V8_WITH_LITERALS) >= 15
    assert sum("i" in c[1] for c in V8_WITH_LITERALS) > 50


@pytest.mark.parametrize("pattern, flags, texts, results", V8_WITH_LITERALS,
                         ids=[f"/{c[0]}/{c[1]}" for c in V8_WITH_LITERALS])
def test_every_text_v8_matches_holds_a_required_literal(pattern, flags, texts, results):
    lits = required_literals(pattern, flags)
    missed = [t for t, hit in zip(texts, results) if hit and not _holds_a_literal(lits, t, flags)]
    assert not missed, f"/{pattern}/{flags} matches {missed!r} in V8, none holds one of {lits!r}"


# -- generated alternation keys --------------------------------------------------------------
# Characters where JS i and Python's lowercase part ways, Cyrillic (with U+1C82, which JS i
# equates with о), CJK, astral and lone surrogates, and the joiner's characters.
CHARS = ["a", "b", "s", "S", "k", "K", "ſ", "\u212a", "ß", "i", "I", "İ", "ı", "é", "É", "σ", "ς", "Σ", "о", "О",
         "\u1c82", "ж", "Ж", "東", "京", "😀", "'", " ", "-"]
TEXT_CHARS = CHARS + ["\n", "\x01", "\ud83d", "\ude00", "\u2028", "x"]
WORD = st.text(alphabet=st.sampled_from(CHARS), min_size=1, max_size=4).map(
    lambda w: "".join("\\" + c if c in "^$\\.*+?()[]{}|/-" else c for c in w))


def _atoms(word):
    return st.one_of(
        word,
        st.lists(word, min_size=2, max_size=3).map(lambda ws: "(?:" + "|".join(ws) + ")"),
        st.lists(word, min_size=2, max_size=3).map(lambda ws: "(" + "|".join(ws) + ")"),
        word.map(lambda w: f"(?:{w})?"), word.map(lambda w: f"(?:{w})+"), word.map(lambda w: f"(?:{w}){{2}}"),
        st.sampled_from(["\\b", "\\B", ".", "\\w", "\\s", "s?", "[sk]", "[а-е]", "[^a]", "^", "$", "(?=a)",
                         "(?<!b)", "\\1", "x*", "\\u0041", "\\x4b"]),
    )


ALTERNATIVE = st.lists(_atoms(WORD), min_size=1, max_size=4).map("".join)
PATTERN = st.lists(ALTERNATIVE, min_size=1, max_size=3).map("|".join)
FLAGS = st.sampled_from(["", "i", "u", "iu", "im", "is", "iy"])
TEXT = st.text(alphabet=st.sampled_from(TEXT_CHARS), max_size=10)


def _search(pattern: str, flags: str, text: str) -> bool:
    try:
        return compile_regex_key(pattern, flags).search(text, timeout=1.0)
    except RegexTimeout:
        assume(False)
        raise


@settings(max_examples=1500, deadline=None)
@given(pattern=PATTERN, flags=FLAGS, texts=st.lists(TEXT, min_size=1, max_size=3), data=st.data())
def test_a_window_without_a_literal_has_no_match(pattern, flags, texts, data):
    try:
        compile_regex_key(pattern, flags)
    except JSRegexError:
        assume(False)
    lits = required_literals(pattern, flags)
    assume(lits is not None)
    if data.draw(st.booleans()):                 # half the time, plant a literal (mostly still no match)
        lit = data.draw(st.sampled_from(lits))
        texts = texts[:-1] + [texts[-1] + lit]
    for text in texts:                           # per text, as regexscope tests a line-local key
        if not _holds_a_literal(lits, text, flags):
            assert not _search(pattern, flags, MARKER + text), (text, lits)
    if not any(_holds_a_literal(lits, t, flags) for t in texts):     # the joined haystack
        assert not _search(pattern, flags, MARKER + JOINER.join(texts)), (texts, lits)


def _book(keys: list[str]) -> Lorebook:
    return Lorebook(name="b", entries=tuple(
        entry_from_fields({"uid": i, "key": [k], "content": f"content {i}"}, source="test")
        for i, k in enumerate(keys)))


@settings(max_examples=300, deadline=None)
@given(patterns=st.lists(st.tuples(PATTERN, FLAGS), min_size=1, max_size=4),
       messages=st.lists(TEXT, min_size=1, max_size=5), depth=st.integers(1, 5))
def test_scans_with_the_prefilter_equal_the_reference_matcher(patterns, messages, depth):
    keys = [f"/{p}/{f}" for p, f in patterns]
    keys = [k for k in keys if tool_regex(k) is not None]
    assume(keys)
    compiled = compile_book(_book(keys))
    cache = ChatScan()
    for joined in (True, False):
        view = book_view(compiled, messages, cache=cache, joined=joined, regex_timeout=1.0)
        ref = ReferenceScanView(compiled, messages, joined=joined, regex_timeout=1.0)
        for i in range(len(keys)):
            got, want = view.match_entry(i, Window(depth)), ref.match_entry(i, Window(depth))
            assume(not got.timed_out and not want.timed_out)
            assert got == want, (keys[i], joined)


def test_the_prefilter_feeds_the_candidate_lists():
    book = _book(["/\\b(?:Brena|Tholl)s?\\b/i", "/東京|東都/", "/.*/"])
    compiled = compile_book(book)
    assert compiled.keys.always == (2,)                  # only the key without literals is always looked at
    lits = compiled.keys.regex_lits
    assert type(lits[0]) is tuple and len(lits[0]) == 2 and lits[2] == SKIP
    specs = {compiled.keys.specs[v] for v in lits[0]}
    assert specs == {("brena", False, False), ("tholl", False, False)}
    assert 0 in compiled.keys.vid_entries[lits[0][0]] and 0 in compiled.keys.vid_entries[lits[0][1]]
    view = book_view(compiled, ["THOLLS went east", "nobody here"])
    assert list(view.candidates(2, 0)) == [0, 2]
    assert view.match_entry(0, Window(2)).primary == 0
    assert view.match_entry(1, Window(2)).primary is None


# -- letters whose JS case class is not their two ASCII cases -------------------------------
# RE2 reads a class of exactly an ASCII letter's two cases ([Ss], which /s/i lowers to) as a
# case-folded literal and, merging it with its neighbours (S|x, Sa|Sk), adds the letter's
# Unicode fold orbit: /(?:I|S)/i matched U+017F, which V8 does not (without u, Canonicalize
# leaves a non-ASCII character that uppercases to ASCII alone), and whose text lowercased
# holds neither "i" nor "s": the prefilter skipped a key the regex said matched.
_BY_KEY = {(c["pattern"], c["flags"]): c for c in DATA["cases"]}
SPECIAL = ["s", "S", "k", "K", "i", "I", "\u017f", "\u212a", "\u0130", "\u0131", "\u00df", "\u1e9e", "\u03a9", "\u2126",
           "\u00b5", "\u03bc", "\u03c3", "\u03c2", "\u03a3", "\u1c82"]
MERGED = ["(?:I|S)", "S|I", "[Ss]|x", "[Kk]|[Ss]", "(?:k|s)+", "Sa|Sk", "(?:a|b)(?:S|K)", "(?<!q)(?:S|x)", "(?:S|x)(?=)"]


def _v8_case(pattern: str, flags: str) -> tuple[list[str], list[bool]]:
    case = _BY_KEY[(pattern, flags)]                # recorded by generate.mjs
    assert not case["throws"]
    return case["texts"] + DATA["common_texts"], case["results"]


@pytest.mark.parametrize("flags", ["", "i", "u", "iu"])
@pytest.mark.parametrize("pattern", [f"(?:{c}|x)" for c in SPECIAL] + [f"[{c}]|x" for c in SPECIAL] + MERGED)
def test_a_letter_with_a_wide_case_class_matches_as_v8_and_holds_a_literal(pattern, flags):
    texts, results = _v8_case(pattern, flags)
    lits = required_literals(pattern, flags)
    assert lits is not None
    rx = compile_regex_key(pattern, flags)
    wrong = [(t, hit) for t, hit in zip(texts, results) if rx.search(t, timeout=1.0) != hit]
    assert not wrong, f"/{pattern}/{flags}: V8 disagrees on (text, V8 result) {wrong!r}"
    missed = [t for t, hit in zip(texts, results) if hit and not _holds_a_literal(lits, t, flags)]
    assert not missed, f"/{pattern}/{flags} matches {missed!r} in V8, none holds one of {lits!r}"


def test_the_special_letters_reach_both_the_linear_and_the_backtracking_path():
    paths = {compile_regex_key(p, f).plan.re2 is None for p in MERGED for f in ("i", "iu")}
    assert paths == {False, True}
    assert _v8_case("(?:I|S)", "i")[1][_v8_case("(?:I|S)", "i")[0].index("\u017f")] is False
    assert _v8_case("(?:I|S)", "iu")[1][_v8_case("(?:I|S)", "iu")[0].index("\u017f")] is True


@pytest.mark.parametrize("unicode_mode", [False, True])
@pytest.mark.parametrize("letter", [chr(c) for c in range(0x41, 0x5B)])
@pytest.mark.parametrize("shape", ["(?:{}|x)", "{}|[xy]", "{}a|{}b", "[{}]", "(?:{})+"])
def test_an_ascii_letter_matches_its_case_class_and_nothing_more(letter, unicode_mode, shape):
    flags = "iu" if unicode_mode else "i"
    pattern = shape.format(letter, letter)
    cls = {chr(m) for m in _case_classes(unicode_mode)[0].get(ord(letter), (ord(letter),))} | {letter, letter.lower()}
    near = {chr(cp) for cp in range(0x80, 0x2200) if {chr(cp).lower(), chr(cp).upper(), chr(cp).casefold()} & {
        letter, letter.lower()}} | cls | {"\u017f", "\u212a", "\u0130", "\u0131"}
    rx = compile_regex_key(pattern, flags)
    tail = "b" if "b" in shape else "a" if "a" in shape else ""
    got = {ch for ch in near if rx.search(MARKER + ch + tail, timeout=1.0)}
    assert got == cls, (pattern, flags)
    lits = required_literals(pattern, flags)
    assert lits is not None and all(_holds_a_literal(lits, ch + tail, flags) for ch in got)


@pytest.mark.parametrize("joined", [True, False])
def test_a_scan_fires_the_keys_v8_matches_on_the_special_letters(joined):
    keys = [(p, f) for p in ["(?:I|S)", "Sa|Sk", "(?:K|x)", "[Ss]|x", "(?:\u0131|x)", "(?:\u03a3|x)"]
            for f in ("", "i", "iu")]
    compiled = compile_book(_book([f"/{p}/{f}" for p, f in keys]))
    assert all(type(compiled.keys.regex_lits[i]) is tuple for i in range(len(keys)))   # all prefiltered
    for text in ["\u017f", "\u212a", "s\u212a", "\u017fk", "\u0130", "\u0131", "\u03c2", "\u00b5"]:
        view = book_view(compiled, [text], joined=joined, regex_timeout=1.0)
        ref = ReferenceScanView(compiled, [text], joined=joined, regex_timeout=1.0)
        for i, (p, f) in enumerate(keys):
            v8 = _BY_KEY.get((p, f))
            got = view.match_entry(i, Window(1))
            assert got == ref.match_entry(i, Window(1)), (p, f, text)
            if v8 is not None and text in v8["texts"] + DATA["common_texts"]:
                texts = v8["texts"] + DATA["common_texts"]
                assert (got.primary is not None) == v8["results"][texts.index(text)], (p, f, text)


# -- matching at the leading literals --------------------------------------------------------
@pytest.mark.parametrize("pattern, flags, want", [
    ("\\b(?:drako|vel)s?\\b", "i", ("drako", "vel")),            # "drakos" begins with "drako": dropped
    ("\\bKasha(s|'s)?\\b", "i", ("kasha",)),
    ("Kalor.?s (room|house)", "i", ("kalor",)),
    ("(?<=a)bc", "", ("bc",)),                                     # lookarounds take no characters
    ("x+y", "", ("x",)), ("(?:ab)+c", "", ("ab",)), ("東京|東都", "", ("東京", "東都")),
    ("a|.b", "", None), ("\\x41bc", "", None), ("^$", "", None),
    ("abc", "y", None),                                            # sticky: only index 0 is tried
])
def test_leading_literals_of_hand_picked_keys(pattern, flags, want):
    compile_regex_key(pattern, flags)
    assert leading_literals(pattern, flags) == want


def _plain_search(pattern: str, flags: str, text: str) -> bool:
    """The regex searched over the whole text, never at literal positions only."""
    rx = compile_regex_key(pattern, flags)
    object.__setattr__(rx, "_lead", None)
    try:
        return rx.search(text, timeout=1.0)
    except RegexTimeout:
        assume(False)
        raise


def test_the_v8_fixture_exercises_matching_at_leading_literals():
    # test_jsregex.py checks every V8 case through JSRegex.search, which takes this path
    led = [c for c in V8 if leading_literals(c[0], c[1]) is not None]
    assert len(led) > 150 and sum("i" in c[1] for c in led) > 40


@settings(max_examples=1500, deadline=None)
@given(pattern=PATTERN, flags=FLAGS, texts=st.lists(TEXT, min_size=1, max_size=3), data=st.data())
def test_matching_at_leading_literals_equals_searching_the_text(pattern, flags, texts, data):
    try:
        compile_regex_key(pattern, flags)
    except JSRegexError:
        assume(False)
    lead = leading_literals(pattern, flags)
    assume(lead is not None)
    if data.draw(st.booleans()):
        texts = texts[:-1] + [texts[-1] + data.draw(st.sampled_from(lead)) + data.draw(TEXT)]
    for text in [MARKER + t for t in texts] + [MARKER + JOINER.join(texts)]:
        assert _search(pattern, flags, text) == _plain_search(pattern, flags, text), (text, lead)


# -- the shipped case tables -------------------------------------------------------------------
def test_the_shipped_case_tables_are_the_computed_ones_for_this_unicode_version():
    import unicodedata

    from lorescan.js import _casetables
    from lorescan.js.regex import compute_case_classes
    if _casetables.UNIDATA_VERSION != unicodedata.unidata_version:
        # another Python: the tables are computed, never read from the file
        _case_classes.cache_clear()
        assert _case_classes(False)[1] == compute_case_classes(False)
        return
    assert _casetables.classes(_casetables.LEGACY) == compute_case_classes(False)
    assert _casetables.classes(_casetables.UNICODE) == compute_case_classes(True)
    _case_classes.cache_clear()
    assert _case_classes(True)[1] == compute_case_classes(True)


def test_the_case_table_generator_rewrites_the_shipped_file_unchanged_and_lives_outside_it():
    import ast
    import unicodedata

    from lorescan.js import _casetables, _casetables_gen
    source = _casetables_gen.TABLES.read_text("utf-8")
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)} | \
        {a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__"}          # data only: the tables import nothing back
    if _casetables.UNIDATA_VERSION != unicodedata.unidata_version:
        pytest.skip(f"the tables are for Unicode {_casetables.UNIDATA_VERSION}, this Python has "
                    f"{unicodedata.unidata_version}")
    assert _casetables_gen.render(source) == source
