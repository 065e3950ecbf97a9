"""Per-text hit sets and window unions. Twin of native/lorescan/_hits_c.pyx.

A text's hits are the frozenset of key-variant ids (vids) that occur in it. Frozensets
rather than Python-int bitsets: a book has up to ~400k vids but a message hits a handful,
and a union of sparse sets costs what the hits cost, not what the book costs.
"""
from __future__ import annotations

import sys
from itertools import islice
from time import monotonic
from typing import Any, Sequence

from . import _wordchars as _ws
from ..errors import ScanDeadlineExceeded

__all__ = ["text_hits", "bounded_text_hits", "window_union", "entries_hit", "count_step"]

EMPTY: frozenset[int] = frozenset()


YIELD_EVERY = 65536          # hits between deadline checks (the native kernel also lets other threads run there)


def _pass(text: str, automaton: Any, lengths: Sequence[int], free_vid: Sequence[int],
          bound_vid: Sequence[int], model: int, out: set[int], left: int, deadline: float | None) -> int:
    # In slices: a text can hold up to (longest key) hits per character, too many to list at once.
    # At most ``left`` hits are taken: returns the hits still allowed, -1 when one more came.
    found = automaton.iter(text)
    seen = 0
    while hits := list(islice(found, min(YIELD_EVERY, left + 1))):
        cut = len(hits) > left
        if cut:
            del hits[left:]
        left -= len(hits)
        seen += len(hits)
        free, bounded = _ws.case_filter(hits, free_vid, bound_vid)
        out.update(free)
        if bounded:
            out.update(bound_vid[pid] for pid in _ws.whole_word_hits(text, bounded, lengths, model))
        if cut:
            return -1
        if deadline is not None and monotonic() > deadline:
            raise ScanDeadlineExceeded(f"the scan passed its deadline after {seen:,} key hits in one text")
    return left


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
    return bounded_text_hits(text, automaton, tables, model, scan_raw, scan_lower, -1, None)[0]


def bounded_text_hits(text: str, automaton: Any, tables: Sequence[Sequence[int]], model: int,
                      scan_raw: bool, scan_lower: bool, max_hits: int,
                      deadline: float | None) -> tuple[frozenset[int], bool]:
    """``(vids, cut)``: :func:`text_hits` from at most ``max_hits`` of the automaton's hits
    (``max_hits`` < 0: all of them).

    The hits are the automaton's (end, pattern) reports, the raw pass's first, in the order it
    gives them; past ``max_hits`` the text is not enumerated further and ``cut`` is True (the
    vids are those of the first ``max_hits`` hits: no false hit, perhaps some missing). The
    same text and automaton give the same cut on both kernels. ``deadline``: a
    ``time.monotonic()`` value checked every ``YIELD_EVERY`` hits; past it
    :class:`~lorescan.errors.ScanDeadlineExceeded` is raised.
    """
    lengths, raw_free, raw_bound, low_free, low_bound = tables
    if model not in (_ws.MODEL_ASCII, _ws.MODEL_UNICODE, _ws.MODEL_NOSPACE):
        raise ValueError(f"unknown word model {model!r}")
    out: set[int] = set()
    left = sys.maxsize if max_hits < 0 else max_hits
    if scan_raw:
        left = _pass(text, automaton, lengths, raw_free, raw_bound, model, out, left, deadline)
    if scan_lower and left >= 0:
        left = _pass(text.lower(), automaton, lengths, low_free, low_bound, model, out, left, deadline)
    return (frozenset(out) if out else EMPTY), left < 0


def window_union(parts: Sequence[frozenset[int]]) -> frozenset[int]:
    """The union of the hit sets of a window's texts."""
    return EMPTY.union(*parts) if parts else EMPTY


def entries_hit(hits: frozenset[int] | set[int], vid_entries: Sequence[tuple[int, ...]],
                always: Sequence[int]) -> list[int]:
    """Sorted entry indexes listed under any vid in ``hits``, plus ``always``.

    A lazy table (``lorescan.match.columns``) keeps the rows built so far in a dict ``_items``:
    those are read from it directly, the others through the table."""
    found = set(always)
    built = getattr(vid_entries, "_items", None)
    if type(built) is dict:
        get = built.get
        for v in hits:
            row = get(v)
            found.update(row if row is not None else vid_entries[v])
        return sorted(found)
    for v in hits:
        found.update(vid_entries[v])
    return sorted(found)


def count_step(counts: dict[int, int], added: Sequence[frozenset[int]], removed: Sequence[frozenset[int]]) -> bool:
    """Move a window's vid counts on by some texts: every vid of each ``added`` set counted
    once more, then every vid of each ``removed`` set (sets counted in ``counts`` before)
    once less, a vid whose count reaches 0 deleted.

    Returns:
        False when the keys of ``counts`` (the window's union) are those it had; True when a
        vid's count left or reached 0 along the way (they may have changed).
    """
    changed = False
    for hits in added:
        for v in hits:
            c = counts.get(v, 0)
            if not c:
                changed = True
            counts[v] = c + 1
    for hits in removed:
        for v in hits:
            c = counts[v] - 1
            if c:
                counts[v] = c
            else:
                del counts[v]
                changed = True
    return changed
