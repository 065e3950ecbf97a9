"""The diagnostic record: why each entry did or did not fire, consistent with the outputs."""
from __future__ import annotations

import functools

import pytest

from lorescan.formats import book_from_entries
from lorescan.st import BookSource, Character, ChatMessage, STEngine, STSettings
from lorescan.js.text import js_count_words


def make_engine(entries, *, rng=0.5, **settings):
    book = book_from_entries("Lore", [dict(uid=i, **e) for i, e in enumerate(entries)])
    return STEngine([BookSource(book, ("global",))], STSettings(**settings), count_tokens=js_count_words,
                    random=functools.partial(float, rng))   # a constant "random" number, picklable


def scan(engine, *texts, **kw):
    kw.setdefault("max_context", 10_000)
    return engine.scan([ChatMessage("User", t) for t in texts], **kw)


def why(result, uid):
    return result.explain("Lore", uid)


def test_a_key_match_names_the_key_and_the_message():
    r = scan(make_engine([{"key": ["dragon"], "content": "D"}]), "a dragon lands", "hello")
    d = why(r, 0)
    assert (d.outcome, d.reason, d.key, d.loop) == ("activated", "key", "dragon", 1)
    assert d.where == "message 1 (newest = 0)"


def test_an_entry_without_keys_says_so():
    r = scan(make_engine([{"key": [], "content": "x"}]), "anything")
    assert (why(r, 0).outcome, why(r, 0).reason) == ("not_activated", "no_keys")


def test_no_matching_key_is_reported_for_entries_the_fast_path_never_walked():
    r = scan(make_engine([{"key": ["griffin"], "content": "x"}]), "a dragon lands")
    assert why(r, 0).reason == "no_key_match"


@pytest.mark.parametrize("logic,text,expect", [
    (0, "k", "AND ANY"), (1, "k a b", "NOT ALL"), (2, "k a", "NOT ANY"), (3, "k a", "AND ALL")])
def test_a_failed_secondary_logic_is_named(logic, text, expect):
    e = make_engine([{"key": ["k"], "keysecondary": ["a", "b"], "selective": True, "selectiveLogic": logic,
                      "content": "x"}])
    d = why(scan(e, text), 0)
    assert d.reason == "secondary_keys" and d.detail.startswith(expect)


def test_disabled_trigger_and_character_filters_are_reported():
    e = make_engine([
        {"key": ["k"], "content": "x", "disable": True},
        {"key": ["k"], "content": "x", "triggers": ["continue"]},
        {"key": ["k"], "content": "x", "characterFilter": {"isExclude": False, "names": ["bob"], "tags": []}},
        {"key": ["k"], "content": "x", "characterFilter": {"isExclude": True, "names": [], "tags": ["t1"]}},
    ])
    r = scan(e, "k", character=Character("Alice", "alice.png", ("t1",)))
    assert [why(r, i).reason for i in range(4)] == ["disabled", "trigger", "character_filter", "tag_filter"]
    assert r.activated == []


def test_delay_and_cooldown_are_reported():
    e = make_engine([{"key": ["k"], "content": "x", "delay": 5},
                     {"key": ["k"], "content": "y", "cooldown": 3}])
    first = scan(e, "k", "k")
    assert why(first, 0).reason == "delay" and "delay is 5" in why(first, 0).detail
    assert why(first, 1).outcome == "activated"
    second = scan(e, "k", "k", "k", timed_effects=first.timed_effects)
    assert why(second, 1).reason == "cooldown"


def test_a_lost_group_roll_names_the_winner():
    e = make_engine([{"key": ["k"], "content": "a", "group": "g"},
                     {"key": ["k"], "content": "b", "group": "g"}], rng=0.9)
    r = scan(e, "k")
    assert [a.uid for a in r.activated] == [1]
    d = why(r, 0)
    assert d.reason == "group" and "'Lore.1'" in d.detail


def test_a_failed_probability_roll_gives_the_roll():
    r = scan(make_engine([{"key": ["k"], "content": "x", "useProbability": True, "probability": 10}],
                         rng=0.5), "k")
    d = why(r, 0)
    assert d.reason == "probability" and "50" in d.detail and "10" in d.detail


def test_the_budget_cut_gives_tokens_and_budget():
    # budget = 1% of 300 = 3 tokens; the second entry brings the loop text to 4 tokens.
    e = make_engine([{"key": ["k"], "content": "one two", "order": 200},
                     {"key": ["k"], "content": "three four", "order": 100}], budget_percent=1)
    r = scan(e, "k", max_context=300)
    assert [a.uid for a in r.activated] == [0]
    d = why(r, 1)
    assert d.reason == "budget" and "4 tokens" in d.detail and "budget of 3" in d.detail
    assert r.budget_overflowed


def test_dont_activate_beats_constant():
    r = scan(make_engine([{"key": [], "constant": True, "content": "@@dont_activate\nzz"}]), "k")
    assert why(r, 0).reason == "dont_activate" and r.activated == []


def test_recursion_gates_are_reported():
    e = make_engine([{"key": ["a"], "content": "b"},
                     {"key": ["b"], "content": "x", "excludeRecursion": True},
                     {"key": ["zz"], "content": "y", "delayUntilRecursion": 2}], recursive=True)
    r = scan(e, "a")
    assert why(r, 1).reason == "exclude_recursion"
    assert why(r, 2).reason in ("delay_until_recursion", "no_key_match")


def test_constant_sticky_and_decorator_activations_are_named():
    e = make_engine([{"key": [], "constant": True, "content": "c"},
                     {"key": ["s"], "content": "s", "sticky": 3},
                     {"key": [], "content": "@@activate\nd"}])
    first = scan(e, "s")
    assert [why(first, i).reason for i in range(3)] == ["constant", "key", "decorator"]
    second = scan(e, "s", "nothing", timed_effects=first.timed_effects)
    assert why(second, 1).reason == "sticky"


def test_diagnostics_agree_with_the_activated_list_on_every_public_vector():
    from pathlib import Path
    from lorescan.app.conformance import _engine_for, iter_cases
    root = Path(__file__).resolve().parent.parent / "conformance" / "st"
    checked = 0
    for path in sorted(root.glob("*.json")):
        for case in list(iter_cases(str(path)))[:25]:
            engine = _engine_for(case, str(path), {})
            turn = case["turns"][0]
            an = case.get("authors_note")
            r = engine.scan([ChatMessage(m["name"], m["mes"]) for m in turn["messages"]],
                            max_context=case["max_context"], global_scan_data=case["global_scan_data"],
                            trigger=turn["trigger"], dry_run=turn["dry_run"],
                            authors_note=an["content"] if an else None)
            activated = set(r.activated)
            for eid, d in r.diagnostics.items():
                assert (d.outcome == "activated") == (eid in activated), (case["name"], d)
                if d.reason == "budget":
                    assert eid not in activated
            checked += 1
    assert checked > 200


def test_an_engine_survives_pickling_for_worker_processes():
    import pickle
    e = make_engine([{"key": ["dragon"], "content": "D", "sticky": 2}])
    again = pickle.loads(pickle.dumps(e))
    a = scan(e, "a dragon")
    b = scan(again, "a dragon")
    assert a.to_json() == b.to_json()


def test_bad_scan_inputs_are_located_errors():
    from lorescan.errors import LorebookError
    e = make_engine([{"key": ["k"], "content": "x"}])
    with pytest.raises(LorebookError, match="global_scan_data.scenario"):
        scan(e, "k", global_scan_data={"scenario": 5})
    with pytest.raises(LorebookError, match="injects\\[1\\]"):
        scan(e, "k", injects=["ok", None])
    with pytest.raises(LorebookError, match="max_context"):
        scan(e, "k", max_context=-1)
    with pytest.raises(LorebookError, match="entry 1.*'mes'"):
        e.scan([{"name": "a", "mes": "k"}, {"name": "b"}], max_context=100)
