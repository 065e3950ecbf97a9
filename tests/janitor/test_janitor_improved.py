"""The improved profile: Unicode letters kept (no-space scripts need no word boundary), terms
normalised like the text, triggers resolved to a fixed point; otherwise the script's rules."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from conftest import TESTS_DIR
from lorescan.errors import LorebookError
from lorescan.janitor import JanitorEngine
from tests.support.janitor_gen import has_backward_chain, random_book


def _chat(*messages, name="Mira"):
    return {"character": {"name": name, "personality": "Base.", "scenario": ""},
            "chat": {"last_messages": [{"message": m} for m in messages]}}


def _both(book, context, **knobs):
    script = JanitorEngine(book, **knobs).run(context, random=lambda: 0.0)
    improved = JanitorEngine(book, profile="improved", **knobs).run(context, random=lambda: 0.0)
    return script, improved


def test_a_russian_book_fires_only_in_the_improved_profile():
    book = [{"keywords": ["Дракон"], "personality": "Дракон спит в горах."},
            {"keywords": ["замк*"], "scenario": "Старый замок."},
            {"keywords": ["рыцарь"], "personality": "never"}]
    script, improved = _both(book, _chat("Я видел дракона? Нет — ДРАКОН!", "Мы идём к замку… к замковой стене"))
    assert script.trace["selected"] == [] and script.personality == "Base."
    assert improved.trace["selected"] == [0, 1]
    assert improved.personality == "Base.\n\nДракон спит в горах." and improved.scenario == "\n\nСтарый замок."


def test_a_french_book_fires_only_in_the_improved_profile():
    book = [{"keywords": ["château"], "personality": "Le château."},
            {"keywords": ["épée"], "requireNone": ["forêt"], "personality": "L'épée."},
            {"keywords": ["forêt noire"], "personality": "La forêt noire."}]
    script, improved = _both(book, _chat("Nous entrons dans le CHÂTEAU.", "Il tire l'épée ; la forêt Noire attend."))
    assert script.trace["selected"] == []
    assert improved.trace["selected"] == [0, 2]              # the gate term is found too
    assert "noire" in improved.trace["haystack"] and "l épée" in improved.trace["haystack"]


def test_a_chinese_book_fires_only_in_the_improved_profile():
    book = [{"keywords": ["龙"], "personality": "龙在山中。"},
            {"keywords": ["长城"], "scenario": "长城。"},
            {"keywords": ["凤凰"], "personality": "never"}]
    script, improved = _both(book, _chat("我看见了一条龙。", "我们在长城上走。"))
    assert script.trace["selected"] == [] and script.trace["haystack"] == "  "
    assert improved.trace["selected"] == [0, 1] and improved.scenario == "\n\n长城。"


def test_keywords_are_normalised_like_the_text():
    book = [{"keywords": ["Sci-Fi"]}, {"keywords": ["rock  'n'  roll"]}, {"keywords": ["dark_mage*"]}]
    script, improved = _both(book, _chat("I love sci fi, rock-n-roll and dark mages."))
    assert script.trace["direct"] == []
    assert improved.trace["direct"] == [0, 1, 2]


def test_triggers_resolve_to_a_fixed_point():
    data = json.loads((TESTS_DIR / "conformance" / "janitor" / "tags.json").read_text())
    case = next(c for c in data["cases"] if c["name"] == "tags/backward-chain-stops")
    turn = case["turns"][0]
    script, improved = _both(case["book"], turn["context"])
    assert script.trace["triggered"] == [2]
    assert improved.trace["triggered"] == [2, 1, 0]
    assert improved.personality.endswith("\n\nA\n\nB\n\nC\n\nD")


def test_a_positive_tag_gate_is_retried_when_its_tag_appears_later():
    book = [{"tag": "go", "andAllTags": ["late"], "personality": "gated"},
            {"keywords": ["bell"], "triggers": ["go"]},
            {"tag": "go", "triggers": ["late"]}]
    script, improved = _both(book, _chat("the bell"))
    assert script.trace["triggered"] == [2] and improved.trace["triggered"] == [2, 0]


def test_an_unknown_profile_is_a_located_error():
    with pytest.raises(LorebookError) as err:
        JanitorEngine([], profile="loose")
    assert err.value.field == "profile"


ASCII_WORDS = ["dark", "dar", "darkness", "ma", "mage", "mages", "12", "a1", "dark12", "the", "x"]
ascii_messages = st.lists(st.one_of(st.sampled_from(ASCII_WORDS), st.sampled_from([" ", ", ", "-", "!", "  ", "\n"])),
                          max_size=12).map("".join)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10**9), n=st.integers(0, 20), chat=st.lists(ascii_messages, min_size=1, max_size=6),
       limit=st.sampled_from([6, 2, 0]))
def test_improved_equals_script_on_ascii_books_without_backward_chains(seed, n, chat, limit):
    rng = random.Random(seed)
    book = random_book(rng, n, suffixes=["", "*", " mage"])     # keywords already in normal form
    if has_backward_chain(book):
        book = [dict(e, triggers=[]) for e in book]
    assert not has_backward_chain(book)
    context = _chat(*chat)
    values = [rng.random() for _ in range(4 * n + 4)]
    script = JanitorEngine(book, apply_limit=limit).run(context, random=list(values)).to_json()
    improved = JanitorEngine(book, apply_limit=limit, profile="improved").run(context, random=list(values)).to_json()
    assert improved == script


UNI_WORDS = ["дракон", "драк", "château", "龙", "长城", "龙王", "mage", "ma", "x1", "épée"]
uni_messages = st.lists(st.one_of(st.sampled_from(UNI_WORDS), st.sampled_from([" ", "，", "-", "。", "'"])),
                        max_size=8).map("".join)
uni_terms = st.one_of(st.lists(st.sampled_from(UNI_WORDS), min_size=1, max_size=2).map(" ".join),
                      st.lists(st.sampled_from(UNI_WORDS), min_size=1, max_size=2).map(lambda w: " ".join(w) + "*"))


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(uni_terms, min_size=1, max_size=8), windows=st.lists(st.lists(uni_messages, max_size=4),
                                                                           min_size=1, max_size=3))
def test_improved_per_message_cache_equals_a_whole_window_scan(terms, windows):
    from lorescan.janitor.entries import TermTable
    from lorescan.janitor.normalise import normalise_improved
    from lorescan.janitor.scan import TermScanner
    table = TermTable("improved")
    for t in terms:
        table.add(t)
    scanner = TermScanner(table.terms, "improved")
    for window in windows:
        parts = [normalise_improved(m) for m in window]
        hay = " " + " ".join(p for p in parts if p) + " "
        assert scanner.scan(parts) == scanner.scan_text(hay)


def _normal_form_terms(entry) -> bool:
    from lorescan.janitor.normalise import normalise_script
    from lorescan.janitor.terms import term_text
    if not isinstance(entry, dict):
        return True
    values = list(entry.get("keywords") or []) if isinstance(entry.get("keywords"), list) else []
    for key in ("requireAny", "andAny", "requireAll", "andAll", "requireNone", "notAny", "notAll", "block", "Block"):
        v = entry.get(key)
        values += v if isinstance(v, list) else [] if v is None else [v]
    req = entry.get("requires")
    if isinstance(req, dict):
        for v in req.values():
            values += v if isinstance(v, list) else [v]
    for v in values:
        t = term_text(v)
        stem = t[:-1] if t.endswith("*") else t
        if stem != normalise_script(stem) or (t.endswith("*") and t != "*" and not stem):
            return False
    shifts = entry.get("Shifts")
    return all(_normal_form_terms(s) for s in shifts) if isinstance(shifts, list) else True


def test_improved_reproduces_the_vectors_on_their_ascii_cases_without_backward_chains():
    checked = 0
    for path in sorted((TESTS_DIR / "conformance" / "janitor").glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            book = case["book"]
            if (not isinstance(book, list) or not json.dumps(case, ensure_ascii=False).isascii()
                    or not all(isinstance(e, dict) for e in book) or has_backward_chain(book)
                    or not all(_normal_form_terms(e) for e in book)):
                continue
            for t in case["turns"]:
                engine = JanitorEngine(book, profile="improved", **t["settings"])
                got = engine.run(t["context"], random=t["random"]).to_json()
                want = t["expected"]
                assert (got["personality"], got["scenario"], got["random_calls"], got["trace"]) == (
                    want["personality"], want["scenario"], want["random_calls"], want["trace"]), case["name"]
                checked += 1
    assert checked >= 200
