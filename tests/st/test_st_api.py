"""The library's surface as an integrator meets it: bare books, validated roles, results that
are JSON all the way down, entry names from ids, the CLI's chat reader."""
from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

import lorescan
from lorescan import BookSource, ChatMessage, EntryId, SettingsError, SlotEngine, STEngine, load
from lorescan.model import Lorebook, entry_from_fields
from lorescan.tokens import count_words

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _book() -> Lorebook:
    entries = [entry_from_fields({"uid": 0, "key": ["lantern"], "comment": "The Lantern", "content": "A lamp.",
                                  "order": 10}, source="api"),
               entry_from_fields({"uid": 1, "key": ["harbour"], "comment": "", "content": "Ships. lantern",
                                  "order": 20}, source="api"),
               entry_from_fields({"uid": "x", "key": [], "comment": "", "content": "Always.", "constant": True,
                                  "order": 5}, source="api")]
    return Lorebook(name="Api", entries=tuple(entries))


CHAT = [ChatMessage("User", "We walk to the harbour."), ChatMessage("Bot", "The lantern swings.")]


def _scan(books) -> lorescan.STResult:
    return STEngine(books, count_tokens=count_words).scan(CHAT, max_context=4000)


def test_a_bare_book_is_a_global_book_as_in_slot_mode():
    book = _book()
    bare = _scan([book])
    assert bare.to_json() == _scan([BookSource(book, ("global",))]).to_json()
    assert {e.uid for e in bare.activated} == {0, 1, "x"}


def test_a_bare_book_loaded_from_a_file_scans():
    book = load(str(EXAMPLES / "saltmere.json"))
    result = STEngine([book], count_tokens=count_words).scan(
        [ChatMessage("User", "the lighthouse at Saltmere")], max_context=8000)
    assert result.activated


@pytest.mark.parametrize("roles", ["global", (), [], ("globl",), None])
def test_bad_roles_are_an_error_naming_the_parameter_and_the_valid_roles(roles):
    with pytest.raises(SettingsError) as err:
        BookSource(_book(), roles)
    assert err.value.field == "roles"
    assert "global, character, character_extra, chat, persona" in str(err.value)


def test_a_string_of_roles_in_a_pair_is_refused_with_the_books_position():
    with pytest.raises(SettingsError) as err:
        STEngine([(_book(), "global")], count_tokens=count_words)
    assert err.value.field == "roles" and err.value.entry == 0
    assert "'g'" not in str(err.value) and "tuple of role names" in str(err.value)


def test_roles_given_as_a_list_are_kept_as_a_tuple():
    assert BookSource(_book(), ["global", "chat"]).roles == ("global", "chat")


def test_every_part_of_a_result_dumps_as_json():
    r = _scan([_book()])
    assert json.loads(json.dumps(r.activated)) == [[e.world, e.uid] for e in r.activated]
    assert json.loads(json.dumps(r.to_json()))["activated"][0] == {"world": "Api", "uid": r.activated[0].uid}
    for d in r.diagnostics.values():
        data = json.loads(json.dumps(d.to_json()))
        assert (data["world"], data["uid"]) == d.entry and data["reason"] == d.reason
        assert data["text"] == str(d)
    for lr in r.loops:
        assert json.loads(json.dumps(lr.to_json()))["state"] == lr.state
    assert json.loads(json.dumps(r.placement.to_json()))["world_info_before"] == r.world_info_before
    json.dumps(r.timed_effects.to_json())


def test_an_entry_id_is_still_its_world_and_uid():
    eid = EntryId("Api", 1)
    world, uid = eid
    assert (world, uid) == ("Api", 1) and eid.key == "Api.1" and eid.to_json() == {"world": "Api", "uid": 1}
    assert pickle.loads(pickle.dumps(eid)) == eid


def test_a_result_names_its_entries_also_after_pickling():
    r = _scan([_book()])
    names = {e.uid: r.name(e) for e in r.activated}
    assert names == {0: "The Lantern", 1: "harbour", "x": "#x"}
    assert r.entry(EntryId("Api", 0)).content == "A lamp."
    assert tuple(r.entry(("Api", 1)).key) == ("harbour",)
    copy = pickle.loads(pickle.dumps(r))
    assert {e.uid: copy.name(e) for e in copy.activated} == names
    with pytest.raises(KeyError):
        r.entry(("Api", 99))


PUBLIC_FIELDS = ("activated", "placement", "budget", "budget_overflowed", "overflow_alert_shown", "timed_effects",
                 "loops", "regex_cutoffs", "fuzzy_cutoffs", "key_hit_cutoffs", "layout", "stability")


@pytest.mark.parametrize("pickled", [False, True])
def test_a_result_and_its_diagnostics_are_frozen(pickled):
    r = _scan([_book()])
    if pickled:
        r = pickle.loads(pickle.dumps(r))
    for name in PUBLIC_FIELDS + ("diagnostics", "_explain", "anything"):
        with pytest.raises(dataclasses.FrozenInstanceError, match="frozen"):
            setattr(r, name, None)
    for name in PUBLIC_FIELDS:
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(r, name)
    assert r.diagnostics is r.diagnostics           # computed once, then kept
    d = r.explain("Api", 0)
    with pytest.raises(AttributeError):
        d.reason = "constant"                        # type: ignore[misc]
    assert d.outcome == "activated" and d.span is not None and d.where == d.span.label
    assert "activated=[" in repr(r) and "_explain" not in repr(r)


def test_a_located_span_is_in_the_decisions_read_after_the_diagnostics():
    # the explanation builds each located record anew (records are frozen) and keeps it as the pass's note
    r = _scan([_book()])
    before = r.decisions()[EntryId("Api", 0)]
    assert before.span is None                       # decisions alone locate nothing
    full = r.diagnostics[EntryId("Api", 0)]
    assert full.span is not None and full._replace(span=None, where=None) == before
    assert r.decisions()[EntryId("Api", 0)] == full


def test_read_chat_is_public_and_reads_the_clis_formats(tmp_path):
    assert "read_chat" in lorescan.__all__
    jsonl = lorescan.read_chat(str(EXAMPLES / "saltmere-chat.jsonl"))
    assert jsonl.messages and all(isinstance(m, ChatMessage) for m in jsonl.messages)
    listed = tmp_path / "chat.json"
    listed.write_text(json.dumps({"messages": [{"role": "user", "content": "hello"},
                                               {"role": "assistant", "content": "hi"}]}))
    chat = lorescan.read_chat(str(listed))
    assert [(m.text, m.is_user) for m in chat.messages] == [("hello", True), ("hi", False)]
    result = STEngine([_book()], count_tokens=count_words).scan(chat.messages, max_context=4000)
    assert [e.uid for e in result.activated] == ["x"]


def test_a_slot_result_dumps_as_json_through_to_json():
    book = _book()
    result = SlotEngine([book], count_tokens=count_words).run([("user", "the harbour lantern")], turn_id="t1")
    data = json.loads(json.dumps(result.to_json()))
    assert [m["content"] for m in data["messages"]] == [m.content for m in result.messages]
    assert [r["name"] for r in data["log"]] == [r.name for r in result.log]
    assert data["budget"] == result.budget and data["state"] == result.state
    assert result.log[0].to_json() == result.log[0].to_dict()


def test_an_engine_lists_its_entries_by_id_in_global_order_as_the_diagnostics_do():
    book = _book()
    engine = STEngine([BookSource(book, ("global",))], count_tokens=count_words)
    entries = engine.entries()
    result = engine.scan(CHAT, max_context=4000)
    assert list(entries) == list(result.diagnostics)
    assert [e.uid for e in entries.values()] == [1, 0, "x"]          # order descending: 20, 10, 5
    assert all(entries[eid] == result.entry(eid) for eid in entries)


def _engines():
    st_engine = STEngine([_book()], count_tokens=count_words)
    slot_engine = SlotEngine([_book()], count_tokens=count_words)
    return {"st": lambda msgs, **kw: st_engine.scan(msgs, max_context=4000, **kw),
            "slot": lambda msgs, **kw: slot_engine.run(msgs, turn_id="t", **kw)}


@pytest.mark.parametrize("engine", ["st", "slot"])
@pytest.mark.parametrize("bad", [[1], [None], "text", [{"role": "user", "content": 3, "name": "n", "mes": 3}]])
def test_a_malformed_message_is_the_same_error_class_in_both_engines(engine, bad):
    with pytest.raises(SettingsError) as err:
        _engines()[engine](bad)
    assert err.value.source == "messages" and type(err.value) is SettingsError


@pytest.mark.parametrize("engine", ["st", "slot"])
def test_both_engines_take_one_cache_type_and_refuse_another(engine):
    import inspect
    annotations = {inspect.signature(f).parameters["cache"].annotation for f in (STEngine.scan, SlotEngine.run)}
    assert annotations == {"ChatScan | None"}
    run = _engines()[engine]
    msgs = [{"role": "user", "content": "the harbour", "name": "User", "mes": "the harbour"}]
    cache = lorescan.ChatScan()
    assert run(msgs, cache=cache).to_json() == run(msgs, cache=cache).to_json() == run(msgs).to_json()
    for wrong in ({}, "cache", object()):
        with pytest.raises(SettingsError, match="cache must be a ChatScan") as err:
            run(msgs, cache=wrong)
        assert err.value.field == "cache"
