"""Limits for hostile input: file size, decompression, zip members, JSON nesting.

Every reader goes through these helpers, so a malformed or hostile file ends in a
:class:`~lorescan.errors.FormatError` naming the file, never in an unbounded allocation
or a bare ``zlib.error`` / ``RecursionError`` / ``UnicodeDecodeError``.
"""
from __future__ import annotations

import json
import math
import re
import zlib
from itertools import compress
from typing import Any

from ..errors import FormatError
from ..limits import DEFAULT_LIMITS, Limits

__all__ = ["Limits", "DEFAULT_LIMITS", "parse_json", "cap_entries", "inflate", "check_depth", "dump_json_bytes"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):       # 1e999: JSON.parse gives Infinity, which no writer can write back
        raise ValueError(f"the number {text[:40]} is out of range (not finite)")
    return value


# A string once its escapes are gone: one repeat of one character class, which the regex
# engine runs without a backtracking frame per character (the old "(?:[^"\\]|\\.)*" kept
# one per character: ~117 bytes of stack each, 2.5 GB for a 27 KB PNG's inflated card).
_BARE_STRING = re.compile(r'"[^"]*"')


def count_containers(text: str) -> int:
    """How many arrays and objects the JSON ``text`` holds (braces inside strings do not count).

    Linear time and a constant number of text copies: escaped backslashes are dropped
    first (left to right, as a reader pairs them), then escaped quotes, so every quote left
    opens or closes a string."""
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    bare = _BARE_STRING.sub("", text)
    return bare.count("{") + bare.count("[")


def check_depth(value: Any, *, limit: int, source: str) -> None:
    """Raise FormatError if ``value`` nests deeper than ``limit`` (iterative, no recursion):
    level by level, each level the arrays and objects one deeper than the last."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise FormatError(f"JSON nested deeper than {limit} levels", source=source)
        deeper: list[Any] = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item
            types = set(map(type, values))
            if types <= _JSON_SCALARS:
                continue
            if types <= _JSON_TYPES:    # what a JSON parser makes: the containers picked out in C
                deeper += compress(values, map(_PLAIN_CONTAINERS.__contains__, map(type, values)))
            else:
                deeper += [c for c in values if isinstance(c, _CONTAINERS)]
        level = deeper


_CONTAINERS = (dict, list)
_PLAIN_CONTAINERS = frozenset(_CONTAINERS)
_JSON_SCALARS = frozenset((str, int, float, bool, type(None)))
_JSON_TYPES = _JSON_SCALARS | _PLAIN_CONTAINERS


def parse_json(data: bytes | str, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse JSON text (UTF-8, BOM allowed) strictly, as JSON.parse would, within ``limits``."""
    if len(data) > limits.max_file_bytes:
        raise FormatError(f"input is {len(data)} bytes, above the {limits.max_file_bytes}-byte limit",
                          source=source)
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", source=source) from exc
    else:
        text = data.removeprefix("\ufeff")
    # Each array or object costs ~70 bytes parsed: count them before parsing, so 32 MB of
    # "[{},{},...]" is refused at once instead of costing 800 MB. A text shorter than twice
    # the limit cannot exceed it, so ordinary books skip the count.
    if len(text) > 2 * limits.max_json_containers:
        n = count_containers(text)
        if n > limits.max_json_containers:
            raise FormatError(f"JSON holds {n} arrays and objects, above the limit max_json_containers="
                              f"{limits.max_json_containers}", source=source)
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise FormatError("JSON nested too deeply", source=source) from exc
    except json.JSONDecodeError as exc:
        raise FormatError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                          source=source) from exc
    except ValueError as exc:          # NaN/Infinity, 1e999, integers past the digit limit
        raise FormatError(f"not valid JSON: {exc}", source=source) from exc
    check_depth(value, limit=limits.max_json_depth, source=source)
    return value


def cap_entries(doc: Any, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """``doc`` itself, after refusing more than ``max_entries`` entries in the places a book
    keeps them (before ~3 KB per entry is spent reading an entry-count bomb)."""
    places = [doc]
    if isinstance(doc, dict):
        places.append(doc.get("entries"))
        for outer in ("data", "content"):
            inner = doc.get(outer)
            if isinstance(inner, dict):
                places.append(inner.get("entries"))
                for book in ("character_book", "lorebook"):
                    if isinstance(inner.get(book), dict):
                        places.append(inner[book].get("entries"))
    for entries in places:
        if isinstance(entries, (list, dict)) and len(entries) > limits.max_entries:
            raise FormatError(f"the book has {len(entries)} entries, above the limit max_entries="
                              f"{limits.max_entries}", source=source, field="entries")
    return doc


def inflate(data: bytes, *, source: str, what: str, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """zlib-decompress ``data`` incrementally, refusing output beyond ``max_inflated_bytes``."""
    cap = limits.max_inflated_bytes
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, cap + 1)
        if len(out) > cap or d.unconsumed_tail:
            raise FormatError(f"{what} inflates beyond the {cap}-byte limit", source=source, field=what)
        out += d.flush()
    except zlib.error as exc:
        raise FormatError(f"{what}: bad zlib data: {exc}", source=source, field=what) from exc
    if len(out) > cap:
        raise FormatError(f"{what} inflates beyond the {cap}-byte limit", source=source, field=what)
    if not d.eof:
        raise FormatError(f"{what}: truncated zlib stream", source=source, field=what)
    return out


def dump_json_bytes(value: Any, *, indent: int | None = None) -> bytes:
    """JSON text as UTF-8 (``ensure_ascii`` only when a lone surrogate forces it)."""
    # allow_nan=False: a non-finite number would be written as the bare token NaN or
    # Infinity, which is not JSON (ValueError; the writers check numbers before this).
    text = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, indent=indent, allow_nan=False).encode("ascii")
