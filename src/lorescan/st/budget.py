"""Probability and the token budget (docs/sillytavern-mode.md#st-budget): which of a loop's pending
entries are admitted, and what each admitted content costs."""
from __future__ import annotations

import math
from typing import Any, Callable

from ..macros import expand_content
from ..tokens import ConcatCount, PrependCount, TextCount, count_text
from .settings import STSettings
from .tables import EntryInfo, UnitCounts
from .turn import Turn, note

__all__ = ["turn_budget", "count_unit", "admit", "probability_passes", "probability_detail", "extend_budget_text", "start_budget_text", "JoinMemo", "join_memo"]

_MEMO_NODES = 512          # joins remembered per engine (emptied whole when reached): a node holds a count of its joined text, so a few MB at most
_MEMO_DEPTH = 64           # entries of one loop's admission remembered (a longer one is counted on as before)


class _Join:
    """One counted join: the count object after appending (or prepending) ``units`` to its
    parent's text, its total and exactness, and the joins that continue it by entry."""

    __slots__ = ("units", "count", "total", "exact", "children")

    def __init__(self, units: Any, count: Any) -> None:
        self.units = units
        self.count = count            # never changed once here: a turn continuing from it copies it
        self.total = count.total
        self.exact = count.exact
        self.children: dict[Any, _Join] = {}


class JoinMemo:
    """The counts of the budget's joins of entry units, kept for the engine's life.

    A steady chat activates the same entries turn after turn, so a loop's admission appends
    the same units (``ConcatCount``) and the budget text grows by the same loops
    (``PrependCount``) as last turn. Each join is a node of a tree keyed by the entries
    appended so far (a root per counter limit); a node holds the count object after the
    join, never changed again, so a turn that goes further copies it. A node is reused only
    when its unit strings and their counts are the very objects the turn has (the engine's
    unit cache hands out the same ones while a content is unchanged), so the counts are
    those a fresh count gives. Nodes are published whole (threads may share the memo); at
    ``_MEMO_NODES`` the memo starts again empty."""

    __slots__ = ("counter", "roots", "nodes")

    def __init__(self, counter: Callable[[str], int]) -> None:
        self.counter = counter
        self.roots: dict[tuple[str, int], _Join] = {}
        self.nodes = 0

    def root(self, kind: str, limit: int) -> _Join:
        """The empty text's node of ``kind`` (``"concat"`` or ``"prepend"``) under ``limit``."""
        found = self.roots.get((kind, limit))
        if found is None:
            if self.nodes >= _MEMO_NODES:
                self.roots, self.nodes = {}, 0
            count = ConcatCount(self.counter) if kind == "concat" else PrependCount(self.counter)
            found = self.roots[(kind, limit)] = _Join((), count)
            self.nodes += 1
        return found

    def child(self, node: _Join, key: Any, units: Any, count: Any) -> _Join:
        """Record ``count`` (a copy of ``node.count`` after the join) under ``node`` as ``key``."""
        found = _Join(units, count)
        if self.nodes < _MEMO_NODES:
            node.children[key] = found
            self.nodes += 1
        return found


def join_memo(units: UnitCounts, counter: Callable[[str], int]) -> JoinMemo:
    """The engine's :class:`JoinMemo` for ``counter`` (a new one when the counter changed)."""
    owner, cache, memo = units.state
    if owner is not counter or memo is None:
        if owner is not counter:
            cache = {}
        memo = JoinMemo(counter)
        units.state = (counter, cache, memo)
    return memo


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
    owner, cache, _ = units.state
    if owner is not counter:               # first use, or the caller swapped the counter
        cache = {}
        units.state = (counter, cache, None)
    found = cache.get(info.gpos)
    if found is not None and (found[0] is content or found[0] == content):
        tc = found[2]
        if tc.exact or (limit is not None and tc.total >= limit):
            return found[1], tc
        unit = found[1]
    else:
        unit = content + "\n"
    # a count the compiled book stored for this counter (a cold engine's first count), else count it
    # (a content its macros changed: from the stored count of its own, recounting what changed)
    tc = units.stored(counter, info, content, unit) or units.edited(counter, info, unit) \
        or count_text(counter, unit, limit=limit)
    cache[info.gpos] = (content, unit, tc)
    return unit, tc


def probability_passes(prob: object, roll: float) -> bool:
    """Whether a roll of ``random()`` = ``roll`` lets an entry of probability ``prob`` through."""
    return isinstance(prob, (int, float)) and roll * 100 <= prob


def probability_detail(prob: object, roll: float) -> str:
    """The note of an entry whose probability roll failed."""
    return f"roll {roll * 100:.4g} is above probability {prob!r}"


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
    remaining = turn.budget - t0
    memo = join_memo(tables.units, turn.counter)
    node = memo.root("concat", remaining)     # the loop's join so far (ConcatCount), from the memo
    depth, live = 0, None                     # its length; past _MEMO_DEPTH, the loop's own count
    run_total, run_exact = 0, True
    counts = tables.units.state[1]       # the usual case read inline: a counted, unchanged content
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
            if turn.rolls is not None:
                turn.rolls.append(("p", prob, s.world_uid, roll))
            if not probability_passes(prob, roll):
                turn.failed.add(s.world_uid)
                note(turn, s, "not_activated", "probability", probability_detail(prob, roll), loop)
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
                unit, tc = count_unit(tables.units, turn.counter, s, content, remaining - run_total)
            units[s.world_uid] = (unit, tc)
            if live is None:
                nxt = node.children.get(s.gpos)
                if nxt is None or nxt.units[0] is not unit or nxt.units[1] is not tc:
                    count = node.count.copy()
                    count.append(unit, tc, limit=remaining)
                    if depth < _MEMO_DEPTH:
                        nxt = memo.child(node, s.gpos, (unit, tc), count)
                    else:       # a long join: counted on from here, not remembered (each node copies its parts)
                        live = count
                if live is None:
                    assert nxt is not None
                    node, depth = nxt, depth + 1
                    run_total, run_exact = node.total, node.exact
            else:
                live.append(unit, tc, limit=remaining)
            if live is not None:
                run_total, run_exact = live.total, live.exact
            total = t0 + run_total
            if not ent.ignore_budget and total >= turn.budget:
                turn.overflow = True
                exact = run_exact and (turn.budget_text is None or turn.budget_text.exact)
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
        node = turn.budget_node
        assert node is not None
        key = tuple([s.gpos for s in counted])
        nxt = node.children.get(key)
        if nxt is None or not _same_units(nxt.units, units):
            count = node.count.copy()
            count.prepend(units, limit=turn.budget)
            nxt = join_memo(turn.tables.units, turn.counter).child(node, key, tuple(units), count)
        turn.budget_node = nxt
        turn.budget_text = nxt.count
        turn.budget_text_tokens = nxt.total


def start_budget_text(turn: Turn) -> None:
    """The turn's budget text, empty (docs/sillytavern-mode.md#st-loop): the memo's root of prepends."""
    node = join_memo(turn.tables.units, turn.counter).root("prepend", turn.budget)
    turn.budget_node = node
    turn.budget_text = node.count
    turn.budget_text_tokens = 0


def _same_units(have: tuple[tuple[str, TextCount], ...], units: list[tuple[str, TextCount]]) -> bool:
    if len(have) != len(units):
        return False
    for (a, ta), (b, tb) in zip(have, units):
        if a is not b or ta is not tb:
            return False
    return True
