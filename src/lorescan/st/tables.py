"""What an :class:`~lorescan.st.engine.STEngine` precomputes once for its books and settings: one
frozen value (:class:`Tables`) that every stage of a turn reads and none changes.

Entries are described in SillyTavern's global order by :class:`EntryInfo` records. A loaded
compact book has no :class:`~lorescan.model.Entry` objects until something reads them, so
the records of most entries are built when a turn first needs them; each is built once
(under a lock) and then shared, so every thread sees the same record for an entry.
"""
from __future__ import annotations

import re
import threading
from array import array
from dataclasses import dataclass
from typing import Any, Iterator, Sequence, cast

from ..js.sthash import entry_fingerprint
from ..js.text import JS_WHITESPACE
from ..limits import Limits
from .compiled import FLAG_PLAIN, FLAG_PLAIN_NOT_IN_RECURSION, CompiledBook
from ..match.expr import ExprLayout, layout_of
from ..match.options import MatchOptions
from ..model import Entry
from ..tokens import TextCount, TiktokenCounter, edited_text_count, stored_text_count, unicode_tables
from ..js.stdecorators import parse_st_decorators
from .result import EntryId
from .settings import Compat, STSettings
from .timed import TimedEntry

__all__ = ["EntryInfo", "PlainRef", "Tables", "EntryTable", "KeyIndex", "HashIndex", "UnitCounts",
           "split_group_names"]


_GROUP_SPLIT = re.compile(",[" + "".join(sorted(JS_WHITESPACE)) + "]*")


def split_group_names(group: str) -> list[str]:
    """An entry's inclusion group names (docs/sillytavern-mode.md#st-groups).

    Args:
        group: the entry's ``group`` field.

    Returns:
        The names, split on a comma and the whitespace after it; empty names dropped.
    """
    return [g for g in _GROUP_SPLIT.split(group) if g]


class EntryInfo:
    """One entry in the global order, with everything static precomputed.

    ``gpos``: its place in the global order; ``book``/``index``: which compiled book and
    which entry of it; ``eid``: its :class:`EntryId` (how results name it); ``world_uid``:
    SillyTavern's ``"<book>.<uid>"`` string, under which SillyTavern keys its activated
    and failed entries and its timed-effect records, and so the turn does (not a matching key:
    those are ``entry.key``); ``content``: without decorator lines;
    ``sources``: the match-source flags as a bit set; ``groups``: its inclusion groups.
    """

    __slots__ = ("gpos", "book", "index", "entry", "eid", "world_uid", "content", "decorators", "activate",
                 "dont_activate", "has_keys", "sources", "groups", "_hash", "world", "_exprs")

    def __init__(self, gpos: int, book: int, index: int, entry: Entry, world: str, strict: bool) -> None:
        self.gpos, self.book, self.index, self.entry, self.world = gpos, book, index, entry, world
        self.eid = EntryId(world, entry.uid)
        self.world_uid = self.eid.key
        self.decorators, self.content = parse_st_decorators(entry.content, strict_lines=strict)
        self.activate = "@@activate" in self.decorators
        self.dont_activate = "@@dont_activate" in self.decorators
        self.has_keys = bool(entry.key)
        self.sources = sum(1 << i for i, flag in enumerate(entry.match_sources) if flag)
        self.groups = split_group_names(entry.group) if entry.group else []
        self._hash: int | None = None
        self._exprs: ExprLayout | None | bool = False

    @property
    def exprs(self) -> ExprLayout | None:
        """Where the entry's key expressions find their atoms (None: it has none), for books
        compiled with ``MatchOptions.expressions`` (whose compilation checked them)."""
        if self._exprs is False:   # a pure function of the entry: two threads write the same value
            self._exprs = layout_of(self.entry.key, self.entry.keysecondary)
        return self._exprs  # type: ignore[return-value]

    @property
    def hash(self) -> int:
        """SillyTavern's fingerprint of the entry (what timed-effect records store)."""
        if self._hash is None:   # a pure function of the entry: two threads write the same value
            self._hash = entry_fingerprint(self.entry.fields, uid=self.entry.uid, world=self.world,
                                           content=self.content, decorators=self.decorators)
        return self._hash

    def timed(self) -> TimedEntry:
        """What timed-effect evaluation reads of this entry."""
        return TimedEntry(self.world_uid, self.entry.sticky, self.entry.cooldown)


class PlainRef:
    """An entry the walk decides from its primary keys alone (its compiled flags say so:
    ``FLAG_PLAIN`` / ``FLAG_PLAIN_NOT_IN_RECURSION``), named before its record is built: a
    turn matches its keys by ``book``/``index`` and builds the record (``EntryTable[gpos]``)
    only when one matches, so an entry that a key of it merely brought into the candidates
    costs no record. ``kind``: its walk kind (st.activate: 1 plain, 2 plain but not in
    recursion); ``eid``/``world_uid`` as :class:`EntryInfo` names it."""

    __slots__ = ("gpos", "book", "index", "eid", "world_uid", "kind")

    def __init__(self, gpos: int, book: int, index: int, eid: EntryId, kind: int) -> None:
        self.gpos, self.book, self.index, self.eid, self.kind = gpos, book, index, eid, kind
        self.world_uid = eid.key

    def __repr__(self) -> str:
        return f"PlainRef({self.gpos}, {self.world_uid!r})"


_PLAIN_FLAGS = FLAG_PLAIN | FLAG_PLAIN_NOT_IN_RECURSION


class EntryTable(Sequence[EntryInfo]):
    """The engine's entries in global order (``gpos`` -> :class:`EntryInfo`), each built on first use."""

    __slots__ = ("_compiled", "_worlds", "_order_book", "_order_index", "_strict", "_items", "_lock",
                 "_unbuilt", "_refs")

    def __init__(self, compiled: Sequence[CompiledBook], worlds: Sequence[str], order_book: list[int],
                 order_index: list[int], strict: bool) -> None:
        self._compiled, self._worlds, self._strict = compiled, worlds, strict
        # (book, index) per global position as machine integers: lists of 100k int objects
        # took 7 MB per engine at 100k entries
        self._order_book, self._order_index = array("q", order_book), array("q", order_index)
        self._items: list[EntryInfo | None] = [None] * len(order_book)
        self._unbuilt = len(order_book)      # records not built yet (changed under the lock)
        self._lock = threading.Lock()
        # walkable's PlainRefs by global position (pure values: threads that race store equal ones)
        self._refs: dict[int, PlainRef] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[EntryInfo]:
        if self._unbuilt:
            self.many(range(len(self._items)))
        return iter(self._items)  # type: ignore[arg-type]

    def many(self, positions: Sequence[int]) -> list[EntryInfo]:
        """The records at these global positions, any missing ones built under one lock."""
        items = self._items
        if self._unbuilt and any(items[g] is None for g in positions):
            with self._lock:
                for g in positions:
                    if items[g] is None:
                        items[g] = self._build(g)
                        self._unbuilt -= 1
        return [items[g] for g in positions]  # type: ignore[misc]

    def walkable(self, positions: Sequence[int], lazy: bool = True) -> list[EntryInfo | PlainRef]:
        """``many(positions)``, but (``lazy``) an entry not built yet whose compiled flags make it
        plain is named by a :class:`PlainRef` (one per entry, kept) instead of built."""
        items = self._items
        if not (lazy and self._unbuilt):
            return cast("list[EntryInfo | PlainRef]", self.many(positions))
        missing = [g for g in positions if items[g] is None]
        if not missing:
            return [items[g] for g in positions]  # type: ignore[misc]
        refs, books, indexes, compiled, worlds = self._refs, self._order_book, self._order_index, \
            self._compiled, self._worlds
        build = []
        for g in missing:
            if g in refs:
                continue
            bi, ei = books[g], indexes[g]
            cb = compiled[bi]
            flags = int(cb.entry_flags[ei]) & _PLAIN_FLAGS
            if flags:
                refs[g] = PlainRef(g, bi, ei, EntryId(worlds[bi], cb.uids[ei]), 1 if flags == FLAG_PLAIN else 2)
            else:
                build.append(g)
        if build:
            self.many(build)
        return [refs[g] if (i := items[g]) is None else i for g in positions]

    def fingerprint_index(self) -> dict[int, int]:
        """Fingerprint -> the global position of the first entry that has it."""
        tables = [book_fingerprints(c, w, self._strict) for c, w in zip(self._compiled, self._worlds)]
        index: dict[int, int] = {}
        for gpos, (bi, ei) in enumerate(zip(self._order_book, self._order_index)):
            index.setdefault(tables[bi][ei], gpos)
        return index

    def stored_hash(self, gpos: int, maps: dict[int, dict[int, int]] | None = None) -> int | None:
        """The fingerprint of the entry at ``gpos`` as its compiled book stored it (None: not
        stored), read without building the entry's record. ``maps``: a caller's dict, filled
        with each book's stored fingerprints at its first look (many entries looked up at once)."""
        bi = self._order_book[gpos]
        if maps is None:
            return self._compiled[bi].timed_hash(self._order_index[gpos], self._worlds[bi], self._strict)
        stored = maps.get(bi)
        if stored is None:
            stored = maps[bi] = self._compiled[bi].timed_hash_map(self._worlds[bi], self._strict)
        return stored.get(self._order_index[gpos])

    def timed(self, gpos: int) -> TimedEntry:
        """What timed-effect evaluation reads of the entry at ``gpos`` (its record is not built for it)."""
        info = self._items[gpos]
        if info is not None:
            return info.timed()
        bi, ei = self._order_book[gpos], self._order_index[gpos]
        cb = self._compiled[bi]
        sticky, cooldown = cb.timed_values(ei)
        return TimedEntry(EntryId(self._worlds[bi], cb.uids[ei]).key, sticky, cooldown)

    def _build(self, gpos: int) -> EntryInfo:
        bi, ei = self._order_book[gpos], self._order_index[gpos]
        cb, world = self._compiled[bi], self._worlds[bi]
        info = EntryInfo(gpos, bi, ei, cb.entries[ei], world, self._strict)
        info._hash = cb.timed_hash(ei, world, self._strict)      # stored at compile time, or None
        return info

    def __getitem__(self, gpos):  # type: ignore[override]
        if type(gpos) is slice:
            return [self[g] for g in range(*gpos.indices(len(self._items)))]
        info = self._items[gpos]
        if info is None:
            gpos = range(len(self._items))[gpos]
            with self._lock:     # one record per entry, whichever thread asks first
                info = self._items[gpos]
                if info is None:
                    info = self._items[gpos] = self._build(gpos)
                    self._unbuilt -= 1
        return info


class KeyIndex:
    """Entry key (``"<book>.<uid>"``) -> :class:`EntryInfo`; the key table is built on first use
    and published whole."""

    __slots__ = ("_entries", "_worlds", "_compiled", "_order_book", "_order_index", "_index", "_entry_at", "_uids")

    def __init__(self, entries: EntryTable, worlds: Sequence[str], compiled: Sequence[CompiledBook],
                 order_book: list[int], order_index: list[int],
                 entry_at: Sequence[Sequence[int]] | None = None) -> None:
        self._entries, self._worlds, self._compiled = entries, worlds, compiled
        books, index = array("q", order_book), array("q", order_index)
        if isinstance(entries, EntryTable) and books == entries._order_book and index == entries._order_index:
            books, index = entries._order_book, entries._order_index      # the same order: shared
        self._order_book, self._order_index = books, index
        self._index: dict[str, int] | None = None
        # entry_at[book][index] -> global position, kept only when each entry has exactly one
        # (no book takes part twice): then position() finds a key without the key table
        if entry_at is not None and len(books) != sum(len(cb.entry_order) for cb in compiled):
            entry_at = None
        self._entry_at = entry_at
        self._uids: dict[int, list[int | str]] = {}

    def _table(self) -> dict[str, int]:
        index = self._index
        if index is None:
            # one "<book>." prefix per book and the uids as decoded (no EntryId per entry); a key
            # named twice keeps its last global position, as the per-entry table did
            keys_of = [[f"{w}.{u}" for u in uid_list(cb)] for w, cb in zip(self._worlds, self._compiled)]
            index = dict(zip(map(lambda bi, ei: keys_of[bi][ei], self._order_book, self._order_index),
                             range(len(self._order_book))))
            self._index = index
        return index

    def __contains__(self, key: object) -> bool:
        return key in self._table()

    def position(self, key: str) -> int | None:
        """The global position of ``self[key]`` (None: no entry has that key). A cold engine
        asks for a few keys a turn (its sticky and forced entries): they are found in the
        books' uid lists (C searches) without building the key table, unless a uid repeats."""
        index = self._index
        if index is not None or self._entry_at is None:
            return self._table().get(key)
        found = -1
        for bi, world in enumerate(self._worlds):
            n = len(world)
            if not key.startswith(world) or key[n:n + 1] != ".":
                continue
            tail = key[n + 1:]
            uids = self._uids.get(bi)
            if uids is None:
                uids = self._uids[bi] = uid_list(self._compiled[bi])
            wanted: list[int | str] = [tail]
            if tail[-1:].isdigit():           # an integer uid is written in decimal: "7", "-7"
                try:
                    number = int(tail)
                except ValueError:
                    pass
                else:
                    if str(number) == tail:
                        wanted.append(number)
            for uid in wanted:
                count = uids.count(uid)
                if count > 1:                 # a uid twice in one book: the table says which wins
                    return self._table().get(key)
                if count:
                    found = max(found, self._entry_at[bi][uids.index(uid)])
        return None if found < 0 else found

    def __getitem__(self, key: str) -> EntryInfo:
        return self._entries[self._table()[key]]


def uid_list(compiled: CompiledBook) -> list[int | str]:
    """The uids of ``compiled``'s entries as one list (a loaded book decodes them once, not
    one lazy item at a time)."""
    return list(compiled.uids)


def book_fingerprints(compiled: CompiledBook, world: str, strict: bool) -> "array[int]":
    """The fingerprint of every entry of ``compiled`` named ``world`` (by entry index), computed
    once per compiled book and kept on it: every engine over the book shares the table."""
    memo_key = ("st.fingerprints", world, strict)
    table = compiled.memo.get(memo_key)
    if table is None:
        table = array("Q")
        for entry in compiled.entries:
            decorators, content = parse_st_decorators(entry.content, strict_lines=strict)
            table.append(entry_fingerprint(entry.fields, uid=entry.uid, world=world, content=content,
                                           decorators=decorators))
        compiled.memo[memo_key] = table       # published whole; a racing thread computes the same
    return table


class HashIndex:
    """Entry fingerprint -> :class:`~lorescan.st.timed.TimedEntry`: what timed-effect records point at.

    The timed entries (sticky or cooldown set), which the records of an ordinary chat name,
    are looked at first, in global order. Their fingerprints are read from the compiled books'
    stored columns (``CompiledBook.timed_hash``) into a fingerprint -> global position table
    the first time a record is looked up, so an engine builds no entry record for them: a
    sticky record's entry is built (the turn activates it), a cooldown record's is only read
    (``EntryTable.timed``: a loaded book's record gives its sticky and cooldown). A
    fingerprint that is not stored (a book taking part under another name) is computed from the entry's record (about a millisecond each) when
    that table is built; it is a pure function of the entry, so threads that race write the
    same value. A record naming any other entry (edited, or written by another version) makes
    the first lookup that misses read every entry's fingerprint from its compiled book's table
    (:func:`book_fingerprints`: computed once per book, not per engine) into a fingerprint ->
    global position table, published only when complete.
    """

    __slots__ = ("_entries", "_timed", "_first", "_all")
    peeks = True                             # get(h, False) reads an entry without building it (st.timed)

    def __init__(self, entries: EntryTable, timed: Sequence[int]) -> None:
        self._entries = entries
        self._timed = tuple(timed)           # the timed entries' global positions, ascending
        self._first: dict[int, int] | None = None
        self._all: dict[int, int] | None = None

    def _timed_table(self) -> dict[int, int]:
        first = self._first
        if first is None:
            entries = self._entries
            first = {}
            maps: dict[int, dict[int, int]] = {}
            for gpos in self._timed:         # first in global order wins, as SillyTavern's find does
                h = entries.stored_hash(gpos, maps)
                if h is None:
                    h = entries[gpos].hash
                first.setdefault(h, gpos)
            self._first = first               # published whole
        return first

    def get(self, h: int, build: bool = True) -> TimedEntry | None:
        """The entry with fingerprint ``h``, timed entries first; None if there is none.
        ``build``: build its record (a sticky entry's: the turn activates it); else only its
        sticky and cooldown are read (an entry on cooldown a turn may never reach)."""
        gpos = self._timed_table().get(h)
        if gpos is None:
            index = self._all
            if index is None:
                index = self._entries.fingerprint_index()
                self._all = index
            gpos = index.get(h)
            if gpos is None:
                return None
        return self._entries[gpos].timed() if build else self._entries.timed(gpos)


class UnitCounts:
    """Per-entry token counts of ``"content\n"`` (the unit every budget text is made of),
    kept for the engine's life: ``state = (counter, {gpos: (content, unit, TextCount)}, joins)``,
    ``joins`` the counts of the budget's joins of those units (lorescan.st.budget.JoinMemo).
    Each value and the tuple itself are written whole, so threads may share it.

    ``entries``: the engine's entries, whose compiled books may hold their contents' counts
    under the default counter (``compile_book(token_counts=True)``): :meth:`stored` reads one
    instead of counting, for a counter of the same tiktoken encoding and version.
    """

    __slots__ = ("state", "_entries", "_usable")

    def __init__(self, entries: "EntryTable | None" = None) -> None:
        self.state: tuple[Any, dict[int, tuple[str, str, TextCount]], Any] = (None, {}, None)
        self._entries = entries
        self._usable: tuple[Any, tuple[int, ...]] = (None, ())     # (counter, per book: _counts_apply)

    def stored(self, counter: Any, info: EntryInfo, content: str, unit: str) -> TextCount | None:
        """The count of ``unit`` (``content + "\n"``) for ``info``'s entry from its compiled book,
        when the book stores it for ``counter`` and ``content`` is the entry's own; else None."""
        if not (content is info.content or content == info.content):
            return None
        apply, stored = self._stored(counter, info)
        if not apply:
            return None
        return stored_text_count(counter, unit, stored, apply == 2)

    def edited(self, counter: Any, info: EntryInfo, unit: str) -> TextCount | None:
        """The count of ``unit``, a content of ``info``'s entry other than its own (its macros
        substituted) plus "\n", from the count its compiled book stores for the entry's own:
        only the words around each change are counted (``tokens.edited_text_count``).
        None: no such count is stored, or it would not pay (count ``unit`` whole)."""
        apply, stored = self._stored(counter, info)
        if not apply or stored < 0:
            return None
        # the stored unsure bit holds under this process's Unicode tables (apply == 2)
        return edited_text_count(counter, unit, info.content + "\n", stored >> 1,
                                 bool(stored & 1) if apply == 2 else None)

    def _stored(self, counter: Any, info: EntryInfo) -> tuple[int, int]:
        """(:func:`_counts_apply` of ``info``'s book for ``counter``, the count stored for the
        entry's own content: meaningful only when the first is not 0)."""
        entries = self._entries
        if entries is None:
            return 0, -1
        owner, usable = self._usable
        if owner is not counter:
            usable = tuple(_counts_apply(cb, counter) for cb in entries._compiled)
            self._usable = (counter, usable)
        apply = usable[info.book]
        if not apply:
            return 0, -1
        return apply, int(entries._compiled[info.book].unit_tokens[2][info.index])


def _counts_apply(compiled: CompiledBook, counter: Any) -> int:
    """0: the book's stored counts are not ``counter``'s; 1: they are; 2: and their ``unsure``
    bits were made under this process's Unicode tables."""
    stored = compiled.unit_tokens
    # a counter built from an encoding name (not handed an Encoding object) that resolved to the
    # encoding the counts were made with, under the same tiktoken
    if stored is None or not isinstance(counter, TiktokenCounter) or counter.name is None:
        return 0
    import tiktoken     # import-cost: loaded already by the counter that is asking
    version, _, tables = stored[1].partition(" ")
    if counter.encoding.name != stored[0] or tiktoken.__version__ != version:
        return 0
    return 2 if tables == unicode_tables() else 1


@dataclass(frozen=True, slots=True, eq=False)
class Tables:
    """Everything an engine precomputed, read by the stages of every turn.

    Args:
        settings, compat, match_options, limits: the engine's configuration.
        regex_timeout: the nominal seconds one regex evaluation may cost (``JSRegex.cost``, never a
            clock; None: no cap).
        strict: whether decorators follow ``strict_lines`` (docs/improved-profile.md#decorators).
        compiled, worlds: the de-duplicated books and their names.
        entries: all entries in global order.
        entry_at: ``entry_at[book][index]`` is the global position of a book's entry.
        by_key: ``"<book>.<uid>"`` -> entry.
        by_hash: fingerprint -> what timed-effect evaluation needs.
        always: entries that can activate without a key hit, walked every loop.
        levels: the delay-until-recursion levels present, ascending.
        max_entry_depth: the deepest per-entry scan depth.
        units: the engine-life token counts of entry contents.
    """

    settings: STSettings
    compat: Compat
    match_options: MatchOptions
    limits: Limits
    regex_timeout: float | None
    strict: bool
    compiled: tuple[CompiledBook, ...]
    worlds: tuple[str, ...]
    entries: EntryTable
    entry_at: tuple[Sequence[int], ...]
    by_key: KeyIndex
    by_hash: HashIndex
    always: tuple[EntryInfo, ...]
    levels: tuple[float, ...]
    max_entry_depth: int
    units: UnitCounts

    def __post_init__(self) -> None:
        # entry_at[book][index] as machine integers (a list per book held an int object per entry)
        object.__setattr__(self, "entry_at", tuple(at if isinstance(at, array) else array("q", at)
                                                   for at in self.entry_at))

    def info(self, book: int, index: int) -> EntryInfo:
        """The record of entry ``index`` of compiled book ``book``."""
        return self.entries[self.entry_at[book][index]]


