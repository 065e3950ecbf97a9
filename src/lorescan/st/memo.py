"""A steady turn's loops replayed from the last turn of the same chat (issue 20, item 6).

A steady chat's turns mostly see the same key hits: the new message brings no variant the
window did not hold, the dropped one takes none away, and the message windows' unions are
then the very same sets (``ScanView._message_union`` keeps them turn to turn). The loops of
:mod:`.activate` are a deterministic function of what they read: the engine's tables, the
turn's scalars (budget, trigger, character, timed effects, forced and semantic entries,
match sources, injects), through the match views the hit sets of the message windows
(every other text they read, the recursion chunks, is made by the loops themselves), and
the values ``random`` gives. So when a turn's inputs equal those of a recorded turn, every
message union the recorded loops read is equal again, and each ``random`` value, drawn in
the same order, decides its probability roll or group roll the way the recorded one did,
the loops would do exactly what they did: their outcome is copied instead of recomputed
(a failed probability roll's note gets this turn's value). When a value decides otherwise,
the values drawn so far are handed to the loops, which run and ask for them in the same
order (the path up to that roll is the recorded one), so ``random`` is called exactly as
often as without a replay.

A turn is recorded only when nothing outside those inputs could have steered it: no
``random`` call other than the rolls logged (``Turn.rolls``), no substitution hook but a
:class:`~lorescan.macros.MacroTable` (a pure function of its table, which is in the key), no special key (regex,
macro, blank: they read texts, not hit sets) and no key expression among the entries it
decided, no entry with a ``delay`` (it reads the chat's length), no minimum activations,
nothing cut off by the scan's work limits, no window deeper than the views keep unions for.
The record lives in the chat's :class:`~lorescan.match.cache.ChatScan` (a few per chat,
immutable once stored: a replay copies what the turn changes).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence, TypeAlias, cast

from ..macros import MacroTable
from ..match.cache import ChatScan
from ..match.view import MAX_SCAN_DEPTH, ScanView
from ..model import js_truthy
from .budget import probability_detail, probability_passes
from .groups import weighted_winner
from .tables import PlainRef
from .turn import Turn

__all__ = ["CountingRandom", "turn_key", "replay", "record", "attempts", "attempted", "FULL", "RECORD", "PLAIN"]

_MEMO_SLOT = "st.turn"       # the ChatScan's records of this module
_PER_KEY = 4                 # records kept per key: one per way a turn's rolls went
_BACKOFF_SLOT = "st.turn.backoff"   # the ChatScan's miss counters of this module, per engine tables
_MISSES = 4                  # replays missed in a row before a chat's turns stop trying for a while
_MAX_WAIT = 16               # the longest a chat backs off (plain turns before it records and tries again)
_MAX_NOTES = 512             # a turn that decided about more entries is not recorded (a record holds its notes)

# (the engine's tables, the message unions read: (view, depth, union, the vids that decide
# there, the union's, the candidates of the widest window), the turn's state (see
# _COPIED, _LISTS, _VALUES), per view its recursion chunks (texts, entries, parts), the rolls)
_Record: TypeAlias = "tuple[Any, tuple[tuple[int, int, frozenset[int], frozenset[int], frozenset[int], " \
    "tuple[int, ...] | None], ...], " \
    "tuple[tuple[Any, ...], ...], " \
    "tuple[tuple[tuple[Any, ...], ...], ...], tuple[tuple[str, Any, Any, float], ...]]"


class CountingRandom:
    """``random``, counting its calls; the values a failed replay drew (``drawn``) come first."""

    __slots__ = ("random", "calls", "drawn")

    def __init__(self, random: Callable[[], float], drawn: Sequence[float] = ()) -> None:
        self.random = random
        self.calls = 0
        self.drawn = list(drawn)[::-1]

    def __call__(self) -> float:
        self.calls += 1
        if self.drawn:
            return self.drawn.pop()
        return self.random()


def _decides(roll: tuple[str, Any, Any, float], value: float) -> object:
    """What ``value`` decides at a logged roll: a probability roll passes or not, a group roll's winner."""
    kind, a, b, _ = roll
    if kind == "p":
        return probability_passes(a, value)
    return weighted_winner(a, b, value)


def turn_key(counter: Callable[[str], int], budget: int, trigger: str, character: Any, source_texts: tuple[str, ...],
             injects: Sequence[str], sticky: set[str], cooldown: set[str], forced: set[str],
             semantic: dict[str, str], hook: tuple = ()) -> tuple | None:
    """The scalars a turn's loops read, as a key (None: not hashable, no replay); ``hook`` is
    the macro table's :meth:`~lorescan.macros.MacroTable.replay_key` (``()`` without one)."""
    key = (counter, budget, trigger, character, source_texts, tuple(injects), frozenset(sticky), frozenset(cooldown),
           frozenset(forced), tuple(semantic.items()) if semantic else (), hook)
    try:
        hash(key)
    except TypeError:           # a Character built with a list of tags
        return None
    return key


# What a turn of a chat does about its record (:func:`attempts`): replay and record, only record
# (the turn before a retry: a replay then finds this turn's record), or neither.
FULL, RECORD, PLAIN = 2, 1, 0


def attempts(cache: ChatScan, tables: Any) -> int:
    """Whether this turn of the chat tries to replay and records (FULL), only records (RECORD)
    or runs its loops plainly (PLAIN): after ``_MISSES`` missed replays in a row (a chat
    whose windows gain candidates nearly every turn) the chat backs off, its turns plain
    for ``wait`` turns (doubling up to ``_MAX_WAIT`` while its retries miss), then one
    records and the next tries again. A pure speed choice: a replay gives what the loops
    give, so a turn's result is the same whichever it does (``random`` is called as often)."""
    records = cache.records(_BACKOFF_SLOT)
    got = records.get(id(tables)) if records else None
    if got is None:
        return FULL
    owner, misses, wait, period = cast("tuple[Any, int, int, int]", got)
    if owner is not tables or misses < _MISSES:
        return FULL
    if wait > 1:
        cache.keep_record(_BACKOFF_SLOT, id(tables), (tables, misses, wait - 1, period))
        return PLAIN
    if wait == 1:
        cache.keep_record(_BACKOFF_SLOT, id(tables), (tables, misses, 0, period))
        return RECORD
    return FULL


def attempted(cache: ChatScan, tables: Any, hit: bool) -> None:
    """Count a FULL turn's replay: a hit resets the chat's misses, a miss counts (backing off
    at ``_MISSES``, each further missed retry waiting twice as long, up to ``_MAX_WAIT``)."""
    records = cache.records(_BACKOFF_SLOT)
    got = records.get(id(tables)) if records else None
    owner, misses, wait, period = cast("tuple[Any, int, int, int]", got) if got is not None else (tables, 0, 0, 1)
    if owner is not tables:
        misses, period = 0, 1
    if hit:
        if misses:
            cache.keep_record(_BACKOFF_SLOT, id(tables), (tables, 0, 0, 1))
        return
    misses += 1
    if misses >= _MISSES:
        period = min(period * 2, _MAX_WAIT) if misses > _MISSES else 2
        cache.keep_record(_BACKOFF_SLOT, id(tables), (tables, _MISSES + 1 if misses > _MISSES else misses,
                                                      period + 1, period))
    else:
        cache.keep_record(_BACKOFF_SLOT, id(tables), (tables, misses, 0, period))


# What run_loops changes on a Turn, copied from a record (containers copied, values shared:
# they are never changed once made).
_COPIED = ("activated", "failed", "contents", "units", "notes", "last_windows", "windows")
_LISTS = ("activated_order", "loops", "levels", "chunk_parts")
_VALUES = ("chunks", "budget_text_tokens", "budget_text", "budget_node", "overflow", "level", "skew", "state",
           "basis")


def replay(turn: Turn, cache: ChatScan, key: tuple) -> tuple[bool, list[float]]:
    """Put a recorded turn's outcome on ``turn`` when its key, every message union its loops
    read and what each ``random`` value decides match this turn's (computing those unions:
    the new messages are scanned here).

    Returns:
        ``(True, [])`` when it did; else ``(False, drawn)``, ``turn`` untouched but for the
        views' unions, and ``drawn`` the values taken from ``turn.random`` (the loops' first).
    """
    records = cache.records(_MEMO_SLOT)
    if not records:
        return False, []
    kept = cast("tuple[_Record, ...] | None", records.get((id(turn.tables), key)))
    if kept is None or kept[0][0] is not turn.tables:
        return False, []
    views = turn.views
    work = views[0].fuzzy_work if views else None
    drawn: list[float] = []
    # The records of this key differ by what their rolls decided (and perhaps by the unions
    # they read). Those whose unions match ran with this turn's inputs, so they share one
    # path up to their first roll and part only where a roll decided otherwise: a value is
    # drawn only when a record agreeing with every value drawn before needs it, so the
    # loops would have drawn it too.
    for found in kept:
        _, reads, state, chunks, rolls = found
        if len(rolls) < len(drawn):
            continue
        for bi, depth, union, mask, seen, cands in reads:
            now = views[bi]._message_union(depth)
            if now is not union and (now & mask != seen
                                     or cands is not None and tuple(views[bi].candidates(depth, 0) or ()) != cands):
                break
        else:
            if work is not None and work.cuts != (0, 0):
                return False, drawn
            for i, roll in enumerate(rolls):
                if i == len(drawn):
                    drawn.append(turn.random())
                if _decides(roll, drawn[i]) != _decides(roll, roll[3]):
                    break
            else:
                break
    else:
        return False, drawn
    for name, value in zip(_COPIED, state[0]):
        setattr(turn, name, value.copy())
    for name, value in zip(_LISTS, state[1]):
        setattr(turn, name, list(value))
    for name, value in zip(_VALUES, state[2]):
        setattr(turn, name, value)
    notes = turn.notes
    for roll, value in zip(rolls, drawn):
        if roll[0] == "p" and not probability_passes(roll[1], value):
            n = notes.get(roll[2])
            if n is not None and n[2] == "probability":
                notes[roll[2]] = (n[0], n[1], n[2], probability_detail(roll[1], value), n[4], n[5])
    for view, (texts, entries, parts) in zip(views, chunks):
        if texts:
            view.chunks.extend(texts)
            view._chunk_entries.extend(entries)
            view._chunk_parts.extend(parts)
    return True, []


def record(turn: Turn, cache: ChatScan, key: tuple, random: CountingRandom) -> None:
    """Keep ``turn``'s outcome for the next turn of the chat, when nothing but the key and the
    message unions its loops read steered it (see the module docstring)."""
    rolls = turn.rolls
    if rolls is None or random.calls != len(rolls) \
            or turn.substitute is not None and type(turn.substitute) is not MacroTable \
            or turn.tables.match_options.expressions:
        return
    if turn.regex_budget.cut or len(turn.notes) > _MAX_NOTES:
        return
    views = turn.views
    for bi, view in enumerate(views):
        if type(view) is not ScanView or view.deep_read or view.fuzzy_work.cuts != (0, 0):
            return
    # What a window's union decides: for the walk's widest window, the candidates (the entries
    # with a key variant in it); for every window, whether the keys of the entries that read
    # it are in it (an entry reads the windows of its own depth; with the same candidates the
    # same entries are walked, so no other entry reads one). A window that gained or lost
    # only other vids (a message of no concern to the entries walked) decides the same.
    settings = turn.tables.settings
    widest = min(int(max(settings.scan_depth, turn.tables.max_entry_depth)), MAX_SCAN_DEPTH)
    keys: dict[tuple[int, int], set[int]] = {}
    last_windows, score_windows = turn.last_windows, turn.score_windows
    for info, *_ in turn.notes.values():
        plan = views[info.book]._plans[info.index]
        if not (plan.simple and plan.score_simple):
            return
        if not isinstance(info, PlainRef):   # (a plain entry has no delay: st.compiled.FLAG_PLAIN)
            delay = info.entry.delay
            if delay and js_truthy(delay):
                return
        # the window its keys matched in, and the one its group score read (an entry activated
        # otherwise, by a decorator say, is still scored by its keys in its own window)
        for window in (last_windows.get(info.world_uid), score_windows.get(info.world_uid)):
            if window is None or window.depth <= 0:
                continue
            refs = keys.setdefault((info.book, min(int(window.depth), MAX_SCAN_DEPTH)), set())
            refs.update(cast(int, r) for _, r in plan.primary)     # (simple plans: every ref an int)
            refs.update(cast("tuple[int, ...]", plan.secondary))
            refs.update(cast("tuple[int, ...]", plan.score_primary))
            refs.update(cast("tuple[int, ...]", plan.score_secondary))
    reads: list[tuple[int, int, frozenset[int], frozenset[int], frozenset[int], tuple[int, ...] | None]] = []
    for bi, view in enumerate(views):
        for depth, union in view.message_unions.items():
            mask = frozenset(keys.get((bi, depth), ()))
            reads.append((bi, depth, union, mask, union & mask,
                          tuple(view.candidates(depth, 0) or ()) if depth == widest else None))
    state = (tuple(getattr(turn, n).copy() for n in _COPIED), tuple(tuple(getattr(turn, n)) for n in _LISTS),
             tuple(getattr(turn, n) for n in _VALUES))
    chunks = tuple((tuple(v.chunks), tuple(v._chunk_entries), tuple(v._chunk_parts)) for v in views)
    decided = tuple(_decides(roll, roll[3]) for roll in rolls)
    rec = (turn.tables, tuple(reads), state, chunks, tuple(rolls))
    slot = (id(turn.tables), key)
    records = cache.records(_MEMO_SLOT)
    kept = cast("tuple[_Record, ...]", (records or {}).get(slot) or ())
    # one record per way the rolls went (the one this turn replaces goes), the newest last
    kept = tuple(r for r in kept if r[0] is turn.tables and tuple(_decides(x, x[3]) for x in r[4]) != decided)
    cache.keep_record(_MEMO_SLOT, slot, (*kept[-(_PER_KEY - 1):], rec))
