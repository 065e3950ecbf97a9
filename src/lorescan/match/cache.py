"""ChatScan: the caller-owned cache of per-text key hits (no module-level state).

Each scanned string (a message as scanned, a match source, an inject, a recursion chunk)
is scanned once per key matcher; its hit set (a frozenset of key-variant ids, never changed
once stored) is reused by later turns and by other chats that use the same CompiledKeys.
Entries are keyed by (matcher token, text), so one ChatScan may serve several books.
Memory is bounded: least recently used entries go first when the count or the counted
bytes exceed the limits. The count covers everything an entry keeps alive: its key (the
text, or every message string of a block), its hit set with the ints in it, and the
dictionary slots; a string shared by several entries is counted in each, so the bound is
conservative. A value larger than the whole budget is returned but not stored.
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, TypeAlias

from ..errors import SettingsError

if TYPE_CHECKING:
    from .compile import KeyMatcher
    from .fuzzy import FuzzyWork

__all__ = ["ChatScan"]

_ENTRY_OVERHEAD = 160      # key tuple + OrderedDict node, roughly
_MAX_NAMED = 512           # named_text keeps at most this many messages, in at most max_bytes / 8
_MAX_DERIVED = 8           # derived keeps at most this many values (a service holds one ChatScan per chat: 200 chats at 1,024 each grew a worker by 50 MB in 10 s of bench_serve)
_MAX_DERIVED_ITEMS = 1 << 15   # ... holding at most this many set elements in their keys and values (~1 MB)
_MAX_RECORDS = 2           # records kept per slot (an engine's last turns of this chat; st/memo.py)
_MAX_WINDOWS = 16          # message windows kept for their next turn (one per matcher and depth in use)
_MAX_WINDOW_ITEMS = 1 << 15    # ... holding at most this many vid counts in all (~3 MB)

# (matcher token, text) for one text; (matcher token, texts) for a block of messages
_Key: TypeAlias = tuple[str, str | tuple[str, ...]]


class ChatScan:
    """A bounded LRU of text -> hit set, shared by the turns (and chats) that pass it in.

    Safe to share between threads.

    Args:
        max_texts: the most cached strings.
        max_bytes: the most bytes of the cached strings (message blocks included) and hit sets.

    Raises:
        SettingsError: a bound that is not a positive integer.
    """

    def __init__(self, *, max_texts: int = 200_000, max_bytes: int = 256 * 1024 * 1024) -> None:
        for name, v in (("max_texts", max_texts), ("max_bytes", max_bytes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SettingsError(f"must be a positive integer, got {v!r:.40}", source="ChatScan", field=name)
        self.max_texts = max_texts
        self.max_bytes = max_bytes
        self._lru: OrderedDict[_Key, frozenset[int]] = OrderedDict()
        self._sizes: dict[_Key, int] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._side: OrderedDict[object, object] = OrderedDict()
        self._named: dict[tuple[str, str], str] = {}
        self._named_bytes = 0
        self._derived: OrderedDict[tuple, tuple[object, int]] = OrderedDict()
        self._derived_items = 0
        self._windows: OrderedDict[tuple[str, int], tuple[tuple, int]] = OrderedDict()
        self._window_items = 0
        self._records: dict[str, OrderedDict[object, object]] = {}
        self.hit_count = 0
        self.miss_count = 0

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def nbytes(self) -> int:
        """Bytes held (strings, message blocks, hit sets, bookkeeping), as counted for ``max_bytes``."""
        return self._bytes

    def clear(self) -> None:
        """Drop every cached hit set."""
        with self._lock:
            self._lru.clear()
            self._sizes.clear()
            self._side.clear()
            self._named.clear()
            self._named_bytes = 0
            self._derived.clear()
            self._derived_items = 0
            self._windows.clear()
            self._window_items = 0
            self._records = {}
            self._bytes = 0

    def lookup(self, matcher: "KeyMatcher", text: str, work: "FuzzyWork | None" = None) -> frozenset[int]:
        """The hit set of ``text`` under ``matcher``: cached, or scanned once and stored.
        ``work``: the scan's fuzzy comparisons (and key hits, a ScanWork); a text cut off by it is not stored."""
        key = (matcher.token, text)
        found = self._get(key)
        if found is not None:
            self.hit_count += 1
            return found
        cut = work.cuts if work is not None else 0
        value = matcher.scan(text, work)
        self.miss_count += 1
        if work is None or work.cuts == cut:
            self._store(key, value, sys.getsizeof(text))
        return value

    def lookup_block(self, matcher: "KeyMatcher", texts: tuple[str, ...],
                     build: Callable[[], frozenset[int]], work: "FuzzyWork | None" = None) -> frozenset[int]:
        """The union of the hit sets of a run of messages, keyed by their raw strings.

        Chats only grow at the new end, so aligned runs of old messages recur turn after
        turn; a window is a few such runs (see ScanView), whatever its depth.
        """
        key = (matcher.token, texts)
        found = self._get(key)
        if found is not None:
            return found
        cut = work.cuts if work is not None else 0
        value = build()
        if work is not None and work.cuts != cut:
            return value            # a text in it was cut off: not a complete answer
        # The block's key keeps every message string alive, not only the tuple.
        self._store(key, value, sys.getsizeof(texts) + sum(map(sys.getsizeof, texts)))
        return value

    def lookup_regex(self, token: str, text: str) -> frozenset[int] | None:
        """The stored regex hits of ``text`` under ``token`` (a compiled book's regex set and
        mode, see ScanView), or None. Only complete results are stored (:meth:`store_regex`):
        a regex cut off by its time budget is never remembered as "no match"."""
        found = self._get((token, text))
        if found is not None:
            self.hit_count += 1
        return found

    def store_regex(self, token: str, text: str, hits: frozenset[int]) -> None:
        """Remember the regex hits of ``text`` (ids of the regexes that match it)."""
        self.miss_count += 1
        self._store((token, text), hits, sys.getsizeof(text))

    def _get(self, key: _Key) -> frozenset[int] | None:
        found = self._lru.get(key)
        if found is not None:
            try:
                self._lru.move_to_end(key)
            except KeyError:          # evicted by another thread in between: still a valid value
                pass
        return found

    def _store(self, key: _Key, value: frozenset[int], key_bytes: int) -> None:
        # the set's ints: small ones are shared singletons, larger ones 28 bytes each
        size = key_bytes + sys.getsizeof(value) + 28 * len(value) + _ENTRY_OVERHEAD
        if size > self.max_bytes:
            return                     # would evict everything and still not fit
        with self._lock:
            if key not in self._lru:
                self._lru[key] = value
                self._sizes[key] = size
                self._bytes += size
                while len(self._lru) > self.max_texts or self._bytes > self.max_bytes:
                    old, _ = self._lru.popitem(last=False)
                    self._bytes -= self._sizes.pop(old)

    def named_text(self, name: str, text: str) -> str:
        """``name + ": " + text`` (a message as scanned with its speaker's name), the same
        string object turn after turn while the message stays among the newest named here. A
        string's hash is computed once per object, so the cached hits of a message that is
        not rebuilt every turn are found without hashing its text again. The strings kept
        here (at most ``_MAX_NAMED``, at most ``max_bytes / 8``; emptied when either is
        reached) come on top of ``max_bytes``."""
        key = (name, text)
        found = self._named.get(key)
        if found is None:
            found = f"{name}: {text}"
            size = sys.getsizeof(found) + _ENTRY_OVERHEAD
            if len(self._named) >= _MAX_NAMED or self._named_bytes + size > self.max_bytes // 8:
                self._named.clear()      # a dict read meanwhile by another thread just misses
                self._named_bytes = 0
            if size <= self.max_bytes // 8:
                self._named[key] = found
                self._named_bytes += size
        return found

    def named_texts(self, pairs: list[tuple[str, str]]) -> list[str]:
        """:meth:`named_text` of each (name, text) pair, in order: the messages held since an
        earlier turn are found in one pass (a steady turn makes only its new message)."""
        get = self._named.get
        out = [get(pair) for pair in pairs]
        if None in out:
            out = [found if found is not None else self.named_text(*pair) for found, pair in zip(out, pairs)]
        return out  # type: ignore[return-value]

    def derived(self, key: tuple, build: Callable[[], object], size: int) -> object:
        """A value computed from hit sets (a recursion chunk's union by its entries, the
        entries a union reaches), built once per ``key`` while it stays among the newest
        ``_MAX_DERIVED`` (their keys and values holding at most ``_MAX_DERIVED_ITEMS`` set
        elements; ``size`` is this one's count). A key must determine the value: it names the
        matcher (its token) and everything else the value is computed from. The value must
        never be changed by its users. These come on top of ``max_bytes``."""
        found = self._derived.get(key)
        if found is not None:
            try:
                self._derived.move_to_end(key)
            except KeyError:          # dropped by another thread in between: still a valid value
                pass
            return found[0]
        value = build()
        if size > _MAX_DERIVED_ITEMS // 4:
            return value
        with self._lock:
            if key not in self._derived:
                self._derived[key] = (value, size)
                self._derived_items += size
                while len(self._derived) > _MAX_DERIVED or self._derived_items > _MAX_DERIVED_ITEMS:
                    _, (_, old) = self._derived.popitem(last=False)
                    self._derived_items -= old
        return value

    def take_window(self, key: tuple[str, int]) -> tuple | None:
        """The state a message window left for its next turn under ``key`` (``(matcher token,
        depth)``), taken out: the caller owns it (changes it in place) until it gives it back
        with :meth:`put_window`; a thread that finds none builds its own (see
        ``ScanView._message_union``)."""
        with self._lock:
            found = self._windows.pop(key, None)
            if found is None:
                return None
            self._window_items -= found[1]
            return found[0]

    def put_window(self, key: tuple[str, int], state: tuple, size: int) -> None:
        """Keep a window's state (holding ``size`` vid counts) for the next turn: at most
        ``_MAX_WINDOWS`` of them holding at most ``_MAX_WINDOW_ITEMS`` counts, the oldest
        dropped (a larger one is not kept). These come on top of ``max_bytes``."""
        if size > _MAX_WINDOW_ITEMS // 4:
            return
        with self._lock:
            windows = self._windows
            old = windows.pop(key, None)
            if old is not None:
                self._window_items -= old[1]
            windows[key] = (state, size)
            self._window_items += size
            while len(windows) > _MAX_WINDOWS or self._window_items > _MAX_WINDOW_ITEMS:
                _, (_, n) = windows.popitem(last=False)
                self._window_items -= n

    def records(self, slot: str) -> "dict[object, object] | None":
        """The records kept under ``slot`` by :meth:`keep_record` (read-only), or None."""
        return self._records.get(slot)

    def keep_record(self, slot: str, key: object, value: object) -> None:
        """Keep ``value`` under ``key`` in ``slot``: something an engine computed for this chat
        that a later turn may reuse when its key and checks say so (st/memo.py). At most
        ``_MAX_RECORDS`` per slot, the oldest dropped; a value is never changed once kept.
        These come on top of ``max_bytes``."""
        with self._lock:
            kept = self._records.get(slot)
            if kept is None:
                kept = self._records[slot] = OrderedDict()
            kept.pop(key, None)
            kept[key] = value
            while len(kept) > _MAX_RECORDS:
                kept.popitem(last=False)

    def side_matcher(self, key: object, build: Callable[[], object]) -> object:
        """A small per-expansion matcher (macro keys: their text is known only after substitution), built once per ``key``."""
        with self._lock:
            found = self._side.get(key)
            if found is not None:
                self._side.move_to_end(key)
                return found
        built = build()
        with self._lock:
            found = self._side.setdefault(key, built)
            while len(self._side) > 64:
                self._side.popitem(last=False)
        return found
