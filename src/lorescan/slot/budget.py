"""The token budget of lorebook-slot mode (docs/slot-mode.md#slot-budget): what each activated
entry costs, and which of them fit.

Counts are cached per pool entry, so a content is tokenised once however many turns insert
it; a content that can only exceed the budget is counted only until it certainly does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..tokens import count_upto
from .gates import Run

__all__ = ["TokenCache", "fit_budget"]


class TokenCache:
    """The last token count of each pool entry's text: ``(text, count, exact)`` per entry.

    A whole tuple is written at once, so threads sharing an engine see a count or none.

    Args:
        count_tokens: the model's tokenizer, any ``str -> int``.
        size: the number of pool entries.
    """

    __slots__ = ("count_tokens", "_slots")

    def __init__(self, count_tokens: Callable[[str], int], size: int) -> None:
        self.count_tokens = count_tokens
        self._slots: list[tuple[str, int, bool] | None] = [None] * size

    def count(self, pool_index: int, text: str, limit: int | None) -> tuple[int, bool]:
        """(count, exact) of ``text``, pool entry ``pool_index``'s content or its substituted
        form. ``limit``: only whether the count exceeds it matters, so a long text is counted
        only until it certainly does (then the count is a floor > limit, and not exact)."""
        cached = self._slots[pool_index]
        if cached is not None and (cached[0] is text or cached[0] == text) and (
                cached[2] or (limit is not None and cached[1] > limit)):
            return cached[1], cached[2]
        count, exact = count_upto(self.count_tokens, text, None if limit is None else limit + 1)
        self._slots[pool_index] = (text, count, exact)
        return count, exact


def fit_budget(activated: Sequence[Run], budget: int, count: Callable[[int, str, int], tuple[int, bool]]) -> int:
    """docs/slot-mode.md#slot-budget: rank by (no @@ignore_on_max_context first, priority desc, order desc,
    pool position) and keep the longest prefix that fits the budget.

    Args:
        activated: the entries that activated and passed their roll; each gets its ``tokens``,
            its outcome (``"inserted"`` or ``"dropped_budget"``) and the reason.
        budget: the pool's token budget.
        count: ``(pool index, text, limit) -> (count, exact)``, e.g. :meth:`TokenCache.count`.

    Returns:
        The tokens of the inserted entries.
    """
    floors = set()
    for r in activated:
        r.tokens, exact = count(r.e.pool_index, r.text, budget)
        if not exact:
            floors.add(id(r))   # counted only until it certainly exceeds the budget
    ranked = sorted(activated, key=lambda r: (r.e.decorators.ignore_on_max_context, -r.e.priority,
                                              -r.e.order, r.e.position))
    used, cut_at = 0, None
    for rank, r in enumerate(ranked, 1):
        assert r.tokens is not None
        if cut_at is None and used + r.tokens <= budget:
            used += r.tokens
            r.outcome = "inserted"
            r.reason = f"{r.reason}; fits the budget ({used} of {budget} tokens)"
        elif cut_at is None:
            cut_at = rank
            r.outcome = "dropped_budget"
            r.reason = (f"{r.reason}; {used} + {'at least ' if id(r) in floors else ''}{r.tokens} "
                        f"tokens exceed the budget of "
                        f"{budget} (rank {rank})")
        else:
            r.outcome = "dropped_budget"
            r.reason = (f"{r.reason}; ranked after the entry that overflowed the budget "
                        f"(rank {cut_at}): only the longest prefix is kept")
    return used
