"""Gates and passes of lorebook-slot mode (docs/slot-mode.md#slot-gates, #slot-keys, #slot-texts):
what one entry sees in each pass, gates 1-9 (decided once per request), gate 10 (its keys in
that window, the selective logic and the key decorators) and the stable probability roll.

Each decision is recorded on the entry's :class:`Run`, the mutable bookkeeping of one entry
during one request, which becomes its log record at the end (:func:`lorescan.slot.explain.record`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Literal

from ..match.expr import ExprLayout
from ..match.view import EntryMatch, ScanView, Window
from ..model import SelectiveLogic
from .plans import KeyRef, Plan, RegexKeys, never_reason
from .pool import SlotEntry
from .result import LogDetail, MatchedBy, Outcome
from .roll import passes_roll, roll_percent

__all__ = ["MAX_PASSES", "Run", "GateVerdict", "gates", "gateable", "at_greeting", "entry_window", "match_keys",
           "secondary_logic_failure", "roll"]

MAX_PASSES = 3          # docs/slot-mode.md#slot-texts [decision]: 3 passes in total
# A window deeper than 0 that covers no message: ScanView then sees only the recursion
# chunks (Window depth <= 0 means "nothing at all", SillyTavern's reading: its code, not its documentation, is followed).
_RECURSION_ONLY = 0.5

# what gates 1-9 decide (gates()): ("matched", by, reason) or (blocked outcome, reason)
_GateBlocked = Literal["disabled", "blocked:dont_activate", "blocked:dont_activate_after_match",
                       "blocked:is_greeting", "blocked:is_user_icon", "blocked:activate_only_after",
                       "blocked:activate_only_every"]
GateVerdict = tuple[Literal["matched"], MatchedBy, str] | tuple[_GateBlocked, str]


@dataclass(slots=True)
class Run:
    """Mutable bookkeeping of one entry during one request."""

    e: SlotEntry
    outcome: Outcome | None = None
    reason: str = ""
    pass_number: int | None = None
    matched_by: MatchedBy | None = None
    matched_key: str | None = None
    roll: float | None = None
    tokens: int | None = None
    text: str = ""
    detail: LogDetail | None = None


def gates(e: SlotEntry, turn: int, first_matched: int | None, at_greeting: bool,
          greeting_index: int | None, user_icon: str | None) -> GateVerdict | None:
    """docs/slot-mode.md#slot-gates gates 1-9: ("<outcome>", reason), ("matched", by, reason), or None
    when key matching (gate 10) decides."""
    d = e.decorators
    earlier = first_matched is not None and first_matched < turn
    if not e.enabled:
        return "disabled", "the entry is disabled"
    if d.dont_activate and not d.activate:
        return "blocked:dont_activate", "@@dont_activate"
    if d.activate:
        return "matched", "activate", "@@activate"
    if d.dont_activate_after_match and earlier:
        return ("blocked:dont_activate_after_match",
                f"@@dont_activate_after_match: inserted in turn {first_matched}")
    if d.keep and earlier:
        return "matched", "keep", f"@@keep: inserted in turn {first_matched}"
    if d.is_greeting:
        if not at_greeting:
            return "blocked:is_greeting", "@@is_greeting: the chat is past the greeting"
        if d.greeting_index is not None and greeting_index is not None and greeting_index != d.greeting_index:
            return ("blocked:is_greeting",
                    f"@@is_greeting {d.greeting_index}: the active greeting is {greeting_index}")
    if d.is_user_icon is not None and d.is_user_icon != user_icon:
        return "blocked:is_user_icon", f"@@is_user_icon {d.is_user_icon}: the active icon is {user_icon!r}"
    if d.activate_only_after is not None and turn < d.activate_only_after:
        return ("blocked:activate_only_after",
                f"@@activate_only_after {d.activate_only_after}: {turn} messages")
    if d.activate_only_every is not None and turn % d.activate_only_every:
        return ("blocked:activate_only_every",
                f"@@activate_only_every {d.activate_only_every}: {turn} messages")
    if e.constant:
        return "matched", "constant", "constant"
    return None


def gateable(e: SlotEntry) -> bool:
    """Whether gates 1-9 (:func:`gates`) can decide ``e`` in some request."""
    d = e.decorators
    return (not e.enabled or e.constant or d.dont_activate or d.activate or d.dont_activate_after_match
            or d.keep or d.is_greeting or d.is_user_icon is not None or d.activate_only_after is not None
            or d.activate_only_every is not None)


def at_greeting(chat: Sequence[tuple[str, str]]) -> bool:
    """docs/slot-mode.md#slot-gates [decision]: no character message other than the greeting exists yet.

    The greeting is the first assistant message when no user message precedes it.
    """
    greeting_seen = False
    user_seen = False
    for role, _ in chat:
        if role == "user":
            user_seen = True
        elif role == "assistant":
            if not greeting_seen and not user_seen:
                greeting_seen = True
            else:
                return False
    return True


def entry_window(e: SlotEntry, pass_number: int, chunks: int,
                 windows: dict[tuple[float, int], Window]) -> Window | None:
    """The texts entry ``e`` sees in this pass, or None when there is nothing new to see: no
    text at all, or the same texts as in pass 1 (``@@no_recursive_search``). ``windows``
    shares one Window per shape (ScanView answers a repeated Window object fastest)."""
    own = 0 if e.decorators.no_recursive_search else chunks
    if e.scan_depth <= 0:
        # docs/slot-mode.md#slot-keys [decision, revised]: depth 0 scans no message, but recursion text still
        # reaches the entry ("only lore can trigger this").
        if not own:
            return None
        depth: float = _RECURSION_ONLY
    elif pass_number > 1 and not own:
        return None
    else:
        depth = e.scan_depth
    window = windows.get((depth, own))
    if window is None:
        window = windows[(depth, own)] = Window(depth, 0, own)
    return window


def match_keys(r: Run, plan: Plan, view: ScanView | None, window: Window | None, allowed: Set[int] | None,
               mode: RegexKeys) -> bool:
    """docs/slot-mode.md#slot-keys and gate 10 for one entry in one window; records the reason.

    ``allowed``: the pool entries the matcher names as candidates (None: every entry); an
    entry outside it is decided without the view (``view`` and ``window`` may then be None).
    """
    e = r.e
    if not plan.primary:
        r.reason = "no keys"
        return False
    if all(ref.how == "never" for ref in plan.primary):
        r.reason = never_reason(plan.primary, mode)
        r.detail = "invalid_regex" if mode != "strict" or not e.use_regex else None
        return False
    if allowed is not None and e.pool_index not in allowed:
        r.reason = "no primary key matched" + plan.never_note
        return False
    assert view is not None and window is not None
    layout = plan.exprs
    if layout is not None:
        return _match_expressions(r, plan, layout, view, window)
    m = view.match_entry(e.pool_index, window) if plan.uses_matcher else EntryMatch(None, ())

    def hit(ref: KeyRef) -> bool:
        if ref.how == "matcher":
            # m.primary is the first matching key in list order; the scan stops there,
            # and refs are visited in list order, so "== slot" is exact.
            return m.primary == ref.slot if ref.primary else m.secondary[ref.slot]
        return False                    # "never"

    timed = f" ({'; '.join(view.cut_off_report(m.timed_out))})" if m.timed_out else ""
    key = next((ref.text for ref in plan.primary if hit(ref)), None)
    if key is None:
        r.reason = "no primary key matched" + plan.never_note + timed
        return False
    return _after_primary(r, plan, hit, key, timed)


def _match_expressions(r: Run, plan: Plan, layout: ExprLayout, view: ScanView, window: Window) -> bool:
    # gate 10 for an entry with key expressions (docs/slot-mode.md#slot-expressions): every
    # compiled key's hits over the window, each expression evaluated over its atoms
    hp, hs = view.key_hits(r.e.pool_index, window)
    rp, rs, atoms = layout.resolve(hp, hs)

    def hit(ref: KeyRef) -> bool:
        if ref.how == "matcher":
            return rp[ref.slot] if ref.primary else rs[ref.slot]
        return False                    # "never"

    def said(ref: KeyRef) -> str:
        tree = (layout.primary if ref.primary else layout.secondary).get(ref.slot)
        return f"{ref.text!r}" if tree is None else f"{ref.text!r} ({layout.atom_report(tree, atoms)})"
    key_ref = next((ref for ref in plan.primary if hit(ref)), None)
    if key_ref is None:
        failed = [said(ref) for ref in plan.primary if ref.how == "matcher" and ref.slot in layout.primary]
        r.reason = "no primary key matched" + plan.never_note + "".join(f"; {f} is false" for f in failed)
        return False
    ok = _after_primary(r, plan, hit, key_ref.text, "")
    if ok and key_ref.slot in layout.primary:
        r.reason = f"expression {said(key_ref)} is true"
    return ok


def _after_primary(r: Run, plan: Plan, hit: Callable[[KeyRef], bool], key: str, timed: str) -> bool:
    # the rest of gate 10 once a primary key matched: selective logic, then the key decorators
    if plan.secondary:
        failed = secondary_logic_failure(plan, hit)
        if failed is not None:
            r.reason = f"primary key {key!r} matched but {failed}" + timed
            r.detail = "secondary_logic"
            return False
    for group in plan.additional:
        if not any(hit(ref) for ref in group):
            r.reason = f"@@additional_keys {', '.join(x.text for x in group)}: none matched" + timed
            return False
    bad = next((ref.text for ref in plan.exclude if hit(ref)), None)
    if bad is not None:
        r.reason = f"@@exclude_keys: {bad!r} matched" + timed
        return False
    for group in plan.exclude_all:
        if all(hit(ref) for ref in group):
            r.reason = f"@@exclude_keys_all {', '.join(x.text for x in group)}: all matched" + timed
            return False
    r.matched_key = key
    r.reason = f"key {key!r} matched" + timed
    return True


def secondary_logic_failure(plan: Plan, hit: Callable[[KeyRef], bool]) -> str | None:
    """docs/sillytavern-mode.md#st-key-logic / 15.4 [decision, revised]: None when the secondary keys pass the entry's
    selective logic, else why not, in words (a key that can never match counts as absent)."""
    refs, logic = plan.secondary, plan.logic
    name = logic.words
    if logic == SelectiveLogic.AND_ANY:
        if any(hit(ref) for ref in refs):
            return None
        return f"no secondary key matched ({name}: at least one must)"
    hits = [hit(ref) for ref in refs]
    if logic == SelectiveLogic.NOT_ALL and all(hits):
        return f"every secondary key matched ({name}: at least one must be absent)"
    if logic == SelectiveLogic.NOT_ANY and any(hits):
        return f"secondary key {refs[hits.index(True)].text!r} matched ({name}: none may)"
    if logic == SelectiveLogic.AND_ALL and not all(hits):
        return f"secondary key {refs[hits.index(False)].text!r} did not match ({name}: every one must)"
    return None


def roll(r: Run, turn_id: str | int) -> bool:
    """docs/slot-mode.md#slot-gates: the stable roll; records the outcome when the entry fails it."""
    p = r.e.decorators.probability
    if p is None:
        return True
    u = roll_percent(turn_id, r.e.book_id, r.e.id)
    r.roll = u
    if passes_roll(u, p):
        return True
    r.outcome = "probability_failed"
    r.reason = f"@@probability {p:g}: roll {u:.2f} >= {p:g}"
    return False
