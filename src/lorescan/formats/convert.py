"""Writing a book in any format, with a report of what the target could not hold, and the
``lorescan convert IN OUT [--to FORMAT]`` command (:func:`main_convert`).

Every conversion is checked: the output is read back and each field of each source entry
must come back equal or be listed in the :class:`LossReport` (so nothing is dropped silently).
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
from typing import Any, Sequence

from ..errors import FormatError, LorebookError
from ..model import Lorebook
from ._mapping import Loss, LossReport, Origin, json_equal
from . import card, charx, png
from ._safety import dump_json_bytes
from .card import CC_EXT_NAMES, cc_entry_unmapped, write_character_book
from .foreign import foreign_unmapped
from .load import load, load_data, read_bytes
from .novelai import novelai_unmapped
from .registry import JSON_WRITERS
from .sillytavern import write_world

__all__ = ["convert", "write_bytes", "TARGETS", "main_convert"]

CC_FORMATS = ("ccv2", "ccv3", "lorebook_v3", "character_book", "png", "charx")
TARGETS = ("sillytavern", "ccv3", "ccv2", "lorebook_v3", "character_book", "png", "charx", "risu", "agnai",
           "novelai", "novelai_story", "kobold", "entry_list", "png_novelai")
_ALIASES = {"st": "sillytavern", "world": "sillytavern", "card": "ccv3", "v3": "ccv3", "v2": "ccv2",
            "lorebook": "lorebook_v3", "nai": "novelai", "story": "novelai_story"}
_SAME_ONLY = ("novelai_story", "png_novelai")


def _to_sillytavern(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    if book.format in ("sillytavern", "kobold"):
        return write_world(book), []
    losses: list[Loss] = []
    out: dict[str, Any] = {"entries": {str(e.uid): e.to_dict(include_filled=True) for e in book.entries}}
    origin = book.origin if isinstance(book.origin, Origin) else None
    if book.format in CC_FORMATS:
        cc_book, _ = write_character_book(book, fmt=book.format)
        out["originalData"] = cc_book          # as SillyTavern keeps it on import (docs/sillytavern-mode.md#st-import)
        for e in book.entries:
            raw = origin.raw_entries.get(e.uid) if origin else None
            for name, why in (cc_entry_unmapped(raw) if raw is not None else ()):
                losses.append(Loss(e.uid, name, why + " (kept only in originalData)"))
        for k in book.fields:
            if k != "name":
                losses.append(Loss(None, k, "no SillyTavern book field (kept only in originalData)"))
    else:
        losses += _foreign_losses(book)
    return out, losses


def _foreign_losses(book: Lorebook) -> list[Loss]:
    origin = book.origin if isinstance(book.origin, Origin) else None
    losses = []
    for e in book.entries:
        raw = origin.raw_entries.get(e.uid) if origin else None
        if raw is None:
            continue
        pairs = novelai_unmapped(raw) if book.format in ("novelai", "novelai_story", "png_novelai") else \
            foreign_unmapped(book, raw)
        losses += [Loss(e.uid, n, w) for n, w in pairs]
    for k in book.fields:
        if k not in ("name",):
            losses.append(Loss(None, k, f"{book.format} book field with no counterpart in the target"))
    return losses


def _write(book: Lorebook, to: str, base: bytes | None) -> tuple[Any, list[Loss]]:
    data: Any                   # the written document: a JSON value, or bytes (png, charx)
    src = book.format
    if to == "sillytavern":
        return _to_sillytavern(book)
    losses: list[Loss] = []
    if src not in CC_FORMATS and src != to and src not in ("sillytavern",):
        losses += _foreign_losses(book)
    if to in ("ccv2", "ccv3"):
        keep = src in ("ccv2", "ccv3", "png", "charx")
        spec = "chara_card_v3" if to == "ccv3" else "chara_card_v2"
        data, lost = card.write_card(book, card=None if keep else card.new_card(book.name, spec), fmt=to)
        if keep and src != to:
            data["spec"], data["spec_version"] = spec, "3.0" if to == "ccv3" else "2.0"
        return data, losses + lost
    if to == "lorebook_v3":
        data, lost = card.write_lorebook_v3(book)
        return data, losses + lost
    if to == "character_book":
        data, lost = card.write_character_book(book, fmt=to)
        return data, losses + lost
    if to == "png":
        data, lost = png.write_png(book, base=base)
        return data, losses + lost
    if to == "charx":
        data, lost = charx.write_charx(book, base=base)
        return data, losses + lost
    if to in _SAME_ONLY and src != to:
        raise FormatError(f"cannot write {to} from a {src} book (only a book read from {to})", source=book.source)
    if to == "png_novelai":
        data, lost = png.write_png(book, base=base)
        return data, losses + lost
    writer = JSON_WRITERS.get(to)
    if writer is None:
        raise FormatError(f"unknown target format {to!r} (one of: {', '.join(TARGETS)})", source=book.source)
    data, lost = writer(book)
    return data, losses + lost


def _read_back(data: Any, to: str, source: str) -> Lorebook:
    if isinstance(data, bytes):
        return read_bytes(data, source=source)
    return load_data(copy.deepcopy(data), source=source)


def convert(book: Lorebook, to: str | None = None, *, base: bytes | None = None) -> tuple[Any, LossReport]:
    """The book written as format ``to``, and what did not carry over.

    Args:
        book: the book to write.
        to: a name in ``TARGETS`` (cross-format writers: SillyTavern, CCv2/CCv3 cards,
            lorebook_v3, character_book, PNG, CHARX; the rest also accept books of another
            format where the mapping allows) or an alias; default: the book's own format.
        base: for ``png`` and ``charx``, the image/archive to write into (default: the one
            the book was read from, else a new one).

    Returns:
        ``(data, report)``: JSON data (dict/list), or bytes for ``png`` and ``charx``; the
        :class:`LossReport` of every field the target could not hold (checked by reading
        the output back).

    Raises:
        FormatError: an unknown target, or one that only holds books read from it.
    """
    to = _ALIASES.get(to, to) if to else book.format
    try:
        data, losses = _write(book, to, base)
    except RecursionError as exc:      # fields nested up to max_json_depth, copied from a deep call stack
        raise FormatError("a field is nested too deeply to copy from this call depth", source=book.source) from exc
    seen = {(x.entry, x.field) for x in losses}
    back = _read_back(data, to, book.source)
    back_by_uid = {e.uid: e for e in back.entries}
    positional = to in ("risu", "agnai", "novelai", "novelai_story", "png_novelai") or (
        to == "entry_list" and any(not isinstance(e.uid, int) for e in book.entries))
    for i, e in enumerate(book.entries):
        got = back.entries[i] if positional and i < len(back.entries) else back_by_uid.get(e.uid)
        if got is None:
            if (e.uid, "uid") not in seen:
                losses.append(Loss(e.uid, "uid", f"entry did not come back from {to} under this uid"))
            continue
        for name, value in e.fields.items():
            if name in e.filled or (e.uid, name) in seen or (positional and name in ("uid", "displayIndex")):
                continue
            new = got.fields.get(name, _ABSENT)
            if name == "extensions" and isinstance(value, dict) and to in CC_FORMATS:
                value = {k: v for k, v in value.items() if k not in CC_EXT_NAMES}
            if new is _ABSENT:
                losses.append(Loss(e.uid, name, f"{to} has no field for it"))
            elif not json_equal(value, new):
                losses.append(Loss(e.uid, name, f"{to} cannot hold {value!r:.40}; it reads back as {new!r:.40}"))
    return data, LossReport(book.format, to, tuple(losses))


_ABSENT = object()


def write_bytes(data: Any) -> bytes:
    """File content for :func:`convert`'s output.

    Args:
        data: what :func:`convert` returned (JSON data, or bytes for ``png``/``charx``).

    Returns:
        The bytes to write: JSON indented, UTF-8; bytes as they are.

    Raises:
        FormatError: a value JSON cannot hold (NaN, Infinity).
    """
    if isinstance(data, bytes):
        return data
    try:
        return dump_json_bytes(data, indent=2)
    except ValueError as exc:        # NaN or Infinity in a book built in memory: not JSON
        raise FormatError(f"cannot write JSON: {exc}", source="<output>") from exc


def main_convert(argv: Sequence[str]) -> int:
    """``lorescan convert IN OUT [--to FORMAT]``: exit 0 on success, 2 on a LorebookError."""
    parser = argparse.ArgumentParser(prog="lorescan convert",
                                     description="Convert a lorebook between formats and report what is lost.")
    parser.add_argument("input", help="lorebook file (any supported format, detected from the content)")
    parser.add_argument("output", help="file to write")
    parser.add_argument("--to", default=None, choices=sorted(set(TARGETS) | set(_ALIASES)),
                        help="target format (default: from the output extension, else the input's format)")
    args = parser.parse_args(list(argv))
    try:
        book = load(args.input)
        to = args.to or _guess_target(args.output, book)
        data, report = convert(book, to)
        with open(args.output, "wb") as fh:
            fh.write(write_bytes(data))
    except LorebookError as exc:
        print(f"lorescan convert: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"lorescan convert: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 0


def _guess_target(path: str, book: Lorebook) -> str:
    ext = os.path.splitext(path)[1].lower()
    return {".png": "png", ".charx": "charx", ".lorebook": "novelai"}.get(ext, book.format)
