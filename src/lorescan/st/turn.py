"""The state of one generation (docs/sillytavern-mode.md#st-loop): what the stages of a turn read and
change. The engine makes one :class:`Turn` per :meth:`~lorescan.st.engine.STEngine.scan`; the stages
(:mod:`.activate`, :mod:`.groups`, :mod:`.budget`, :mod:`.explain`) are functions over it."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeAlias

from ..match.regexscope import RegexBudget
from ..match.view import MAX_SCAN_DEPTH, ScanView, Window, WindowTexts
from ..model import Entry
from ..tokens import PrependCount, TextCount
from .result import Character, LoopRecord
from .tables import EntryInfo, PlainRef, Tables

if TYPE_CHECKING:
    from .activate import AlwaysGates

__all__ = ["Turn", "Note", "Detail", "detail_text", "note", "entry_window", "window_for", "effective_depth", "INITIAL",
           "RECURSION", "MIN_ACTIVATIONS", "NONE"]

INITIAL, RECURSION, MIN_ACTIVATIONS, NONE = "INITIAL", "RECURSION", "MIN_ACTIVATIONS", "NONE"

Detail: TypeAlias = "str | tuple[Any, ...]"
"""A note's detail: the words, or ``(format, *args)`` whose call gives them (built only if an
explanation is read: most turns never format the details of the entries a group dropped)."""

Note: TypeAlias = "tuple[EntryInfo | PlainRef, str, str, Detail, int | None, str | None]"
"""The latest decision about an entry: ``(entry, outcome, reason, detail, loop, key)``. A plain
tuple (a turn makes dozens); the explanation turns the ones it is asked about into
:class:`~lorescan.st.result.Diagnostic` records."""


def detail_text(detail: Detail) -> str:
    """A note's detail in words."""
    return detail if isinstance(detail, str) else detail[0](*detail[1:])


class Turn:
    """One scan's state.

    Fixed for the turn: ``tables`` and ``gates`` (the engine's), ``views`` (one match view per
    book), the hooks ``random``, ``substitute`` and ``counter``, ``trigger``, ``character``,
    ``chat_length``, ``budget``, and the entry keys ``sticky``, ``cooldown`` and ``forced``.
    Changed by the stages: what activated or failed, substituted ``contents``, recursion
    ``chunks``, the budget text's count, ``overflow``, the loop records and the notes the
    explanation reads.
    """

    __slots__ = ("tables", "gates", "views", "regex_budget", "random", "substitute", "counter", "trigger",
                 "character", "chat_length", "budget", "sticky", "cooldown", "forced", "semantic", "activated", "activated_order",
                 "failed", "contents", "chunks", "budget_text_tokens", "budget_text", "budget_node", "units", "overflow",
                 "loops", "levels", "level", "skew", "state", "notes", "last_windows", "score_windows", "texts_of", "basis",
                 "windows", "chunk_parts", "rolls")

    def __init__(self, tables: Tables, gates: "AlwaysGates", views: Sequence[ScanView],
                 regex_budget: RegexBudget, *, random: Callable[[], float], substitute: Callable[[str], str] | None,
                 counter: Callable[[str], int], trigger: str, character: Character | None, chat_length: int,
                 budget: int, sticky: set[str], cooldown: set[str], forced: set[str],
                 semantic: dict[str, str] | None = None) -> None:
        self.tables = tables
        self.gates = gates
        self.views = list(views)
        self.regex_budget = regex_budget
        self.random, self.substitute, self.counter = random, substitute, counter
        self.trigger = trigger
        self.character = character
        self.chat_length = chat_length
        self.budget = budget
        self.sticky, self.cooldown, self.forced = sticky, cooldown, forced
        self.semantic = semantic or {}     # entry key -> why it activates by meaning (docs/semantic.md#sem-engine)
        self.activated: dict[str, EntryInfo] = {}
        self.activated_order: list[EntryInfo] = []
        self.failed: set[str] = set()
        self.contents: dict[str, str] = {}
        self.chunks = 0
        self.budget_text_tokens = 0
        # docs/sillytavern-mode.md#st-loop: the budget text grows at the front; its count is kept from the entries'
        # own counts (the text itself is never built).
        self.budget_text: PrependCount | None = None     # made by the loop: counting starts there
        self.budget_node: Any = None       # where budget_text is in the engine's memo of joins (budget.JoinMemo)
        self.units: dict[str, tuple[str, TextCount]] = {}  # ("content\n", its count) as admission counted it
        self.overflow = False
        self.loops: list[LoopRecord] = []
        self.levels = list(tables.levels)
        self.level = self.levels.pop(0) if self.levels else 0
        self.skew = 0
        self.state = INITIAL
        self.notes: dict[str, Note] = {}
        self.last_windows: dict[str, Window] = {}
        self.score_windows: dict[str, Window] = {}    # the window a group score read (st/memo.py)
        self.texts_of: list[Callable[[], WindowTexts]] = []   # per book, made when a turn ends
        # the walk's candidates of the last loop: (max_depth, recursion chunks, entries)
        self.basis: tuple[int, int, list[EntryInfo | PlainRef]] | None = None
        # one Window per (scan depth field, sources, skew, chunks): entries share them, so the
        # views' per-window caches hit by identity
        self.windows: dict[tuple, Window] = {}
        # per recursion chunk, the entries whose contents it joins ("\n" between them), in
        # order, and those contents: so an explanation can say whose content a key matched in
        self.chunk_parts: list[tuple[tuple[str, str], ...]] = []
        # when a turn is being recorded for a replay (st/memo.py): each ``random`` call's
        # decision, ("p", probability, entry key, value) or ("g", weights, total, value)
        self.rolls: list[tuple[str, Any, Any, float]] | None = None


def note(turn: Turn, info: EntryInfo, outcome: str, reason: str, detail: Detail = "", loop: int | None = None,
         key: str | None = None, window: Window | None = None) -> None:
    """Record the latest decision about an entry (and the window it matched in)."""
    turn.notes[info.world_uid] = (info, outcome, reason, detail, loop, key)
    if window is not None:
        turn.last_windows[info.world_uid] = window


def effective_depth(entry: Entry, global_depth: int) -> float:
    """docs/sillytavern-mode.md#st-scan-text steps 1-3. A fractional depth is kept: SillyTavern tests ``depth <= 0``
    (empty haystack) before slicing, so 0.5 scans no message but still the sources,
    injects and recursion text; the view truncates when it slices."""
    return _depth(entry.scan_depth, global_depth)


def _depth(scan_depth: Any, global_depth: int) -> float:
    d = scan_depth if scan_depth is not None else global_depth
    if isinstance(d, float) and not math.isfinite(d):
        return MAX_SCAN_DEPTH if d > 0 else 0
    return min(d, MAX_SCAN_DEPTH)


def entry_window(turn: Turn, info: EntryInfo) -> Window:
    """The window an entry scans in the current loop."""
    return window_for(turn, info.entry.scan_depth, info.sources)


def window_for(turn: Turn, scan_depth: Any, sources: int) -> Window:
    """The window of an entry of this ``scan_depth`` (None: the global one) and match-source
    bits in the current loop."""
    rec = turn.chunks if turn.state != MIN_ACTIVATIONS else 0
    wkey = (scan_depth, sources, turn.skew, rec)
    window = turn.windows.get(wkey)
    if window is None:
        depth = _depth(scan_depth, turn.tables.settings.scan_depth + turn.skew)
        window = turn.windows[wkey] = Window(depth, sources, rec)
    return window
