"""Word characters and boundaries: the class table every kernel reads, and the whole-word and
case filters of the pure-Python hit kernel (``_hits_py``).

The native kernel (``native/lorescan/_hits_c.pyx``, through ``_chars.pxd``) applies the same
boundary rule inline, reading :data:`CHAR_TABLE` and :func:`char_class` from here; the
parity tests compare the two kernels, down to every code point's boundaries. Hits are
pyahocorasick's ``(end, pattern_id)`` pairs, where ``end`` is the inclusive index of the
last character of the occurrence.

Word models (docs/sillytavern-mode.md#st-plain-keys, docs/improved-profile.md#word-chars):
``MODEL_ASCII`` (SillyTavern: ``A-Z a-z 0-9 _``), ``MODEL_UNICODE`` (L*, M*, N*, Pc, ZWNJ,
ZWJ), ``MODEL_NOSPACE`` (unicode, and a boundary also succeeds when either character belongs
to a script written without spaces).
"""
from __future__ import annotations

import itertools
import unicodedata
from typing import Sequence

from ..js.text import NOSPACE_RANGES, is_ascii_word_char, is_nospace_char, is_unicode_word_char

__all__ = ["MODEL_ASCII", "MODEL_UNICODE", "MODEL_NOSPACE", "CHAR_TABLE", "char_class",
           "boundary_ok", "whole_word_hits", "case_filter"]

MODEL_ASCII, MODEL_UNICODE, MODEL_NOSPACE = 0, 1, 2
ASCII_WORD, UNICODE_WORD, NOSPACE = 1, 2, 4


def _classify(ch: str) -> int:
    return ((ASCII_WORD if is_ascii_word_char(ch) else 0)
            | (UNICODE_WORD if is_unicode_word_char(ch) else 0)
            | (NOSPACE if is_nospace_char(ch) else 0))


def _build_table() -> bytes:
    # One byte of class bits per BMP code point, astral characters are classified on demand
    # by char_class(). The bits are those of _classify(), which reads js.text (the single
    # source of truth); tests/match/test_kernels_table.py checks every code point against it. Built
    # in bulk: one C-level pass over unicodedata.category instead of 65,536 calls of
    # _classify (about 8 ms against 90 ms, paid at import by the native kernels too).
    word_categories = dict.fromkeys(("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc"),
                                    UNICODE_WORD)
    table = bytearray(map(word_categories.get, map(unicodedata.category, map(chr, range(0x10000))),
                          itertools.repeat(0)))
    for cp in range(0x80):                       # ASCII: js.text's own rule, both models
        table[cp] = _classify(chr(cp))
    for cp in (0x200C, 0x200D):                  # ZWNJ, ZWJ: word characters in the unicode model
        table[cp] |= UNICODE_WORD
    with_nospace = bytes(b | NOSPACE for b in range(256))
    for lo, hi in NOSPACE_RANGES:
        if lo < 0x10000:
            hi = min(hi, 0xFFFF)
            table[lo:hi + 1] = table[lo:hi + 1].translate(with_nospace)
    return bytes(table)


CHAR_TABLE: bytes = _build_table()


def char_class(cp: int) -> int:
    """Class bits of code point ``cp``: ASCII_WORD | UNICODE_WORD | NOSPACE."""
    if cp < 0x10000:
        return CHAR_TABLE[cp]
    return _classify(chr(cp))


def _side_ok(outer: str, inner: str, model: int) -> bool:
    co = char_class(ord(outer))
    if model == MODEL_ASCII:
        return not co & ASCII_WORD
    if not co & UNICODE_WORD:
        return True
    return model == MODEL_NOSPACE and bool((co | char_class(ord(inner))) & NOSPACE)


def boundary_ok(text: str, start: int, end: int, model: int) -> bool:
    """True when the occurrence ``text[start:end]`` (non-empty) has word boundaries at both ends."""
    if model not in (MODEL_ASCII, MODEL_UNICODE, MODEL_NOSPACE):
        raise ValueError(f"unknown word model {model!r}")
    if not 0 <= start < end <= len(text):
        raise IndexError(f"bad occurrence [{start}, {end}) in a text of length {len(text)}")
    if start > 0 and not _side_ok(text[start - 1], text[start], model):
        return False
    return end == len(text) or _side_ok(text[end], text[end - 1], model)


def whole_word_hits(text: str, hits: list[tuple[int, int]], lengths: Sequence[int], model: int) -> list[int]:
    """Pattern ids with at least one occurrence bounded by word boundaries, in first-hit order.

    ``hits``: ``(end, pattern_id)`` with ``end`` inclusive; ``lengths[pattern_id]`` is the
    pattern's length in code points. Every occurrence is examined, not only the first.
    """
    if model not in (MODEL_ASCII, MODEL_UNICODE, MODEL_NOSPACE):
        raise ValueError(f"unknown word model {model!r}")
    kept: list[int] = []
    done: set[int] = set()
    for end, pid in hits:
        if pid in done:
            continue
        if boundary_ok(text, end - lengths[pid] + 1, end + 1, model):
            done.add(pid)
            kept.append(pid)
    return kept


def case_filter(hits: list[tuple[int, int]], free_vid: Sequence[int], bound_vid: Sequence[int]
                ) -> tuple[list[int], list[tuple[int, int]]]:
    """Split one pass's hits by the variants of that pass's case class.

    A pattern string may be a key of case-sensitive variants (matched on the raw text) and
    of case-insensitive ones (matched on the lowercased text); each pass passes the vid
    tables of its own class (-1 = no such variant). Returns the vids hit without boundary
    checks (first-hit order, unique) and the hits whose pattern has a whole-word variant.
    """
    free: list[int] = []
    seen: set[int] = set()
    bounded: list[tuple[int, int]] = []
    for hit in hits:
        pid = hit[1]
        v = free_vid[pid]
        if v >= 0 and v not in seen:
            seen.add(v)
            free.append(v)
        if bound_vid[pid] >= 0:
            bounded.append(hit)
    return free, bounded
