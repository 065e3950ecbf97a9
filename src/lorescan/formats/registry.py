"""Which module reads and writes each format: one table, so ``load`` and ``convert`` hold no per-format imports.

A format is named as :func:`~lorescan.formats.detect_format` names it (:data:`FormatName`).
JSON formats are read from parsed data (:data:`JSON_READERS`); ``png``, ``charx`` and JanitorAI
scripts (text that is not JSON) from bytes (:data:`BYTE_READERS`, tried in order, each with the test that recognises its files).
The writers listed here take only the book; the card formats, whose writers take a base
card or image, are written by :mod:`lorescan.formats.convert` itself.
"""
from __future__ import annotations

from typing import Any, Callable, Literal, Mapping

from ..model import Lorebook
from . import card, charx, foreign, janitor, novelai, png, sillytavern
from ._mapping import Loss

__all__ = ["FormatName", "JsonReader", "JSON_READERS", "BYTE_READERS", "JSON_WRITERS", "byte_reader"]

# Every value of Lorebook.format and of a conversion target (LossReport.source_format/target_format).
FormatName = Literal["sillytavern", "ccv2", "ccv3", "lorebook_v3", "character_book", "png", "png_novelai",
                     "charx", "risu", "agnai", "novelai", "novelai_story", "kobold", "entry_list", "janitor"]

JsonReader = Callable[..., Lorebook]                # (doc, *, source) -> Lorebook
ByteReader = Callable[..., Lorebook]                # (data, *, source, limits) -> Lorebook
Writer = Callable[[Lorebook], "tuple[Any, list[Loss]]"]


def _character_book(doc: Any, *, source: str) -> Lorebook:
    return card.read_character_book(doc, source=source, fmt="character_book")


JSON_READERS: Mapping[str, JsonReader] = {
    "sillytavern": sillytavern.read_world,
    "ccv2": card.read_card,
    "ccv3": card.read_card,
    "lorebook_v3": card.read_lorebook_v3,
    "character_book": _character_book,
    "novelai": novelai.read_novelai,
    "novelai_story": novelai.read_story,
    "agnai": foreign.read_agnai,
    "risu": foreign.read_risu,
    "kobold": foreign.read_kobold,
    "entry_list": foreign.read_entry_list,
    "janitor": janitor.read_janitor_json,
}

BYTE_READERS: tuple[tuple[Callable[[bytes], bool], ByteReader], ...] = (
    (png.is_png, png.read_png),
    (charx.is_zip, charx.read_charx),
    (janitor.is_janitor_script, janitor.read_script),   # text, not JSON: a JanitorAI script
)

JSON_WRITERS: Mapping[str, Writer] = {
    "risu": foreign.write_risu,
    "agnai": foreign.write_agnai,
    "novelai": novelai.write_novelai,
    "novelai_story": novelai.write_story,
    "kobold": foreign.write_kobold,
    "entry_list": foreign.write_entry_list,
    "janitor": janitor.write_janitor,
}


def byte_reader(data: bytes) -> ByteReader | None:
    """The reader of a binary container (PNG card, CHARX zip) that recognises ``data``, else None."""
    for recognises, reader in BYTE_READERS:
        if recognises(data):
            return reader
    return None

