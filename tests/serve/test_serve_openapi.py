"""``/openapi.json`` is complete: every field described with an example, the token declared where it is
needed, every error in the documented shape, and the document served is the one the models generate."""
from __future__ import annotations

import os
from typing import Any, Iterator

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart", "prometheus_client"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

import msgspec  # noqa: E402

from lorescan.serve import models as m  # noqa: E402
from lorescan.serve.openapi import OPEN_ROUTES, openapi_document  # noqa: E402
from lorescan.serve.testing import ServerProcess  # noqa: E402

TOKEN = "openapi-test-token"
METHODS = ("get", "post", "put", "patch", "delete")


def operations(doc: dict) -> Iterator[tuple[str, str, dict]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def properties(schema: Any, where: str) -> Iterator[tuple[str, dict]]:
    """Every (location, property schema) in ``schema``, nested objects and array items included."""
    if isinstance(schema, dict):
        for name, prop in schema.get("properties", {}).items():
            yield f"{where}.{name}", prop
        for key, sub in schema.items():
            if key == "properties":
                for name, prop in sub.items():
                    yield from properties(prop, f"{where}.{name}")
            elif isinstance(sub, (dict, list)) and key not in ("examples", "default"):
                yield from properties(sub, where)
    elif isinstance(schema, list):
        for sub in schema:
            yield from properties(sub, where)


def test_every_property_of_every_schema_has_a_description_and_an_example():
    doc = openapi_document()
    found = list(properties(doc["components"]["schemas"], "components"))
    for path, method, op in operations(doc):
        found += properties(op, f"{method.upper()} {path}")
    assert len(found) > 145            # the models' fields, the probes' and the upload's
    missing = [where for where, prop in found if not prop.get("description") or not prop.get("examples")]
    assert missing == []


def test_every_parameter_has_a_description_and_an_example():
    doc = openapi_document()
    params = [p for item in doc["paths"].values() for p in item.get("parameters", [])]
    params += [p for _, _, op in operations(doc) for p in op.get("parameters", [])]
    assert params
    assert [p["name"] for p in params if not p.get("description") or not (p.get("examples")
                                                                          or p["schema"].get("examples"))] == []


def test_examples_are_valid_values_of_their_fields():
    # each example decodes as its own model: a wrong example would mislead a reader and the fuzzer
    for struct in (m.STScanRequest, m.SlotRunRequest, m.STScanResponse, m.SlotRunResponse, m.BookInfo, m.ErrorBody):
        info = msgspec.inspect.type_info(struct)
        for f in info.fields:
            for example in f.type.extra_json_schema.get("examples", []) if hasattr(f.type, "extra_json_schema") \
                    else []:
                msgspec.convert({**_required(info), f.name: example}, struct)


def _required(info: Any) -> dict:
    """A minimal valid value of each required field, from the field's own examples."""
    out = {}
    for f in info.fields:
        if f.required:
            out[f.name] = f.type.extra_json_schema["examples"][0]
    return out


def test_every_route_but_the_probes_requires_the_token_and_answers_401_in_json():
    doc = openapi_document(token=True)
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "LORESCAN_SERVE_TOKEN or --token-file"}
    ops = list(operations(doc))
    assert {p for p, _, _ in ops} >= {"/v1/books", "/v1/books/{book_id}", "/v1/st/scan", "/v1/slot/run",
                                      "/version", "/metrics", "/openapi.json", *OPEN_ROUTES}
    for path, method, op in ops:
        if path in OPEN_ROUTES:
            assert "security" not in op and "401" not in op["responses"], (method, path)
        else:
            assert op["security"] == [{"bearer": []}], (method, path)
            assert "401" in op["responses"], (method, path)
    # a server without a token requires none
    assert not any("security" in op for _, _, op in operations(openapi_document(token=False)))


def test_every_error_answer_is_described_with_the_error_shape():
    doc = openapi_document()
    err = {"$ref": "#/components/schemas/ErrorBody"}
    for path, method, op in operations(doc):
        assert "405" in op["responses"], (method, path)
        for status, response in op["responses"].items():
            if int(status) >= 400:
                assert response["description"], (status, method, path)
                assert response["content"] == {"application/json": {"schema": err}}, (status, method, path)
    assert {"400", "404", "413", "422", "503"} <= set(doc["paths"]["/v1/st/scan"]["post"]["responses"])
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error"]


def test_the_served_document_is_the_generated_one_for_the_servers_token(tmp_path):
    with ServerProcess(str(tmp_path / "books"), env={"LORESCAN_SERVE_TOKEN": TOKEN}) as srv:
        c = srv.client(token=TOKEN)
        status, served = c.json("GET", "/openapi.json")
        c.close()
    assert status == 200
    assert served == msgspec.json.decode(msgspec.json.encode(openapi_document(token=True)))
    with ServerProcess(str(tmp_path / "books2")) as srv:
        c = srv.client()
        status, served = c.json("GET", "/openapi.json")
        c.close()
    assert status == 200 and served == msgspec.json.decode(msgspec.json.encode(openapi_document(token=False)))


# -- what the fuzzer found (.ci/api_fuzz.py), each now answered as the document says ---------

@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with ServerProcess(str(tmp_path_factory.mktemp("books"))) as srv:
        c = srv.client()
        yield c
        c.close()


def _scan(**extra: Any) -> dict:
    return {"books": [], "messages": [{"mes": "Who keeps the lighthouse?"}], "max_context": 8192, **extra}


@pytest.mark.parametrize("depth", [300, 5000, 100_000])
@pytest.mark.parametrize("path, body", [
    ("/v1/st/scan", _scan(timed_effects={"sticky": {}, "x": "NEST"})),
    ("/v1/slot/run", {"books": [], "messages": [], "turn_id": 1, "state": {"x": "NEST"}}),
])
def test_deeply_nested_free_form_json_answers_422_not_500(live, path, body, depth):
    text = msgspec.json.encode(body).decode().replace('"NEST"', "[" * depth + "]" * depth)
    status, _, raw = live.request("POST", path, text, headers={"Content-Type": "application/json"})
    got = msgspec.json.decode(raw)
    assert status == 422, got
    at_field = {"error": "nested deeper than 256 levels - at `%s`" % ("$.timed_effects" if "scan" in path
                                                                       else "$.state"),
                "path": "$.timed_effects" if "scan" in path else "$.state"}
    unreadable = {"error": "JSON nested too deeply to read - at `$`", "path": "$"}
    if depth == 300:            # past Limits.max_json_depth: refused at the field
        assert got == at_field
    else:                       # refused at the field, or at `$` past what msgspec reads (its limit
        assert got in (at_field, unreadable)    # follows Python's recursion limit: ~1,000 to 3.12)
    status, _ = live.json("GET", "/healthz")
    assert status == 200


def test_nesting_within_the_limit_is_accepted(live):
    nested: Any = []
    for _ in range(100):
        nested = [nested]
    status, got = live.json("POST", "/v1/slot/run", {"books": [], "messages": [], "turn_id": 1,
                                                     "state": {"x": nested}})
    assert status == 200 and got["state"]["x"] == nested


def test_an_integral_number_is_an_integer_as_json_schema_says(live):
    status, as_int = live.json("POST", "/v1/st/scan", _scan(settings={"scan_depth": 3}))
    assert status == 200
    text = msgspec.json.encode(_scan(settings={"scan_depth": 3})).decode()
    text = text.replace('"max_context":8192', '"max_context":8192.0').replace('"scan_depth":3', '"scan_depth":3e0')
    assert "8192.0" in text and "3e0" in text
    status, _, raw = live.request("POST", "/v1/st/scan", text, headers={"Content-Type": "application/json"})
    assert status == 200 and msgspec.json.decode(raw) == as_int
    # a fraction is still refused, at its path
    status, got = live.json("POST", "/v1/st/scan", _scan(max_context=8192.5))
    assert status == 422 and got["path"] == "$.max_context"
    status, got = live.json("POST", "/v1/slot/run", {"books": [], "messages": [], "turn_id": 1.5})
    assert status == 422 and got["path"] == "$.turn_id"


@pytest.mark.parametrize("path, allowed", [("/v1/books", {"GET", "POST"}),
                                           ("/v1/books/" + m.EXAMPLE_BOOK_ID, {"GET", "DELETE"})])
def test_a_405_allows_every_method_of_the_path(live, path, allowed):
    status, headers, raw = live.request("PUT", path, b"{}")
    assert status == 405
    assert set(headers["allow"].replace(" ", "").split(",")) - {"HEAD"} == allowed
    assert msgspec.json.decode(raw)["error"].startswith("PUT is not allowed on ")


@pytest.mark.parametrize("name, bad", [("scan_depth", -1), ("max_recursion_steps", 10_000_001),
                                       ("budget_percent", 100.5)])
def test_a_setting_out_of_its_declared_range_answers_422_at_the_setting(live, name, bad):
    schema = openapi_document()["components"]["schemas"]["STSettingsIn"]["properties"][name]
    assert not schema["minimum"] <= bad <= schema["maximum"]
    status, got = live.json("POST", "/v1/st/scan", _scan(settings={name: bad}))
    assert status == 422 and got["path"] == f"$.settings.{name}"
