"""The fast path: every term of a book in one pyahocorasick automaton over the haystack,
with a per-message cache (docs/janitor-mode.md#janitor-fast-path).

The haystack of a window is ``" " + " ".join(parts) + " "`` where ``parts`` are the
non-empty normalised messages. A term's occurrence either lies inside one message's own
haystack ``" " + part + " "`` (cached per distinct part, so a turn with one new message
scans only that one), or it contains one of the spaces that join two parts; those are
found by scanning, around each joining space, only as many characters as the longest key.

One subtlety is exact by construction: a script stem ending in a space (``"foo *"``) that
ends on a message's final space depends on what follows that message (a letters-only first
word, or the end of the window), so such local hits are kept aside and settled per window.
"""
from __future__ import annotations

import unicodedata
from typing import Iterable, Sequence

import ahocorasick

from ..js.text import is_nospace_char
from .normalise import IMPROVED
from .terms import ALWAYS, PHRASE, STEM, Term

__all__ = ["TermScanner"]

_CACHE_LIMIT = 8192


def _script_letters(rem: str) -> bool:
    return not rem or (rem.isascii() and rem.isalpha())


def _edge_ok(hay: str, outer: int, inner: int) -> bool:
    # improved haystacks hold only word characters and single spaces: an edge is a word
    # boundary at a space, at either end, or beside a character of a no-space script
    if outer < 0 or outer >= len(hay) or hay[outer] == " ":
        return True
    return is_nospace_char(hay[outer]) or is_nospace_char(hay[inner])


def _unicode_letters(rem: str) -> bool:
    return all(unicodedata.category(c)[0] in "LM" for c in rem)


class TermScanner:
    """Which of a book's terms match a window. Term ids are positions in ``terms``."""

    def __init__(self, terms: Sequence[Term], profile: str) -> None:
        self.profile = profile
        self.terms = tuple(terms)
        self.always = frozenset(i for i, t in enumerate(self.terms) if t.kind == ALWAYS)
        key_ids: dict[str, int] = {}
        phrases: list[list[int]] = []
        stems: list[list[int]] = []
        for i, t in enumerate(self.terms):
            if t.kind not in (PHRASE, STEM):
                continue
            kid = key_ids.setdefault(t.key, len(key_ids))
            if kid == len(phrases):
                phrases.append([])
                stems.append([])
            (phrases if t.kind == PHRASE else stems)[kid].append(i)
        self._keys = tuple(key_ids)
        self._phrase_ids = tuple(tuple(p) for p in phrases)
        self._stem_ids = tuple(tuple(s) for s in stems)
        self._lengths = tuple(len(k) for k in self._keys)
        self._max_len = max(self._lengths, default=0)
        # only a key with a space strictly inside can contain a joining space
        self._spanning = any(" " in k.strip(" ") if profile != IMPROVED else " " in k for k in self._keys)
        self._letters = _unicode_letters if profile == IMPROVED else _script_letters
        self._automaton = None
        if self._keys:
            a = ahocorasick.Automaton(ahocorasick.STORE_INTS)
            for kid, key in enumerate(self._keys):
                a.add_word(key, kid)
            a.make_automaton()
            self._automaton = a
        self._local: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self._joins: dict[tuple[str, int], frozenset[int]] = {}

    # -- one occurrence ---------------------------------------------------------------
    def _remainder_ok(self, hay: str, after: int) -> bool:
        stop = hay.find(" ", after)
        return self._letters(hay[after:len(hay) if stop < 0 else stop])

    def _accept(self, hay: str, end: int, kid: int, out: set[int], deferred: set[int] | None) -> None:
        start = end - self._lengths[kid] + 1
        improved = self.profile == IMPROVED
        if improved and not _edge_ok(hay, start - 1, start):
            return
        phrases = self._phrase_ids[kid]
        if phrases and (not improved or _edge_ok(hay, end + 1, end)):
            out.update(phrases)
        stems = self._stem_ids[kid]
        if not stems:
            return
        if deferred is not None and end + 1 == len(hay):
            deferred.update(stems)         # a script stem ending on the message's last space
        elif self._remainder_ok(hay, end + 1):
            out.update(stems)

    def _scan_part(self, part: str) -> tuple[frozenset[int], frozenset[int]]:
        cached = self._local.get(part)
        if cached is not None:
            return cached
        hay = " " + part + " "
        out: set[int] = set()
        deferred: set[int] = set()
        if self._automaton is not None:
            for end, kid in self._automaton.iter(hay):
                self._accept(hay, end, kid, out, deferred)
        result = (frozenset(out), frozenset(deferred))
        if len(self._local) >= _CACHE_LIMIT:
            self._local.clear()
        self._local[part] = result
        return result

    # -- a window ---------------------------------------------------------------------
    def scan(self, parts: Sequence[str]) -> set[int]:
        """Matched term ids for the window of normalised messages ``parts`` (empty ones
        are allowed and ignored)."""
        parts = [p for p in parts if p]
        matched = set(self.always)
        if self._automaton is None or not parts:
            return matched
        last = len(parts) - 1
        for k, part in enumerate(parts):
            definite, deferred = self._scan_part(part)
            matched |= definite
            if deferred:
                if k == last:
                    matched |= deferred
                else:
                    nxt = parts[k + 1]
                    stop = nxt.find(" ")
                    if self._letters(nxt if stop < 0 else nxt[:stop]):
                        matched |= deferred
        if self._spanning and last > 0:
            self._scan_joins(parts, matched)
        return matched

    def _scan_joins(self, parts: list[str], matched: set[int]) -> None:
        # Around each joining space, the hits that contain it depend only on the text from
        # (longest key - 1) characters before it to the end of the word the longest key
        # after it reaches (a stem's letters-only rest ends there): that slice is the key
        # of the per-join cache, and is scanned as a haystack of its own.
        hay = " " + " ".join(parts) + " "
        reach = self._max_len
        joins = self._joins
        joint = 0
        for part in parts[:-1]:
            joint += len(part) + 1             # the space after this part
            lo = max(0, joint - reach + 1)
            hi = hay.index(" ", min(len(hay) - 1, joint + reach - 1)) + 1
            key = (hay[lo:hi], joint - lo)
            got = joins.get(key)
            if got is None:
                got = self._scan_join(*key)
                if len(joins) >= _CACHE_LIMIT:
                    joins.clear()
                joins[key] = got
            matched |= got

    def _scan_join(self, region: str, joint: int) -> frozenset[int]:
        assert self._automaton is not None
        out: set[int] = set()
        for end, kid in self._automaton.iter(region):
            if end - self._lengths[kid] + 1 < joint < end:
                self._accept(region, end, kid, out, None)
        return frozenset(out)

    def scan_text(self, hay: str) -> set[int]:
        """Matched term ids over a whole haystack (no cache; for explain and tests)."""
        out = set(self.always)
        if self._automaton is not None:
            for end, kid in self._automaton.iter(hay):
                self._accept(hay, end, kid, out, None)
        return out

    def occurrences(self, hay: str, term_ids: Iterable[int]) -> dict[int, list[int]]:
        """Start offsets in ``hay`` of each of ``term_ids``'s matching occurrences."""
        wanted = set(term_ids)
        found: dict[int, list[int]] = {}
        if self._automaton is None or not wanted:
            return found
        for end, kid in self._automaton.iter(hay):
            got: set[int] = set()
            self._accept(hay, end, kid, got, None)
            for tid in got & wanted:
                found.setdefault(tid, []).append(end - self._lengths[kid] + 1)
        return found
