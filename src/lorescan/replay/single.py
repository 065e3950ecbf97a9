"""Replaying one chat turn by turn for ``lorescan replay``: every turn in order, timed
effects (SillyTavern mode) or slot state (slot mode) carried over, and for every turn what
each entry did and why.

The turns are the generations of :func:`lorescan.replay.turns.turn_points`, numbered 1, 2, …
as ``replay-batch`` numbers them. A turn's rolls follow :func:`lorescan.app.inputs.roll_seed`
(seed, chat name, messages scanned), as ``replay-batch``'s do: the same books, chat and seed
give the same :class:`ChatReplay` on every run, on both kernel back-ends, and the same
activations as ``replay-batch`` of that chat.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence, cast

from ..errors import FormatError, LorebookError
from ..match.cache import ChatScan
from ..match.spans import KeySpan
from ..model import Lorebook
from ..st.settings import STSettings
from ..st import BookSource, Character, ChatMessage, STEngine
from ..st.result import Role, describe_span, message_namer
from ..app.chats import read_chat
from ..app.inputs import roll_seed
from .chats import Message
from .pairing import entry_name
from .turns import EXTRA_SETTINGS, check_settings, turn_points

__all__ = ["EntryInfo", "TurnRecord", "ChatReplay", "load_chat", "replay_chat", "text_summary", "mean_stable_share",
           "stability_line"]


@dataclass(frozen=True, slots=True)
class EntryInfo:
    """One entry of the books as the report shows it: book, id (as text) and a display
    name (the entry's comment or name, else its first key, else ``#id``)."""

    book: str
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Explained:
    """What one entry did on one turn: ``outcome`` is ``fired``, ``cut`` (by the budget)
    or ``not``; ``reason`` the engine's short code; ``detail`` its words; ``span`` where its
    key matched (entries a key fired; else None)."""

    entry: int
    outcome: str
    reason: str
    detail: str
    span: KeySpan | None = None


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One generation: ``messages`` scanned (the last one written by ``speaker``),
    ``fired`` and ``cut`` as indexes into :attr:`ChatReplay.entries`, the tokens of the
    fired entries against ``budget``, and an :class:`Explained` for every entry.
    ``stable_share``: the share of the placement text unchanged from the previous turn
    (docs/improved-profile.md#cache-stable) without and with ``stable_placement`` (None on the
    first turn and in janitor mode)."""

    number: int
    messages: int
    speaker: str
    last_text: str
    fired: tuple[int, ...]
    cut: tuple[int, ...]
    tokens: int
    budget: int
    explained: tuple[Explained, ...]
    stable_share: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class ChatReplay:
    """``numbers``: the chat's number of each scanned message, oldest first (the file's, from 1,
    system messages counted: docs/sillytavern-mode.md#cli-turns)."""

    mode: str
    seed: int
    chat: str
    books: tuple[str, ...]
    entries: tuple[EntryInfo, ...]
    turns: tuple[TurnRecord, ...]
    numbers: tuple[int, ...] = ()

    def text_namer(self, turn: TurnRecord) -> Callable[[str, int, str], str]:
        """Names the texts of ``turn``'s spans as every tool does (:func:`lorescan.st.result.message_namer`)."""
        return message_namer(self.numbers[:turn.messages])


# -- reading the chat ----------------------------------------------------------------------
def load_chat(path: str) -> list[Message]:
    """The scanned messages of a chat file, oldest first, read as ``lorescan scan`` reads it
    (:func:`lorescan.app.chats.read_chat`: SillyTavern ``.jsonl`` with or without the
    metadata line, a JSON list of ``{name, mes}`` or ``{role, content}`` messages, or
    ``{"messages": [...]}``). Anything else raises :class:`FormatError` naming the file and
    the message."""
    chat = read_chat(path)
    if not chat.messages:
        raise FormatError("the chat has no messages to replay", source=path)
    return [Message(m.name, m.text, m.is_user, False) for m in chat.messages]


# -- one engine per mode -------------------------------------------------------------------
class _ST:
    def __init__(self, books: Sequence[Lorebook], settings: Mapping[str, Any], roles: Sequence[str],
                 character: Character | None, substitute: Callable[[str], str] | None) -> None:
        self.rng = random.Random(0)
        st = STSettings.from_mapping({k: v for k, v in settings.items() if k not in EXTRA_SETTINGS})
        self.max_context = settings.get("max_context", 8192)
        self.character = character
        compat = settings.get("compat", "sillytavern")
        make = lambda cfg, rng: STEngine([BookSource(b, (cast(Role, r),)) for b, r in zip(books, roles)], cfg,  # noqa: E731
                                         compat=compat, random=rng.random, substitute=substitute)
        self.engine = make(st, self.rng)
        # the share of unchanged placement text with the option flipped: the same turns on a twin
        # engine (the SillyTavern profile ignores the option: no twin)
        self.twin_rng = random.Random(0)
        self.twin = None if compat == "sillytavern" else \
            make(replace(st, stable_placement=not st.stable_placement), self.twin_rng)
        self.stable_first = st.stable_placement and self.twin is not None
        self.cache, self.twin_cache = ChatScan(), ChatScan()
        self.state: Any = None
        self.twin_state: Any = None
        self.layouts: list[Any] = [{}, {}]
        self.shares: tuple[float, float] | None = None
        by_id = self.engine.entries()
        self.index = {eid: i for i, eid in enumerate(by_id)}
        self.entries = tuple(EntryInfo(eid.world, str(eid.uid), entry_name(e)) for eid, e in by_id.items())
        self._contents = [e.content for e in by_id.values()]
        self._tokens = [-1] * len(self.entries)

    def _count(self, i: int) -> int:
        if self._tokens[i] < 0:
            self._tokens[i] = self.engine.tokens(self._contents[i])
        return self._tokens[i]

    def turn(self, messages: Sequence[Message], seed: int, name: Callable[[str, int, str], str]) -> tuple:
        self.rng.seed(seed)
        chat = [ChatMessage(m.name, m.text, m.is_user) for m in messages]
        res = self.engine.scan(chat, max_context=self.max_context, timed_effects=self.state, cache=self.cache,
                               character=self.character, layout=self.layouts[0])
        self.state = res.timed_effects
        self.layouts[0] = res.layout
        assert res.stability is not None        # a layout was given
        share = res.stability.share
        other = share
        if self.twin is not None:
            self.twin_rng.seed(seed)
            twin = self.twin.scan(chat, max_context=self.max_context, timed_effects=self.twin_state,
                                  cache=self.twin_cache, character=self.character, layout=self.layouts[1])
            assert twin.stability is not None
            self.twin_state, self.layouts[1], other = twin.timed_effects, twin.layout, twin.stability.share
        self.shares = (other, share) if self.stable_first else (share, other)
        fired = tuple(self.index[e] for e in res.activated)
        explained = []
        cut = []
        for eid, d in res.diagnostics.items():
            i = self.index[eid]
            if d.outcome == "activated":
                outcome = "fired"
            elif d.reason == "budget":
                outcome = "cut"
                cut.append(i)
            else:
                outcome = "not"
            explained.append(Explained(i, outcome, d.reason, d.describe(name_text=name), d.span))
        explained.sort(key=lambda x: x.entry)
        return fired, tuple(sorted(cut)), sum(self._count(i) for i in fired), res.budget, tuple(explained)


class _Slot:
    def __init__(self, books: Sequence[Lorebook], substitute: Callable[[str], str] | None) -> None:
        from ..slot import SlotEngine  # import-cost: slot mode loads only when asked for
        self.engine = SlotEngine(list(books), substitute=substitute)
        self.twin = SlotEngine(list(books), substitute=substitute, stable_placement=True)
        self.cache, self.twin_cache = ChatScan(), ChatScan()
        self.state: Any = {"version": 1, "placement_layout": {}}    # measured against, not kept by
        self.twin_state: Any = None
        self.shares: tuple[float, float] | None = None
        self.index: dict[tuple[str, str], int] = {}
        self.entries: tuple[EntryInfo, ...] = ()

    def turn(self, messages: Sequence[Message], seed: int, name: Callable[[str, int, str], str]) -> tuple:
        from ..slot.spans import with_spans  # import-cost: slot mode loads only when asked for
        chat = [("user" if m.is_user else "assistant", m.text) for m in messages]
        res = with_spans(self.engine, chat, self.engine.run(chat, turn_id=str(seed), state=self.state,
                                                            cache=self.cache))
        self.state = res.state
        twin = self.twin.run(chat, turn_id=str(seed), state=self.twin_state, cache=self.twin_cache)
        self.twin_state = twin.state
        assert res.stability is not None        # the state holds a layout
        self.shares = None if twin.stability is None else (res.stability.share, twin.stability.share)
        if not self.entries:              # the pool's entries, in pool order, from the first log
            self.entries = tuple(EntryInfo(str(r.book), str(r.id), (r.name or "").strip() or f"#{r.id}")
                                 for r in res.log)
            self.index = {(e.book, e.id): i for i, e in enumerate(self.entries)}
        fired, cut, explained = [], [], []
        for r in res.log:
            i = self.index[(str(r.book), str(r.id))]
            if r.outcome == "inserted":
                outcome = "fired"
                fired.append(i)
            elif r.outcome == "dropped_budget":
                outcome = "cut"
                cut.append(i)
            else:
                outcome = "not"
            detail = r.reason + (f" ({r.detail})" if r.detail else "")
            if r.matched_key is not None and repr(r.matched_key) not in detail:
                detail += f"; key {r.matched_key!r}"
            if r.span is not None:
                detail += " " + describe_span(r.span, name_text=name)
            explained.append(Explained(i, outcome, r.outcome, detail, r.span))
        explained.sort(key=lambda x: x.entry)
        return tuple(fired), tuple(sorted(cut)), res.tokens_used, res.budget, tuple(explained)


class _Janitor:
    """JanitorAI mode (:mod:`lorescan.replay.janitor`): one independent run of the script per turn."""

    def __init__(self, book: Lorebook, settings: Mapping[str, Any], name: str | None) -> None:
        from . import janitor as jm  # import-cost: janitor mode loads only when asked for
        self.jm = jm
        self.engine = jm.janitor_engine(book, settings)
        self.name = name
        self.entries = tuple(EntryInfo(book.name, str(i), n) for i, n in enumerate(jm.entry_names(self.engine)))

    def turn(self, messages: Sequence[Message], seed: int, name: Callable[[str, int, str], str] | None = None) -> tuple:
        # (name: how the other modes name a span's message; the script's explanations have no spans)
        res = self.jm.run_turn(self.engine, messages, self.name, seed)
        threw = res.error is not None           # the script threw: it writes nothing
        fired = () if threw else tuple(self.jm.applied(res))
        explained, cut = [], []
        for x in res.explanations():
            outcome = "fired" if x.status in ("applied", "post_shift") else "cut" if x.status == "cut" else "not"
            if res.error is not None and outcome == "fired":
                explained.append(Explained(x.index, "not", "script_error",
                                           f"{x.text}; but the script threw {res.error.name}: {res.error.message}"))
                continue
            if outcome == "cut":
                cut.append(x.index)
            explained.append(Explained(x.index, outcome, x.status if outcome == "fired" else x.reason, x.text))
        explained.sort(key=lambda x: x.entry)
        return fired, tuple(sorted(cut)), 0, 0, tuple(explained)


def replay_chat(books: Sequence[Lorebook], messages: Sequence[Message], *, mode: str = "sillytavern",
                settings: Mapping[str, Any] | None = None, seed: int = 0, chat: str = "chat",
                on_turn: Callable[[int, int], None] | None = None, roles: Sequence[str] | None = None,
                character: Character | None = None,
                substitute: Callable[[str], str] | None = None,
                numbers: Sequence[int] | None = None) -> ChatReplay:
    """Replay every turn of ``messages`` against ``books``. ``settings``: as
    ``replay-batch`` takes them (SillyTavern mode; in janitor mode ``apply_limit``,
    ``window_depth`` and ``compat``, :mod:`lorescan.replay.janitor`, and one book). ``chat``: the chat's name (a file's
    name without folders), which the rolls depend on. ``roles``: each book's role (default:
    all ``global``); ``character``: for character and tag filters; ``substitute``: the name
    macros. ``on_turn(done, total)`` is called after every turn (progress). ``numbers``: each
    message's number in the chat file (default: its place in ``messages``, from 1)."""
    settings = dict(settings or {})
    if mode not in ("sillytavern", "slot", "janitor"):
        raise LorebookError(f"must be sillytavern, slot or janitor, got {mode!r}", source="replay", field="mode")
    check_settings(mode, settings, books)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LorebookError(f"must be an integer, got {seed!r}", source="replay", field="seed")
    if numbers is not None and len(numbers) != len(messages):
        raise LorebookError(f"{len(numbers)} numbers for {len(messages)} messages", source="replay", field="numbers")
    numbered = list(numbers) if numbers is not None else list(range(1, len(messages) + 1))
    scanned_numbers = tuple(n for n, m in zip(numbered, messages) if not m.is_system)
    scanned = [m for m in messages if not m.is_system]
    roles = list(roles) if roles is not None else ["global"] * len(books)
    if len(roles) != len(books):
        raise LorebookError(f"{len(roles)} roles for {len(books)} books", source="replay", field="roles")
    engine: Any
    if mode == "janitor":
        from .janitor import character_name  # import-cost: as in _Janitor
        engine = _Janitor(books[0], settings, character_name(character.name if character else None, scanned))
    elif mode == "sillytavern":
        engine = _ST(books, settings, roles, character, substitute)
    else:
        engine = _Slot(books, substitute)
    points = turn_points(scanned)
    turns = []
    for n, t in enumerate(points, 1):
        name = message_namer(scanned_numbers[:t])
        fired, cut, tokens, budget, explained = engine.turn(scanned[:t], roll_seed(seed, chat, t), name)
        last = scanned[t - 1]
        shares = getattr(engine, "shares", None) if n > 1 else None
        turns.append(TurnRecord(n, t, last.name, last.text, fired, cut, tokens, budget, explained, shares))
        if on_turn is not None:
            on_turn(n, len(points))
    entries = engine.entries
    if mode == "slot" and not entries:    # no turn ran: list the pool without scanning
        entries = tuple(EntryInfo(b.name, str(e.uid), entry_name(e)) for b in books for e in b.entries)
    return ChatReplay(mode, seed, chat, tuple(b.name for b in books), entries, tuple(turns), scanned_numbers)


def _plain(text: str) -> str:
    """One line of printable text (names may hold newlines and control characters)."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _unusual(span: KeySpan, name: Callable[[str, int, str], str]) -> str:
    """A fired entry's match when it is one an author may not expect: the matched text in
    its context and which case it is (``name``: :meth:`ChatReplay.text_namer`)."""
    cases = []
    if span.kind != "recursion" and not span.across:
        cases.append(f"in {name(span.kind, span.index, span.label)}")
    if span.inside_word is not None:
        cases.append(f"inside the longer word {span.inside_word!r}")
    if span.across:
        assert span.end_kind is not None and span.end_index is not None and span.end_label is not None
        cases.append(f"across {name(span.kind, span.index, span.label)} and "
                     f"{name(span.end_kind, span.end_index, span.end_label)}")
    if span.kind == "recursion":
        cases.append(f"in recursion text {span.index}" + (f", the content of {span.source_entry}"
                                                          if span.source_entry else ""))
    return f'"{_plain(span.shown())}": ' + "; ".join(cases)


def mean_stable_share(replay: ChatReplay) -> tuple[float, float] | None:
    """The mean over turns 2.. of :attr:`TurnRecord.stable_share` (None without such turns)."""
    shares = [t.stable_share for t in replay.turns if t.stable_share is not None]
    if not shares:
        return None
    return sum(a for a, _ in shares) / len(shares), sum(b for _, b in shares) / len(shares)


def stability_line(replay: ChatReplay) -> str | None:
    """The line ``lorescan replay`` prints after the summary about the placement text unchanged
    from turn to turn (None in janitor mode or with one turn)."""
    means = mean_stable_share(replay)
    if means is None:
        return None
    return (f"placement text unchanged from the previous turn: {means[0]:.3f} of it on average without "
            f"stable placement, {means[1]:.3f} with (docs/improved-profile.md#cache-stable)")


def text_summary(replay: ChatReplay) -> list[str]:
    """The plain-text summary ``lorescan replay`` prints: one line per turn, then totals. A
    fired entry whose key matched inside a longer word, across two texts or in a recursion
    text is followed by the match in context and that case, in parentheses."""
    lines = []
    names = [_plain(e.name) for e in replay.entries]
    for t in replay.turns:
        line = (f"turn {t.number} ({t.messages} message{'s' if t.messages != 1 else ''}, last by "
                f"{_plain(t.speaker) or '(no name)'}): {len(t.fired)} fired"
                + ("" if replay.mode == "janitor" else f", {t.tokens}/{t.budget} tokens"))
        if t.fired:
            spans = {x.entry: x.span for x in t.explained if x.span is not None and x.span.cases}
            name = replay.text_namer(t)
            line += ": " + ", ".join(names[i] + (f" ({_unusual(spans[i], name)})" if i in spans else "")
                                     for i in t.fired)
        if t.cut:
            line += "; cut by APPLY_LIMIT: " if replay.mode == "janitor" else "; cut by the budget: "
            line += ", ".join(names[i] for i in t.cut)
        lines.append(line)
    ever = {i for t in replay.turns for i in t.fired}
    n = len(replay.turns)
    lines.append(f"{n} turn{'s' if n != 1 else ''}; {len(ever)} of {len(replay.entries)} entries fired at least "
                 f"once (mode {replay.mode}, seed {replay.seed})")
    return lines
