"""The texts part of :class:`~lorescan.match.view.ScanView`: its state and the texts of a window.

:class:`ViewTexts` is the view's first base class: it takes the constructor's arguments and
holds every cache the other parts use (so their state is declared in one place), appends
recursion chunks, and cuts a window's texts and haystack (docs/sillytavern-mode.md#st-scan-text).
It matches nothing: hit sets are :mod:`lorescan.match.viewhits`, special keys
:mod:`lorescan.match.viewkeys`, the entry answers :mod:`lorescan.match.view`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from .compile import EMPTY
from .keys import SpecialKey
from .cache import ChatScan
from .macros import MacroState
from ..js.regex import JSRegex
from ..limits import DEFAULT_LIMITS, Limits
from .fuzzy import FuzzyWork
from .scanwork import ScanWork
from .regexscope import RegexBudget
from .window import JOINER, MARKER, MAX_SCAN_DEPTH, EntryMatch, Window, WindowTexts, _segments_of

if TYPE_CHECKING:
    from .compile import CompiledKeys


class ViewTexts:
    """The texts of one scan and the view's caches (see :class:`~lorescan.match.view.ScanView`
    for the constructor's arguments)."""

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
        # the message unions this view read, by depth (what a turn's replay checks, st/memo.py);
        # _deep_read: it also read a window deeper than they are kept for
        self.message_unions: dict[int, frozenset[int]] = {}
        self.deep_read = False
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
