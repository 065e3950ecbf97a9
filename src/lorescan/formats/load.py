"""Reading any lorebook file: format detection from the content, never from the file name."""
from __future__ import annotations

import os
from typing import Any, Mapping

from ..errors import FormatError
from ..limits import check_book
from ..model import Lorebook
from ._safety import DEFAULT_LIMITS, Limits, cap_entries, parse_json
from .card import is_cc_entry_list
from .janitor import is_janitor_json
from .registry import JSON_READERS, byte_reader

__all__ = ["load", "load_data", "detect_format", "read_bytes"]


def detect_format(doc: Any) -> str:
    """The format name of parsed JSON ``doc`` (see :func:`load`).

    Returns:
        A :data:`~lorescan.formats.registry.FormatName` of a JSON format, or ``"unknown"``
        (never raises).
    """
    if is_janitor_json(doc):       # JanitorAI entries (or {"dynamicLore": ...}); before generic entry lists
        return "janitor"
    if isinstance(doc, list):
        return "entry_list"
    if not isinstance(doc, Mapping):
        return "unknown"
    if doc.get("spec") == "lorebook_v3":
        return "lorebook_v3"
    if doc.get("spec") in ("chara_card_v2", "chara_card_v3") or (
            isinstance(doc.get("data"), Mapping) and "character_book" in doc["data"]):
        return "ccv3" if doc.get("spec") == "chara_card_v3" else "ccv2"
    if "lorebookVersion" in doc:
        return "novelai"
    content = doc.get("content")
    if "storyContainerVersion" in doc or (isinstance(content, Mapping) and "lorebook" in content):
        return "novelai_story"
    if doc.get("kind") == "memory":
        return "agnai"
    if doc.get("type") == "risu":
        return "risu"
    entries = doc.get("entries")
    if isinstance(entries, list):
        return "character_book" if is_cc_entry_list(entries) else "sillytavern"
    if isinstance(entries, Mapping):
        if "folders" in doc or any(isinstance(e, Mapping) and ("wpp" in e or "manual_text" in e)
                                   for e in entries.values()):
            return "kobold"
        return "sillytavern"
    if isinstance(doc.get("data"), Mapping) and isinstance(doc.get("spec"), str):
        return "ccv2"
    return "unknown"


def load_data(doc: Any, *, source: str = "<memory>", limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """A Lorebook from already-parsed JSON data of any supported format.

    Args:
        doc: the parsed JSON value (its depth and numbers are the caller's to bound).
        source: names the data in errors.
        limits: bounds on entries, key and content lengths.

    Returns:
        The book, its format detected from the content (:func:`detect_format`).

    Raises:
        FormatError: no format recognised, or a field nested too deeply to read.
        LorebookError: a malformed entry or field, or a book over ``limits``.
    """
    try:
        book = _read_data(cap_entries(doc, source=source, limits=limits), source)
    except RecursionError as exc:      # fields nested up to max_json_depth, read from a deep call stack
        raise FormatError("a field is nested too deeply to read from this call depth", source=source) from exc
    check_book(book, limits, source=source)
    return book


def _read_data(doc: Any, source: str) -> Lorebook:
    reader = JSON_READERS.get(detect_format(doc))
    if reader is None:
        raise FormatError("not a lorebook: no format recognised (expected SillyTavern world JSON, a character "
                          "card, lorebook_v3, NovelAI, Agnai, RisuAI or KoboldAI data, or a JanitorAI script)", source=source)
    return reader(doc, source=source)


def read_bytes(data: bytes, *, source: str = "<memory>", limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """A Lorebook from file content: PNG card, CHARX zip, or JSON of any supported format."""
    if len(data) > limits.max_file_bytes:
        raise FormatError(f"input is {len(data)} bytes, above the {limits.max_file_bytes}-byte limit",
                          source=source)
    reader = byte_reader(data)
    if reader is None:
        return load_data(parse_json(data, source=source, limits=limits), source=source, limits=limits)
    book = reader(data, source=source, limits=limits)
    check_book(book, limits, source=source)
    return book



def load(path_or_bytes: str | os.PathLike[str] | bytes, *, source: str | None = None,
         limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """Read a lorebook from a path or bytes, detecting the format from the content.

    Formats: SillyTavern world JSON (current, legacy, chub hybrid, ``originalData``, entries
    as a list), CCv2/CCv3 card JSON, ``lorebook_v3``, a bare ``character_book``, PNG cards
    (``ccv3``/``chara`` in tEXt/zTXt/iTXt; NovelAI ``naidata``), CHARX, RisuAI, NovelAI
    ``.lorebook`` and ``.story``, Agnai memory books, KoboldAI world info, bare entry
    arrays, and JanitorAI script lorebooks (the script's ``dynamicLore`` literal, read without
    running anything, or its JSON).

    Args:
        path_or_bytes: a file path, or the file's content.
        source: names the input in errors (default: the path, or ``"<memory>"``).
        limits: what the file may cost (see :class:`~lorescan.limits.Limits`).

    Returns:
        The :class:`~lorescan.model.Lorebook`; ``book.format`` names the format read.

    Raises:
        LorebookError: (or a subclass, :class:`~lorescan.errors.FormatError` for an unreadable
            or unrecognised file) anything malformed or over a limit, naming the file, entry,
            field, limit and value.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return read_bytes(bytes(path_or_bytes), source=source or "<memory>", limits=limits)
    path = os.fspath(path_or_bytes)
    source = source or path
    try:
        size = os.path.getsize(path)
        if size > limits.max_file_bytes:
            raise FormatError(f"file is {size} bytes, above the {limits.max_file_bytes}-byte limit", source=source)
        with open(path, "rb") as fh:
            data = fh.read(limits.max_file_bytes + 1)
    except OSError as exc:
        raise FormatError(f"cannot read: {exc.strerror or exc}", source=source) from exc
    return read_bytes(data, source=source, limits=limits)
