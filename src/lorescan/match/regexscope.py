"""What a regex key can see, and what it may spend: per-text evaluation and the scan's budget.

**Scope.** A SillyTavern haystack (docs/sillytavern-mode.md#st-scan-text) is ``"\\x01" + t0 + "\\n\\x01" + t1 + ...``.
Cut it at the ``"\\n"`` of every joiner and each piece is ``"\\x01" + t_i``. A regex that is
*line-local* (:attr:`lorescan.js.regex.JSRegex.line_local`, decided once by the translator on
the parsed pattern) has no atom that can consume U+000A, lookarounds included, no ``^``/``$``
without ``m`` (whole-input anchors) and no ``y``. Then:

* every match, and everything its lookarounds consume, lies inside one piece;
* beyond a piece's edges its assertions see U+000A or the input's edge, and a line-local
  regex cannot tell them apart: neither can be consumed, both are non-word characters for
  ``\\b``, and ``^``/``$`` under ``m`` hold at both;
* every position of the haystack is a position of some piece.

So the regex matches the haystack iff it matches ``"\\x01" + t_i`` for some text ``t_i``: that
per-text answer is cached with the text (``ChatScan``) and a window's answer is a union. A
regex that is not line-local is evaluated on the joined haystack (once per window). In
lorebook-slot mode every text is searched on its own, so every regex is per text there.

**Time.** :class:`RegexBudget` bounds the regex time of one scan or slot run. It charges
thread CPU time (``time.thread_time``), so what a key costs does not depend on how busy the
machine is. The ``regex`` module only offers a wall-clock ``timeout``; each evaluation gets
one equal to its remaining CPU allowance, and when it runs out while the thread got less CPU
than that (the machine is loaded), the evaluation is started again with the remaining
allowance scaled by the wall/CPU ratio just observed. A key that needs well under its
allowance therefore gives the same answer on a loaded machine; an evaluation that uses up
its allowance is *cut off*: reported, never read or cached as "no match".
"""
from __future__ import annotations

import time

from ..js.regex import JSRegex, JSRegexError, JSText, RegexTimeout, RegexTooComplex, compile_regex_key
from ..limits import DEFAULT_LIMITS, Limits

__all__ = ["RegexBudget", "regex_hazard"]

_MIN_WALL = 0.005          # seconds: the shortest wall-clock timeout given to one attempt
_MAX_ATTEMPTS = 6


def regex_hazard(pattern: str, flags: str, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The catastrophic-backtracking shape of a JS regex, or None: nested unbounded
    quantifiers (``(a+)+``, ``(\\w+\\s?)*``) or an unbounded quantifier over alternatives
    where one starts the other (``(a|aa)+``). Syntactic and advisory (for lint and
    ``CompiledBook.regex_hazards``); None also for a pattern that does not compile or is
    over the limits."""
    try:
        return compile_regex_key(pattern, flags, max_length=limits.max_regex_length,
                                 max_nesting=limits.max_regex_nesting,
                                 max_expansion=limits.max_regex_expansion).hazard
    except (JSRegexError, RegexTooComplex):
        return None


class RegexBudget:
    """The regex time one scan (or one slot run) may spend, in thread CPU seconds.

    ``seconds``: the whole scan's allowance (``Limits.regex_time_per_scan``); ``per_eval``:
    the most one evaluation may take (None: the rest of the allowance). One budget per scan,
    used by the scan's thread only.
    """

    __slots__ = ("seconds", "per_eval", "left", "cut")

    def __init__(self, seconds: float = DEFAULT_LIMITS.regex_time_per_scan, per_eval: float | None = None) -> None:
        self.seconds = seconds
        self.per_eval = per_eval
        self.left = seconds
        self.cut: dict[str, float] = {}      # regex source "/p/f" -> CPU ms of the cut evaluation

    def search(self, rx: JSRegex, text: str | JSText) -> bool | None:
        """``rx.search(text)``, or None when the evaluation was cut off (recorded in ``cut``)."""
        cap = self.left if self.per_eval is None else min(self.left, self.per_eval)
        used = 0.0
        found: bool | None = None
        stretch = 1.0                       # wall seconds per CPU second seen so far
        for _ in range(_MAX_ATTEMPTS):
            allowance = cap - used
            if allowance <= 0:
                break
            wall = max(allowance * stretch, _MIN_WALL)
            cpu0 = time.thread_time()
            out_of_memory = False
            try:
                found = rx.search(text, timeout=wall)
            except RegexTimeout as exc:
                found, out_of_memory = None, isinstance(exc.__cause__, MemoryError)
            cpu = time.thread_time() - cpu0
            used += cpu
            if found is not None or out_of_memory:      # never retry what exhausted memory
                break
            if cpu >= 0.9 * allowance:      # it had its CPU time: really cut off
                break
            stretch = max(stretch, 1.25 * wall / max(cpu, 1e-4))    # starved: the wall ran out first
        self.left -= used
        if found is None:
            key = f"/{rx.source}/{rx.flags}"
            self.cut[key] = max(self.cut.get(key, 0.0), used * 1000)
        return found

    def describe(self, raw: str, rx: JSRegex) -> str:
        """The report line of a cut-off key: ``regex key … was cut off after N ms``."""
        ms = self.cut.get(f"/{rx.source}/{rx.flags}", 0.0)
        why = "" if ms >= 1 else " (the scan's regex time was used up)"
        return (f"regex key {raw!r} was cut off after {ms:.0f} ms of CPU time{why}; "
                f"its entry is treated as not matched by it this turn")
