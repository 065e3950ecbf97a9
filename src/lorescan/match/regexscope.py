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

**Cost.** :class:`RegexBudget` bounds the regex work of one scan or slot run, and whether a
key matched never depends on how busy the machine is or how many threads scan at once: no
clock enters the decision. Every evaluation has a nominal cost that is a pure function of
(pattern, text), :meth:`lorescan.js.regex.JSRegex.cost` (see :mod:`lorescan.js.regex.linear`):

* a regex RE2 can run exactly (most keys: no lookaround, backreference or property escape)
  runs there in linear time, and costs its worst case, ``bytes x program size`` RE2 steps;
* any other backtracks on ``regex`` and costs the bound its parse tree gives (the steps of
  the search tree from every start, ``C * (n+1)**d`` for ``n`` characters), or has no bound
  (a variable quantifier over a body that can match in several ways, ``(a|aa)+\\1``).

An evaluation whose cost is more than what is left of the scan's allowance (or more than
the per-evaluation cap) is not run: it is *cut off*, reported, never read or cached as "no
match", and the same text and key are cut off the same way on every run and every machine.
An evaluation that runs is charged its cost. A backtracking evaluation keeps a backstop that
only a wrong bound could reach: ``regex``'s own timeout on each call into it (20 times the
nominal cost, at least 1 s; no Python clock is read here).
"""
from __future__ import annotations

from ..js.regex import JSRegex, JSRegexError, JSText, RegexTimeout, RegexTooComplex
from ..js.regex import _compile_regex_key  # a split pattern's compile (regex_key's, for a key already split)
from ..limits import DEFAULT_LIMITS, Limits

__all__ = ["RegexBudget", "regex_hazard"]

_BACKSTOP = 20.0           # wall seconds per nominal second a backtracking evaluation may take at most
_MIN_BACKSTOP = 1.0


def regex_hazard(pattern: str, flags: str, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The catastrophic-backtracking shape of a JS regex, or None: nested unbounded
    quantifiers (``(a+)+``, ``(\\w+\\s?)*``) or an unbounded quantifier over alternatives
    where one starts the other (``(a|aa)+``). Syntactic and advisory (for lint and
    ``CompiledKeys.regex_hazards``); None also for a pattern that does not compile or is
    over the limits."""
    try:
        return _compile_regex_key(pattern, flags, max_length=limits.max_regex_length,
                                 max_nesting=limits.max_regex_nesting,
                                 max_expansion=limits.max_regex_expansion).hazard
    except (JSRegexError, RegexTooComplex):
        return None


class RegexBudget:
    """The regex work one scan (or one slot run) may do, in nominal seconds (:meth:`JSRegex.cost`).

    ``seconds``: the whole scan's allowance (``Limits.regex_time_per_scan``); ``per_eval``:
    the most one evaluation may cost (None: the rest of the allowance). One budget per scan,
    used by the scan's thread only. Nothing here reads a clock: the same evaluations in the
    same order are cut off the same way everywhere.
    """

    __slots__ = ("seconds", "per_eval", "left", "cut")

    def __init__(self, seconds: float = DEFAULT_LIMITS.regex_time_per_scan, per_eval: float | None = None) -> None:
        self.seconds = seconds
        self.per_eval = per_eval
        self.left = seconds
        self.cut: dict[str, float] = {}      # regex source "/p/f" -> nominal ms of the cut evaluation

    def search(self, rx: JSRegex, text: str | JSText) -> bool | None:
        """``rx.search(text)``, or None when the evaluation was cut off (recorded in ``cut``)."""
        if not isinstance(text, JSText):
            text = JSText(text)
        cap = self.left if self.per_eval is None else min(self.left, self.per_eval)
        cost = rx.cost(text)
        found: bool | None = None
        if cost <= cap:
            self.left -= cost
            try:
                found = rx.search(text, timeout=max(_MIN_BACKSTOP, _BACKSTOP * cost), per_call=True)
            except RegexTimeout:         # out of memory, or past the backstop: a wrong bound
                found = None
        if found is None:
            key = f"/{rx.source}/{rx.flags}"
            self.cut[key] = max(self.cut.get(key, 0.0), min(cost, 1e9) * 1000)
        return found

    def describe(self, raw: str, rx: JSRegex) -> str:
        """The report line of a cut-off key: ``regex key … was cut off after N ms …``."""
        ms = self.cut.get(f"/{rx.source}/{rx.flags}", 0.0)
        plan = rx.plan
        if plan.re2 is None and plan.nodes is None:
            why = f"it needs backtracking ({plan.reason}) and has no bound on its work ({plan.unbounded})"
        else:
            why = f"its cost bound, {ms:,.0f} ms (nominal), is more than was left of the scan's regex allowance"
        return (f"regex key {raw!r} was cut off after 0 ms of work: {why}; its entry is treated as not matched "
                f"by it this turn (the same text is cut off the same way on every run)")
