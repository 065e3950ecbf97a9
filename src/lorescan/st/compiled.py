"""A SillyTavern book compiled for its engine: the book's entries and per-entry columns beside
its :class:`~lorescan.match.compile.CompiledKeys`.

:func:`compile_book` makes each entry's key spec (:func:`key_spec`, with its fuzzy threshold
resolved under the Unicode word rule), compiles them with the match core
(``match.compile.build_keys``) and adds what the SillyTavern engine precomputes per entry:
its ``order``, its ``FLAG_*`` bits (constant, decorator lines, timed effects), the book's
``delayUntilRecursion`` levels and its widest scan depth. The match core knows nothing of
books: a :class:`CompiledBook` *has* its keys (``.keys``).

The compact form (pickle, ``.lsc``) writes the two parts as separate sections
(``lorescan.st.lsc``), so a reader that needs only the keys reads only the keys section.
"""
from __future__ import annotations

import gc
import math
import os
from dataclasses import FrozenInstanceError
from typing import Any, Sequence

import numpy as np

from ..js.sthash import entry_fingerprint
from ..js.stdecorators import parse_st_decorators
from ..limits import DEFAULT_LIMITS, Limits, check_book
from ..match.compile import CompiledKeys, build_keys
from ..match.fuzzy import book_threshold, entry_threshold
from ..match.keys import KeySpec
from ..match.lsc import read_compiled_file
from ..match.options import MatchOptions
from ..match.view import MAX_SCAN_DEPTH
from ..model import Entry, Lorebook, js_truthy
from ..tokens import shared_counter, storable_count, unicode_tables
from .lsc import decode_book, encode_book

__all__ = ["CompiledBook", "compile_book", "key_spec", "load_compiled", "restore_compiled",
           "FLAG_CONSTANT", "FLAG_ACTIVATE", "FLAG_DONT_ACTIVATE", "FLAG_ACTIVATE_STRICT",
           "FLAG_DONT_ACTIVATE_STRICT", "FLAG_TIMED", "FLAG_PLAIN", "FLAG_PLAIN_NOT_IN_RECURSION"]

# Bits of CompiledBook.entry_flags: what an engine must know about every entry up front.
FLAG_CONSTANT = 1
FLAG_ACTIVATE = 2             # @@activate, SillyTavern's decorator lines
FLAG_DONT_ACTIVATE = 4        # @@dont_activate
FLAG_ACTIVATE_STRICT = 8      # the same under strict_lines (docs/improved-profile.md#decorators)
FLAG_DONT_ACTIVATE_STRICT = 16
FLAG_TIMED = 32               # sticky or cooldown is set
# The walk decides the entry from its primary keys alone, in the turn's own window, when the turn
# does not touch it (st.activate._plain_kind, and further: no scanDepth of its own, no match
# sources), so a turn walks it without building its record until a key matches; NOT_IN_RECURSION:
# the same, but excludeRecursion is set (a recursion loop stops it there).
FLAG_PLAIN = 64
FLAG_PLAIN_NOT_IN_RECURSION = 128


class CompiledBook:
    """One SillyTavern book compiled for scanning. Immutable: share it across threads and processes.

    ``keys``: the :class:`~lorescan.match.compile.CompiledKeys` of its entries (entry ``i`` of
    every key table is ``entries[i]``); ``entries`` and ``uids``: the book's entries; per-entry
    columns (numpy arrays indexed by entry): ``entry_order`` (``order``, NaN when not a
    number), ``entry_flags`` (``FLAG_*`` bits); book-wide ``levels`` (delayUntilRecursion
    levels) and ``max_entry_depth``. ``name`` is the book's name, ``options`` the match rules
    its keys were compiled under (``keys.options``), ``book`` the source book.

    A book built by :func:`compile_book` holds tuples; one loaded from the compact form
    (pickle, :func:`load_compiled`) holds lazy sequences that build an entry the first time it
    is asked for (``lorescan.st.lsc``).
    """

    __slots__ = ("_book", "_load_book", "name", "keys", "entries", "uids", "entry_order", "entry_flags",
                 "timed_hashes", "levels", "max_entry_depth", "embeddings", "unit_tokens", "memo")
    # attribute types (each set once, in __init__, through object.__setattr__)
    _book: Lorebook | None
    _load_book: Any
    name: str
    keys: CompiledKeys
    entries: Sequence[Entry]
    uids: Sequence[int | str]
    entry_order: Any
    entry_flags: Any
    # int64, shape (timed entries, 3): per FLAG_TIMED entry, ascending, (entry index, SillyTavern's
    # fingerprint under the book's own name with decorators read without strict_lines, with them);
    # only the timed entries' rows (two columns over every entry were most of a small book's columns)
    timed_hashes: Any
    levels: tuple[float, ...]
    max_entry_depth: int
    embeddings: Any     # None, or (model name, entry indices int32, float32 rows): lorescan.semantic.store
    # None, or (encoding name, "<tiktoken version> <tokens.unicode_tables()>", int32 per entry): each
    # entry's "content\n" as tokens.storable_count stores it under that tiktoken encoding (-1: not
    # stored), for entries without decorator lines (compile_book(token_counts=True); read by
    # st.tables.UnitCounts)
    unit_tokens: Any
    # per-book values an engine derives and every engine over this book shares (built on
    # first use, e.g. the fingerprint table of lorescan.st.tables); never pickled
    memo: dict[Any, Any]

    def __init__(self, *, keys: CompiledKeys, entries: Sequence[Entry], entry_order: Any, entry_flags: Any,
                 timed_hashes: Any, levels: tuple[float, ...], max_entry_depth: int,
                 book: Lorebook | None = None,
                 load_book: Any = None, name: str | None = None, uids: Sequence[int | str] | None = None,
                 embeddings: Any = None, unit_tokens: Any = None) -> None:
        if name is None:
            assert book is not None, "a CompiledBook without its book needs a name"
            name = book.name
        assert book is not None or load_book is not None, "a CompiledBook needs its book or a way to load it"
        values = dict(_book=book, _load_book=load_book, name=name, keys=keys, entries=entries,
                      uids=tuple(e.uid for e in entries) if uids is None else uids,
                      entry_order=entry_order, entry_flags=entry_flags, timed_hashes=timed_hashes, levels=levels,
                      max_entry_depth=max_entry_depth, embeddings=embeddings, unit_tokens=unit_tokens, memo={})
        for k, v in values.items():
            object.__setattr__(self, k, v)

    @property
    def options(self) -> MatchOptions:
        """The match rules the book's keys were compiled under."""
        return self.keys.options

    @property
    def book(self) -> Lorebook:
        """The source book (built on first use for a loaded book)."""
        book = self._book
        if book is None:
            book = self._load_book()
            object.__setattr__(self, "_book", book)
        return book

    def timed_hash(self, i: int, world: str, strict: bool) -> int | None:
        """The stored fingerprint of entry ``i`` named ``world`` (None: not stored, compute it):
        stored for the timed entries, whose fingerprints timed-effect records name, under the
        book's own name."""
        if world != self.name or not int(self.entry_flags[i]) & FLAG_TIMED:
            return None
        rows = self.timed_hashes
        return int(rows[int(np.searchsorted(rows[:, 0], i)), 2 if strict else 1])

    def timed_hash_map(self, world: str, strict: bool) -> dict[int, int]:
        """Entry index -> stored fingerprint of every timed entry named ``world`` (empty: none
        stored under that name): :meth:`timed_hash` for all of them at once."""
        if world != self.name:
            return {}
        rows = self.timed_hashes
        return dict(zip(rows[:, 0].tolist(), rows[:, 2 if strict else 1].tolist()))

    def timed_values(self, i: int) -> tuple[Any, Any]:
        """Entry ``i``'s ``(sticky, cooldown)``, what timed-effect evaluation reads of an entry a
        record names: a loaded book reads them from the entry's record without building it."""
        records = getattr(self._load_book, "records", None)
        if records is not None:
            found = records.timed_values(i)
            if found is not None:
                return found
        entry = self.entries[i]
        return entry.sticky, entry.cooldown

    def content_of(self, i: int) -> str:
        """Entry ``i``'s content (what ``keys.content_hits[i]`` are the hits of)."""
        return self.entries[i].content

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def to_lsc(self) -> bytes:
        """The compact form (what pickling and ``.lsc`` files hold)."""
        return encode_book(self)

    def __reduce__(self):
        return (restore_compiled, (encode_book(self),))


def restore_compiled(data: Any, source: str = "<pickled compiled book>") -> CompiledBook:
    """A CompiledBook from :func:`~lorescan.st.lsc.encode_book` bytes (what unpickling calls).

    Raises:
        CompiledFormError: the data is truncated, not a compiled book, from another format
            version, or corrupted.
    """
    return decode_book(data, CompiledBook, source)


def load_compiled(path: str | os.PathLike[str], *, limits: Limits = DEFAULT_LIMITS,
                  verify: bool = False) -> CompiledBook:
    """The CompiledBook in an ``.lsc`` file (``lorescan compile``), read into private memory
    (a snapshot: the file changing later cannot reach it; see ``lsc.read_compiled_file``).

    Entries, plans and hit sets are built the first time a scan or an explanation needs them.

    Args:
        path: the ``.lsc`` file (written by :func:`~lorescan.match.lsc.save_compiled`).
        limits: what the file's statements about its regexes (length, expansion) are held to; a
            book compiled under raised limits loads under the same ones.
        verify: check every section's checksum now. By default a section is checked when it
            is first read (the entry records when the first entry is built), so a damaged
            section is a CompiledFormError at its first use, naming the file and the section.

    Returns:
        The CompiledBook, ready to share between engines and threads.

    Raises:
        CompiledFormError: (a :class:`~lorescan.errors.LorebookError`) naming the file, for a
            file that is truncated, not a compiled book, from another format or lorescan
            version, or corrupted.
        OSError: the file cannot be opened.
    """
    data, source = read_compiled_file(path)
    return decode_book(data, CompiledBook, source, limits, verify)


def compile_book(book: Lorebook, options: MatchOptions = MatchOptions(), *,
                 limits: Limits = DEFAULT_LIMITS, token_counts: bool = False) -> CompiledBook:
    """Compile ``book`` for matching: its keys (one automaton, plans, content hits, compiled
    regex keys) and the SillyTavern engine's per-entry columns.

    Args:
        book: the book.
        options: the matching rules (:class:`~lorescan.match.MatchOptions`).
        limits: bounds on the book (see :class:`~lorescan.limits.Limits`).
        token_counts: also count each entry's content under the default token counter (the
            process-wide tiktoken cl100k counter, ``tokens.shared_counter``) and keep the counts
            in the compiled form, so an engine over a loaded book counts no content its turns
            admit unchanged, and of a content its macros changed only the words around each change
            (``tokens.edited_text_count``; about as long again as the rest of compiling a book of
            long contents).

    Returns:
        The immutable :class:`CompiledBook`, to share between engines and threads.

    Raises:
        RegexKeyError: a regex key past ``limits.max_regex_length`` or
            ``limits.max_regex_nesting`` (naming the entry and field).
        LorebookError: a book over another of ``limits``.
    """
    check_book(book, limits)
    entries = tuple(book.entries)
    source = getattr(book, "source", "<memory>")
    thresholds: list[float | None] = [None] * len(entries)
    if options.word_chars == "unicode":        # fuzzy keys need the Unicode word rule (match/fuzzy.py)
        fuzzy_default = book_threshold(book)
        thresholds = [entry_threshold(entry, fuzzy_default, source) for entry in entries]
    # The specs are made as the compiler walks them, never held all at once.
    keys = build_keys(map(key_spec, entries, thresholds), lambda: (e.content for e in entries), options, limits,
                      name=book.name, source=source)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        flags = np.array([_entry_flags(e) for e in entries], dtype=np.uint8)
        return CompiledBook(
            book=book, keys=keys, entries=entries,
            entry_order=np.array([_entry_order(e) for e in entries], dtype=np.float64),
            entry_flags=flags, timed_hashes=_timed_hashes(entries, flags, book.name),
            levels=tuple(sorted({e.delay_until_recursion for e in entries if e.delay_until_recursion})),
            max_entry_depth=_max_entry_depth(entries), unit_tokens=_unit_tokens(entries) if token_counts else None)
    finally:
        if was_enabled:
            gc.enable()


def key_spec(entry: Entry, fuzzy: float | None = None) -> KeySpec:
    """The engine-neutral key spec of a SillyTavern entry (``fuzzy``: its resolved threshold)."""
    return KeySpec(entry.key, entry.keysecondary, entry.content, entry.case_sensitive, entry.match_whole_words,
                   fuzzy, entry.uid)


def _entry_flags(entry: Entry) -> int:
    flags = FLAG_CONSTANT if entry.constant else 0
    if entry.content.startswith("@@"):
        for strict, act, dont in ((False, FLAG_ACTIVATE, FLAG_DONT_ACTIVATE),
                                  (True, FLAG_ACTIVATE_STRICT, FLAG_DONT_ACTIVATE_STRICT)):
            decorators = parse_st_decorators(entry.content, strict_lines=strict)[0]
            flags |= (act if "@@activate" in decorators else 0) | (dont if "@@dont_activate" in decorators else 0)
    if js_truthy(entry.sticky) or js_truthy(entry.cooldown):
        flags |= FLAG_TIMED
    if not (flags & (FLAG_ACTIVATE | FLAG_DONT_ACTIVATE | FLAG_ACTIVATE_STRICT | FLAG_DONT_ACTIVATE_STRICT)) \
            and keys_alone_decide(entry) and entry.scan_depth is None and not any(entry.match_sources):
        flags |= FLAG_PLAIN_NOT_IN_RECURSION if entry.exclude_recursion else FLAG_PLAIN
    return flags


def keys_alone_decide(entry: Entry) -> bool:
    """Whether the entry's primary keys alone decide it, its decorators, the engine's key
    expressions and the turn's timed state aside: no static gate can stop it (disabled,
    triggers, a character filter, a delay), no delay until recursion, not constant, primary
    keys and no secondary logic. What ``st.activate``'s plain kind and ``FLAG_PLAIN`` share."""
    _, names, tags = entry.character_filter
    return not (entry.disable or entry.triggers or names or tags or (entry.delay and js_truthy(entry.delay))
                or entry.delay_until_recursion or entry.constant or not entry.key
                or (entry.selective and entry.keysecondary))


def _timed_hashes(entries: Sequence[Entry], flags: Any, world: str) -> Any:
    # Only the timed entries: a fingerprint costs ~30 us per kilobyte of entry (the native cyrb53;
    # ~0.3 ms on its pure-Python twin), too much for every entry of a large book;
    # timed-effect records of an ordinary chat name timed entries (st.tables.HashIndex looks at them first).
    timed = np.flatnonzero(flags & FLAG_TIMED).tolist()
    rows = np.zeros((len(timed), 3), dtype=np.int64)
    for j, i in enumerate(timed):
        e = entries[i]
        rows[j, 0] = i
        for col, strict_lines in ((1, False), (2, True)):
            if strict_lines and not e.content.startswith("@@"):
                rows[j, 2] = rows[j, 1]          # no decorator line: both readings are the same
                continue
            decorators, content = parse_st_decorators(e.content, strict_lines=strict_lines)
            rows[j, col] = entry_fingerprint(e.fields, uid=e.uid, world=world, content=content, decorators=decorators)
    return rows


def _unit_tokens(entries: Sequence[Entry]) -> tuple[str, str, Any]:
    # What st.budget.count_unit counts: the entry's content without decorator lines, plus "\n";
    # an entry with decorator lines (whose content depends on strict_lines) is left to the engine.
    import tiktoken     # import-cost: the default counter's package, only when counts are asked for
    counter = shared_counter()
    counts = np.array([-1 if e.content.startswith("@@") else storable_count(counter, e.content + "\n")
                       for e in entries], dtype=np.int32)
    return counter.encoding.name, f"{tiktoken.__version__} {unicode_tables()}", counts


def _entry_order(entry: Entry) -> float:
    o = entry.order
    return math.nan if math.isnan(o) else float(o)


def _max_entry_depth(entries: Sequence[Entry]) -> int:
    # STEngine's widest per-entry scan depth (docs/sillytavern-mode.md#st-scan-text; capped like _effective_depth in st/engine.py)
    best = 0
    for e in entries:
        d = e.scan_depth
        if d is None:
            continue
        if isinstance(d, float) and not math.isfinite(d):
            d = MAX_SCAN_DEPTH if d > 0 else 0
        best = max(best, math.ceil(min(d, MAX_SCAN_DEPTH)))
    return best
