"""PNG character cards: the card JSON lives base64-encoded in a ``ccv3`` and/or ``chara``
text chunk (tEXt, zTXt or iTXt). V3 (``ccv3``) is read first when both are present.

Writing replaces those chunks in place (or inserts them before IEND) as tEXt, recomputing
CRCs, and copies every other chunk byte for byte.
"""
from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from dataclasses import replace
from typing import Any, NamedTuple

from ..errors import FormatError
from ..model import Lorebook
from ._mapping import Loss, Origin, json_equal
from .card import new_card, read_card, write_card
from .novelai import read_novelai, write_novelai
from ._safety import DEFAULT_LIMITS, Limits, cap_entries, inflate, parse_json

__all__ = ["PNG_SIGNATURE", "is_png", "read_png", "write_png", "png_chunks", "text_chunks",
           "make_png", "make_chunk"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("ccv3", "chara")


class Chunk(NamedTuple):
    type: bytes
    start: int        # offset of the length field
    end: int          # offset after the CRC
    data: bytes


def is_png(data: bytes) -> bool:
    """True when ``data`` starts with the PNG signature."""
    return data[:8] == PNG_SIGNATURE


def png_chunks(data: bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> list[Chunk]:
    """Split a PNG into chunks, checking lengths and CRCs."""
    if not is_png(data):
        raise FormatError("not a PNG file (bad signature)", source=source)
    pos, n, chunks = 8, len(data), []
    while pos < n:
        if pos + 12 > n:
            raise FormatError(f"truncated chunk header at byte {pos}", source=source)
        (length,) = struct.unpack_from(">I", data, pos)
        ctype = data[pos + 4:pos + 8]
        end = pos + 12 + length
        if length > 0x7FFFFFFF or end > n:
            raise FormatError(f"chunk {ctype!r} at byte {pos} runs past the end of the file",
                              source=source, field=ctype.decode("latin-1"))
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack_from(">I", data, pos + 8 + length)
        if zlib.crc32(ctype + body) != crc:
            raise FormatError(f"bad CRC in chunk {ctype!r} at byte {pos}", source=source,
                              field=ctype.decode("latin-1"))
        chunks.append(Chunk(ctype, pos, end, body))
        if len(chunks) > limits.max_png_chunks:
            raise FormatError(f"more than {limits.max_png_chunks} chunks", source=source)
        pos = end
        if ctype == b"IEND":
            break
    return chunks


def _text_of(chunk: Chunk, *, source: str, limits: Limits) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt/zTXt/iTXt chunk, None for other chunks."""
    body = chunk.data
    if chunk.type not in (b"tEXt", b"zTXt", b"iTXt"):
        return None
    sep = body.find(b"\0")
    if sep < 0:
        raise FormatError(f"{chunk.type.decode()} chunk without a keyword separator", source=source,
                          field=chunk.type.decode())
    keyword = body[:sep].decode("latin-1")
    rest = body[sep + 1:]
    what = f"{chunk.type.decode()} {keyword!r}"
    if chunk.type == b"tEXt":
        return keyword, rest.decode("latin-1")
    if chunk.type == b"zTXt":
        if not rest or rest[0] != 0:
            raise FormatError(f"{what}: unknown compression method", source=source, field=keyword)
        return keyword, inflate(rest[1:], source=source, what=keyword, limits=limits).decode("latin-1")
    if len(rest) < 2:
        raise FormatError(f"{what}: truncated header", source=source, field=keyword)
    flag, method, rest = rest[0], rest[1], rest[2:]
    parts = rest.split(b"\0", 2)
    if len(parts) != 3:
        raise FormatError(f"{what}: truncated header", source=source, field=keyword)
    text = parts[2]
    if flag == 1:
        if method != 0:
            raise FormatError(f"{what}: unknown compression method", source=source, field=keyword)
        text = inflate(text, source=source, what=keyword, limits=limits)
    elif flag != 0:
        raise FormatError(f"{what}: bad compression flag {flag}", source=source, field=keyword)
    try:
        return keyword, text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{what}: text is not UTF-8", source=source, field=keyword) from exc


def text_chunks(data: bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> dict[str, str]:
    """The card text chunks of a PNG by keyword (first one of each keyword wins)."""
    out: dict[str, str] = {}
    total = 0
    for chunk in png_chunks(data, source=source, limits=limits):
        if chunk.type in (b"tEXt", b"zTXt", b"iTXt"):
            kw = chunk.data.split(b"\0", 1)[0].decode("latin-1")
            if kw in CARD_KEYWORDS + ("naidata",) and kw not in out:
                got = _text_of(chunk, source=source, limits=limits)
                if got is not None:
                    out[kw] = got[1]
                    total += len(got[1])
                    if total > limits.max_total_inflated_bytes:
                        raise FormatError(f"card text chunks hold more than max_total_inflated_bytes="
                                          f"{limits.max_total_inflated_bytes} bytes", source=source, field=kw)
    return out


def decode_card_text(text: str, *, source: str, keyword: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The JSON in a card chunk: base64 of UTF-8 JSON (plain JSON is accepted too)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        raw = stripped.encode("utf-8", "surrogatepass")
    else:
        try:
            raw = base64.b64decode(stripped.encode("ascii"), validate=False)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise FormatError(f"chunk {keyword!r} is not base64: {exc}", source=source,
                              field=keyword) from exc
    return cap_entries(parse_json(raw, source=f"{source}[{keyword}]", limits=limits),
                       source=f"{source}[{keyword}]", limits=limits)


def read_png(data: bytes, *, source: str, limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """The lorebook of a PNG card (``ccv3`` chunk first, else ``chara``)."""
    texts = text_chunks(data, source=source, limits=limits)
    cards = {kw: decode_card_text(texts[kw], source=source, keyword=kw, limits=limits)
             for kw in CARD_KEYWORDS if kw in texts}
    if not cards:
        if "naidata" in texts:
            doc = decode_card_text(texts["naidata"], source=source, keyword="naidata", limits=limits)
            book = read_novelai(doc, source=source)
            return _with_container(book, data, "png_novelai")
        raise FormatError("PNG has no 'ccv3' or 'chara' card chunk", source=source)
    primary = "ccv3" if "ccv3" in cards else "chara"
    return read_card(cards[primary], source=source, fmt="png", container=bytes(data),
                     extra={"cards": cards, "primary": primary})


def _with_container(book: Lorebook, data: bytes, fmt: str) -> Lorebook:
    o = book.origin
    return replace(book, format=fmt, origin=Origin(o.document, o.raw_entries, o.read_fields, o.order,
                                                   bytes(data), dict(o.extra)))


def make_chunk(ctype: bytes, body: bytes) -> bytes:
    """One PNG chunk with its length and CRC."""
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def _text_chunk(keyword: str, card: Any) -> bytes:
    payload = base64.b64encode(json.dumps(card, ensure_ascii=True, allow_nan=False).encode("ascii"))
    return make_chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + payload)


def make_png() -> bytes:
    """A valid 1x1 transparent PNG, the base for a card written from a book alone."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    idat = zlib.compress(b"\0\0\0\0\0")
    return PNG_SIGNATURE + make_chunk(b"IHDR", ihdr) + make_chunk(b"IDAT", idat) + make_chunk(b"IEND", b"")


def write_png(book: Lorebook, *, base: bytes | None = None,
              limits: Limits = DEFAULT_LIMITS) -> tuple[bytes, list[Loss]]:
    """The book written into a PNG card; other chunks are copied unchanged.

    ``base`` defaults to the PNG the book was read from (else a 1x1 image). Each card chunk
    present is updated (a chunk whose card does not change keeps its original bytes); a book
    from elsewhere gets both a ``ccv3`` (V3) and a ``chara`` (V2) chunk.
    """
    origin = book.origin if isinstance(book.origin, Origin) else None
    if base is None:
        base = origin.container if origin is not None and origin.container and book.format in (
            "png", "png_novelai") else make_png()
    source = book.source
    chunks = png_chunks(base, source=source, limits=limits)
    texts = text_chunks(base, source=source, limits=limits)
    old_cards = {kw: decode_card_text(texts[kw], source=source, keyword=kw, limits=limits)
                 for kw in CARD_KEYWORDS if kw in texts}
    new_cards: dict[str, Any] = {}
    losses: list[Loss] = []
    kw: str | None              # a card keyword; below, a chunk's (None: not a text chunk)
    if book.format == "png_novelai":
        doc, losses = write_novelai(book)
        new_cards["naidata"] = doc
        old_cards["naidata"] = None
    elif not old_cards:
        for kw, spec in (("ccv3", "chara_card_v3"), ("chara", "chara_card_v2")):
            card, lost = write_card(book, card=new_card(book.name, spec), fmt="png")
            new_cards[kw], losses = card, losses or lost
    else:
        for kw, card in old_cards.items():
            new, lost = write_card(book, card=card, fmt="png")
            new_cards[kw] = new
            losses = losses or lost      # the same book goes into each chunk: report once
    out = [base[:8]]
    written: set[str] = set()
    for chunk in chunks:
        kw = chunk.data.split(b"\0", 1)[0].decode("latin-1") if chunk.type in (b"tEXt", b"zTXt", b"iTXt") else None
        if kw in new_cards:
            if kw in written:
                continue                  # a duplicate card chunk: the first one was replaced
            written.add(kw)
            old = old_cards.get(kw)
            out.append(base[chunk.start:chunk.end] if old is not None and json_equal(old, new_cards[kw])
                       else _text_chunk(kw, new_cards[kw]))
            continue
        if chunk.type == b"IEND":
            out += [_text_chunk(kw, c) for kw, c in new_cards.items() if kw not in written]
            written.update(new_cards)
        out.append(base[chunk.start:chunk.end])
    out += [_text_chunk(kw, c) for kw, c in new_cards.items() if kw not in written]  # no IEND
    out.append(base[chunks[-1].end:] if chunks else b"")
    return b"".join(out), losses
