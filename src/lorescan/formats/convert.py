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
from typing import Any, Callable, Mapping, Sequence

from ..errors import FormatError, LorebookError
from ..model import ST_ENTRY_DEFAULTS, Entry, Lorebook
from ._mapping import Loss, LossReport, Origin, json_equal
from . import card, charx, png
from ._safety import dump_json_bytes
from .card import CC_EXT_NAMES, CC_RULES, cc_entry_unmapped, write_character_book
from .foreign import foreign_unmapped
from .janitor import janitor_source, slot_text, write_janitor
from .janitor_convert import janitor_to_st
from .load import load, load_data, read_bytes
from .novelai import novelai_unmapped
from .registry import JSON_WRITERS
from .sillytavern import write_world

__all__ = ["convert", "write_bytes", "TARGETS", "main_convert"]

CC_FORMATS = ("ccv2", "ccv3", "lorebook_v3", "character_book", "png", "charx")
TARGETS = ("sillytavern", "ccv3", "ccv2", "lorebook_v3", "character_book", "png", "charx", "risu", "agnai",
           "novelai", "novelai_story", "kobold", "entry_list", "png_novelai", "janitor")
_ALIASES = {"st": "sillytavern", "world": "sillytavern", "card": "ccv3", "v3": "ccv3", "v2": "ccv2",
            "lorebook": "lorebook_v3", "nai": "novelai", "story": "novelai_story",
            "jai": "janitor", "janitorai": "janitor"}
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
    if book.format == "janitor" and to != "janitor":
        st_book, janitor_losses = janitor_to_st(book, janitor_source(book))
        data, report = convert(st_book, to, base=base)
        return data, LossReport("janitor", to, tuple(janitor_losses) + report.losses)
    if to == "janitor":
        data, losses = write_janitor(book)
        load_data(copy.deepcopy(data), source=book.source)      # it reads back (a writer bug fails here)
        return data, LossReport(book.format, to, tuple(losses))
    try:
        data, losses = _write(book, to, base)
    except RecursionError as exc:      # fields nested up to max_json_depth, copied from a deep call stack
        raise FormatError("a field is nested too deeply to copy from this call depth", source=book.source) from exc
    seen = {(x.entry, x.field) for x in losses}
    back = _read_back(data, to, book.source)
    back_by_uid = {e.uid: e for e in back.entries}
    positional = to in ("risu", "agnai", "novelai", "novelai_story", "png_novelai") or (
        to == "entry_list" and any(not isinstance(e.uid, int) for e in book.entries))
    returned: dict[object, Entry | None] = {}
    for i, e in enumerate(book.entries):
        got = back.entries[i] if positional and i < len(back.entries) else back_by_uid.get(e.uid)
        returned[e.uid] = got
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
    by_uid: dict[object, Entry] = {e.uid: e for e in book.entries}
    real = tuple(x for x in losses if x.entry is None or x.field == "uid"
                 or _really_lost(x, by_uid.get(x.entry), returned.get(x.entry), book, back))
    return data, LossReport(book.format, to, real)


# The values a target reads for a field it cannot hold: SillyTavern's new-entry defaults
# (the model every format maps onto), and "not set".
_ST_DEFAULTS = dict(ST_ENTRY_DEFAULTS)
_UNSET_VALUES: tuple[Any, ...] = (None, "", [], {})
# Fields SillyTavern reads by truthiness, so that 0, false and null all mean "off".
_OFF_WHEN_FALSY = frozenset({"sticky", "cooldown", "delay", "delayUntilRecursion"})


def _really_lost(loss: Loss, entry: Entry | None, got: Entry | None, book: Lorebook, back: Lorebook) -> bool:
    """Whether an entry-level loss a writer reported changes anything.

    Not a loss: a value equal to what the target assumes when the field is absent (the
    SillyTavern default for a SillyTavern field; unset, empty or false for a raw field of
    another format; a field nobody knows always counts), a value that reads back unchanged
    from the written data, and a Character Card field whose content SillyTavern keeps elsewhere (``name`` equal to the
    comment, ``use_regex`` as SillyTavern's own export writes it, a top-level
    ``case_sensitive`` equal to the one SillyTavern reads).
    """
    if entry is None:
        return True
    value = _source_value(loss.field, entry, book)
    if value is _ABSENT:
        return True                         # nothing to judge by: keep the writer's word
    if loss.field in _ST_DEFAULTS:
        default = _ST_DEFAULTS[loss.field]
        if value is None or json_equal(value, default):
            return False
        if loss.field in _OFF_WHEN_FALSY and value in (0, False, None):
            return False
    elif loss.field not in entry.fields and (value is False or any(json_equal(value, unset)
                                                                   for unset in _UNSET_VALUES)):
        return False        # a raw field of the source format left unset (a field lorescan does
        #                     not know, kept in the entry's fields, is always reported)
    if got is not None and json_equal(value, _readback_value(loss.field, got)):
        return False
    if book.format in CC_FORMATS and loss.field in _CC_KEPT_ELSEWHERE:
        return not _CC_KEPT_ELSEWHERE[loss.field](value, entry)
    return True


def _cc_name_kept(value: Any, entry: Entry) -> bool:
    return json_equal(value, entry.fields.get("comment", ""))


def _cc_use_regex_kept(value: Any, entry: Entry) -> bool:
    # SillyTavern detects a regex key by its /.../ form; its own card export always writes true.
    return value is True or not any(_looks_like_regex(k) for k in entry.key + entry.keysecondary)


def _cc_case_kept(value: Any, entry: Entry) -> bool:
    return json_equal(value, entry.fields.get("caseSensitive"))


_CC_KEPT_ELSEWHERE: dict[str, Callable[[Any, Entry], bool]] = {
    "name": _cc_name_kept, "use_regex": _cc_use_regex_kept, "case_sensitive": _cc_case_kept}


def _looks_like_regex(key: object) -> bool:
    return isinstance(key, str) and len(key) > 2 and key.startswith("/") and key.rfind("/") > 0


def _path_get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return _ABSENT
        obj = obj[part]
    return obj


def _source_value(name: str, entry: Entry, book: Lorebook) -> Any:
    """The source's value of a reported field: a SillyTavern field, a card-only field, or a
    raw field of the source format (dotted names reach into nested objects)."""
    value = _path_get(entry.fields, name)
    if value is _ABSENT and name in entry.card_fields:
        value = entry.card_fields[name]
    if value is _ABSENT and isinstance(book.origin, Origin):
        raw = book.origin.raw_entries.get(entry.uid)
        if raw is not None:
            value = _path_get(raw, name)
    return value


def _readback_value(name: str, got: Entry) -> Any:
    value = _path_get(got.fields, name)
    if value is _ABSENT and name in got.card_fields:
        value = got.card_fields[name]
    if value is _ABSENT and name.startswith("extensions."):
        for rule in CC_RULES:          # a CC extension that a mapped SillyTavern field now fills
            if name in rule.raw_keys:
                return got.fields.get(rule.st, _ABSENT)
    return value


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
    """``lorescan convert IN OUT [--to FORMAT] [--force] [--verbose]``.

    Returns:
        0 on success, 2 on bad input or a refused write (the reason goes to stderr).
    """
    parser = argparse.ArgumentParser(
        prog="lorescan convert",
        description="Convert a lorebook between formats and report what the target cannot hold.")
    parser.add_argument("input", help="lorebook file (any supported format, detected from the content)")
    parser.add_argument("output", help="file to write (never the input; an existing file only with --force)")
    parser.add_argument("--to", default=None, choices=sorted(set(TARGETS) | set(_ALIASES)), metavar="FORMAT",
                        help="target format: " + ", ".join(TARGETS) + " (default: from the output's "
                             "extension, " + ", ".join(f"{k} -> {v}" for k, v in _BY_EXTENSION.items()) + ")")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every lost field of every entry, not one line per field")
    args = parser.parse_args(list(argv))
    try:
        to = _ALIASES.get(args.to, args.to) if args.to else _target_from_extension(args.output)
        _check_output(args.input, args.output, force=args.force)
        book = load(args.input)
        data, report = convert(book, to)
        content = write_bytes(data)
        if to == "janitor" and os.path.splitext(args.output)[1].lower() in (".js", ".txt"):
            content = slot_text(data).encode("utf-8")     # the script's data slot, as JavaScript
        with open(args.output, "wb" if args.force else "xb") as fh:
            fh.write(content)
    except LorebookError as exc:
        print(f"lorescan convert: {exc}", file=sys.stderr)
        return 2
    except FileExistsError:
        print(f"lorescan convert: {args.output}: exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"lorescan convert: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(report.render(verbose=args.verbose))
    return 0


# Output extensions that name one format. ``.json`` names none: SillyTavern worlds, cards,
# lorebook_v3, Risu, Agnai and entry lists are all JSON, so a .json output needs --to.
_BY_EXTENSION = {".png": "png", ".charx": "charx", ".lorebook": "novelai", ".js": "janitor"}


def _target_from_extension(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    to = _BY_EXTENSION.get(ext)
    if to is None:
        json_targets = [t for t in TARGETS if t not in ("png", "charx", "png_novelai")]
        what = f"the extension {ext!r}" if ext else "no extension"
        raise LorebookError(f"{what} does not name one format; choose one with --to "
                            f"({', '.join(json_targets)}, ...)", source=path)
    return to


def _check_output(src: str, out: str, *, force: bool) -> None:
    """Refuse to write over the input (whatever the path spelling), and over an existing
    output unless ``force``."""
    try:
        same = os.path.samefile(src, out)
    except OSError:                 # one of them does not exist: not the same file
        same = os.path.abspath(src) == os.path.abspath(out)
    if same:
        raise LorebookError("the output is the input file; write to another file", source=out)
    if os.path.exists(out) and not force:
        raise LorebookError("exists; pass --force to overwrite it", source=out)
