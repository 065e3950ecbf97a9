"""Request bodies into models: reading a body within its size limit, msgspec's one-pass decode, the
error answers (:class:`HTTPError`, the ``ErrorBody`` shape), and two things msgspec alone gets wrong.

- An integral number written with a fraction or exponent (``8192.0``, ``1e3``) is an integer in
  JSON Schema, which ``/openapi.json`` promises; msgspec refuses it for an ``int`` field. Such a
  body is decoded again with each refused value, at the path msgspec names, turned into the
  integer it equals. Only a body msgspec refused takes this path, so a well-formed request still
  costs one decode.
- The free-form fields (``timed_effects``, ``state``) take any JSON: nested thousands of levels
  deep it would exhaust the engines' recursion. It is refused past ``Limits.max_json_depth`` (a
  body deeper than msgspec itself reads, about a thousand levels, is refused at ``$``).
"""
from __future__ import annotations

import re
from typing import Any

import msgspec

from starlette.requests import ClientDisconnect, Request

from ..limits import DEFAULT_LIMITS

__all__ = ["FREE_FIELDS", "HTTPError", "decode_request", "read_body", "read_request"]

FREE_FIELDS = ("timed_effects", "state")        # dict[str, Any] in the request models
_INT_GOT_FLOAT = re.compile(r"^Expected `[^`]*\bint\b[^`]*`, got `float` - at `\$([^`]*)`$")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[(\"(?:[^\"\\]|\\.)*\")\]")
_MAX_RETRIES = 1000             # integral floats fixed in one body; past that the first error stands
_PATH_AT = re.compile(r" - at `(\$[^`]*)`$")


class HTTPError(Exception):
    """An answer other than 200: status and JSON body (models.ErrorBody)."""

    def __init__(self, status: int, error: str, *, retry_after: int | None = None, **extra: Any) -> None:
        super().__init__(error)
        self.status = status
        self.retry_after = retry_after
        self.body = {"error": error, **{k: v for k, v in extra.items() if v is not None}}

    @property
    def headers(self) -> dict[str, str] | None:
        """The answer's headers: ``WWW-Authenticate`` on a 401, ``Retry-After`` when one is set."""
        if self.status == 401:
            return {"www-authenticate": "Bearer"}
        if self.retry_after is not None:
            return {"retry-after": str(self.retry_after)}
        return None


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body; a 413 past ``limit`` bytes (declared or streamed).

    Read from the ASGI messages directly (Starlette's ``Request.stream`` async generator cost a
    trivial turn a tenth of its worker time), and a body that came in one message is returned
    as it is, without a copy."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPError(413, f"the request body is {int(declared)} bytes, above the limit of {limit} bytes")
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise HTTPError(413, f"the request body is above the limit of {limit} bytes")
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        elif kind == "http.disconnect":
            raise ClientDisconnect()
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


def read_request(decoder: msgspec.json.Decoder, body: bytes) -> Any:
    """:func:`decode_request`, its errors as answers: 400 (not JSON), 422 with the field's path."""
    try:
        return decode_request(decoder, body)
    except msgspec.ValidationError as exc:
        text = str(exc)
        found = _PATH_AT.search(text)
        raise HTTPError(422, text, path=found.group(1) if found else "$") from None
    except msgspec.DecodeError as exc:
        raise HTTPError(400, f"malformed JSON: {exc}", path="$") from None


def decode_request(decoder: msgspec.json.Decoder, body: bytes) -> Any:
    """The request ``body`` as ``decoder``'s type.

    Raises:
        msgspec.DecodeError: not JSON.
        msgspec.ValidationError: not the request's shape; the text ends `` - at `$.path` ``.
    """
    try:
        try:
            value = decoder.decode(body)
        except msgspec.ValidationError as exc:
            value = _integral_retry(decoder.type, body, exc)     # decodes the body again, untyped
    except RecursionError:          # msgspec's own limit, near Python's recursion limit
        raise msgspec.ValidationError("JSON nested too deeply to read - at `$`") from None
    for name in FREE_FIELDS:
        found = getattr(value, name, None)
        if found is not None:
            _check_depth(found, f"$.{name}", DEFAULT_LIMITS.max_json_depth)
    return value


def _integral_retry(kind: Any, body: bytes, first: msgspec.ValidationError) -> Any:
    """``body`` decoded as ``kind`` with every integral float msgspec refuses for an int made an int;
    ``first`` again when a refusal is anything else."""
    raw = msgspec.json.decode(body)
    exc: msgspec.ValidationError = first
    for _ in range(_MAX_RETRIES):
        found = _INT_GOT_FLOAT.match(str(exc))
        if found is None or not _make_int(raw, found.group(1)):
            raise first
        try:
            return msgspec.convert(raw, kind)
        except msgspec.ValidationError as again:
            exc = again
    raise first


def _make_int(raw: Any, path: str) -> bool:
    """Turn the integral float at ``path`` (msgspec's ``.name[3]`` form) of ``raw`` into an int;
    False when there is none there."""
    steps: list[Any] = []
    pos = 0
    while pos < len(path):
        step = _STEP.match(path, pos)
        if step is None:
            return False
        name, index, quoted = step.groups()
        steps.append(name if name is not None else int(index) if index is not None else msgspec.json.decode(quoted))
        pos = step.end()
    if not steps:
        return False
    parent = raw
    try:
        for key in steps[:-1]:
            parent = parent[key]
        value = parent[steps[-1]]
    except (KeyError, IndexError, TypeError):
        return False
    if not isinstance(value, float) or not value.is_integer():
        return False
    parent[steps[-1]] = int(value)
    return True


def _check_depth(value: Any, path: str, limit: int) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise msgspec.ValidationError(f"nested deeper than {limit} levels - at `{path}`")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
