"""SillyTavern mode's engine (docs/sillytavern-mode.md): set-up once per set of books and settings,
then one :meth:`STEngine.scan` per generation.

The set-up compiles the books, fixes SillyTavern's global entry order and precomputes the
:class:`~lorescan.st.tables.Tables` every turn reads. A scan validates its inputs, ages the
timed effects (:mod:`.timed`), runs the loops (:mod:`.activate`, which calls :mod:`.groups`
and :mod:`.budget`), records new timed effects, places the contents (:mod:`.place`) and
returns an :class:`~lorescan.st.result.STResult` whose explanation (:mod:`.explain`) reads
only data the turn kept.
"""
from __future__ import annotations

import random as _random
from array import array
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import LorebookError, SettingsError
from ..layout import Layout
from ..limits import DEFAULT_LIMITS, Limits
from ..macros import MacroTable
from .compiled import (FLAG_ACTIVATE, FLAG_ACTIVATE_STRICT, FLAG_CONSTANT, FLAG_DONT_ACTIVATE,
                       FLAG_DONT_ACTIVATE_STRICT, FLAG_TIMED, CompiledBook, compile_book)
from ..match.cache import ChatScan
from ..match.scanwork import ScanWork
from ..match.regexscope import RegexBudget
from ..match.view import MAX_SCAN_DEPTH, SOURCE_NAMES, ScanView
from ..model import Entry, Lorebook, js_truthy
from ..semantic.index import SemanticIndex, VectorSettings
from ..semantic.store import is_candidate
from ..tokens import shared_counter
from .activate import AlwaysGates, run_loops
from .budget import turn_budget
from .explain import explain_turn, regex_cutoffs
from .place import place_entries, place_keyed
from .result import BookSource, Character, ChatMessage, EntryId, STResult
from .settings import GENERATION_TRIGGERS, Compat, STSettings
from .tables import EntryInfo, EntryTable, HashIndex, KeyIndex, Tables, UnitCounts
from .timed import EffectRecord, TimedEffects, evaluate
from .turn import Turn
from .memo import FULL, PLAIN, CountingRandom, attempted, attempts, record, replay, turn_key

__all__ = ["STEngine"]

_NO_SOURCE_TEXTS = ("",) * len(SOURCE_NAMES)     # no global_scan_data: every source empty


def _default_random() -> float:
    return _random.random()


def _flagged(entry_at: Sequence[Sequence[int]], compiled: Sequence[CompiledBook], bits: int) -> list[int]:
    """The global positions of the entries with any of the compile-time flags ``bits``, ascending."""
    return sorted(entry_at[bi][ei] for bi, cb in enumerate(compiled)
                  for ei in np.flatnonzero(np.asarray(cb.entry_flags) & bits).tolist())


def _restore_engine(sources, settings, compat, count_tokens, substitute, random, post_process, regex_timeout,
                    limits=DEFAULT_LIMITS, semantic=None):
    return STEngine(sources, settings, compat=compat, count_tokens=count_tokens, substitute=substitute,
                    random=random, post_process=post_process, regex_timeout=regex_timeout, limits=limits,
                    semantic=semantic)


class STEngine:
    """SillyTavern's World Info engine, exact (docs/sillytavern-mode.md), compiled once per book set.

    Threads: one engine may be shared by any number of threads scanning at once. The
    constructor builds everything a scan reads; what a scan builds lazily (entry records,
    token counts, key tables) is built under a lock or published whole, and a scan's own
    state lives in the scan, so concurrent scans give what sequential ones give
    (tests/st/test_st_sharing.py). The hooks given here are defaults: :meth:`scan` takes
    ``substitute``, ``random`` and ``post_process`` per call (a chat's macros, a request's
    seed) without touching the engine. Hooks run in the scanning thread: a ``random`` shared
    by threads hands its values out in whatever order the threads ask, so for repeatable
    rolls give each scan (or each task of :meth:`ascan`) its own generator.
    ``copy.copy`` is cheap (the copy shares everything computed here).

    Args:
        books: :class:`BookSource` items, ``(book, roles)`` pairs, or bare books (a
            :class:`~lorescan.model.Lorebook` or :class:`~lorescan.st.compiled.CompiledBook`,
            taken as ``global``), in selection order; books are de-duplicated by name across
            roles as SillyTavern does.
        settings: an :class:`STSettings` or a mapping of its names.
        compat: ``"sillytavern"`` reproduces every quirk (the conformance profile);
            ``"improved"`` switches on the fixes of docs/improved-profile.md; a
            :class:`~lorescan.st.settings.Compat` sets them one by one.
        count_tokens: ``text -> int`` (default: the process-wide tiktoken cl100k counter, offline,
            loaded on the first count; docs/sillytavern-mode.md#st-inputs).
        substitute: ``text -> text`` for macros (the default of :meth:`scan`'s).
        random: ``() -> float`` in [0, 1) (the default of :meth:`scan`'s).
        post_process: ``(content, position, depth) -> text`` (the default of :meth:`scan`'s).
        regex_timeout: the nominal seconds one regex evaluation may cost (``JSRegex.cost``, a
            function of the pattern and the text, never a clock; None: no per-evaluation cap).
        limits: ``regex_time_per_scan`` bounds all regex time of one scan (cut-off keys are
            listed in ``STResult.regex_cutoffs``); book and key size limits.
        semantic: Vector Storage's world-info matching (docs/semantic.md#sem-engine): entries
            marked ``vectorized`` activate when the newest messages are similar enough to their
            content. Ignored in the SillyTavern profile (``compat="sillytavern"``), which stays exact.
        _view: for tests only: the class each scan reads the book's key matches through, in place
            of :class:`~lorescan.match.view.ScanView` (the differential tests pass the plain
            reference matcher, tests/support/reference_matcher.py, to get an oracle engine).

    Raises:
        SettingsError: bad settings or roles, or a compiled book built for other match options.
        LorebookError: a book over a limit.
        RegexKeyError: a regex key past ``max_regex_length`` or ``max_regex_nesting``.
    """

    def __init__(self, books: Sequence[BookSource | Lorebook | CompiledBook
                                       | tuple[Lorebook | CompiledBook, Sequence[str]]],
                 settings: STSettings | Mapping[str, Any] = STSettings(), *, compat: Compat | str = "sillytavern",
                 count_tokens: Callable[[str], int] | None = None,
                 substitute: Callable[[str], str] | None = None,
                 random: Callable[[], float] | None = None,
                 post_process: Callable[[str, float | None, float | None], str] | None = None,
                 regex_timeout: float | None = 0.25, limits: Limits = DEFAULT_LIMITS,
                 semantic: VectorSettings | None = None, _view: type[ScanView] | None = None) -> None:
        if not isinstance(limits, Limits):
            raise SettingsError(f"limits must be a Limits, got {type(limits).__name__}", source="STEngine",
                                field="limits")
        self.limits = limits
        if not isinstance(settings, STSettings):
            settings = STSettings.from_mapping(settings)
        self.compat = Compat.of(compat)
        self.settings = settings
        # Resolved here, not on first use: a scan only reads the engine (tiktoken caches the encoding).
        self.count_tokens: Callable[[str], int] = count_tokens if count_tokens is not None else shared_counter()
        self.substitute = substitute
        self.random = random if random is not None else _default_random
        self.post_process = post_process
        self.regex_timeout = regex_timeout
        self._view = _view
        self.match_options = self.compat.match_options(case_sensitive=settings.case_sensitive,
                                                       match_whole_words=settings.match_whole_words)
        sources = [self._source(b, i) for i, b in enumerate(books)]
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
            if len(bis) == 1:                  # one book (a platform's usual request): its own order
                orders = self.compiled[bis[0]].entry_order
                perm = np.argsort(np.where(np.isnan(orders), 0.0, -orders), kind="stable")
                return np.full(len(perm), bis[0], np.int64), perm
            orders = np.concatenate([self.compiled[bi].entry_order for bi in bis])
            books = np.concatenate([np.full(len(self.compiled[bi].entry_order), bi, np.int64) for bi in bis])
            index = np.concatenate([np.arange(len(self.compiled[bi].entry_order)) for bi in bis])
            perm = np.argsort(np.where(np.isnan(orders), 0.0, -orders), kind="stable")
            return books[perm], index[perm]

        groups = [ordered(chat), ordered(persona)]
        g_e, c_e = ordered(glob), ordered(char)
        strategy = settings.insertion_strategy
        if strategy == "character_first":
            groups += [c_e, g_e]
        elif strategy == "global_first":
            groups += [g_e, c_e]
        else:                          # "evenly": one order over both
            groups.append(ordered(glob + char))
        order_book = np.concatenate([g[0] for g in groups])
        order_index = np.concatenate([g[1] for g in groups])
        order_book_list: list[int] = order_book.tolist()
        order_index_list: list[int] = order_index.tolist()
        self._sources = [BookSource(self.compiled[book_index[self._name(s)]], s.roles) for s in sources
                         if self._name(s) in book_index]
        strict = self.compat.decorators == "strict_lines"
        compiled, worlds = tuple(self.compiled), tuple(self.world_names)
        # Entry records are built when a scan first needs them (a loaded book has no Entry objects yet).
        entries = EntryTable(compiled, worlds, order_book_list, order_index_list, strict)
        gpos = np.arange(len(order_book))
        entry_at: list[array[int]] = []
        for bi, cb in enumerate(compiled):
            where = np.zeros(len(cb.entry_order), np.int64)
            if len(compiled) == 1:
                where[order_index] = gpos
            else:
                mask = order_book == bi
                where[order_index[mask]] = gpos[mask]
            entry_at.append(array("q", where.tobytes()))    # machine integers (Tables keeps them as they are)
        # Entries that can activate without a key hit must always be walked (docs/sillytavern-mode.md#st-gates, gates 10-14).
        timed = _flagged(entry_at, compiled, FLAG_TIMED)
        always_bits = FLAG_CONSTANT | ((FLAG_ACTIVATE_STRICT | FLAG_DONT_ACTIVATE_STRICT) if strict
                                       else (FLAG_ACTIVATE | FLAG_DONT_ACTIVATE))
        self.tables = Tables(
            settings=settings, compat=self.compat, match_options=self.match_options, limits=limits,
            regex_timeout=regex_timeout, strict=strict, compiled=compiled, worlds=worlds, entries=entries,
            entry_at=tuple(entry_at),
            by_key=KeyIndex(entries, worlds, compiled, order_book_list, order_index_list, entry_at),
            by_hash=HashIndex(entries, timed),
            always=tuple(entries.many(_flagged(entry_at, compiled, always_bits))),
            levels=tuple(sorted({lv for cb in compiled for lv in cb.levels})),
            max_entry_depth=max((cb.max_entry_depth for cb in compiled), default=0),
            units=UnitCounts(entries))
        self._gates = AlwaysGates(self.tables.always)
        # the global positions of the entries that start timed effects (FLAG_TIMED: sticky or
        # cooldown set; their records are built when a turn reaches them)
        self._timed_gpos = frozenset(timed)
        if semantic is not None and not isinstance(semantic, VectorSettings):
            raise SettingsError(f"semantic must be a VectorSettings, got {type(semantic).__name__}",
                                source="STEngine", field="semantic")
        self.semantic = semantic
        self._semantic = None if semantic is None or self.compat == Compat.sillytavern() else \
            self._semantic_index(semantic)
        # docs/improved-profile.md#cache-stable: the SillyTavern profile stays exact and ignores it
        self._stable = settings.stable_placement and self.compat != Compat.sillytavern()

    def _semantic_index(self, semantic: VectorSettings) -> SemanticIndex | None:
        """The candidates of docs/semantic.md#sem-engine (None when there are none: no model is loaded)."""
        picked = [info for info in self.tables.entries if is_candidate(info.entry, info.content, semantic.enabled_for_all)]
        if not picked:
            return None
        return SemanticIndex(semantic, [i.world_uid for i in picked], [i.content for i in picked],
                             matrix=self._stored_embeddings(semantic, picked))

    def _stored_embeddings(self, semantic: VectorSettings, picked: list[EntryInfo]) -> np.ndarray | None:
        """The candidates' rows from compiled books made by ``semantic.store.embed_book`` with this
        model and these candidates (None: compute them)."""
        model = semantic.model().name
        rows: dict[tuple[int, int], np.ndarray] = {}
        for bi, cb in enumerate(self.tables.compiled):
            stored = cb.embeddings
            if stored is None or stored[0] != model:
                return None
            rows.update(((bi, int(ei)), stored[2][r]) for r, ei in enumerate(stored[1]))
        if len(rows) != len(picked) or any((i.book, i.index) not in rows for i in picked):
            return None
        return np.stack([rows[(i.book, i.index)] for i in picked]).astype(np.float32)

    def __copy__(self) -> STEngine:
        # Everything the constructor computed (tables, gates, entry records and their hashes,
        # token counts) is shared, never rebuilt: the copy differs only in the hooks a caller
        # then sets on it. (__reduce__ alone would make copy.copy rebuild the engine.)
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def __reduce__(self):
        # Rebuilt by the constructor from the compiled books (which pickle in their compact
        # form); per-engine caches start empty.
        return (_restore_engine, (self._sources, self.settings, self.compat, self.count_tokens, self.substitute,
                                  self.random, self.post_process, self.regex_timeout, self.limits, self.semantic))

    # -- set-up ------------------------------------------------------------------------
    @staticmethod
    def _source(item: Any, i: int) -> BookSource:
        """One item of ``books``: a BookSource, a ``(book, roles)`` pair, or a bare book (global)."""
        if isinstance(item, BookSource):
            return item
        if isinstance(item, (Lorebook, CompiledBook)):
            return BookSource(item, ("global",))
        if isinstance(item, (tuple, list)) and len(item) == 2:
            try:
                return BookSource(item[0], item[1])
            except SettingsError as exc:
                raise SettingsError(exc.problem, source="books", entry=i, field="roles") from exc
        raise SettingsError(f"a book must be a Lorebook, a CompiledBook, a BookSource or a (book, roles) pair, "
                            f"got {type(item).__name__}", source="books", entry=i)

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

    def _entry_of(self, eid: EntryId) -> Any:
        return self.tables.by_key[EntryId(*eid).key].entry

    def tokens(self, text: str) -> int:
        """Returns: ``text``'s length in tokens under this engine's counter."""
        return self.count_tokens(text)

    def entries(self) -> dict[EntryId, Entry]:
        """Every entry of the engine's books by id, in global order (the order of
        :attr:`STResult.diagnostics`), so a tool needs none of the engine's tables.

        A book loaded from ``.lsc`` builds its entries on first use: this builds them all.
        """
        return {s.eid: s.entry for s in self.tables.entries}

    # -- one generation --------------------------------------------------------------
    def scan(self, messages: Sequence[ChatMessage | Mapping[str, Any]], *, max_context: int,
             character: Character | None = None, global_scan_data: Mapping[str, str] | None = None,
             injects: Sequence[str] = (), authors_note: str | None = None, trigger: str = "normal",
             dry_run: bool = False, timed_effects: TimedEffects | Mapping[str, Any] | None = None,
             forced: Iterable[tuple[str, int | str]] = (), cache: ChatScan | None = None,
             substitute: Callable[[str], str] | None = None, random: Callable[[], float] | None = None,
             post_process: Callable[[str, float | None, float | None], str] | None = None,
             deadline: float | None = None,
             layout: Layout | Mapping[str, Any] | None = None) -> STResult:
        """Run one generation.

        Args:
            messages: the whole chat, oldest first (``ChatMessage`` or mappings with ``name``
                and ``mes``/``text``).
            max_context: the model's context size in tokens (the budget is a share of it).
            character: the selected character (for character and tag filters).
            global_scan_data: texts entries may opt in to (keys of
                ``lorescan.match.view.SOURCE_NAMES``).
            injects: scanned extension prompts in order (Author's Note first when it is
                scanned); empty ones are skipped, as SillyTavern does.
            authors_note: the note's text when it is inserted this turn (None: AN entries are dropped).
            trigger: the generation type (any unknown one counts as ``"normal"``).
            dry_run: evaluate no timed effects and record none.
            timed_effects: the state returned by the previous turn (not changed).
            forced: (book name, uid) pairs activated for this scan only.
            cache: a caller-owned :class:`~lorescan.match.cache.ChatScan` so unchanged messages are not
                scanned again (the type :meth:`SlotEngine.run` takes).
            substitute, random, post_process: this call's hooks (a chat's macros, a seeded
                source); None: the engine's. Given here they give exactly what the same
                hooks given to the constructor give, and nothing is copied or recomputed.
            deadline: a ``time.monotonic()`` value; key matching checks it every 65,536 key hits
                of a text (None: no deadline). It never changes the answer, only whether there is one.
            layout: the ``layout`` the previous turn returned (``{}`` for the first turn of a
                chat whose stability is wanted; docs/improved-profile.md#cache-stable): with
                ``stable_placement`` on (improved profile) entries keep their place in it, and
                ``STResult.stability`` measures this turn against it either way.

        Returns:
            The turn's :class:`STResult`.

        Raises:
            SettingsError: a malformed message (as :meth:`SlotEngine.run` raises for one), a bad
                ``max_context``, ``trigger``, ``dry_run``, ``cache``, ``global_scan_data``, inject or hook.
            LorebookError: a malformed timed-effects record or layout.
            ScanDeadlineExceeded: ``deadline`` passed during the scan.
        """
        settings = self.settings
        substitute = self.substitute if substitute is None else substitute
        random = self.random if random is None else random
        post_process = self.post_process if post_process is None else post_process
        for name, hook in (("substitute", substitute), ("random", random), ("post_process", post_process)):
            if hook is not None and not callable(hook):
                raise SettingsError(f"{name} must be callable, got {type(hook).__name__}", source="scan",
                                    field=name)
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
        if cache is not None and not isinstance(cache, ChatScan):
            raise SettingsError(f"cache must be a ChatScan (or None), got {type(cache).__name__}", source="scan",
                                field="cache")
        chat_length = len(messages)
        # Only the newest messages any window can reach are read, so a call costs the same
        # for a 50-message and a 50,000-message chat (min activations may widen to the chat).
        need = MAX_SCAN_DEPTH if settings.min_activations > 0 else min(
            max(settings.scan_depth, self.tables.max_entry_depth), MAX_SCAN_DEPTH)
        first = max(0, chat_length - need)
        newest_first = self._message_texts(messages[first:], first)[::-1]
        gsd = global_scan_data or {}
        unknown = [k for k in gsd if k not in SOURCE_NAMES]
        if unknown:
            raise SettingsError(f"unknown global_scan_data key {unknown[0]!r}", source="scan",
                                field="global_scan_data")
        source_texts = tuple(gsd.get(name) or "" for name in SOURCE_NAMES) if gsd else _NO_SOURCE_TEXTS
        for name, text in zip(SOURCE_NAMES, source_texts) if gsd else ():
            if not isinstance(text, str):
                raise SettingsError(f"must be a string, got {type(text).__name__}", source="scan",
                                    field=f"global_scan_data.{name}")
        for i, text in enumerate(injects):
            if not isinstance(text, str):
                raise SettingsError(f"must be a string, got {type(text).__name__}", source="scan",
                                    field=f"injects[{i}]")
        budget = turn_budget(settings, max_context)
        tables = self.tables
        previous = None if layout is None else Layout.from_json(layout)
        state = TimedEffects.from_json(timed_effects)     # always a copy: the caller's value is kept
        if dry_run:
            active_sticky: set[str] = set()
            active_cooldown: set[str] = set()
        else:
            active = evaluate(state, chat_length, tables.by_hash)
            active_sticky, active_cooldown = active.sticky, active.cooldown
        forced_keys = {EntryId(w, u).key for w, u in forced}
        semantic_hits: dict[str, str] = {}
        if self._semantic is not None and messages:
            index = self._semantic
            query = self._message_texts(messages[-index.settings.query:], max(0, chat_length - index.settings.query))
            threshold = index.settings.score_threshold
            semantic_hits = {k: hit.detail(threshold) for k, hit in index.select([t for _, t in query][::-1]).items()}
        if settings.include_names and cache is not None:
            msgs = cache.named_texts(newest_first)   # the same strings as last turn: their hashes are known
        elif settings.include_names:
            msgs = [f"{name}: {text}" for name, text in newest_first]
        else:
            msgs = [text for _, text in newest_first]
        regex_budget = RegexBudget(self.limits.regex_time_per_scan, self.regex_timeout)
        # SillyTavern adds an extension prompt to the scan only when it is non-empty.
        scanned_injects = [i for i in injects if i]
        fuzzy_work = ScanWork(self.limits, deadline)
        # the module's ScanView looked up per scan unless a view was given (tests and benchmarks swap it)
        view = ScanView if self._view is None else self._view
        views = [view(cb.keys, msgs, source_texts, scanned_injects, cache=cache, substitute=substitute,
                          joined=True, regex_timeout=self.regex_timeout, regex_budget=regex_budget,
                          oldest_index=first, content_of=cb.content_of, uid_of=cb.uids.__getitem__,
                          limits=self.limits, fuzzy_work=fuzzy_work)
                 for cb in tables.compiled]
        turn = Turn(tables, self._gates, views, regex_budget, random=random, substitute=substitute,
                    counter=self.count_tokens, trigger=trigger, character=character, chat_length=chat_length,
                    budget=budget, sticky=active_sticky, cooldown=active_cooldown, forced=forced_keys,
                    semantic=semantic_hits)
        if tables.entries:
            # a steady turn of a chat may replay its last turn's loops (st/memo.py)
            # a macro table substitutes as its table says (a pure function of it): part of the key;
            # any other hook may read state of its own, so its turns are never replayed
            hook_key = () if substitute is None else \
                substitute.replay_key() if type(substitute) is MacroTable else None
            # a chat whose replays keep missing backs off for a while (memo.attempts: speed only;
            # a plain turn builds no key)
            mode = attempts(cache, tables) if cache is not None and hook_key is not None \
                and self._view is None and settings.min_activations <= 0 else PLAIN
            key = turn_key(self.count_tokens, budget, trigger, character, source_texts, scanned_injects,
                           active_sticky, active_cooldown, forced_keys, semantic_hits,
                           hook_key if hook_key is not None else ()) \
                if mode != PLAIN else None
            if key is None:
                run_loops(turn)
            else:
                done = False
                drawn: list[float] = []
                if mode == FULL:
                    done, drawn = replay(turn, cache, key)     # type: ignore[arg-type]
                    attempted(cache, tables, done)             # type: ignore[arg-type]
                if not done:
                    counting = turn.random = CountingRandom(random, drawn)
                    turn.rolls = []
                    run_loops(turn)
                    record(turn, cache, key, counting)     # type: ignore[arg-type]
        activated = turn.activated_order
        if not dry_run and self._timed_gpos:
            timed_gpos = self._timed_gpos
            for s in activated:
                if s.gpos not in timed_gpos:
                    continue
                e = s.entry
                if e.sticky and js_truthy(e.sticky) and s.world_uid not in state.sticky:
                    state.sticky[s.world_uid] = EffectRecord(s.hash, chat_length, chat_length + e.sticky, False)
                if e.cooldown and js_truthy(e.cooldown) and s.world_uid not in state.cooldown:
                    state.cooldown[s.world_uid] = EffectRecord(s.hash, chat_length, chat_length + e.cooldown, False)
        pairs = [(s.entry, turn.contents.get(s.world_uid, s.content)) for s in activated]
        new_layout = stability = None
        if previous is None and not self._stable:
            placement = place_entries(pairs, authors_note=authors_note, post_process=post_process)
        else:
            arrange = previous.arrange if self._stable and previous is not None else None
            placement, placed = place_keyed(pairs, [s.world_uid for s in activated], authors_note=authors_note,
                                            post_process=post_process, arrange=arrange)
            new_layout = Layout.of(placed)
            stability = None if previous is None else previous.stability(placed)
        cutoffs = regex_cutoffs(turn)
        explanation = explain_turn(turn)
        return STResult(
            activated=[s.eid for s in activated], placement=placement, budget=budget,
            budget_overflowed=turn.overflow, overflow_alert_shown=turn.overflow and settings.overflow_alert,
            timed_effects=state, loops=turn.loops, regex_cutoffs=cutoffs,
            fuzzy_cutoffs=(fuzzy_work.describe(),) if fuzzy_work.cut else (),
            key_hit_cutoffs=(fuzzy_work.describe_key_cut(),) if fuzzy_work.key_cut else (),
            layout=new_layout, stability=stability,
            _explain=explanation, _decided=explanation.decisions, _entry=self._entry_of)

    async def ascan(self, messages: Sequence[ChatMessage | Mapping[str, Any]], **kwargs: Any) -> STResult:
        """:meth:`scan` for an asyncio application: the scan runs in a worker thread
        (``asyncio.to_thread``), so the event loop keeps serving while it runs. Same
        arguments, result and errors as :meth:`scan`; concurrent calls are safe (see the
        class docstring on threads)."""
        import asyncio      # stdlib; only async callers pay for it
        return await asyncio.to_thread(self.scan, messages, **kwargs)

    @staticmethod
    def _message_texts(messages: Sequence[ChatMessage | Mapping[str, Any]], first: int) -> list[tuple[str, str]]:
        out = []
        for i, m in enumerate(messages, first):
            if isinstance(m, ChatMessage):
                out.append((m.name, m.text))
                continue
            if not isinstance(m, Mapping):
                raise SettingsError(f"a message must be an object, got {type(m).__name__}",
                                    source="messages", entry=i)
            text = m.get("mes", m.get("text"))
            name = m.get("name", "")
            if not isinstance(text, str):
                raise SettingsError("message text ('mes' or 'text') must be a string", source="messages",
                                    entry=i, field="mes")
            if not isinstance(name, str):
                raise SettingsError("message name must be a string", source="messages", entry=i, field="name")
            out.append((name, text))
        return out


