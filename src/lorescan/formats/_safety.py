"""Limits for hostile input: file size, decompression, zip members, JSON nesting.

Every reader goes through these helpers, so a malformed or hostile file ends in a
:class:`~lorescan.errors.FormatError` naming the file, never in an unbounded allocation
or a bare ``zlib.error`` / ``RecursionError`` / ``UnicodeDecodeError``.
"""
from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError

__all__ = ["Limits", "DEFAULT_LIMITS", "parse_json", "inflate", "check_depth", "dump_json_bytes"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits applied while reading untrusted files.

    ``max_file_bytes``: the whole input; ``max_inflated_bytes``: one decompressed PNG text
    chunk or zip member; ``max_zip_members`` / ``max_zip_total_bytes``: the central directory
    of a CHARX (declared sizes of all members); ``max_json_depth``: nesting of arrays/objects;
    ``max_png_chunks``: chunks in one PNG.
    """

    max_file_bytes: int = 64 * MiB
    max_inflated_bytes: int = 32 * MiB
    max_zip_members: int = 10_000
    max_zip_total_bytes: int = 512 * MiB
    max_json_depth: int = 256
    max_png_chunks: int = 100_000


DEFAULT_LIMITS = Limits()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_depth(value: Any, *, limit: int, source: str) -> None:
    """Raise FormatError if ``value`` nests deeper than ``limit`` (iterative, no recursion)."""
    stack = [(value, 1)]
    children: Iterable[Any]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise FormatError(f"JSON nested deeper than {limit} levels", source=source)
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


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
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise FormatError("JSON nested too deeply", source=source) from exc
    except json.JSONDecodeError as exc:
        raise FormatError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                          source=source) from exc
    except ValueError as exc:          # NaN/Infinity, integers past the digit limit
        raise FormatError(f"not valid JSON: {exc}", source=source) from exc
    check_depth(value, limit=limits.max_json_depth, source=source)
    return value


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
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, indent=indent).encode("ascii")
