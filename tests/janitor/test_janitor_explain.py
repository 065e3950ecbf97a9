"""explain for the JanitorAI engine: every entry's account agrees with the vectors' traces, and
each reason (keyword and message, gate and term, tag, count, name block, roll, bucket,
APPLY_LIMIT, shifts) is reported where a vector case exercises it."""
from __future__ import annotations

import json

import pytest

from conftest import TESTS_DIR
from lorescan.janitor import JanitorEngine

JANITOR = TESTS_DIR / "conformance" / "janitor"
TURNS = [(p.stem, c, t) for p in sorted(JANITOR.glob("*.json")) for c in json.loads(p.read_text())["cases"]
         for t in c["turns"]]


def _case(name: str, turn: int = 0):
    group = name.split("/")[0]
    case = next(c for c in json.loads((JANITOR / f"{group}.json").read_text())["cases"] if c["name"] == name)
    t = case["turns"][turn]
    result = JanitorEngine(case["book"], **t["settings"]).run(t["context"], random=t["random"])
    return result, {x.index: x for x in result.explanations()}


def test_every_entry_status_agrees_with_the_vector_trace():
    for _, case, turn in TURNS:
        want = turn["expected"]["trace"]
        result = JanitorEngine(case["book"], **turn["settings"]).run(turn["context"], random=turn["random"])
        if turn["expected"]["error"]:
            continue
        status = {x.index: x.status for x in result.explanations()}
        accepted = set(want["direct"]) | set(want["triggered"])
        assert {i for i, s in status.items() if s == "applied"} == set(want["selected"]), case["name"]
        assert {i for i, s in status.items() if s == "post_shift"} == set(want["post_shift"]), case["name"]
        assert {i for i, s in status.items() if s == "cut"} == accepted - set(want["selected"]), case["name"]


def _chat(*messages):
    return {"character": {"name": "Mira"}, "chat": {"last_messages": [{"message": m} for m in messages]}}


def test_a_keyword_hit_names_the_keyword_the_message_and_the_offset():
    engine = JanitorEngine([{"keywords": ["zzz", "ale", "tavern"]}, {"keywords": ["red door"]},
                            {"keywords": ["dri*"]}])
    ex = engine.run(_chat("hello there", "the red", "door opens", "We drink ALE tonight!"), random=[0.1] * 3
                    ).explanations()
    assert ex[0].text.endswith('keyword "ale" in last_messages[3] at 9 of its normalised text')
    assert 'keyword "red door" in last_messages[1] at 4' in ex[1].text and "continues into the next" in ex[1].text
    assert 'keyword "dri*" in last_messages[3] at 3' in ex[2].text


def test_a_keyword_that_can_never_match_says_so():
    ex = JanitorEngine([{"keywords": ["sci-fi", "  "]}]).run(_chat("sci-fi"), random=[]).explanations()
    assert ex[0].reason == "no_keyword" and '"sci-fi" (can never match' in ex[0].text


def test_gates_name_the_gate_and_the_term():
    _, ex = _case("gates/none-requireNone")
    assert ex[0].reason in ("gate_none", "applied")
    stopped = [x for _, c, t in TURNS if c["name"].startswith("gates/none-")
               for x in JanitorEngine(c["book"], **t["settings"]).run(t["context"], random=t["random"]).explanations()
               if x.reason == "gate_none"]
    assert stopped and all('present "crown"' in x.text or 'present "wolf"' in x.text for x in stopped)


def test_name_block_count_and_roll_are_reported():
    _, ex = _case("nameblock/exact-and-case")
    assert ex[0].reason == "name_block" and 'nameBlock "mira"' in ex[0].text
    _, ex = _case("count/bounds-inclusive")
    assert any(x.reason == "count" and "outside minMessages..maxMessages" in x.text for x in ex.values())
    _, ex = _case("probability/many-rolls")
    assert any(x.reason == "roll" and "> probability" in x.text for x in ex.values())


def test_a_backward_chain_and_an_unemitted_tag_are_told_apart():
    _, ex = _case("tags/backward-chain-stops")      # d <- c <- b <- A(keyword): only b fires from A
    assert ex[2].status == "applied"
    assert ex[1].reason == "later_tag" and "later entry" in ex[1].text
    assert ex[0].reason == "no_tag"
    _, ex = _case("tags/basic-trigger")
    assert ex[1].status == "applied" and 'tag "t1" emitted' in ex[1].text
    assert ex[2].reason == "no_tag"


def test_the_fractional_priority_is_the_bucket_and_the_apply_limit_cut_is_said():
    result, ex = _case("priority/fraction-throws")
    assert ex[1].reason == "bucket" and "throws TypeError" in ex[1].text
    assert result.explain().startswith("the script threw TypeError")
    _, ex = _case("priority/apply-limit-default")
    assert any(x.status == "cut" and "APPLY_LIMIT (6)" in x.text for x in ex.values())


def test_shifts_say_why_they_did_or_did_not_apply():
    _, ex = _case("shifts/always-on-shift")
    shifts = {s.shift: s for s in ex[0].shifts}
    assert shifts[0].applied and shifts[0].reason == "applied"
    assert not any(s.applied for k, s in shifts.items() if k)
    _, ex = _case("shifts/filtered-shift-still-triggers")
    assert any(s.reason == "gate_none" and "its triggers emitted" in s.text for s in ex[0].shifts)


def test_explain_one_entry_and_a_bad_index():
    result, _ = _case("tags/basic-trigger")
    assert result.explain(1).splitlines() == [result.explanations(1)[0].text]
    with pytest.raises(IndexError):
        result.explain(99)
