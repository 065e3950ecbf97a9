"""Probability and the token budget (docs/sillytavern-mode.md#st-budget): which of a loop's pending
entries are admitted, and what each admitted content costs."""
from __future__ import annotations

import math
from typing import Callable

from ..macros import expand_content
from ..tokens import ConcatCount, TextCount, count_text
from .settings import STSettings
from .tables import EntryInfo, UnitCounts
from .turn import Turn, note

__all__ = ["turn_budget", "count_unit", "admit", "extend_budget_text"]


def turn_budget(settings: STSettings, max_context: int) -> int:
    """The World Info token budget of one generation.

    Args:
        settings: ``budget_percent`` of ``max_context``, capped at ``budget_cap`` when that is set.
        max_context: the model's context size in tokens.

    Returns:
        The budget, at least 1.
    """
    raw = settings.budget_percent * max_context / 100
    budget = math.floor(raw + 0.5) if math.isfinite(raw) else 0
    if budget == 0:
        budget = 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    return budget


def count_unit(units: UnitCounts, counter: Callable[[str], int], info: EntryInfo, content: str,
               limit: int | None) -> tuple[str, TextCount]:
    """``content + "\\n"`` and its count, counted once per entry and content for the engine's life.

    Args:
        units: the engine's count cache.
        counter: the token counter (a different one than the cache was filled with empties it).
        info: the entry.
        content: its content this turn (after macro substitution).
        limit: only whether the count reaches it matters (a long content may then be counted
            only that far; such a floor is kept and reused while it settles the question).
    """
    owner, cache = units.state
    if owner is not counter:               # first use, or the caller swapped the counter
        cache = {}
        units.state = (counter, cache)
    found = cache.get(info.gpos)
    if found is not None and (found[0] is content or found[0] == content):
        tc = found[2]
        if tc.exact or (limit is not None and tc.total >= limit):
            return found[1], tc
        unit = found[1]
    else:
        unit = content + "\n"
    # a count the compiled book stored for this counter (a cold engine's first count), else count it
    tc = units.stored(counter, info, content, unit) or count_text(counter, unit, limit=limit)
    cache[info.gpos] = (content, unit, tc)
    return unit, tc


def admit(turn: Turn, pending: list[EntryInfo], t0: int, loop: int) -> list[EntryInfo]:
    """Roll each pending entry's probability and fit it into the budget, in order.

    Args:
        turn: the turn; admitted entries join ``turn.activated``, a failed roll joins
            ``turn.failed``, and the first entry that reaches the budget sets ``turn.overflow``.
        pending: the loop's entries left by the groups.
        t0: the budget text's count when the loop started.
        loop: the 1-based loop number (for the notes).

    Returns:
        The entries admitted, in order.
    """
    tables = turn.tables
    k = sum(1 for s in pending if s.entry.ignore_budget)
    # docs/sillytavern-mode.md#st-budget counts the concatenation buf = content + "\n" + content + "\n" ...; its
    # count is built from the entries' cached counts (tokens.ConcatCount). Counting stops
    # once the budget is certainly reached; after an overflow nothing is counted.
    running = ConcatCount(turn.counter)
    remaining = turn.budget - t0
    owner, counts = tables.units.state   # the usual case read inline: a counted, unchanged content
    if owner is not running.counter:
        counts = {}
    units = turn.units
    substitute = turn.substitute
    admitted: list[EntryInfo] = []
    for i, s in enumerate(pending):
        ent = s.entry
        if ent.ignore_budget:
            k -= 1
        if turn.overflow and not ent.ignore_budget:
            if k > 0:
                note(turn, s, "not_activated", "budget", "the budget was already used up", loop)
                continue
            for rest in pending[i:]:
                if not rest.entry.ignore_budget or rest is s:
                    note(turn, rest, "not_activated", "budget", "the budget was already used up", loop)
            break
        if ent.use_probability and ent.probability != 100 and s.world_uid not in turn.sticky:
            roll = turn.random()
            prob = ent.probability
            if not (isinstance(prob, (int, float)) and roll * 100 <= prob):
                turn.failed.add(s.world_uid)
                note(turn, s, "not_activated", "probability", f"roll {roll * 100:.4g} is above probability {prob!r}",
                     loop)
                continue
        content = s.content
        if substitute is not None:
            content = expand_content(substitute, content, tables.limits, source=s.world, entry=ent.uid)
            turn.contents[s.world_uid] = content
        if not turn.overflow:
            found = counts.get(s.gpos)
            if found is not None and found[0] is content and found[2].exact:
                unit, tc = found[1], found[2]
            else:
                unit, tc = count_unit(tables.units, turn.counter, s, content, remaining - running.total)
            units[s.world_uid] = (unit, tc)
            total = t0 + running.append(unit, tc, limit=remaining)
            if not ent.ignore_budget and total >= turn.budget:
                turn.overflow = True
                exact = running.exact and (turn.budget_text is None or turn.budget_text.exact)
                note(turn, s, "not_activated", "budget",
                     f"{'' if exact else 'at least '}{total} tokens would reach the budget of {turn.budget}", loop)
                continue
        turn.activated[s.world_uid] = s
        turn.activated_order.append(s)
        admitted.append(s)
    return admitted


def extend_budget_text(turn: Turn, counted: list[EntryInfo]) -> None:
    """Put a loop's counted contents in front of the budget text (docs/sillytavern-mode.md#st-loop).

    The budget text becomes ``"\\n".join(counted) + "\\n" + budget text`` when that join is
    not ``""``. Once the budget has overflowed nothing reads its count again.
    """
    contents = turn.contents
    if not turn.overflow and counted and (len(counted) > 1 or contents.get(counted[0].world_uid, counted[0].content)):
        done = turn.units
        units = [done.get(s.world_uid) or count_unit(turn.tables.units, turn.counter, s, contents.get(s.world_uid, s.content),
                                               turn.budget)
                 for s in counted]
        assert turn.budget_text is not None
        turn.budget_text_tokens = turn.budget_text.prepend(units, limit=turn.budget)
