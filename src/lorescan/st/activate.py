"""The activation loop (docs/sillytavern-mode.md#st-loop): per loop, walk the candidate entries through
the gates (docs/sillytavern-mode.md#st-gates), hand the new ones to the groups and the budget, then
decide whether to recurse.

Only the entries the match views report as possible candidates (a key hit somewhere in the
window, or an entry that activates without keys) go through the per-entry gates; every
other entry cannot activate and costs nothing.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence, cast

from ..match.expr import ExprLayout
from ..match.view import MAX_SCAN_DEPTH, ScanView, Window
from ..model import SelectiveLogic, js_truthy
from .budget import admit, extend_budget_text, start_budget_text
from .compiled import keys_alone_decide
from .groups import select_in_groups
from .result import LoopRecord, LoopState, quoted
from .tables import EntryInfo, PlainRef
from .turn import MIN_ACTIVATIONS, NONE, RECURSION, Detail, Turn, entry_window, note, window_for

__all__ = ["run_loops", "static_gate", "gate", "GateResult", "AlwaysGates"]

_SECONDARY_FAILS = {
    SelectiveLogic.AND_ANY: "AND ANY: no secondary key matched",
    SelectiveLogic.NOT_ALL: "NOT ALL: every secondary key matched",
    SelectiveLogic.NOT_ANY: "NOT ANY: a secondary key matched",
    SelectiveLogic.AND_ALL: "AND ALL: not every secondary key matched",
}


GateResult = tuple[bool, str, Detail, "str | None", "Window | None"]
"""One entry's way through the gates: whether it activates, the reason code and detail, the key
that matched and the window it matched in (a plain tuple: the walk makes one per candidate)."""


def static_gate(turn: Turn, info: EntryInfo) -> tuple[str, str] | None:
    """Gates 1-6 (docs/sillytavern-mode.md#st-gates), the ones that do not depend on the loop.

    Returns:
        ``(reason, detail)`` of the first gate that stops the entry, or None.
    """
    e = info.entry
    if e.disable:
        return "disabled", "the entry is disabled"
    if e.triggers and turn.trigger not in e.triggers:
        return "trigger", f"generation type {turn.trigger!r} is not in {list(e.triggers)}"
    is_exclude, names, tags = e.character_filter
    character = turn.character
    if names:
        included = character is not None and character.filter_id in names
        if is_exclude == included:
            return "character_filter", ("character is excluded" if is_exclude
                                        else "character is not in the filter's names")
    if tags and character is not None:
        ctags = character.tags or ()
        hit = any(t in ctags for t in tags)
        if is_exclude == hit:
            return "tag_filter", ("a character tag is excluded" if is_exclude
                                  else "no character tag is in the filter")
    if e.delay and js_truthy(e.delay) and turn.chat_length < e.delay:   # (0 and None: no delay, no call)
        return "delay", (f"chat has {turn.chat_length} message{'' if turn.chat_length == 1 else 's'}, "
                         f"delay is {e.delay}")
    if info.world_uid in turn.cooldown and info.world_uid not in turn.sticky:
        return "cooldown", "on cooldown"
    return None


def _secondary_ok(logic: object, sec: Sequence[bool]) -> bool:
    if logic == SelectiveLogic.AND_ANY:
        return any(sec)
    if logic == SelectiveLogic.NOT_ALL:
        return not all(sec)
    if logic == SelectiveLogic.NOT_ANY:
        return not any(sec)
    if logic == SelectiveLogic.AND_ALL:
        return all(sec)
    return False


def gate(turn: Turn, info: EntryInfo) -> GateResult:
    """docs/sillytavern-mode.md#st-gates for one entry in the current loop."""
    static = static_gate(turn, info)
    if static is not None:
        return (False, static[0], static[1], None, None)
    e = info.entry
    sticky = info.world_uid in turn.sticky
    dur = e.delay_until_recursion
    if dur and not sticky:
        if turn.state != RECURSION:
            return (False, "delay_until_recursion", f"waits for recursion level {dur:g}", None, None)
        if dur > turn.level:
            return (False, "delay_until_recursion",
                    f"waits for recursion level {dur:g} (current level {turn.level:g})", None, None)
    if turn.state == RECURSION and turn.tables.settings.recursive and e.exclude_recursion and not sticky:
        return (False, "exclude_recursion", "cannot be activated by recursion", None, None)
    if info.activate:
        return (True, "decorator", "@@activate", None, None)
    if info.dont_activate:
        return (False, "dont_activate", "@@dont_activate", None, None)
    if info.world_uid in turn.forced:
        return (True, "forced", "activated by the caller for this scan", None, None)
    if turn.semantic and info.world_uid in turn.semantic:     # Vector Storage forces it, as the caller would
        return (True, "semantic", turn.semantic[info.world_uid], None, None)
    if e.constant:
        return (True, "constant", "constant entry", None, None)
    if sticky:
        return (True, "sticky", "sticky effect is active", None, None)
    if not info.has_keys:
        return (False, "no_keys", "the entry has no primary keys", None, None)
    window = entry_window(turn, info)
    view = turn.views[info.book]
    if turn.tables.match_options.expressions:
        layout = info.exprs
        if layout is not None:
            return _expression_gate(turn, info, layout, window)
    m = view.match_entry(info.index, window)
    if m.primary is None:
        detail = "no primary key matched"
        if m.timed_out:
            detail += " (" + "; ".join(view.cut_off_report(m.timed_out)) + ")"
        return (False, "no_key_match", detail, None, window)
    key = e.key[m.primary]
    if e.selective and e.keysecondary:
        logic = e.selective_logic if e.selective_logic is not None else SelectiveLogic.AND_ANY
        if not _secondary_ok(logic, m.secondary):
            why = _SECONDARY_FAILS.get(logic, f"unknown selective logic {logic!r}")  # type: ignore[call-overload]
            return (False, "secondary_keys", why, key, window)
    return (True, "key", (_primary_matched, key), key, window)


def _primary_matched(key: str) -> str:        # a key gate's detail, formatted when an explanation reads it
    return f"primary key {quoted(key)} matched"


def _expression_gate(turn: Turn, info: EntryInfo, layout: ExprLayout, window: Window) -> GateResult:
    """The key gates of an entry with key expressions (docs/improved-profile.md#key-expressions):
    every compiled key's hits over the window, each expression evaluated over its atoms."""
    e = info.entry
    view = turn.views[info.book]
    plan, hits = view.plan_hits(info.index, window)
    if plan.simple and len(plan.primary) == layout.n_pairs and not (e.selective and e.keysecondary):
        # the common case, straight from the hit set: every key a variant id, no secondary logic
        which = layout.first_vids(plan.primary, hits)
        if which < 0:
            return (False, "no_key_match", (_no_primary_later, layout, view, info.index, window), None, window)
        key = e.key[which]
        if which in layout.primary:
            return (True, "key", (_expression_true_later, layout, view, info.index, window, which, key), key,
                    window)
        return (True, "key", f"primary key {quoted(key)} matched", key, window)
    hits_p, hits_s = view.key_hits(info.index, window)
    which = layout.first(hits_p)
    if which < 0:
        return (False, "no_key_match", (_no_primary, layout, hits_p), None, window)
    key = e.key[which]
    if e.selective and e.keysecondary:
        logic = e.selective_logic if e.selective_logic is not None else SelectiveLogic.AND_ANY
        if not _secondary_ok(logic, layout.resolve(hits_p, hits_s)[1]):
            return (False, "secondary_keys", (_secondary_failed, layout, hits_p, logic, e.keysecondary), key, window)
    if which in layout.primary:
        return (True, "key", (_expression_true, layout, hits_p, which, key), key, window)
    return (True, "key", f"primary key {quoted(key)} matched", key, window)


# Detail formats of the expression gate, called only when an explanation reads them (turn.detail_text).
def _no_primary(layout: ExprLayout, atoms: Sequence[bool]) -> str:
    return "no primary key matched" + "".join(f"; {layout.atom_report(t, atoms)}" for t in layout.primary.values())


def _expression_true(layout: ExprLayout, atoms: Sequence[bool], which: int, key: str) -> str:
    return f"expression {quoted(key)} is true ({layout.atom_report(layout.primary[which], atoms)})"


def _no_primary_later(layout: ExprLayout, view: ScanView, index: int, window: Window) -> str:
    return _no_primary(layout, view.key_hits(index, window)[0])


def _expression_true_later(layout: ExprLayout, view: ScanView, index: int, window: Window, which: int,
                           key: str) -> str:
    return _expression_true(layout, view.key_hits(index, window)[0], which, key)


def _secondary_failed(layout: ExprLayout, atoms: Sequence[bool], logic: object, keys: Sequence[str]) -> str:
    fail = _SECONDARY_FAILS.get(logic, f"unknown selective logic {logic!r}")  # type: ignore[call-overload]
    return fail + "".join(f"; {quoted(keys[i])}: {layout.atom_report(t, atoms)}" for i, t in layout.secondary.items())


# What a static gate (gates 2-5) of an entry reads besides the entry: AlwaysGates.verdicts
# records which of them an entry has, and a turn asks static_gate only when one applies.
_NEEDS_TURN = 1          # a trigger list, a character name filter or a delay: every turn
_NEEDS_CHARACTER = 2     # a tag filter: only when a character is selected


class AlwaysGates:
    """The gate verdicts of the entries walked in every loop (constant, ``@@activate``,
    ``@@dont_activate``), decided once per engine from the entry alone.

    Most of these entries get the same answer in every loop of every turn: disabled, or
    constant, or a decorator. ``verdicts`` maps such an entry's global position to
    ``(activates, reason, detail, static)``: the answer when the turn does not touch the
    entry (it is not sticky, on cooldown or forced). ``static`` says whether a static gate
    (trigger, character or tag filter, delay) may stop it first: 0 never, else bits of
    ``_NEEDS_TURN`` (ask :func:`static_gate` every turn) and ``_NEEDS_CHARACTER`` (ask it
    when a character is selected). An entry whose answer depends on the loop (delay until
    recursion, exclude recursion) has no verdict and goes through :func:`gate`. ``gpos``:
    every walked-always entry's global position, ascending. Read-only once built.
    """

    __slots__ = ("gpos", "verdicts", "plain")

    def __init__(self, always: Sequence[EntryInfo]) -> None:
        self.gpos: tuple[int, ...] = tuple(sorted(s.gpos for s in always))
        # global position -> the entry's kind for the walk (_plain_kind), decided when first walked
        self.plain: dict[int, int] = {}
        verdicts: dict[int, tuple[bool, str, str, int]] = {}
        for info in always:
            e = info.entry
            if e.disable:                       # gate 1 stops it whatever the turn
                verdicts[info.gpos] = (False, "disabled", "the entry is disabled", 0)
                continue
            if e.delay_until_recursion or e.exclude_recursion:
                continue
            _, names, tags = e.character_filter
            static = (_NEEDS_TURN if e.triggers or names or (e.delay and js_truthy(e.delay)) else 0) \
                | (_NEEDS_CHARACTER if tags else 0)
            if info.activate:
                verdicts[info.gpos] = (True, "decorator", "@@activate", static)
            elif info.dont_activate:
                verdicts[info.gpos] = (False, "dont_activate", "@@dont_activate", static)
            elif e.constant:
                verdicts[info.gpos] = (True, "constant", "constant entry", static)
        self.verdicts = verdicts


_OTHER, _PLAIN, _PLAIN_NOT_IN_RECURSION = 0, 1, 2
_OWN_WINDOW = (None, 0)          # the walk's window key of an entry of no scanDepth and no match sources


def _plain_kind(turn: Turn, info: EntryInfo) -> int:
    """``_PLAIN`` when only its primary keys decide an entry that the turn does not touch (not
    sticky, on cooldown, forced or semantic): no static gate can stop it (gates 1-5), no
    recursion setting or decorator applies, it is not constant, it has primary keys and no
    secondary logic or key expressions; :func:`gate` of such an entry is its key gate (_walk
    inlines it). ``_PLAIN_NOT_IN_RECURSION``: the same but for ``exclude_recursion`` (in a
    recursion loop of a recursive scan it stops there). ``_OTHER``: anything else."""
    if (info.activate or info.dont_activate or not keys_alone_decide(info.entry)
            or (turn.tables.match_options.expressions and info.exprs is not None)):
        return _OTHER
    return _PLAIN_NOT_IN_RECURSION if info.entry.exclude_recursion else _PLAIN


def _walk(turn: Turn, loop: int) -> list[EntryInfo]:
    """The entries this loop activates before groups and budget, in activation order."""
    tables = turn.tables
    entries = tables.entries
    max_depth = min(max(tables.settings.scan_depth + turn.skew, tables.max_entry_depth), MAX_SCAN_DEPTH)
    rec = turn.chunks if turn.state != MIN_ACTIVATIONS else 0
    narrowed = True
    basis = turn.basis
    # an entry flagged plain at compile time is walked as a PlainRef, its record built only if a
    # key matches (key expressions read the record: with them on, every candidate is built)
    lazy = not tables.match_options.expressions
    walk: Iterable[EntryInfo | PlainRef]
    if basis is not None and basis[0] == max_depth and basis[1] <= rec:
        # The same bounds plus recursion chunks: the candidates are the last loop's that
        # are still open plus the entries the new chunks hit (a loop costs what it adds).
        activated, failed = turn.activated, turn.failed
        todo = [s for s in basis[2] if s.world_uid not in activated and s.world_uid not in failed]
        if rec > basis[1]:
            found = {s.gpos for s in todo}
            for bi, view in enumerate(turn.views):
                found.update(map(tables.entry_at[bi].__getitem__, view.chunk_candidates(basis[1], rec)))
            if len(found) > len(todo):
                todo = entries.walkable(sorted(found), lazy)
        walk = todo
        turn.basis = (max_depth, rec, todo)
    else:
        gposes = set(turn.gates.gpos)
        for bi, view in enumerate(turn.views):
            cands = view.candidates(max_depth, rec)
            if cands is None:          # a view that cannot narrow: walk every entry
                narrowed = False
                break
            gposes.update(map(tables.entry_at[bi].__getitem__, cands))
        if not narrowed:
            walk = entries
            turn.basis = None
        else:
            position = tables.by_key.position
            for k in (*turn.sticky, *turn.forced, *turn.semantic):
                g = position(k)
                if g is not None:
                    gposes.add(g)
            walk = entries.walkable(sorted(gposes), lazy)
            turn.basis = (max_depth, rec, walk)
    new: list[EntryInfo] = []
    activated, failed, notes = turn.activated, turn.failed, turn.notes
    verdicts = turn.gates.verdicts
    touched = turn.sticky or turn.cooldown or turn.forced or turn.semantic
    static_bits = _NEEDS_TURN | (_NEEDS_CHARACTER if turn.character is not None else 0)
    plain = turn.gates.plain
    views, last_windows = turn.views, turn.last_windows
    excluding = turn.state == RECURSION and tables.settings.recursive
    # entry_window's answer by the entry's (scan depth, sources): the loop's skew and chunks are fixed here
    windows: dict[tuple[Any, int], Window] = {}
    for item in walk:
        ref = item.world_uid
        if ref in activated or ref in failed:
            continue
        if type(item) is PlainRef:
            if not (touched and (ref in turn.sticky or ref in turn.cooldown or ref in turn.forced
                                 or ref in turn.semantic)):
                # plain by its compiled flags (no scanDepth of its own, no match sources): its key
                # gate (or gate 7) in the loop's own window; its record is built when a key matches.
                # (The same steps as the built plain entry's below, kept apart: merged, the walk of
                # a 2,000-entry book's steady turn cost 3.5% more instructions.)
                if item.kind == _PLAIN_NOT_IN_RECURSION and excluding:
                    notes[ref] = (item, "not_activated", "exclude_recursion", "cannot be activated by recursion",
                                  loop, None)
                    continue
                win = windows.get(_OWN_WINDOW)
                if win is None:
                    win = windows[_OWN_WINDOW] = window_for(turn, None, 0)
                m = views[item.book].match_entry(item.index, win)
                if m.primary is None:
                    why = "no primary key matched"
                    if m.timed_out:
                        why += " (" + "; ".join(views[item.book].cut_off_report(m.timed_out)) + ")"
                    notes[ref] = (item, "not_activated", "no_key_match", why, loop, None)
                else:
                    info = entries[item.gpos]
                    key = info.entry.key[m.primary]
                    new.append(info)
                    notes[ref] = (info, "activated", "key", (_primary_matched, key), loop, key)
                last_windows[ref] = win
                continue
            info = entries[item.gpos]          # the turn touches it: the gates below read its record
        else:
            info = item  # type: ignore[assignment]  # (an EntryInfo: no cast() call on the hot path)
        kind = plain.get(info.gpos)
        if kind is None:
            kind = plain[info.gpos] = _plain_kind(turn, info)
        if kind and not (touched and (ref in turn.sticky or ref in turn.cooldown or ref in turn.forced
                                      or ref in turn.semantic)):
            # gate() of a plain entry, inlined: its key gate (or gate 7, exclude recursion)
            if kind == _PLAIN_NOT_IN_RECURSION and excluding:
                notes[ref] = (info, "not_activated", "exclude_recursion", "cannot be activated by recursion", loop,
                              None)
                continue
            wk = (info.entry.scan_depth, info.sources)
            win = windows.get(wk)
            if win is None:
                win = windows[wk] = entry_window(turn, info)
            m = views[info.book].match_entry(info.index, win)
            if m.primary is None:
                why = "no primary key matched"
                if m.timed_out:
                    why += " (" + "; ".join(views[info.book].cut_off_report(m.timed_out)) + ")"
                notes[ref] = (info, "not_activated", "no_key_match", why, loop, None)
            else:
                key = info.entry.key[m.primary]
                new.append(info)
                notes[ref] = (info, "activated", "key", (_primary_matched, key), loop, key)
            last_windows[ref] = win
            continue
        verdict = verdicts.get(info.gpos)
        if verdict is not None and not (touched and (ref in turn.sticky or ref in turn.cooldown
                                                      or ref in turn.forced or ref in turn.semantic)):
            if verdict[3] & static_bits:
                static = static_gate(turn, info)
                if static is not None:
                    notes[ref] = (info, "not_activated", static[0], static[1], loop, None)
                    continue
            if verdict[0]:
                new.append(info)
                notes[ref] = (info, "activated", verdict[1], verdict[2], loop, None)
            else:
                notes[ref] = (info, "not_activated", verdict[1], verdict[2], loop, None)
            continue
        ok, reason, detail, matched, window = gate(turn, info)
        if ok:
            new.append(info)
            notes[ref] = (info, "activated", reason, detail, loop, matched)
        else:
            notes[ref] = (info, "not_activated", reason, detail, loop, matched)
        if window is not None:
            turn.last_windows[ref] = window
    # Sticky entries first, then global order. SillyTavern activates the caller's forced
    # object in place of the entry; it is not in the global order (indexOf = -1), so it
    # sorts before the other non-sticky entries (docs/sillytavern-mode.md#st-loop step 3).
    if turn.sticky or turn.forced or turn.semantic:
        sticky = turn.sticky
        forced_now = {s.world_uid for s in new if notes[s.world_uid][2] in ("forced", "semantic")}
        new.sort(key=lambda s: (0 if s.world_uid in sticky else 1, 0 if s.world_uid in forced_now else 1))
    return new


def run_loops(turn: Turn) -> None:
    """Run the scan loops until no loop asks for another (docs/sillytavern-mode.md#st-loop).

    Args:
        turn: the turn; on return ``turn.activated_order``, ``turn.loops``, ``turn.notes``
            and the budget state hold the outcome.
    """
    tables = turn.tables
    settings = tables.settings
    start_budget_text(turn)
    loop = 0
    while True:
        if settings.max_recursion_steps and loop >= settings.max_recursion_steps:
            break
        loop += 1
        new = _walk(turn, loop)
        t0 = turn.budget_text_tokens
        pending = select_in_groups(turn, new, loop)
        admitted = admit(turn, pending, t0, loop)
        successful = [s for s in pending if s.world_uid not in turn.failed]
        recursable = [s for s in successful if not s.entry.prevent_recursion]
        nxt = NONE
        if settings.recursive and not turn.overflow and recursable:
            nxt = RECURSION
        if settings.recursive and not turn.overflow and turn.state == MIN_ACTIVATIONS and turn.chunks:
            nxt = RECURSION
        if nxt == NONE and not turn.overflow and settings.min_activations > 0 \
                and len(turn.activated) < settings.min_activations:
            d = settings.scan_depth + turn.skew
            mdm = settings.min_activations_depth_max
            if not (mdm > 0 and d > mdm) and not (d > turn.chat_length):
                nxt = MIN_ACTIVATIONS
                turn.skew += 1
        if nxt == NONE and turn.levels:
            nxt = RECURSION
            turn.level = turn.levels.pop(0)
        turn.loops.append(LoopRecord(cast(LoopState, turn.state), cast(LoopState, nxt),
                                     tuple(s.eid for s in admitted)))
        if nxt == NONE:
            break
        parts = [turn.contents.get(s.world_uid, s.content) for s in recursable]
        text = "\n".join(parts)
        if text:
            turn.chunk_parts.append(tuple(zip([s.world_uid for s in recursable], parts)))
            # Tell a book's view which of its entries the chunk joins, as what texts, so it can
            # reuse the contents' compile-time hits (and a substituted content's cached ones)
            # instead of scanning the chunk (it checks the join).
            owners = {s.book for s in recursable}
            for bi, view in enumerate(turn.views):
                view.add_recursion_chunk(text, entries=[s.index for s in recursable] if owners == {bi} else None,
                                         parts=parts)
            turn.chunks += 1
        if tables.compat.budget_accounting == "recursion_text":
            counted = recursable  # docs/sillytavern-mode.md#st-budget: preventRecursion contents are free in later loops
        else:                     # docs/improved-profile.md#budget-accounting: every admitted content counts against the budget
            counted = admitted
        extend_budget_text(turn, counted)
        turn.state = nxt
