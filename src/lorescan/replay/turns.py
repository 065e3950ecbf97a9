"""The turn loop of a replay: one chat, turn by turn, state carried over, rows out.

A *turn* is a generation: the point where the character replies. Turn ``t`` scans the
first ``t`` messages of the chat (system messages are neither scanned nor counted, as in
SillyTavern and slot mode), for every message the character wrote after the first
one, and once more at the end when the chat ends on a user message (the reply still to
come). The greeting is not a turn: nothing was generated for it.

Every turn gives one ``turn`` row and one row per entry that fired or was cut by the budget
(see :data:`lorescan.replay.output.SCHEMA`). Probability rolls are seeded from
``(chat id, turn)``, so a replay is repeatable and the same on every back-end.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import SettingsError
from ..match.cache import ChatScan
from ..model import Lorebook
from ..slot import SlotEngine
from ..st import POSITION_NAMES, BookSource, ChatMessage, STEngine, STSettings
from .pairing import pair_versions
from .chats import Chat, ChatItem, Message, Problem, parse_item
from .output import Columns

__all__ = ["ReplayJob", "Replayer", "turn_seed", "turn_points", "_ship", "_receive"]

MODES = ("sillytavern", "slot")
# Settings a replay takes besides STSettings' own (SillyTavern mode).
EXTRA_SETTINGS = ("max_context", "compat")


@dataclass(frozen=True)
class ReplayJob:
    """What every worker needs besides the books: plain, small, picklable.

    ``settings``: for SillyTavern mode, STSettings names plus ``max_context`` (default
    8192) and ``compat`` (default ``"sillytavern"``); for slot mode, none are accepted.
    ``book_file``: where :func:`_ship` wrote the books (read once per worker).
    """

    mode: str
    book_file: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SettingsError(f"must be one of {', '.join(MODES)}, got {self.mode!r}", source="replay",
                                field="mode")
        check_settings(self.mode, self.settings)


def check_settings(mode: str, settings: Mapping[str, Any]) -> None:
    """Raise :class:`SettingsError` for settings the mode does not take (checked in the
    parent, before any worker starts)."""
    if not isinstance(settings, Mapping):
        raise SettingsError("settings must be an object", source="settings")
    if mode == "slot":
        if settings:
            raise SettingsError(f"slot mode takes no settings (books carry their own), got {sorted(settings)}",
                                source="settings", field=str(next(iter(settings))))
        return
    STSettings.from_mapping({k: v for k, v in settings.items() if k not in EXTRA_SETTINGS})
    mc = settings.get("max_context", 8192)
    if isinstance(mc, bool) or not isinstance(mc, int) or mc < 0:
        raise SettingsError(f"must be a non-negative integer, got {mc!r}", source="settings", field="max_context")
    if settings.get("compat", "sillytavern") not in ("sillytavern", "improved"):
        raise SettingsError("must be 'sillytavern' or 'improved'", source="settings", field="compat")


# -- shipping the books to workers ---------------------------------------------------------
# The two functions to switch to the compiled-book file (.lsc) when it lands: _ship writes
# the file once, _receive loads it in each worker. Nothing else touches the book's bytes.
def _ship(books: Sequence[Lorebook], compare: Sequence[Lorebook] | None = None) -> str:
    """Write the loaded books once to a temporary file; return its path. The caller removes
    it when the run ends."""
    fd, path = tempfile.mkstemp(prefix="lorescan-replay-", suffix=".pickle")
    with os.fdopen(fd, "wb") as fh:
        pickle.dump((tuple(books), None if compare is None else tuple(compare)), fh,
                    protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _receive(path: str) -> tuple[tuple[Lorebook, ...], tuple[Lorebook, ...] | None]:
    """The books :func:`_ship` wrote: ``(books, compare books or None)``."""
    with open(path, "rb") as fh:
        return pickle.load(fh)       # our own file, written by _ship in this run


def turn_seed(chat_id: str, turn: int) -> int:
    """The probability seed of one turn: a hash of (chat id, turn), the same everywhere."""
    digest = hashlib.sha256(f"{chat_id}\x00{turn}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


def turn_points(messages: Sequence[Message]) -> list[int]:
    """The turns of a chat (see the module docstring): numbers of scanned messages."""
    points = [i for i, m in enumerate(messages) if i > 0 and not m.is_user]
    if messages and messages[-1].is_user:
        points.append(len(messages))
    return points


def _position(entry: Any) -> str:
    pos = entry.position
    name = POSITION_NAMES.get(pos, str(pos)) if isinstance(pos, int) else str(pos)
    if pos == 4:
        return f"{name}:{entry.depth if entry.depth is not None else 4}"
    if pos == 7:
        return f"{name}:{entry.outlet_name}"
    return name


def _decisions(res: Any) -> Mapping[Any, Any]:
    """The diagnostics of the entries the scan decided about (fired, cut, rolled, ...).

    ``res.diagnostics`` explains every entry of the books, which on a 10k-entry book costs
    several times the scan itself; the rows need only the entries the scan recorded a
    decision for, and those records are exactly what ``diagnostics`` reports for fired and
    budget-cut entries. So read them from the turn's run when it is there, and fall back to
    the full explanation otherwise (tests/test_replay.py checks both that the fast path is
    taken and that the rows equal ``diagnostics``).
    """
    return res.decisions()


class _STVariant:
    """One book version in SillyTavern mode: the engine (warm for the worker's life) and
    what the rows need per entry."""

    def __init__(self, books: Sequence[Lorebook], settings: Mapping[str, Any], rng: random.Random) -> None:
        st = STSettings.from_mapping({k: v for k, v in settings.items() if k not in EXTRA_SETTINGS})
        self.max_context = settings.get("max_context", 8192)
        self.engine = STEngine([BookSource(b, ("global",)) for b in books], st,
                               compat=settings.get("compat", "sillytavern"), random=rng.random)
        self.cache = ChatScan()
        self.entries = {s.eid: s.entry for s in self.engine.tables.entries}
        self._tokens: dict[Any, int] = {}

    def tokens(self, eid: Any) -> int:
        n = self._tokens.get(eid)
        if n is None:
            n = self._tokens[eid] = self.engine.tokens(self.entries[eid].content)
        return n

    def new_chat(self) -> None:
        self.state: Any = None

    def turn(self, messages: Sequence[ChatMessage]) -> tuple[list[tuple], frozenset, str]:
        """Rows ``(book, entry, outcome, reason, loop, tokens, position)``, the activated
        set and the prompt text (as one string) of one turn."""
        res = self.engine.scan(messages, max_context=self.max_context, timed_effects=self.state, cache=self.cache)
        self.state = res.timed_effects
        rows = []
        diags = _decisions(res)
        for eid in res.activated:
            d = diags[eid]
            rows.append((eid.world, str(eid.uid), "fired", d.reason, d.loop, self.tokens(eid),
                         _position(self.entries[eid])))
        if res.budget_overflowed:
            for eid, d in diags.items():
                if d.reason == "budget" and d.outcome == "not_activated":
                    rows.append((eid.world, str(eid.uid), "cut", "budget", d.loop, self.tokens(eid),
                                 _position(self.entries[eid])))
        out = res.to_json()
        for k in ("activated", "timed_effects", "loops", "budget_overflowed", "overflow_alert_shown"):
            out.pop(k)
        return rows, frozenset((e.world, str(e.uid)) for e in res.activated), json.dumps(out, sort_keys=True)


class _SlotVariant:
    def __init__(self, books: Sequence[Lorebook]) -> None:
        self.engine = SlotEngine(list(books))
        self.cache = ChatScan()

    def new_chat(self) -> None:
        self.state: Any = None

    def turn(self, messages: Sequence[tuple[str, str]], turn_id: str) -> tuple[list[tuple], frozenset, str]:
        res = self.engine.run(messages, turn_id=turn_id, state=self.state, cache=self.cache)
        self.state = res.state
        rows: list[tuple] = []
        fired = []
        for r in res.log:
            if r.outcome == "inserted":
                rows.append((str(r.book), str(r.id), "fired", r.matched_by or "", r.pass_number, r.tokens,
                             f"{r.role}:{r.position[0]}.{r.position[1]}"))
                fired.append((str(r.book), str(r.id)))
            elif r.outcome == "dropped_budget":
                rows.append((str(r.book), str(r.id), "cut", "budget", r.pass_number, r.tokens,
                             f"{r.role}:{r.position[0]}.{r.position[1]}"))
        text = json.dumps([[m.role, m.content] for m in res.messages])
        return rows, frozenset(fired), text


class Replayer:
    """Replays chats for one job. Built once per worker (reads the shipped books once and
    keeps the engines, and their caches, warm); :meth:`replay` is called per chat item."""

    def __init__(self, job: ReplayJob) -> None:
        self.job = job
        books, compare = _receive(job.book_file)
        self.rng = random.Random()
        self.compare = compare is not None
        # the compare version's rows name entries by their base identity (replay.pairing)
        self.pairing = pair_versions(books, compare) if compare is not None else None
        if job.mode == "sillytavern":
            self.variants: list[Any] = [_STVariant(books, job.settings, self.rng)]
            if compare is not None:
                self.variants.append(_STVariant(compare, job.settings, self.rng))
        else:
            self.variants = [_SlotVariant(books)]
            if compare is not None:
                self.variants.append(_SlotVariant(compare))

    def replay_items(self, items: Sequence[ChatItem]) -> Columns:
        """Rows of every chat in ``items`` (problems included), as columns."""
        cols = Columns()
        for item in items:
            self.replay(item, cols)
        return cols

    def replay(self, item: ChatItem, cols: Columns) -> None:
        try:
            chat, problems = parse_item(item)
        except Exception as exc:            # a reader bug must not cost other chats their rows
            chat, problems = None, [Problem(item.source, f"{item.source}:{item.line}", "unreadable",
                                            f"{type(exc).__name__}: {exc}")]
        for p in problems:
            cols.add(p.chat_id, p.source, -1, "", "", "", "problem", p.code, None, None, "", None, p.detail)
        if chat is None:
            return
        mark = len(cols)
        try:
            self._replay_chat(chat, cols)
        except Exception as exc:            # e.g. a LorebookError raised by one chat's messages
            cols.truncate(mark)             # all of the chat or none of it
            cols.add(chat.chat_id, chat.source, -1, "", "", "", "problem", "engine_error", None, None, "", None,
                     f"{type(exc).__name__}: {exc}")

    def _replay_chat(self, chat: Chat, cols: Columns) -> None:
        scanned = [m for m in chat.messages if not m.is_system]
        slot = self.job.mode == "slot"
        msgs: list[Any] = ([("user" if m.is_user else "assistant", m.text) for m in scanned] if slot
                           else [ChatMessage(m.name, m.text, m.is_user) for m in scanned])
        for v in self.variants:
            v.new_chat()
        names = ("base", "compare")
        for t in turn_points(scanned):
            outs = []
            for v in self.variants:
                self.rng.seed(turn_seed(chat.chat_id, t))   # both versions see the same rolls
                outs.append(v.turn(msgs[:t], f"{chat.chat_id}:{t}") if slot else v.turn(msgs[:t]))
            if self.pairing is not None:
                rows1, fired1, text1 = outs[1]
                key = self.pairing.base_key
                outs[1] = ([(*key((r[0], r[1])), *r[2:]) for r in rows1], frozenset(map(key, fired1)), text1)
            changed: bool | None = None
            what = ""
            if self.compare:
                (_, a0, x0), (_, a1, x1) = outs
                diffs = [w for w, d in (("activated", a0 != a1), ("text", x0 != x1)) if d]
                changed, what = bool(diffs), ",".join(diffs)
            for name, (rows, fired, _) in zip(names, outs):
                total = 0
                for book, entry, outcome, reason, loop, tokens, position in rows:
                    cols.add(chat.chat_id, chat.source, t, name, book, entry, outcome, reason, loop, tokens,
                             position, None, "")
                    if outcome == "fired" and tokens is not None:
                        total += tokens
                cols.add(chat.chat_id, chat.source, t, name, "", "", "turn", what, None, total, "", changed, "")
