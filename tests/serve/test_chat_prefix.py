"""The delta form of ``POST /v1/st/scan`` (serve/chats.py, docs/service.md#chat-delta): a delta
request gets the full request's answer or a 409 ``prefix_unknown``, never another answer."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from lorescan.serve import models as m  # noqa: E402
from lorescan.serve.chats import ChatPrefixes, PrefixUnknown, chat_digest  # noqa: E402
from lorescan.serve.testing import ServerProcess  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"
LINES = ["The fog rolls in over Saltmere.", "Who keeps the lighthouse?", "Old Ida keeps it, and the toll bridge.",
         "Tell me about the bell.", "It rang the night the tide went out.", "I walk down to the pier.",
         "The ferry is late again.", "A storm is coming, the fisherman says.", "I ask about the tavern.",
         "The tavern keeper pours a drink.", "Is the lighthouse lit tonight?", "Only when the storm comes."]


def _chat(n: int, *, shift: int = 0) -> list[dict]:
    return [{"name": "Rowan" if i % 2 else "Narrator", "mes": f"{LINES[(i + shift) % len(LINES)]} ({i})",
             "is_user": bool(i % 2)} for i in range(n)]


def _msgs(chat: list[dict]) -> list[m.MessageIn]:
    return [m.MessageIn(**x) for x in chat]


# -- the digest and the store ------------------------------------------------------------------

def test_the_digest_is_the_documented_hash_chain():
    chat = [m.MessageIn(mes="Who keeps the lighthouse? \U0001F3EE", name="Rowan", is_user=True),
            m.MessageIn(mes="Mara.", name="", is_user=False)]
    d = hashlib.sha256(b"lorescan chat v1").digest()
    units = [len("Who keeps the lighthouse? ") + 2, len("Mara.")]       # the lantern is two UTF-16 units
    for x, n in zip(chat, units):   # u32le UTF-16 length, UTF-16LE text, for the name then the text; is_user
        d = hashlib.sha256(d + len(x.name).to_bytes(4, "little") + x.name.encode("utf-16-le")
                           + n.to_bytes(4, "little") + x.mes.encode("utf-16-le")
                           + (b"\x01" if x.is_user else b"\x00")).digest()
    assert chat_digest(chat) == d.hex()
    assert chat_digest([]) == hashlib.sha256(b"lorescan chat v1").hexdigest()


def test_moving_text_between_name_and_message_or_flipping_is_user_changes_the_digest():
    one = chat_digest([m.MessageIn(mes="b", name="a")])
    assert one != chat_digest([m.MessageIn(mes="", name="ab")])
    assert one != chat_digest([m.MessageIn(mes="ab", name="")])
    assert one != chat_digest([m.MessageIn(mes="b", name="a", is_user=True)])
    assert chat_digest([m.MessageIn(mes="\ud800")]) != chat_digest([m.MessageIn(mes="\ufffd")])   # lone surrogate


def test_a_delta_resolves_to_the_held_prefix_and_its_new_messages():
    store = ChatPrefixes(10, 1 << 20)
    chat = _msgs(_chat(6))
    store.hold("c", chat[:4])
    assert store.resolve("c", 4, chat_digest(chat[:4]), chat[4:]) == chat
    # the held chat is now all six: a swipe resends from message 5 on
    swiped = [*chat[:5], m.MessageIn(mes="another answer")]
    assert store.resolve("c", 5, chat_digest(chat[:5]), swiped[5:]) == swiped
    with pytest.raises(PrefixUnknown, match="another digest"):
        store.resolve("c", 6, chat_digest(chat), [])         # the held sixth message is the swiped one
    with pytest.raises(PrefixUnknown, match="holds 6 messages"):
        store.resolve("c", 7, chat_digest(chat + chat[:1]), [])
    with pytest.raises(PrefixUnknown, match="holds no chat"):
        store.resolve("other", 1, chat_digest(chat[:1]), [])


def test_the_store_is_bounded_in_chats_and_in_bytes():
    store = ChatPrefixes(3, 1 << 20)
    for i in range(5):
        store.hold(f"c{i}", _msgs(_chat(3)))
    assert len(store) == 3 and "c0" not in store and "c4" in store
    small = ChatPrefixes(100, 2000)
    for i in range(20):
        small.hold(f"c{i}", _msgs(_chat(4)))
    assert 0 < len(small) < 20 and small.nbytes <= 2000 and "c19" in small
    small.hold("huge", [m.MessageIn(mes="x" * 5000)])       # larger than the whole store: not held
    assert "huge" not in small and small.nbytes <= 2000


# -- through the service -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def books_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("books"))


@pytest.fixture(scope="module")
def server(books_dir):
    with ServerProcess(books_dir, args=["--time-limit", "20"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def book_id(client):
    status, info = client.json("POST", "/v1/books", EXAMPLE.read_bytes(),
                               headers={"Content-Type": "application/octet-stream"})
    assert status in (200, 201)
    return info["id"]


def _request(book_id: str, messages: list[dict], **extra) -> dict:
    return {"books": [{"id": book_id}], "messages": messages, "max_context": 8192, "seed": 7,
            "settings": {"scan_depth": 3, "recursive": True}, "macros": {"user": "Rowan"}, **extra}


def _full(client, book_id: str, chat: list[dict], **extra) -> dict:
    status, body = client.json("POST", "/v1/st/scan", _request(book_id, chat, **extra))
    assert status == 200, body
    return body


def _delta(client, book_id: str, chat_id: str, chat: list[dict], count: int, digest: str | None = None,
           **extra) -> tuple[int, dict]:
    prefix = {"count": count, "digest": digest or chat_digest(_msgs(chat[:count]))}
    return client.json("POST", "/v1/st/scan", _request(book_id, chat[count:], chat_id=chat_id, prefix=prefix,
                                                       **extra))


def _is_prefix_unknown(status: int, body: dict) -> bool:
    return status == 409 and body["code"] == "prefix_unknown" and "send the whole chat" in body["error"]


def test_steady_deltas_answer_what_the_whole_chat_answers(client, book_id):
    chat = _chat(12)
    _full(client, book_id, chat[:4], chat_id="steady")
    state = None
    fired = 0
    for n in range(5, 13):         # one new message a turn, the timed effects carried
        status, got = _delta(client, book_id, "steady", chat[:n], n - 1, timed_effects=state)
        assert status == 200, got
        assert got == _full(client, book_id, chat[:n], timed_effects=state)
        state = got["timed_effects"]
        fired += bool(got["activated"])
    assert fired >= 3


def test_a_stale_digest_is_answered_409_and_the_resend_gets_the_full_answer(client, book_id):
    chat = _chat(8)
    _full(client, book_id, chat[:6], chat_id="stale")
    status, body = _delta(client, book_id, "stale", chat, 6, digest=chat_digest(_msgs(chat[:5])))
    assert _is_prefix_unknown(status, body), body
    status, body = _delta(client, book_id, "stale", chat, 6, digest="0" * 64)
    assert _is_prefix_unknown(status, body), body
    assert _full(client, book_id, chat, chat_id="stale") == _full(client, book_id, chat)


def test_a_prefix_the_worker_never_held_or_holds_fewer_messages_of_is_409(client, book_id):
    chat = _chat(8)
    status, body = _delta(client, book_id, "never-sent", chat, 6)
    assert _is_prefix_unknown(status, body) and "holds no chat" in body["error"], body
    _full(client, book_id, chat[:3], chat_id="short")
    status, body = _delta(client, book_id, "short", chat, 6)
    assert _is_prefix_unknown(status, body) and "holds 3 messages" in body["error"], body


@pytest.mark.parametrize("change", ["reordered", "edited", "speaker"])
def test_a_reordered_or_edited_history_is_409_never_the_held_answer(client, book_id, change):
    chat = _chat(8)
    chat_id = f"history-{change}"
    _full(client, book_id, chat[:7], chat_id=chat_id)
    now = [dict(x) for x in chat]
    if change == "reordered":
        now[2], now[6] = now[6], now[2]          # an older message into the scanned window
    elif change == "edited":
        now[6]["mes"] = "Is the lighthouse lit tonight, and who keeps the bell?"
    else:
        now[6]["is_user"] = not now[6]["is_user"]
    expected = _full(client, book_id, now)
    assert change == "speaker" or expected != _full(client, book_id, chat), "the change must change the answer"
    status, body = _delta(client, book_id, chat_id, now, 7)      # the digest of the client's history
    assert _is_prefix_unknown(status, body), body
    assert _full(client, book_id, now, chat_id=chat_id) == expected
    status, body = _delta(client, book_id, chat_id, now + _chat(9)[8:], 8)     # held now: deltas work again
    assert status == 200 and body == _full(client, book_id, now + _chat(9)[8:])


def test_a_prefix_needs_a_chat_id(client, book_id):
    chat = _chat(3)
    status, body = client.json("POST", "/v1/st/scan", _request(
        book_id, chat[1:], prefix={"count": 1, "digest": chat_digest(_msgs(chat[:1]))}))
    assert status == 422 and body["path"] == "$.prefix"
    status, body = client.json("POST", "/v1/st/scan", _request(book_id, chat, chat_id="x",
                                                               prefix={"count": 1, "digest": "ABC"}))
    assert status == 422 and body["path"].startswith("$.prefix")


def test_a_restarted_worker_answers_409_and_then_holds_the_resent_chat(books_dir, book_id, client):
    chat = _chat(6)
    expected = _full(client, book_id, chat)
    with ServerProcess(books_dir, args=["--time-limit", "20"]) as first:
        c = first.client()
        _full(c, book_id, chat[:5], chat_id="restart")
        assert _delta(c, book_id, "restart", chat, 5) == (200, expected)
        c.close()
    with ServerProcess(books_dir, args=["--time-limit", "20"]) as second:
        c = second.client()
        status, body = _delta(c, book_id, "restart", chat, 5)
        assert _is_prefix_unknown(status, body) and "restarted" in body["error"], body
        assert _full(c, book_id, chat, chat_id="restart") == expected
        assert _delta(c, book_id, "restart", chat + _chat(7)[6:], 6) == (200, _full(c, book_id, chat + _chat(7)[6:]))
        c.close()


def test_the_openapi_document_names_the_409_and_the_prefix(client):
    status, doc = client.json("GET", "/openapi.json")
    assert status == 200
    op = doc["paths"]["/v1/st/scan"]["post"]
    assert "prefix_unknown" in op["responses"]["409"]["description"]
    props = doc["components"]["schemas"]["STScanRequest"]["properties"]
    assert "prefix" in props
    assert json.dumps(doc["components"]["schemas"]["ChatPrefix"]).count("pattern") == 1
