"""The OpenAPI 3.1 document of ``lorescan serve`` (``/openapi.json``).

Every request and response schema is generated from the msgspec models in :mod:`.models`, whose
fields carry their descriptions and examples, so the document cannot drift from what the service
decodes and answers. Every error is the :class:`.models.ErrorBody` shape; every route but the
probes (``/healthz``, ``/readyz``) requires the bearer token when the server has one.
"""
from __future__ import annotations

from typing import Any, Iterable

import msgspec

from . import models as m

__all__ = ["API_VERSION", "OPEN_ROUTES", "openapi_document"]

API_VERSION = "v1"
OPEN_ROUTES = ("/healthz", "/readyz")    # the probes: never behind the token
_JSON = "application/json"
_EXAMPLE_BOOK = {"entries": {"0": {"uid": 0, "key": ["lighthouse"], "content": "The keeper is old Mara."}}}
_EXAMPLE_BOOK_TEXT = msgspec.json.encode(_EXAMPLE_BOOK).decode()

# status -> when it is answered; every one has the ErrorBody shape
_ERRORS = {
    "400": "malformed JSON, or a bad book (the LorebookError text; `source`, `entry`, `field` locate it)",
    "401": "missing or wrong bearer token",
    "404": "unknown book id, or no such route",
    "405": "the route exists but not with this method",
    "409": "a delta request's prefix is not held by this worker (`code: prefix_unknown`): send the whole chat; "
           "or a stored book is damaged on disk (truncated or changed): upload it again to repair it",
    "413": "the request body is above the size limit",
    "422": "a request field is invalid; `path` locates it (`$.messages[3].mes`, `query.fill_defaults`)",
    "503": "the per-request time limit passed (the scan finishes in the background), or the books "
           "directory cannot be written",
    "507": "the books directory is full: the upload was not stored",
}


def _status_schema(value: str, description: str) -> dict[str, Any]:
    return {"type": "object", "required": ["status"], "properties": {
        "status": {"type": "string", "enum": [value], "description": description, "examples": [value]}}}


_VERSION_SCHEMA = {"type": "object", "required": ["version", "backend", "python", "implementation", "api"],
                   "properties": {
                       "version": {"type": "string", "description": "the lorescan package version",
                                   "examples": ["0.1.0"]},
                       "backend": {"type": "string", "enum": ["native", "python"],
                                   "description": "the kernels in use", "examples": ["native"]},
                       "python": {"type": "string", "description": "the Python version running them",
                                  "examples": ["3.12.1"]},
                       "implementation": {"type": "string", "description": "the Python implementation",
                                          "examples": ["CPython"]},
                       "api": {"type": "string", "description": "the API version", "examples": [API_VERSION]}}}

_READY_SCHEMA = {"type": "object", "required": ["status", "books_dir"], "properties": {
    **_status_schema("ready", "the worker can answer")["properties"],
    "books_dir": {"type": "string", "description": "the books directory in use", "examples": ["/var/lib/lorescan"]}}}


def openapi_document(*, token: bool = True) -> dict[str, Any]:
    """The document; ``token``: the server requires the bearer token (every route but the probes
    then declares the ``bearer`` security requirement and its 401 answer)."""
    types = [m.STScanRequest, m.STScanResponse, m.SlotRunRequest, m.SlotRunResponse, m.BookInfo, m.BookList,
             m.ErrorBody, m.JanitorRunRequest, m.JanitorRunResponse]
    (req_st, res_st, req_slot, res_slot, book, book_list, err, req_jan, res_jan), components = \
        msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")

    def body(schema: dict) -> dict:
        return {"content": {_JSON: {"schema": schema}}}

    def errors(*codes: str) -> dict[str, Any]:
        return {code: {"description": _ERRORS[code], **body(err)} for code in codes}

    def op(summary: str, ok: dict[str, Any], error_codes: Iterable[str], **extra: Any) -> dict[str, Any]:
        return {"summary": summary, **extra, "responses": {**ok, **errors(*error_codes)}}

    book_id = {"name": "book_id", "in": "path", "required": True,
               "description": "a book id returned by POST /v1/books",
               "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$", "examples": [m.EXAMPLE_BOOK_ID]}}
    upload = {
        _JSON: {"schema": {"description": "a book in any JSON format lorescan reads", "examples": [_EXAMPLE_BOOK]}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary",
                                                "description": "a book file (JSON, a PNG card, ...)",
                                                "examples": [_EXAMPLE_BOOK_TEXT]}},
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary", "description": "the book file",
                     "examples": [_EXAMPLE_BOOK_TEXT]},
            "name": {"type": "string", "description": "the book's name (default: from the file)",
                     "examples": ["Saltmere"]}}}}}
    turn_errors = ("400", "404", "405", "409", "413", "422", "503")
    paths: dict[str, dict[str, Any]] = {
        "/healthz": {"get": op("Liveness: the worker answers",
                               {"200": {"description": "alive", **body(_status_schema("ok", "always ok"))}},
                               ())},
        "/readyz": {"get": op("Readiness: the books directory is usable and the worker has started",
                              {"200": {"description": "ready", **body(_READY_SCHEMA)}},
                              ("503",))},
        "/version": {"get": op("Package version, kernels (native or python) and Python version",
                               {"200": {"description": "the build", **body(_VERSION_SCHEMA)}}, ())},
        "/metrics": {"get": op("Prometheus metrics (text format)",
                               {"200": {"description": "metrics",
                                        "content": {"text/plain": {"schema": {"type": "string"}}}}}, ())},
        "/openapi.json": {"get": op("This document", {"200": {"description": "the OpenAPI document",
                                                              **body({"type": "object"})}}, ())},
        "/v1/books": {
            "post": op("Upload a book (any format lorescan.load reads); compiled once and stored",
                       {"201": {"description": "stored by this upload", **body(book)},
                        "200": {"description": "already stored (the same content)", **body(book)}},
                       ("400", "413", "422", "503", "507"),
                       parameters=[
                           {"name": "name", "in": "query", "schema": {"type": "string"},
                            "description": "the book's name (default: from the file)", "examples": ["Saltmere"]},
                           {"name": "filename", "in": "query", "schema": {"type": "string"},
                            "description": "the file name, which picks the format reader for a bare body",
                            "examples": ["saltmere.json"]},
                           {"name": "fill_defaults", "in": "query",
                            "schema": {"type": "boolean", "default": True},
                            "description": "false: read a SillyTavern world's entries as stored",
                            "examples": [True]}],
                       requestBody={"required": True, "content": upload}),
            "get": op("Every stored book", {"200": {"description": "the books", **body(book_list)}}, ())},
        "/v1/books/{book_id}": {
            "parameters": [book_id],
            "get": op("A stored book", {"200": {"description": "the book", **body(book)}}, ("404", "409", "422")),
            "delete": op("Delete a stored book (every replica then answers 404 for it)",
                         {"204": {"description": "deleted"}}, ("404", "422", "503"))},
        "/v1/st/scan": {"post": op(
            "One SillyTavern-mode generation: which entries fire, where they go, the new state",
            {"200": {"description": "the result", **body(res_st)}}, (*turn_errors, "409"),
            requestBody={"required": True, **body(req_st)})},
        "/v1/slot/run": {"post": op(
            "One lorebook-slot request: the slot's messages, the request log, the new state",
            {"200": {"description": "the result", **body(res_slot)}}, turn_errors,
            requestBody={"required": True, **body(req_slot)})},
        "/v1/janitor/run": {"post": op(
            "One run of the JanitorAI script: the texts, the error, the random count, the trace",
            {"200": {"description": "the result", **body(res_jan)}}, turn_errors,
            requestBody={"required": True, **body(req_jan)})},
    }
    for path, item in paths.items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            operation["responses"].update(errors("405"))     # every route answers a wrong method in JSON
            if token and path not in OPEN_ROUTES:
                operation["security"] = [{"bearer": []}]
                operation["responses"].update(errors("401"))
    return {
        "openapi": "3.1.0",
        "info": {"title": "lorescan", "version": API_VERSION,
                 "description": "Exact, fast lorebook (World Info) engine as an HTTP service. See docs/service.md."},
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "LORESCAN_SERVE_TOKEN or --token-file"}}},
    }
