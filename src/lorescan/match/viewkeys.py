"""The special-key part of :class:`~lorescan.match.view.ScanView`: keys the automaton cannot decide.

Regex keys (line-local ones tested text by text and cached in the ChatScan beside the
literal hits, see :mod:`lorescan.match.regexscope`; the others on the window's haystack),
special plain keys (:func:`~lorescan.match.plainkey.match_plain_key` on the haystack), and
macro keys (expanded by the scan's substitute, :mod:`lorescan.match.macros`, and matched by
their own side matcher), with the reports of what a budget cut off.
"""
from __future__ import annotations

from typing import Sequence

from . import _kernels
from .compile import EMPTY, SKIP, literal_absent
from .keys import MacroKey, PlainKey, RegexKey, SpecialKey
from .macros import MacroState, resolve_macros
from ..js.regex import JSText
from ..errors import LorebookError
from .scanwork import ScanWork
from .plainkey import match_plain_key
from .window import MARKER, Window
from .viewhits import _COUNTED_DEPTH, ViewHits


class ViewKeys(ViewHits):
    """Special keys (regex, plain, macro) in a window, and cut-off reports (a base of ScanView)."""

    def _eval_special(self, spec: SpecialKey, window: Window) -> tuple[bool, bool]:
        """(matches, cut off by the regex budget) for one special key in ``window``."""
        key = (spec, window)
        found = self._special.get(key)
        if found is not None:
            return found
        if type(spec) is RegexKey:
            found = self._eval_regex(spec, window)
            if found[1]:
                self._cut_rx[spec.raw] = spec.rx
        elif type(spec) is PlainKey:
            texts = [self.haystack(window)] if self.joined else self.texts(window)
            found = (any(match_plain_key(t, spec.text, case_sensitive=spec.case_sensitive,
                                         whole_words=spec.whole_words, options=self.options)
                         for t in texts), False)
        elif type(spec) is MacroKey:
            found = self._eval_macro(spec, window)
        else:
            raise TypeError(f"not a special key: {spec!r}")
        self._special[key] = found
        return found

    def _eval_regex(self, spec: RegexKey, window: Window) -> tuple[bool, bool]:
        if spec.lit != SKIP and literal_absent(spec.lit, self.window_hits(window)):
            return (False, False)       # no literal a match needs is present: no search
        if spec.rid >= 0 and window.depth > 0 and (spec.rx.line_local or not self.joined):
            hits, cut = self._regex_window(window)
            rid = spec.rid
            return (rid in hits, rid not in hits and rid in cut)
        texts: Sequence[str] = [self.haystack(window)] if self.joined else self.texts(window)
        found = (False, False)
        for t in texts:
            r = self.regex_budget.search(spec.rx, t)
            if r:
                return (True, False)
            if r is None:
                found = (False, True)
        return found

    # -- regex keys tested text by text -------------------------------------------------
    def _regex_text(self, text: str, lit_hits: frozenset[int] | None = None
                    ) -> tuple[frozenset[int], frozenset[int]]:
        """(rids that match, rids cut off) among the per-text regexes, for one text.

        Joined mode tests ``"\x01" + text`` (the text's piece of the haystack, see
        regexscope); slot mode the text itself. A regex whose required literal is not in the
        text's literal hits (``lit_hits``, looked up when None) is not run. Cached in the
        ChatScan unless something was cut off.
        """
        found = self._regex_texts.get(text)
        if found is not None:
            return found
        cache, compiled = self._cache, self.compiled
        stored = cache.lookup_regex(self._regex_token, text)
        if stored is not None:
            found = (stored, EMPTY)
        else:
            if lit_hits is None:
                lit_hits = cache.lookup(self._matcher, text, self.fuzzy_work)
            probe = JSText(MARKER + text if self.joined else text)
            regexes, search = compiled.regexes, self.regex_budget.search
            hits, cut = [], []
            for rid in self._regexes_to_try(lit_hits):
                r = search(regexes[rid], probe)
                if r:
                    hits.append(rid)
                elif r is None:
                    cut.append(rid)
            found = (frozenset(hits), frozenset(cut))
            if not cut:
                cache.store_regex(self._regex_token, text, found[0])
        self._regex_texts[text] = found
        return found

    def _regexes_to_try(self, lit_hits: frozenset[int]) -> list[int]:
        """The per-text rids whose prefilter lets a text with these literal hits through,
        ascending: those without literals, and those with a literal among the hits."""
        index = self._rid_index
        if index is None:
            lits = self.compiled.regex_lits
            always: list[int] = []
            by_vid: dict[int, list[int]] = {}
            for rid in self._per_text_rids:
                lit = lits[rid]
                if lit == SKIP:
                    always.append(rid)
                for vid in ((lit,) if isinstance(lit, int) else lit) if lit != SKIP else ():
                    by_vid.setdefault(vid, []).append(rid)
            index = self._rid_index = (always, by_vid)
        always, by_vid = index
        if len(by_vid) < len(lit_hits):
            found = [rid for vid, rids in by_vid.items() if vid in lit_hits for rid in rids]
        else:
            found = [rid for vid in lit_hits if vid in by_vid for rid in by_vid[vid]]
        if not found:
            return always
        return sorted(set(always).union(found))

    def _regex_window_counted(self, window: Window) -> tuple[frozenset[int], frozenset[int]]:
        """:meth:`_regex_window` with its messages' part counted from turn to turn in the ChatScan
        (as :meth:`_message_union` counts the literal hits), the other texts added to it."""
        depth = int(window.depth)
        messages = tuple(self.segments[:depth] or [""])
        cuts: list[frozenset[int]] = []

        def hits_of(i: int) -> frozenset[int]:
            hits, cut = self._regex_text(messages[i])
            if cut:
                cuts.append(cut)
            return hits
        union = _kernels.hits.window_union
        part = self._counted_union((self._regex_token, depth), messages, hits_of, lambda: not cuts)
        rest = self.texts(window)[len(messages):]
        n_chunks = min(window.recursion, len(self.chunks))       # the last texts; their hits are known
        first_chunk = len(rest) - n_chunks
        chunk_hits = self._chunk_hit_list() if n_chunks else []
        per_text = [self._regex_text(t, chunk_hits[i - first_chunk] if i >= first_chunk else None)
                    for i, t in enumerate(rest)]
        found = (union([part, *[h for h, _ in per_text]]), union([*cuts, *[c for _, c in per_text if c]]))
        self._regex_windows[window] = found
        return found

    def _regex_window(self, window: Window) -> tuple[frozenset[int], frozenset[int]]:
        """(rids that match, rids cut off) over the window's texts: unions of per-text sets."""
        found = self._regex_windows.get(window)
        if found is None and 0 < window.depth and int(window.depth) <= _COUNTED_DEPTH:
            found = self._regex_window_counted(window)
        if found is None:
            texts = self.texts(window)
            n_chunks = min(window.recursion, len(self.chunks))   # the last texts; their hits are known
            first_chunk = len(texts) - n_chunks
            chunk_hits = self._chunk_hit_list() if n_chunks else []
            per_text = [self._regex_text(t, chunk_hits[i - first_chunk] if i >= first_chunk else None)
                        for i, t in enumerate(texts)]
            union = _kernels.hits.window_union
            found = (union([h for h, _ in per_text]), union([c for _, c in per_text if c]))
            self._regex_windows[window] = found
        return found

    def cut_keys(self) -> list[str]:
        """The raw regex keys cut off so far in this view."""
        return list(self._cut_rx)

    def fuzzy_cutoff_report(self) -> list[str]:
        """The line that says fuzzy matching was cut off in this scan (none if it was not)."""
        line = self.fuzzy_work.describe()
        return [line] if line else []

    def key_hit_cutoff_report(self) -> list[str]:
        """The line that says key matching was cut off in a text of this scan, at its key-hit
        budget (none if it was not; see :class:`~lorescan.match.scanwork.ScanWork`)."""
        work = self.fuzzy_work
        line = work.describe_key_cut() if isinstance(work, ScanWork) else ""
        return [line] if line else []

    def cut_off_report(self, raw_keys: Sequence[str]) -> list[str]:
        """One line per distinct cut-off regex key among ``raw_keys``: "regex key … was cut
        off after N ms …" (see RegexBudget.describe)."""
        out = []
        for raw in dict.fromkeys(raw_keys):
            rx = self._cut_rx.get(raw)
            out.append(self.regex_budget.describe(raw, rx) if rx is not None
                       else f"regex key {raw!r} was cut off")
        return out

    def _side_state(self) -> MacroState:
        if self._side is None:
            assert self.substitute is not None
            self._side = resolve_macros(self.compiled, self.substitute, self._cache, room=self._macro_room(),
                                        max_key_length=self.limits.max_key_length, too_long=self._macro_too_long)
        return self._side

    def _macro_room(self) -> int:
        """The longest expansion of a macro key worth building: a plain key's limit, or a regex
        key's (its pattern, two slashes and every flag), whichever is longer."""
        return max(self.limits.max_key_length, self.limits.max_regex_length + 2 + len("dgimsuy"))

    def _macro_too_long(self, raw: str, what: str) -> LorebookError:
        """The error for a macro key expanded past the key limit, naming the entry that has it."""
        field, uid = "key", None
        for i, plan in enumerate(self.compiled.plans_sub):
            refs = [("key", k, r) for k, r in plan.primary] + [("keysecondary", k, r) for k, r in enumerate(plan.secondary)]
            found = next((f"{name}[{k}]" for name, k, r in refs if type(r) is MacroKey and r.raw == raw), None)
            if found is not None:
                field, uid = found, (self._uid_of(i) if self._uid_of is not None else None)
                break
        return LorebookError(f"the key {raw[:60]!r} {what} after macro substitution, above the limit "
                             f"max_key_length={self.limits.max_key_length}", source=self.compiled.name or "<memory>",
                             entry=uid, field=field)

    def _side_chunk_hits(self, stop: int) -> list[frozenset[int]]:
        # side-matcher hits per chunk, once per view; by part where no variant spans a part's end
        have = self._side_chunks
        macros = self._side_state()
        matcher, lookup, content_of = macros.matcher, self._cache.lookup, self._content_of
        for i in range(len(have), min(stop, len(self.chunks))):
            parts, owners = self._chunk_parts[i], self._chunk_entries[i]
            if parts is None or matcher.has_newline:
                have.append(lookup(matcher, self.chunks[i], self.fuzzy_work))
            elif owners is None or len(owners) != len(parts) or content_of is None:
                have.append(_kernels.hits.window_union([lookup(matcher, part, self.fuzzy_work) for part in parts]))
            else:
                have.append(_kernels.hits.window_union([
                    macros.content_hits(j, part) if part == content_of(j) else lookup(matcher, part, self.fuzzy_work)
                    for j, part in zip(owners, parts)]))
        return have

    def _side_hits(self, window: Window) -> frozenset[int]:
        found = self._side_windows.get(window)
        if found is None:
            matcher = self._side_state().matcher
            lookup = self._cache.lookup
            texts = self.texts(window)
            if texts and window.recursion:
                chunks = len(self.chunks[:window.recursion])
                work = self.fuzzy_work
                found = _kernels.hits.window_union([lookup(matcher, t, work) for t in texts[:len(texts) - chunks]]
                                                   + self._side_chunk_hits(window.recursion)[:chunks])
            else:
                found = _kernels.hits.window_union([lookup(matcher, t, self.fuzzy_work) for t in texts])
            self._side_windows[window] = found
        return found

    def _eval_macro(self, spec: MacroKey, window: Window) -> tuple[bool, bool]:
        ref = self._side_state().refs[spec]
        if isinstance(ref, int):
            return (ref >= 0 and ref in self._side_hits(window)), False
        return self._eval_special(ref, window)

