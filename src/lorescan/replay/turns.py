"""The turn loop of a replay: one chat, turn by turn, state carried over, rows out.

A *turn* is a generation: the point where the character replies. Turn ``t`` scans the
first ``t`` messages of the chat (system messages are neither scanned nor counted, as in
SillyTavern and slot mode), for every message the character wrote after the first
one, and once more at the end when the chat ends on a user message (the reply still to
come). The greeting is not a turn: nothing was generated for it.

Turns are numbered 1, 2, … in chat order (the ``turn`` column, ``lorescan replay``'s lines and
its report); each also records how many messages it scanned (``messages``). Every turn gives
one ``turn`` row and one row per entry that fired or was cut by the budget (see
:mod:`lorescan.replay.output`). A turn's rolls follow :func:`lorescan.app.inputs.roll_seed`
(the seed, the chat's name, the messages scanned): a replay is repeatable, the same on every
back-end, and the same as ``lorescan replay`` of that chat.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, cast

from ..app.inputs import make_substitute, roll_seed
from ..errors import SettingsError
from ..match.cache import ChatScan
from ..model import Lorebook
from ..slot import SlotEngine
from ..st import POSITION_NAMES, BookSource, Character, ChatMessage, STEngine, STSettings
from ..st.result import Role
from .pairing import pair_versions
from .chats import Chat, ChatItem, Message, Problem, parse_item
from .output import Columns

__all__ = ["ReplayJob", "Replayer", "turn_seed", "turn_points", "chat_roll_key", "_ship", "_receive"]

MODES = ("sillytavern", "slot", "janitor")
# Settings a replay takes besides STSettings' own (SillyTavern mode).
EXTRA_SETTINGS = ("max_context", "compat")


@dataclass(frozen=True)
class ReplayJob:
    """What every worker needs besides the books: plain, small, picklable.

    ``settings``: for SillyTavern mode, STSettings names plus ``max_context`` (default
    8192) and ``compat`` (default ``"sillytavern"``); for slot mode, none are accepted; for
    janitor mode, ``apply_limit``, ``window_depth`` and ``compat`` (:mod:`lorescan.replay.janitor`).
    ``book_file``: where :func:`_ship` wrote the books (read once per worker). ``roles``:
    each book's role (SillyTavern mode; empty: all ``global``; the compared version's books
    take the same roles when there are as many). ``character``, ``user``: for character and
    tag filters and the name macros. ``seed``: see :func:`lorescan.app.inputs.roll_seed`.
    """

    mode: str
    book_file: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    roles: tuple[str, ...] = ()
    character: Character | None = None
    user: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SettingsError(f"must be one of {', '.join(MODES)}, got {self.mode!r}", source="replay",
                                field="mode")
        check_settings(self.mode, self.settings)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise SettingsError(f"must be an integer, got {self.seed!r}", source="replay", field="seed")
        if self.character is not None and not isinstance(self.character, Character):
            raise SettingsError(f"must be a Character, got {type(self.character).__name__}", source="replay",
                                field="character")

    def substitute(self) -> Any:
        return make_substitute(self.character.name if self.character else None, self.user)


def check_settings(mode: str, settings: Mapping[str, Any], books: Sequence[Lorebook] | None = None) -> None:
    """Raise :class:`SettingsError` for settings the mode does not take (checked in the
    parent, before any worker starts); ``books``, when given, are checked too (janitor mode
    runs one)."""
    if not isinstance(settings, Mapping):
        raise SettingsError("settings must be an object", source="settings")
    if mode == "janitor":
        from .janitor import check_janitor_settings  # import-cost: janitor mode loads only when asked for
        check_janitor_settings(books, settings)
        return
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
def _ship(books: Sequence[Lorebook], compare: Sequence[Lorebook] | None = None,
          directory: str | None = None) -> str:
    """Write the loaded books once to a temporary file (hidden, in ``directory``: the run's
    output folder, so a killed run leaves nothing in TMPDIR); return its path. The caller
    removes it when the run ends."""
    fd, path = tempfile.mkstemp(prefix=".lorescan-replay-", suffix=".pickle", dir=directory)
    with os.fdopen(fd, "wb") as fh:
        pickle.dump((tuple(books), None if compare is None else tuple(compare)), fh,
                    protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _receive(path: str) -> tuple[tuple[Lorebook, ...], tuple[Lorebook, ...] | None]:
    """The books :func:`_ship` wrote: ``(books, compare books or None)``."""
    with open(path, "rb") as fh:
        return pickle.load(fh)       # our own file, written by _ship in this run


def turn_seed(chat_id: str, turn: int) -> int:
    """A hash of (chat id, turn). Replays seed their rolls with
    :func:`lorescan.app.inputs.roll_seed` (which adds the ``--seed``)."""
    digest = hashlib.sha256(f"{chat_id}\x00{turn}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big")


def chat_roll_key(chat: Chat) -> str:
    """What :func:`~lorescan.app.inputs.roll_seed` knows a chat by: a chat file's name
    without folders (as ``lorescan replay`` and ``scan`` know it), or the ``id`` of a chat in
    a JSON-lines file of chats."""
    if chat.chat_id == chat.source:         # a chat file of a folder: its id is its path
        return os.path.basename(chat.source)
    return chat.chat_id


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
    the full explanation otherwise (tests/replay/test_replay.py checks both that the fast path is
    taken and that the rows equal ``diagnostics``).
    """
    return res.decisions()


class _STVariant:
    """One book version in SillyTavern mode: the engine (warm for the worker's life) and
    what the rows need per entry."""

    def __init__(self, books: Sequence[Lorebook], settings: Mapping[str, Any], rng: random.Random, *,
                 roles: Sequence[str] = (), character: Character | None = None, substitute: Any = None) -> None:
        st = STSettings.from_mapping({k: v for k, v in settings.items() if k not in EXTRA_SETTINGS})
        self.max_context = settings.get("max_context", 8192)
        self.character = character
        roles = list(roles) if len(roles) == len(books) else ["global"] * len(books)
        self.engine = STEngine([BookSource(b, (cast(Role, r),)) for b, r in zip(books, roles)], st,
                               compat=settings.get("compat", "sillytavern"), random=rng.random,
                               substitute=substitute)
        self.cache = ChatScan()
        self.entries = self.engine.entries()
        self._tokens: dict[Any, int] = {}

    def tokens(self, eid: Any) -> int:
        n = self._tokens.get(eid)
        if n is None:
            n = self._tokens[eid] = self.engine.tokens(self.entries[eid].content)
        return n

    def new_chat(self, messages: Sequence[Message] = ()) -> None:
        self.state: Any = None

    def turn(self, messages: Sequence[ChatMessage]) -> tuple[list[tuple], frozenset, str]:
        """Rows ``(book, entry, outcome, reason, loop, tokens, position)``, the activated
        set and the prompt text (as one string) of one turn."""
        res = self.engine.scan(messages, max_context=self.max_context, timed_effects=self.state, cache=self.cache,
                               character=self.character)
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
        prompt = res.placement.to_json()                # the prompt's parts, as STResult.to_json() gives them
        return rows, frozenset((e.world, str(e.uid)) for e in res.activated), json.dumps(prompt, sort_keys=True)


class _SlotVariant:
    def __init__(self, books: Sequence[Lorebook], substitute: Any = None) -> None:
        self.engine = SlotEngine(list(books), substitute=substitute)
        self.cache = ChatScan()

    def new_chat(self, messages: Sequence[Message] = ()) -> None:
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


class _JanitorVariant:
    """One book version in janitor mode (:mod:`lorescan.replay.janitor`): a run per turn, no state."""

    def __init__(self, book: Lorebook, settings: Mapping[str, Any], character: Character | None) -> None:
        from . import janitor as jm  # import-cost: as in check_settings
        self.jm = jm
        self.book = book.name
        self.engine = jm.janitor_engine(book, settings)
        self.given = character.name if character is not None else None
        self.name: str | None = None

    def new_chat(self, messages: Sequence[Message] = ()) -> None:
        self.name = self.jm.character_name(self.given, messages)

    def turn(self, messages: Sequence[Message], seed: int) -> tuple[list[tuple], frozenset, str]:
        """Rows ``(book, entry, outcome, reason, loop, tokens, position)`` for the applied
        entries (reason ``selected`` or ``post_shift``) and the APPLY_LIMIT cut ones, the
        applied set and the texts the script appends (or its error)."""
        res = self.jm.run_turn(self.engine, messages, self.name, seed)
        if res.error is not None:
            return [], frozenset(), json.dumps({"error": res.error.to_json()}, sort_keys=True)
        post = set(res.trace.get("post_shift") or ())
        rows: list[tuple] = [(self.book, str(i), "fired", "post_shift" if i in post else "selected", None, None, "")
                             for i in self.jm.applied(res)]
        rows += [(self.book, str(x.index), "cut", x.reason, None, None, "") for x in res.explanations()
                 if x.status == "cut"]
        text = json.dumps({"personality": res.personality, "scenario": res.scenario}, sort_keys=True)
        return rows, frozenset((self.book, str(i)) for i in self.jm.applied(res)), text


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
        substitute = job.substitute()
        self.variants: list[Any]
        if job.mode == "janitor":
            from .janitor import check_janitor_settings  # import-cost: as in check_settings
            check_janitor_settings(books, job.settings)
            self.variants = [_JanitorVariant(v[0], job.settings, job.character) for v in (books, compare)
                             if v is not None]
        elif job.mode == "sillytavern":
            self.variants = [_STVariant(v, job.settings, self.rng, roles=job.roles,
                                        character=job.character, substitute=substitute)
                             for v in (books, compare) if v is not None]
        else:
            self.variants = [_SlotVariant(v, substitute) for v in (books, compare) if v is not None]

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
            return
        if len(cols) == mark:               # every chat has a row: this one had nothing to replay
            cols.add(chat.chat_id, chat.source, -1, "", "", "", "problem", "no_turns", None, None, "", None,
                     "the chat has no turn to replay (no reply after its first message and no user "
                     "message at its end)")

    def _replay_chat(self, chat: Chat, cols: Columns) -> None:
        scanned = [m for m in chat.messages if not m.is_system]
        slot = self.job.mode == "slot"
        janitor = self.job.mode == "janitor"
        msgs: list[Any] = ([("user" if m.is_user else "assistant", m.text) for m in scanned] if slot
                           else scanned if janitor else [ChatMessage(m.name, m.text, m.is_user) for m in scanned])
        v: Any
        for v in self.variants:
            v.new_chat(scanned)
        names = ("base", "compare")
        key = chat_roll_key(chat)
        for n, t in enumerate(turn_points(scanned), 1):
            outs = []
            seed = roll_seed(self.job.seed, key, t)
            for v in self.variants:
                self.rng.seed(seed)          # both versions see the same rolls
                outs.append(v.turn(msgs[:t], str(seed)) if slot else v.turn(msgs[:t], seed) if janitor
                            else v.turn(msgs[:t]))
            if self.pairing is not None:
                rows1, fired1, text1 = outs[1]
                base_key = self.pairing.base_key
                outs[1] = ([(*base_key((r[0], r[1])), *r[2:]) for r in rows1], frozenset(map(base_key, fired1)),
                           text1)
            changed: bool | None = None
            what = ""
            if self.compare:
                (_, a0, x0), (_, a1, x1) = outs
                diffs = [w for w, d in (("activated", a0 != a1), ("text", x0 != x1)) if d]
                changed, what = bool(diffs), ",".join(diffs)
            for name, (rows, fired, _) in zip(names, outs):
                total = 0
                for book, entry, outcome, reason, loop, tokens, position in rows:
                    cols.add(chat.chat_id, chat.source, n, name, book, entry, outcome, reason, loop, tokens,
                             position, None, "", t)
                    if outcome == "fired" and tokens is not None:
                        total += tokens
                cols.add(chat.chat_id, chat.source, n, name, "", "", "turn", what, None, total, "", changed, "", t)
