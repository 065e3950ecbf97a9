"""lorescan.lint: every check fires on its purpose-built book (tests/data/lint/lsNNN*.json) with
the exact code, entry and field, and nothing fires on the clean book."""
from __future__ import annotations

import io
import json
import re
from argparse import Namespace
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from lorescan import load
from lorescan.formats.load import load_data
from lorescan.js.regex import _compile_regex_key as compile_regex_key   # regex_key's compile of a split pattern
from lorescan.lint.book import NEAR_SCORE, _similar_pairs
from lorescan.lint import CODES, Finding, LintOptions, Severity, lint_book, worst_severity
from lorescan.lint.command import github_line, lint_command, summary
from lorescan.lint.keys import probe_regex
from lorescan.lint.words import (book_vocabulary, common_words, detect_language, hidden_in_vocabulary,
                                 hidden_in_words)
from lorescan.formats import book_from_entries

from conftest import need_shared, shared_files

DATA = Path(__file__).resolve().parent.parent / "data" / "lint"

# book -> the exact (code, entry uid, field) findings it must give, in order
EXPECTED: dict[str, list[tuple[str, int | None, str | None]]] = {
    "clean": [],
    "ls101": [("LS101", 1, "key[1]")],
    "ls102": [("LS102", 1, "key[1]")],
    "ls103": [("LS103", 1, "key[0]")],
    "ls104": [("LS104", 1, "key[0]")],
    "ls105": [("LS105", 1, "key[0]")],
    "ls106": [("LS106", 1, "key[0]")],
    "ls106-kobold": [("LS106", 1, "key[0]")],
    "ls107": [("LS107", 1, "key")],
    "ls108": [("LS108", 1, "key[0]")],
    "ls110": [("LS110", 1, "key[0]")],
    "ls111": [("LS111", 1, "key[0]")],
    "ls201": [("LS201", 1, "key[0]")],
    "ls202": [("LS202", 1, "key[0]")],
    "ls203": [("LS202", 1, "key[0]"), ("LS203", 1, "key[0]")],
    "ls204-kobold": [("LS204", 1, "key[0]")],
    "ls204-card": [("LS204", 1, "key[0]")],
    "ls205": [("LS205", 1, "key[0]")],
    "ls301": [("LS301", 1, "content")],
    "ls302": [("LS302", 0, "content")],
    "ls303": [("LS203", 0, "key[0]"), ("LS203", 1, "key[0]"), ("LS203", 2, "key[0]"), ("LS303", None, None)],
    "ls401": [("LS401", 1, "disable")],
    "ls402": [("LS402", 1, "excludeRecursion")],
    "ls403": [("LS403", 1, "selective")],
    "ls404": [("LS404", 1, "selectiveLogic")],
    "ls405": [("LS405", 1, "probability")],
    "ls406": [("LS406", 1, "groupOverride")],
    "ls501": [("LS501", 1, "content")],
    "ls502": [("LS502", None, None)],
    "ls601": [("LS601", 2, "key[0]")],
    "ls602": [("LS602", 2, "key[0]")],
    "ls701": [("LS701", 0, "key[0]")],
    "ls701-ru": [("LS701", 0, "key[0]")],      # no word list: the book's own words
    # character-sheet prose (short lines, few long words): still English, so 'race' is checked
    # against the English list (it hides in 'trace', 'grace'); weyland's 'race' was missed so
    "ls701-sheets": [("LS701", 1, "key[0]")],
}

# JanitorAI script books (tests/data/lint/janitor/lsNNN.js): the janitor entry's index and own field names
JANITOR_EXPECTED: dict[str, list[tuple[str, int | None, str | None]]] = {
    "clean": [],
    "ls801": [("LS801", 1, "keywords[0]")],
    "ls802": [("LS802", 1, "keywords[0]")],
    "ls803": [("LS803", 1, "keywords[0]")],
    "ls804": [("LS804", 1, "notAny[0]")],
    "ls810": [("LS810", 1, "minMessages")],
    "ls811": [("LS811", 1, "maxMessages")],
    "ls812": [("LS812", 1, "keywords")],
    "ls813": [("LS802", 1, "keywords[0]"), ("LS802", 1, "keywords[1]"), ("LS813", 1, "keywords")],
    "ls820": [("LS820", 1, "priority")],
    "ls830": [("LS830", 1, "triggers[0]")],
    "ls831": [("LS831", 1, "tag")],
    "ls832": [("LS832", 1, "tag")],
    "ls840": [("LS840", 1, "priority")],
    "ls850": [("LS850", 2, "keywords[0]")],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_book_gives_exactly_its_findings(name: str) -> None:
    book = load(DATA / f"{name}.json")
    findings = lint_book(book)
    assert [(f.code, f.entry, f.field) for f in findings] == EXPECTED[name]
    for f in findings:
        assert f.source == str(DATA / f"{name}.json")
        assert f.message and f.suggestion and f.severity == CODES[f.code][0]
        if f.entry is not None:
            assert f.name == f"Entry {f.entry}"


@pytest.mark.parametrize("name", sorted(JANITOR_EXPECTED))
def test_each_janitor_script_book_gives_exactly_its_findings(name: str) -> None:
    path = DATA / "janitor" / f"{name}.js"
    book = load(path)
    assert book.format == "janitor"
    findings = lint_book(book)
    assert [(f.code, f.entry, f.field) for f in findings] == JANITOR_EXPECTED[name]
    for f in findings:
        assert f.source == str(path) and f.message and f.suggestion and f.severity == CODES[f.code][0]
        assert f.name.startswith(f"dynamicLore[{f.entry}]")


def test_every_code_has_a_book_that_triggers_it() -> None:
    covered = {code for found in EXPECTED.values() for code, _, _ in found}
    janitor = {code for found in JANITOR_EXPECTED.values() for code, _, _ in found}
    assert covered | janitor == set(CODES)
    assert janitor == {c for c in CODES if c.startswith("LS8")}
    assert set(EXPECTED) == {p.stem for p in DATA.glob("*.json")}
    assert set(JANITOR_EXPECTED) == {p.stem for p in (DATA / "janitor").glob("*.js")}


def test_janitor_messages_say_what_the_script_does() -> None:
    by_code = {f.code: f for name in JANITOR_EXPECTED for f in lint_book(load(DATA / "janitor" / f"{name}.js"))}
    assert "non-ASCII" in by_code["LS801"].message and "'café'" in by_code["LS801"].message
    assert "throws a TypeError" in by_code["LS820"].message
    assert "later entries (2)" in by_code["LS832"].message
    assert "APPLY_LIMIT lets 2 through" in by_code["LS840"].message
    assert "'lanterm' is nearly 'lantern'" in by_code["LS850"].message


def test_a_janitor_book_gets_only_janitor_checks_and_select_works() -> None:
    book = load(DATA / "janitor" / "ls813.js")
    assert {f.code for f in lint_book(book, LintOptions(select=("LS81",)))} == {"LS813"}
    assert lint_book(book, LintOptions(ignore=("LS8",))) == []
    # the same entries as JSON data read the same
    from lorescan.formats.janitor import janitor_source
    from lorescan.formats import load_data
    again = load_data(janitor_source(book).entries, source="ls813.json")
    assert [(f.code, f.entry, f.field) for f in lint_book(again)] == JANITOR_EXPECTED["ls813"]


def test_a_backward_chain_is_fine_when_a_later_entry_fires_directly() -> None:
    from lorescan.formats import load_data
    book = load_data([{"tag": "crew", "scenario": "Crew."}, {"keywords": ["gull"], "triggers": ["crew"]}])
    assert [f.code for f in lint_book(book)] == []      # the direct pass runs before the trigger pass
    shifted = load_data([{"tag": "crew", "scenario": "Crew."}, {"tag": "x", "triggers": ["crew"]},
                         {"keywords": ["a"], "triggers": ["x"]}])
    assert [(f.code, f.entry) for f in lint_book(shifted)] == [("LS832", 0)]


def test_messages_say_what_sillytavern_does() -> None:
    by_code = {f.code: f for name in ("ls101", "ls104", "ls105", "ls203", "ls301", "ls501", "ls701")
               for f in lint_book(load(DATA / f"{name}.json"))}
    assert "matches every text" in by_code["LS101"].message
    assert "'x-sama'" in by_code["LS104"].message            # where a suffix key fails under whole words
    assert "'東京京'" in by_code["LS105"].message              # matches inside a longer word
    assert "no bound on its work" in by_code["LS203"].message and "never runs it" in by_code["LS203"].message
    assert "1 (Entry 1), 2 (Entry 2)" in by_code["LS301"].message
    assert "2,401 tokens" in by_code["LS501"].message and "2,048" in by_code["LS501"].message
    assert "'self'" in by_code["LS701"].message


def test_a_book_without_a_word_list_is_checked_against_its_own_words() -> None:
    # Russian: 'кот' (cat) fires inside 'который' (which), used 3 times; 'огонька' is a form
    # of 'огонь' (the key plus up to three letters) and is never reported
    book = load(DATA / "ls701-ru.json")
    assert detect_language(e.content for e in book.entries) is None
    (finding,) = lint_book(book)
    assert "'кот'" in finding.message and "который (3x)" in finding.message and "огон" not in finding.message
    assert "LS701" not in {f.code for f in lint_book(book, LintOptions(match_whole_words=True))}
    vocabulary = book_vocabulary(e.content for e in book.entries)
    assert vocabulary.counts["огонька"] == 3 and "огонь" not in vocabulary.counts     # seen once
    assert hidden_in_vocabulary("огонь", vocabulary) == [] and hidden_in_vocabulary("кот", vocabulary) == ["который"]
    # words of scripts written without spaces are phrases, never words of the vocabulary
    assert book_vocabulary(["東京タワー" * 5, "tower " * 5]).words == ("tower",)


def test_settings_change_the_findings() -> None:
    # whole words on globally: the LS701 key no longer hides inside other words
    book = load(DATA / "ls701.json")
    assert lint_book(book, LintOptions(match_whole_words=True)) == []
    # recursion off: no cycle check
    assert lint_book(load(DATA / "ls301.json"), LintOptions(recursive=False)) == []
    # a larger context: the constant fits
    assert lint_book(load(DATA / "ls501.json"), LintOptions(max_context=20_000)) == []
    # a budget cap below the entry: it no longer fits even in a large context
    capped = lint_book(load(DATA / "ls501.json"), LintOptions(max_context=20_000, budget_cap=1000))
    assert [f.code for f in capped] == ["LS501"] and "budget cap of 1,000" in capped[0].message
    # case-sensitive: 'Velmora' and 'velmora' are different keys, only nearly the same
    assert [f.code for f in lint_book(load(DATA / "ls601.json"), LintOptions(case_sensitive=True))] == ["LS602"]


def test_select_and_ignore() -> None:
    book = load(DATA / "ls203.json")
    assert [f.code for f in lint_book(book, LintOptions(select=("LS203",)))] == ["LS203"]
    assert [f.code for f in lint_book(book, LintOptions(ignore=("LS20",)))] == []
    assert [f.code for f in lint_book(book, LintOptions(select=("LS2",), ignore=("LS203",)))] == ["LS202"]


def test_whole_word_rules_follow_sillytavern() -> None:
    book = book_from_entries("b", [
        {"uid": 0, "key": ["Mr.", "café", "_x_", "東京 Tower", "R2-D2"], "content": "", "matchWholeWords": True},
    ])
    got = [(f.code, f.field) for f in lint_book(book, LintOptions(select=("LS1",)))]
    # 'Mr.' ends with punctuation; 'café' ends with a non-ASCII letter (a boundary to SillyTavern);
    # '_x_' is all word characters; a key with a space is a substring test; 'R2-D2' has word ends
    assert got == [("LS104", "key[0]"), ("LS105", "key[1]"), ("LS108", "key[3]")]


def test_macros() -> None:
    book = book_from_entries("b", [
        {"uid": 0, "key": ["{{char}}", "{{ User }}", "{{random::a::b}}", "{{nope}} and {{char}}"], "content": ""},
    ])
    got = [(f.code, f.field) for f in lint_book(book, LintOptions(select=("LS106",)))]
    assert got == [("LS106", "key[3]")]


def test_regex_shapes() -> None:
    book = book_from_entries("b", [
        {"uid": 0, "key": ["/dragon/x", "/a/b/", "/role, /stop", "/ok/i", "/[/"], "content": ""},
    ])
    got = [(f.code, f.field) for f in lint_book(book, LintOptions(select=("LS2",)))]
    # bad flag; unescaped '/'; a list of commands is not a regex; a good regex; '/[/' is regex-shaped
    # but does not compile, so SillyTavern matches it as the text '/[/'
    assert got == [("LS201", "key[0]"), ("LS201", "key[1]"), ("LS201", "key[4]")]


def test_probe_finds_backtracking_and_spares_safe_patterns() -> None:
    assert probe_regex(compile_regex_key("(a+)+(?=b)", ""), 100) is not None      # backtracks, no bound
    assert probe_regex(compile_regex_key("(a+)+b", ""), 100) is None     # the same shape on RE2: linear
    assert probe_regex(compile_regex_key("a*a*(?=b)", ""), 100)[1] == 3001    # cubic: cut past 25 characters
    assert probe_regex(compile_regex_key("(?:dragon|drake)s?", "i"), 100) is None
    # ^ without m only matches at the haystack's start, which is U+0001: the probe cannot make it backtrack
    assert probe_regex(compile_regex_key("^(\\d+)+$", ""), 100) is None


def test_prevent_and_exclude_recursion_break_cycles() -> None:
    entries = [{"uid": 0, "key": ["Velmora"], "content": "Quillon"}, {"uid": 1, "key": ["Quillon"], "content": "Velmora"}]
    assert [f.code for f in lint_book(book_from_entries("b", entries), LintOptions(select=("LS3",)))] == ["LS301"]
    for flag in ("preventRecursion", "excludeRecursion", "disable"):
        changed = [dict(entries[0], **{flag: True}), entries[1]]
        assert lint_book(book_from_entries("b", changed), LintOptions(select=("LS3",))) == [], flag
    # a regex key counts too
    with_regex = [entries[0], dict(entries[1], key=["/quill?on/i"])]
    assert [f.code for f in lint_book(book_from_entries("b", with_regex), LintOptions(select=("LS3",)))] == ["LS301"]


def test_language_detection_and_word_list() -> None:
    words = common_words("en")
    assert len(words) == 4000 and words[0] == "the"
    assert all(re.fullmatch(r"[a-z]{3,14}", w) for w in words)
    assert len(set(words)) == len(words)
    first = (DATA.parent.parent.parent / "src" / "lorescan" / "lint" / "words_en.txt").read_text().split("\n")[0]
    assert "make_words_en.py" in first
    assert detect_language(["The keeper of the light lives in a house by the sea and he has a dog. " * 5]) == "en"
    assert detect_language(["東京は日本の首都です。" * 40]) is None
    assert detect_language(["Der Hund und die Katze sind in dem Haus, aber nicht mit mir. " * 5]) is None
    assert detect_language(["too short"]) is None
    # short function words count ("a", "of", "in", "is"); code-like words do not make English
    assert detect_language(["Orin, Male, Elf ranger. He is loyal to the crown and to his sister. " * 5]) == "en"
    assert detect_language(["public class Foo { return new get(this); } " * 10]) is None
    assert hidden_in_words("art", "en")[:2] == ["part", "start"]
    assert hidden_in_words("dragon", "en") == []          # 'dragons' is a form of the key, not another word


def test_worst_severity_and_summary() -> None:
    f = [Finding("LS102", "m", "s", "x"), Finding("LS103", "m", "s", "x")]
    assert worst_severity(f) == Severity.WARNING and worst_severity([]) is None
    assert summary(f) == "2 findings (0 errors, 1 warning, 1 info)"
    assert summary([]) == "no findings"


def test_github_line_escapes() -> None:
    f = Finding("LS405", "50% of\nrolls", "fix: it, now", "dir/a,b:c.json", 7, "Name", "probability")
    line = github_line(f)
    assert line.startswith("::error file=dir/a%2Cb%3Ac.json,title=LS405 probability 0%3A the entry never fires::")
    assert "\n" not in line and "50%25 of%0Arolls" in line and "Suggestion: fix: it, now" in line
    assert github_line(Finding("LS102", "m", "s", "x")).startswith("::notice ")


def _args(*books: str, **kw) -> Namespace:
    base = dict(format="text", select="", ignore="", case_sensitive=False, whole_words=False, no_recursive=False,
                max_context=8192, budget_percent=25.0, budget_cap=0)
    base.update(kw)
    return Namespace(books=list(books), **base)


def test_command_json_and_exit_status() -> None:
    out, err = io.StringIO(), io.StringIO()
    status = lint_command(_args(str(DATA / "ls203.json"), str(DATA / "clean.json"), format="json"), out, err)
    assert status == 3 and err.getvalue() == ""
    doc = json.loads(out.getvalue())
    assert doc["exit_status"] == 3
    first, clean = doc["books"]
    assert [(f["code"], f["severity"], f["entry"], f["field"]) for f in first["findings"]] == [
        ("LS202", "warning", 1, "key[0]"), ("LS203", "error", 1, "key[0]")]
    assert first["format"] == "sillytavern" and first["entries"] == 2
    assert clean["findings"] == []


def test_lint_command_reads_janitor_scripts() -> None:
    out, err = io.StringIO(), io.StringIO()
    status = lint_command(_args(str(DATA / "janitor" / "ls820.js"), str(DATA / "janitor" / "clean.js"),
                                format="json"), out, err)
    assert status == 3 and err.getvalue() == ""
    first, clean = json.loads(out.getvalue())["books"]
    assert first["format"] == "janitor" and first["entries"] == 3
    assert [(f["code"], f["severity"], f["entry"], f["field"]) for f in first["findings"]] == [
        ("LS820", "error", 1, "priority")]
    assert clean["findings"] == []


@pytest.mark.parametrize("path", shared_files("corpus/books", "*.json"))
def test_corpus_books_lint_without_internal_errors(path) -> None:
    need_shared("corpus/books")
    book = load(path)
    findings = lint_book(book)
    uids = {e.uid for e in book.entries}
    for f in findings:
        assert f.code in CODES and f.source == str(path)
        assert f.entry is None or f.entry in uids
        assert f.message and f.suggestion


def test_a_blank_secondary_key_is_described_as_such() -> None:
    book = book_from_entries("b", [{"uid": 0, "key": ["Velmora"], "keysecondary": [" "], "content": ""}])
    (finding,) = lint_book(book)
    assert (finding.code, finding.field) == ("LS101", "keysecondary[0]")
    assert "secondary condition" in finding.message and "every message" not in finding.message


def test_entries_that_can_fire_without_a_key() -> None:
    book = book_from_entries("b", [
        {"uid": 0, "key": [], "content": "@@activate\nAlways."},
        {"uid": 1, "key": [], "content": "Vectors find it.", "vectorized": True},
        {"uid": 2, "key": [], "content": "Switched off.", "disable": True},
        {"uid": 3, "key": ["  "], "content": "A blank key matches everything."},
        {"uid": 4, "key": [""], "content": "Only an empty key."},
    ])
    assert [(f.code, f.entry) for f in lint_book(book, LintOptions(select=("LS1",)))] == [
        ("LS101", 3), ("LS102", 4), ("LS107", 4)]


def test_the_recursion_checks_regex_budget_is_bounded_by_a_total_whatever_the_book_size():
    # a cycle through a regex key: found under the default budget; with no budget left the
    # edge is missing, and LS303 says which key was not run
    book = book_from_entries("b", [
        {"uid": 0, "key": ["/(?<=the )dragon/"], "content": "The dragon guards the knight."},
        {"uid": 1, "key": ["knight"], "content": "The knight hunts the dragon."},
    ])
    assert [f.code for f in lint_book(book, LintOptions(select=("LS3",)))] == ["LS301"]
    cut = lint_book(book, LintOptions(select=("LS3",), recursion_regex_total_ms=0))
    assert [f.code for f in cut] == ["LS303"] and "/(?<=the )dragon/" in cut[0].message
    from lorescan.lint.book import recursion_budget
    assert recursion_budget(10).seconds == 1.0                  # the floor for a small book
    assert recursion_budget(400).seconds == 8.0                 # 20 ms an entry
    assert recursion_budget(100_000).seconds == 10.0            # no longer 2,000 s: the total
    assert recursion_budget(100_000, total_ms=500).seconds == 0.5


# --- LS602's length banding finds exactly the pairs an all-pairs comparison finds ---------------------------


def _all_pairs(keys: list[str]) -> list[tuple[int, int, int]]:
    from rapidfuzz import fuzz
    out = []
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            score = fuzz.ratio(keys[i], keys[j])
            if score >= NEAR_SCORE:
                out.append((i, j, int(score)))
    return out


_near_keys = st.lists(st.text(alphabet="abcdeé ", min_size=5, max_size=16), min_size=2, max_size=40, unique=True)


@hsettings(max_examples=150, deadline=None)
@given(_near_keys)
def test_near_duplicate_pairs_equal_all_pairs(keys):
    from rapidfuzz import fuzz, process
    found = sorted(_similar_pairs(keys, process, fuzz.ratio))
    assert [(i, j) for i, j, _ in found] == [(i, j) for i, j, _ in _all_pairs(keys)]


def test_near_duplicate_pairs_cross_length_bands():
    # 'abcdefghij' (10) and 'abcdefghijkl' (12) score 90.9: a pair across two length bands
    from rapidfuzz import fuzz, process
    keys = ["abcdefghijkl", "zzzzz", "abcdefghij", "abcdefghik"]
    assert sorted((i, j) for i, j, _ in _similar_pairs(keys, process, fuzz.ratio)) == [(0, 2), (0, 3), (2, 3)]


@pytest.mark.parametrize("name", ["ls810", "ls811", "ls812", "ls813", "ls831", "ls832", "ls840"])
def test_the_janitor_engine_confirms_the_entries_that_never_fire(name: str) -> None:
    from lorescan.formats.janitor import janitor_source
    from lorescan.janitor import JanitorEngine
    book = load(DATA / "janitor" / f"{name}.js")
    (flagged,) = {f.entry for f in lint_book(book) if f.severity >= Severity.WARNING and f.code >= "LS810"}
    src = janitor_source(book)
    words = " ".join(str(t).rstrip("*") for e in src.entries for k, v in e.items() if isinstance(v, list)
                     for t in v if isinstance(t, str))
    engine = JanitorEngine(src.entries, **src.knobs())
    for count in (1, 5, 30):
        chat = [{"message": words}] * count
        run = engine.run({"chat": {"last_messages": chat}, "character": {"name": "Nobody"}}, random=lambda: 0.0)
        assert run.error is None and run.trace["selected"], name          # the rest of the book fires
        assert flagged not in run.trace["selected"] + run.trace["post_shift"], (name, count)


def test_the_janitor_engine_throws_where_ls820_says() -> None:
    from lorescan.formats.janitor import janitor_source
    from lorescan.janitor import JanitorEngine
    src = janitor_source(load(DATA / "janitor" / "ls820.js"))
    run = JanitorEngine(src.entries).run({"chat": {"last_messages": [{"message": "the tide"}]}}, random=lambda: 0.0)
    assert run.error is not None and run.error.name == "TypeError"


def test_findings_past_the_cap_of_a_code_are_counted_in_one_book_wide_finding():
    # The capped report lists the first findings of each code in entry order and counts the
    # rest exactly: compared with the uncapped report of the same book.
    keys = ["dragonking", "dragonkinq", "dragonkimg", "dragonkihg", "dragonkigg", "lantern", "lantern", "lantern"]
    book = load_data({"entries": {str(i): {"uid": i, "key": [k], "content": "c"} for i, k in enumerate(keys)}})
    full = lint_book(book, LintOptions(select=("LS6",), max_findings_per_code=0))
    capped = lint_book(book, LintOptions(select=("LS6",), max_findings_per_code=2))
    for code in ("LS601", "LS602"):
        every = [f for f in full if f.code == code]
        some = [f for f in capped if f.code == code]
        if len(every) <= 2:
            assert some == every
            continue
        assert some[:2] == every[:2] and len(some) == 3
        assert some[2].entry is None and some[2].message.startswith(f"{len(every) - 2:,} more {code} findings")
    assert any(f.code == "LS602" and f.entry is None for f in capped)


# --- LS602's neighbourhood index gives exactly the pairs of the old all-pairs search (lint602) ------------

def _corpus_paths() -> list:
    return shared_files("corpus/books", "*.json") + shared_files("corpus/cards") + shared_files("corpus/other")


def _owners(book, case_sensitive: bool = False) -> dict:
    from lorescan.lint.book import _plain_primary
    owners: dict = {}
    for key, i, k in _plain_primary(book.entries, case_sensitive):
        owners.setdefault(key, []).append((i, k))
    return owners


@pytest.mark.parametrize("path", _corpus_paths(), ids=lambda p: getattr(p, "name", str(p)))
def test_near_duplicates_of_every_corpus_book_equal_the_old_all_pairs_search(path) -> None:
    # Each way forced (cdist over every block; the index over every block) and the chosen mix give
    # the oracle's pairs and scores; the findings, capped or not, equal the old code's, counts included.
    from rapidfuzz import fuzz, process
    from lorescan.lint.book import NEAR_MIN_LENGTH, _near_duplicates
    from tests.support.near_pairs_oracle import pairwise_near_duplicates, pairwise_similar_pairs
    need_shared("corpus")
    if path is None or path.suffix not in (".json", ".png", ".story"):
        pytest.skip("not a book")
    book = load(path)
    for case_sensitive in (False, True):
        owners = _owners(book, case_sensitive)
        keys = [k for k in owners if len(k) >= NEAR_MIN_LENGTH]
        expected = pairwise_similar_pairs(keys)
        for method in ("auto", "pairwise", "index"):
            assert sorted(_similar_pairs(keys, process, fuzz.ratio, method)) == expected, (path.name, method)
        for cap in (0, 1, 3, 200):
            old_more: dict = {}
            new_more: dict = {}
            old = pairwise_near_duplicates(book.entries, owners, cap, old_more)
            assert list(_near_duplicates(book.entries, owners, cap, new_more)) == old and new_more == old_more


def _near_variants(draw_base: str, edits: list) -> list[str]:
    out = [draw_base]
    for kind, pos, ch in edits:
        s = out[pos % len(out)]
        p = pos % (len(s) + 1)
        if kind == 0:
            s = s[:p] + ch + s[p:]
        elif kind == 1 and len(s) > 1:
            s = s[:p] + s[p + 1:]
        else:
            s = s[:p] + ch + s[p + 1:]
        out.append(s)
    return out


_edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.sampled_from("abcé ")), max_size=40)


@hsettings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcdé ", min_size=5, max_size=30), _edits, st.lists(st.text(alphabet="ab", min_size=5,
       max_size=12), max_size=10))
def test_the_neighbourhood_index_equals_all_pairs_on_chains_of_edits(base, edits, extra):
    # keys a few insertions, deletions and substitutions apart (many near pairs across lengths),
    # plus short keys over two letters (dense buckets)
    from rapidfuzz import fuzz, process
    from tests.support.near_pairs_oracle import pairwise_similar_pairs
    keys = [k for k in dict.fromkeys(_near_variants(base, edits) + extra) if len(k) >= 5]
    expected = pairwise_similar_pairs(keys)
    for method in ("auto", "index"):
        assert sorted(_similar_pairs(keys, process, fuzz.ratio, method)) == expected


@hsettings(max_examples=100, deadline=None)
@given(_near_keys)
def test_the_neighbourhood_index_equals_all_pairs_on_random_keys(keys):
    from rapidfuzz import fuzz, process
    from tests.support.near_pairs_oracle import pairwise_similar_pairs
    assert sorted(_similar_pairs(keys, process, fuzz.ratio, "index")) == pairwise_similar_pairs(keys)


def test_the_cost_model_takes_the_index_for_many_numbered_keys_and_cdist_for_a_small_book():
    # the choice is observable through which way is called: a small book stays on cdist, 3,000
    # numbered keys (quadratic for cdist) go through the index, and both give the oracle's pairs
    from rapidfuzz import fuzz, process
    from lorescan.lint import book as lint_book_module
    from tests.support.near_pairs_oracle import pairwise_similar_pairs
    calls: list[int] = []
    real = lint_book_module._index_pairs

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    small = ["dragon", "dragom", "castle", "castel"]
    numbered = [f"entry{i}" for i in range(3000)]
    try:
        lint_book_module._index_pairs = spy
        assert sorted(_similar_pairs(small, process, fuzz.ratio)) == pairwise_similar_pairs(small)
        assert not calls
        assert sorted(_similar_pairs(numbered, process, fuzz.ratio)) == pairwise_similar_pairs(numbered)
        assert calls
    finally:
        lint_book_module._index_pairs = real


def test_an_unknown_near_duplicate_method_is_refused():
    from rapidfuzz import fuzz, process
    with pytest.raises(ValueError, match="method"):
        list(_similar_pairs(["abcde", "abcdf"], process, fuzz.ratio, "quadratic"))
