"""The stage modules of SillyTavern mode: their exported names and code sets, and the stage
helpers that used to call back into the engine (timed-effect evaluation, the group list)."""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

import lorescan
import lorescan.st as st
from lorescan.app.conformance import iter_cases
from lorescan.formats.sillytavern import read_world
from lorescan.js.text import js_count_words
from lorescan.formats import book_from_entries
from lorescan.st.groups import PendingList
from lorescan.st.timed import EffectRecord, TimedEffects, TimedEntry, evaluate

CONFORMANCE = sorted((Path(__file__).parent.parent / "conformance" / "st").glob("*.json"))

# what the api change points lorescan's lazy map at (issue 10: "st/__init__.py re-exports every public ST name")
PUBLIC_ST = ["STEngine", "STResult", "Diagnostic", "LoopRecord", "Placement", "DepthGroup", "BookSource",
             "Character", "ChatMessage", "EntryId", "STSettings", "Compat", "TimedEffects", "DiagnosticOutcome", "Reason",
             "LoopState"]


def test_every_public_st_name_is_exported_by_the_st_package():
    assert set(PUBLIC_ST) <= set(st.__all__)
    for name in st.__all__:
        assert getattr(st, name) is not None, name
    assert set(st.__all__) <= set(dir(st))
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(st, "no_such_name")


def test_the_top_level_names_are_the_st_packages_objects():
    for name in ["STEngine", "STResult", "Diagnostic", "BookSource", "Character", "ChatMessage", "EntryId",
                 "STSettings", "Compat"]:
        assert getattr(lorescan, name) is getattr(st, name), name


def test_the_old_name_of_the_diagnostic_outcome_still_resolves_with_a_warning():
    with pytest.warns(DeprecationWarning, match="DiagnosticOutcome"):
        assert st.Outcome is st.DiagnosticOutcome


def _scan_every_vector():
    """(diagnostics, loop records) of every turn of the bundled conformance vectors."""
    for path in CONFORMANCE:
        for case in iter_cases(str(path)):
            books = [st.BookSource(read_world(b["data"], source=str(path), name=b["name"], fill_defaults=False),
                                   tuple(b["roles"])) for b in case["books"]]
            rng = float(case.get("rng_constant", 0.5))
            engine = st.STEngine(books, st.STSettings.from_mapping(case.get("settings") or {}),
                                 count_tokens=js_count_words, random=lambda rng=rng: rng)
            state = None
            for turn in case["turns"]:
                msgs = [st.ChatMessage(m["name"], m["mes"]) for m in turn["messages"]]
                result = engine.scan(msgs, max_context=case["max_context"], timed_effects=state,
                                     trigger=turn.get("trigger", "normal"), dry_run=bool(turn.get("dry_run")))
                state = result.timed_effects
                yield result.diagnostics, result.loops


def test_every_outcome_reason_and_loop_state_the_engine_reports_is_in_its_literal_alias():
    outcomes, reasons, states = set(typing.get_args(st.DiagnosticOutcome)), set(typing.get_args(st.Reason)), \
        set(typing.get_args(st.LoopState))
    seen_reasons: set[str] = set()
    seen_outcomes: set[str] = set()
    for diagnostics, loops in _scan_every_vector():
        for d in diagnostics.values():
            assert d.outcome in outcomes, d
            assert d.reason in reasons, d
            seen_reasons.add(d.reason)
            seen_outcomes.add(d.outcome)
        for record in loops:
            assert record.state in states and record.next in states, record
    assert seen_outcomes == outcomes
    # the vectors exercise most gates; the rest are covered by tests/st/test_scan_diagnostics.py
    assert {"constant", "key", "no_key_match", "group", "budget", "secondary_keys"} <= seen_reasons


def test_positions_follow_sillytaverns_numbering_and_name_table():
    assert [int(p) for p in st.Position] == list(range(8))
    assert st.POSITION_NAMES[st.Position.AT_DEPTH] == "at_depth"
    assert st.POSITION_NAMES[0] == "before" and st.POSITION_NAMES[7] == "outlet"
    assert [int(v) for v in st.SelectiveLogic] == [0, 1, 2, 3]


def test_the_engines_tables_are_one_frozen_value():
    book = book_from_entries("Lore", [{"uid": 1, "key": ["a"], "content": "A"}])
    engine = st.STEngine([st.BookSource(book, ("global",))], count_tokens=js_count_words)
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine.tables.settings = st.STSettings()  # type: ignore[misc]
    first = engine.tables.entries[0]
    assert engine.tables.entries[0] is first and engine.tables.by_key["Lore.1"] is first


def test_evaluation_reads_a_fingerprint_map_and_starts_the_cooldown_of_an_ended_sticky_effect():
    state = TimedEffects(sticky={"Old.9": EffectRecord(111, 2, 5)},
                         cooldown={"Lore.2": EffectRecord(222, 3, 9)})
    entries = {111: TimedEntry("Lore.1", sticky=3, cooldown=2), 222: TimedEntry("Lore.2", sticky=None, cooldown=6)}
    active = evaluate(state, 5, entries)
    # the sticky record ended at 5: gone, and the entry's own key starts a protected cooldown
    assert state.sticky == {}
    assert state.cooldown["Lore.1"] == EffectRecord(111, 5, 7, True)
    assert active.cooldown == {"Lore.1", "Lore.2"} and active.sticky == set()


def test_evaluation_drops_a_record_whose_entry_has_no_such_effect_and_keeps_an_unknown_one_until_its_end():
    state = TimedEffects(sticky={"Lore.3": EffectRecord(333, 1, 9), "Gone.4": EffectRecord(444, 1, 9)})
    active = evaluate(state, 4, {333: TimedEntry("Lore.3", sticky=None, cooldown=None)})
    assert list(state.sticky) == ["Gone.4"]
    assert active.sticky == set()


def test_removing_a_missing_item_removes_the_last_one_only_under_sillytaverns_quirk():
    quirky = PendingList(["a", "b", "c"], quirk=True)
    assert quirky.remove("b") == "b"
    assert quirky.remove("b") == "c"          # splice(indexOf(x) = -1, 1)
    assert quirky.items == ["a"]
    fixed = PendingList(["a", "b"], quirk=False)
    assert fixed.remove("z") is None and fixed.items == ["a", "b"]


def _key_engine(sources):
    return st.STEngine(sources, count_tokens=js_count_words)


def test_a_key_is_found_without_the_key_table_where_the_table_would_find_it():
    # "Lore.x.5" names both Lore's uid "x.5" and Lore.x's uid 5
    lore = book_from_entries("Lore", [{"uid": u, "key": ["k"], "content": "c"}
                                      for u in (1, "2", "x.5", 7, 3, -4)])
    other = book_from_entries("Lore.x", [{"uid": 5, "key": ["k"], "content": "c"}])
    keys = [f"{w}.{u}" for w, us in (("Lore", (1, 2, "x.5", 7, 3, -4)), ("Lore.x", (5,))) for u in us]
    misses = ["Lore.9", "Lore.", "Lore", "Nope.1", "Lore.01", "Lore.+1", "Lore.-0", "Lore.x.", "Lore.1 ", ".1"]
    sources = [st.BookSource(lore, ("global",)), st.BookSource(other, ("character",))]
    reference = _key_engine(sources).tables.by_key
    expected = {k: reference._table().get(k) for k in keys + misses}
    assert all(expected[k] is not None for k in keys) and all(expected[k] is None for k in misses)
    for k in keys + misses:
        fresh = _key_engine(sources).tables.by_key
        assert fresh.position(k) == expected[k], k
        assert fresh._index is None, f"{k}: the key table was built"
    # a key two entries have: the later global position, as the table keeps
    entries = list(_key_engine(sources).tables.entries)
    at = [g for g, info in enumerate(entries) if info.world_uid == "Lore.x.5"]
    assert len(at) == 2 and expected["Lore.x.5"] == max(at)


def test_a_repeated_uid_or_a_book_in_two_roles_falls_back_to_the_key_table():
    twice = book_from_entries("Twice", [{"uid": 1, "key": ["k"], "content": "c"}])
    sources = [st.BookSource(twice, ("global", "character"))]
    reference = _key_engine(sources).tables.by_key
    fresh = _key_engine(sources).tables.by_key
    assert fresh.position("Twice.1") == reference._table()["Twice.1"]
    assert fresh.position("Twice.2") is None
