"""Explanation and log of lorebook-slot mode (docs/slot-mode.md#slot-log): the log record of each
entry, the request notes for skipped system messages, and the details of entries that did not
match (depth 0 never reached by recursion text, a primary key found only in a system message).
"""
from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Sequence, Set

from ..match.view import ScanView, Window
from .gates import Run
from .plans import Plan
from .pool import SlotEntry
from .result import LogRecord, Outcome, RequestNote

__all__ = ["record", "Unmatched"]


def record(r: Run, outcome: Outcome | None = None) -> LogRecord:
    """The log record of ``r`` (``outcome`` in place of its own, else ``"not_matched"`` when
    nothing decided it)."""
    e = r.e
    return LogRecord(
        book=e.book_id, id=e.id, name=e.name, outcome=outcome or r.outcome or "not_matched",
        reason=r.reason, pass_number=r.pass_number, matched_by=r.matched_by,
        matched_key=r.matched_key, roll=r.roll, tokens=r.tokens, priority=e.priority,
        order=e.order, role=e.role, ignore_on_max_context=e.decorators.ignore_on_max_context,
        position=e.position, detail=r.detail)


class Unmatched:
    """What explains the entries of one pool that did not match; built once per engine.

    Idle entries (those no gate decides, every key the matcher's, scan depth above 0) whose
    unmatched reason is "no primary key matched" are kept by scan depth: a system message
    inside their window may explain them. Compact: int32 arrays and one flag byte per entry,
    not sets of int objects.

    Args:
        pool: the engine's pool entries; ``plans``: their key plans, in pool order.
        explicit: the pool indexes a request walks from the start (the others are idle).
    """

    __slots__ = ("_pool", "_plans", "max_depth", "_plain_by_depth", "_plain_idle")

    def __init__(self, pool: Sequence[SlotEntry], plans: Sequence[Plan], explicit: Set[int]) -> None:
        self._pool, self._plans = pool, plans
        self.max_depth = max((e.scan_depth for e in pool), default=0)
        self._plain_by_depth: dict[int, array[int]] = {}
        self._plain_idle = bytearray(len(pool))
        for e in pool:
            plan = plans[e.pool_index]
            if e.pool_index not in explicit and plan.primary and any(ref.how != "never" for ref in plan.primary):
                self._plain_by_depth.setdefault(e.scan_depth, array("i")).append(e.pool_index)
                self._plain_idle[e.pool_index] = 1

    def explain(self, pending: Sequence[Run], runs: dict[int, Run], chat: Sequence[tuple[str, str]],
                scanned: Sequence[int], system_view: Callable[[list[str]], ScanView],
                idle_run: Callable[[int], Run]) -> list[RequestNote]:
        """Request notes for the skipped system messages (those inside the deepest window,
        where they would have been scanned), and the log details of entries that did not
        match: depth 0 never reached by recursion text, or a primary key that occurs only in
        a system message inside the entry's window.

        Args:
            pending: the unmatched entries that have a :class:`Run`; an idle entry gets one
                (``idle_run``, added to ``runs``) here when a system message explains it.
            chat: the request's messages; ``scanned``: the indexes of those scanned.
            system_view: a match view of the given texts (the system messages, newest first).
        """
        deepest = self.max_depth
        start = -1 if deepest >= len(scanned) else scanned[-deepest] if deepest > 0 else len(chat)
        system = [i for i in range(start + 1, len(chat)) if chat[i][0] == "system"]
        notes = [RequestNote("system_message_skipped", f"message {i} is a system message: not scanned and "
                             "not counted (neither in the turn index nor toward any scan depth)", i)
                 for i in system]

        def inside(depth: int) -> int:
            """System messages newer than the oldest message a window of ``depth`` scans."""
            oldest = scanned[-depth] if depth < len(scanned) else -1
            return len(system) - bisect.bisect_right(system, oldest)

        checks: list[Run] = []
        for r in pending:
            e = r.e
            if e.scan_depth <= 0:
                why = ("no recursion text matched it" if r.reason.startswith("no primary key matched")
                       else r.reason or "no recursion text was produced")
                if e.decorators.no_recursive_search:
                    why = "@@no_recursive_search keeps recursion text from it too"
                r.reason = f"scan depth 0: no message is scanned, only recursion text can trigger it; {why}"
                r.detail = r.detail or "recursion_only"
                continue
            if system and r.reason.startswith("no primary key matched") and inside(e.scan_depth):
                checks.append(r)
        if not system:
            return notes
        idle_depths = [d for d, ix in self._plain_by_depth.items()
                       if inside(d) and any(i not in runs for i in ix)]
        if not checks and not idle_depths:
            return notes
        view = system_view([t for role, t in reversed(chat) if role == "system"])
        found_in = view.candidates(len(system), 0)
        in_system = set(range(len(self._pool))) if found_in is None else set(found_in)
        if idle_depths:
            depths = set(idle_depths)
            for i in sorted(in_system):
                if i not in runs and self._plain_idle[i] and self._pool[i].scan_depth in depths:
                    r = runs[i] = idle_run(i)
                    r.outcome = "not_matched"
                    checks.append(r)
            checks.sort(key=lambda r: r.e.pool_index)
        for r in checks:
            e = r.e
            plan = self._plans[e.pool_index]
            if not plan.uses_matcher or e.pool_index not in in_system:
                continue
            found = view.match_entry(e.pool_index, Window(inside(e.scan_depth))).primary
            key = next((ref.text for ref in plan.primary if ref.primary and ref.slot == found), None)
            if key is not None:
                r.detail = "system_message_only"
                r.reason = (f"no primary key matched; {key!r} occurs only in a system message, and "
                            "system messages are not scanned")
        return notes
