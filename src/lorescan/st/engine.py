"""SillyTavern mode: which entries fire, in what order, and why (docs/sillytavern-mode.md).

:class:`STEngine` is built once per set of books and settings (books compiled, global
order, decorators and fingerprints computed); :meth:`STEngine.scan` runs one generation.
Per pass, only the entries the matcher reports as possible candidates (a key hit
somewhere in the window, or an entry that activates without keys) go through the
per-entry gates; every other entry cannot activate and costs nothing.
"""
from __future__ import annotations

import functools
import math
import random as _random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..match.compile import FLAG_ACTIVATE, FLAG_ACTIVATE_STRICT, FLAG_CONSTANT, FLAG_DONT_ACTIVATE, FLAG_DONT_ACTIVATE_STRICT, FLAG_TIMED, CompiledBook, compile_book
from ..limits import DEFAULT_LIMITS, Limits
from .decorators import parse_st_decorators
from ..errors import LorebookError, SettingsError
from .groups import PendingList, js_key_order, split_group_names
from ..js.regex import RegexTimeout, compile_js_regex, parse_regex_key
from ..match.view import MAX_SCAN_DEPTH, SOURCE_NAMES, ScanView, Window, WindowTexts, match_plain_key
from ..model import GENERATION_TRIGGERS, Compat, Entry, Lorebook, STSettings, js_truthy
from .place import Placement, place_entries
from ..match.regexscope import RegexBudget
from ..js.sthash import entry_fingerprint
from ..js.text import js_trim
from ..tokens import ConcatCount, PrependCount, TextCount, count_text
from .timed import EffectRecord, TimedEffects, evaluate

__all__ = ["STEngine", "STResult", "Character", "ChatMessage", "BookSource", "Diagnostic",
           "LoopRecord", "EntryId", "ROLES"]

ROLES = ("global", "character", "character_extra", "chat", "persona")
INITIAL, RECURSION, MIN_ACTIVATIONS, NONE = "INITIAL", "RECURSION", "MIN_ACTIVATIONS", "NONE"
_STRATEGIES = {"evenly": 0, "character_first": 1, "global_first": 2}


@dataclass(frozen=True, slots=True)
class EntryId:
    """An entry's identity across books: its book (world) name and uid."""

    world: str
    uid: int | str

    @property
    def key(self) -> str:
        """SillyTavern's ``"<book>.<uid>"`` key (used in timed-effect records)."""
        return f"{self.world}.{self.uid}"

    def to_json(self) -> dict[str, Any]:
        return {"world": self.world, "uid": self.uid}


@dataclass(frozen=True, slots=True)
class Character:
    """The selected character: display name, avatar file name, tag ids.

    ``tags=None`` means the character has no entry in the tag map (tag filters then see an
    empty list). Name filters compare against the avatar without its last extension.
    """

    name: str
    avatar: str = ""
    tags: tuple[str, ...] | None = None

    @property
    def filter_id(self) -> str:
        base = self.avatar
        dot = base.rfind(".")
        return base[:dot] if dot != -1 else base


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message as the engine scans it."""

    name: str
    text: str
    is_user: bool = False


@dataclass(frozen=True, slots=True)
class BookSource:
    """A book and the roles it plays in this engine (``global``, ``character``,
    ``character_extra``, ``chat``, ``persona``)."""

    book: Lorebook | CompiledBook
    roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LoopRecord:
    """One scan loop: its kind, the kind of the next loop, the entries it activated."""

    state: str
    next: str
    activated: tuple[EntryId, ...]


@dataclass(slots=True)
class Diagnostic:
    """Why one entry did or did not fire on this turn.

    ``outcome`` is ``"activated"`` or ``"not_activated"``; ``reason`` a short code
    (``constant``, ``key``, ``sticky``, ``decorator``, ``forced`` for activations;
    ``disabled``, ``trigger``, ``character_filter``, ``tag_filter``, ``delay``,
    ``cooldown``, ``delay_until_recursion``, ``exclude_recursion``, ``dont_activate``,
    ``no_keys``, ``no_key_match``, ``secondary_keys``, ``group``, ``probability``,
    ``budget``, ``not_reached`` otherwise); ``detail`` says more in words;
    ``loop`` is the 1-based loop where the decision fell; ``key`` the key that matched.
    """

    entry: EntryId
    outcome: str
    reason: str
    detail: str = ""
    loop: int | None = None
    key: str | None = None
    where: str | None = None

    def __str__(self) -> str:
        """One sentence: ``Entry Saltmere.1 fired: primary key 'lighthouse' matched in message 0 (newest = 0), loop 1.``"""
        verb = "fired" if self.outcome == "activated" else "did not fire"
        why = (self.detail or self.reason.replace("_", " ")) + (f" in {self.where}" if self.where else "")
        loop = f", loop {self.loop}" if self.loop is not None else ""
        return f"Entry {self.entry.key} {verb} ({self.reason}): {why}{loop}."


@dataclass
class STResult:
    """Everything one SillyTavern-mode generation produces (docs/sillytavern-mode.md#st-inputs and 11)."""

    activated: list[EntryId]
    placement: Placement
    budget: int
    budget_overflowed: bool
    overflow_alert_shown: bool
    timed_effects: TimedEffects
    loops: list[LoopRecord]
    _explain: Callable[[], dict[EntryId, Diagnostic]] = field(repr=False, default=lambda: {})
    regex_cutoffs: tuple[str, ...] = ()
    """One line per regex key cut off by the scan's regex time budget ("regex key … was cut
    off after N ms …"): such a key counted as not matching this turn. Empty normally."""

    @property
    def world_info_before(self) -> str:
        return self.placement.before

    @property
    def world_info_after(self) -> str:
        return self.placement.after

    @cached_property
    def diagnostics(self) -> dict[EntryId, Diagnostic]:
        """Why each entry of the books did or did not fire (computed on first access)."""
        return self._explain()

    def __reduce__(self):
        # A result is a value: pickling materialises the explanation, so the copy owns plain
        # data only (no engine, views or caches).
        return (STResult, (self.activated, self.placement, self.budget, self.budget_overflowed,
                           self.overflow_alert_shown, self.timed_effects, self.loops,
                           functools.partial(dict, self.diagnostics), self.regex_cutoffs))

    def decisions(self) -> dict[EntryId, Diagnostic]:
        """The diagnostics of the entries a pass of this turn decided about (fired, or stopped
        by a gate, a group, a roll or the budget), without explaining every other entry of the
        books: on a large book much cheaper than :attr:`diagnostics`. A result that went
        through pickle holds every entry's diagnostic and returns all of them."""
        run = getattr(self._explain, "__self__", None)
        notes = getattr(run, "notes", None)
        if isinstance(notes, dict):
            return {d.entry: d for d in notes.values()}
        return dict(self.diagnostics)

    def explain(self, world: str, uid: int | str) -> Diagnostic:
        """The diagnostic record of one entry."""
        return self.diagnostics[EntryId(world, uid)]

    def to_json(self) -> dict[str, Any]:
        """The result in the conformance vectors' ``expected`` shape."""
        p = self.placement
        return {
            "activated": [e.to_json() for e in self.activated],
            "world_info_before": p.before, "world_info_after": p.after,
            "depth_entries": [{"depth": d.depth, "role": d.role, "entries": list(d.entries)} for d in p.depth],
            "an_top": list(p.an_top), "an_bottom": list(p.an_bottom),
            "em_entries": [{"position": pos, "content": c} for pos, c in p.examples],
            "outlets": {k: list(v) for k, v in p.outlets.items()},
            "authors_note": p.authors_note,
            "budget_overflowed": self.budget_overflowed,
            "overflow_alert_shown": self.overflow_alert_shown,
            "timed_effects": self.timed_effects.to_json(),
            "loops": [{"state": lr.state, "next": lr.next, "activated": [e.to_json() for e in lr.activated]}
                      for lr in self.loops],
        }


class _Slot:
    """One entry in the global order, with everything static precomputed."""

    __slots__ = ("gpos", "book", "index", "entry", "eid", "key", "content", "decorators", "activate",
                 "dont_activate", "has_keys", "sources", "groups", "_hash", "world")

    def __init__(self, gpos: int, book: int, index: int, entry: Entry, world: str, strict: bool) -> None:
        self.gpos, self.book, self.index, self.entry, self.world = gpos, book, index, entry, world
        self.eid = EntryId(world, entry.uid)
        self.key = self.eid.key
        self.decorators, self.content = parse_st_decorators(entry.content, strict_lines=strict)
        self.activate = "@@activate" in self.decorators
        self.dont_activate = "@@dont_activate" in self.decorators
        self.has_keys = bool(entry.key)
        self.sources = sum(1 << i for i, flag in enumerate(entry.match_sources) if flag)
        self.groups = split_group_names(entry.group) if entry.group else []
        self._hash: int | None = None

    @property
    def hash(self) -> int:
        if self._hash is None:
            self._hash = entry_fingerprint(self.entry.fields, uid=self.entry.uid, world=self.world,
                                           content=self.content, decorators=self.decorators)
        return self._hash


def _default_random() -> float:
    return _random.random()


def _budget(settings: STSettings, max_context: int) -> int:
    raw = settings.budget_percent * max_context / 100
    budget = math.floor(raw + 0.5) if math.isfinite(raw) else 0
    if budget == 0:
        budget = 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    return budget


def _effective_depth(entry: Entry, global_depth: int) -> float:
    """docs/sillytavern-mode.md#st-scan-text steps 1-3. A fractional depth is kept: SillyTavern tests ``depth <= 0``
    (empty haystack) before slicing, so 0.5 scans no message but still the sources,
    injects and recursion text; the view truncates when it slices."""
    d = entry.scan_depth if entry.scan_depth is not None else global_depth
    if isinstance(d, float) and not math.isfinite(d):
        return MAX_SCAN_DEPTH if d > 0 else 0
    return min(d, MAX_SCAN_DEPTH)


class _LazySlots(Sequence):
    """An engine's slots in global order, each built on first use."""

    __slots__ = ("_e", "_items")

    def __init__(self, engine: "STEngine") -> None:
        self._e = engine
        self._items: list[_Slot | None] = [None] * len(engine._order_book)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, gpos):  # type: ignore[override]
        if type(gpos) is slice:
            return [self[g] for g in range(*gpos.indices(len(self._items)))]
        slot = self._items[gpos]
        if slot is None:
            e = self._e
            gpos = range(len(self._items))[gpos]
            bi, ei = e._order_book[gpos], e._order_index[gpos]
            slot = self._items[gpos] = _Slot(gpos, bi, ei, e.compiled[bi].entries[ei], e.world_names[bi], e._strict)
        return slot


class _SlotOf:
    """(book, entry index) -> slot, without building every slot."""

    __slots__ = ("_e",)

    def __init__(self, engine: "STEngine") -> None:
        self._e = engine

    def __getitem__(self, where: tuple[int, int]) -> _Slot:
        bi, ei = where
        return self._e.slots[self._e._gpos_of[bi][ei]]


class _KeyIndex:
    """Entry key (``"<book>.<uid>"``) -> slot."""

    __slots__ = ("_slots", "_index")

    def __init__(self, slots: Sequence[_Slot], index: dict[str, int]) -> None:
        self._slots, self._index = slots, index

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __getitem__(self, key: str) -> _Slot:
        return self._slots[self._index[key]]


def _restore_engine(sources, settings, compat, count_tokens, substitute, random, post_process, regex_timeout,
                    limits=DEFAULT_LIMITS):
    return STEngine(sources, settings, compat=compat, count_tokens=count_tokens, substitute=substitute,
                    random=random, post_process=post_process, regex_timeout=regex_timeout, limits=limits)


class STEngine:
    """SillyTavern's World Info engine, exact (docs/sillytavern-mode.md), compiled once per book set.

    ``books``: :class:`BookSource` items (or ``(book, roles)`` pairs) in selection order;
    books are de-duplicated by name across roles as SillyTavern does. ``compat``:
    ``"sillytavern"`` reproduces every quirk (the conformance profile); ``"improved"``
    switches on the fixes of docs/improved-profile.md; a :class:`~lorescan.model.Compat` sets them one by one. Hooks (docs/sillytavern-mode.md#st-inputs): ``count_tokens(text) -> int``
    (default: tiktoken cl100k, offline), ``substitute(text) -> text`` for macros,
    ``random() -> float`` in [0, 1), ``post_process(content, position, depth) -> text``.
    ``regex_timeout``: CPU seconds one regex evaluation may take (None: no per-evaluation
    cap); ``limits``: ``regex_time_per_scan`` bounds all regex time of one scan (cut-off keys
    are listed in ``STResult.regex_cutoffs``), and a regex key past ``max_regex_length`` or
    ``max_regex_nesting`` raises :class:`~lorescan.errors.RegexKeyError`.
    Raises :class:`SettingsError` for bad settings or roles, :class:`LorebookError` for a
    book over a limit.
    """

    def __init__(self, books: Sequence[BookSource | tuple[Lorebook | CompiledBook, Sequence[str]]],
                 settings: STSettings | Mapping[str, Any] = STSettings(), *, compat: Compat | str = "sillytavern",
                 count_tokens: Callable[[str], int] | None = None,
                 substitute: Callable[[str], str] | None = None,
                 random: Callable[[], float] | None = None,
                 post_process: Callable[[str, int, int | None], str] | None = None,
                 regex_timeout: float | None = 0.25, limits: Limits = DEFAULT_LIMITS) -> None:
        if not isinstance(limits, Limits):
            raise SettingsError(f"limits must be a Limits, got {type(limits).__name__}", source="STEngine",
                                field="limits")
        self.limits = limits
        if not isinstance(settings, STSettings):
            settings = STSettings.from_mapping(settings)
        self.compat = Compat.of(compat)
        self.settings = settings
        self.count_tokens = count_tokens
        self.substitute = substitute
        self.random = random if random is not None else _default_random
        self.post_process = post_process
        self.regex_timeout = regex_timeout
        self.match_options = self.compat.match_options(case_sensitive=settings.case_sensitive,
                                                       match_whole_words=settings.match_whole_words)
        sources = [b if isinstance(b, BookSource) else BookSource(b[0], tuple(b[1])) for b in books]
        for i, src in enumerate(sources):
            for role in src.roles:
                if role not in ROLES:
                    raise SettingsError(f"unknown role {role!r} (expected one of {', '.join(ROLES)})",
                                        source="books", entry=i, field="roles")
        self.compiled: list[CompiledBook] = []
        self.world_names: list[str] = []
        chat, persona, glob, char = self._collect(sources)
        book_index: dict[str, int] = {}

        def add(src: BookSource) -> int:
            name = self._name(src)
            if name not in book_index:
                if isinstance(src.book, CompiledBook):
                    # compile_book checked keys and contents against the limits it was given;
                    # a loaded book is not materialised here just to look again (it stays lazy)
                    cb = src.book
                    if len(cb.entries) > limits.max_entries:
                        raise LorebookError(f"the book has {len(cb.entries)} entries, above the limit "
                                            f"max_entries={limits.max_entries}", source=name, field="entries")
                else:
                    cb = compile_book(src.book, self.match_options, limits=limits)
                if cb.options != self.match_options:
                    raise SettingsError("a compiled book's match options differ from the engine's "
                                        "(compile it with the engine's case/whole-word settings and compat)",
                                        source=name, field="options")
                book_index[name] = len(self.compiled)
                self.compiled.append(cb)
                self.world_names.append(name)
            return book_index[name]

        def ordered(srcs: list[BookSource]) -> tuple[np.ndarray, np.ndarray]:
            # (book, entry index) sorted as _by_order did: stable, order descending, a
            # non-numeric order compares as 0 (docs/sillytavern-mode.md#st-entries); from the books' entry_order columns.
            bis = [add(s) for s in srcs]
            if not bis:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
            orders = np.concatenate([self.compiled[bi].entry_order for bi in bis])
            books = np.concatenate([np.full(len(self.compiled[bi].entry_order), bi, np.int64) for bi in bis])
            index = np.concatenate([np.arange(len(self.compiled[bi].entry_order)) for bi in bis])
            perm = np.argsort(np.where(np.isnan(orders), 0.0, -orders), kind="stable")
            return books[perm], index[perm]

        groups = [ordered(chat), ordered(persona)]
        g_e, c_e = ordered(glob), ordered(char)
        strategy = _STRATEGIES[settings.insertion_strategy]
        groups += [c_e, g_e] if strategy == 1 else [g_e, c_e] if strategy == 2 else [ordered(glob + char)]
        order_book = np.concatenate([g[0] for g in groups])
        order_index = np.concatenate([g[1] for g in groups])
        self._order_book: list[int] = order_book.tolist()
        self._order_index: list[int] = order_index.tolist()
        self._sources = [BookSource(self.compiled[book_index[self._name(s)]], s.roles) for s in sources
                         if self._name(s) in book_index]
        self._strict = self.compat.decorators == "strict_lines"
        # Slots are built when a scan first needs them (a loaded book has no Entry objects yet).
        self.slots: Sequence[_Slot] = _LazySlots(self)
        gpos = np.arange(len(order_book))
        self._gpos_of = []
        for bi, cb in enumerate(self.compiled):
            where = np.zeros(len(cb.entry_order), np.int64)
            mask = order_book == bi
            where[order_index[mask]] = gpos[mask]
            self._gpos_of.append(where.tolist())
        self._slot_of = _SlotOf(self)
        self._key_index: dict[str, int] | None = None
        # Entries that can activate without a key hit must always be walked (docs/sillytavern-mode.md#st-gates, gates 10-14).
        always_bits = FLAG_CONSTANT | ((FLAG_ACTIVATE_STRICT | FLAG_DONT_ACTIVATE_STRICT) if self._strict
                                       else (FLAG_ACTIVATE | FLAG_DONT_ACTIVATE))
        self._always = self._flagged(always_bits)
        self._timed_slots = self._flagged(FLAG_TIMED)
        self._levels = sorted({lv for cb in self.compiled for lv in cb.levels})
        self._max_entry_depth = max((cb.max_entry_depth for cb in self.compiled), default=0)
        self._hash_index: dict[int, _Slot] | None = None
        # Per-entry token counts of "content\n" (the unit every budget text is made of),
        # filled on first use and kept for the engine's life: (counter, {gpos: (content,
        # unit, TextCount)}). Each value is written whole, so threads may share it.
        self._unit_counts: tuple[Any, dict[int, tuple[str, str, TextCount]]] = (None, {})

    def _flagged(self, bits: int) -> list[_Slot]:
        found = sorted(self._gpos_of[bi][ei] for bi, cb in enumerate(self.compiled)
                       for ei in np.flatnonzero(np.asarray(cb.entry_flags) & bits).tolist())
        return [self.slots[g] for g in found]

    @property
    def _by_key(self) -> "_KeyIndex":
        if self._key_index is None:
            self._key_index = {EntryId(self.world_names[bi], self.compiled[bi].uids[ei]).key: gpos
                               for gpos, (bi, ei) in enumerate(zip(self._order_book, self._order_index))}
        return _KeyIndex(self.slots, self._key_index)

    def __reduce__(self):
        # Rebuilt by the constructor from the compiled books (which pickle in their compact
        # form); per-engine caches start empty.
        return (_restore_engine, (self._sources, self.settings, self.compat, self.count_tokens, self.substitute,
                                  self.random, self.post_process, self.regex_timeout, self.limits))

    # -- set-up ------------------------------------------------------------------------
    @staticmethod
    def _name(src: BookSource) -> str:
        return src.book.name

    def _collect(self, sources: list[BookSource]):
        """docs/sillytavern-mode.md#st-order: which books take part in which role, de-duplicated by name."""
        glob = [s for s in sources if "global" in s.roles]
        glob_names = [self._name(s) for s in glob]
        seen: set[str] = set()
        glob_unique = []
        for s, n in zip(glob, glob_names):
            if n not in seen:
                seen.add(n)
                glob_unique.append(s)
        chats = [s for s in sources if "chat" in s.roles]
        personas = [s for s in sources if "persona" in s.roles]
        if len(chats) > 1 or len(personas) > 1 or sum("character" in s.roles for s in sources) > 1:
            raise SettingsError("at most one chat, one persona and one character (main) book",
                                source="books", field="roles")
        chat = [s for s in chats if self._name(s) not in seen]
        chat_name = self._name(chats[0]) if chats else None
        persona = [s for s in personas if self._name(s) not in seen and self._name(s) != chat_name]
        persona_name = self._name(personas[0]) if personas else None
        char_srcs = [s for s in sources if "character" in s.roles] + \
                    [s for s in sources if "character_extra" in s.roles]
        char: list[BookSource] = []
        char_seen: set[str] = set()
        for s in char_srcs:
            n = self._name(s)
            if n in char_seen:
                continue
            char_seen.add(n)
            if n in seen or n == chat_name or n == persona_name:
                continue
            char.append(s)
        return chat, persona, glob_unique, char

    def _find_by_hash(self, h: int) -> str | None:
        for s in self._timed_slots:          # the usual case: records of timed entries
            if s.hash == h:
                return s.key
        index = self._hash_index
        if index is None:                    # an edited or foreign record: look at everything once
            index = {}
            for s in self.slots:
                index.setdefault(s.hash, s)
            self._hash_index = index         # published only once complete: threads never see a partial index
        found = index.get(h)
        return found.key if found is not None else None

    def tokens(self, text: str) -> int:
        """``text``'s length in tokens under this engine's counter."""
        return self._counter()(text)

    def _counter(self) -> Callable[[str], int]:
        if self.count_tokens is None:
            from ..tokens import TiktokenCounter
            self.count_tokens = TiktokenCounter()
        return self.count_tokens

    def _unit(self, slot: _Slot, content: str, limit: int | None) -> tuple[str, TextCount]:
        """``content + "\n"`` and its count, counted once per entry and content.

        ``limit``: only whether the count reaches it matters (a long content may then be
        counted only that far; such a floor is kept and reused while it settles the question).
        """
        counter = self._counter()
        owner, cache = self._unit_counts
        if owner is not counter:               # first use, or the caller swapped the counter
            cache = {}
            self._unit_counts = (counter, cache)
        found = cache.get(slot.gpos)
        if found is not None and (found[0] is content or found[0] == content):
            tc = found[2]
            if tc.exact or (limit is not None and tc.total >= limit):
                return found[1], tc
            unit = found[1]
        else:
            unit = content + "\n"
        tc = count_text(counter, unit, limit=limit)
        cache[slot.gpos] = (content, unit, tc)
        return unit, tc

    # -- one generation --------------------------------------------------------------
    def scan(self, messages: Sequence[ChatMessage | Mapping[str, Any]], *, max_context: int,
             character: Character | None = None, global_scan_data: Mapping[str, str] | None = None,
             injects: Sequence[str] = (), authors_note: str | None = None, trigger: str = "normal",
             dry_run: bool = False, timed_effects: TimedEffects | Mapping[str, Any] | None = None,
             forced: Iterable[tuple[str, int | str]] = (), cache: Any = None) -> STResult:
        """Run one generation.

        ``messages``: the whole chat, oldest first (``ChatMessage`` or mappings with
        ``name`` and ``mes``/``text``). ``global_scan_data``: texts entries may opt in to
        (keys of ``lorescan.match.view.SOURCE_NAMES``). ``injects``: scanned extension
        prompts in order (Author's Note first when it is scanned); empty ones are skipped, as
        SillyTavern does. ``authors_note``: the
        note's text when it is inserted this turn (None: AN entries are dropped).
        ``timed_effects``: the state returned by the previous turn (not changed).
        ``forced``: (book name, uid) pairs activated for this scan only. ``cache``: a
        caller-owned ``ChatScan`` so unchanged messages are not scanned again.
        """
        settings = self.settings
        if not isinstance(trigger, str):
            raise SettingsError(f"trigger must be a string, got {trigger!r}", source="scan", field="trigger")
        if trigger not in GENERATION_TRIGGERS:
            trigger = "normal"    # SillyTavern reports any other generation type as "normal" (docs/sillytavern-mode.md#st-entries)
        if isinstance(max_context, bool) or not isinstance(max_context, (int, float)) or not (
                0 <= max_context < 2 ** 53):          # NaN and infinity fail too (they gave a 1-token budget)
            raise SettingsError(f"max_context must be a finite number >= 0, got {max_context!r:.40}",
                                source="scan", field="max_context")
        if not isinstance(dry_run, bool):
            raise SettingsError(f"dry_run must be True or False, got {dry_run!r:.40}", source="scan",
                                field="dry_run")
        chat_length = len(messages)
        # Only the newest messages any window can reach are read, so a call costs the same
        # for a 50-message and a 50,000-message chat (min activations may widen to the chat).
        need = MAX_SCAN_DEPTH if settings.min_activations > 0 else min(
            max(settings.scan_depth, self._max_entry_depth), MAX_SCAN_DEPTH)
        first = max(0, chat_length - need)
        newest_first = self._message_texts(messages[first:], first)[::-1]
        gsd = global_scan_data or {}
        unknown = [k for k in gsd if k not in SOURCE_NAMES]
        if unknown:
            raise SettingsError(f"unknown global_scan_data key {unknown[0]!r}", source="scan",
                                field="global_scan_data")
        source_texts = tuple(gsd.get(name) or "" for name in SOURCE_NAMES)
        for name, text in zip(SOURCE_NAMES, source_texts):
            if not isinstance(text, str):
                raise SettingsError(f"must be a string, got {type(text).__name__}", source="scan",
                                    field=f"global_scan_data.{name}")
        for i, text in enumerate(injects):
            if not isinstance(text, str):
                raise SettingsError(f"must be a string, got {type(text).__name__}", source="scan",
                                    field=f"injects[{i}]")
        budget = _budget(settings, max_context)
        state = TimedEffects.from_json(timed_effects)     # always a copy: the caller's value is kept
        if dry_run:
            active_sticky: set[str] = set()
            active_cooldown: set[str] = set()
        else:
            def effect_of(key: str, kind: str) -> Any:
                entry = self._by_key[key].entry
                return entry.sticky if kind == "sticky" else entry.cooldown
            active = evaluate(state, chat_length, self._find_by_hash, effect_of)
            active_sticky, active_cooldown = active.sticky, active.cooldown
        forced_keys = {EntryId(w, u).key for w, u in forced}
        # SillyTavern adds an extension prompt to the scan only when it is non-empty.
        run = _Run(self, newest_first, source_texts, [i for i in injects if i], trigger, character, chat_length,
                   budget, active_sticky, active_cooldown, forced_keys, cache)
        if self.slots:
            run.loop()
        activated_slots = run.activated_order
        if not dry_run:
            for s in activated_slots:
                e = s.entry
                if js_truthy(e.sticky) and s.key not in state.sticky:
                    state.sticky[s.key] = EffectRecord(s.hash, chat_length, chat_length + e.sticky, False)
                if js_truthy(e.cooldown) and s.key not in state.cooldown:
                    state.cooldown[s.key] = EffectRecord(s.hash, chat_length, chat_length + e.cooldown, False)
        placement = place_entries([(s.entry, run.contents.get(s.key, s.content)) for s in activated_slots],
                                  authors_note=authors_note, post_process=self.post_process)
        return STResult(
            activated=[s.eid for s in activated_slots], placement=placement, budget=budget,
            budget_overflowed=run.overflow, overflow_alert_shown=run.overflow and settings.overflow_alert,
            timed_effects=state, loops=run.loops, regex_cutoffs=run.regex_cutoffs(),
            _explain=run.finish())

    @staticmethod
    def _message_texts(messages: Sequence[ChatMessage | Mapping[str, Any]], first: int) -> list[tuple[str, str]]:
        out = []
        for i, m in enumerate(messages, first):
            if isinstance(m, ChatMessage):
                out.append((m.name, m.text))
                continue
            if not isinstance(m, Mapping):
                raise LorebookError(f"a message must be an object, got {type(m).__name__}",
                                    source="messages", entry=i)
            text = m.get("mes", m.get("text"))
            name = m.get("name", "")
            if not isinstance(text, str):
                raise LorebookError("message text ('mes' or 'text') must be a string", source="messages",
                                    entry=i, field="mes")
            if not isinstance(name, str):
                raise LorebookError("message name must be a string", source="messages", entry=i, field="name")
            out.append((name, text))
        return out


class _Run:
    """The state of one scan (docs/sillytavern-mode.md#st-loop)."""

    def __init__(self, engine: STEngine, newest_first: list[tuple[str, str]], sources: tuple[str, ...],
                 injects: list[str], trigger: str, character: Character | None, chat_length: int, budget: int,
                 sticky: set[str], cooldown: set[str], forced: set[str], cache: Any) -> None:
        self.e = engine
        s = engine.settings
        if s.include_names:
            msgs = [f"{name}: {text}" for name, text in newest_first]
        else:
            msgs = [text for _, text in newest_first]
        self.regex_budget = RegexBudget(engine.limits.regex_time_per_scan, engine.regex_timeout)
        self.views = [ScanView(cb, msgs, sources, injects, cache=cache, substitute=engine.substitute,
                               joined=True, regex_timeout=engine.regex_timeout, regex_budget=self.regex_budget)
                      for cb in engine.compiled]
        self.trigger = trigger
        self.character = character
        self.L = chat_length
        self.budget = budget
        self.sticky, self.cooldown, self.forced = sticky, cooldown, forced
        self.activated: dict[str, _Slot] = {}
        self.activated_order: list[_Slot] = []
        self.failed: set[str] = set()
        self.contents: dict[str, str] = {}
        self.chunks = 0
        self.budget_text_tokens = 0
        # docs/sillytavern-mode.md#st-loop: the budget text grows at the front; its count is kept from the entries'
        # own counts (the text itself is never built).
        self.budget_text: PrependCount | None = None     # made in loop(): counting starts there
        self.units: dict[str, tuple[str, TextCount]] = {}  # ("content\n", its count) as admission counted it
        self.overflow = False
        self.loops: list[LoopRecord] = []
        self.levels = list(engine._levels)
        self.level = self.levels.pop(0) if self.levels else 0
        self.skew = 0
        self.state = INITIAL
        self.notes: dict[str, Diagnostic] = {}
        self.last_windows: dict[str, Window] = {}
        self.texts_of: list[WindowTexts] = []
        # _walk's candidates of the last loop: (max_depth, recursion chunks, slots)
        self._basis: tuple[int, int, list[_Slot]] | None = None

    # -- gates ---------------------------------------------------------------------------
    def _note(self, slot: _Slot, outcome: str, reason: str, detail: str = "", loop: int | None = None,
              key: str | None = None, window: Window | None = None) -> None:
        d = Diagnostic(slot.eid, outcome, reason, detail, loop, key)
        self.notes[slot.key] = d
        if window is not None:
            self.last_windows[slot.key] = window

    def _window(self, slot: _Slot) -> Window:
        depth = _effective_depth(slot.entry, self.e.settings.scan_depth + self.skew)
        rec = self.chunks if self.state != MIN_ACTIVATIONS else 0
        return Window(depth, slot.sources, rec)

    def _static_gate(self, slot: _Slot) -> tuple[str, str] | None:
        """Gates 1-6 (docs/sillytavern-mode.md#st-gates): the ones that do not depend on the loop."""
        e = slot.entry
        if e.disable:
            return "disabled", "the entry is disabled"
        if e.triggers and self.trigger not in e.triggers:
            return "trigger", f"generation type {self.trigger!r} is not in {list(e.triggers)}"
        is_exclude, names, tags = e.character_filter
        if names:
            included = self.character is not None and self.character.filter_id in names
            if is_exclude == included:
                return "character_filter", ("character is excluded" if is_exclude
                                            else "character is not in the filter's names")
        if tags and self.character is not None:
            ctags = self.character.tags or ()
            hit = any(t in ctags for t in tags)
            if is_exclude == hit:
                return "tag_filter", ("a character tag is excluded" if is_exclude
                                      else "no character tag is in the filter")
        if js_truthy(e.delay) and self.L < e.delay:
            return "delay", f"chat has {self.L} message{'' if self.L == 1 else 's'}, delay is {e.delay}"
        if slot.key in self.cooldown and slot.key not in self.sticky:
            return "cooldown", "on cooldown"
        return None

    def _gate(self, slot: _Slot, loop: int) -> tuple[bool, str, str, str | None, Window | None]:
        """docs/sillytavern-mode.md#st-gates for one entry: (activate, reason, detail, matched key, window)."""
        static = self._static_gate(slot)
        if static is not None:
            return False, static[0], static[1], None, None
        e = slot.entry
        sticky = slot.key in self.sticky
        dur = e.delay_until_recursion
        if dur and not sticky:
            if self.state != RECURSION:
                return False, "delay_until_recursion", f"waits for recursion level {dur:g}", None, None
            if dur > self.level:
                return False, "delay_until_recursion", (f"waits for recursion level {dur:g} "
                                                         f"(current level {self.level:g})"), None, None
        if self.state == RECURSION and self.e.settings.recursive and e.exclude_recursion and not sticky:
            return False, "exclude_recursion", "cannot be activated by recursion", None, None
        if slot.activate:
            return True, "decorator", "@@activate", None, None
        if slot.dont_activate:
            return False, "dont_activate", "@@dont_activate", None, None
        if slot.key in self.forced:
            return True, "forced", "activated by the caller for this scan", None, None
        if e.constant:
            return True, "constant", "constant entry", None, None
        if sticky:
            return True, "sticky", "sticky effect is active", None, None
        if not slot.has_keys:
            return False, "no_keys", "the entry has no primary keys", None, None
        window = self._window(slot)
        m = self.views[slot.book].match_entry(slot.index, window)
        if m.primary is None:
            detail = "no primary key matched"
            if m.timed_out:
                detail += " (" + "; ".join(self.views[slot.book].cut_off_report(m.timed_out)) + ")"
            return False, "no_key_match", detail, None, window
        key = e.key[m.primary]
        if e.selective and e.keysecondary:
            logic = e.selective_logic if e.selective_logic is not None else 0
            sec = m.secondary
            if logic == 0:
                ok, why = any(sec), "AND ANY: no secondary key matched"
            elif logic == 1:
                ok, why = not all(sec), "NOT ALL: every secondary key matched"
            elif logic == 2:
                ok, why = not any(sec), "NOT ANY: a secondary key matched"
            elif logic == 3:
                ok, why = all(sec), "AND ALL: not every secondary key matched"
            else:
                ok, why = False, f"unknown selective logic {logic!r}"
            if not ok:
                return False, "secondary_keys", why, key, window
        return True, "key", f"primary key {key!r} matched", key, window

    # -- the loop ---------------------------------------------------------------------
    def _walk(self, loop: int) -> list[_Slot]:
        e = self.e
        max_depth = min(max(e.settings.scan_depth + self.skew, e._max_entry_depth), MAX_SCAN_DEPTH)
        rec = self.chunks if self.state != MIN_ACTIVATIONS else 0
        todo: list[_Slot] = []
        narrowed = True
        slot_of = e._slot_of
        basis = self._basis
        if basis is not None and basis[0] == max_depth and basis[1] <= rec:
            # The same bounds plus recursion chunks: the candidates are the last loop's that
            # are still open plus the entries the new chunks hit (a loop costs what it adds).
            activated, failed = self.activated, self.failed
            todo = [s for s in basis[2] if s.key not in activated and s.key not in failed]
            if rec > basis[1]:
                for bi, view in enumerate(self.views):
                    todo.extend(slot_of[(bi, i)] for i in view.chunk_candidates(basis[1], rec))
        else:
            for bi, view in enumerate(self.views):
                cands = view.candidates(max_depth, rec)
                if cands is None:          # a view that cannot narrow: walk every entry
                    narrowed = False
                    break
                todo.extend(slot_of[(bi, i)] for i in cands)
        if not narrowed:
            walk: Iterable[_Slot] = e.slots
            self._basis = None
        else:
            extra = set(self.sticky) | self.forced
            todo.extend(e._always)
            todo.extend(e._by_key[k] for k in extra if k in e._by_key)
            walk = sorted(set(todo), key=lambda s: s.gpos)
            self._basis = (max_depth, rec, walk)
        new: list[_Slot] = []
        for slot in walk:
            if slot.key in self.activated or slot.key in self.failed:
                continue
            ok, reason, detail, key, window = self._gate(slot, loop)
            if ok:
                new.append(slot)
                self._note(slot, "activated", reason, detail, loop, key, window)
            else:
                self._note(slot, "not_activated", reason, detail, loop, key, window)
        # Sticky entries first, then global order. SillyTavern activates the caller's forced
        # object in place of the entry; it is not in the global order (indexOf = -1), so it
        # sorts before the other non-sticky entries (docs/sillytavern-mode.md#st-loop step 3).
        forced_now = {s.key for s in new if self.notes[s.key].reason == "forced"}
        new.sort(key=lambda s: (0 if s.key in self.sticky else 1, 0 if s.key in forced_now else 1))
        return new

    def loop(self) -> None:
        e = self.e
        settings = e.settings
        self.budget_text = PrependCount(e._counter())
        loop = 0
        while True:
            if settings.max_recursion_steps and loop >= settings.max_recursion_steps:
                break
            loop += 1
            new = self._walk(loop)
            t0 = self.budget_text_tokens
            pending = self._groups(new, loop)
            admitted = self._admit(pending, t0, loop)
            successful = [s for s in pending if s.key not in self.failed]
            recursable = [s for s in successful if not s.entry.prevent_recursion]
            nxt = NONE
            if settings.recursive and not self.overflow and recursable:
                nxt = RECURSION
            if settings.recursive and not self.overflow and self.state == MIN_ACTIVATIONS and self.chunks:
                nxt = RECURSION
            if nxt == NONE and not self.overflow and settings.min_activations > 0 \
                    and len(self.activated) < settings.min_activations:
                d = settings.scan_depth + self.skew
                mdm = settings.min_activations_depth_max
                if not (mdm > 0 and d > mdm) and not (d > self.L):
                    nxt = MIN_ACTIVATIONS
                    self.skew += 1
            if nxt == NONE and self.levels:
                nxt = RECURSION
                self.level = self.levels.pop(0)
            self.loops.append(LoopRecord(self.state, nxt, tuple(s.eid for s in admitted)))
            if nxt == NONE:
                break
            text = "\n".join(self.contents.get(s.key, s.content) for s in recursable)
            if text:
                # Tell a book's view which of its entries the chunk joins, so it can reuse the
                # contents' compile-time hits instead of scanning the chunk (it checks the join).
                owners = {s.book for s in recursable}
                for bi, view in enumerate(self.views):
                    view.add_recursion_chunk(text, entries=[s.index for s in recursable] if owners == {bi} else None)
                self.chunks += 1
            if e.compat.budget_accounting == "recursion_text":
                counted = recursable  # docs/sillytavern-mode.md#st-budget: preventRecursion contents are free in later loops
            else:                     # docs/improved-profile.md#budget-accounting: every admitted content counts against the budget
                counted = admitted
            # budget text = "\n".join(counted) + "\n" + budget text, when that join is not "".
            # Once the budget has overflowed nothing reads its count again.
            if not self.overflow and counted and (len(counted) > 1 or self.contents.get(counted[0].key,
                                                                                        counted[0].content)):
                done = self.units
                units = [done.get(s.key) or e._unit(s, self.contents.get(s.key, s.content), self.budget)
                         for s in counted]
                assert self.budget_text is not None
                self.budget_text_tokens = self.budget_text.prepend(units, limit=self.budget)
            self.state = nxt

    # -- groups (docs/sillytavern-mode.md#st-groups) ------------------------------------------------------------------
    def _groups(self, new: list[_Slot], loop: int) -> list[_Slot]:
        quirks = self.e.compat.group_bookkeeping == "sillytavern"

        def on_remove(removed: _Slot, asked: _Slot, reason: str) -> None:
            if removed is asked:
                self._note(removed, "not_activated", "group", reason, loop)
            else:
                self._note(removed, "not_activated", "group",
                           f"removed in place of {asked.key!r}, which a group had already removed "
                           "(SillyTavern quirk)", loop)

        pending = PendingList(new, quirk=quirks, on_remove=on_remove)
        groups: dict[str, list[_Slot]] = {}
        for s in new:
            for name in s.groups:
                groups.setdefault(name, []).append(s)
        if not groups:
            return pending.items
        names = js_key_order(list(groups))
        has_sticky: set[str] = set()
        # 8.2 timed-effect filter
        for name in names:
            members = groups[name]
            if any(m.key in self.sticky for m in members):
                has_sticky.add(name)
                for m in members:
                    if m.key not in self.sticky:
                        pending.remove(m, f"group {name!r} has a sticky member")
            for m in members:
                if m.key in self.cooldown:
                    pending.remove(m, f"on cooldown (group {name!r})")
                elif js_truthy(m.entry.delay) and self.L < m.entry.delay:
                    pending.remove(m, f"delayed (group {name!r})")
        # 8.3 group scoring
        g_scoring = self.e.settings.use_group_scoring
        for name in names:
            members = groups[name]
            if name in has_sticky:
                continue
            if not g_scoring and not any(m.entry.use_group_scoring for m in members):
                continue
            scores = [self._score(m) for m in members]
            best = max(scores) if scores else 0
            kept = []
            for m, sc in zip(members, scores):
                flag = m.entry.use_group_scoring if m.entry.use_group_scoring is not None else g_scoring
                if flag and sc < best:
                    pending.remove(m, f"group {name!r}: score {sc} is below the best score {best}")
                else:
                    kept.append(m)
            groups[name] = kept
        # 8.4 winners
        for name in names:
            members = groups[name]
            if name in has_sticky:
                continue
            if self._group_already_activated(name):
                for m in members:
                    pending.remove(m, f"group {name!r} already has an entry activated in an earlier loop")
                continue
            if len(members) < 2:
                continue
            prio = [m for m in members if m.entry.group_override]
            if prio:
                top = sorted(prio, key=lambda m: -m.entry.order if not math.isnan(m.entry.order) else 0.0)[0]
                for m in members:
                    if m is not top:
                        pending.remove(m, f"group {name!r}: {top.key!r} is prioritized")
                continue
            total = sum(m.entry.group_weight for m in members)
            roll = self.e.random() * total
            acc = 0.0
            winner: _Slot | None = None
            for m in members:
                acc += m.entry.group_weight
                if roll <= acc:
                    winner = m
                    break
            if winner is None:
                continue
            for m in members:
                if m is not winner:
                    pending.remove(m, f"group {name!r}: lost the weighted roll to {winner.key!r}")
        return pending.items

    def _group_already_activated(self, name: str) -> bool:
        if self.e.compat.group_bookkeeping == "sillytavern":
            return any(s.entry.group == name for s in self.activated_order)
        return any(name in s.groups for s in self.activated_order)

    def _score(self, slot: _Slot) -> int:
        e = slot.entry
        if not e.key:
            return 0
        p, sec = self.views[slot.book].score_entry(slot.index, self._window(slot))
        if e.keysecondary:
            logic = e.selective_logic
            if logic == 0:
                return p + sec
            if logic == 3:
                return p + sec if sec == len(e.keysecondary) else p
        return p

    # -- probability and budget (docs/sillytavern-mode.md#st-budget) ----------------------------------------------------
    def _admit(self, pending: list[_Slot], t0: int, loop: int) -> list[_Slot]:
        e = self.e
        k = sum(1 for s in pending if s.entry.ignore_budget)
        # docs/sillytavern-mode.md#st-budget counts the concatenation buf = content + "\n" + content + "\n" ...; its
        # count is built from the entries' cached counts (tokens.ConcatCount). Counting stops
        # once the budget is certainly reached; after an overflow nothing is counted.
        running = ConcatCount(e._counter())
        remaining = self.budget - t0
        owner, counts = e._unit_counts      # the usual case read inline: a counted, unchanged content
        if owner is not running.counter:
            counts = {}
        units = self.units
        admitted: list[_Slot] = []
        for i, s in enumerate(pending):
            ent = s.entry
            if ent.ignore_budget:
                k -= 1
            if self.overflow and not ent.ignore_budget:
                if k > 0:
                    self._note(s, "not_activated", "budget", "the budget was already used up", loop)
                    continue
                for rest in pending[i:]:
                    if not rest.entry.ignore_budget or rest is s:
                        self._note(rest, "not_activated", "budget", "the budget was already used up", loop)
                break
            if ent.use_probability and ent.probability != 100 and s.key not in self.sticky:
                roll = e.random()
                prob = ent.probability
                if not (isinstance(prob, (int, float)) and roll * 100 <= prob):
                    self.failed.add(s.key)
                    self._note(s, "not_activated", "probability",
                               f"roll {roll * 100:.4g} is above probability {prob!r}", loop)
                    continue
            content = s.content
            if e.substitute is not None:
                content = e.substitute(content)
                self.contents[s.key] = content
            if not self.overflow:
                found = counts.get(s.gpos)
                if found is not None and found[0] is content and found[2].exact:
                    unit, tc = found[1], found[2]
                else:
                    unit, tc = e._unit(s, content, remaining - running.total)
                units[s.key] = (unit, tc)
                total = t0 + running.append(unit, tc, limit=remaining)
                if not ent.ignore_budget and total >= self.budget:
                    self.overflow = True
                    exact = running.exact and (self.budget_text is None or self.budget_text.exact)
                    self._note(s, "not_activated", "budget",
                               f"{'' if exact else 'at least '}{total} tokens would reach the budget "
                               f"of {self.budget}", loop)
                    continue
            self.activated[s.key] = s
            self.activated_order.append(s)
            admitted.append(s)
        return admitted

    # -- explanations ---------------------------------------------------------------------
    def finish(self) -> Callable[[], dict[EntryId, Diagnostic]]:
        """End the turn: keep only what explanations need (the texts of the windows where
        entries fired, not the views or the caller's cache) and return the explainer."""
        self.texts_of = [view.snapshot() for view in self.views]
        self.views = []
        return self.explain

    def explain(self) -> dict[EntryId, Diagnostic]:
        out: dict[EntryId, Diagnostic] = {}
        for slot in self.e.slots:
            d = self.notes.get(slot.key)
            if d is None:
                static = self._static_gate(slot)
                if static is not None:
                    d = Diagnostic(slot.eid, "not_activated", static[0], static[1])
                elif not slot.has_keys:
                    d = Diagnostic(slot.eid, "not_activated", "no_keys", "the entry has no primary keys")
                else:
                    d = Diagnostic(slot.eid, "not_activated", "no_key_match",
                                   "no primary key matched")
            elif d.outcome == "activated" and slot.key not in self.activated:
                d = Diagnostic(slot.eid, "not_activated", "not_reached", "matched, but the scan ended first",
                               d.loop, d.key)
            if d.key is not None and d.outcome == "activated":
                window = self.last_windows.get(slot.key)
                if window is not None:
                    d.where = self._locate(slot, d.key, window)
            out[slot.eid] = d
        return out

    def _locate(self, slot: _Slot, key: str, window: Window) -> str | None:
        e = slot.entry
        cs = e.case_sensitive if e.case_sensitive is not None else self.e.match_options.case_sensitive
        ww = e.match_whole_words if e.match_whole_words is not None else self.e.match_options.match_whole_words
        k = js_trim(key)
        parsed = parse_regex_key(k)
        for label, text in self.texts_of[slot.book].labelled_texts(window):
            if parsed is not None:
                try:
                    if compile_js_regex(*parsed).search(text, timeout=self.e.regex_timeout):
                        return label
                except RegexTimeout:
                    return None
            elif match_plain_key(text, k, case_sensitive=cs, whole_words=ww, options=self.e.match_options):
                return label
        return None   # e.g. a regex that only matches across two texts

    def regex_cutoffs(self) -> tuple[str, ...]:
        """Every regex key cut off in this scan, one report line each (all books)."""
        if not self.regex_budget.cut:
            return ()
        lines: list[str] = []
        for view in self.views:
            lines.extend(view.cut_off_report(list(view.cut_keys())))
        return tuple(dict.fromkeys(lines))
