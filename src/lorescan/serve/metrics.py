"""Prometheus metrics on ``prometheus_client``, summed across the worker processes.

``lorescan serve`` makes a temporary directory of its own and names it in
``PROMETHEUS_MULTIPROC_DIR`` before any worker starts (:func:`multiprocess_dir`); each worker's
numbers then live in memory-mapped files there (``prometheus_client``'s multiprocess mode), and
``/metrics``, in whichever worker answers it, reads them all: counters and histograms summed over
every worker that ever ran (a restarted worker's counts stay), gauges summed over the live ones.
Process metrics (``process_*``) are per worker, labelled ``pid``. Without that variable (an app
built in-process) a worker has its own registry with the standard process collector.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Any

__all__ = ["Metrics", "LATENCY_BUCKETS", "METRICS", "multiprocess_dir", "MULTIPROC_ENV"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# name -> (kind, help, label names)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "lorescan_requests_total": ("counter", "HTTP requests answered, by route, method and status",
                                ("route", "method", "status")),
    "lorescan_request_seconds": ("histogram", "Time from request start to response, by route", ("route",)),
    "lorescan_books_loaded": ("gauge", "Compiled books held in memory", ()),
    "lorescan_books_loaded_bytes": ("gauge", "Stored-file bytes of the compiled books held in memory", ()),
    "lorescan_book_cache_capacity_bytes": ("gauge", "Bound of the in-memory compiled-book cache (--book-cache-mb)",
                                           ()),
    "lorescan_book_cache_hits_total": ("counter", "Compiled books found in the in-memory cache", ()),
    "lorescan_book_cache_misses_total": ("counter", "Compiled books not in memory: read from the books "
                                                    "directory or compiled", ()),
    "lorescan_book_cache_hit_ratio": ("gauge", "Per worker: book-cache hits / (hits + misses) since it started", ()),
    "lorescan_book_file_loads_total": ("counter", "Compiled books read from the books directory", ()),
    "lorescan_book_compiles_total": ("counter", "Books compiled (uploads and new match rules)", ()),
    "lorescan_engines_built_total": ("counter", "Engines built for a new combination of books and settings", ()),
    "lorescan_chat_cache_hits_total": ("counter", "Per-chat hit cache: texts whose key hits were reused", ()),
    "lorescan_chat_cache_misses_total": ("counter", "Per-chat hit cache: texts scanned", ()),
    "lorescan_chats_cached": ("gauge", "Chats whose hit cache is held in memory", ()),
    "lorescan_chat_cache_bytes": ("gauge", "Estimated bytes of the per-chat hit caches", ()),
    "lorescan_regex_timeouts_total": ("counter", "Regex keys cut off by the time limit and reported", ()),
    "lorescan_request_timeouts_total": ("counter", "Requests answered 503 at the per-request time limit", ()),
    "lorescan_body_bytes_held": ("gauge", "Request-body bytes the worker's requests hold now (--max-inflight-mb "
                                          "bounds them)", ()),
    "lorescan_body_budget_bytes": ("gauge", "Bound of the request-body bytes a worker holds at once "
                                            "(--max-inflight-mb)", ()),
    "lorescan_body_budget_refusals_total": ("counter", "Requests answered 503 because the worker held its "
                                                       "--max-inflight-mb of request bodies", ()),
}
# gauges that are one worker's own (a ratio does not add up): one series per pid
_PER_WORKER = {"lorescan_book_cache_hit_ratio"}
_PROCESS = {   # the standard process collector's series, kept per worker in multiprocess mode
    "process_resident_memory_bytes": "Resident memory size in bytes",
    "process_virtual_memory_bytes": "Virtual memory size in bytes",
    "process_open_fds": "Number of open file descriptors",
    "process_max_fds": "Maximum number of open file descriptors",
    "process_start_time_seconds": "Start time of the process since unix epoch in seconds",
}
_LIVE_FILE = re.compile(r"gauge_live\w*_(\d+)\.db$")


def multiprocess_dir() -> str:
    """Make the server's own metrics directory and name it in ``PROMETHEUS_MULTIPROC_DIR`` (the
    workers inherit it); the caller removes it with :func:`remove_multiprocess_dir` at exit."""
    path = tempfile.mkdtemp(prefix="lorescan-metrics-")
    os.environ[MULTIPROC_ENV] = path
    return path


def remove_multiprocess_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if os.environ.get(MULTIPROC_ENV) == path:
        del os.environ[MULTIPROC_ENV]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Metrics:
    """One worker's metrics: :meth:`inc`, :meth:`set`, :meth:`observe` by name (see :data:`METRICS`)
    and :meth:`render` (the Prometheus text of every worker)."""

    def __init__(self) -> None:
        import prometheus_client as pc  # import-cost: the serve extra, loaded by the worker that serves
        from prometheus_client import multiprocess  # import-cost: as above
        self._pc = pc
        self._multiprocess = multiprocess
        self.directory = os.environ.get(MULTIPROC_ENV) or None
        if self.directory and pc.values.ValueClass is pc.values.MutexValue:
            raise RuntimeError(f"prometheus_client was imported before {MULTIPROC_ENV} was set: "
                               "the workers' metrics would not be shared")
        self.pid = str(os.getpid())
        if self.directory:
            self._forget_dead_workers()
        self.registry = pc.CollectorRegistry()
        self._metrics: dict[str, Any] = {}
        for name, (kind, help_text, labels) in METRICS.items():
            kw: dict[str, Any] = {"labelnames": labels, "registry": self.registry}
            if kind == "counter":
                self._metrics[name] = pc.Counter(name, help_text, **kw)
            elif kind == "histogram":
                self._metrics[name] = pc.Histogram(name, help_text, buckets=LATENCY_BUCKETS, **kw)
            elif name in _PER_WORKER:
                self._metrics[name] = pc.Gauge(name, help_text, ["pid"], registry=self.registry,
                                               multiprocess_mode="liveall")
            else:
                self._metrics[name] = pc.Gauge(name, help_text, multiprocess_mode="livesum", **kw)
        self._help = {**{n: h for n, (_, h, _) in METRICS.items()}, **_PROCESS,
                      "process_cpu_seconds": "Total user and system CPU time spent in seconds"}
        self._process = pc.ProcessCollector(registry=None)
        self._cpu_seen = 0.0
        self._followed: dict[str, int] = {}
        if self.directory:
            self._process_gauges = {n: pc.Gauge(n, h, ["pid"], registry=self.registry, multiprocess_mode="liveall")
                                    for n, h in _PROCESS.items()}
            self._cpu = pc.Counter("process_cpu_seconds", self._help["process_cpu_seconds"], ["pid"],
                                   registry=self.registry)
        else:
            self.registry.register(self._process)

    def _forget_dead_workers(self) -> None:
        """Drop the live-gauge files of workers that died without withdrawing (kill -9)."""
        assert self.directory is not None
        for f in os.listdir(self.directory):
            found = _LIVE_FILE.match(f)
            if found and not _alive(int(found.group(1))):
                self._multiprocess.mark_process_dead(int(found.group(1)), self.directory)

    def _child(self, name: str, labels: dict[str, str]) -> Any:
        metric = self._metrics[name]
        if name in _PER_WORKER:
            return metric.labels(pid=self.pid)
        return metric.labels(**labels) if labels else metric

    def child(self, name: str, **labels: str) -> Any:
        """The series of ``name`` for ``labels`` (keep it to count on it often: a lookup by labels
        costs more than the count)."""
        return self._child(name, labels)

    def inc(self, name: str, value: float = 1, **labels: str) -> None:
        """Add ``value`` (not negative) to a counter."""
        if value:
            self._child(name, labels).inc(value)

    def set(self, name: str, value: float, **labels: str) -> None:
        """Set a gauge (this worker's part of it)."""
        self._child(name, labels).set(value)

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Count one observation in a histogram."""
        self._child(name, labels).observe(seconds)

    def follow_store(self, store: Any) -> None:
        """Bring the book-cache series up to ``store``'s (a BookStore's) own counts and sizes."""
        self.set("lorescan_books_loaded", store.loaded)
        self.set("lorescan_books_loaded_bytes", store.nbytes)
        self.set("lorescan_book_cache_capacity_bytes", store.cache_bytes)
        lookups = store.hits + store.misses
        self.set("lorescan_book_cache_hit_ratio", store.hits / lookups if lookups else 0.0)
        for name, total in (("lorescan_book_file_loads_total", store.file_loads),
                            ("lorescan_book_compiles_total", store.compiles),
                            ("lorescan_book_cache_hits_total", store.hits),
                            ("lorescan_book_cache_misses_total", store.misses)):
            self.inc(name, total - self._followed.get(name, 0))     # the store counts; the counter follows
            self._followed[name] = total

    def follow_bodies(self, budget: Any) -> None:
        """Bring the body-budget series up to ``budget``'s (a BodyBudget's) held bytes and refusals."""
        self.set("lorescan_body_bytes_held", budget.used)
        self.set("lorescan_body_budget_bytes", budget.capacity)
        name = "lorescan_body_budget_refusals_total"
        self.inc(name, budget.refused - self._followed.get(name, 0))
        self._followed[name] = budget.refused

    def sample_process(self) -> None:
        """Copy this worker's process numbers (memory, CPU, file descriptors) into its series."""
        if not self.directory:
            return                  # the registry's own process collector reads them when scraped
        for family in self._process.collect():
            for s in family.samples:
                if s.name == "process_cpu_seconds_total":
                    self._cpu.labels(pid=self.pid).inc(max(0.0, s.value - self._cpu_seen))
                    self._cpu_seen = max(self._cpu_seen, s.value)
                elif s.name in self._process_gauges:
                    self._process_gauges[s.name].labels(pid=self.pid).set(s.value)

    def render(self) -> bytes:
        """The Prometheus text format (0.0.4) of every worker's numbers."""
        pc = self._pc
        if not self.directory:
            return pc.generate_latest(self.registry)
        registry = pc.CollectorRegistry()
        registry.register(_Documented(self._multiprocess.MultiProcessCollector(None, path=self.directory),
                                      self._help))
        return pc.generate_latest(registry)

    def withdraw(self) -> None:
        """At a worker's exit: its live gauges leave the sums (its counters stay)."""
        if self.directory:
            self._multiprocess.mark_process_dead(os.getpid(), self.directory)


class _Documented:
    """The multiprocess collector's families with their help texts (it reads none from the files)."""

    def __init__(self, inner: Any, help_texts: dict[str, str]) -> None:
        self.inner = inner
        self.help = help_texts

    def collect(self) -> Any:
        for family in self.inner.collect():
            family.documentation = (self.help.get(family.name) or self.help.get(family.name + "_total")
                                    or family.documentation)
            yield family
