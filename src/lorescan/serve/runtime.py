"""A ``lorescan serve`` worker's state: its settings (:class:`ServeConfig`), books, engines, chat
caches and metrics, and the one engine thread every compile, load and scan runs on.

One worker process = one event loop (I/O, JSON, validation) + one engine thread. Engines would be
safe to share between threads (STEngine's docstring); one engine thread keeps scans queued in
order, off the event loop, and a request that runs past its time limit is answered 503 while its
scan finishes in the background (a scan still queued when its deadline passes is skipped; key
matching stops at the deadline, and the native kernel lets the event loop run while it works).

A small turn runs on the event loop itself instead (:meth:`WorkerState.inline_ok`): its books
total at most ``INLINE_BOOK_BYTES`` of compiled file, its body at most ``INLINE_BODY_BYTES``, and
the engine thread has nothing queued or running, so the order of jobs and the one-job-at-a-time
rule hold. Handing such a turn to the engine thread and its answer back woke two threads and cost
a platform's cold small-book request ~0.2 ms of the worker's CPU (bench_platform); what such a
turn can block the loop for is a few ms, and its scan still stops at its deadline.
What a worker keeps between requests is derived from books alone (compiled books, engines) or
from text alone (per-chat key-hit caches), so no caller can see another's state. The three
modes' handlers are :mod:`.turns`.
"""
from __future__ import annotations

import asyncio
import contextvars
import errno
import gc
import json
import logging
import os
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from ..errors import ScanDeadlineExceeded
from ..limits import DEFAULT_LIMITS
from ..match.cache import ChatScan
from ..match.lsc import CompiledFormError
from ..match.options import MatchOptions
from ..st import STEngine, STSettings
from ..tokens import TiktokenCounter, count_words
from .auth import read_token
from .bodies import BodyBudget, inflight_bytes
from .chats import ChatPrefixes
from .config import WORKER_CONFIG_ENV
from .decoding import HTTPError
from .metrics import Metrics
from .store import BookNotFound, BookStore, DamagedBook

__all__ = ["ServeConfig", "WorkerState", "ChatCaches", "TimeLimit", "CONFIG_ENV", "DEADLINE", "TOKEN_CACHE_TEXTS",
           "SETTINGS_CACHE", "storage_error"]

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
    largest book upload; ``max_inflight_mb``: request-body bytes all of a worker's requests hold at once
    (0: ``max(max_upload_mb, 8 x max_body_mb)``, :mod:`.bodies`). ``time_limit``: seconds per scan request (503 past it);
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
    max_inflight_mb: float = 0
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
DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("lorescan_deadline", default=None)


def storage_error(exc: OSError) -> HTTPError:
    """An error writing the books directory as an answer: 507 when the disk (or quota) is full,
    503 otherwise; the log names the file, the answer does not."""
    log.warning("cannot write to the books directory: %s", exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return HTTPError(507, f"the books directory is full ({os.strerror(exc.errno)}); the book was not stored")
    return HTTPError(503, f"the books directory cannot be written ({exc.strerror or type(exc).__name__}); "
                          "the book was not stored")


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


INLINE_BOOK_BYTES = 512 * 1024   # a turn runs on the event loop when its books' compiled files total at most this
INLINE_BODY_BYTES = 256 * 1024   # ... and its request body is at most this (WorkerState.inline_ok)
THAW_PASSES = 8            # collect-and-freeze passes between two thaws of the frozen generation (_tidy)
RETIRED_MAX = 64           # engines and books one job may let go before they are freed on the spot
FREEZE_ENTRIES = 5000       # entries built into engines between two collect-and-freeze passes (WorkerState._engine)


class WorkerState:
    """A worker's books, engines, chat caches and metrics; everything runs on one engine thread
    (the mode handlers are :class:`lorescan.serve.turns.Runtime`, this plus them)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.store = BookStore(config.books_dir, cache_bytes=int(config.book_cache_mb * (1 << 20)))
        self.metrics = Metrics()
        self.bodies = BodyBudget(inflight_bytes(config.max_inflight_mb, config.max_body_mb, config.max_upload_mb))
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
        self._unfrozen_entries = 0      # entries of the engines built since then
        self._freeze_due = False        # a collect-and-freeze pass is due after the running job
        self._passes = 0                # collect-and-freeze passes since the last thaw
        self._big = False               # the due pass follows a big engine's build (collect at once)
        # engines and compiled books let go during a job, freed once its answer is handed over
        # (outside a job, as when a test calls a handler directly, they are freed on the spot)
        self.retired: list[Any] = []
        self._in_job = False
        self.store.on_evict = self._release
        # jobs handed to the engine thread, and those it has finished (tidied up too): each is
        # written by one thread only, so equal counts mean the engine thread is idle
        self._submitted = 0
        self._finished = 0
        self._tidy_due: tuple[asyncio.Handle, bool] | None = None   # an inline job's tidy-up, on the loop

    def inline_ok(self, book_ids: Iterable[str], body_bytes: int) -> bool:
        """Whether a turn over ``book_ids`` with a body of ``body_bytes`` may run on the event
        loop (event-loop thread only): the engine thread is idle and the turn is small (the
        module docstring). A book that is not stored counts as large (its 404 comes from the
        engine thread, as before)."""
        if self._submitted != self._finished or body_bytes > INLINE_BODY_BYTES:
            return False
        total = 0
        for book_id in book_ids:
            total += self.store.stored_bytes(book_id)
            if total > INLINE_BOOK_BYTES:
                return False
        return True

    def _release_damaged(self, exc: Exception, refs: Any) -> None:
        """A scan found a section of a stored book's file damaged (checked at its first read):
        the engines over the request's books go, so a re-upload's repaired book is used next."""
        if isinstance(exc, CompiledFormError):
            self._release({ref.id for ref in refs})

    def _release(self, book_ids: set[str]) -> None:
        """Drop the engines that use a book the store's LRU let go (engine thread only): an engine
        keeps its compiled books alive, so without this ``--book-cache-mb`` would bound the store
        and not the worker (32 engines kept 32 books whatever the cache size)."""
        for key in [k for k in self.engines if any(b[0] in book_ids for b in k[1])]:
            self._retire(self.engines.pop(key))
            self._released = True

    def _retire(self, value: Any) -> None:
        """Keep ``value`` (let go by the running job) until the job's answer is handed over; outside
        a job, or past RETIRED_MAX, it is freed now."""
        if self._in_job and len(self.retired) < RETIRED_MAX:
            self.retired.append(value)

    async def run(self, fn: Callable[[], Any], limit: float, timing: list[float] | None = None, *,
                  inline: bool = False) -> Any:
        """Run ``fn`` on the engine thread; 503 when ``limit`` seconds pass first.

        ``inline``: run it on the event loop now, as the engine thread would (``inline_ok`` said
        so just before; the GC paused while it runs, what it let go freed and the due GC passes run
        after its answer is sent), 503 when it ends past ``limit``.
        ``timing`` (if given) receives the seconds spent queued and running there."""
        self._tidy_now()            # an inline job's tidy-up still due comes before the next job
        submitted = time.monotonic()
        deadline = submitted + limit

        def job() -> Any:
            started = time.monotonic()
            if started > deadline:
                raise TimeLimit()
            DEADLINE.set(deadline)     # this job's own context (a copy): the scans it runs honour it
            try:
                return fn()
            finally:
                if timing is not None:
                    timing[:] = [started - submitted, time.monotonic() - started]

        # The job runs in a copy of the request's context (its log lines carry the request id) and
        # hands its outcome to ``answer``, a plain future of the event loop: the request waits for
        # that or for its time limit, whichever comes first, and a job that outlives its request
        # finishes unobserved. (run_in_executor + wait_for + shield did the same with three more
        # futures and their callbacks: ~15 us of a trivial request's CPU.)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, exc: BaseException | None) -> None:
            if answer.done():               # the time limit (or a cancelled request) came first
                return
            if exc is None:
                answer.set_result(value)
            else:
                answer.set_exception(exc)

        def hand_over() -> None:
            collecting = gc.isenabled()     # the cyclic GC waits for the answer (see _tidy)
            if collecting:
                gc.disable()
            self._in_job = True
            self.store.retired = self.retired
            try:
                try:
                    value, exc = job(), None
                except BaseException as err:    # noqa: BLE001 - the request's task raises it
                    value, exc = None, err
                try:
                    loop.call_soon_threadsafe(settle, value, exc)
                except RuntimeError:            # the loop is closed: the worker is stopping
                    pass
                del value, exc
            finally:
                self._in_job = False
                self.store.retired = None
                self._tidy(collecting)

        context = contextvars.copy_context()
        if inline:
            return self._run_inline(context, job, deadline, limit, loop)
        self._submitted += 1

        def counted() -> None:
            try:
                context.run(hand_over)
            finally:
                self._finished += 1

        self.executor.submit(counted)
        expire = loop.call_later(limit, settle, None, asyncio.TimeoutError())
        try:
            return await answer
        except (asyncio.TimeoutError, TimeLimit, ScanDeadlineExceeded):
            self.metrics.inc("lorescan_request_timeouts_total")
            raise HTTPError(503, f"the request took longer than the time limit of {limit:g} s") from None
        finally:
            expire.cancel()

    def _run_inline(self, context: contextvars.Context, job: Callable[[], Any], deadline: float, limit: float,
                    loop: asyncio.AbstractEventLoop) -> Any:
        """``job`` on the event loop, in ``context`` (its DEADLINE stays there), as ``hand_over``
        runs it on the engine thread; the tidy-up waits for two turns of the loop, so the answer's
        bytes (written at the end of the next one, serve.protocol) go out first."""
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        self._in_job = True
        self.store.retired = self.retired
        try:
            value = context.run(job)
        except (TimeLimit, ScanDeadlineExceeded):
            self.metrics.inc("lorescan_request_timeouts_total")
            raise HTTPError(503, f"the request took longer than the time limit of {limit:g} s") from None
        finally:
            self._in_job = False
            self.store.retired = None
            self._tidy_due = (loop.call_soon(self._tidy_soon, loop), collecting)
        if time.monotonic() > deadline:
            self.metrics.inc("lorescan_request_timeouts_total")
            raise HTTPError(503, f"the request took longer than the time limit of {limit:g} s")
        return value

    def _tidy_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        due = self._tidy_due
        if due is not None:
            self._tidy_due = (loop.call_soon(self._tidy_now), due[1])

    def _tidy_now(self) -> None:
        """Run an inline job's tidy-up if it is still due (event-loop thread)."""
        due = self._tidy_due
        if due is not None:
            self._tidy_due = None
            due[0].cancel()
            self._tidy(due[1])

    def _tidy(self, collecting: bool) -> None:
        """After a job's answer is handed over (engine thread): free what the job let go (evicted
        books, dropped engines), then run the cyclic-GC passes its allocations made due (paused
        while it ran, so a collection never lands inside a turn: a young one cost a cold
        small-book request ~0.2 ms, a full one tens of ms), and the collect-and-freeze pass
        ``_engine`` asked for. The passes follow CPython's own schedule: generation ``i`` when its
        count is above its threshold (the oldest such), every generation when the freeze is due."""
        self.retired.clear()
        if collecting:
            gc.enable()
        if self._freeze_due:
            self._freeze_due = False
            self._passes += 1
            # Engines and compiled books hold no reference cycles, so a dropped one is freed by
            # its reference count, frozen or not: most passes only freeze (no collection; a full
            # one walked the heap, ~13-30 ms at a small-book platform's every pass). Every
            # THAW_PASSES-th pass (at once when the frozen engines are a big book's) thaws the
            # frozen generation and collects it whole, freeing the cyclic garbage frozen meanwhile.
            if self._passes >= THAW_PASSES or self._big:
                self._passes = 0
                if self._released:
                    gc.unfreeze()
                    self._released = False
                gc.collect()
            gc.freeze()
            self._big = False
            return
        if not collecting:
            return
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if thresholds[0] and counts[0] > thresholds[0]:
            gc.collect(2 if counts[2] > thresholds[2] else 1 if counts[1] > thresholds[1] else 0)

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
            self._retire(self.engines.popitem(last=False)[1])
            self._released = True
        # A compiled book is ~10^6 long-lived objects: move them out of the cyclic GC's reach,
        # or every full collection walks them all (tens of ms in the middle of some turn).
        # The pass runs once FREEZE_ENTRIES entries were built into engines since the last one:
        # at once for a large book, once per many engines of small books (a platform's cold
        # requests), whose few objects wait unfrozen meanwhile; after the job's answer is handed
        # over, never inside the turn, and it collects (tens of ms) only for a large book or every
        # THAW_PASSES-th time (_tidy).
        compiled = engine.compiled if isinstance(engine, STEngine) else None     # other engines: every time
        built = FREEZE_ENTRIES if compiled is None else sum(len(cb.entries) for cb in compiled)
        self._unfrozen_entries += built
        if self._unfrozen_entries >= FREEZE_ENTRIES:
            self._freeze_due = True
            self._big = self._big or built >= FREEZE_ENTRIES
            self._unfrozen_entries = 0
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

    def gauges(self) -> None:
        mt = self.metrics
        mt.set("lorescan_chats_cached", len(self.chats))
        mt.set("lorescan_chat_cache_bytes", self.chats.nbytes)
        mt.follow_store(self.store)
        mt.follow_bodies(self.bodies)
        mt.sample_process()
