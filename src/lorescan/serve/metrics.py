"""Prometheus metrics in the text exposition format (version 0.0.4), written directly.

No client library: the service needs counters, gauges and fixed-bucket histograms, and
writing them is a few lines. With several workers, each worker keeps its own numbers and
publishes a snapshot to ``<books-dir>/.metrics/<pid>.json`` at most once a second; ``/metrics``
answers the sum over the live workers (a worker that died takes its counts with it, which
Prometheus reads as a counter reset).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Iterable

__all__ = ["Metrics", "LATENCY_BUCKETS", "render"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HELP = {
    "lorescan_requests_total": ("counter", "HTTP requests answered, by route, method and status"),
    "lorescan_request_seconds": ("histogram", "Time from request start to response, by route"),
    "lorescan_books_loaded": ("gauge", "Compiled books held in memory"),
    "lorescan_books_loaded_bytes": ("gauge", "Stored-file bytes of the compiled books held in memory"),
    "lorescan_book_file_loads_total": ("counter", "Compiled books read from the books directory"),
    "lorescan_book_compiles_total": ("counter", "Books compiled (uploads and new match rules)"),
    "lorescan_engines_built_total": ("counter", "Engines built for a new combination of books and settings"),
    "lorescan_chat_cache_hits_total": ("counter", "Per-chat hit cache: texts whose key hits were reused"),
    "lorescan_chat_cache_misses_total": ("counter", "Per-chat hit cache: texts scanned"),
    "lorescan_chats_cached": ("gauge", "Chats whose hit cache is held in memory"),
    "lorescan_chat_cache_bytes": ("gauge", "Estimated bytes of the per-chat hit caches"),
    "lorescan_regex_timeouts_total": ("counter", "Regex keys cut off by the time limit and reported"),
    "lorescan_request_timeouts_total": ("counter", "Requests answered 503 at the per-request time limit"),
}


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    items = [f'{k}="{_escape(v)}"' for k, v in pairs]
    return "{" + ",".join(items) + "}" if items else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """One worker's numbers. Counters and histograms are keyed by (name, label pairs)."""

    def __init__(self, publish_dir: str | None = None) -> None:
        self.counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.hists: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
        self.publish_dir = publish_dir
        self._published = 0.0

    def inc(self, name: str, value: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.counters[key] = self.counters.get(key, 0) + value

    def set(self, name: str, value: float, **labels: str) -> None:
        self.gauges[(name, tuple(sorted(labels.items())))] = value

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        h = self.hists.get(key)
        if h is None:
            h = self.hists[key] = [0.0] * (len(LATENCY_BUCKETS) + 2)   # buckets..., count, sum
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                h[i] += 1
                break
        h[-2] += 1
        h[-1] += seconds

    def snapshot(self) -> dict[str, Any]:
        """This worker's numbers as plain JSON."""
        # list(...) copies each table in one C call: the engine thread may add a key meanwhile
        return {"counters": [[n, list(map(list, lab)), v] for (n, lab), v in list(self.counters.items())],
                "gauges": [[n, list(map(list, lab)), v] for (n, lab), v in list(self.gauges.items())],
                "hists": [[n, list(map(list, lab)), list(v)] for (n, lab), v in list(self.hists.items())]}

    def maybe_publish(self, *, force: bool = False) -> None:
        """Write this worker's snapshot for the other workers' /metrics (at most once a second)."""
        if self.publish_dir is None:
            return
        now = time.monotonic()
        if not force and now - self._published < 1.0:
            return
        self._published = now
        os.makedirs(self.publish_dir, exist_ok=True)
        path = os.path.join(self.publish_dir, f"{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.snapshot(), fh)
        os.replace(tmp, path)

    def withdraw(self) -> None:
        """Remove this worker's published snapshot (at shutdown)."""
        if self.publish_dir is not None:
            try:
                os.unlink(os.path.join(self.publish_dir, f"{os.getpid()}.json"))
            except OSError:
                pass

    def gather(self) -> list[dict[str, Any]]:
        """Snapshots of every live worker (this one's current numbers included)."""
        snaps = [self.snapshot()]
        if self.publish_dir is None or not os.path.isdir(self.publish_dir):
            return snaps
        me = os.getpid()
        for f in os.listdir(self.publish_dir):
            if not f.endswith(".json"):
                continue
            try:
                pid = int(f[:-5])
            except ValueError:
                continue
            if pid == me:
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                try:
                    os.unlink(os.path.join(self.publish_dir, f))
                except OSError:
                    pass
                continue
            except PermissionError:
                pass
            try:
                with open(os.path.join(self.publish_dir, f)) as fh:
                    snaps.append(json.load(fh))
            except (OSError, ValueError):
                continue
        return snaps


def render(snapshots: list[dict[str, Any]]) -> str:
    """The Prometheus text of the sum of ``snapshots``."""
    counters: dict[tuple[str, tuple], float] = {}
    gauges: dict[tuple[str, tuple], float] = {}
    hists: dict[tuple[str, tuple], list[float]] = {}
    for snap in snapshots:
        for n, lab, v in snap["counters"]:
            key = (n, tuple(map(tuple, lab)))
            counters[key] = counters.get(key, 0) + v
        for n, lab, v in snap["gauges"]:
            key = (n, tuple(map(tuple, lab)))
            gauges[key] = gauges.get(key, 0) + v
        for n, lab, v in snap["hists"]:
            key = (n, tuple(map(tuple, lab)))
            cur = hists.setdefault(key, [0.0] * len(v))
            for i, x in enumerate(v):
                cur[i] += x
    lines: list[str] = []
    for name, (kind, help_text) in HELP.items():
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        if kind == "histogram":
            for (n, lab), h in sorted(hists.items()):
                if n != name:
                    continue
                acc = 0.0
                for bound, c in zip(LATENCY_BUCKETS, h):
                    acc += c
                    lines.append(f"{name}_bucket{_labels(lab + (('le', repr(bound)),))} {_num(acc)}")
                lines.append(f"{name}_bucket{_labels(lab + (('le', '+Inf'),))} {_num(h[-2])}")
                lines.append(f"{name}_count{_labels(lab)} {_num(h[-2])}")
                lines.append(f"{name}_sum{_labels(lab)} {h[-1]!r}")
            continue
        table = counters if kind == "counter" else gauges
        rows = [(lab, v) for (n, lab), v in sorted(table.items()) if n == name]
        if not rows and kind == "counter":
            rows = [((), 0)]
        for lab, v in rows:
            lines.append(f"{name}{_labels(lab)} {_num(v)}")
    return "\n".join(lines) + "\n"
