"""CHARX: a zip holding ``card.json`` (a V3 card) and assets. Read in memory, never extracted.

Limits: member count, total declared size, and the inflated size of ``card.json`` (read
incrementally, so a member that lies about its size is still capped). Member names with
``..`` parts, absolute paths or drive letters are ignored when looking for the card.
"""
from __future__ import annotations

import io
import struct
import zipfile
import zlib
from typing import Any

from ..errors import FormatError
from ..model import Lorebook
from .card import new_card, read_card, write_card
from ._mapping import Loss, Origin
from ._safety import DEFAULT_LIMITS, Limits, cap_entries, dump_json_bytes, parse_json

__all__ = ["is_zip", "read_charx", "write_charx"]

# zipfile raises many kinds of errors on corrupt archives; each becomes a FormatError.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError,
               OSError, zlib.error, ValueError, struct.error, KeyError, IndexError, OverflowError,
               UnicodeDecodeError, TypeError, AttributeError)


def is_zip(data: bytes) -> bool:
    """True when ``data`` starts like a zip archive."""
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06")


def _safe_name(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return not (name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"))


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, *, source: str, limits: Limits) -> bytes:
    cap = limits.max_inflated_bytes
    if info.file_size > cap:
        raise FormatError(f"{info.filename} declares {info.file_size} bytes, above the {cap}-byte limit",
                          source=source, field=info.filename)
    with zf.open(info) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise FormatError(f"{info.filename} inflates beyond the {cap}-byte limit", source=source,
                          field=info.filename)
    return data


def _open(data: bytes, *, source: str, limits: Limits) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    if len(data) > limits.max_file_bytes:
        raise FormatError(f"input is {len(data)} bytes, above the {limits.max_file_bytes}-byte limit",
                          source=source)
    zf = zipfile.ZipFile(io.BytesIO(data))
    infos = zf.infolist()
    if len(infos) > limits.max_zip_members:
        raise FormatError(f"zip has {len(infos)} members, above the limit of {limits.max_zip_members}",
                          source=source)
    total = sum(i.file_size for i in infos)
    if total > limits.max_zip_total_bytes:
        raise FormatError(f"zip members declare {total} bytes, above the {limits.max_zip_total_bytes}-byte "
                          "limit", source=source)
    return zf, infos


def read_charx(data: bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """The lorebook of a CHARX card (``card.json`` at the archive root)."""
    try:
        zf, infos = _open(data, source=source, limits=limits)
        with zf:
            card_info = next((i for i in infos if i.filename == "card.json" and _safe_name(i.filename)), None)
            if card_info is None:
                raise FormatError("zip has no card.json at its root (not a CHARX card)", source=source)
            raw = _read_member(zf, card_info, source=source, limits=limits)
    except FormatError:
        raise
    except _ZIP_ERRORS as exc:
        raise FormatError(f"bad zip archive: {exc}", source=source) from exc
    card = cap_entries(parse_json(raw, source=f"{source}[card.json]", limits=limits),
                       source=f"{source}[card.json]", limits=limits)
    return read_card(card, source=source, fmt="charx", container=bytes(data))


def write_charx(book: Lorebook, *, base: bytes | None = None,
                limits: Limits = DEFAULT_LIMITS) -> tuple[bytes, list[Loss]]:
    """A CHARX with the book in card.json; other members are copied (names kept as they are)."""
    origin = book.origin if isinstance(book.origin, Origin) else None
    if base is None and origin is not None and book.format == "charx":
        base = origin.container
    card: Any = None
    members: list[tuple[zipfile.ZipInfo, bytes]] = []
    if base:
        try:
            zf, infos = _open(base, source=book.source, limits=limits)
            with zf:
                for info in infos:
                    body = _read_member(zf, info, source=book.source, limits=limits)
                    if info.filename == "card.json":
                        card = parse_json(body, source=f"{book.source}[card.json]", limits=limits)
                    members.append((info, body))
        except FormatError:
            raise
        except _ZIP_ERRORS as exc:
            raise FormatError(f"bad zip archive: {exc}", source=book.source) from exc
    new, losses = write_card(book, card=card if card is not None else new_card(book.name), fmt="charx")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zw:
        if not any(i.filename == "card.json" for i, _ in members):
            zw.writestr("card.json", dump_json_bytes(new), compress_type=zipfile.ZIP_DEFLATED)
        for info, body in members:
            if info.filename == "card.json":
                body = dump_json_bytes(new)
            zw.writestr(info, body, compress_type=info.compress_type)
    return out.getvalue(), losses
