"""Regex keys: per-text evaluation (regexscope), compiled regexes in the book, limits, the
scan-wide regex time budget and its cut-off reports."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lorescan import BookSource, ChatMessage, ChatScan, STEngine, STSettings, load_compiled, save_compiled
from lorescan.st.compiled import compile_book
from lorescan.errors import RegexKeyError
from lorescan.match.lsc import CompiledFormError
from lorescan.js.regex import REGEX_MAX_EXPANSION, JSRegex, JSRegexError, RegexTimeout, RegexTooComplex
from lorescan.js.regex import _compile_regex_key as compile_regex_key   # regex_key's compile of a split pattern
from lorescan.limits import DEFAULT_LIMITS
from lorescan.match.view import JOINER, MARKER, Window
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields
from lorescan.match.regexscope import RegexBudget, regex_hazard
from lorescan.js.text import js_count_words

from tests.support.slot_helpers import chat as slot_chat
from tests.support.slot_helpers import engine as slot_engine
from tests.support.slot_helpers import st_book

DATA = json.loads((Path(__file__).parent.parent / "data" / "jsregex" / "v8_cases.json").read_text("utf-8"))
SRC = Path(__file__).resolve().parents[2] / "src"


def _compiles(case: dict) -> JSRegex | None:
    if case["throws"] or "v" in case["flags"]:
        return None
    try:
        return compile_regex_key(case["pattern"], case["flags"])
    except (JSRegexError, RegexTooComplex):     # not a key the engine accepts (a{99999999999})
        return None


V8_REGEXES = [rx for rx in map(_compiles, DATA["cases"]) if rx is not None]
LINE_LOCAL = [rx for rx in V8_REGEXES if rx.line_local]
# Shapes real books use, and some that sit on the edges of the analysis.
HANDPICKED = [("\\bcat\\b", "i"), ("Willow.?s room", ""), ("^foo", "m"), ("bar$", "m"), ("(?<=\\x01)foo", ""),
              ("\\x01", ""), ("\\B", ""), ("(?<![a-z])x", ""), ("(?!\\w)", ""), ("^$", "m"), ("\\b", "u"),
              ("(a)\\1", "i"), ("[\\u0001-\\u0009]+", ""), (".", ""), ("x*", ""), ("(?=\\W)", ""),
              ("огонь|東京", "i"), ("\\p{L}+", "u"), ("\\ud83d", ""), ("(?<=^|\\s)cat", "m")]


def _joined(texts: list[str]) -> str:
    return MARKER + JOINER.join(texts)


def _search(rx: JSRegex, text: str) -> bool:
    try:
        return rx.search(text, timeout=1.0)
    except RegexTimeout:
        assume(False)
        raise


EDGE_TEXT = st.text(alphabet=st.sampled_from(["\n", "\x01", " ", "a", "b", "Z", "_", "1", "-", "é", "ж", "東",
                                              "\ud83d", "\ude00", "😀", "\r", "\u2028", "x", "c", "t"]), max_size=8)


def test_the_analysis_accepts_common_keys_and_rejects_what_can_see_past_a_text():
    local = {p: compile_regex_key(p, f).line_local for p, f in
             [("\\bcat\\b", "i"), ("Willow.?s room", ""), ("^foo", "m"), ("(?<=x)y", ""), ("a.b", "")]}
    assert all(local.values()), local
    spanning = [("a\\sb", ""), ("[^a]", ""), ("\\W", ""), ("a.b", "s"), ("^foo", ""), ("foo$", ""),
                ("[\\s\\S]", ""), ("\\n", ""), ("(?<!\\n)x", ""), ("x", "y"), ("\\D", ""), ("\\x0a", "")]
    assert not [pf for pf in spanning if compile_regex_key(*pf).line_local]
    assert len(LINE_LOCAL) > 100          # the differential below checks a real share of the fixture


@pytest.mark.parametrize("rx", LINE_LOCAL + [compile_regex_key(*pf) for pf in HANDPICKED if
                                             compile_regex_key(*pf).line_local], ids=repr)
def test_per_text_answers_equal_the_joined_haystack_on_v8_texts(rx):
    texts = [c for c in DATA["common_texts"]][:12] + ["", "\x01", "a\nb", " x "]
    for k in range(len(texts)):
        window = texts[k:k + 3]
        assert _search(rx, _joined(window)) == any(_search(rx, MARKER + t) for t in window), window


@settings(max_examples=400, deadline=None)
@given(rx=st.sampled_from(LINE_LOCAL + [compile_regex_key(*pf) for pf in HANDPICKED]),
       texts=st.lists(EDGE_TEXT, min_size=1, max_size=4))
def test_per_text_answers_equal_the_joined_haystack_on_edge_texts(rx, texts):
    assume(rx.line_local)
    assert _search(rx, _joined(texts)) == any(_search(rx, MARKER + t) for t in texts)


def _book(*keys: str, name: str = "b") -> Lorebook:
    return Lorebook(name=name, entries=tuple(
        entry_from_fields({"uid": i, "key": [k], "content": f"content {i}"}, source="test") for i, k in enumerate(keys)))


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.sampled_from(["/\\bcat\\b/i", "/^foo/m", "/bar$/m", "/\\x01t/", "/(?!\\w)/", "/t\\b/",
                                      "/^x/", "/a\\sb/", "/c.t/s", "/[^ab]x/", "/\\Bé/u", "/東/"]),
                     min_size=1, max_size=5, unique=True),
       messages=st.lists(EDGE_TEXT, min_size=1, max_size=5), depth=st.integers(1, 6))
def test_scan_view_with_a_cache_equals_searching_the_joined_haystack(keys, messages, depth):
    compiled = compile_book(_book(*keys))
    cache = ChatScan()
    for _ in range(2):                   # the second pass answers from the cache
        view = book_view(compiled, messages, cache=cache)
        window = Window(depth)
        hay = view.haystack(window)
        for i, plan in enumerate(compiled.keys.plans):
            rx = plan.primary[0][1].rx
            assert (view.match_entry(i, window).primary == 0) == _search(rx, hay), (rx, hay)


def test_compiled_books_hold_their_regexes_and_scans_never_translate():
    book = _book("/\\bcat\\b/i", "/do+g/", "/a\\sb/")
    engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=5))
    assert all(isinstance(rx, JSRegex) for rx in engine.compiled[0].keys.regexes)
    assert len(engine.compiled[0].keys.regexes) == 3
    with mock.patch("lorescan.js.regex.compiled.emit", side_effect=AssertionError("translated on the hot path")), \
            mock.patch("lorescan.js.regex.compiled._compile_js_regex", side_effect=AssertionError("global cache used")):
        result = engine.scan([ChatMessage("u", "the Cat and the dooog"), ChatMessage("u", "a b")], max_context=9000)
    assert sorted(e.uid for e in result.activated) == [0, 1, 2]


def test_class_translations_are_shared_between_patterns_only_under_the_same_flags():
    # the memo of translated classes is keyed by flags and negation: each order gives the same answers
    # (pattern, flags, text, matches, line-local: the class cannot match "\n")
    cases = [("[k]", "", "K", False, True), ("[k]", "i", "K", True, True), ("[k]", "iu", "\u212a", True, True),
             ("[k]", "i", "\u212a", False, True), ("[^k]", "i", "K", False, False), ("[^k]", "", "K", True, False),
             ("[\\s\\S]", "", "\n", True, False), ("[^\\s\\S]", "", "\n", False, True)]
    for order in (cases, cases[::-1]):
        for pattern, flags, text, want, local in order:
            rx = compile_regex_key(pattern, flags)
            assert (rx.search(text), rx.line_local) == (want, local), (pattern, flags, text)


def test_regex_keys_are_compiled_by_regex_on_their_first_search_only():
    # translation (and every check) happens when the book is compiled; regex.compile, the
    # larger cost, waits for a search, so keys whose literals never occur never pay it
    book = _book("/\\bdrag(?:on|oon)s?\\b/i", "/never(?:seen|met)/")
    with mock.patch("lorescan.js.regex.regex.compile", side_effect=AssertionError("compiled early")):
        engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=5))
    with mock.patch("lorescan.js.regex.compiled.emit", side_effect=AssertionError("translated on the hot path")):
        result = engine.scan([ChatMessage("u", "Two DRAGONS flew")], max_context=9000)
    assert [e.uid for e in result.activated] == [0]
    dragon, never = engine.compiled[0].keys.regexes
    assert dragon._compiled is not None and never._compiled is None     # only the searched one
    assert pickle.loads(pickle.dumps(never)).search("\x01neverseen")


def test_regex_keys_past_the_limits_are_refused_with_the_entry_and_field():
    deep = "/" + "(" * 200 + "a" + ")" * 200 + "/"
    with pytest.raises(RegexKeyError, match="max_regex_nesting") as info:
        compile_book(Lorebook(name="b", source="deep.json", entries=(
            entry_from_fields({"uid": 7, "key": ["x", deep], "content": ""}, source="test"),)))
    assert (info.value.source, info.value.entry, info.value.field) == ("deep.json", 7, "key[1]")
    huge = "/" + "ab|" * 183_000 + "c/"             # 550 KB
    started = time.process_time()
    with pytest.raises(RegexKeyError, match="max_regex_length"):
        STEngine([BookSource(_book(huge), ("global",))])
    assert time.process_time() - started < 5         # refused before it is translated
    with pytest.raises(RegexKeyError, match="keysecondary"):
        compile_book(Lorebook(name="b", entries=(entry_from_fields(
            {"uid": 1, "key": ["x"], "keysecondary": [deep], "content": ""}, source="test"),)))


def test_raised_limits_give_a_clear_error_instead_of_a_recursion_error():
    deep = "/" + "(" * 400 + "a" + ")" * 400 + "/"
    limits = replace(DEFAULT_LIMITS, max_regex_nesting=1000)
    try:
        compiled = compile_book(_book(deep), limits=limits)
    except RegexKeyError as exc:
        assert "nested" in str(exc)
    else:
        assert compiled.keys.regexes[0].search("\x01a")


@pytest.mark.parametrize("pattern, flags, terms", [
    ("cat", "", 3),                          # one term per atom
    ("a{3}", "", 3),                         # a counted atom is built once per repetition of its minimum
    ("a{0,1000000000}b", "", 2),             # an upper bound costs nothing
    ("a{2,}", "", 2),
    ("(?:ab){1000}", "", 3000),              # the group and its two atoms, a thousand times
    ("(?:(?:a){10}){10}", "", 210),          # nested counts multiply: (1 + (1 + 1) x 10) x 10
    ("(a)\\1{4}", "", 6),
    ("\\u{10FFFF}{2}", "u", 2),            # a u-mode code point escape is one atom, not a count
    ("x|y{5}", "", 6),                       # alternatives add up
])
def test_the_terms_a_pattern_builds_multiply_counted_repeats_by_their_minimum(pattern, flags, terms):
    assert compile_regex_key(pattern, flags).expansion == terms


def test_counted_repeats_past_the_expansion_limit_are_refused_before_compiling(tmp_path):
    with mock.patch("lorescan.js.regex.regex.compile", side_effect=AssertionError("compiled")):
        with pytest.raises(RegexTooComplex, match="1,000,000,000 terms.*max_regex_expansion=1,000,000") as info:
            compile_regex_key("a{1000000000}", "")
    assert info.value.expansion == 1_000_000_000
    assert DEFAULT_LIMITS.max_regex_expansion == REGEX_MAX_EXPANSION     # one default, in two layers
    # the book's regexes share one allowance; each key's error names it
    limits = replace(DEFAULT_LIMITS, max_regex_expansion=100)
    with pytest.raises(RegexKeyError, match="40 terms; with the 80 of the book's other regex keys") as err:
        compile_book(_book("/a{40}/", "/b{40}/", "/c{40}/"), limits=limits)
    assert (err.value.entry, err.value.field) == (2, "key[0]")
    assert len(compile_book(_book("/a{40}/", "/a{40}/", "/b{40}/"), limits=limits).keys.regexes) == 2   # one copy each
    # a raised limit admits the key, and the compiled book keeps it through pickle and .lsc
    raised = replace(DEFAULT_LIMITS, max_regex_expansion=2_000_000)
    compiled = compile_book(_book("/z{1500000}/"), limits=raised)
    save_compiled(compiled, tmp_path / "z.lsc")
    for restored in (pickle.loads(pickle.dumps(compiled)), load_compiled(tmp_path / "z.lsc", limits=raised)):
        assert restored.keys.regexes[0].expansion == 1_500_000
        # no wall-clock limit: what is tested is the kept expansion, not the machine's speed
        assert restored.keys.regexes[0].search("\x01" + "z" * 1_500_000, timeout=None)
    # the file's statement of that expansion is held to the limits it is loaded under
    with pytest.raises(CompiledFormError, match="max_regex_expansion=1,000,000"):
        load_compiled(tmp_path / "z.lsc")


def test_catastrophic_shapes_are_flagged_at_compile_time():
    assert regex_hazard("(a+)+$", "") is not None
    assert regex_hazard("(\\w+\\s?)*x", "") is not None
    assert regex_hazard("(a|aa)+b", "") is not None
    assert regex_hazard("\\bcat\\b", "i") is None
    assert regex_hazard("Willow.?s room", "") is None
    assert regex_hazard("(x|y)+", "") is None
    compiled = compile_book(_book("/(a+)+$/", "/fine/"))
    assert [(i, raw) for i, raw, _ in compiled.keys.regex_hazards] == [(0, "/(a+)+$/")]


# -- the time budget --------------------------------------------------------------------------

EVIL = compile_regex_key("(a|aa)+c", "")                # exponential when backtracked; linear on RE2
# Needs backtracking (a lookahead) and has a polynomial bound: (n+1)**5 ways-and-starts for n characters.
SLOW = compile_regex_key("a*a*a*a*\\d(?=c)", "")
# Needs backtracking and has no bound at all: never run, always reported as cut off.
UNBOUNDED = compile_regex_key("(a|aa)+(?=c)", "")


def test_keys_run_on_the_linear_engine_unless_they_need_backtracking():
    assert EVIL.plan.re2 is not None and EVIL.search("a" * 100_000 + "b", timeout=None) is False
    assert SLOW.plan.re2 is None and "lookaround" in SLOW.plan.reason and SLOW.plan.nodes[1] == 4
    assert UNBOUNDED.plan.nodes is None and UNBOUNDED.cost("aac") == float("inf")
    assert compile_regex_key("(\\w+)\\s\\1", "").plan.reason == "a backreference"
    assert compile_regex_key("\\bdragons?\\b", "i").plan.re2 is not None     # ASCII \b is RE2's own


def test_a_cut_off_evaluation_is_none_decided_before_it_runs_and_costs_nothing():
    budget = RegexBudget(0.05)
    assert SLOW.cost("a" * 60) > 0.05 > SLOW.cost("aa1c")
    assert budget.search(SLOW, "a" * 60) is None and budget.left == 0.05
    assert budget.search(SLOW, "aa1c") is True and budget.left == 0.05 - SLOW.cost("aa1c")
    assert "was cut off after" in budget.describe("/a*a*a*a*\\d(?=c)/", SLOW)
    assert RegexBudget(SLOW.cost("aa1c") / 2).search(SLOW, "aa1c") is None      # not enough left
    tiny = RegexBudget(1.0)
    assert tiny.search(UNBOUNDED, "aac") is None and "no bound on its work" in tiny.describe("/x/", UNBOUNDED)
    assert RegexBudget(1.0).search(compile_regex_key("a", ""), "a") is True


def test_whether_a_key_is_cut_off_is_a_pure_function_of_pattern_and_text():
    # No clock enters the decision: with every clock the budget could read made to jump by
    # an hour per call (a machine slowed down without limit), answers and cut-offs are the same.
    texts = ["a" * n + "1c" for n in (2, 8, 30, 60)] + ["b" * 5000 + "aac"]
    keys = [SLOW, UNBOUNDED, EVIL, compile_regex_key("a+1(?=c)", "")]

    def run() -> list:
        out = []
        for rx in keys:
            budget = RegexBudget(0.05, 0.02)
            out.append([budget.search(rx, t) for t in texts] + [sorted(budget.cut), budget.left])
        return out
    idle = run()
    ticks = iter(range(10**9))
    jump = lambda: 3600.0 * next(ticks)        # noqa: E731
    with mock.patch("time.thread_time", jump), mock.patch("time.monotonic", jump), \
            mock.patch("time.perf_counter", jump), mock.patch("time.process_time", jump):
        slowed = run()
    assert slowed == idle
    assert idle[0][0] is True and None in idle[0][:5] and idle[1][:5] == [None] * 5   # some ran, some cut
    assert idle[2][:5] == [False, False, False, False, True] and idle[3][:4] == [True] * 4


def test_a_cut_off_key_is_reported_and_never_cached_as_a_non_match():
    # Keys are tested text by text, every key of the book on each new text in book order:
    # /plain/ runs first, then /a*a*a*a*\d(?=c)/ (backtracking: its bound on a 70-character
    # text is far above the scan's allowance) is cut off before it runs.
    engine = STEngine([BookSource(_book("/plain/", "/a*a*a*a*\\d(?=c)/"), ("global",))], STSettings(scan_depth=5),
                      count_tokens=js_count_words, limits=replace(DEFAULT_LIMITS, regex_time_per_scan=0.05))
    cache = ChatScan()
    chat = [ChatMessage("u", "a" * 60 + " plain c")]
    result = engine.scan(chat, max_context=9000, cache=cache)
    assert [e.uid for e in result.activated] == [0]
    assert result.regex_cutoffs and "'/a*a*a*a*\\\\d(?=c)/' was cut off after" in result.regex_cutoffs[0]
    assert "was cut off after" in result.explain("b", 1).detail
    view = book_view(engine.compiled[0], [m.text for m in chat], cache=cache)
    assert cache.lookup_regex(view._regex_token, "u: " + "a" * 60 + " plain c") is None
    # With time enough, the same cache gives the real answer (no stale "no match").
    relaxed = STEngine([BookSource(engine.compiled[0], ("global",))], STSettings(scan_depth=5),
                       count_tokens=js_count_words)
    assert relaxed.scan([ChatMessage("u", "a1c")], max_context=9000, cache=cache).regex_cutoffs == ()


def test_slot_mode_reports_cut_offs_in_the_log_and_the_result():
    book = st_book("b", [{"uid": 0, "key": ["/a*a*a*a*\\d(?=c)/"], "content": "evil"}])   # see above
    eng = slot_engine(book, limits=replace(DEFAULT_LIMITS, regex_time_per_scan=0.05))
    result = eng.run(slot_chat("hello", "a" * 60 + " c"), turn_id="t")
    assert result.regex_cutoffs and "was cut off after" in result.regex_cutoffs[0]
    assert "was cut off after" in result.log[0].reason


def _calibrated_slow_text(rx: JSRegex) -> str:
    """A text on which ``rx`` needs some 50-150 ms of CPU alone and then matches (at the final y)."""
    n = 14
    while True:
        text = "a" * n + "by"
        t0 = time.thread_time()
        rx.search(text, timeout=None)
        spent = time.thread_time() - t0
        if spent >= 0.05 or n > 40:
            return text
        n += 1


def test_sixteen_threads_give_the_single_thread_answer_for_a_slow_key():
    rx = compile_regex_key("(?:a|aa)+c|y", "")
    text = _calibrated_slow_text(rx)
    engine = STEngine([BookSource(_book("/(?:a|aa)+c|y/"), ("global",))], STSettings(scan_depth=5),
                      count_tokens=js_count_words)
    chat = [ChatMessage("u", text)]
    alone = engine.scan(chat, max_context=9000)
    assert [e.uid for e in alone.activated] == [0] and alone.regex_cutoffs == ()
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: engine.scan(chat, max_context=9000), range(48)))
    assert [r.to_json() for r in results] == [alone.to_json()] * 48
    assert all(r.regex_cutoffs == () for r in results)


def test_sixteen_threads_give_the_single_thread_answer_for_keys_that_backtrack():
    # Backtracking keys with a bound (quadratic, cubic) and without: some evaluations run,
    # some are over their allowance and cut off. (/\w+(?=ing)/ really is quadratic in `regex`:
    # 0.2 s on 1,000 characters, 3 s on 4,000.)
    book = _book("/\\w+(?=ing)/", "/a*a*\\d(?=y)/", "/(a|aa)+(?=z)/")
    engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=5), count_tokens=js_count_words)
    chat = [ChatMessage("u", "a" * 300 + " sing"), ChatMessage("u", "a" * 1500 + "1y"), ChatMessage("u", "a1y")]
    alone = engine.scan(chat, max_context=9000)
    assert alone.activated and alone.regex_cutoffs
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: engine.scan(chat, max_context=9000), range(48)))
    assert [(r.to_json(), r.regex_cutoffs) for r in results] == [(alone.to_json(), alone.regex_cutoffs)] * 48


def _run_guarded(code: str, cpu_seconds: int) -> str:
    """Run ``code`` in a fresh interpreter under an RLIMIT_CPU guard; return its stdout."""
    prelude = f"import resource; resource.setrlimit(resource.RLIMIT_CPU, ({cpu_seconds}, {cpu_seconds}))\n"
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=cpu_seconds * 20, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_a_catastrophic_st_book_is_cut_within_the_budget():
    out = _run_guarded("""
        import time
        from lorescan import BookSource, ChatMessage, STEngine, STSettings
        from lorescan.model import Lorebook, entry_from_fields
        # Half are tested on the joined haystack ($), half text by text; none can be skipped
        # by its required literal (!c is in every message, right after a failing !b). Those
        # RE2 runs answer in linear time; those that need backtracking ((?=...)) and have no
        # bound are cut off without running.
        keys = [(f"/(a|aa)+(?:{i})?$/" if i % 2 else f"/(a|aa)+(?:{i})?!c/") if i % 4 < 2
                else (f"/(a|aa)+(?:{i})?(?=$)/" if i % 2 else f"/(a|aa)+(?:{i})?(?=!c)/") for i in range(100)]
        book = Lorebook(name="evil", entries=tuple(entry_from_fields(
            {"uid": i, "key": [k], "content": "c"}, source="t") for i, k in enumerate(keys)))
        engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=50),
                          count_tokens=lambda s: len(s) // 4)
        chat = [ChatMessage("u", "a" * 40 + "!b !c") for i in range(50)]
        for turn in range(2):
            t0 = time.process_time()
            result = engine.scan(chat, max_context=9000)
            spent = time.process_time() - t0
            assert spent < 3, spent
            assert len(result.regex_cutoffs) == 50 and all("(?=" in line and "no bound on its work" in line
                                                           for line in result.regex_cutoffs)
            assert result.activated == []
        print("ok")
    """, cpu_seconds=30)
    assert out.strip() == "ok"


def test_a_catastrophic_slot_book_is_cut_within_the_budget():
    out = _run_guarded("""
        import time
        from lorescan.model import Lorebook, entry_from_fields
        from lorescan.slot import SlotEngine
        book = Lorebook(name="evil", entries=tuple(entry_from_fields(
            {"uid": i, "key": [k], "content": "c"}, source="t")
            for i, k in enumerate(["/(a|aa)+$/", "/(a|aa)+!c/", "/(a|aa)+(?=$)/", "/(a|aa)+(?=!c)/"])))
        engine = SlotEngine([book], count_tokens=lambda s: len(s) // 4, regex_keys="auto")
        chat = [("user" if i % 2 else "assistant", "a" * 40 + f"!b !c {i}") for i in range(100)]
        for turn in range(2):
            t0 = time.process_time()
            result = engine.run(chat, turn_id=f"t{turn}")
            spent = time.process_time() - t0
            assert spent < 3, spent
            assert len(result.regex_cutoffs) == 2 and all("(?=" in line and "was cut off after" in line
                                                          for line in result.regex_cutoffs)
        print("ok")
    """, cpu_seconds=30)
    assert out.strip() == "ok"


def test_slot_mode_refuses_a_regex_key_past_the_limits_naming_the_attached_entry():
    deep = "/" + "(" * 200 + "a" + ")" * 200 + "/"
    book = st_book("b", [{"uid": 3, "key": ["x", deep], "content": "c"}])
    with pytest.raises(RegexKeyError, match="max_regex_nesting") as info:
        slot_engine(book)
    assert (info.value.entry, info.value.field) == (3, "keys")
