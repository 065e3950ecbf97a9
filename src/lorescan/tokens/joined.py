"""Exact counts of joined texts: :class:`IncrementalCount` (the public running count),
:class:`TextCount` / :func:`count_text` / :func:`count_upto` (what a counter needs to know about
one text to count it joined with others, with the long-text stepping), and :class:`ConcatCount`
/ :class:`PrependCount` (texts built from counted parts, each step costing the boundary). Part
of :mod:`lorescan.tokens` (import from there)."""
from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import ne
from typing import Any

import regex

from ..js.text import js_count_words
from .counters import (TiktokenCounter, TokenCounter, _has_surrogate, _is_js_space, _tiktoken_clean, _unsure,
                       count_words)

__all__ = ["IncrementalCount", "TextCount", "count_text", "count_upto", "ConcatCount", "PrependCount",
           "storable_count", "stored_text_count", "edited_text_count", "unicode_tables"]


class IncrementalCount:
    """The exact token count of a concatenation, kept up to date as texts are appended.

    ``counter`` is any ``str -> int``. :meth:`peek` gives the count of the text so far
    plus one more piece, :meth:`append` commits it; both return the count of the whole
    concatenation, exactly as ``counter("".join(parts))`` would. It is the public face of
    :class:`ConcatCount` (which the engines use with cached per-content counts); the cost per
    call follows from its reasoning:

    * :func:`count_words` (or ``lorescan.js.text.js_count_words``): O(len(text)). Word counts
      add up except where the buffer ends and ``text`` starts with a non-whitespace
      character: those two words join into one, and the sum is one less.
    * :class:`TiktokenCounter`: O(len(text)) plus the pieces around the seam. tiktoken splits
      text into pieces with the regex ``encoding._pat_str``, left to right, then encodes each
      piece on its own, so only the pieces that touch the seam are split again.
    * any other callable: the whole concatenation is counted again on every call, which
      is exact but O(n) per call (O(n^2) to build a long text piece by piece).
    """

    __slots__ = ("_concat",)

    def __init__(self, counter: TokenCounter) -> None:
        self._concat = ConcatCount(counter)

    @property
    def counter(self) -> TokenCounter:
        return self._concat.counter

    @property
    def total(self) -> int:
        """The count of everything appended so far."""
        return self._concat.total

    @property
    def text(self) -> str:
        """Everything appended so far, joined."""
        return self._concat.text

    def copy(self) -> "IncrementalCount":
        """An independent copy (to try several continuations of the same text)."""
        other = IncrementalCount.__new__(IncrementalCount)
        other._concat = self._concat.copy()
        return other

    def peek(self, text: str) -> int:
        """The count of the concatenation if ``text`` were appended (nothing changes)."""
        return self._concat.copy().append(text) if text else self._concat.total

    def append(self, text: str) -> int:
        """Append ``text``; returns the count of the whole concatenation."""
        return self._concat.append(text)

    def __repr__(self) -> str:
        return f"IncrementalCount({self.counter!r}, total={self.total})"


# -- counting texts joined from counted parts ------------------------------------------------
#
# tiktoken's pre-tokenizer (cl100k: contractions | letters | 1-3 digits | punctuation runs |
# \s++$ | \s*[\r\n] | \s+(?!\S) | \s) matches left to right and has no look-behind, so the
# pieces from any piece start onward depend only on the text from there. Joining A and B
# therefore changes only the pieces around the boundary: A's pieces before its last one stay
# (IncrementalCount's argument), and once the re-split of ``A's last piece + B`` reaches a
# position where B's own pieces start, B's pieces follow unchanged ("sync"). A summary of B
# keeps the starts of its first few pieces and the tokens before each, so a join re-splits
# at most those few pieces. One case needs no re-split at all: when A ends with "\n" and B
# starts with a character that is not whitespace, every piece that holds that "\n" ends at
# it (a letter piece cannot take a newline as its optional lead, a punctuation piece takes
# only [\r\n] after itself, \s*[\r\n] cannot cross a non-space) and A's final whitespace run
# is one piece whether it ends the text (\s++$) or not (\s*[\r\n]); so the counts add. Every
# content the engines join ends with "\n", so most joins are additions.

_HEAD_PIECES = 8            # piece starts kept at the head of a summary
_LONG = 1 << 16             # characters: a longer text is counted in steps when a limit is given
_STEP = 1 << 15             # characters per step
_LONG_PIECE = 1 << 16       # characters: a piece carried further than this ends counting in steps
_WS = regex.compile(r"\s")


class TextCount:
    """One text's count and the shape a counter needs to join it with other texts.

    ``total``: the text's token count; when ``exact`` is False the count stopped early and
    ``total`` is a floor (a lower bound for the text and for any text that starts with it).
    ``first``/``last``: the raw first and last characters. tiktoken only: ``hard`` (the first
    character is not whitespace, so after a "\n" the counts add), ``clean`` (the text as
    tiktoken reads it when it differs: surrogates), and :meth:`shape`, computed on first
    need and kept (a whole tuple is stored at once, so threads may share a TextCount).
    """

    __slots__ = ("total", "exact", "first", "last", "hard", "clean", "_text", "_shape", "unsure")

    def __init__(self, total: int, exact: bool = True, first: str = "", last: str = "", hard: bool = False,
                 clean: str | None = None, text: str | None = None, shape: tuple | None = None,
                 unsure: bool = False) -> None:
        self.total, self.exact, self.first, self.last, self.hard = total, exact, first, last, hard
        self.clean, self._text, self._shape = clean, text, shape
        self.unsure = unsure        # tiktoken: a join with this text is counted whole (_unsure)

    def shape(self, tik: TiktokenCounter) -> tuple[tuple[int, ...], tuple[int, ...], int, str, int]:
        """``(starts, before, head_end, tail, tail_tokens)``: offsets in the cleaned text of
        its first pieces and the tokens before each, where the text those were read from
        ends, and the last piece with its tokens (empty when not exact)."""
        found = self._shape
        if found is None:
            text = self.clean if self.clean is not None else self._text
            assert text is not None
            found = self._shape = _shape(tik, text)
        return found

    def __repr__(self) -> str:
        return f"TextCount({self.total}{'' if self.exact else ', floor'})"


_EMPTY = TextCount(0)


def _mode(counter: TokenCounter) -> str:
    if counter is count_words or counter is js_count_words:
        return "words"
    if counter is len:                  # characters: counts add across any join
        return "chars"
    if isinstance(counter, TiktokenCounter):
        return "tiktoken"
    return "generic"


def count_text(counter: TokenCounter, text: str, *, limit: int | None = None) -> TextCount:
    """The :class:`TextCount` of ``text`` under ``counter``.

    ``limit``: the caller only needs to know whether the count reaches ``limit``; a long
    text (over 65,536 characters, tiktoken) is then counted in steps and counting stops
    once ``limit`` tokens are certain (``exact`` False, ``total`` >= ``limit``). Any other
    counter than tiktoken and the word rule has no boundary rule: its TextCount holds the
    total only, and joins count the joined text again (:class:`ConcatCount`).
    """
    if not text:
        return _EMPTY
    mode = _mode(counter)
    if mode == "words":
        return TextCount(js_count_words(text), True, text[0], text[-1])
    if mode == "generic" or mode == "chars":
        return TextCount(_checked(counter(text)), True, text[0], text[-1])
    tik = counter
    assert isinstance(tik, TiktokenCounter)
    clean = _tiktoken_clean(text) if _has_surrogate(text) else text
    if _unsure(clean):
        return TextCount(len(tik.encoding.encode_ordinary(clean)), True, text[0], text[-1], unsure=True)
    if limit is not None and len(clean) > _LONG:
        return _count_long(tik, text, clean, limit)
    total = len(tik.encoding.encode_ordinary(clean))
    hard = _WS.match(clean) is None
    # The shape is needed where the counts do not simply add: after this text when the next
    # one does not start a piece, and at the head of a text that starts with whitespace.
    return TextCount(total, True, text[0], text[-1], hard, clean if clean is not text else None, text,
                     None if hard else _shape(tik, clean))


def storable_count(counter: TokenCounter, text: str) -> int:
    """``text``'s count under the tiktoken ``counter`` as a compiled book stores it for
    :func:`stored_text_count`: ``count * 2 + unsure`` (``unsure``: 1 when ``text`` holds a character
    whose pre-tokenizer class this process cannot vouch for, see ``_unsure``); -1: not stored, a
    reader counts it (a text long enough to be counted in steps, or one holding surrogates)."""
    if not isinstance(counter, TiktokenCounter) or len(text) > _LONG or _has_surrogate(text):
        return -1
    return len(counter.encoding.encode_ordinary(text)) * 2 + (1 if _unsure(text) else 0)


def unicode_tables() -> str:
    """What ``_unsure`` depends on in this process (Python's and the ``regex`` package's Unicode
    tables): a stored ``unsure`` bit is read as stored only under the same ones."""
    import unicodedata  # import-cost: small and built in; asked for only by compiled token counts
    return f"{unicodedata.unidata_version}/{regex.__version__}"


def stored_text_count(counter: TokenCounter, text: str, stored: int, same_tables: bool = False) -> TextCount | None:
    """The :class:`TextCount` :func:`count_text` gives ``text`` without a limit, from ``stored``,
    :func:`storable_count`'s value for the same text under the same encoding (the caller checks
    both); ``same_tables``: the value was made under this process's :func:`unicode_tables`, so
    its ``unsure`` bit holds here (else it is decided again). None: not stored, count it."""
    if stored < 0 or not text or not isinstance(counter, TiktokenCounter):
        return None
    total = stored >> 1
    if (stored & 1) if same_tables else _unsure(text):     # such a text's joins are counted whole
        return TextCount(total, True, text[0], text[-1], unsure=True)
    hard = _WS.match(text) is None
    return TextCount(total, True, text[0], text[-1], hard, None, text, None if hard else _shape(counter, text))


# Seams: positions where tiktoken's pieces of a text always break, so that the count of the
# text is the count of the part before plus the count of the part after. (1) After a "\n" that
# a non-whitespace character follows (module comment above). (2) Before a space (U+0020) that
# follows a non-whitespace character: every piece that can hold that character (letters,
# 1-3 digits, a contraction, a punctuation run with the [\r\n] after it) stops at a space, and
# the pieces from the space on depend only on the text from there (no look-behind). A
# paragraph is a text cut at seams (1). Two texts that differ in a few places (a content before
# and after its macros are substituted) differ in count only by what lies between the seams
# around each place: those parts are counted, the rest is the base's count.
_PARAGRAPH = regex.compile(r"\n(?=\S)")


def _paragraphs(text: str) -> list[str]:
    cuts = [m.end() for m in _PARAGRAPH.finditer(text)]
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def _ends_hard(piece: str) -> bool:
    # a space after this piece is a seam (2): the piece ends with a non-whitespace character
    return bool(piece) and _WS.match(piece[-1]) is None


def _word_changes(text: str, base: str) -> list[tuple[str, str]] | None:
    """The parts in which ``text`` and ``base`` differ, cut at seams (2) of both, when the two
    have as many spaces (None: they do not). Both are split at every space (in C) and compared
    piece for piece (in C); each run of changed pieces is widened to the nearest seams."""
    ours, theirs = text.split(" "), base.split(" ")
    n = len(ours)
    if n != len(theirs):
        return None
    changed: list[tuple[str, str]] = []
    covered = -1
    for i in compress(range(n), map(ne, ours, theirs)):
        if i <= covered:
            continue
        lo = i                          # the space before piece lo: a seam of both texts
        while lo > 0 and not (_ends_hard(ours[lo - 1]) and _ends_hard(theirs[lo - 1])):
            lo -= 1
        hi = i                          # the space after piece hi: a seam of both, the next piece the same
        while hi + 1 < n and not (ours[hi + 1] == theirs[hi + 1] and _ends_hard(ours[hi]) and _ends_hard(theirs[hi])):
            hi += 1
        lead = " " if lo > 0 else ""
        changed.append((lead + " ".join(ours[lo:hi + 1]), lead + " ".join(theirs[lo:hi + 1])))
        covered = hi
    return changed


def edited_text_count(counter: TokenCounter, text: str, base: str, base_total: int,
                      base_unsure: bool | None = None) -> TextCount | None:
    """:func:`count_text` of ``text`` without a limit, from ``base_total``, the exact count of
    ``base`` (an earlier form of ``text``, as a content before its macros were substituted)
    under the same tiktoken ``counter``: only what lies between the seams around each place
    the two differ is counted (an addition, exact by the seam rules above). None where that
    would not pay or the rules are not vouched for (count ``text`` whole): a counter other
    than tiktoken, a long text, surrogates or a character of unsure class in either, or
    changed parts as long as ``text``. ``base_unsure``: whether ``base`` holds such a
    character, when known (a stored count's bit); ``text``'s other characters are ``base``'s."""
    if (not isinstance(counter, TiktokenCounter) or not text or len(text) > _LONG or len(base) > _LONG
            or _has_surrogate(text) or _has_surrogate(base)):
        return None
    if base_unsure if base_unsure is not None else _unsure(base):
        return None
    changed = _word_changes(text, base)     # the usual substitution: words for words
    if changed is None:                     # else the paragraphs, when they pair up
        ours, theirs = _paragraphs(text), _paragraphs(base)
        if len(ours) != len(theirs):
            return None
        changed = [(a, b) for a, b in zip(ours, theirs) if a != b]
    if sum(len(a) + len(b) for a, b in changed) >= len(text) or any(_unsure(a) for a, _ in changed):
        return None
    encode = counter.encoding.encode_ordinary
    total = base_total + sum(len(encode(a)) - len(encode(b)) for a, b in changed)
    hard = _WS.match(text) is None
    return TextCount(total, True, text[0], text[-1], hard, None, text, None if hard else _shape(counter, text))


def count_upto(counter: TokenCounter, text: str, limit: int | None = None) -> tuple[int, bool]:
    """``(count, exact)`` of ``text`` alone: ``counter(text)``, except that a long text
    (tiktoken) is counted only until ``limit`` tokens are certain when ``limit`` is given
    (then ``exact`` is False and the count is a floor >= ``limit``)."""
    if not text:
        return 0, True
    if limit is not None and len(text) > _LONG and isinstance(counter, TiktokenCounter):
        tc = count_text(counter, text, limit=limit)
        return tc.total, tc.exact
    return _checked(counter(text)), True


def _checked(count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TypeError(f"count_tokens must return an int >= 0, got {count!r}")
    return count


def _shape(tik: TiktokenCounter, clean: str) -> tuple[tuple[int, ...], tuple[int, ...], int, str, int]:
    """(starts, before, head_end, tail, tail_tokens) of a cleaned, non-empty text."""
    starts: list[int] = []
    before: list[int] = []
    acc = 0
    head_end = len(clean)
    last = None
    counted_last = False
    for m in tik._pieces.finditer(clean):
        if len(starts) < _HEAD_PIECES:
            starts.append(m.start())
            before.append(acc)
            acc += tik.piece_count(m.group())
            counted_last = True
        else:
            if counted_last:
                head_end = m.start()
            counted_last = False
        last = m
    assert last is not None
    tail = last.group()
    tail_tokens = acc - before[-1] if counted_last else tik.piece_count(tail)
    return tuple(starts), tuple(before), head_end, tail, tail_tokens


def _head(tik: TiktokenCounter, clean: str, end: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Head pieces read from ``clean[:end]`` (a prefix of a longer text): its last piece
    there may continue, so it is left out."""
    starts: list[int] = []
    before: list[int] = []
    acc = 0
    pieces = tik._pieces.findall(clean[:end])
    pos = 0
    for piece in pieces[:min(_HEAD_PIECES, len(pieces) - 1)]:
        starts.append(pos)
        before.append(acc)
        acc += tik.piece_count(piece)
        pos += len(piece)
    return tuple(starts), tuple(before), pos


def _count_long(tik: TiktokenCounter, text: str, clean: str, limit: int) -> TextCount:
    """Count a long cleaned text in steps of _STEP characters, stopping once ``limit`` tokens
    are certain. The tokens of every piece before the current last one are final."""
    prefix, last = 0, ""
    n = len(clean)
    pos = 0
    starts, before, head_end = _head(tik, clean, min(n, _STEP))
    hard = _WS.match(clean) is None
    keep_clean = clean if clean is not text else None
    while pos < n:
        chunk = clean[pos:pos + _STEP]
        pos += len(chunk)
        tail = last + chunk
        whole = len(tik.encoding.encode_ordinary(tail))
        pieces = tik._pieces.findall(tail)
        last = pieces[-1] if pieces else ""
        if len(last) > _LONG_PIECE and pos < n:
            # One piece (a run of letters) longer than a few steps: carrying it into every
            # step re-encodes it each time, quadratic in its length (1 MB: 8 s). Count the
            # rest from that piece's start at once instead: pieces from a piece start depend
            # only on the text from there, so this is exact, and tiktoken is linear.
            rest = clean[pos - len(tail):]      # from the start of the pieces not yet in prefix
            for m in tik._pieces.finditer(rest):
                last = m.group()
            last_count = tik.piece_count(last)
            return TextCount(prefix + len(tik.encoding.encode_ordinary(rest)), True, text[0], text[-1], hard,
                             keep_clean, text, (starts, before, head_end, last, last_count))
        last_count = tik.piece_count(last) if last else 0
        prefix += whole - last_count
        if prefix >= limit and pos < n:
            return TextCount(prefix, False, text[0], text[-1], hard, keep_clean, text,
                             (starts, before, head_end, "", 0))
    last_count = tik.piece_count(last) if last else 0
    return TextCount(prefix + last_count, True, text[0], text[-1], hard, keep_clean, text,
                     (starts, before, head_end, last, last_count))


class ConcatCount:
    """The exact token count of ``a + b + c + ...`` built from the parts' :class:`TextCount`.

    ``append(text, tc)`` costs the boundary between the text so far and ``text`` (nothing
    when it is an addition, a re-split of a few pieces otherwise), not the length of
    ``text``: the parts' own counts come from ``tc``, computed once by :func:`count_text`
    and kept by the caller. Without ``tc`` the part is counted here (O(len(text))).
    ``limit``: the caller only needs to know whether the total reaches ``limit``; counting
    may then stop early, and from there on :attr:`exact` is False and :attr:`total` is a
    floor >= ``limit`` for this text and every extension of it.

    tiktoken and the word rule are exact from the parts. Any other counter has no boundary
    rule, so each append counts the whole concatenation again (exact, O(total)).
    """

    __slots__ = ("counter", "_mode", "_parts", "_total", "_tail", "_tail_tokens", "_tail_of", "_raw_last",
                 "exact")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._mode = _mode(counter)
        self._parts: list[str] = []
        self._total = 0           # the count so far (a floor when not exact)
        # tiktoken: the last piece (cleaned) and its tokens; while _tail is None they are the
        # last piece of _tail_of (the TextCount of the part that ends the text), found on need.
        self._tail: str | None = ""
        self._tail_tokens = 0
        self._tail_of: TextCount | None = None
        self._raw_last = ""       # the last raw character appended
        self.exact = True

    @property
    def total(self) -> int:
        """The count of everything appended (a floor when :attr:`exact` is False)."""
        return self._total

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def copy(self) -> "ConcatCount":
        """An independent copy (the parts list is copied; counts are values)."""
        other = ConcatCount.__new__(ConcatCount)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other._parts = list(self._parts)
        return other

    def append(self, text: str, tc: TextCount | None = None, *, limit: int | None = None) -> int:
        """Append ``text`` (``tc``: its count, if known); returns :attr:`total`."""
        if not text:
            return self._total
        self._parts.append(text)
        raw_last, self._raw_last = self._raw_last, text[-1]
        if self._mode == "tiktoken" and (tc.unsure if tc is not None else _unsure(text)):
            self._mode = "generic"          # pieces around this text are not ours to split (_unsure)
        if tc is not None and tc.hard and raw_last == "\n" and tc.exact and self.exact:
            # The usual step (a content after a "\n"): the counts add (module comment).
            self._total += tc.total
            self._tail, self._tail_of = None, tc
            return self._total
        if not self.exact:
            return self._total
        mode = self._mode
        if mode == "chars":
            self._total += len(text)
            return self._total
        if mode == "generic":
            self._total = _checked(self.counter("".join(self._parts)))
            return self._total
        if tc is None or (not tc.exact and (limit is None or self._total + tc.total < limit)):
            # (a floor that no longer settles the question: count again, up to this limit)
            tc = count_text(self.counter, text, limit=None if limit is None else max(0, limit - self._total))
        if mode == "words":
            self._total += tc.total - (1 if raw_last and not _is_js_space(raw_last)
                                       and not _is_js_space(text[0]) else 0)
            return self._total
        tik = self.counter
        assert isinstance(tik, TiktokenCounter)
        if "\ud800" <= raw_last <= "\udbff" and "\udc00" <= text[0] <= "\udfff":
            self._take(count_text(tik, "".join(self._parts)), 0)   # a surrogate pair split across parts
            return self._total
        if not raw_last:                    # nothing before
            self._take(tc, 0)
        elif tc.hard and raw_last == "\n":  # the counts add (module comment); tc is a floor here
            self._take(tc, self._total)
        else:
            self._join(tik, text, tc, limit)
        return self._total

    def _last_piece(self, tik: TiktokenCounter) -> tuple[str, int]:
        if self._tail is None:
            assert self._tail_of is not None
            shape = self._tail_of.shape(tik)
            self._tail, self._tail_tokens = shape[3], shape[4]
        return self._tail, self._tail_tokens

    def _take(self, tc: TextCount, before: int) -> None:
        """The text so far is ``before`` tokens of settled pieces followed by ``tc``'s text."""
        self._total = before + tc.total
        if tc.exact:
            self._tail, self._tail_of = None, tc
        else:
            self._tail, self._tail_tokens, self.exact = "", 0, False

    def _join(self, tik: TiktokenCounter, text: str, tc: TextCount, limit: int | None) -> None:
        tail, tail_tokens = self._last_piece(tik)
        prefix = self._total - tail_tokens
        clean = tc.clean if tc.clean is not None else text
        starts, before, head_end, tc_tail, tc_tail_tokens = tc.shape(tik)
        off = len(tail)
        z = tail + clean[:head_end]
        complete = tc.exact and head_end == len(clean)
        acc = 0
        pieces = list(tik._pieces.finditer(z))
        for k, m in enumerate(pieces):
            s = m.start()
            if s >= off and head_end:
                j = s - off
                if j in starts:
                    i = starts.index(j)
                    total = prefix + acc + tc.total - before[i]
                    if not tc.exact and (limit is None or total < limit):
                        break                   # a floor too low to settle anything: count below
                    self._total = total
                    if tc.exact:
                        self._tail, self._tail_of = None, tc
                    else:
                        self._tail, self._tail_tokens, self.exact = "", 0, False
                    return
            if k == len(pieces) - 1:
                if complete:
                    tokens = tik.piece_count(m.group())
                    self._total = prefix + acc + tokens
                    self._tail, self._tail_tokens = m.group(), tokens
                    return
                break
            acc += tik.piece_count(m.group())
        # No sync within the head (e.g. a long run of digits or whitespace): re-split the rest.
        whole = tail + clean
        if limit is not None and len(whole) > _LONG:
            rest = _count_long(tik, whole, whole, max(0, limit - prefix))
        else:
            rest = count_text(tik, whole)
        self._take(rest, prefix)

    def __repr__(self) -> str:
        return f"ConcatCount({self.counter!r}, total={self.total}{'' if self.exact else ', floor'})"


class PrependCount:
    """The exact token count of a text that grows at the front: ``new + old`` each step
    (SillyTavern's recursion budget text: each pass puts its contents before the earlier
    ones, docs/sillytavern-mode.md#st-loop).

    :meth:`prepend` takes the new parts with their :class:`TextCount` and costs those parts
    plus the parts at the old front that are not yet settled. The text is kept as
    ``lead + suffix``: ``suffix`` starts with a part that begins with non-whitespace and
    follows a "\\n", so its count is settled for good (whatever is put before it adds), and
    ``lead`` is the few parts before it. Counters without a boundary rule count the whole
    text once per :meth:`prepend`.
    """

    __slots__ = ("counter", "_mode", "_parts", "_lead", "_suffix", "_suffix_exact", "total", "exact")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._mode = _mode(counter)
        self._parts: list[tuple[str, TextCount | None]] = []   # the whole text, front first
        self._lead = 0                  # parts before the settled suffix
        self._suffix = 0                # tokens of the settled suffix (a floor if not exact)
        self._suffix_exact = True
        self.total = 0
        self.exact = True

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self._parts)

    def copy(self) -> "PrependCount":
        """An independent copy (the parts list is copied; counts are values)."""
        other = PrependCount.__new__(PrependCount)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other._parts = list(self._parts)
        return other

    def prepend(self, parts: Sequence[tuple[str, TextCount | None]], *, limit: int | None = None) -> int:
        """Put ``parts`` (text, its TextCount or None) before the text; returns :attr:`total`.
        ``limit``: as for :class:`ConcatCount` (a floor >= ``limit`` may come back)."""
        parts = [(t, tc) for t, tc in parts if t]
        if not parts:
            return self.total
        n_new = len(parts)
        self._parts[:0] = parts
        if not self.exact:
            return self.total
        if self._mode == "chars":
            self.total += sum(len(t) for t, _ in parts)
            return self.total
        if self._mode == "generic":
            self.total = _checked(self.counter(self.text))
            return self.total
        counter = self.counter
        whole = self._parts
        if self._mode == "words":
            # Word counts add, less one where a word runs across the join.
            run = ConcatCount(counter)
            for t, tc in parts:
                run.append(t, tc)
            old_first = whole[n_new][0][0] if len(whole) > n_new else ""
            joined = 1 if (not _is_js_space(parts[-1][0][-1]) and old_first and not _is_js_space(old_first)) else 0
            self.total = run.total + self.total - joined
            return self.total
        for i in range(n_new):
            if whole[i][1] is None:
                whole[i] = (whole[i][0], count_text(counter, whole[i][0], limit=limit))
        if any(tc is not None and tc.unsure for _, tc in whole[:n_new]):
            self._mode = "generic"          # pieces around these parts are not ours to split (_unsure)
            self.total = _checked(counter(self.text))
            return self.total
        # The old settled suffix begins at old_split; it stays settled if the part before it
        # ends with "\n" (it begins with non-whitespace, so the counts add there).
        old_split = n_new + self._lead
        has_suffix = old_split < len(whole)
        if has_suffix and whole[old_split - 1][0][-1] != "\n":
            old_split, has_suffix = len(whole), False        # no longer settled: count it all
        # The new settled start: the first part that begins with non-whitespace after a "\n".
        split = old_split
        for i in range(old_split):
            tc = whole[i][1]
            assert tc is not None
            if tc.hard and (i == 0 or whole[i - 1][0][-1] == "\n"):
                split = i
                break
        run = ConcatCount(counter)
        append = run.append
        for t, tc in whole[split:old_split]:
            append(t, tc, limit=limit)
        if has_suffix:
            suffix, suffix_exact = run.total + self._suffix, run.exact and self._suffix_exact
        else:
            suffix, suffix_exact = run.total, run.exact
        head = ConcatCount(counter)
        for t, tc in whole[:split]:
            head.append(t, tc, limit=limit)
        self._lead = split
        self._suffix, self._suffix_exact = suffix, suffix_exact
        self.total, self.exact = head.total + suffix, head.exact and suffix_exact
        return self.total

    def __repr__(self) -> str:
        return f"PrependCount({self.counter!r}, total={self.total}{'' if self.exact else ', floor'})"
