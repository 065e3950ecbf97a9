"""Lorebook -> CompiledBook: everything a scan needs, built once and never changed.

PLACEHOLDER SHAPE: the compiled matcher (one Aho-Corasick automaton over every key,
content hits, key tables) is being built; the API below is what the engines use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .model import Entry, Lorebook, MatchOptions

__all__ = ["CompiledBook", "compile_book"]


@dataclass(frozen=True, slots=True, eq=False)
class CompiledBook:
    """All a scan needs for one book. Immutable: share it across threads and processes."""

    book: Lorebook
    entries: tuple[Entry, ...]
    options: MatchOptions


def compile_book(book: Lorebook, options: MatchOptions = MatchOptions()) -> CompiledBook:
    """Compile ``book`` for matching under ``options``."""
    return CompiledBook(book=book, entries=tuple(book.entries), options=options)
