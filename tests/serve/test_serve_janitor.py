"""``POST /v1/janitor/run`` end to end (real ``lorescan serve`` subprocess): every JanitorAI
conformance vector turn through HTTP gives the script's texts, error, random count and trace."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

import msgspec  # noqa: E402

from lorescan.serve import models as m  # noqa: E402
from lorescan.serve.testing import ServerProcess  # noqa: E402

JANITOR = Path(__file__).resolve().parent.parent / "conformance" / "janitor"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with ServerProcess(str(tmp_path_factory.mktemp("books"))) as srv:
        c = srv.client()
        yield c
        c.close()


def test_every_janitor_vector_turn_through_the_service(client):
    turns = 0
    for path in sorted(JANITOR.glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            for t in case["turns"]:
                body = {"book": case["book"], "context": t["context"], "settings": t["settings"],
                        "random": t["random"]}
                status, headers, raw = client.request("POST", "/v1/janitor/run", body)
                assert status == 200, (case["name"], raw[:300])
                got = msgspec.json.decode(raw, type=m.JanitorRunResponse)
                want = t["expected"]
                assert (got.personality, got.scenario, got.random_calls) == (
                    want["personality"], want["scenario"], want["random_calls"]), case["name"]
                assert (got.error and got.error.name) == (want["error"] and want["error"]["name"]), case["name"]
                assert got.trace == want["trace"], case["name"]
                turns += 1
    assert turns == 405


def test_explain_profile_and_bad_requests(client):
    book = [{"keywords": ["дракон"], "personality": "P"}]
    ctx = {"character": {"name": "Mira"}, "chat": {"last_messages": [{"message": "Дракон!"}]}}
    status, _, raw = client.request("POST", "/v1/janitor/run", {"book": book, "context": ctx, "random": [0.5],
                                                                "profile": "improved", "explain": True})
    assert status == 200
    got = msgspec.json.decode(raw, type=m.JanitorRunResponse)
    assert got.personality == "\n\nP" and got.explain and got.explain[0].startswith("entry[0] applied")
    status, _, raw = client.request("POST", "/v1/janitor/run", {"book": book, "context": ctx, "random": []})
    assert status == 200 and msgspec.json.decode(raw, type=m.JanitorRunResponse).random_calls == 0
    status, _, raw = client.request("POST", "/v1/janitor/run", {"book": [{}], "context": ctx, "random": []})
    assert status == 422 and json.loads(raw)["path"] == "$.random"            # the always-on entry rolls
    status, _, raw = client.request("POST", "/v1/janitor/run", {"book": [], "context": {}, "settings": {"depth": 1}})
    err = json.loads(raw)
    assert status == 422 and "'depth'" in err["error"] and "$.settings" in err["error"]


def test_the_openapi_document_describes_the_route(client):
    status, doc = client.json("GET", "/openapi.json")
    assert status == 200 and "/v1/janitor/run" in doc["paths"]
    assert {"JanitorRunRequest", "JanitorRunResponse"} <= set(doc["components"]["schemas"])
