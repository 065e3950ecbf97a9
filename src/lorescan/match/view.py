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
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import _kernels
from .compile import EMPTY, SKIP, literal_absent
from .keys import KeyRef, MacroKey, PlainKey, RegexKey, SpecialKey
from .cache import ChatScan
from .macros import MacroState, resolve_macros
from ..js.regex import JSRegex, JSText
from ..errors import LorebookError
from ..limits import DEFAULT_LIMITS, Limits
from .options import MatchOptions
from .fuzzy import FuzzyWork
from .scanwork import ScanWork
from .regexscope import RegexBudget
from ..js.text import has_js_whitespace, is_ascii_word_char, is_nospace_char, is_unicode_word_char, js_lower, js_trim

if TYPE_CHECKING:
    from .compile import CompiledKeys, EntryPlan

__all__ = ["SOURCE_NAMES", "MAX_SCAN_DEPTH", "Window", "WindowPart", "EntryMatch", "ScanView", "match_plain_key"]

SOURCE_NAMES = ("persona_description", "character_description", "character_personality",
                "character_depth_prompt", "scenario", "creator_notes")
MAX_SCAN_DEPTH = 1000
MARKER = "\x01"
JOINER = "\n\x01"


@dataclass(frozen=True, slots=True)
class Window:
    """Which texts one entry sees in one pass (docs/sillytavern-mode.md#st-scan-text).

    ``depth``: newest messages scanned (<= 0: the haystack is empty, nothing else is seen
    either); ``sources``: bit i set = SOURCE_NAMES[i] is appended; ``recursion``: how many
    recursion chunks (oldest first) are appended (0 in MIN_ACTIVATIONS passes).
    """

    depth: float
    sources: int = 0
    recursion: int = 0


@dataclass(frozen=True, slots=True)
class WindowPart:
    """One text of a window, in haystack order.

    ``kind``: ``message``, ``source``, ``inject`` or ``recursion``; ``index``: a message's
    place counting from the newest (0), a source's place in ``SOURCE_NAMES``, an inject's
    place, a recursion chunk's number (1 = the oldest); ``label``: the same in words
    (``message 0 (newest = 0)``, ``scenario``, ``inject 0``, ``recursion text 1``).
    """

    kind: str
    index: int
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class WindowTexts:
    """The texts a scan's windows are cut from: message segments (newest first), sources,
    injects and recursion chunks."""

    segments: tuple[str, ...]
    sources: tuple[str, ...]
    injects: tuple[str, ...]
    chunks: tuple[str, ...]

    def labelled_texts(self, window: Window) -> list[tuple[str, str]]:
        """The texts ``window`` covers, in haystack order, each with a label ("message 0
        (newest = 0)", "scenario", "inject 0", "recursion text 1", ...)."""
        return [(p.label, p.text) for p in self.parts(window)]

    def parts(self, window: Window) -> list[WindowPart]:
        """:meth:`labelled_texts` with each text's kind and place (for explanations)."""
        if window.depth <= 0:
            return []
        depth = min(int(window.depth), MAX_SCAN_DEPTH)
        segments = self.segments[:depth]
        out = [WindowPart("message", i, f"message {i} (newest = 0)", t) for i, t in enumerate(segments)] if segments \
            else [WindowPart("message", 0, "no message", "")]
        for i, text in enumerate(self.sources):
            if window.sources >> i & 1 and text:
                out.append(WindowPart("source", i, SOURCE_NAMES[i], text))
        out.extend(WindowPart("inject", i, f"inject {i}", t) for i, t in enumerate(self.injects))
        if window.recursion:
            out.extend(WindowPart("recursion", i + 1, f"recursion text {i + 1}", t)
                       for i, t in enumerate(self.chunks[:window.recursion]))
        return out


@dataclass(frozen=True, slots=True)
class EntryMatch:
    """Key results for one entry in one window.

    ``primary``: index in ``entry.key`` of the first primary key (list order) that matches,
    or None. ``secondary``: one bool per secondary key, in order (an empty key is False).
    ``timed_out``: regex keys (raw) whose evaluation was cut off by the scan's regex time
    budget (counted as no match this turn, never cached; see :meth:`ScanView.cut_off_report`).
    """

    primary: int | None
    secondary: tuple[bool, ...]
    timed_out: tuple[str, ...] = ()


def _is_word(ch: str, options: MatchOptions) -> bool:
    return is_ascii_word_char(ch) if options.word_chars == "ascii" else is_unicode_word_char(ch)


def _boundary_ok(outer: str, inner: str, options: MatchOptions) -> bool:
    if not _is_word(outer, options):
        return True
    return options.word_chars == "unicode" and options.nospace_scripts and (
        is_nospace_char(outer) or is_nospace_char(inner))


def _empty_key_matches(text: str, options: MatchOptions) -> bool:
    def blocks(ch: str) -> bool:       # a character that is no boundary on its side
        return _is_word(ch, options) and not (options.word_chars == "unicode" and options.nospace_scripts
                                              and is_nospace_char(ch))
    n = len(text)
    if n == 0 or not blocks(text[0]) or not blocks(text[-1]):
        return True
    return any(not blocks(text[i - 1]) and not blocks(text[i]) for i in range(1, n))


def match_plain_key(haystack: str, key: str, *, case_sensitive: bool, whole_words: bool,
                    options: MatchOptions) -> bool:
    """docs/sillytavern-mode.md#st-plain-keys (and docs/improved-profile.md under improved options) for one plain key on one string."""
    if not case_sensitive:
        haystack, key = js_lower(haystack), js_lower(key)
    if not whole_words:
        return key in haystack
    if has_js_whitespace(key) and options.multiword == "substring":
        return key in haystack
    if key == "":
        # ST's pattern (?:^|\W)(?:$|\W) with nothing between: some position has a boundary
        # on both sides (a SillyTavern haystack always does: it starts with U+0001).
        return _empty_key_matches(haystack, options)
    n, k = len(haystack), len(key)
    start = haystack.find(key)
    while start != -1:
        end = start + k
        before_ok = start == 0 or _boundary_ok(haystack[start - 1], key[0], options)
        after_ok = end == n or _boundary_ok(haystack[end], key[-1], options)
        if before_ok and after_ok:
            return True
        start = haystack.find(key, start + 1)
    return False


def _content_union(compiled: "CompiledKeys", owners: Sequence[int]) -> frozenset[int]:
    """The union of the compile-time content hits of entries ``owners``."""
    content_hits = compiled.content_hits
    return _kernels.hits.window_union([content_hits[j] for j in owners])


def _segments_of(messages: Sequence[str]) -> list[str]:
    msgs = list(messages[:MAX_SCAN_DEPTH])
    last = max((i for i, m in enumerate(msgs) if m), default=-1)
    return [js_trim(m) if m else "" for m in msgs[:last + 1]]


class ScanView:
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

    def __init__(self, compiled: "CompiledKeys", messages: Sequence[str], sources: Sequence[str] = ("",) * 6,
                 injects: Sequence[str] = (), *, cache: ChatScan | None = None,
                 substitute: Callable[[str], str] | None = None, joined: bool = True,
                 regex_timeout: float | None = 0.25, regex_budget: RegexBudget | None = None,
                 oldest_index: int = 0, content_of: Callable[[int], str] | None = None,
                 limits: Limits = DEFAULT_LIMITS, fuzzy_work: FuzzyWork | None = None,
                 uid_of: Callable[[int], Any] | None = None) -> None:
        self.compiled = compiled
        self.limits = limits
        self._content_of = content_of
        self._uid_of = uid_of
        self.options = compiled.options
        self.substitute = substitute
        self.joined = joined
        self.regex_timeout = regex_timeout
        self.regex_budget = regex_budget if regex_budget is not None else RegexBudget(
            DEFAULT_LIMITS.regex_time_per_scan, regex_timeout)
        self.fuzzy_work = fuzzy_work if fuzzy_work is not None else ScanWork(limits)
        self.sources = tuple(sources)
        self._nonempty_sources = sum(1 << i for i, text in enumerate(self.sources) if text) if any(self.sources) else 0
        self.injects = tuple(injects)
        self.chunks: list[str] = []
        self._messages = messages
        self._n_messages = min(len(messages), MAX_SCAN_DEPTH)
        self._oldest = oldest_index
        self._cache = cache if cache is not None else ChatScan(max_texts=1 << 20, max_bytes=1 << 40)
        self._matcher = compiled.matcher
        self._plans = compiled.plans if substitute is None else compiled.plans_sub
        self._chunk_entries: list[tuple[int, ...] | None] = []
        self._chunk_parts: list[tuple[str, ...] | None] = []
        self._msg_parts: dict[int, list[frozenset[int]]] = {}
        self._chunk_hits: list[frozenset[int]] = []        # main-matcher hits per chunk, lazily
        self._by_window: dict[Window, frozenset[int]] = {}
        self._last_window: Window | None = None
        self._last_hits: frozenset[int] = EMPTY
        self._no_secondary: dict[int | None, EntryMatch] = {}
        self._bounds: dict[tuple[int, int, int], frozenset[int]] = {}
        self._bounds_latest: dict[tuple[int, int], tuple[int, frozenset[int]]] = {}
        self._segments: list[str] | None = None
        self._haystacks: dict[Window, str] = {}
        self._special: dict[tuple[SpecialKey, Window], tuple[bool, bool]] = {}
        self._side: MacroState | None = None              # the macro keys as this scan's substitute expands them
        self._side_windows: dict[Window, frozenset[int]] = {}
        self._side_chunks: list[frozenset[int]] = []       # side-matcher hits per recursion chunk
        self._regex_windows: dict[Window, tuple[frozenset[int], frozenset[int]]] = {}
        self._regex_texts: dict[str, tuple[frozenset[int], frozenset[int]]] = {}
        self._cut_rx: dict[str, JSRegex] = {}            # raw key -> regex, for cut-off reports
        self._regex_token = f"{compiled.matcher.token}:re:{'joined' if joined else 'texts'}"
        self._per_text_rids = compiled.regex_line_local if joined else range(len(compiled.regexes))
        self._rid_index: tuple[list[int], dict[int, list[int]]] | None = None

    # -- texts -------------------------------------------------------------------------
    @property
    def segments(self) -> list[str]:
        """Message segments as scanned (docs/sillytavern-mode.md#st-scan-text): trimmed, holes kept, trailing empties dropped."""
        if self._segments is None:
            self._segments = _segments_of(self._messages)
        return self._segments

    def add_recursion_chunk(self, text: str, *, entries: Sequence[int] | None = None,
                            parts: Sequence[str] | None = None) -> None:
        """Append one recursion-buffer item (visible to windows with a larger ``recursion``).

        ``entries``: optional indexes of the entries whose contents, joined with "\\n", make
        up ``text``; when that holds, the chunk's hits are the union of the compile-time
        content hits (no rescan). ``parts``: optional texts whose join with "\\n" is ``text``
        (the contents as substituted, one per entry of ``entries``); then the hits are the union
        of the parts' (an entry's own content: compile-time hits; a substituted one: looked up
        in the chat cache, scanned once per chat). Otherwise the text is scanned.
        """
        self.chunks.append(text)
        self._chunk_entries.append(tuple(entries) if entries is not None else None)
        self._chunk_parts.append(tuple(parts) if parts is not None and "\n".join(parts) == text else None)
        # Engines ask about windows with recursion 0 or with every chunk so far, so windows
        # over fewer chunks are done with: forget them (each loop then holds O(hits), not
        # O(loops x hits)). Only caches: a window asked about again is simply recomputed.
        stale = len(self.chunks) - 1
        if stale:
            for cache in (self._by_window, self._haystacks, self._side_windows):
                for w in [w for w in cache if w.recursion == stale]:
                    del cache[w]
            for k in [k for k in self._special if k[1].recursion == stale]:
                del self._special[k]

    def texts(self, window: Window) -> list[str]:
        """The separate texts a window covers, in haystack order (empty if depth <= 0): the
        texts of :meth:`labelled_texts`, without making the labels."""
        if window.depth <= 0:
            return []
        out = self.segments[:min(int(window.depth), MAX_SCAN_DEPTH)] or [""]
        if window.sources:
            out.extend(text for i, text in enumerate(self.sources) if window.sources >> i & 1 and text)
        out.extend(self.injects)
        if window.recursion:
            out.extend(self.chunks[:window.recursion])
        return out

    def labelled_texts(self, window: Window) -> list[tuple[str, str]]:
        """:meth:`texts` with a label each ("message 0 (newest = 0)", "scenario", "inject 0",
        "recursion text 1", ...), for explanations."""
        return self.snapshot().labelled_texts(window)

    def snapshot(self) -> "WindowTexts":
        """The texts of this view as plain data (references, no copies of the strings), so
        an explanation can outlive the view and its caches."""
        return WindowTexts(tuple(self.segments), tuple(self.sources), tuple(self.injects), tuple(self.chunks))

    def snapshot_later(self) -> Callable[[], "WindowTexts"]:
        """:meth:`snapshot`, deferred: a function that builds the same value when an
        explanation first needs it. It holds the view's texts, not the view or its caches."""
        messages, segments = self._messages, self._segments
        sources, injects, chunks = tuple(self.sources), tuple(self.injects), tuple(self.chunks)

        def build() -> WindowTexts:
            return WindowTexts(tuple(segments if segments is not None else _segments_of(messages)),
                               sources, injects, chunks)
        return build

    def haystack(self, window: Window) -> str:
        """The exact SillyTavern haystack of docs/sillytavern-mode.md#st-scan-text for this window."""
        hs = self._haystacks.get(window)
        if hs is None:
            texts = self.texts(window)
            hs = MARKER + JOINER.join(texts) if texts else ""
            self._haystacks[window] = hs
        return hs

    # -- hit sets ----------------------------------------------------------------------
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
                parts = self._message_hits(depth)
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

    def _regex_window(self, window: Window) -> tuple[frozenset[int], frozenset[int]]:
        """(rids that match, rids cut off) over the window's texts: unions of per-text sets."""
        found = self._regex_windows.get(window)
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
