"""JanitorAI <-> SillyTavern world and CCv3 conversion: what maps, what is reported lost, and
the cross-engine check: the converted book run by lorescan's SillyTavern engine fires the
same entries as the JanitorAI engine on every turn where no reported loss applies."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.formats import convert, load_data
from lorescan.formats._janitor_map import JANITOR_FIELDS, effective_window_depth
from lorescan.formats.janitor import janitor_source
from lorescan.formats.janitor_convert import janitor_to_st
from lorescan.formats.sillytavern import book_from_entries
from lorescan.janitor import JanitorEngine
from lorescan.janitor.normalise import normalise_script
from lorescan.st.result import Character

VECTORS = Path(__file__).parent.parent / "conformance" / "janitor"
# the realistic books, and the feature files whose contexts are ordinary chats
CROSS_FILES = ("books.json", "mixed.json", "keywords.json", "gates.json", "tags.json", "priority.json",
               "shifts.json", "probability.json", "count.json", "nameblock.json", "fields.json", "window.json")
# Losses that change no entry's firing: shift texts apply after their parent; tags and
# triggers matter only on turns with a trigger (those turns are skipped below).
_SELECTION_NEUTRAL = {"Shifts", "tag", "triggers"}


def _cases(name: str) -> list[dict]:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]


def _book(case: dict, settings: dict):
    knobs = {k.upper(): v for k, v in settings.items()}
    return load_data({"dynamicLore": case["book"], **knobs}, source=case["name"])


def _ordinary_chat(context: dict) -> tuple[list[str], str] | None:
    chat = context.get("chat") if isinstance(context, dict) else None
    msgs = chat.get("last_messages") if isinstance(chat, dict) else None
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("message"), str) for m in msgs):
        return None
    name = (context.get("character") or {}).get("name", "")
    return [m["message"] for m in msgs], name if isinstance(name, str) else ""


def _st_fired(st_book, n: int, messages: list[str], name: str, depth: int) -> set[int]:
    engine = STEngine([BookSource(st_book, ("global",))], STSettings(scan_depth=depth, include_names=False),
                      random=lambda: 0.0)
    result = engine.scan([ChatMessage("user", m) for m in messages], max_context=10**6,
                         character=Character(name, avatar=name + ".png"))
    return {e.uid if e.uid < n else e.uid - n for e in result.activated}


def _across_messages(book: list, haystack: str, window: list[str]) -> set[int]:
    """Entries with a phrase the script matches only across two messages (the book-level loss)."""
    pieces = [" " + normalise_script(m) + " " for m in window]
    out = set()
    for i, raw in enumerate(book):
        if not isinstance(raw, dict):
            continue
        terms = [raw.get("keywords")] + [raw.get(g) for g in ("requireAny", "andAny", "requireAll", "andAll",
                                                             "requireNone", "notAny", "notAll", "block")]
        for t in (t for ts in terms if isinstance(ts, list) for t in ts):
            text = str(t).lower().strip().rstrip("*")
            if " " in text and f" {text}" in haystack and not any(f" {text}" in p for p in pieces):
                out.add(i)
    return out


def test_the_sillytavern_side_fires_what_the_janitor_engine_fires_where_no_loss_applies():
    compared = entries_compared = fired = 0
    for file in CROSS_FILES:
        for case in _cases(file):
            if not isinstance(case["book"], list):
                continue
            for turn in case["turns"]:
                chat = _ordinary_chat(turn["context"])
                if chat is None:
                    continue
                book = _book(case, turn["settings"])
                src = janitor_source(book)
                st_book, losses = janitor_to_st(book, src)
                got = JanitorEngine(src.entries, **src.knobs()).run(turn["context"], random=lambda: 0.0)
                trace = got.trace
                if got.error is not None or trace["triggered"] or trace["post_shift"] or (
                        len(trace["direct"]) > trace["apply_limit"]):
                    continue          # a thrown priority, a trigger, or the limit: reported losses apply
                lossy = {x.entry for x in losses if x.field not in _SELECTION_NEUTRAL and x.entry is not None}
                lossy |= _across_messages(case["book"], trace["haystack"], chat[0][-trace["window_depth"]:])
                n = len(case["book"])
                st_fired = _st_fired(st_book, n, *chat, effective_window_depth(src.window_depth))
                keep = set(range(n)) - lossy
                assert st_fired & keep == set(trace["selected"]) & keep, (case["name"], trace["haystack"])
                compared += 1
                entries_compared += len(keep)
                fired += len(set(trace["selected"]) & keep)
    assert compared >= 250 and entries_compared >= 1400 and fired >= 500, (compared, entries_compared, fired)


@pytest.mark.parametrize("text, fires", [
    ("The docks are busy.", True), ("dock-hands shout", True), ("DOCKSIDE", True), ("a dock's edge", True),
    ("dock9 is closed", False), ("undocked", False), ("dock_worker", True), ("the dóck", False),
])
def test_a_stem_wildcard_becomes_a_regex_key_matching_what_the_script_matches(text, fires):
    raw = [{"keywords": ["dock*"], "scenario": "Docks."}]
    context = {"chat": {"last_messages": [{"message": text}]}, "character": {"name": "C"}}
    janitor = JanitorEngine(raw).run(context, random=lambda: 0.0).trace["selected"] == [0]
    st_book, losses = janitor_to_st(load_data(raw), janitor_source(load_data(raw)))
    assert janitor is fires
    assert (_st_fired(st_book, 1, [text], "C", 5) == {0}) is fires and not losses


@pytest.mark.parametrize("text, fires", [
    ("at the gilded gull tonight", True), ("the Gilded-Gull!", True), ("gilded  gull", True),
    ("the gilded gulls", False), ("gilded, gull", True), ("gildedgull", False),
])
def test_a_phrase_becomes_a_regex_key_matching_what_the_script_matches(text, fires):
    raw = [{"keywords": ["gilded gull"], "scenario": "Inn."}]
    context = {"chat": {"last_messages": [{"message": text}]}}
    assert (JanitorEngine(raw).run(context, random=lambda: 0.0).trace["selected"] == [0]) is fires
    st_book, _ = janitor_to_st(load_data(raw), janitor_source(load_data(raw)))
    assert (_st_fired(st_book, 1, [text], "", 5) == {0}) is fires


def test_the_loss_report_names_shifts_triggers_tags_limits_and_max_messages_only_where_they_exist():
    book = [
        {"keywords": ["inn"], "triggers": ["ale"], "scenario": "Inn.", "Shifts": [{"keywords": ["night"]}]},
        {"tag": "ale", "scenario": "Ale."},
        {"keywords": ["road"], "triggers": ["nobody"], "tag": "unused", "maxMessages": 9, "scenario": "Road."},
        {"keywords": ["sea"], "priority": 2.5, "scenario": "Sea."},
        {"keywords": ["sky"], "scenario": "Sky."},
    ]
    _, report = convert(load_data({"dynamicLore": book, "APPLY_LIMIT": 2}), "sillytavern")
    assert {(x.entry, x.field) for x in report} == {
        (0, "triggers"), (0, "Shifts"), (1, "tag"), (2, "maxMessages"), (3, "priority"), (None, "APPLY_LIMIT")}


def test_entries_that_map_exactly_report_nothing():
    book = [{"keywords": ["inn", "old road", "dock*"], "priority": 4, "probability": "50%", "minMessages": 2,
             "requireAny": ["ale"], "personality": "P.", "scenario": "S."},
            {"personality": "Always."}, {"keywords": ["x"], "requireAll": ["a"], "notAny": ["b!"]}]
    data, report = convert(load_data({"dynamicLore": book, "WINDOW_DEPTH": 1}), "sillytavern")
    assert not report
    e = data["entries"]["0"]
    assert e["scanDepth"] == 1
    assert e["delay"] == 2 and e["probability"] == 50 and e["keysecondary"] == ["ale"] and e["selectiveLogic"] == 0
    assert (e["content"], e["position"]) == ("P.", 0)
    assert (data["entries"]["3"]["content"], data["entries"]["3"]["position"]) == ("S.", 1)
    assert data["entries"]["1"]["constant"] is True
    # a never-matching none-of term is left out: only the all-of gate remains
    assert data["entries"]["2"]["keysecondary"] == ["a"] and data["entries"]["2"]["selectiveLogic"] == 3


def test_a_phrase_is_a_book_level_loss_when_the_window_holds_several_messages():
    book = [{"keywords": ["red door"], "scenario": "S."}]
    _, report = convert(load_data(book), "sillytavern")
    assert [(x.entry, x.field) for x in report] == [(None, "keywords")]
    context = {"chat": {"last_messages": [{"message": "we walk red"}, {"message": "door"}]}}
    assert JanitorEngine(book).run(context, random=lambda: 0.0).trace["selected"] == [0]      # across messages
    st_book, _ = janitor_to_st(load_data(book), janitor_source(load_data(book)))
    assert _st_fired(st_book, 1, ["we walk red", "door"], "", 5) == set()
    assert _st_fired(st_book, 1, ["the red\ndoor"], "", 5) == {0}                          # inside one message


def test_two_kinds_of_gate_in_one_entry_are_a_loss():
    _, report = convert(load_data([{"keywords": ["x"], "requireAny": ["a"], "notAny": ["b"]}]), "sillytavern")
    assert [(x.entry, x.field) for x in report] == [(0, "gates")]


def test_priority_buckets_become_orders_that_keep_the_scripts_text_order():
    book = [{"keywords": ["a"], "priority": 1, "scenario": "low"}, {"keywords": ["a"], "priority": 5,
            "scenario": "high"}, {"keywords": ["a"], "scenario": "mid1"}, {"keywords": ["a"], "scenario": "mid2"}]
    context = {"chat": {"last_messages": [{"message": "a"}]}}
    janitor = JanitorEngine(book).run(context, random=lambda: 0.0).scenario
    st_book, _ = janitor_to_st(load_data(book), janitor_source(load_data(book)))
    engine = STEngine([BookSource(st_book, ("global",))], STSettings(scan_depth=5), random=lambda: 0.0)
    placed = engine.scan([ChatMessage("u", "a")], max_context=10**6).placement
    assert janitor == "\n\nhigh\n\nmid1\n\nmid2\n\nlow"
    assert placed.after == "high\nmid1\nmid2\nlow" and placed.before == ""


def test_janitor_to_ccv3_carries_the_same_entries_and_losses():
    case = _cases("books.json")[0]
    book = load_data(case["book"])
    st_data, st_report = convert(book, "sillytavern")
    card, card_report = convert(book, "ccv3")
    assert card["spec"] == "chara_card_v3"
    assert len(card["data"]["character_book"]["entries"]) == len(st_data["entries"])
    janitor_losses = {(x.entry, x.field) for x in st_report}
    assert janitor_losses and janitor_losses <= {(x.entry, x.field) for x in card_report}


def test_sillytavern_to_janitor_maps_keys_gates_text_and_order():
    st_book = book_from_entries("w", [
        {"uid": 0, "key": ["Inn"], "keysecondary": ["ale"], "selective": True, "selectiveLogic": 2,
         "content": "Late.", "position": 1, "order": 200, "matchWholeWords": True, "delay": 3, "probability": 40},
        {"uid": 1, "key": [], "constant": True, "content": "Always.", "position": 0, "order": 100},
        {"uid": 2, "key": ["x"], "content": "Off.", "disable": True}])
    data, report = convert(st_book, "janitor")
    assert data["dynamicLore"] == [
        {"personality": "Always."},
        {"keywords": ["inn"], "requireNone": ["ale"], "scenario": "Late.", "probability": 0.4, "minMessages": 3}]
    assert data["APPLY_LIMIT"] == 0 and data["WINDOW_DEPTH"] == 2
    assert [(x.entry, x.field) for x in report] == [(2, "disable")]


def test_sillytavern_to_janitor_reports_what_the_script_cannot_do():
    st_book = book_from_entries("w", [
        {"uid": 0, "key": ["inn"], "content": "Mentions the tavern.", "sticky": 2},
        {"uid": 1, "key": ["/ta.ern/i", "tavern"], "content": "T.", "position": 4, "matchWholeWords": True},
        {"uid": 2, "key": ["sir.", "ok"], "content": "K.", "group": "g", "matchWholeWords": True,
         "characterFilter": {"isExclude": False, "names": ["Bob"], "tags": []}}])
    _, report = convert(st_book, "janitor")
    assert {(x.entry, x.field) for x in report} == {
        (0, "matchWholeWords"), (0, "sticky"), (1, "key[0]"), (1, "position"), (2, "key[0]"), (2, "group"),
        (2, "characterFilter"), (None, "recursion")}


def test_a_janitor_book_converted_to_sillytavern_and_back_keeps_what_maps():
    book = [{"keywords": ["inn", "old road", "dock*"], "requireAny": ["ale"], "scenario": "S.", "minMessages": 2},
            {"personality": "Always."}]
    st_data, _ = convert(load_data(book), "sillytavern")
    back, report = convert(load_data(st_data), "janitor")
    assert back["dynamicLore"] == [
        {"keywords": ["inn", "old road", "dock*"], "requireAny": ["ale"], "scenario": "S.", "minMessages": 2},
        {"personality": "Always."}]
    assert back["WINDOW_DEPTH"] == 5
    assert not [x for x in report if x.entry is not None]


def test_a_field_the_script_does_not_read_is_reported_when_converting():
    _, report = convert(load_data([{"keywords": ["inn"], "scenario": "S.", "note": "mine"}]), "sillytavern")
    assert [(x.entry, x.field) for x in report] == [(0, "note")]


def test_lorescan_convert_reads_a_script_and_writes_the_data_slot_back(tmp_path, capsys):
    from lorescan.formats import main_convert
    from lorescan.formats.janitor import read_script
    script = tmp_path / "bot.js"
    script.write_text("var APPLY_LIMIT = 3;\nconst dynamicLore = [{keywords: ['inn'], scenario: 'The inn.',},];\n")
    assert main_convert([str(script), str(tmp_path / "world.json"), "--to", "st"]) == 0
    assert "janitor -> sillytavern" in capsys.readouterr().out
    world = json.loads((tmp_path / "world.json").read_text())
    assert world["entries"]["0"]["key"] == ["inn"]
    assert main_convert([str(tmp_path / "world.json"), str(tmp_path / "back.js")]) == 0
    back = read_script((tmp_path / "back.js").read_bytes(), source="back.js")
    assert janitor_source(back).entries == [{"keywords": ["inn"], "scenario": "The inn."}]


def test_the_engine_is_built_from_a_read_book_with_its_knobs():
    from lorescan.errors import LorebookError
    book = load_data({"dynamicLore": [{"keywords": ["a"], "scenario": "A."}, {"keywords": ["a"], "scenario": "B."}],
                      "APPLY_LIMIT": 1})
    context = {"chat": {"last_messages": [{"message": "a"}]}}
    assert JanitorEngine.from_book(book).run(context, random=lambda: 0.0).scenario == "\n\nA."
    assert JanitorEngine.from_book(book, apply_limit=2).run(context, random=lambda: 0.0).scenario == "\n\nA.\n\nB."
    with pytest.raises(LorebookError, match="janitor_source"):
        JanitorEngine.from_book(book_from_entries("w", []))


def test_a_sillytavern_book_converted_to_janitor_fires_the_same_entries_where_no_loss_applies():
    synthetic = Path(__file__).parent.parent / "data" / "synthetic"
    source = load_data(json.loads((synthetic / "harbor-watch.json").read_text(encoding="utf-8")))
    # whole-word keys (SillyTavern's substring default is a reported loss for every keyed entry)
    st_book = book_from_entries("hw", [{**dict(e.fields), "matchWholeWords": True} for e in source.entries])
    data, report = convert(st_book, "janitor")
    lossy = {x.entry for x in report if x.entry is not None}
    assert {x.field for x in report if x.entry is None} == {"recursion"}    # the ST side runs without it here
    visit = [e.uid for e in st_book.entries]
    kept = sorted((e for e in st_book.entries if not e.disable), key=lambda e: (e.order, -visit.index(e.uid)))
    uid_of = [e.uid for e in kept]                 # janitor index -> SillyTavern uid
    chat = [m["mes"] for m in map(json.loads, (synthetic / "harbor-watch-chat.jsonl").read_text(
        encoding="utf-8").splitlines()) if "mes" in m and not m.get("is_system")]
    st_engine = STEngine([BookSource(st_book, ("global",))], STSettings(scan_depth=data["WINDOW_DEPTH"]),
                         random=lambda: 0.0)
    janitor = JanitorEngine(data["dynamicLore"], apply_limit=data["APPLY_LIMIT"], window_depth=data["WINDOW_DEPTH"])
    fired = 0
    for n in range(1, 60):
        st_fired = {e.uid for e in st_engine.scan([ChatMessage("u", m) for m in chat[:n]], max_context=10**6).activated}
        run = janitor.run({"chat": {"last_messages": [{"message": m} for m in chat[:n]]}}, random=lambda: 0.0)
        janitor_fired = {uid_of[i] for i in run.trace["selected"]}
        assert st_fired - lossy == janitor_fired - lossy, n
        fired += len(janitor_fired - lossy)
    assert len(st_book.entries) - len(lossy) >= 10 and fired >= 50, fired


def test_a_ccv3_card_converts_to_janitor_like_its_sillytavern_world():
    st_book = book_from_entries("w", [
        {"uid": 0, "key": ["Inn"], "keysecondary": ["ale"], "selective": True, "selectiveLogic": 3,
         "content": "Late.", "position": 1, "order": 200, "matchWholeWords": True},
        {"uid": 1, "key": ["harbor"], "content": "Early.", "position": 0, "order": 100, "matchWholeWords": True}])
    card, _ = convert(st_book, "ccv3")
    from_card, card_report = convert(load_data(card), "janitor")
    from_world, world_report = convert(st_book, "janitor")
    assert from_card["dynamicLore"] == from_world["dynamicLore"] == [
        {"keywords": ["harbor"], "personality": "Early."},
        {"keywords": ["inn"], "requireAll": ["ale"], "scenario": "Late."}]
    assert not card_report and not world_report


def test_a_keyword_too_long_for_a_sillytavern_key_is_reported_not_refused():
    long_phrase = " ".join(f"w{i}" for i in range(60))
    book = load_data([{"keywords": [long_phrase, "inn", "x" * 300], "scenario": "S."}])      # reads
    assert list(book.entries[0].key) == ["inn"]
    _, report = convert(book, "sillytavern")
    assert {(x.entry, x.field) for x in report if x.entry is not None} == {(0, "keywords[0]"), (0, "keywords[2]")}


_fields = st.sampled_from(sorted(JANITOR_FIELDS | {"requires", "Block", "other"}))
_value = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", " ", "*", "dock*", "old road", "40%", "2.5", "Inn", "café", "a-b", 1e300, -1e300, 10**30,
                       2.5, "1e400", "0x10"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["any", "all", "none", "x"]), inner,
                                                                 max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(book=st.lists(st.dictionaries(_fields, _value, min_size=1, max_size=6), min_size=1, max_size=5))
def test_any_janitor_shaped_book_reads_and_converts_without_internal_errors(book):
    read = load_data(book)                      # whatever the values, the script runs it: so do we
    assert read.format == "janitor" or not JANITOR_FIELDS & {k for e in book for k in e}
    if read.format != "janitor":
        return                                  # only "other" fields: not recognisably janitor's
    assert janitor_source(read).entries == book
    for to in ("sillytavern", "ccv3", "janitor"):
        convert(read, to)


@pytest.mark.parametrize("value", [10**30, 1e300])
def test_a_min_messages_no_chat_reaches_reads_as_a_disabled_entry(value):
    data, report = convert(load_data([{"keywords": ["a"], "minMessages": value, "scenario": "S."}]), "sillytavern")
    assert data["entries"]["0"]["disable"] is True and not report
