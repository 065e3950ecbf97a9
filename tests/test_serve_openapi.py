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
