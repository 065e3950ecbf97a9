"""The hit-set part of :class:`~lorescan.match.view.ScanView`: which key variants a window holds.

A window's hit set is the union of its texts' hit sets, looked up in the caller's ChatScan:
messages in cached aligned runs, the sources and injects one by one, recursion chunks as
unions of the compile-time content hits of the entries they join where that is exact
(the same entries' chunk recurs turn after turn). A window over more chunks than one already known extends that union.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Sequence

from . import _kernels
from .compile import EMPTY
from ..js.text import js_trim
from .window import MAX_SCAN_DEPTH, Window
from .viewtexts import ViewTexts

if TYPE_CHECKING:
    from .compile import CompiledKeys


def _content_union(compiled: "CompiledKeys", owners: Sequence[int]) -> frozenset[int]:
    """The union of the compile-time content hits of entries ``owners``."""
    content_hits = compiled.content_hits
    return _kernels.hits.window_union([content_hits[j] for j in owners])



_COUNTED_DEPTH = 64         # message windows up to this depth are kept as vid counts from turn to turn
_MAX_SHIFT = 4              # ... found again after at most this many new messages


class ViewHits(ViewTexts):
    """Hit sets of windows, message runs and recursion chunks (a base of ScanView)."""

    def _message_union(self, depth: int) -> frozenset[int]:
        """The union of the hit sets of the newest ``depth`` messages.

        A window up to ``_COUNTED_DEPTH`` messages is kept in the ChatScan for the next turn
        as the count of each vid over its messages: a turn whose window is last turn's moved
        on by a few new messages (the older ones the very strings, or equal ones) counts
        the new messages' hits in and the dropped messages' out, and keeps last turn's
        union (the same object) when no vid came or went. Otherwise (a deeper window, another
        chat, an edited message) the union is built from the messages' hit sets.
        """
        found = self.message_unions.get(depth)
        if found is not None:
            return found
        d = min(depth, self._n_messages)
        if depth > _COUNTED_DEPTH:
            self.deep_read = True
            return _kernels.hits.window_union(self._message_hits(d))
        work = self.fuzzy_work
        cut = work.cuts
        # (a text cut off by the scan's work is not a complete answer: the window is not kept)
        union = self._counted_union((self._matcher.token, depth), tuple(self._messages[:d]), self._newest_hits,
                                    lambda: work.cuts == cut)
        self.message_unions[depth] = union
        return union

    def _counted_union(self, key: tuple, texts: tuple[str, ...], hits_of: Callable[[int], frozenset[int]],
                       complete: Callable[[], bool]) -> frozenset[int]:
        """The union of the hit sets of ``texts`` (newest first; ``hits_of(i)`` gives text
        ``i``'s), from the window this ChatScan kept under ``key`` last turn when it is this
        one moved on by at most ``_MAX_SHIFT`` new texts (see :meth:`_message_union`); kept
        again for the next turn when ``complete()`` says every set was whole."""
        cache = self._cache
        d = len(texts)
        state = cache.take_window(key)
        if state is not None:
            old_texts, old_hits, counts, union = state
            n_old = len(old_texts)
            for k in range(min(d, _MAX_SHIFT) + 1):
                kept = d - k
                if kept <= n_old and texts[k:] == old_texts[:kept]:
                    new = [hits_of(i) for i in range(k)]
                    if _kernels.hits.count_step(counts, new, old_hits[kept:]):
                        union = frozenset(counts) if counts else EMPTY
                    hits = (*new, *old_hits[:kept])
                    break
            else:
                state = None
        if state is None:
            hits = tuple([hits_of(i) for i in range(d)])
            counts = {}
            _kernels.hits.count_step(counts, hits, ())
            union = frozenset(counts) if counts else EMPTY
        if complete():
            cache.put_window(key, (texts, hits, counts, union), len(counts))
        return union

    def _message_hits(self, depth: int) -> list[frozenset[int]]:
        """Hit sets covering the newest ``depth`` messages: a few cached aligned runs.

        Positions count from the oldest message of the chat (``oldest_index`` plus the
        position among the given ones), so a run [a, a + 2^k) aligned on 2^k keeps its texts
        as the chat grows; the window [L - d, L) splits into at most ~2 log2(d) such runs
        (singles below 4), each cached in the ChatScan by its raw strings.
        """
        d = min(depth, self._n_messages)
        found = self._msg_parts.get(d)
        if found is not None:
            return list(found)
        total = len(self._messages)
        lo, hi = total - d, total
        parts: list[frozenset[int]] = []
        oldest = self._oldest
        while lo < hi:
            at = oldest + lo
            size = (at & -at) if at else 1 << 30
            while size > hi - lo:
                size >>= 1
            parts.append(self._run_hits(lo, size) if size >= 4 else self._single_hits(lo))
            lo += size if size >= 4 else 1
        self._msg_parts[d] = parts
        return list(parts)

    def _newest_hits(self, i: int) -> frozenset[int]:
        m = self._messages[i]                       # (i counts from the newest message)
        return self._cache.lookup(self._matcher, js_trim(m), self.fuzzy_work) if m else EMPTY

    def _single_hits(self, pos: int) -> frozenset[int]:
        m = self._messages[len(self._messages) - 1 - pos]
        return self._cache.lookup(self._matcher, js_trim(m), self.fuzzy_work) if m else EMPTY

    def _run_hits(self, pos: int, size: int) -> frozenset[int]:
        if size < 4:
            return _kernels.hits.window_union([self._single_hits(p) for p in range(pos, pos + size)])
        total = len(self._messages)
        texts = tuple(self._messages[total - pos - size:total - pos])
        half = size // 2
        return self._cache.lookup_block(self._matcher, texts, lambda: _kernels.hits.window_union(
            [self._run_hits(pos, half), self._run_hits(pos + half, half)]), self.fuzzy_work)

    def _chunk_hit_list(self) -> list[frozenset[int]]:
        have = self._chunk_hits
        compiled = self.compiled
        content_of = self._content_of
        for i in range(len(have), len(self.chunks)):
            text, owners, parts = self.chunks[i], self._chunk_entries[i], self._chunk_parts[i]
            if (owners is not None and compiled.chunk_union_exact and content_of is not None
                    and (all([p is c or p == c for p, c in zip(parts, map(content_of, owners))])
                         if parts is not None and len(parts) == len(owners)     # (parts join to text)
                         else "\n".join([content_of(j) for j in owners]) == text)):
                # the union of the entries' compile-time content hits: the same entries' chunk
                # recurs turn after turn, so it is kept in the ChatScan by the entries
                have.append(self._cache.derived(  # type: ignore[arg-type]
                    (self._matcher.token, "chunk", owners), functools.partial(_content_union, compiled, owners),
                    len(owners)))
            elif parts is not None and compiled.chunk_union_exact:
                lookup, matcher, content_hits = self._cache.lookup, self._matcher, compiled.content_hits
                if owners is None or len(owners) != len(parts) or content_of is None:
                    have.append(_kernels.hits.window_union([lookup(matcher, part, self.fuzzy_work) for part in parts]))
                else:
                    have.append(_kernels.hits.window_union([
                        content_hits[j] if part == content_of(j) else lookup(matcher, part, self.fuzzy_work)
                        for j, part in zip(owners, parts)]))
            else:
                have.append(self._cache.lookup(self._matcher, text, self.fuzzy_work))
        return have

    def _bounds_hits(self, depth: int, sources: int, recursion: int) -> frozenset[int]:
        sources &= self._nonempty_sources     # an empty source adds nothing: windows that differ
        key = (depth, sources, recursion)     # only there share one union
        found = self._bounds.get(key)
        if found is None:
            # A window over more chunks than one already known is that union plus the new
            # chunks' hits, so a recursion loop costs its chunk, not every chunk before it.
            # Only recursion 0 and the latest count are kept per (depth, sources).
            base = self._bounds_latest.get((depth, sources))
            if base is not None and 0 < base[0] < recursion:
                parts = [base[1], *self._chunk_hit_list()[base[0]:recursion]]
                self._bounds.pop((depth, sources, base[0]), None)
            else:
                parts = [self._message_union(depth)]
                lookup, matcher, work = self._cache.lookup, self._matcher, self.fuzzy_work
                for i, text in enumerate(self.sources):
                    if sources >> i & 1 and text:
                        parts.append(lookup(matcher, text, work))
                for text in self.injects:
                    parts.append(lookup(matcher, text, work))
                if recursion:
                    parts.extend(self._chunk_hit_list()[:recursion])
            found = self._bounds[key] = _kernels.hits.window_union(parts)
            if recursion and (base is None or base[0] < recursion):
                self._bounds_latest[(depth, sources)] = (recursion, found)
        return found

    def _entries_hit(self, hits: frozenset[int], always: tuple[int, ...]) -> Sequence[int]:
        """``entries_hit`` of a hit set, kept in the ChatScan by the set's value: a steady chat's
        windows and recursion chunks give the same sets turn after turn (read-only: a tuple)."""
        if not hits:
            return list(always)
        vid_entries = self.compiled.vid_entries
        return self._cache.derived(  # type: ignore[return-value]
            (self._matcher.token, "entries", hits, always),
            lambda: tuple(_kernels.hits.entries_hit(hits, vid_entries, always)), len(hits) + len(always))

    def window_hits(self, window: Window) -> frozenset[int]:
        """The key-variant ids occurring in the window's texts (the union of their hit sets)."""
        found = self._by_window.get(window)
        if found is None:
            if window.depth <= 0:
                found = EMPTY
            else:
                found = self._bounds_hits(min(int(window.depth), MAX_SCAN_DEPTH), window.sources,
                                          window.recursion)
            self._by_window[window] = found
        return found

