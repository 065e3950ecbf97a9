"""The naive reference matcher: SPEC 4 and 5 applied literally (test oracle and benchmark baseline).

This is the plain implementation ``lorescan.match.view`` started with: it builds each
haystack string and tests every key of every entry with ``in``, explicit boundary checks
or a compiled regex. The compiled ScanView must agree with it exactly.
"""
from __future__ import annotations

from typing import Callable, Sequence

from lorescan.match.view import EntryMatch, MAX_SCAN_DEPTH, SOURCE_NAMES, Window
from lorescan.model import Entry
from lorescan.match import MatchOptions
import unicodedata

import regex

from lorescan.js.text import NOSPACE_RANGES, has_js_whitespace, js_lower, js_trim

MARKER = "\x01"
JOINER = "\n\x01"

__all__ = ["ReferenceScanView", "match_plain_key", "forget_caches"]


def forget_caches() -> None:
    """Empty the caches a naive turn would otherwise find warm: the regex translator's
    (``tool_regex``'s compile, and its memo of translated classes) and the ``regex`` module's
    compiled patterns.

    The reference keeps no caches of its own and tests a regex key by translating and
    compiling it, as SillyTavern builds a ``RegExp`` per test. Those two process-wide caches
    made a naive weyland turn (575 compilations) fall from about 200 ms to about 18 ms after
    four turns in a row, so a baseline sampled between other work measured whichever state
    they happened to be in. Benchmarks call this before every naive turn: the baseline is the
    cold one, every time.
    """
    import lorescan.js.regex as jsregex
    # every memo of the regex package (the parse tree's memo too, since the package parses once)
    for value in vars(jsregex).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()
    regex.purge()


# Written independently of lorescan.match.view on purpose. ASCII words (SillyTavern): its own
# formulation, the pattern (?:^|\W)key(?:$|\W) searched over the whole string. Unicode
# words (SPEC 16.1-16.2): every occurrence (overlapping ones too) checked against the
# general categories read straight from unicodedata.
_ASCII_WW = "(?:\\A|[^A-Za-z0-9_]){}(?:\\Z|[^A-Za-z0-9_])"


def _unicode_word(ch: str) -> bool:
    return ch in "\u200c\u200d" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"


def _nospace(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in NOSPACE_RANGES)


def _unicode_whole_word(haystack: str, key: str, nospace_scripts: bool) -> bool:
    starts = range(len(haystack) + 1) if key == "" else (
        m.start() for m in regex.finditer(regex.escape(key), haystack, overlapped=True))
    for start in starts:
        end = start + len(key)
        before = haystack[start - 1] if start > 0 else None
        after = haystack[end] if end < len(haystack) else None
        sides_ok = []
        for outer, inner in ((before, key[:1]), (after, key[-1:])):
            ok = outer is None or not _unicode_word(outer)
            if not ok and nospace_scripts:
                ok = _nospace(outer) or (inner != "" and _nospace(inner))
            sides_ok.append(ok)
        if all(sides_ok):
            return True
    return False


def match_plain_key(haystack: str, key: str, *, case_sensitive: bool, whole_words: bool,
                    options: MatchOptions, patterns: dict[str, object] | None = None) -> bool:
    """SPEC 5.2 (and 16.1-16.3 under improved options) for one plain key on one string.

    ``patterns``: where to keep the compiled ASCII whole-word patterns by key (a memoizing
    view's; None = compile each time, through the regex module's own bounded cache)."""
    if not case_sensitive:
        haystack, key = js_lower(haystack), js_lower(key)
    if not whole_words or (has_js_whitespace(key) and options.multiword == "substring"):
        return key in haystack
    if options.word_chars == "ascii":
        if patterns is None:
            return regex.search(_ASCII_WW.format(regex.escape(key)), haystack) is not None
        rx = patterns.get(key)
        if rx is None:
            rx = patterns[key] = regex.compile(_ASCII_WW.format(regex.escape(key)))
        return rx.search(haystack) is not None
    return _unicode_whole_word(haystack, key, options.nospace_scripts)


class ReferenceTexts:
    """The texts of a view, kept for explanations after the turn (what ``ScanView.snapshot``
    gives), labelled as the engine labels them."""

    def __init__(self, segments: Sequence[str], sources: Sequence[str], injects: Sequence[str],
                 chunks: Sequence[str]) -> None:
        self.segments, self.sources = tuple(segments), tuple(sources)
        self.injects, self.chunks = tuple(injects), tuple(chunks)

    def labelled_texts(self, window: Window) -> list[tuple[str, str]]:
        if window.depth <= 0:
            return []
        segments = self.segments[:min(int(window.depth), MAX_SCAN_DEPTH)]
        out = [(f"message {i} (newest = 0)", t) for i, t in enumerate(segments)] or [("no message", "")]
        out += [(SOURCE_NAMES[i], t) for i, t in enumerate(self.sources) if window.sources >> i & 1 and t]
        out += [(f"inject {i}", t) for i, t in enumerate(self.injects)]
        if window.recursion:
            out += [(f"recursion text {i + 1}", t) for i, t in enumerate(self.chunks[:window.recursion])]
        return out


class _Forgetful(dict):
    """A memo that keeps nothing (a view built without ``memoize``)."""

    def __setitem__(self, key: object, value: object) -> None:
        pass


class ReferenceScanView:
    """SPEC 4 and 5 applied literally: build the haystack, test every key (the naive oracle).

    ``compiled``: the book (entry index = position in ``compiled.entries``; its
    ``options`` are the plain-key rules), or its keys with ``content_of`` the book's own
    ``CompiledBook.content_of``; ``cache``: the caller-owned per-chat hit cache;
    ``messages``: message strings newest first, as scanned (``"Name: text"`` when names are
    included), untrimmed; ``sources``: six strings in SOURCE_NAMES order ("" = absent);
    ``injects``: scanned prompts in order; ``substitute``:
    macro hook applied to keys containing ``{{``; ``joined``: True = SillyTavern's single
    joined haystack (regex keys see U+0001 markers and can span texts); False = each text
    is matched on its own (lorebook-slot mode).
    """

    def __init__(self, compiled: object, messages: Sequence[str], sources: Sequence[str] = ("",) * 6,
                 injects: Sequence[str] = (), *, cache: object = None,
                 substitute: Callable[[str], str] | None = None, joined: bool = True,
                 regex_timeout: float | None = 0.25, regex_budget: object = None,
                 oldest_index: int = 0, limits: object = None, fuzzy_work: object = None,
                 content_of: Callable[[int], str] | None = None, uid_of: object = None,
                 memoize: bool = False) -> None:
        # fuzzy_work (the scan's fuzzy comparison budget) is accepted and ignored: the oracle's
        # inputs are small, and it never cuts fuzzy matching short.
        # regex_budget is accepted and ignored: the oracle gives each evaluation its own
        # wall-clock regex_timeout, as the engines did before the scan-wide budget.
        # oldest_index only aligns the compiled view's cache blocks: nothing to do here.
        # limits (the key limit macro expansions are held to) is the compiled view's guard
        # against hostile macro values; the oracle's inputs are small.
        # The oracle reads the source entries. An engine hands a view its book's compiled keys
        # and the book's ``content_of``: the entries are those of the book that method belongs to.
        if not hasattr(compiled, "entries"):
            compiled = getattr(content_of, "__self__", None)
            assert compiled is not None and hasattr(compiled, "entries"), "the reference view needs a book"
        self.compiled = compiled
        self.entries = compiled.entries
        self.options = compiled.options
        self.substitute = substitute
        self.joined = joined
        self.regex_timeout = regex_timeout
        msgs = list(messages[:MAX_SCAN_DEPTH])
        last = max((i for i, m in enumerate(msgs) if m), default=-1)
        self.segments = [js_trim(m) if m else "" for m in msgs[:last + 1]]
        self.sources = tuple(sources)
        self.injects = tuple(injects)
        self.chunks: list[str] = []
        # memoize=True (tests that ask every entry in several ways): memos of pure functions of
        # the texts, emptied when a recursion chunk is added: a window's haystack/texts, their
        # lowercase forms, and each prepared key's result in a window (timeouts are never kept:
        # each evaluation gets its own regex_timeout). They only stop the oracle recomputing the
        # same naive answer. Off by default: the benchmarks' naive baseline recomputes everything.
        self._memo: dict[tuple, object] = {} if memoize else _Forgetful()
        self._patterns: dict[str, object] | None = {} if memoize else None

    def sharing(self, *, substitute: Callable[[str], str] | None) -> "ReferenceScanView":
        """This view with another macro hook, sharing its texts (recursion chunks included)
        and its memos: results are memoized per key after substitution, so that is exact."""
        other = object.__new__(ReferenceScanView)
        other.__dict__.update(self.__dict__)
        other.substitute = substitute
        return other

    # -- texts -------------------------------------------------------------------------
    def add_recursion_chunk(self, text: str, *, entries: Sequence[int] | None = None,
                            parts: Sequence[str] | None = None) -> None:
        """Append one recursion-buffer item (visible to windows with a larger ``recursion``;
        ``entries`` and ``parts`` are hints the naive view does not use)."""
        self.chunks.append(text)
        self._memo.clear()

    def texts(self, window: Window) -> list[str]:
        """The separate texts a window covers, in haystack order (empty if depth <= 0)."""
        if window.depth <= 0:
            return []
        depth = min(int(window.depth), MAX_SCAN_DEPTH)
        out = list(self.segments[:depth]) if self.segments[:depth] else [""]
        for i, text in enumerate(self.sources):
            if window.sources >> i & 1 and text:
                out.append(text)
        out.extend(self.injects)
        if window.recursion:
            out.extend(self.chunks[:window.recursion])
        return out

    def snapshot(self) -> ReferenceTexts:
        """The view's texts as plain data, for explanations after the turn."""
        return ReferenceTexts(self.segments, self.sources, self.injects, self.chunks)

    def snapshot_later(self) -> Callable[[], ReferenceTexts]:
        """:meth:`snapshot`, taken now and handed back when called."""
        texts = self.snapshot()
        return lambda: texts

    def labelled_texts(self, window: Window) -> list[tuple[str, str]]:
        """:meth:`texts` with the labels explanations use."""
        return self.snapshot().labelled_texts(window)

    def haystack(self, window: Window) -> str:
        """SPEC 4.2, step by step, as one string."""
        if window.depth <= 0:                                   # step 2
            return ""
        depth = min(int(window.depth), MAX_SCAN_DEPTH)          # step 3
        hs = MARKER + JOINER.join(self.segments[:depth])        # step 4
        for bit, source in enumerate(self.sources):             # step 5
            if window.sources & (1 << bit) and source != "":
                hs += JOINER + source
        if self.injects:                                        # step 6
            hs += JOINER + JOINER.join(self.injects)
        if window.recursion and self.chunks:                    # step 7
            hs += JOINER + JOINER.join(self.chunks[:window.recursion])
        return hs

    def cut_keys(self) -> list[str]:
        return []

    def cut_off_report(self, raw_keys: Sequence[str]) -> list[str]:
        return [f"regex key {raw!r} was cut off" for raw in dict.fromkeys(raw_keys)]

    # -- matching ----------------------------------------------------------------------
    def candidates(self, max_depth: int, recursion: int) -> Sequence[int] | None:
        """Entry indexes that can possibly match a key in any window up to these bounds.

        None means "every entry" (this plain implementation does not narrow).
        """
        return None

    def _window_texts(self, window: Window, lowered: bool) -> list[str]:
        """The strings a key is tested against in ``window`` (js_lower'ed if ``lowered``)."""
        memo_key = ("texts", window, lowered)
        texts = self._memo.get(memo_key)
        if texts is None:
            if lowered:
                texts = [js_lower(t) for t in self._window_texts(window, False)]
            else:
                texts = [self.haystack(window)] if self.joined else self.texts(window)
            self._memo[memo_key] = texts
        return texts

    def _key_hits(self, key: str, entry: Entry, window: Window) -> tuple[bool, bool]:
        """(matched, timed_out) for one already-prepared key."""
        from lorescan.js.regex import RegexTimeout, tool_regex
        rx = tool_regex(key)
        if rx is not None:
            memo_key = ("regex", key, window)
            if memo_key in self._memo:
                return self._memo[memo_key], False
            try:
                hit = any(rx.search(t, timeout=self.regex_timeout) for t in self._window_texts(window, False))
            except RegexTimeout:
                return False, True
            self._memo[memo_key] = hit
            return hit, False
        cs = entry.case_sensitive if entry.case_sensitive is not None else self.options.case_sensitive
        ww = entry.match_whole_words if entry.match_whole_words is not None else self.options.match_whole_words
        memo_key = ("plain", key, cs, ww, window)
        hit = self._memo.get(memo_key)
        if hit is None:
            # match_plain_key lowercases both sides when case-insensitive: the texts are
            # lowercased once here, and the key as it would.
            texts = self._window_texts(window, not cs)
            needle = key if cs else js_lower(key)
            hit = any(match_plain_key(t, needle, case_sensitive=True, whole_words=ww, options=self.options,
                                      patterns=self._patterns) for t in texts)
            self._memo[memo_key] = hit
        return hit, False

    def _prepare(self, key: str) -> str | None:
        if self.substitute is not None and "{{" in key:
            key = self.substitute(key)
        if not key:
            return None
        key = js_trim(key)
        if key == "" and self.options.blank_keys == "ignore":
            return None
        return key

    def match_entry(self, index: int, window: Window) -> EntryMatch:
        """Primary and secondary key results for entry ``index`` in ``window``."""
        entry = self.entries[index]
        timed_out: list[str] = []
        primary = None
        for i, raw in enumerate(entry.key):
            key = self._prepare(raw)
            if key is None:
                continue
            hit, to = self._key_hits(key, entry, window)
            if to:
                timed_out.append(raw)
            if hit:
                primary = i
                break
        secondary = []
        for raw in entry.keysecondary:
            key = self._prepare(raw)
            hit = False
            if key is not None:
                hit, to = self._key_hits(key, entry, window)
                if to:
                    timed_out.append(raw)
            secondary.append(hit)
        return EntryMatch(primary, tuple(secondary), tuple(timed_out))

    def key_hits(self, index: int, window: Window) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
        """Every primary and secondary key, one bool each (empty after substitution: False)."""
        entry = self.entries[index]

        def hit(raw: str) -> bool:
            key = self._prepare(raw)
            return key is not None and self._key_hits(key, entry, window)[0]
        return tuple(hit(k) for k in entry.key), tuple(hit(k) for k in entry.keysecondary)

    def score_entry(self, index: int, window: Window) -> tuple[int, int]:
        """Group-scoring counts (SPEC 8.3): matching primary and secondary keys, raw keys
        (no substitution, no trimming, empty keys counted as matching text)."""
        entry = self.entries[index]
        p = sum(self._key_hits(k, entry, window)[0] for k in entry.key)
        s = sum(self._key_hits(k, entry, window)[0] for k in entry.keysecondary)
        return p, s
