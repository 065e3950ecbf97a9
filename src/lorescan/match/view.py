"""Key matching over the scan texts of one generation: the engine's only view of the text.

A :class:`ScanView` holds the texts of one scan (messages newest first, the six match
sources, injected prompts, and the recursion chunks added pass by pass) and answers, for
one entry and one :class:`Window`, which of its keys occur in the haystack defined in
docs/sillytavern-mode.md#st-scan-text. Both SillyTavern mode and the lorebook-slot mode go through it.

This module is the interface between the engines and the matcher. Key hits come from
the book's automaton, per text, through the caller's ChatScan cache (every occurrence of a key is examined, so a text's
hits do not depend on what else the window holds); only
special keys (regex, U+0001, blank, macro) look at the assembled haystack. The plain
implementation it replaced lives on as the test oracle, tests/support/reference_matcher.py.
Regex keys that cannot see past their own text are tested text by text and cached
the same way (see lorescan.match.regexscope); the others search the assembled haystack.

The class is split by job over its bases (one chain, so no call goes through more than
the method itself): :mod:`~lorescan.match.viewtexts` (state, texts, recursion chunks),
:mod:`~lorescan.match.viewhits` (hit sets), :mod:`~lorescan.match.viewkeys` (special keys);
this module adds the entry answers. The windows and values are :mod:`~lorescan.match.window`,
plain-key matching :mod:`~lorescan.match.plainkey`; every name is importable from here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from . import _kernels
from .keys import KeyRef
from .plainkey import _boundary_ok as _boundary_ok, _empty_key_matches as _empty_key_matches, match_plain_key
from .window import (JOINER as JOINER, MARKER as MARKER, MAX_SCAN_DEPTH, SOURCE_NAMES, EntryMatch, Window,
                     WindowPart, WindowTexts as WindowTexts)
from .viewkeys import ViewKeys

if TYPE_CHECKING:
    from .compile import EntryPlan

__all__ = ["SOURCE_NAMES", "MAX_SCAN_DEPTH", "Window", "WindowPart", "EntryMatch", "ScanView", "match_plain_key"]


class ScanView(ViewKeys):
    """The texts of one scan and the key hits on them (compiled implementation).

    ``compiled``: the :class:`~lorescan.match.compile.CompiledKeys` (entry index = key spec
    index, for a SillyTavern book its entry index; their ``options`` are the plain-key rules); ``cache``: the caller-owned per-chat hit cache
    (:class:`lorescan.match.cache.ChatScan`; without one, hits are cached for this view only);
    ``messages``: message strings newest first, as scanned (``"Name: text"`` when names are
    included), untrimmed; ``sources``: six strings in SOURCE_NAMES order ("" = absent);
    ``injects``: scanned prompts in order; ``substitute``:
    macro hook applied to keys containing ``{{``; ``joined``: True = SillyTavern's single
    joined haystack (regex keys see U+0001 markers and can span texts); False = each text
    is matched on its own (lorebook-slot mode). ``regex_budget``: the scan's regex time
    (shared by the views of one scan; default: ``DEFAULT_LIMITS.regex_time_per_scan``);
    ``regex_timeout``: the nominal seconds one regex evaluation may cost (``JSRegex.cost``, never a
    clock; None: the budget's rest).
    ``oldest_index``: the chat position of the oldest message given, when the caller passes
    only the newest messages of a longer chat (message hit blocks align on chat positions,
    so the same blocks recur turn after turn; see :meth:`_message_hits`).
    ``fuzzy_work``: the scan's fuzzy-key comparisons (shared by the views of one scan; default:
    ``limits.fuzzy_comparisons_per_scan``; a text cut off is reported by
    :meth:`fuzzy_cutoff_report`); a :class:`~lorescan.match.scanwork.ScanWork` (the default)
    also bounds each text's key hits (reported by :meth:`key_hit_cutoff_report`) and carries the
    scan's deadline.
    ``uid_of``: entry ``i``'s id, to name it in errors (without it, errors name no entry).
    ``content_of``: entry ``i``'s content, to check a recursion chunk against the entries it
    claims to join (without it every recursion chunk is scanned; SillyTavern mode passes
    ``CompiledBook.content_of``).

    Regex keys: a line-local one (see :mod:`lorescan.match.regexscope`) is tested once per text
    (cached in the ChatScan beside the literal hits) and a window's answer is a union; any
    other is tested on the window's joined haystack.
    """

    # -- matching ----------------------------------------------------------------------
    def candidates(self, max_depth: int, recursion: int) -> Sequence[int] | None:
        """Entry indexes that can possibly match a key in any window up to these bounds.

        Sorted; holds every entry with a primary key variant in the messages up to
        ``max_depth``, any match source, the injects or the first ``recursion`` chunks (a
        macro key's variant as this view's ``substitute`` expands it), plus the entries with
        special primary keys (regex without a literal, blank, U+0001, a macro expanding to a
        regex). Never None here.
        """
        if self.substitute is None or not self.compiled.macro_keys:
            always = self.compiled.always if self.substitute is None else self.compiled.always_sub
            if max_depth <= 0:
                return list(always)
            hits = self._bounds_hits(min(int(max_depth), MAX_SCAN_DEPTH), 0b111111, recursion)
            return self._entries_hit(hits, always)
        # macro keys: an entry is walked where its expanded keys occur (match/macros.py), and
        # every window of these bounds sees a subset of this one's texts
        macros = self._side_state()
        if max_depth <= 0:
            return list(self.compiled.always_sub)
        depth = min(int(max_depth), MAX_SCAN_DEPTH)
        hits = self._bounds_hits(depth, 0b111111, recursion)
        found = _kernels.hits.entries_hit(hits, self.compiled.vid_entries, macros.walked)
        # (the window keeps a fractional depth: 0.5 scans no message but the other texts)
        woken = macros.woken(hits, self._side_hits(Window(min(max_depth, MAX_SCAN_DEPTH), 0b111111, recursion)))
        return sorted(woken.union(found)) if woken else found

    def chunk_candidates(self, start: int, stop: int) -> Sequence[int]:
        """Sorted entry indexes with a key variant in recursion chunks ``start`` to ``stop``
        (what a window gains going from ``recursion=start`` to ``stop``). Entries with
        special keys are not included (:meth:`candidates` lists them)."""
        hits = _kernels.hits.window_union(self._chunk_hit_list()[start:stop])
        found = self._entries_hit(hits, ())
        if self.substitute is None or not self.compiled.macro_keys:
            return found
        macros = self._side_state()
        woken = macros.woken(hits, _kernels.hits.window_union(self._side_chunk_hits(stop)[start:stop]))
        return sorted(woken.union(found)) if woken else found

    def match_entry(self, index: int, window: Window) -> EntryMatch:
        """Primary and secondary key results for entry ``index`` in ``window``."""
        plan = self._plans[index]
        hits: frozenset[int] | None
        if window is self._last_window:         # engines ask many entries about one window
            hits = self._last_hits
        else:
            hits = self._by_window.get(window)
            if hits is None:
                hits = self.window_hits(window)
            self._last_window, self._last_hits = window, hits
        primary = None
        if plan.simple:
            for i, ref in plan.primary:
                if ref in hits:
                    primary = i
                    break
            if not plan.secondary:              # EntryMatch is a value: share the common ones
                found = self._no_secondary.get(primary)
                if found is None:
                    found = self._no_secondary[primary] = EntryMatch(primary, ())
                return found
            return EntryMatch(primary, tuple([ref in hits for ref in plan.secondary]))
        timed_out: list[str] = []
        for i, ref in plan.primary:
            if isinstance(ref, int):            # a variant id, or SKIP
                if ref in hits:
                    primary = i
                    break
                continue
            hit, to = self._eval_special(ref, window)
            if to:
                timed_out.append(ref.raw)
            if hit:
                primary = i
                break
        secondary = []
        for ref in plan.secondary:
            if isinstance(ref, int):            # a variant id, or SKIP
                secondary.append(ref in hits)
                continue
            hit, to = self._eval_special(ref, window)
            if to:
                timed_out.append(ref.raw)
            secondary.append(hit)
        return EntryMatch(primary, tuple(secondary), tuple(timed_out))

    def plan_hits(self, index: int, window: Window) -> "tuple[EntryPlan, frozenset[int]]":
        """Entry ``index``'s plan and the window's hit set of variant ids, what :meth:`match_entry`
        reads (for a caller that evaluates a plan of variant ids itself: key expressions)."""
        return self._plans[index], self._window_hit_set(window)

    def _window_hit_set(self, window: Window) -> frozenset[int]:
        # The window's hit set, the last window's kept at hand: engines ask many entries about one
        # window (match_entry inlines this, being the hot path).
        if window is self._last_window:
            return self._last_hits      # type: ignore[return-value]
        hits = self._by_window.get(window)
        if hits is None:
            hits = self.window_hits(window)
        self._last_window, self._last_hits = window, hits
        return hits

    def key_hits(self, index: int, window: Window) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
        """Every key of entry ``index`` in ``window``: one bool per primary key and per
        secondary key, in list order (a key that is empty after substitution is False).

        :meth:`match_entry` stops at the first primary hit; this evaluates them all, for
        explanations and tools.
        """
        plan = self._plans[index]
        hits = self._window_hit_set(window)
        if plan.simple:                         # every key a variant id (key expressions ask this per candidate)
            pairs = plan.primary
            if len(pairs) == len(plan.score_primary):     # no key skipped: pair i is key i
                return (tuple([ref in hits for _, ref in pairs]),
                        tuple([ref in hits for ref in plan.secondary]) if plan.secondary else ())
            found = [False] * len(plan.score_primary)
            for i, ref in pairs:
                found[i] = ref in hits
            return tuple(found), tuple([ref in hits for ref in plan.secondary])

        def hit(ref: KeyRef) -> bool:
            if isinstance(ref, int):            # a variant id, or SKIP
                return ref in hits
            return self._eval_special(ref, window)[0]
        primary = [False] * len(plan.score_primary)     # one score ref per primary key, SKIP or not
        for i, ref in plan.primary:
            primary[i] = hit(ref)
        return tuple(primary), tuple(hit(ref) for ref in plan.secondary)

    def score_entry(self, index: int, window: Window) -> tuple[int, int]:
        """Group-scoring counts (docs/sillytavern-mode.md#st-groups): matching primary and secondary keys, raw keys
        (no substitution, no trimming, empty keys counted as matching text)."""
        plan = self._plans[index]
        hits = self.window_hits(window)
        if plan.score_simple:
            return (sum([ref in hits for ref in plan.score_primary]),
                    sum([ref in hits for ref in plan.score_secondary]))
        counts = []
        for refs in (plan.score_primary, plan.score_secondary):
            n = 0
            for ref in refs:
                n += (ref in hits) if isinstance(ref, int) else self._eval_special(ref, window)[0]
            counts.append(n)
        return counts[0], counts[1]
