"""Inclusion groups (docs/sillytavern-mode.md#st-groups): the timed-effect filter, group scoring and
winner selection over one loop's new entries."""
from __future__ import annotations

import math
from typing import Generic, Sequence, TypeVar

from ..model import SelectiveLogic, js_truthy
from .tables import EntryInfo
from .turn import Detail, Turn, entry_window, note
from .result import quoted

__all__ = ["select_in_groups", "group_score", "js_key_order", "PendingList", "weighted_winner"]

T = TypeVar("T")


def _is_array_index(name: str) -> bool:
    return name == "0" or (name[:1] in "123456789" and name.isascii() and name.isdigit()
                           and int(name) <= 2**32 - 2)


def js_key_order(names: Sequence[str]) -> list[str]:
    """JavaScript's object key order.

    Returns:
        ``names`` with the integer-like ones first, ascending, then the rest in first-seen order.
    """
    ints = [n for n in names if _is_array_index(n)]
    if not ints:                  # the usual case: names are words, first-seen order
        return list(names)
    ints.sort(key=int)
    return ints + [n for n in names if not _is_array_index(n)]


class PendingList(Generic[T]):
    """The loop's new-entry list, with SillyTavern's removal quirk as an option.

    SillyTavern removes with ``splice(indexOf(x), 1)``: removing an entry that is no
    longer there removes the LAST element instead (docs/sillytavern-mode.md#st-groups).

    Args:
        items: the list's initial items.
        quirk: reproduce that removal quirk.
    """

    def __init__(self, items: Sequence[T], *, quirk: bool) -> None:
        self.items = list(items)
        self.quirk = quirk

    def remove(self, item: T) -> T | None:
        """Remove ``item``.

        Returns:
            The item actually removed (under the quirk, maybe another one), or None.
        """
        try:
            i = self.items.index(item)
        except ValueError:
            if not self.quirk or not self.items:
                return None
            i = len(self.items) - 1
        return self.items.pop(i)

    def __contains__(self, item: object) -> bool:
        return item in self.items


def group_score(turn: Turn, info: EntryInfo) -> int:
    """How many of an entry's keys match in its current window (docs/sillytavern-mode.md#st-groups, scoring)."""
    e = info.entry
    if not e.key:
        return 0
    window = turn.score_windows[info.world_uid] = entry_window(turn, info)   # a replay checks what it read
    if turn.tables.match_options.expressions and info.exprs is not None:
        # an expression counts as one key, matching when true (docs/improved-profile.md#key-expressions)
        hp, hs = turn.views[info.book].key_hits(info.index, window)
        rp, rs, _ = info.exprs.resolve(hp, hs)
        p, sec = sum(rp), sum(rs)
    else:
        p, sec = turn.views[info.book].score_entry(info.index, window)
    if e.keysecondary:
        logic = e.selective_logic
        if logic == SelectiveLogic.AND_ANY:
            return p + sec
        if logic == SelectiveLogic.AND_ALL:
            return p + sec if sec == len(e.keysecondary) else p
    return p


def _group_already_activated(turn: Turn, name: str) -> bool:
    if not turn.activated_order:
        return False
    if turn.tables.compat.group_bookkeeping == "sillytavern":
        return any(s.entry.group == name for s in turn.activated_order)
    return any(name in s.groups for s in turn.activated_order)


# Detail formats of the group notes, called only when an explanation reads them.
def _prioritized(name: str, top: str) -> str:
    return f"group {quoted(name)}: {quoted(top)} is prioritized"


def _lost_roll(name: str, winner: str) -> str:
    return f"group {quoted(name)}: lost the weighted roll to {quoted(winner)}"


def _below_best(name: str, score: int, best: int) -> str:
    return f"group {name!r}: score {score} is below the best score {best}"


def _order_rank(m: EntryInfo) -> float:
    order = m.entry.order
    return -order if not math.isnan(order) else 0.0


def weighted_winner(weights: Sequence[float], total: float, value: float) -> int:
    """The member a weighted roll of ``random()`` = ``value`` picks (docs/sillytavern-mode.md#st-groups):
    the first whose running weight reaches ``value * total``; -1 when none does."""
    roll = value * total
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if roll <= acc:
            return i
    return -1


def select_in_groups(turn: Turn, new: list[EntryInfo], loop: int) -> list[EntryInfo]:
    """Apply the inclusion groups to one loop's new entries.

    Args:
        turn: the turn; every entry a group removes gets a ``group`` note.
        new: the loop's newly activated entries, in activation order.
        loop: the 1-based loop number (for the notes).

    Returns:
        The entries still pending after the timed-effect filter, scoring and winner selection.
    """
    groups: dict[str, list[EntryInfo]] = {}
    for s in new:
        if s.groups:
            for name in s.groups:
                groups.setdefault(name, []).append(s)
    if not groups:
        return list(new)
    pending = PendingList(new, quirk=turn.tables.compat.group_bookkeeping == "sillytavern")
    notes = turn.notes

    def drop(m: EntryInfo, reason: Detail) -> None:
        removed = pending.remove(m)
        if removed is None:
            return
        if removed is m:
            notes[m.world_uid] = (m, "not_activated", "group", reason, loop, None)
        else:
            note(turn, removed, "not_activated", "group",
                 f"removed in place of {quoted(m.world_uid)}, which a group had already removed (SillyTavern quirk)", loop)

    items = pending.items

    def drop_others(members: list[EntryInfo], keep: EntryInfo | None, reason: Detail) -> None:
        """``drop`` of every member but ``keep``, inlined for the members still in the list
        (one loop, no call per member: a group of a hundred entries drops 99 each loop)."""
        for m in members:
            if m is keep:
                continue
            try:
                del items[items.index(m)]
            except ValueError:
                drop(m, reason)
                continue
            notes[m.world_uid] = (m, "not_activated", "group", reason, loop, None)

    names = js_key_order(list(groups))
    has_sticky: set[str] = set()
    sticky, cooldown, chat_length = turn.sticky, turn.cooldown, turn.chat_length
    # 8.2 timed-effect filter
    for name in names:
        members = groups[name]
        if sticky and any(m.world_uid in sticky for m in members):
            has_sticky.add(name)
            for m in members:
                if m.world_uid not in sticky:
                    drop(m, f"group {name!r} has a sticky member")
        for m in members:
            if m.world_uid in cooldown:
                drop(m, f"on cooldown (group {name!r})")
            elif m.entry.delay and js_truthy(m.entry.delay) and chat_length < m.entry.delay:
                drop(m, f"delayed (group {name!r})")
    # 8.3 group scoring
    g_scoring = turn.tables.settings.use_group_scoring
    for name in names:
        members = groups[name]
        if name in has_sticky:
            continue
        if not g_scoring and not any([m.entry.use_group_scoring for m in members]):   # (a list: no generator per member)
            continue
        scores = [group_score(turn, m) for m in members]
        best = max(scores) if scores else 0
        kept = []
        for m, sc in zip(members, scores):
            flag = m.entry.use_group_scoring if m.entry.use_group_scoring is not None else g_scoring
            if flag and sc < best:
                drop(m, (_below_best, name, sc, best))
            else:
                kept.append(m)
        groups[name] = kept
    # 8.4 winners
    for name in names:
        members = groups[name]
        if name in has_sticky:
            continue
        if _group_already_activated(turn, name):
            drop_others(members, None, f"group {name!r} already has an entry activated in an earlier loop")
            continue
        if len(members) < 2:
            continue
        prio = [m for m in members if m.entry.group_override]
        if prio:
            top = min(prio, key=_order_rank)     # the first of the lowest rank, as a stable sort's [0]
            drop_others(members, top, (_prioritized, name, top.world_uid))
            continue
        weights = [m.entry.group_weight for m in members]
        total = sum(weights)
        value = turn.random()
        if turn.rolls is not None:
            turn.rolls.append(("g", tuple(weights), total, value))
        at = weighted_winner(weights, total, value)
        if at < 0:
            continue
        winner = members[at]
        drop_others(members, winner, (_lost_roll, name, winner.world_uid))
    return pending.items
