"""A one-line progress bar for ``lorescan replay`` on long chats: drawn on a terminal only
(never into a pipe or a file), redrawn at most ten times a second, erased when done."""
from __future__ import annotations

import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``update(done, total)`` redraws ``replay [#####-----] 50/100 turns``; :meth:`close`
    erases it. Silent unless ``out`` is a terminal and there are at least ``min_total`` steps."""

    WIDTH = 30

    def __init__(self, out: TextIO | None, *, min_total: int = 50, label: str = "replay",
                 interval: float = 0.1) -> None:
        isatty = getattr(out, "isatty", None)
        self.out = out if out is not None and callable(isatty) and isatty() else None
        self.min_total, self.label, self.interval = min_total, label, interval
        self.last = float("-inf")
        self.drawn = 0

    def update(self, done: int, total: int) -> None:
        if self.out is None or total < self.min_total:
            return
        now = time.monotonic()
        if done < total and now - self.last < self.interval:
            return
        self.last = now
        filled = self.WIDTH * done // total
        line = f"{self.label} [{'#' * filled}{'-' * (self.WIDTH - filled)}] {done}/{total} turns"
        self.out.write("\r" + line.ljust(self.drawn))
        self.out.flush()
        self.drawn = len(line)

    def close(self) -> None:
        if self.out is not None and self.drawn:
            self.out.write("\r" + " " * self.drawn + "\r")
            self.out.flush()
            self.drawn = 0
