"""The three modes' turns of a ``lorescan serve`` worker: ``/v1/st/scan``, ``/v1/slot/run`` and
``/v1/janitor/run``, each a request model in, the answer's JSON bytes out, run on the engine thread
(:class:`Runtime` is :class:`~lorescan.serve.runtime.WorkerState` plus these handlers).

Per-request data (timed effects, slot state, messages, macros, the seed) lives only in the
request: the hooks are inputs of one scan, and a cached engine is shared as it is.
"""
from __future__ import annotations

import logging
import random as _random
from dataclasses import asdict
from typing import Any, Callable, Sequence, overload

import msgspec

from ..errors import LorebookError
from ..macros import macro_table
from ..match.lsc import CompiledFormError
from ..match.options import MatchOptions
from ..slot import BookSettings, SlotBook, SlotEngine
from ..st import BookSource, Character, ChatMessage, Compat, STEngine, STSettings
from ..st.result import message_namer
from . import models as m
from .decoding import HTTPError
from .runtime import DEADLINE, SETTINGS_CACHE, WorkerState
from .store import BookNotFound

__all__ = ["Runtime", "input_error", "substitute_hook", "MACRO_CACHE"]

log = logging.getLogger("lorescan.serve")

MACRO_CACHE = 256           # distinct macro tables kept compiled (oldest dropped first)
MACRO_CACHE_CHARS = 4096    # only small tables are kept (a chat's names); a big one is built per request


_REQUEST_FIELDS = ("settings", "timed_effects", "messages", "state", "books", "global_scan_data")


def input_error(exc: LorebookError, prefix: str = "$") -> HTTPError:
    """A LorebookError about the request's data (settings, state, messages) as a 422 with a path;
    a stored book's compiled file found damaged at a section's first read (a CompiledFormError
    during a scan) as the documented 409, without the server's paths."""
    if isinstance(exc, CompiledFormError):
        log.warning("a stored book's compiled file is damaged: %s", exc)
        return HTTPError(409, f"a stored book is damaged ({exc.problem}); upload it again to repair it")
    src = exc.source if exc.source in _REQUEST_FIELDS else ""
    path = prefix + (f".{src}" if src else "")
    if isinstance(exc.entry, int) and not isinstance(exc.entry, bool):
        path += f"[{exc.entry}]"
    if exc.field:
        path += exc.field if exc.field.startswith("[") else f".{exc.field}"
    return HTTPError(422, str(exc), path=path)


class _Messages(Sequence[ChatMessage]):
    """A request's messages as the engine reads them: a ``ChatMessage`` is made only for the
    messages the engine reaches (it reads the newest ``scan_depth`` or so), so a long chat costs
    its JSON decoding and no more."""

    __slots__ = ("_items",)

    def __init__(self, items: list[m.MessageIn]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, i: slice) -> list[ChatMessage]: ...

    def __getitem__(self, i: int | slice) -> ChatMessage | list[ChatMessage]:
        if isinstance(i, slice):
            return [ChatMessage(x.name, x.mes, x.is_user) for x in self._items[i]]
        x = self._items[i]
        return ChatMessage(x.name, x.mes, x.is_user)


def substitute_hook(macros: dict[str, str] | None) -> Callable[[str], str] | None:
    """The request's macro hook (its table checked against the limits: a 422 at ``$.macros``;
    every expansion is measured before it is built, see ``lorescan.macros``)."""
    try:
        return macro_table(macros or {})
    except LorebookError as exc:
        raise HTTPError(422, str(exc), path="$.macros") from None


class Runtime(WorkerState):
    """A worker: its state (:class:`WorkerState`) and the three modes' handlers (engine thread only)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._rules: dict[tuple[str, bool, bool], tuple[Compat, MatchOptions]] = {}
        self._macros: dict[tuple[tuple[str, str], ...], Callable[[str], str] | None] = {}

    def macros(self, macros: dict[str, str] | None) -> Callable[[str], str] | None:
        """:func:`substitute_hook` of a request's table; a chat's table comes with every turn, so the
        tables seen last are kept (a hook is a pure function of its table)."""
        if not macros:
            return None
        key = tuple(macros.items())
        found = self._macros.get(key, False)
        if found is False:
            found = substitute_hook(macros)     # a table past the limits raises here, every time
            if sum(len(k) + len(v) for k, v in key) <= MACRO_CACHE_CHARS:
                if len(self._macros) >= MACRO_CACHE:
                    self._macros.pop(next(iter(self._macros)))
                self._macros[key] = found
        return found  # type: ignore[return-value]

    # -- SillyTavern mode ------------------------------------------------------------------
    def _st_settings(self, s: Any) -> STSettings:
        """The validated ``STSettings`` of a request's settings; the same settings (most
        requests repeat their client's) are validated once."""
        key = msgspec.structs.astuple(s)
        found = self._settings.get(key)
        if found is None:
            try:
                found = STSettings(**msgspec.structs.asdict(s))
            except LorebookError as exc:
                raise input_error(exc) from None
            if len(self._settings) >= SETTINGS_CACHE:
                self._settings.pop(next(iter(self._settings)))
            self._settings[key] = found
        return found

    def st_scan(self, req: m.STScanRequest) -> bytes:
        req = self.prefixes.whole_request(req)     # the delta form (serve/chats.py): the whole chat, or a 409
        settings = self._st_settings(req.settings)
        rules = (req.compat, settings.case_sensitive, settings.match_whole_words)
        found = self._rules.get(rules)          # a handful of combinations: built once each
        if found is None:
            compat = Compat.of(req.compat)
            found = self._rules[rules] = (compat, compat.match_options(case_sensitive=settings.case_sensitive,
                                                                        match_whole_words=settings.match_whole_words))
        compat, options = found
        key = ("st", tuple((b.id, tuple(b.roles)) for b in req.books), settings, req.compat, req.tokenizer)
        for b in req.books:        # a book deleted by another worker must not live on in an engine
            if not self.store.exists(b.id):
                self._compiled(req.books, options)
        try:
            engine = self._engine(key, lambda: STEngine(
                [BookSource(cb, tuple(b.roles)) for cb, b in zip(self._compiled(req.books, options), req.books)],
                settings, compat=compat, count_tokens=self.counter(req.tokenizer)))
        except LorebookError as exc:
            raise input_error(exc) from None
        # per-request hooks are inputs of this scan: the cached engine is shared as it is
        rand: Callable[[], float] | None = None
        if req.random is not None:
            constant = req.random
            rand = lambda: constant     # noqa: E731
        elif req.seed is not None:
            rand = _random.Random(req.seed).random
        ch = req.character
        character = Character(ch.name, ch.avatar, tuple(ch.tags) if ch.tags is not None else None) if ch else None
        messages = _Messages(req.messages)
        cache = self._chat_cache(req.chat_id)
        h0, m0 = (cache.hit_count, cache.miss_count) if cache is not None else (0, 0)
        try:
            result = engine.scan(messages, max_context=req.max_context, character=character,
                                 global_scan_data=req.global_scan_data, injects=req.injects,
                                 authors_note=req.authors_note, trigger=req.trigger, dry_run=req.dry_run,
                                 timed_effects=req.timed_effects,
                                 forced=[(f.world, f.uid) for f in req.forced], cache=cache,
                                 substitute=self.macros(req.macros), random=rand, deadline=DEADLINE.get(),
                                 layout=req.layout)
        except LorebookError as exc:
            self._release_damaged(exc, req.books)
            raise input_error(exc) from None
        finally:
            self._after_chat(cache, h0, m0)
        # messages named by their place in the request (docs/sillytavern-mode.md#cli-turns)
        out = result.to_json(diagnostics=req.explain, name_text=message_namer(range(1, len(req.messages) + 1)))
        if result.regex_cutoffs:
            self.metrics.inc("lorescan_regex_timeouts_total", len(result.regex_cutoffs))
        return msgspec.json.encode(out)

    # -- lorebook-slot mode ----------------------------------------------------------------
    def slot_run(self, req: m.SlotRunRequest) -> bytes:
        maker = MatchOptions.improved if req.rules == "improved" else MatchOptions.sillytavern
        options = maker(case_sensitive=req.case_sensitive, match_whole_words=req.match_whole_words)
        key = ("slot", tuple((b.id, b.book_id, None if b.settings is None else
                              msgspec.structs.astuple(b.settings)) for b in req.books),
               options, req.regex_keys, req.user_icon_decorator, req.tokenizer, req.stable_placement)
        for b in req.books:
            if not self.store.exists(b.id):
                self._compiled(req.books, options)

        def build() -> SlotEngine:
            books = []
            for i, (cb, ref) in enumerate(zip(self._compiled(req.books, MatchOptions.sillytavern()), req.books)):
                settings = None
                if ref.settings is not None:
                    given = {k: v for k, v in msgspec.structs.asdict(ref.settings).items() if v is not None}
                    try:
                        settings = BookSettings(**{**asdict(BookSettings.from_book(cb.book)), **given})
                    except LorebookError as exc:
                        raise input_error(exc, f"$.books[{i}].settings") from None
                books.append(SlotBook(cb.book, ref.book_id, settings))
            # one book's pool: its compiled keys come from the store (a keys part alone, stored
            # beside the book for exactly these specs), so a cold engine does not compile them
            stored = self.store.get_keys if len(req.books) == 1 else None
            book_id = req.books[0].id if req.books else ""

            def compile_with(specs: Sequence[Any], opts: MatchOptions, **kw: Any) -> Any:
                assert stored is not None
                try:
                    return stored(book_id, specs, opts, **kw)
                except BookNotFound:        # deleted by another worker since it was read
                    raise HTTPError(404, f"no book with id {book_id!r} (upload it with POST /v1/books)",
                                    path="$.books[0].id") from None

            return SlotEngine(books, count_tokens=self.counter(req.tokenizer), match_options=options,
                              regex_keys=req.regex_keys, user_icon_decorator=req.user_icon_decorator,
                              stable_placement=req.stable_placement,
                              compile_with=compile_with if stored is not None else None)

        try:
            engine = self._engine(key, build)
        except LorebookError as exc:
            raise input_error(exc) from None
        cache = self._chat_cache(req.chat_id)
        h0, m0 = (cache.hit_count, cache.miss_count) if cache is not None else (0, 0)
        try:
            result = engine.run([(x.role, x.content) for x in req.messages], turn_id=req.turn_id,
                                state=req.state, dry_run=req.dry_run, at_greeting=req.at_greeting,
                                greeting_index=req.greeting_index, user_icon=req.user_icon,
                                substitute=self.macros(req.macros), cache=cache, deadline=DEADLINE.get())
        except LorebookError as exc:
            self._release_damaged(exc, req.books)
            raise input_error(exc) from None
        finally:
            self._after_chat(cache, h0, m0)
        timeouts = len(result.regex_cutoffs)
        if timeouts:
            self.metrics.inc("lorescan_regex_timeouts_total", timeouts)
        return msgspec.json.encode(result.to_json())     # SlotRunResponse: SlotResult.to_json, whole

    # -- JanitorAI script mode ---------------------------------------------------------------
    def janitor_run(self, req: m.JanitorRunRequest) -> bytes:
        from ..janitor import JanitorEngine  # import-cost: janitor mode loads on its first request
        key = (msgspec.json.encode(req.book), msgspec.json.encode(req.settings), req.profile)
        engines = self.janitor_engines
        engine = engines.get(key)
        if engine is None:                # small and cheap to build: no gc freeze, an LRU of its own
            engine = engines[key] = JanitorEngine(req.book, profile=req.profile, **req.settings)
            while len(engines) > max(16, self.config.engines):
                engines.popitem(last=False)
        else:
            engines.move_to_end(key)
        rand = req.random if req.random is not None else _random.Random(req.seed).random
        try:
            result = engine.run(req.context, random=rand)
        except LorebookError as exc:
            path = "$.random" if exc.source == "random" else "$.context"
            raise HTTPError(422, str(exc), path=path) from None
        out = result.to_json()
        if req.explain:
            out["explain"] = [x.text for x in result.explanations()]
        return msgspec.json.encode(out)
