"""Per-text hit sets and window unions. Twin of native/lorescan/_hits_c.pyx.

A text's hits are the frozenset of key-variant ids (vids) that occur in it. Frozensets
rather than Python-int bitsets: a book has up to ~400k vids but a message hits a handful,
and a union of sparse sets costs what the hits cost, not what the book costs.
"""
from __future__ import annotations

from itertools import islice
from typing import Any, Sequence

from . import _wordchars as _ws

__all__ = ["text_hits", "window_union", "entries_hit"]

EMPTY: frozenset[int] = frozenset()


def _pass(text: str, automaton: Any, lengths: Sequence[int], free_vid: Sequence[int],
          bound_vid: Sequence[int], model: int, out: set[int]) -> None:
    # In slices: a text can hold up to (longest key) hits per character, too many to list at once.
    found = automaton.iter(text)
    while hits := list(islice(found, 65536)):
        free, bounded = _ws.case_filter(hits, free_vid, bound_vid)
        out.update(free)
        if bounded:
            out.update(bound_vid[pid] for pid in _ws.whole_word_hits(text, bounded, lengths, model))


def text_hits(text: str, automaton: Any, tables: Sequence[Sequence[int]], model: int,
              scan_raw: bool, scan_lower: bool) -> frozenset[int]:
    """The vids occurring in ``text``.

    ``automaton``: a finalised pyahocorasick automaton mapping pattern strings to pattern
    ids; ``tables``: ``(lengths, raw_free, raw_bound, low_free, low_bound)``, indexed by
    pattern id (-1 = no such variant): case-sensitive variants are matched on ``text``,
    case-insensitive ones on ``text.lower()`` (JS toLowerCase, docs/sillytavern-mode.md#st-text-rules); ``*_bound`` vids
    need word boundaries under word ``model``. ``scan_raw``/``scan_lower`` skip a pass
    that has no variants.
    """
    lengths, raw_free, raw_bound, low_free, low_bound = tables
    if model not in (_ws.MODEL_ASCII, _ws.MODEL_UNICODE, _ws.MODEL_NOSPACE):
        raise ValueError(f"unknown word model {model!r}")
    out: set[int] = set()
    if scan_raw:
        _pass(text, automaton, lengths, raw_free, raw_bound, model, out)
    if scan_lower:
        _pass(text.lower(), automaton, lengths, low_free, low_bound, model, out)
    return frozenset(out) if out else EMPTY


def window_union(parts: Sequence[frozenset[int]]) -> frozenset[int]:
    """The union of the hit sets of a window's texts."""
    return EMPTY.union(*parts) if parts else EMPTY


def entries_hit(hits: frozenset[int] | set[int], vid_entries: Sequence[tuple[int, ...]],
                always: Sequence[int]) -> list[int]:
    """Sorted entry indexes listed under any vid in ``hits``, plus ``always``."""
    found = set(always)
    for v in hits:
        found.update(vid_entries[v])
    return sorted(found)
