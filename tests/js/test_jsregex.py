"""lorescan.js.regex against V8 (tests/data/jsregex/v8_cases.json, made by generate.mjs)."""
from __future__ import annotations

import json
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan.js.regex import JSRegex, JSRegexError, JSText, RegexTimeout, tool_regex
from lorescan.js.regex import _compile_js_regex as compile_js_regex   # new RegExp(pattern, flags), memoised

DATA = json.loads((Path(__file__).parent.parent / "data" / "jsregex" / "v8_cases.json").read_text("utf-8"))
COMMON = DATA["common_texts"]


def _case_id(case: dict) -> str:
    return f"/{case['pattern']}/{case['flags']}".encode("unicode_escape").decode("ascii")[:60]


@pytest.mark.parametrize("case", DATA["cases"], ids=_case_id)
def test_v8_case_agrees(case):
    if case["throws"] or "v" in case["flags"]:   # 'v' is deliberately unsupported (not a key flag)
        with pytest.raises(JSRegexError):
            compile_js_regex(case["pattern"], case["flags"])
        return
    compiled = compile_js_regex(case["pattern"], case["flags"])
    texts = case["texts"] + COMMON
    got = [compiled.search(t, timeout=2.0) for t in texts]
    wrong = [(t, want) for t, g, want in zip(texts, got, case["results"]) if g != want]
    assert not wrong, f"V8 disagrees on (text, V8 result): {wrong}"


@pytest.mark.parametrize("case", DATA["keys"], ids=lambda c: c["key"].encode("unicode_escape").decode("ascii"))
def test_v8_key_agrees(case):
    rx = tool_regex(case["key"])
    assert ((rx.source, rx.flags) if rx is not None else None) == (tuple(case["parsed"]) if case["parsed"] else None)
    for text, want in zip(case["texts"], case["results"]):
        got = rx.search(text) if rx is not None else case["key"] in text
        assert got == want, text


def test_fixture_is_large_enough():
    assert len(DATA["cases"]) >= 400


def test_escaped_backslash_before_slash_becomes_escaped_slash():
    rx = tool_regex("/a\\\\/b/")
    assert rx is not None and (rx.source, rx.flags) == ("a\\/b", "")
    assert compile_js_regex("a\\/b", "").search("a/b")


@pytest.mark.parametrize("key", ["/a/b/", "/[/", "/x/v", "/x/gg", "//", "/a/Z"])
def test_malformed_keys_are_plain(key):
    assert tool_regex(key) is None


_RUNNABLE = [c for c in DATA["cases"] if not c["throws"] and "v" not in c["flags"]]


@pytest.mark.parametrize("case", _RUNNABLE, ids=_case_id)
def test_v8_case_agrees_on_the_backtracking_path_too(case):
    # search() runs a regex on RE2 when it can (js/linear.py); the translation's own engine must
    # agree with V8 as well, for the regexes and texts that take it.
    compiled = compile_js_regex(case["pattern"], case["flags"])
    texts = case["texts"] + COMMON
    got = [compiled._backtrack(compiled._ready(), JSText(t), 2.0) for t in texts]
    wrong = [(t, want) for t, g, want in zip(texts, got, case["results"]) if g != want]
    assert not wrong, f"V8 disagrees on (text, V8 result): {wrong}"


def test_most_v8_cases_run_on_the_linear_engine():
    # The fixture's cases are built to probe the awkward corners (lookarounds, backreferences,
    # properties, surrogates), so this share is a floor: real keys are mostly plain patterns.
    linear = [c for c in _RUNNABLE if compile_js_regex(c["pattern"], c["flags"]).plan.re2 is not None]
    assert len(linear) >= 0.6 * len(_RUNNABLE), (len(linear), len(_RUNNABLE))
    reasons = {compile_js_regex(c["pattern"], c["flags"]).plan.reason for c in _RUNNABLE} - {None}
    assert all(not r.startswith("RE2 refused") for r in reasons), reasons     # every refusal is foreseen


def test_catastrophic_backtracking_runs_in_linear_time_or_raises_regex_timeout():
    # /(a+)+$/ itself is defused by the regex module's own guards (it returns False at once);
    # these two backtrack exponentially there: RE2 answers them at once, and the backtracking
    # engine still stops at its time limit.
    for pattern in ("(a|a)+$", "(a|aa)+$"):
        rx = compile_js_regex(pattern, "")
        assert rx.search("a" * 100_000 + "b", timeout=None) is False
        with pytest.raises(RegexTimeout):
            rx._backtrack(rx._ready(), JSText("a" * 40 + "b"), 0.05)
        with pytest.raises(RegexTimeout):       # the same shape needing backtracking (a lookahead)
            compile_js_regex(pattern.replace("$", "(?=$)"), "").search("a" * 40 + "b", timeout=0.05)


def test_nested_plus_key_never_hangs():
    try:
        assert compile_js_regex("(a+)+$", "").search("a" * 40 + "b") is False
    except RegexTimeout:
        pass


def test_empty_loop_with_changing_captures_ends_as_timeout_or_v8_result():
    # regex exhausts memory on this one (V8: true); it must surface as RegexTimeout, never MemoryError.
    try:
        assert compile_js_regex("(?:(\\2)(?=(\\w)))+\\w", "y").search("u") is True
    except RegexTimeout:
        pass


def test_compiled_regex_pickles_as_source_and_flags():
    rx = compile_js_regex("(?<n>x)\\k<n>", "i")
    back = pickle.loads(pickle.dumps(rx))
    assert (back.source, back.flags) == ("(?<n>x)\\k<n>", "i")
    assert back.search("xX") and not back.search("xy")


def test_compiled_regex_is_immutable():
    rx = compile_js_regex("a", "")
    with pytest.raises(AttributeError):
        rx.source = "b"  # type: ignore[misc]


def test_compiled_regex_is_cached():
    assert compile_js_regex("cache me", "i") is compile_js_regex("cache me", "i")


def test_threads_agree_with_serial_loop():
    rx = compile_js_regex("\\bdra+gon\\b", "i")
    texts = [f"\x01the DRA{'A' * k}GON{'s' if k % 3 else ''}" for k in range(200)]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(rx.search, texts)) == [rx.search(t) for t in texts]


def test_errors_are_value_errors_with_a_reason():
    with pytest.raises(ValueError, match="Nothing to repeat"):
        compile_js_regex("a**", "")


def test_jsregex_type_is_public():
    assert isinstance(compile_js_regex("a", ""), JSRegex)


@settings(max_examples=1000, deadline=None)
@given(key=st.text(alphabet=st.sampled_from(list("/\\()[]{}?*+|^$.-:<>=!kbBdDwWsSpPuxc0189aA_,gimsuyv😀\n\x01")) | st.characters(),
                   max_size=14).map(lambda s: "/" + s),
       text=st.text(max_size=20))
def test_parse_and_search_never_raise_anything_but_timeout(key, text):
    rx = tool_regex(key)
    if rx is None:
        return
    try:
        rx.search(text, timeout=0.05)
    except RegexTimeout:
        pass


def test_two_public_ways_turn_a_key_into_a_regex_and_the_old_spellings_warn():
    import lorescan.js.regex as jsregex
    made = [name for name in jsregex.__all__ if name.endswith(("_key", "_regex")) and callable(getattr(jsregex, name))]
    assert sorted(made) == ["regex_key", "tool_regex"]
    key = "/dra+gon\\/s/i"
    engine, tool = jsregex.regex_key(key), tool_regex(key)
    assert engine is not None and tool is not None and engine == tool and tool is tool_regex(key)   # memoised
    assert (tool.source, tool.flags) == ("dra+gon/s", "i")
    assert jsregex.regex_key("/a)/") is None and tool_regex("/a)/") is None          # invalid: read as text
    with pytest.raises(JSRegexError):
        jsregex.regex_key("/a)/", invalid="raise")
    assert jsregex.regex_key("/a)b", invalid="raise") is None                          # plain: no error
    old = {"compile_js_regex": (("dra+gon/s", "i"), tool),
           "compile_regex_key": (("dra+gon/s", "i"), engine),
           "split_regex_key": ((key,), ("dra+gon/s", "i")),
           "parse_regex_key": ((key,), ("dra+gon/s", "i"))}
    for name, (args, want) in old.items():
        with pytest.warns(DeprecationWarning, match=f"{name} is deprecated"):
            assert getattr(jsregex, name)(*args) == want
    with pytest.warns(DeprecationWarning):
        assert jsregex.parse_regex_key("/a)/") is None
