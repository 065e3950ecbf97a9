"""The naive reference matcher: SPEC 4 and 5 applied literally (test oracle and benchmark baseline).

This is the plain implementation ``lorescan.matching`` started with: it builds each
haystack string and tests every key of every entry with ``in``, explicit boundary checks
or a compiled regex. The compiled ScanView must agree with it exactly.
"""
from __future__ import annotations

from typing import Callable, Sequence

from lorescan.matching import EntryMatch, MAX_SCAN_DEPTH, Window
from lorescan.model import Entry, MatchOptions
from lorescan.textrules import (has_js_whitespace, is_ascii_word_char, is_nospace_char, is_unicode_word_char,
                                js_lower, js_trim)

MARKER = "\x01"
JOINER = "\n\x01"

__all__ = ["ReferenceScanView", "match_plain_key"]


def _is_word(ch: str, options: MatchOptions) -> bool:
    return is_ascii_word_char(ch) if options.word_chars == "ascii" else is_unicode_word_char(ch)


def _boundary_ok(outer: str, inner: str, options: MatchOptions) -> bool:
    if not _is_word(outer, options):
        return True
    return options.word_chars == "unicode" and options.nospace_scripts and (
        is_nospace_char(outer) or is_nospace_char(inner))


def match_plain_key(haystack: str, key: str, *, case_sensitive: bool, whole_words: bool,
                    options: MatchOptions) -> bool:
    """SPEC 5.2 (and 16.1-16.3 under improved options) for one plain key on one string."""
    if not case_sensitive:
        haystack, key = js_lower(haystack), js_lower(key)
    if not whole_words:
        return key in haystack
    if has_js_whitespace(key) and options.multiword == "substring":
        return key in haystack
    if key == "":
        # ST's pattern (?:^|\W)(?:$|\W): true on "" and on anything holding a non-word char.
        return haystack == "" or any(not _is_word(c, options) for c in haystack)
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


class ReferenceScanView:
    """SPEC 4 and 5 applied literally: build the haystack, test every key (the naive oracle).

    ``compiled``: the book (entry index = position in ``compiled.entries``; its
    ``options`` are the plain-key rules); ``cache``: the caller-owned per-chat hit cache;
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
                 regex_timeout: float | None = 0.25) -> None:
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
        self._haystacks: dict[Window, str] = {}

    # -- texts -------------------------------------------------------------------------
    def add_recursion_chunk(self, text: str, *, entries: Sequence[int] | None = None) -> None:
        """Append one recursion-buffer item (visible to windows with a larger ``recursion``)."""
        self.chunks.append(text)

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

    def haystack(self, window: Window) -> str:
        """The exact SillyTavern haystack of SPEC 4.2 for this window."""
        hs = self._haystacks.get(window)
        if hs is None:
            texts = self.texts(window)
            hs = MARKER + JOINER.join(texts) if texts else ""
            self._haystacks[window] = hs
        return hs

    # -- matching ----------------------------------------------------------------------
    def candidates(self, max_depth: int, recursion: int) -> Sequence[int] | None:
        """Entry indexes that can possibly match a key in any window up to these bounds.

        None means "every entry" (this plain implementation does not narrow).
        """
        return None

    def _key_hits(self, key: str, entry: Entry, window: Window) -> tuple[bool, bool]:
        """(matched, timed_out) for one already-prepared key."""
        from lorescan.jsregex import RegexTimeout, compile_js_regex, parse_regex_key
        parsed = parse_regex_key(key)
        texts: Sequence[str]
        if parsed is not None:
            rx = compile_js_regex(*parsed)
            texts = [self.haystack(window)] if self.joined else self.texts(window)
            try:
                return any(rx.search(t, timeout=self.regex_timeout) for t in texts), False
            except RegexTimeout:
                return False, True
        cs = entry.case_sensitive if entry.case_sensitive is not None else self.options.case_sensitive
        ww = entry.match_whole_words if entry.match_whole_words is not None else self.options.match_whole_words
        texts = [self.haystack(window)] if self.joined else self.texts(window)
        return any(match_plain_key(t, key, case_sensitive=cs, whole_words=ww, options=self.options)
                   for t in texts), False

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

    def score_entry(self, index: int, window: Window) -> tuple[int, int]:
        """Group-scoring counts (SPEC 8.3): matching primary and secondary keys, raw keys
        (no substitution, no trimming, empty keys counted as matching text)."""
        entry = self.entries[index]
        p = sum(self._key_hits(k, entry, window)[0] for k in entry.key)
        s = sum(self._key_hits(k, entry, window)[0] for k in entry.keysecondary)
        return p, s
