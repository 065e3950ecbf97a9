"""End to end: the real ``lorescan serve`` (uvicorn subprocess, free loopback port) over HTTP.

Needs the ``serve`` extra; without it the module is skipped, unless
``LORESCAN_REQUIRE_SERVE=1`` (CI), where a missing package fails. Corpus books and
conformance vectors come from ``$LORESCAN_SHARED`` (default ``../shared``).
"""
from __future__ import annotations

import glob
import json
import os
import random
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

import msgspec  # noqa: E402

from lorescan import BookSource, SlotEngine, STEngine, STSettings, load  # noqa: E402
from conftest import need_shared  # noqa: E402
from tests.support.hook_helpers import OTHER, SERA, chat_of, macro_book, macros  # noqa: E402
from lorescan.app.conformance import CONTRACT_FIELDS, _engine_for, iter_cases  # noqa: E402
from lorescan.formats.sillytavern import read_world  # noqa: E402
from lorescan.st import Character, ChatMessage  # noqa: E402
from lorescan.st.result import message_namer  # noqa: E402
from lorescan.serve import models as m  # noqa: E402
from lorescan.serve.testing import ServerProcess  # noqa: E402
from lorescan.slot import SlotBook  # noqa: E402
from lorescan.tokens import count_words  # noqa: E402

VECTORS = Path(__file__).resolve().parent.parent / "conformance" / "st"      # this project's own cases
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    books_dir = str(tmp_path_factory.mktemp("books"))
    with ServerProcess(books_dir, args=["--max-body-mb", "1", "--time-limit", "20"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    c = server.client()
    yield c
    c.close()


def upload(client, path: Path | bytes, **query: str) -> tuple[int, dict]:
    data = path if isinstance(path, bytes) else path.read_bytes()
    qs = urlencode(query)
    return client.json("POST", f"/v1/books?{qs}", data, headers={"Content-Type": "application/octet-stream"})


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


# -- books ------------------------------------------------------------------------------------

def test_every_corpus_book_uploads_with_its_entry_count(client):
    books = need_shared("corpus/books")
    paths = sorted(books.iterdir())
    assert paths, f"{books} is empty"
    for path in paths:
        status, info = upload(client, path, filename=path.name)
        assert status == 201, (path.name, info)
        msgspec.convert(info, m.BookInfo)
        assert info["entries"] == len(load(path).entries), path.name
        assert re.fullmatch(r"[0-9a-f]{32}", info["id"])
        status, again = client.json("GET", f"/v1/books/{info['id']}")
        assert status == 200 and again["name"] == info["name"] and again["entries"] == info["entries"]


def test_same_upload_gives_the_same_id_and_is_not_stored_twice(client):
    status, first = upload(client, EXAMPLE)
    status2, second = upload(client, EXAMPLE)
    assert status2 == 200 and second["created"] is False and second["id"] == first["id"]
    _, other = upload(client, EXAMPLE, name="Other")
    assert other["id"] != first["id"] and other["name"] == "Other"


def test_png_card_uploads_as_multipart(client):
    cards = sorted(need_shared("corpus/cards").glob("*.png"))
    assert cards, "no PNG cards in the corpus"
    card = cards[0]
    boundary = "lorescan-test-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{card.name}\"\r\n"
            f"Content-Type: image/png\r\n\r\n").encode() + card.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    status, info = client.json("POST", "/v1/books", body,
                               headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status in (200, 201), info
    assert info["filename"] == card.name and info["entries"] == len(load(card).entries)


def test_delete_removes_the_book_and_a_scan_then_answers_404(client):
    _, info = upload(client, EXAMPLE, name="ToDelete")
    req = {"books": [{"id": info["id"]}], "messages": [{"mes": "lighthouse"}], "max_context": 4096}
    assert client.json("POST", "/v1/st/scan", req)[0] == 200
    status, _, _ = client.request("DELETE", f"/v1/books/{info['id']}")
    assert status == 204
    assert client.json("GET", f"/v1/books/{info['id']}")[0] == 404
    status, body = client.json("POST", "/v1/st/scan", req)
    assert status == 404 and body["path"] == "$.books[0].id"


# -- SillyTavern mode: exactly what `lorescan conformance` gives --------------------------------

def _case_request(case: dict, ids: list[str], messages: list[dict], turn: dict, state) -> dict:
    an = case.get("authors_note")
    injects = []
    if an is not None and an.get("scan"):
        injects.append(an["content"])
    injects.extend(i["content"] for i in case.get("injections", []) if i.get("scan"))
    req = {"books": [{"id": i, "roles": b["roles"]} for i, b in zip(ids, case["books"])],
           "settings": case.get("settings") or {}, "messages": messages, "max_context": case["max_context"],
           "compat": "sillytavern", "tokenizer": "words", "random": float(case.get("rng_constant", 0.5)),
           "global_scan_data": case.get("global_scan_data"), "injects": injects,
           "authors_note": an["content"] if an is not None else None,
           "trigger": turn.get("trigger", "normal"), "dry_run": bool(turn.get("dry_run")),
           "timed_effects": state, "explain": True}
    if case.get("character") is not None:
        ch = case["character"]
        req["character"] = {"name": ch.get("name", ""), "avatar": ch.get("avatar", ""),
                            "tags": [str(t) for t in ch["tags"]] if isinstance(ch.get("tags"), list) else None}
    return req


def _sorted(v):
    return {k: _sorted(v[k]) for k in sorted(v)} if isinstance(v, dict) else v


def test_conformance_vectors_through_the_service_match_the_runner(client):
    files = sorted(glob.glob(str(VECTORS / "*.json")))
    assert files, f"no conformance vectors at {VECTORS}"
    turns = 0
    for path in files:
        for case in iter_cases(path):
            ids = []
            for b in case["books"]:
                data = json.dumps(b["data"]).encode()
                status, info = upload(client, data, name=b["name"], fill_defaults="false")
                assert status in (200, 201), (case["name"], info)
                ids.append(info["id"])
            engine = _engine_for(case, path, {})            # what `lorescan conformance` runs, in process
            ch = case.get("character")
            character = None if ch is None else Character(
                ch.get("name", ""), ch.get("avatar", ""),
                tuple(str(t) for t in ch["tags"]) if isinstance(ch.get("tags"), list) else None)
            state_http = state_local = None
            for ti, turn in enumerate(case["turns"]):
                req = _case_request(case, ids, turn["messages"], turn, state_http)
                for msg in req["messages"]:
                    msg.setdefault("name", "")
                status, _, raw = client.request("POST", "/v1/st/scan", req)
                got = json.loads(raw)
                assert status == 200, (case["name"], ti, got)
                msgspec.convert(got, m.STScanResponse)
                local = engine.scan([ChatMessage(x["name"], x["mes"], bool(x.get("is_user"))) for x in turn["messages"]],
                                    max_context=case["max_context"], character=character,
                                    global_scan_data=case.get("global_scan_data"), injects=req["injects"],
                                    authors_note=req["authors_note"], trigger=req["trigger"],
                                    dry_run=req["dry_run"], timed_effects=state_local)
                # the answer is the result's own to_json, byte for byte (messages named by their place)
                want = local.to_json(diagnostics=True, name_text=message_namer(range(1, len(req["messages"]) + 1)))
                assert raw == msgspec.json.encode(want), (path, case["name"], ti)
                for f in CONTRACT_FIELDS:        # and so the vector's expectation, as the runner checks it
                    g, w = got[f], turn["expected"].get(f)
                    if f in ("outlets", "timed_effects"):
                        g, w = _sorted(g), _sorted(w)
                    assert g == w, (path, case["name"], ti, f)
                assert len(got["diagnostics"]) == len(local.diagnostics)
                state_http, state_local = got["timed_effects"], local.timed_effects
                turns += 1
    assert turns > 50, f"only {turns} turns ran"


def test_macros_and_a_seed_are_inputs_of_one_request_and_leave_the_cached_engine_alone(client):
    book = macro_book()
    data = json.dumps({"entries": {str(e.uid): dict(e.fields) for e in book.entries}}).encode()
    _, info = upload(client, data, name="Hooks")
    settings = {"scan_depth": 3, "recursive": True}
    engine = STEngine([BookSource(book, ("global",))], STSettings(**settings), compat="sillytavern",
                      count_tokens=count_words)
    chat = chat_of(12, 5)
    runs = []
    for n in range(1, len(chat) + 1):        # with, without, and with other macros, alternating on one engine
        for table, seed in ((SERA, n), (None, n), (OTHER, n + 100)):
            req = {"books": [{"id": info["id"]}], "settings": settings, "tokenizer": "words", "max_context": 4000,
                   "messages": [{"name": x.name, "mes": x.text} for x in chat[:n]], "seed": seed,
                   **({"macros": table} if table else {})}
            status, _, raw = client.request("POST", "/v1/st/scan", req)
            got = json.loads(raw)
            assert status == 200, got
            local = engine.scan(chat[:n], max_context=4000, random=random.Random(seed).random,
                                substitute=macros(table) if table else None)
            assert raw == msgspec.json.encode(local.to_json()), (n, table)
            runs.append(got["activated"])
    assert len({json.dumps(r) for r in runs}) > 3       # the macros and rolls changed what activated


def test_a_warm_chat_gives_the_same_results_as_cold_requests(client):
    _, info = upload(client, EXAMPLE)
    chat = [{"name": "Rowan" if i % 2 else "Narrator", "mes": text, "is_user": bool(i % 2)}
            for i, text in enumerate(["The fog rolls in over Saltmere.", "Who keeps the lighthouse?",
                                      "Old Maren keeps it, and the harbor bell.", "Tell me about the bell.",
                                      "It rang the night the tide went out and never came back."])]
    state_warm = state_cold = None
    for n in range(1, len(chat) + 1):
        base = {"books": [{"id": info["id"]}], "messages": chat[:n], "max_context": 8192,
                "settings": {"scan_depth": 4, "recursive": True}}
        status, warm = client.json("POST", "/v1/st/scan", {**base, "chat_id": "chat-a", "timed_effects": state_warm})
        status2, cold = client.json("POST", "/v1/st/scan", {**base, "timed_effects": state_cold})
        assert status == status2 == 200
        assert warm == cold
        state_warm, state_cold = warm["timed_effects"], cold["timed_effects"]
    assert any(r["activated"] for r in (warm, cold))


def test_one_chats_state_never_reaches_another(client):
    book = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "The bell is cracked.", "sticky": 3}}}
    _, info = upload(client, json.dumps(book).encode(), name="Sticky")
    base = {"books": [{"id": info["id"]}], "max_context": 4096}
    status, a = client.json("POST", "/v1/st/scan", {**base, "chat_id": "x", "messages": [{"mes": "ring the bell"}]})
    assert status == 200 and a["timed_effects"]["sticky"]
    # another chat (same worker, same engine) without state: nothing sticky carries over
    status, b = client.json("POST", "/v1/st/scan", {**base, "chat_id": "y", "messages": [{"mes": "quiet"}, {"mes": "night"}]})
    assert status == 200 and b["activated"] == [] and b["timed_effects"] == {"sticky": {}, "cooldown": {}}
    # the first chat's next turn, with its state: the entry stays active by its sticky record
    status, a2 = client.json("POST", "/v1/st/scan", {**base, "chat_id": "x", "timed_effects": a["timed_effects"],
                                                     "messages": [{"mes": "ring the bell"}, {"mes": "quiet"}]})
    assert status == 200 and a2["activated"] == [{"world": "Sticky", "uid": 0}]


def test_each_settings_value_gives_its_own_engine_and_a_bad_one_fails_every_time(client):
    """Validated settings are kept per value: a change of one field is seen, and a rejected
    value is rejected again (nothing half-made is kept)."""
    book = {"entries": {"0": {"uid": 0, "key": ["anchor"], "content": "The anchor is rusted."}}}
    _, info = upload(client, json.dumps(book).encode(), name="Depth")
    base = {"books": [{"id": info["id"]}], "max_context": 4096,
            "messages": [{"mes": "drop the anchor"}] + [{"mes": f"wave {i}"} for i in range(5)]}
    seen = []
    for depth in (10, 2, 10, 2):
        status, body = client.json("POST", "/v1/st/scan", {**base, "settings": {"scan_depth": depth}})
        assert status == 200, body
        seen.append(body["activated"])
    assert seen == [[{"world": "Depth", "uid": 0}], [], [{"world": "Depth", "uid": 0}], []]
    for _ in range(2):
        status, body = client.json("POST", "/v1/st/scan", {**base, "settings": {"budget_percent": 250}})
        assert status == 422 and body["path"].startswith("$.settings.budget_percent"), body


def test_a_long_chat_reads_only_its_newest_messages_and_counts_them_all(client):
    """Only the messages a window reaches become engine messages; the chat's length still
    counts (timed effects are stamped with it)."""
    book = {"entries": {"0": {"uid": 0, "key": ["bell"], "content": "The bell is cracked.", "sticky": 3}}}
    _, info = upload(client, json.dumps(book).encode(), name="Long")
    messages = [{"mes": f"line {i}"} for i in range(20_000)] + [{"mes": "ring the bell"}]
    status, body = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "max_context": 4096,
                                                       "messages": messages})
    assert status == 200 and body["activated"] == [{"world": "Long", "uid": 0}]
    (record,) = body["timed_effects"]["sticky"].values()
    assert record["start"] == 20_001 and record["end"] == 20_004


def test_explain_gives_one_diagnostic_per_entry(client):
    _, info = upload(client, EXAMPLE)
    status, got = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "explain": True,
                                                       "messages": [{"mes": "Who keeps the lighthouse?"}],
                                                       "max_context": 8192})
    assert status == 200
    assert len(got["diagnostics"]) == len(load(EXAMPLE).entries)
    assert {d["outcome"] for d in got["diagnostics"]} <= {"activated", "not_activated"}
    status, plain = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}],
                                                         "messages": [{"mes": "Who keeps the lighthouse?"}],
                                                         "max_context": 8192})
    assert "diagnostics" not in plain


def _fields(struct: type) -> list[str]:
    return list(struct.__struct_fields__)


def test_the_response_models_are_the_schema_of_the_results_to_json():
    # one definition: every field of the answer comes from STResult.to_json (and each diagnostic
    # from Diagnostic.to_json), in the model's order, and validates against it strictly
    engine = STEngine([BookSource(load(EXAMPLE), ("global",))], count_tokens=count_words)
    result = engine.scan([ChatMessage("Rowan", "Who keeps the lighthouse? The bell rang.")], max_context=8192)
    data = json.loads(msgspec.json.encode(result.to_json(diagnostics=True)))
    optional = {"layout", "placement_stability"}      # there only when the scan was given a layout
    assert list(data) == [f for f in _fields(m.STScanResponse) if f not in optional]
    measured = engine.scan([ChatMessage("Rowan", "Who keeps the lighthouse?")], max_context=8192, layout={})
    full = json.loads(msgspec.json.encode(measured.to_json(diagnostics=True)))
    assert list(full) == _fields(m.STScanResponse)
    msgspec.convert(full, m.STScanResponse, strict=True)
    assert result.activated and any(d["span"] for d in data["diagnostics"])
    for d in data["diagnostics"]:
        assert list(d) == _fields(m.DiagnosticOut)
        if d["span"] is not None:
            assert list(d["span"]) == _fields(m.SpanOut)
    msgspec.convert(data, m.STScanResponse, strict=True)
    assert "diagnostics" not in result.to_json()
    msgspec.convert(result.to_json(), m.STScanResponse, strict=True)


def _same_shape(data, model, where: str, unsent: frozenset[str] = frozenset()) -> None:
    """``data`` (a result's to_json) has exactly the fields of the service model ``model``, in its
    order, at every level (the Structs inside lists, dicts and optional fields too); ``unsent``:
    the top-level fields this sample leaves out (there only in some answers)."""
    _walk(data, msgspec.inspect.type_info(model), where, unsent)


def _walk(data, info, where: str, unsent: frozenset[str] = frozenset()) -> None:
    mi = msgspec.inspect
    while isinstance(info, mi.Metadata):        # Annotated[..., doc(...)]
        info = info.type
    if isinstance(info, mi.UnionType):
        if data is None:
            return
        info = next(t for t in info.types if not isinstance(t, mi.NoneType))
    if isinstance(info, mi.StructType):
        assert isinstance(data, dict), (where, data)
        want = [f.name for f in info.fields if f.name not in unsent]
        assert list(data) == want, f"{where}: to_json gives {list(data)}, the model {want}"
        for f in info.fields:
            if f.name in data:
                _walk(data[f.name], f.type, f"{where}.{f.name}")
    elif isinstance(info, (mi.ListType, mi.TupleType, mi.VarTupleType)):
        item = info.item_type if not isinstance(info, mi.TupleType) else None
        for i, x in enumerate(data):
            _walk(x, item if item is not None else info.item_types[i], f"{where}[{i}]")
    elif isinstance(info, mi.DictType):
        for k, v in data.items():
            _walk(v, info.value_type, f"{where}[{k!r}]")


def _shape_book():
    from lorescan.model import Lorebook, entry_from_fields
    fields = [({"key": ["lighthouse"], "content": "Before.", "position": 0}),
              ({"key": ["lighthouse"], "content": "At depth.", "position": 4, "depth": 2, "role": 1}),
              ({"key": ["bell"], "content": "Example top.", "position": 5}),
              ({"key": ["bell"], "content": "Example bottom.", "position": 6}),
              ({"key": ["keeper"], "content": "Never.", "position": 1})]
    return Lorebook("Shape", tuple(entry_from_fields({"uid": i, "order": 10 + i, **f}, source="shape")
                                   for i, f in enumerate(fields)))


def test_every_field_of_every_result_is_its_service_models_field_at_every_level():
    # the structural guard: a field added to (or dropped from) a result's to_json or a service
    # model, at any depth, fails here, whatever the byte-for-byte tests' vectors happen to carry
    from lorescan.slot.spans import with_spans
    book = _shape_book()
    engine = STEngine([BookSource(book, ("global",))], count_tokens=count_words)
    chat = [ChatMessage("Rowan", "The lighthouse bell rang.")]
    result = engine.scan(chat, max_context=8192, layout={})
    full = json.loads(msgspec.json.encode(result.to_json(diagnostics=True)))
    assert full["depth_entries"] and full["em_entries"] and full["loops"] and full["placement_stability"]
    assert any(d["span"] for d in full["diagnostics"])
    _same_shape(full, m.STScanResponse, "st")
    for path in (("loops", 0, "next"), ("depth_entries", 0, "role"), ("placement_stability",), ("diagnostics", 0, "span")):
        drifted = json.loads(json.dumps(full))
        parent = drifted
        for step in path[:-1]:
            parent = parent[step]
        del parent[path[-1]]
        with pytest.raises(AssertionError, match=str(path[-2] if len(path) > 1 else "st")):
            _same_shape(drifted, m.STScanResponse, "st")   # the guard sees a field missing at any depth
    plain = json.loads(msgspec.json.encode(engine.scan(chat, max_context=8192).to_json()))
    _same_shape(plain, m.STScanResponse, "st", frozenset({"layout", "placement_stability", "diagnostics"}))
    slot = SlotEngine([book], count_tokens=count_words, stable_placement=True)
    msgs = [("user", "The lighthouse bell rang.")]
    first = slot.run(msgs, turn_id="t")
    explained = with_spans(slot, msgs, slot.run(msgs, turn_id="t", state=first.state))
    data = json.loads(msgspec.json.encode(explained.to_json()))
    assert any(r["span"] for r in data["log"]) and data["placement_stability"] is not None
    _same_shape(data, m.SlotRunResponse, "slot")
    from lorescan.janitor import JanitorEngine
    run = JanitorEngine([{"keywords": ["lighthouse"], "personality": "Ellery."}]).run(
        {"character": {"name": "I", "personality": "", "scenario": ""},
         "chat": {"last_messages": [{"is_bot": False, "message": "the lighthouse"}]}}, random=[0.5])
    _same_shape(json.loads(msgspec.json.encode(run.to_json())), m.JanitorRunResponse, "janitor",
                frozenset({"explain"}))


def test_the_explained_answer_is_the_results_to_json_byte_for_byte(client):
    _, info = upload(client, EXAMPLE)
    chat = [{"name": "Rowan", "mes": "Is the lighthouse lit?", "is_user": True},
            {"name": "Mara", "mes": "Ask the keeper about the bell."}]
    engine = STEngine([BookSource(load(EXAMPLE), ("global",))], count_tokens=count_words)
    local = engine.scan([ChatMessage(x["name"], x["mes"], x.get("is_user", False)) for x in chat], max_context=8192)
    for explain in (True, False):
        status, _, raw = client.request("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "explain": explain,
                                                                "tokenizer": "words", "messages": chat,
                                                                "max_context": 8192})
        assert status == 200, raw
        want = local.to_json(diagnostics=explain, name_text=message_namer([1, 2]))
        assert raw == msgspec.json.encode(want), explain
    assert "message 2, the newest" in raw.decode() or not explain


def test_explain_shows_where_a_key_matched_inside_a_longer_word(client):
    book = {"entries": {"0": {"uid": 0, "key": ["race"], "comment": "Race", "content": "Old races."},
                        "1": {"uid": 1, "key": ["bell"], "content": "Cracked."}}}
    _, info = upload(client, json.dumps(book).encode(), name="Spans")
    status, got = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "explain": True,
                                                       "messages": [{"mes": "a warm embrace"}], "max_context": 8192})
    assert status == 200
    race, bell = got["diagnostics"]
    assert race["span"]["matched"] == "race" and race["span"]["inside_word"] == "embrace"
    assert race["span"]["label"] == "message 0 (newest = 0)" and race["span"]["cases"] == ["inside_word"]
    assert "a warm emb[race]" in race["text"] and "inside the longer word 'embrace'" in race["text"]
    assert "matched in message 1, the newest:" in race["text"]        # the request's numbering, from 1
    assert bell["span"] is None and bell["outcome"] == "not_activated"


# -- lorebook-slot mode: the worked examples of SPEC 17.13-17.14 -------------------------------

def _slot_local(book, messages, **kw):
    eng = SlotEngine([SlotBook(book)], count_tokens=kw.pop("count_tokens"))
    return eng.run(messages, **kw)


def test_slot_17_13_priority_decides_survival_and_order_decides_placement(client):
    def e(uid, tokens, priority, order, role):
        return {"uid": uid, "constant": True, "content": "x" * tokens, "priority": priority, "order": order,
                "role": role}
    book_a = {"entries": {"1": e(1, 50, 10, 5, 0), "2": e(2, 40, 5, 20, 0)}, "token_budget": 100}
    book_b = {"entries": {"3": e(3, 20, 1, 30, 0), "4": e(4, 30, 7, 1, 1)}, "token_budget": 60}
    _, a = upload(client, json.dumps(book_a).encode(), name="A")
    _, b = upload(client, json.dumps(book_b).encode(), name="B")
    status, got = client.json("POST", "/v1/slot/run", {"books": [{"id": a["id"]}, {"id": b["id"]}],
                                                        "messages": [{"role": "assistant", "content": "hi"}],
                                                        "turn_id": "t", "tokenizer": "chars"})
    assert status == 200, got
    msgspec.convert(got, m.SlotRunResponse)
    assert got["budget"] == 100 and got["tokens_used"] == 80
    assert {r["id"]: r["outcome"] for r in got["log"]} == {1: "inserted", 2: "dropped_budget",
                                                           3: "dropped_budget", 4: "inserted"}
    assert [(x["role"], len(x["content"])) for x in got["messages"]] == [("system", 50), ("user", 30)]
    local = SlotEngine([read_world(book_a, name="A"), read_world(book_b, name="B")], count_tokens=len).run(
        [("assistant", "hi")], turn_id="t")
    assert got == json.loads(json.dumps(local.to_json()))


def test_slot_17_14_keep_across_turns_with_the_returned_state(client):
    from lorescan.slot import roll_percent
    content = "@@probability 50\n@@role assistant\n@@keep\nThe lighthouse keeper waves."
    book = {"entries": {"1": {"uid": 1, "key": ["lighthouse"], "content": content}}}
    _, info = upload(client, json.dumps(book).encode(), name="coast")
    t3 = next(t for t in (f"chat-{n}" for n in range(1000)) if roll_percent(t, "coast", 1) < 50)
    t4 = next(t for t in (f"turn4-{n}" for n in range(1000)) if roll_percent(t, "coast", 1) < 50)

    def turn(n, keyword):
        texts = [f"message {i}" for i in range(n)]
        if keyword:
            texts[-1] = "Look, a lighthouse!"
        return [{"role": "assistant" if i % 2 == 0 else "user", "content": t} for i, t in enumerate(texts)]

    status, r3 = client.json("POST", "/v1/slot/run", {"books": [{"id": info["id"]}], "messages": turn(3, True),
                                                       "turn_id": t3, "tokenizer": "words", "chat_id": "coast-1"})
    assert status == 200, r3
    assert r3["messages"] == [{"role": "assistant", "content": "The lighthouse keeper waves."}]
    assert r3["state"]["first_matched_turn"] == {"coast": {"1": 3}}
    status, r4 = client.json("POST", "/v1/slot/run", {"books": [{"id": info["id"]}], "messages": turn(4, False),
                                                       "turn_id": t4, "tokenizer": "words", "state": r3["state"],
                                                       "chat_id": "coast-1"})
    assert status == 200 and r4["log"][0]["matched_by"] == "keep" and r4["log"][0]["outcome"] == "inserted"
    lb = read_world(book, name="coast")
    local3 = _slot_local(lb, [(x["role"], x["content"]) for x in turn(3, True)], turn_id=t3, count_tokens=count_words)
    local4 = _slot_local(lb, [(x["role"], x["content"]) for x in turn(4, False)], turn_id=t4,
                         state=local3.state, count_tokens=count_words)
    assert [r3, r4] == json.loads(json.dumps([local3.to_json(), local4.to_json()]))


def test_slot_run_answers_slot_result_to_json_byte_for_byte(client):
    """Every field of the answer is SlotResult.to_json(), in its key order: budget from a stored
    setting, a roll, a disabled UI prompt, a budget drop, an invalid regex key, a depth-0 entry
    and a skipped system message each put something in the fields they fill."""
    entries = {
        "1": {"uid": 1, "key": ["harbor"], "content": "@@probability 100\n@@disable_ui_prompt system_prompt\n"
                                                      "The harbor is busy.", "priority": 9},
        "2": {"uid": 2, "key": ["harbor"], "content": "y" * 90, "priority": 1},
        "3": {"uid": 3, "key": ["/[/"], "content": "never"},
        "4": {"uid": 4, "key": ["gull"], "content": "@@scan_depth 0\nGulls.", "comment": "Gulls"},
        "5": {"uid": 5, "key": ["secret"], "content": "Only in a system message."},
    }
    book = {"entries": entries, "token_budget": 100}
    _, info = upload(client, json.dumps(book).encode(), name="port")
    messages = [{"role": "system", "content": "the secret is safe"}, {"role": "user", "content": "To the harbor!"}]
    status, _, body = client.request("POST", "/v1/slot/run", {"books": [{"id": info["id"]}], "messages": messages,
                                                              "turn_id": "t-1", "tokenizer": "chars"})
    assert status == 200, body
    local = SlotEngine([read_world(book, name="port")], count_tokens=len, regex_keys="strict").run(
        [(x["role"], x["content"]) for x in messages], turn_id="t-1")
    assert body == msgspec.json.encode(local.to_json())
    assert json.dumps(json.loads(body)) == json.dumps(local.to_json())
    got = json.loads(body)
    msgspec.convert(got, m.SlotRunResponse)
    assert list(got) == list(m.SlotRunResponse.__struct_fields__)      # every field, in the schema's order
    by_id = {r["id"]: r for r in got["log"]}
    assert got["budget_book"] == "port" and got["disabled_ui_prompts"] == ["system_prompt"]
    assert by_id[1]["outcome"] == "inserted" and by_id[1]["roll"] is not None
    assert by_id[2]["outcome"] == "dropped_budget" and by_id[3]["detail"] == "invalid_regex"
    assert by_id[4]["detail"] == "recursion_only" and by_id[5]["detail"] == "system_message_only"
    assert [n["code"] for n in got["notes"]] == ["budget_stored", "system_message_skipped"]
    assert got["notes"][1]["message"] == 0


# -- bad input of every kind --------------------------------------------------------------------

def _good(client) -> dict:
    _, info = upload(client, EXAMPLE)
    return {"books": [{"id": info["id"]}], "messages": [{"mes": "hello"}], "max_context": 4096}


def test_malformed_json_answers_400(client):
    status, _, body = client.request("POST", "/v1/st/scan", b'{"books": [', headers={"Content-Type": "application/json"})
    assert status == 400 and "malformed JSON" in json.loads(body)["error"]


@pytest.mark.parametrize("patch, path", [
    ({"max_context": "lots"}, "$.max_context"),
    ({"max_context": -1}, "$.max_context"),
    ({"messages": [{"mes": 5}]}, "$.messages[0].mes"),
    ({"settings": {"scan_depth": "deep"}}, "$.settings.scan_depth"),
    ({"settings": {"scan_dept": 3}}, "$.settings"),
    ({"settings": {"budget_percent": 250}}, "$.settings.budget_percent"),
    ({"books": [{"id": "../../etc/passwd"}]}, "$.books[0].id"),
    ({"books": [{"id": "0" * 32, "roles": ["villain"]}]}, "$.books[0].roles[0]"),
    ({"random": 1.5}, "$.random"),
    ({"timed_effects": {"sticky": {"x.1": {"hash": "no"}}}}, "$.timed_effects"),
    ({"global_scan_data": {"weather": "rain"}}, "$.global_scan_data"),
])
def test_wrong_types_and_values_answer_422_with_the_field_path(client, patch, path):
    status, body = client.json("POST", "/v1/st/scan", {**_good(client), **patch})
    assert status == 422, body
    assert body["path"].startswith(path), body
    assert body["error"]


def test_missing_required_field_answers_422(client):
    req = _good(client)
    del req["max_context"]
    status, body = client.json("POST", "/v1/st/scan", req)
    assert status == 422 and "max_context" in body["error"]


def test_slot_bad_state_answers_422_at_the_state(client):
    _, info = upload(client, EXAMPLE)
    status, body = client.json("POST", "/v1/slot/run", {"books": [{"id": info["id"]}], "turn_id": 1,
                                                         "messages": [], "state": {"version": 99}})
    assert status == 422 and body["path"].startswith("$.state") and "version" in body["error"]


def test_unknown_book_id_answers_404_with_the_path(client):
    status, body = client.json("POST", "/v1/st/scan", {**_good(client), "books": [{"id": "f" * 32}]})
    assert status == 404 and body["path"] == "$.books[0].id" and "f" * 32 in body["error"]
    assert client.json("GET", "/v1/books/" + "e" * 32)[0] == 404
    assert client.json("GET", "/v1/books/not-an-id")[0] == 422


def test_oversized_body_answers_413(client):
    req = {**_good(client), "messages": [{"mes": "x" * (2 << 20)}]}     # the server's limit: 1 MiB
    status, body = client.json("POST", "/v1/st/scan", req)
    assert status == 413 and "limit" in body["error"]


def test_a_bad_book_answers_400_with_the_lorebook_error_text(client):
    bad = {"entries": {"0": {"uid": 0, "key": "not-a-list", "content": "x"}}}
    status, body = upload(client, json.dumps(bad).encode(), filename="bad.json")
    assert status == 400
    assert body["error"].startswith("bad.json, entry 0, field 'key'") and body["field"] == "key"
    status, body = upload(client, b"\x89PNG\r\n\x1a\nnot really a png", filename="card.png")
    assert status == 400 and body["error"].startswith("card.png")
    status, body = upload(client, b"[1, 2", filename="cut.json")
    assert status == 400 and body["source"] == "cut.json"


def test_an_evil_regex_key_is_cut_off_reported_and_counted(client):
    book = {"entries": {"0": {"uid": 0, "key": ["/(a|aa)+(?=$)/"], "content": "evil"},   # backtracks, unbounded
                        "1": {"uid": 1, "key": ["harbor"], "content": "The harbor."}}}
    _, info = upload(client, json.dumps(book).encode(), name="Evil")
    t0 = time.monotonic()
    status, got = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "explain": True,
                                                       "messages": [{"mes": "a" * 40 + "! by the harbor"}],
                                                       "max_context": 4096})
    assert time.monotonic() - t0 < 10
    assert status == 200 and got["activated"] == [{"world": "Evil", "uid": 1}]
    evil = next(d for d in got["diagnostics"] if d["uid"] == 0)
    assert evil["outcome"] == "not_activated" and "was cut off after" in evil["detail"]
    assert len(got["regex_cutoffs"]) == 1 and "/(a|aa)+(?=$)/" in got["regex_cutoffs"][0]
    _, _, text = client.request("GET", "/metrics")
    assert metric(text.decode(), "lorescan_regex_timeouts_total") >= 1


def test_the_worker_lives_on_after_bad_input(client):
    for body in (b"", b"null", b"[]", b"{}", b"\xff\xfe", b'{"books": 5}'):
        status, _, _ = client.request("POST", "/v1/st/scan", body, headers={"Content-Type": "application/json"})
        assert status in (400, 422)
    assert client.json("POST", "/v1/st/scan", _good(client))[0] == 200


# -- operations -----------------------------------------------------------------------------

def test_metrics_count_requests_per_route_with_latency_histograms(client):
    client.json("POST", "/v1/st/scan", _good(client))
    _, headers, body = client.request("GET", "/metrics")
    text = body.decode()
    assert headers["content-type"].startswith("text/plain")
    assert metric(text, "lorescan_requests_total", route="st_scan", status="200") >= 1
    assert metric(text, "lorescan_request_seconds_count", route="st_scan") >= 1
    assert metric(text, "lorescan_request_seconds_bucket", route="st_scan", le="+Inf") >= 1
    assert metric(text, "lorescan_books_loaded") >= 1
    for name in ("lorescan_chat_cache_hits_total", "lorescan_chat_cache_misses_total",
                 "lorescan_regex_timeouts_total", "lorescan_book_compiles_total"):
        assert f"# TYPE {name} counter" in text


def test_openapi_document_describes_the_v1_routes(client):
    status, doc = client.json("GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    assert {"/v1/books", "/v1/books/{book_id}", "/v1/st/scan", "/v1/slot/run", "/healthz", "/metrics"} <= set(doc["paths"])
    assert "STScanRequest" in doc["components"]["schemas"]


def test_a_restart_serves_a_stored_book_without_compiling(tmp_path):
    books_dir = str(tmp_path / "books")
    with ServerProcess(books_dir) as first:
        c = first.client()
        _, info = upload(c, EXAMPLE)
        c.close()
    with ServerProcess(books_dir) as second:
        c = second.client()
        status, got = c.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "max_context": 8192,
                                                      "messages": [{"mes": "Who keeps the lighthouse?"}]})
        assert status == 200 and got["activated"]
        _, _, text = c.request("GET", "/metrics")
        c.close()
        log = second.log_text()
    assert metric(text.decode(), "lorescan_book_compiles_total") == 0
    assert metric(text.decode(), "lorescan_book_file_loads_total") == 1
    assert "compiled book 'Saltmere'" not in log      # the load itself is a debug line (one per cold request)


def test_bearer_token_auth(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    with ServerProcess(str(tmp_path / "books"), args=["--token-file", str(token_file)]) as srv:
        anon = srv.client()
        assert anon.json("GET", "/healthz")[0] == 200
        status, body = anon.json("POST", "/v1/books", {"entries": {}})
        assert status == 401 and "token" in body["error"]
        assert anon.json("GET", "/metrics")[0] == 401
        wrong = srv.client(token="nope")
        assert wrong.json("GET", "/v1/books")[0] == 401
        good = srv.client(token="s3cret-token")
        assert good.json("GET", "/v1/books")[0] == 200
        for c in (anon, wrong, good):
            c.close()


def test_a_request_past_the_time_limit_answers_503_and_the_worker_serves_on(tmp_path):
    with ServerProcess(str(tmp_path / "books"), args=["--time-limit", "0.000001"]) as srv:
        c = srv.client()
        _, info = upload(c, EXAMPLE)
        req = {"books": [{"id": info["id"]}], "messages": [{"mes": "lighthouse"}], "max_context": 4096}
        status, body = c.json("POST", "/v1/st/scan", req)
        assert status == 503 and "time limit" in body["error"]
        assert c.json("GET", "/healthz")[0] == 200
        c.close()


def test_metrics_sum_the_requests_of_every_worker(tmp_path):
    from lorescan.serve.testing import Client
    with ServerProcess(str(tmp_path / "books"), workers=2) as srv:
        assert len(srv.worker_pids()) == 2
        seen: set[str] = set()
        sent = 0
        # A new connection each: the kernel spreads them over the workers that are accepting. A
        # worker still starting up accepts none, so keep going (for up to 30 s) until both answered.
        deadline = time.monotonic() + 30
        while sent < 30 or (len(seen) < 2 and time.monotonic() < deadline):
            c = Client(srv.port)
            status, headers, _ = c.request("GET", "/v1/books")
            assert status == 200
            seen.add(headers["x-lorescan-worker"])
            sent += 1
            c.close()
        if len(seen) < 2:
            pytest.fail(f"all {sent} connections went to one worker ({seen}); the sum was not exercised")
        time.sleep(2.5)                               # workers publish their numbers every second
        c = Client(srv.port)
        _, _, text = c.request("GET", "/metrics")
        c.close()
    assert metric(text.decode(), "lorescan_requests_total", route="books", method="GET", status="200") == sent


def test_the_layout_travels_through_st_scan_and_slot_run_like_in_process(client):
    book = {"entries": {str(i): {"uid": i, "key": [w], "content": f"about {w}", "order": 100}
                        for i, w in enumerate(["wolf", "moon", "fox"])}}
    _, info = upload(client, json.dumps(book).encode(), name="stable")
    lb = read_world(book, name="stable")
    engine = STEngine([lb], STSettings(stable_placement=True), compat="improved", count_tokens=count_words)
    layout, local_layout = {}, {}
    for text in ["fox", "wolf fox", "moon wolf fox"]:
        status, got = client.json("POST", "/v1/st/scan", {
            "books": [{"id": info["id"]}], "messages": [{"mes": text, "name": "u"}], "max_context": 8000,
            "compat": "improved", "settings": {"stable_placement": True}, "tokenizer": "words", "layout": layout})
        assert status == 200, got
        want = engine.scan([ChatMessage("u", text)], max_context=8000, layout=local_layout)
        assert got["world_info_before"] == want.world_info_before
        assert got["layout"] == want.layout.to_json() and got["placement_stability"] == want.stability.to_json()
        layout, local_layout = got["layout"], want.layout
    assert got["world_info_before"] == "about fox\nabout wolf\nabout moon"
    status, bad = client.json("POST", "/v1/st/scan", {"books": [{"id": info["id"]}], "messages": [], "max_context": 1,
                                                      "layout": {"version": 9}})
    assert status == 422 and "version" in json.dumps(bad)
    state = None
    for text in ["fox", "wolf fox"]:
        status, got = client.json("POST", "/v1/slot/run", {
            "books": [{"id": info["id"]}], "messages": [{"role": "user", "content": text}], "turn_id": "t",
            "tokenizer": "words", "stable_placement": True, "state": state})
        assert status == 200, got
        state = got["state"]
    assert [x["content"] for x in got["messages"]] == ["about fox", "about wolf"]
    assert got["placement_stability"]["unchanged"] == len("about fox")


# -- the store keeps a slot pool's compiled keys as a keys part alone (docs/service.md#slot-keys) ----

def test_a_cold_slot_engine_reads_its_pools_stored_keys_and_answers_the_same(tmp_path):
    from lorescan.serve.runtime import ServeConfig
    from lorescan.serve.turns import Runtime
    config = ServeConfig(books_dir=str(tmp_path))

    def cold_run(req: m.SlotRunRequest) -> tuple[bytes, int, int]:
        worker = Runtime(config)          # a new worker: nothing in memory
        try:
            out = worker.slot_run(req)
            return out, worker.store.compiles, worker.store.file_loads
        finally:
            worker.executor.shutdown()

    first = Runtime(config)
    book_id = first.store.put(EXAMPLE.read_bytes(), "saltmere.json")["id"]
    other_id = first.store.put(json.dumps({"entries": {"0": {"uid": 0, "key": ["harbor"],
                                                             "content": "Ships wait."}}}).encode(), "other.json")["id"]
    first.executor.shutdown()
    keys_files = lambda: sorted(p.name for p in tmp_path.glob(f"{book_id}.keys-*.lsc"))  # noqa: E731
    messages = [m.SlotMessageIn(role="user", content="Who keeps the lighthouse at Saltmere harbor?")]
    req = m.SlotRunRequest(books=[m.SlotBookRef(id=book_id)], turn_id="t1", messages=messages)

    compiled, compiles, _ = cold_run(req)               # compiles the pool's keys and stores them
    assert compiles == 1 and len(keys_files()) == 1, (compiles, keys_files())
    stored, compiles, loads = cold_run(req)             # reads them: the book and its keys part, no compile
    assert (compiles, loads) == (0, 2) and stored == compiled
    # other rules are other specs: their own file, and the answer of a compile
    st_rules = msgspec.structs.replace(req, rules="sillytavern", match_whole_words=True)
    st_compiled, compiles, _ = cold_run(st_rules)
    assert compiles == 1 and len(keys_files()) == 2
    assert cold_run(st_rules)[:2] == (st_compiled, 0)
    # a damaged keys file is compiled again (and written again), never an error
    for name in keys_files():
        path = tmp_path / name
        path.write_bytes(path.read_bytes()[:100])
    again, compiles, _ = cold_run(req)
    assert again == compiled and compiles == 1
    assert cold_run(req)[:2] == (compiled, 0)
    # a pool of two books compiles as before (no keys file of its own); deleting a book deletes its keys
    two = msgspec.structs.replace(req, books=[m.SlotBookRef(id=book_id), m.SlotBookRef(id=other_id)])
    before = set(p.name for p in tmp_path.iterdir())
    pooled, _, loads = cold_run(two)
    assert loads == 2 and json.loads(pooled)["messages"] is not None
    assert set(p.name for p in tmp_path.iterdir()) == before
    empty, _, _ = cold_run(msgspec.structs.replace(req, books=[]))      # no book at all: an empty pool
    assert json.loads(empty)["messages"] is not None
    last = Runtime(config)
    assert last.delete_book(book_id) and keys_files() == []
    last.executor.shutdown()
