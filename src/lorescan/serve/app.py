"""The ASGI app of ``lorescan serve``: Starlette routes over msgspec models.

One worker process = one event loop (I/O, JSON, validation) + one engine thread (every
compile, load and scan). Engines would be safe to share between threads (STEngine's
docstring); one engine thread keeps scans queued in order, off the event loop, and a request
that runs past its time limit is answered 503 while its scan finishes in the background (a scan still queued when its deadline passes is skipped;
key matching stops at the deadline, and the native kernel lets the event loop run while it works).
Per-request data (timed effects, slot state, messages) lives only in the request; what a
worker keeps between requests is derived from books alone (compiled books, engines) or
from text alone (per-chat key-hit caches), so no caller can see another's state.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import sys
import gc
import json
import logging
import os
import random as _random
import re
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, MutableMapping, Sequence, overload

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import LorebookError, ScanDeadlineExceeded
from ..macros import macro_table
from ..match.cache import ChatScan
from ..match.lsc import CompiledFormError
from ..limits import DEFAULT_LIMITS
from ..match.options import MatchOptions
from ..st import BookSource, Character, ChatMessage, Compat, STEngine, STSettings
from ..st.result import message_namer
from ..slot import BookSettings, SlotBook, SlotEngine
from ..tokens import TiktokenCounter, count_words
from . import models as m
from .auth import check_header, read_token
from .chats import ChatPrefixes
from .config import WORKER_CONFIG_ENV
from .decoding import HTTPError, read_body as _body, read_request as _decode
from .logs import REQUEST_ID, log_access, request_id_of
from .metrics import Metrics
from .openapi import openapi_document
from .ops import readiness_problems, routing_error_text, version_info
from .store import BookNotFound, BookStore, DamagedBook

__all__ = ["ServeConfig", "build_app", "CONFIG_ENV", "openapi_document"]

log = logging.getLogger("lorescan.serve")
# how `serve` hands a ServeConfig to its worker processes (LORESCAN_SERVE_CONFIG names the user's TOML file)
CONFIG_ENV = WORKER_CONFIG_ENV


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything a worker needs; passed to worker processes as JSON in ``LORESCAN_SERVE_CONFIG``.

    ``books_dir``: compiled books (shared by workers and restarts). ``book_cache_mb``: the
    in-memory LRU of compiled books. ``chat_cache_chats`` / ``chat_cache_mb``: the per-chat
    hit caches (``chat_id``); ``chat_cache_texts``: texts one chat's cache keeps (a chat only
    reuses the hits of its window's messages and recent recursion chunks). ``max_body_mb``: largest scan request; ``max_upload_mb``:
    largest book upload. ``time_limit``: seconds per scan request (503 past it);
    ``upload_time_limit``: seconds per upload. ``header_timeout`` / ``body_timeout``: seconds a
    client may take to send a request's headers / its body before the connection is closed
    (``serve.protocol``). ``token_file``: bearer token file (else
    ``LORESCAN_SERVE_TOKEN``; neither = no auth). ``engines``: engines kept per worker.
    ``access_log``: one log line per request; ``log_level``, ``log_format`` (``json`` or ``text``).
    """

    books_dir: str = "lorescan-books"
    book_cache_mb: float = 512
    chat_cache_chats: int = 1000
    chat_cache_texts: int = 256
    chat_cache_mb: float = 256
    max_body_mb: float = 16
    max_upload_mb: float = DEFAULT_LIMITS.max_file_bytes / (1 << 20)
    time_limit: float = 10.0
    upload_time_limit: float = 120.0
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    token_file: str | None = None
    engines: int = 32
    access_log: bool = False
    log_level: str = "info"
    log_format: str = "json"

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServeConfig":
        raw = os.environ.get(CONFIG_ENV)
        return cls(**json.loads(raw)) if raw else cls()


class TimeLimit(Exception):
    """The request's deadline passed before its job started."""


# The running job's deadline (time.monotonic()): Runtime.run sets it in the job's context and
# the scan handlers pass it to the engines, whose key matching stops past it (answered 503).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("lorescan_deadline", default=None)


_REQUEST_FIELDS = ("settings", "timed_effects", "messages", "state", "books", "global_scan_data")
def _storage_error(exc: OSError) -> HTTPError:
    """An error writing the books directory as an answer: 507 when the disk (or quota) is full,
    503 otherwise; the log names the file, the answer does not."""
    log.warning("cannot write to the books directory: %s", exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return HTTPError(507, f"the books directory is full ({os.strerror(exc.errno)}); the book was not stored")
    return HTTPError(503, f"the books directory cannot be written ({exc.strerror or type(exc).__name__}); "
                          "the book was not stored")


def _input_error(exc: LorebookError, prefix: str = "$") -> HTTPError:
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


# -- per-worker state -------------------------------------------------------------------------

class ChatCaches:
    """Per-chat ChatScan objects: an LRU bounded in chats and in estimated bytes; each chat's
    cache is itself bounded in texts (old messages and old recursion chunks are never read again)."""

    def __init__(self, max_chats: int, max_bytes: int, max_texts: int = 256) -> None:
        self.max_chats = max(1, max_chats)
        self.max_bytes = max(1, max_bytes)
        self.max_texts = max(1, max_texts)
        self._lru: OrderedDict[str, ChatScan] = OrderedDict()

    def get(self, chat_id: str) -> ChatScan:
        found = self._lru.get(chat_id)
        if found is None:
            found = self._lru[chat_id] = ChatScan(max_texts=self.max_texts, max_bytes=self.max_bytes)
        else:
            self._lru.move_to_end(chat_id)
        return found

    def trim(self) -> None:
        while len(self._lru) > self.max_chats:
            self._lru.popitem(last=False)
        total = self.nbytes
        while total > self.max_bytes and len(self._lru) > 1:
            _, old = self._lru.popitem(last=False)
            total -= old.nbytes

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in list(self._lru.values()))

    def __len__(self) -> int:
        return len(self._lru)


SETTINGS_CACHE = 256        # distinct request settings kept validated (oldest dropped first)
TOKEN_CACHE_TEXTS = 1024    # the counter caches by text; every turn brings new (long) budget texts


def _counter(name: str) -> Callable[[str], int]:
    if name == "words":
        return count_words
    if name == "chars":
        return len
    return TiktokenCounter(cache_size=TOKEN_CACHE_TEXTS)


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


def _substitute(macros: dict[str, str] | None) -> Callable[[str], str] | None:
    """The request's macro hook (its table checked against the limits: a 422 at ``$.macros``;
    every expansion is measured before it is built, see ``lorescan.macros``)."""
    try:
        return macro_table(macros or {})
    except LorebookError as exc:
        raise HTTPError(422, str(exc), path="$.macros") from None


class Runtime:
    """A worker's books, engines, chat caches and metrics; everything runs on one engine thread."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store = BookStore(config.books_dir, cache_bytes=int(config.book_cache_mb * (1 << 20)))
        self.metrics = Metrics()
        self.ready = False              # set once the engine thread has run its first job
        self.chats = ChatCaches(config.chat_cache_chats, int(config.chat_cache_mb * (1 << 20)),
                                config.chat_cache_texts)
        self.prefixes = ChatPrefixes(config.chat_cache_chats, int(config.chat_cache_mb * (1 << 20)))
        self.engines: OrderedDict[tuple, Any] = OrderedDict()
        self.janitor_engines: OrderedDict[tuple, Any] = OrderedDict()
        self.counters: dict[str, Callable[[str], int]] = {}
        self._settings: dict[tuple, STSettings] = {}
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lorescan-engine")
        token = read_token(config.token_file)
        self.token = token.encode() if token else None
        self._released = False          # engines were dropped since the last gc.freeze()
        self.store.on_evict = self._release

    def _release(self, book_ids: set[str]) -> None:
        """Drop the engines that use a book the store's LRU let go (engine thread only): an engine
        keeps its compiled books alive, so without this ``--book-cache-mb`` would bound the store
        and not the worker (32 engines kept 32 books whatever the cache size)."""
        for key in [k for k in self.engines if any(b[0] in book_ids for b in k[1])]:
            del self.engines[key]
            self._released = True

    def _release_damaged(self, exc: LorebookError, refs: Sequence[Any]) -> None:
        """A scan found a section of a stored book's file damaged (checked at its first read):
        the engines over the request's books go, so a re-upload's repaired book is used next."""
        if isinstance(exc, CompiledFormError):
            self._release({ref.id for ref in refs})

    async def run(self, fn: Callable[[], Any], limit: float, timing: list[float] | None = None) -> Any:
        """Run ``fn`` on the engine thread; 503 when ``limit`` seconds pass first.

        ``timing`` (if given) receives the seconds spent queued and running there."""
        submitted = time.monotonic()
        deadline = submitted + limit

        def job() -> Any:
            started = time.monotonic()
            if started > deadline:
                raise TimeLimit()
            _DEADLINE.set(deadline)     # this job's own context (a copy): the scans it runs honour it
            try:
                return fn()
            finally:
                if timing is not None:
                    timing[:] = [started - submitted, time.monotonic() - started]

        # the job runs in a copy of the request's context: its log lines carry the request id
        future = asyncio.get_running_loop().run_in_executor(self.executor, contextvars.copy_context().run, job)
        # a job that outlives its request ends unobserved: retrieve its outcome so asyncio does
        # not log "exception was never retrieved" for a 4xx it raised
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=limit)
        except (asyncio.TimeoutError, TimeLimit, ScanDeadlineExceeded):
            self.metrics.inc("lorescan_request_timeouts_total")
            raise HTTPError(503, f"the request took longer than the time limit of {limit:g} s") from None

    def delete_book(self, book_id: str) -> bool:
        """Delete a stored book and drop this worker's engines that use it (engine thread only)."""
        self._release({book_id})
        return self.store.delete(book_id)

    def counter(self, name: str) -> Callable[[str], int]:
        found = self.counters.get(name)
        if found is None:
            found = self.counters[name] = _counter(name)
        return found

    def _engine(self, key: tuple, build: Callable[[], Any]) -> Any:
        found = self.engines.get(key)
        if found is not None:
            self.engines.move_to_end(key)
            return found
        engine = build()
        self.metrics.inc("lorescan_engines_built_total")
        if not all(self.store.holds(b[0]) for b in key[1]):
            # its books did not all fit in the book cache: kept, it would hold them past the bound
            return engine
        self.engines[key] = engine
        while len(self.engines) > self.config.engines:
            self.engines.popitem(last=False)
            self._released = True
        # A compiled book is ~10^6 long-lived objects: move them out of the cyclic GC's reach,
        # or every full collection walks them all (tens of ms in the middle of some turn).
        # Frozen objects are never collected as cycles, so after engines were dropped the
        # frozen generation is thawed first and what only they held is freed.
        if self._released:
            gc.unfreeze()
            self._released = False
        gc.collect()
        gc.freeze()
        return engine

    def _compiled(self, refs: list[Any], options: MatchOptions) -> list[Any]:
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(self.store.get(ref.id, options))
            except BookNotFound:
                raise HTTPError(404, f"no book with id {ref.id!r} (upload it with POST /v1/books)",
                                path=f"$.books[{i}].id") from None
            except DamagedBook as exc:
                raise HTTPError(409, str(exc), path=f"$.books[{i}].id") from None
        return out

    def _chat_cache(self, chat_id: str | None) -> ChatScan | None:
        return self.chats.get(chat_id) if chat_id is not None else None

    def _after_chat(self, cache: ChatScan | None, hits0: int, misses0: int) -> None:
        if cache is None:
            return
        self.metrics.inc("lorescan_chat_cache_hits_total", cache.hit_count - hits0)
        self.metrics.inc("lorescan_chat_cache_misses_total", cache.miss_count - misses0)
        self.chats.trim()

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
                raise _input_error(exc) from None
            if len(self._settings) >= SETTINGS_CACHE:
                self._settings.pop(next(iter(self._settings)))
            self._settings[key] = found
        return found

    def st_scan(self, req: m.STScanRequest) -> bytes:
        req = self.prefixes.whole_request(req)     # the delta form (serve/chats.py): the whole chat, or a 409
        settings = self._st_settings(req.settings)
        compat = Compat.of(req.compat)
        options = compat.match_options(case_sensitive=settings.case_sensitive,
                                       match_whole_words=settings.match_whole_words)
        key = ("st", tuple((b.id, tuple(b.roles)) for b in req.books), settings, req.compat, req.tokenizer)
        for b in req.books:        # a book deleted by another worker must not live on in an engine
            if not self.store.exists(b.id):
                self._compiled(req.books, options)
        try:
            engine = self._engine(key, lambda: STEngine(
                [BookSource(cb, tuple(b.roles)) for cb, b in zip(self._compiled(req.books, options), req.books)],
                settings, compat=compat, count_tokens=self.counter(req.tokenizer)))
        except LorebookError as exc:
            raise _input_error(exc) from None
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
                                 substitute=_substitute(req.macros), random=rand, deadline=_DEADLINE.get(),
                                 layout=req.layout)
        except LorebookError as exc:
            self._release_damaged(exc, req.books)
            raise _input_error(exc) from None
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
                        raise _input_error(exc, f"$.books[{i}].settings") from None
                books.append(SlotBook(cb.book, ref.book_id, settings))
            return SlotEngine(books, count_tokens=self.counter(req.tokenizer), match_options=options,
                              regex_keys=req.regex_keys, user_icon_decorator=req.user_icon_decorator,
                              stable_placement=req.stable_placement)

        try:
            engine = self._engine(key, build)
        except LorebookError as exc:
            raise _input_error(exc) from None
        cache = self._chat_cache(req.chat_id)
        h0, m0 = (cache.hit_count, cache.miss_count) if cache is not None else (0, 0)
        try:
            result = engine.run([(x.role, x.content) for x in req.messages], turn_id=req.turn_id,
                                state=req.state, dry_run=req.dry_run, at_greeting=req.at_greeting,
                                greeting_index=req.greeting_index, user_icon=req.user_icon,
                                substitute=_substitute(req.macros), cache=cache, deadline=_DEADLINE.get())
        except LorebookError as exc:
            self._release_damaged(exc, req.books)
            raise _input_error(exc) from None
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

    def gauges(self) -> None:
        mt = self.metrics
        mt.set("lorescan_chats_cached", len(self.chats))
        mt.set("lorescan_chat_cache_bytes", self.chats.nbytes)
        mt.follow_store(self.store)
        mt.sample_process()


# -- HTTP -------------------------------------------------------------------------------------

_ST_DECODER = msgspec.json.Decoder(m.STScanRequest)
_SLOT_DECODER = msgspec.json.Decoder(m.SlotRunRequest)
_JANITOR_DECODER = msgspec.json.Decoder(m.JanitorRunRequest)
_JSON = "application/json"


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=_JSON)


def _route(path: str, name: str, **by_method: Callable[[Request], Awaitable[Response]]) -> Route:
    """One route for every method of ``path``, so a 405's ``Allow`` lists them all (two routes on
    one path would each answer with their own methods only)."""
    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await by_method[method](request)

    return Route(path, dispatch, methods=list(by_method), name=name)


def build_app(config: ServeConfig) -> Starlette:
    """The Starlette app for ``config`` (one Runtime per worker process)."""
    rt = Runtime(config)
    max_body = int(config.max_body_mb * (1 << 20))
    max_upload = int(config.max_upload_mb * (1 << 20))
    openapi = msgspec.json.encode(openapi_document(token=rt.token is not None))
    version_bytes = msgspec.json.encode(version_info())

    async def healthz(request: Request) -> Response:
        return _json(b'{"status":"ok"}')

    async def readyz(request: Request) -> Response:
        problems = readiness_problems(rt.store.directory, started=rt.ready)
        if problems:
            raise HTTPError(503, "not ready: " + "; ".join(problems), reasons=problems)
        return _json(msgspec.json.encode({"status": "ready", "books_dir": rt.store.directory}))

    async def version(request: Request) -> Response:
        return _json(version_bytes)

    async def metrics(request: Request) -> Response:
        rt.gauges()
        return Response(rt.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi_json(request: Request) -> Response:
        return _json(openapi)

    async def turn(request: Request, decoder: msgspec.json.Decoder, handle: Callable[[Any], bytes]) -> Response:
        t0 = time.monotonic()
        req = _decode(decoder, await _body(request, max_body))
        t1 = time.monotonic()
        timing: list[float] = []
        body = await rt.run(lambda: handle(req), config.time_limit, timing)
        response = _json(body)
        # Server-Timing: where a turn's time went inside the worker (read, decode+validate,
        # wait for the engine thread, scan+encode there).
        response.headers["server-timing"] = (f"decode;dur={(t1 - t0) * 1000:.3f}, queue;dur={timing[0] * 1000:.3f}, "
                                             f"engine;dur={timing[1] * 1000:.3f}") if timing else ""
        return response

    async def st_scan(request: Request) -> Response:
        return await turn(request, _ST_DECODER, rt.st_scan)

    async def slot_run(request: Request) -> Response:
        return await turn(request, _SLOT_DECODER, rt.slot_run)

    async def janitor_run(request: Request) -> Response:
        return await turn(request, _JANITOR_DECODER, rt.janitor_run)

    async def books_post(request: Request) -> Response:
        q = request.query_params
        name = q.get("name") or None
        fill = q.get("fill_defaults", "true").lower()
        if fill not in ("true", "false", "1", "0"):
            raise HTTPError(422, "fill_defaults must be true or false", path="query.fill_defaults")
        filename = q.get("filename") or ""
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("multipart/form-data"):
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_upload + 65536:
                raise HTTPError(413, f"the upload is {int(declared)} bytes, above the limit of {max_upload} bytes")
            async with request.form(max_files=1, max_fields=10, max_part_size=max_upload) as form:
                upload = form.get("file")
                if upload is None or isinstance(upload, str):
                    raise HTTPError(422, "a multipart upload needs the book in a file field named 'file'",
                                    path="form.file")
                data = await upload.read(max_upload + 1)
                filename = filename or upload.filename or ""
                form_name = form.get("name")
                if name is None and isinstance(form_name, str):
                    name = form_name or None
        else:
            data = await _body(request, max_upload)
        if len(data) > max_upload:
            raise HTTPError(413, f"the upload is above the limit of {max_upload} bytes")
        if not data:
            raise HTTPError(400, "the upload is empty")
        fill_defaults = fill in ("true", "1")

        def put() -> dict[str, Any]:
            try:
                return rt.store.put(data, filename or "<upload>", name=name, fill_defaults=fill_defaults)
            except LorebookError as exc:
                entry = exc.entry if isinstance(exc.entry, (int, str)) and not isinstance(exc.entry, bool) else None
                raise HTTPError(400, str(exc), source=exc.source, entry=entry, field=exc.field) from None
            except OSError as exc:          # the books directory: its disk, not the book
                raise _storage_error(exc) from None

        info = await rt.run(put, config.upload_time_limit)
        return _json(msgspec.json.encode(info), 201 if info["created"] else 200)

    def _book_id(request: Request) -> str:
        book_id = request.path_params["book_id"]
        if not re.fullmatch(r"[0-9a-f]{32}", book_id):
            raise HTTPError(422, "a book id is 32 lowercase hex digits", path="path.book_id")
        return book_id

    async def book_get(request: Request) -> Response:
        book_id = _book_id(request)
        try:
            return _json(msgspec.json.encode(rt.store.info(book_id)))
        except BookNotFound:
            raise HTTPError(404, f"no book with id {book_id!r}") from None
        except DamagedBook as exc:
            raise HTTPError(409, str(exc)) from None

    async def book_delete(request: Request) -> Response:
        book_id = _book_id(request)
        if not await rt.run(lambda: rt.delete_book(book_id), config.time_limit):
            raise HTTPError(404, f"no book with id {book_id!r}")
        return Response(status_code=204)

    async def books_list(request: Request) -> Response:
        infos, unreadable = [], []
        for book_id in rt.store.ids():
            try:
                infos.append(rt.store.info(book_id))
            except BookNotFound:
                continue
            except DamagedBook:         # listed apart: one bad file must not hide every book
                unreadable.append(book_id)
        return _json(msgspec.json.encode({"books": infos, "unreadable": unreadable}))

    routes = [
        Route("/healthz", healthz, methods=["GET"], name="healthz"),
        Route("/readyz", readyz, methods=["GET"], name="readyz"),
        Route("/version", version, methods=["GET"], name="version"),
        Route("/metrics", metrics, methods=["GET"], name="metrics"),
        Route("/openapi.json", openapi_json, methods=["GET"], name="openapi"),
        _route("/v1/books", "books", POST=books_post, GET=books_list),
        _route("/v1/books/{book_id}", "book", GET=book_get, DELETE=book_delete),
        Route("/v1/st/scan", st_scan, methods=["POST"], name="st_scan"),
        Route("/v1/slot/run", slot_run, methods=["POST"], name="slot_run"),
        Route("/v1/janitor/run", janitor_run, methods=["POST"], name="janitor_run"),
    ]
    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPError)
        headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body, status_code=exc.status, headers=headers)

    async def routing_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)    # Starlette's 404 (no route) and 405 (wrong method)
        text = routing_error_text(request.method, request.url.path, exc.status_code, exc.headers, exc.detail)
        return JSONResponse({"error": text}, status_code=exc.status_code, headers=exc.headers)

    async def internal_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ClientDisconnect):       # gone (or closed past its read timeout): nobody to answer
            return Response(status_code=400)
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the worker is unaffected"},
                            status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def publish() -> None:      # other workers' /metrics read this worker's gauges
            while True:
                await asyncio.sleep(1.0)
                try:
                    rt.gauges()
                except Exception:  # noqa: BLE001 - a full disk must not stop the worker's numbers for good
                    log.exception("could not update this worker's metrics")

        await rt.run(lambda: None, 60.0)          # the engine thread runs: the worker is ready
        rt.ready = True
        task = asyncio.create_task(publish())
        try:
            yield
        finally:
            rt.ready = False
            task.cancel()
            rt.metrics.withdraw()
            rt.executor.shutdown(wait=False, cancel_futures=True)

    app = Starlette(routes=routes, exception_handlers={HTTPError: http_error, StarletteHTTPException: routing_error,
                                                       Exception: internal_error},
                    lifespan=lifespan)
    app.state.runtime = rt
    return _Guard(app, rt)  # type: ignore[return-value]


class _Guard:
    """Outermost ASGI layer: auth, error bodies, the 'nothing crashes a worker' net, metrics."""

    _ROUTES = {"/healthz": "healthz", "/readyz": "readyz", "/version": "version", "/metrics": "metrics",
               "/openapi.json": "openapi",
               "/v1/books": "books", "/v1/st/scan": "st_scan", "/v1/slot/run": "slot_run",
               "/v1/janitor/run": "janitor_run"}

    def __init__(self, app: Starlette, rt: Runtime) -> None:
        self.app = app
        self.rt = rt
        self.state = app.state
        self.pid = str(os.getpid()).encode()

    def _route(self, path: str) -> str:
        found = self._ROUTES.get(path)
        if found is not None:
            return found
        return "book" if path.startswith("/v1/books/") else "other"

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[MutableMapping[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        route = self._route(scope["path"])
        status = {"code": 500, "sent": False}
        rid = request_id_of(scope)
        rid_token = REQUEST_ID.set(rid)

        async def send_wrapped(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                message["headers"] = [*message.get("headers", ()), (b"x-lorescan-worker", self.pid),
                                      (b"x-request-id", rid.encode()),
                                      (b"server-timing", b"app;dur=%.3f" % ((time.perf_counter() - t0) * 1000))]
            await send(message)

        try:
            token = self.rt.token
            if token is not None and route not in ("healthz", "readyz"):
                auth = None
                for k, v in scope["headers"]:
                    if k == b"authorization":
                        auth = v
                        break
                if not check_header(auth, token):
                    raise HTTPError(401, "missing or wrong bearer token (Authorization: Bearer <token>)")
            await self.app(scope, receive, send_wrapped)
        except HTTPError as exc:
            if not status["sent"]:
                headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
                await JSONResponse(exc.body, status_code=exc.status, headers=headers)(scope, receive, send_wrapped)
        except ClientDisconnect:
            log.info("%s %s: the client left before its request was read", scope.get("method"), scope.get("path"))
        except Exception as exc:  # noqa: BLE001 - the worker must answer and live on
            if not status["sent"]:
                log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
                await JSONResponse({"error": f"internal error ({type(exc).__name__}); the worker is unaffected"},
                                   status_code=500)(scope, receive, send_wrapped)
        finally:
            mt = self.rt.metrics
            mt.inc("lorescan_requests_total", route=route, method=scope.get("method", ""),
                   status=str(status["code"]))
            elapsed = time.perf_counter() - t0
            mt.observe("lorescan_request_seconds", elapsed, route=route)
            if self.rt.config.access_log:
                log_access(scope, route, status["code"], elapsed)
            REQUEST_ID.reset(rid_token)
