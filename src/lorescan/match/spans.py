"""Where a key matched: the span, the matched text and a few words around it, found on the
exact haystack of one window (docs/sillytavern-mode.md#st-scan-text).

For explanations only. The engines decide with hit sets (:mod:`lorescan.match.view`) and never
build a span; an explanation rebuilds the window's haystack from the texts the turn kept and
finds the key's first match there (newest message first, as the haystack is ordered), with
the rules the engine applied: lowercasing, whole words, JS regex semantics.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..js.regex import JSRegex
from ..js.text import has_js_whitespace, js_lower
from .options import MatchOptions
from .view import JOINER, MARKER, WindowPart, _boundary_ok, _empty_key_matches

__all__ = ["KeySpan", "WindowHaystack", "find_plain_key", "locate_key", "CONTEXT_CHARS"]

CONTEXT_CHARS = 40
"""About how much text :attr:`KeySpan.before` and :attr:`KeySpan.after` keep (cut at a word edge)."""


@dataclass(frozen=True, slots=True)
class KeySpan:
    """Where one key matched in one window.

    Args:
        key: the key as matched (substituted and trimmed; a regex key as ``/body/flags``).
        kind, index, label: the text the match starts in (see :class:`lorescan.match.view.WindowPart`).
        start: where the match starts in that text (character offset).
        end: where it ends, in the text it ends in (``end_label``'s, when set).
        matched: the matched text as it stands in the haystack: across two texts it holds
            the separator, ``"\\n"`` + U+0001; a regex may also take in the U+0001 before its
            text or the ``"\\n"`` after it (``start`` and ``end`` stay inside the text).
        before, after: a few words of context on either side, from the same texts.
        inside_word: the longer word the match lies inside (a letter, digit or ``_``
            right before or after it, any script), or None.
        end_kind, end_index, end_label: the text the match ends in, when it runs across
            the separator into a later text of the joined window; else None.
        source_entry: for a match in a recursion chunk, the entry whose content holds the
            match's start (set by the engine's explanation; ``"<book>.<uid>"``), else None.
    """

    key: str
    kind: str
    index: int
    label: str
    start: int
    end: int
    matched: str
    before: str = ""
    after: str = ""
    inside_word: str | None = None
    end_kind: str | None = None
    end_index: int | None = None
    end_label: str | None = None
    source_entry: str | None = None

    @property
    def across(self) -> bool:
        """Whether the match runs across two texts of the joined window."""
        return self.end_label is not None

    @property
    def cases(self) -> tuple[str, ...]:
        """The unusual cases that hold, in words' order: ``inside_word``, ``across``, ``recursion``."""
        return tuple(c for c, on in (("inside_word", self.inside_word is not None), ("across", self.across),
                                     ("recursion", self.kind == "recursion")) if on)

    def shown(self) -> str:
        """The match with its context on one line, e.g. ``…a warm [embrace] by the fire…``
        (line breaks as ``⏎``; the U+0001 markers left out)."""
        before, matched, after = self.shown_parts()
        return (before + "[" + matched + "]" + after).strip()

    def shown_parts(self) -> tuple[str, str, str]:
        """:attr:`before`, :attr:`matched` and :attr:`after` as :meth:`shown` writes them."""
        return _visible(self.before), _visible(self.matched), _visible(self.after)

    def with_source(self, source_entry: str | None) -> "KeySpan":
        return replace(self, source_entry=source_entry)

    def to_json(self) -> dict[str, Any]:
        """Returns: every field, plus ``across`` and ``cases``."""
        return {"key": self.key, "kind": self.kind, "index": self.index, "label": self.label, "start": self.start,
                "end": self.end, "matched": self.matched, "before": self.before, "after": self.after,
                "inside_word": self.inside_word, "across": self.across, "end_kind": self.end_kind,
                "end_index": self.end_index, "end_label": self.end_label, "source_entry": self.source_entry,
                "cases": list(self.cases)}


def _visible(text: str) -> str:
    return text.replace(JOINER, "⏎").replace(MARKER, "").replace("\r", "").replace("\n", "⏎")


def _is_word(ch: str) -> bool:
    return ch == "_" or ch.isalnum()


def _lowered_offsets(text: str) -> list[int] | None:
    """Where each character of ``text`` lands in ``js_lower(text)`` (None: nowhere moves)."""
    lowered_lengths = [len(js_lower(ch)) for ch in text]
    if all(n == 1 for n in lowered_lengths):
        return None
    return [0, *itertools.accumulate(lowered_lengths)]


def find_plain_key(haystack: str, key: str, *, case_sensitive: bool, whole_words: bool,
                   options: MatchOptions, lowered: str | None = None) -> tuple[int, int] | None:
    """The first span of ``haystack`` where plain ``key`` matches, or None: exactly when
    :func:`lorescan.match.view.match_plain_key` is true (docs/sillytavern-mode.md#st-plain-keys).
    Offsets index ``haystack`` itself, also when lowercasing changed its length. ``lowered``:
    ``js_lower(haystack)`` when the caller has it."""
    if case_sensitive:
        hs, k = haystack, key
    else:
        hs, k = (lowered if lowered is not None else js_lower(haystack)), js_lower(key)
    span: tuple[int, int] | None = None
    if not whole_words or (has_js_whitespace(k) and options.multiword == "substring"):
        at = hs.find(k)
        span = (at, at + len(k)) if at != -1 else None
    elif k == "":
        if _empty_key_matches(hs, options):
            span = next(((i, i) for i in range(len(hs) + 1)
                         if _empty_key_matches(hs[max(0, i - 1):i + 1], options)), (0, 0))
    else:
        n, size = len(hs), len(k)
        at = hs.find(k)
        while at != -1:
            end = at + size
            if (at == 0 or _boundary_ok(hs[at - 1], k[0], options)) and \
                    (end == n or _boundary_ok(hs[end], k[-1], options)):
                span = (at, end)
                break
            at = hs.find(k, at + 1)
    if span is None or hs is haystack or len(hs) == len(haystack):
        return span
    offsets = _lowered_offsets(haystack)
    if offsets is None:
        return span
    return bisect.bisect_right(offsets, span[0]) - 1, bisect.bisect_left(offsets, span[1])


def _context_before(text: str, at: int) -> str:
    lo = max(0, at - CONTEXT_CHARS)
    piece = text[lo:at]
    if lo > 0:
        cut = piece.find(" ")
        piece = "…" + (piece[cut + 1:] if 0 <= cut < len(piece) - 1 else piece)
    return piece


def _context_after(text: str, at: int) -> str:
    hi = min(len(text), at + CONTEXT_CHARS)
    piece = text[at:hi]
    if hi < len(text):
        cut = piece.rfind(" ")
        piece = (piece[:cut] if cut > 0 else piece) + "…"
    return piece


class WindowHaystack:
    """One window's joined haystack, built once for every key an explanation locates in it.

    ``parts``: the window's texts in haystack order. The haystack is U+0001 + the texts
    joined by ``"\n"`` + U+0001 (docs/sillytavern-mode.md#st-scan-text); its lowercase form
    is made when a case-insensitive key first needs it.
    """

    __slots__ = ("parts", "text", "bases", "_lowered")

    def __init__(self, parts: Sequence[WindowPart]) -> None:
        self.parts = tuple(parts)
        self.text = MARKER + JOINER.join(p.text for p in self.parts) if self.parts else ""
        self.bases = list(itertools.accumulate((len(p.text) + len(JOINER) for p in self.parts[:-1]),
                                               initial=len(MARKER)))
        self._lowered: str | None = None

    def lowered(self) -> str:
        if self._lowered is None:
            self._lowered = js_lower(self.text)
        return self._lowered

    def locate(self, key: str, *, regex: JSRegex | None = None, case_sensitive: bool = False,
               whole_words: bool = False, options: MatchOptions, timeout: float | None = 0.25) -> KeySpan | None:
        """:func:`locate_key` on this haystack (joined)."""
        if not self.parts:
            return None
        haystack = self.text
        if regex is not None:
            span = regex.find(haystack, timeout=timeout)
        else:
            span = find_plain_key(haystack, key, case_sensitive=case_sensitive, whole_words=whole_words,
                                  options=options, lowered=None if case_sensitive else self.lowered())
        if span is None:
            return None
        s, e = span
        bases, parts = self.bases, self.parts

        def part_at(pos: int) -> int:     # the marker belongs to the text after it, the "\n" to the one before
            return max(0, bisect.bisect_right(bases, pos + 1) - 1)
        i = part_at(s)
        j = part_at(e - 1) if e > s else i
        first, last = parts[i], parts[j]
        start = min(max(0, s - bases[i]), len(first.text))
        end = min(max(0, e - bases[j]), len(last.text))
        lo, hi = s, e
        while lo > 0 and _is_word(haystack[lo - 1]):
            lo -= 1
        while hi < len(haystack) and _is_word(haystack[hi]):
            hi += 1
        inside = None
        if e > s and (lo < s and _is_word(haystack[s]) or hi > e and _is_word(haystack[e - 1])):
            inside = haystack[lo:hi]
        return KeySpan(key, first.kind, first.index, first.label, start, end, haystack[s:e],
                       _context_before(first.text, start), _context_after(last.text, end), inside,
                       *((last.kind, last.index, last.label) if j != i else (None, None, None)))


def locate_key(parts: Sequence[WindowPart], key: str, *, regex: JSRegex | None = None,
               case_sensitive: bool = False, whole_words: bool = False, options: MatchOptions,
               joined: bool = True, timeout: float | None = 0.25) -> KeySpan | None:
    """Where ``key`` first matches in a window, or None (no match, or a fuzzy one).

    Args:
        parts: the window's texts in haystack order.
        key: the key as matched (substituted, trimmed); for a regex key, its ``/body/flags``.
        regex: the compiled regex of a regex key (then ``key`` is only its name).
        case_sensitive, whole_words, options: a plain key's rules.
        joined: True: SillyTavern's one haystack, U+0001 + the texts joined by ``"\\n"`` +
            U+0001 (a match may run across two texts); False: each text on its own.
        timeout: seconds one regex search may take.

    Raises:
        RegexTimeout: the regex search ran past ``timeout``.
    """
    rules = {"regex": regex, "case_sensitive": case_sensitive, "whole_words": whole_words, "options": options,
             "timeout": timeout}
    if joined:
        return WindowHaystack(parts).locate(key, **rules)    # type: ignore[arg-type]
    for part in parts:
        found = WindowHaystack([part]).locate(key, **rules)   # type: ignore[arg-type]
        if found is not None:
            return found
    return None
