"""What SillyTavern mode takes in and gives back: entry ids, messages, book sources, and the
result of one generation (docs/sillytavern-mode.md#st-inputs).

Everything here is plain data: a :class:`STResult` pickles, and its explanation is either
computed from data the turn kept (no views or caches) or, after a round trip, stored whole.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Callable, Literal, NamedTuple, Sequence

from ..errors import SettingsError
from ..layout import Layout, Stability
from .compiled import CompiledBook
from ..match.spans import KeySpan
from ..model import Entry, Lorebook
from .place import Placement
from .timed import TimedEffects

__all__ = ["EntryId", "Character", "ChatMessage", "BookSource", "LoopRecord", "Diagnostic", "STResult", "KeySpan",
           "describe_span", "message_name", "message_namer",
           "ROLES", "Role", "DiagnosticOutcome", "Reason", "LoopState"]

Role = Literal["global", "character", "character_extra", "chat", "persona"]
"""The roles a book plays in an engine (docs/sillytavern-mode.md#st-order)."""
ROLES: tuple[Role, ...] = ("global", "character", "character_extra", "chat", "persona")

DiagnosticOutcome = Literal["activated", "not_activated"]
""":attr:`Diagnostic.outcome` (slot mode's log outcome is :data:`lorescan.slot.Outcome`, another concept)."""

Reason = Literal[
    # activated
    "constant", "key", "sticky", "decorator", "forced", "semantic",
    # not activated
    "disabled", "trigger", "character_filter", "tag_filter", "delay", "cooldown", "delay_until_recursion",
    "exclude_recursion", "dont_activate", "no_keys", "no_key_match", "secondary_keys", "group",
    "probability", "budget", "not_reached",
]
""":attr:`Diagnostic.reason`: which gate, group, roll or budget decided (docs/sillytavern-mode.md#st-gates)."""

LoopState = Literal["INITIAL", "RECURSION", "MIN_ACTIVATIONS", "NONE"]
""":attr:`LoopRecord.state` and :attr:`LoopRecord.next` (SillyTavern's scan states; ``NONE``: no next loop)."""


class EntryId(NamedTuple):
    """An entry's identity across books: a ``(world, uid)`` pair, so ``json.dumps`` writes it
    as ``["world", uid]`` and it unpacks like one (:meth:`to_json` gives the object form).

    Args:
        world: the book (world) name.
        uid: the entry's uid in that book.
    """

    world: str
    uid: int | str

    @property
    def key(self) -> str:
        """SillyTavern's ``"<book>.<uid>"`` key (used in timed-effect records)."""
        return f"{self.world}.{self.uid}"

    def to_json(self) -> dict[str, Any]:
        """Returns: ``{"world": ..., "uid": ...}``, the conformance vectors' shape."""
        return {"world": self.world, "uid": self.uid}


@dataclass(frozen=True, slots=True)
class Character:
    """The selected character.

    Args:
        name: display name.
        avatar: avatar file name; name filters compare against it without its last extension.
        tags: tag ids; ``None`` means the character has no entry in the tag map (tag filters
            then see an empty list).
    """

    name: str
    avatar: str = ""
    tags: tuple[str, ...] | None = None

    @property
    def filter_id(self) -> str:
        """The avatar without its last extension: what character filters name."""
        base = self.avatar
        dot = base.rfind(".")
        return base[:dot] if dot != -1 else base


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message as the engine scans it.

    Args:
        name: the speaker's name (prefixed to the text when ``include_names`` is on).
        text: the message text.
        is_user: whether the user wrote it.
    """

    name: str
    text: str
    is_user: bool = False


_KNOWN_ROLES = frozenset(ROLES)


@dataclass(frozen=True, slots=True)
class BookSource:
    """A book and the roles it plays in an engine.

    Args:
        book: a book, or a book compiled with the engine's match options.
        roles: any of ``global``, ``character``, ``character_extra``, ``chat``, ``persona``
            (:data:`ROLES`).
    """

    book: Lorebook | CompiledBook
    roles: tuple[Role, ...]

    def __post_init__(self) -> None:
        roles = self.roles
        try:
            if type(roles) is tuple and roles and _KNOWN_ROLES.issuperset(roles):   # the usual case
                return
        except TypeError:             # an unhashable role: named below
            pass
        valid = ", ".join(ROLES)
        if isinstance(roles, (str, bytes)) or not isinstance(roles, (tuple, list, frozenset, set)):
            raise SettingsError(f"roles must be a tuple of role names ({valid}), got {roles!r:.60}; "
                                "e.g. roles=('global',)", source="BookSource", field="roles")
        if not roles:
            raise SettingsError(f"roles is empty: the book would take no part; give one or more of {valid}",
                                source="BookSource", field="roles")
        for role in roles:
            if role not in ROLES:
                raise SettingsError(f"unknown role {role!r:.60} (expected one of {valid})", source="BookSource",
                                    field="roles")
        if not isinstance(roles, tuple):
            object.__setattr__(self, "roles", tuple(roles))


@dataclass(frozen=True, slots=True)
class LoopRecord:
    """One scan loop.

    Args:
        state: the loop's kind (:data:`LoopState`).
        next: the kind of the next loop (``"NONE"``: the scan ended).
        activated: the entries this loop activated, in activation order.
    """

    state: LoopState
    next: LoopState
    activated: tuple[EntryId, ...]

    def to_json(self) -> dict[str, Any]:
        """Returns: ``{"state", "next", "activated": [{"world", "uid"}, ...]}``."""
        return {"state": self.state, "next": self.next, "activated": [e.to_json() for e in self.activated]}


class Diagnostic(NamedTuple):
    """Why one entry did or did not fire on this turn: a frozen record (a named tuple, built in a
    third of a frozen dataclass's time: a replay builds several a turn).

    Args:
        entry: the entry.
        outcome: ``"activated"`` or ``"not_activated"`` (:data:`DiagnosticOutcome`).
        reason: a short code (:data:`Reason`): ``constant``, ``key``, ``sticky``,
            ``decorator``, ``forced`` for activations; a gate, ``group``, ``probability``,
            ``budget`` or ``not_reached`` otherwise.
        detail: more, in words.
        loop: the 1-based loop where the decision fell.
        key: the key that matched.
        where: which scanned text the key matched in (activated entries only).
        span: where exactly, with the matched text and its context (activated entries
            only; None when the match cannot be shown, e.g. a fuzzy one).
    """

    entry: EntryId
    outcome: DiagnosticOutcome
    reason: Reason
    detail: str = ""
    loop: int | None = None
    key: str | None = None
    where: str | None = None
    span: KeySpan | None = None

    def __str__(self) -> str:
        """One sentence, e.g. ``Entry Saltmere.1 fired (key): primary key 'lighthouse' matched in message 0
        (newest = 0): "…past the [lighthouse] on the…", loop 1.`` (:meth:`describe` without names)."""
        return self.describe()

    def describe(self, *, name_text: Callable[[str, int, str], str] | None = None,
                 name_entry: Callable[[str], str] | None = None) -> str:
        """:meth:`__str__` with the span's texts and entries named as :func:`describe_span` names them
        (a tool passes :func:`message_namer` to number messages as its chat does)."""
        verb = "fired" if self.outcome == "activated" else "did not fire"
        why = self.detail or self.reason.replace("_", " ")
        if self.span is not None:
            why += " " + describe_span(self.span, name_text=name_text, name_entry=name_entry)
        elif self.where:
            why += f" in {self.where}"
        loop = f", loop {self.loop}" if self.loop is not None else ""
        return f"Entry {self.entry.key} {verb} ({self.reason}): {why}{loop}."

    def to_json(self, *, name_text: Callable[[str, int, str], str] | None = None) -> dict[str, Any]:
        """Returns: the record as plain JSON data, the service's ``DiagnosticOut``: the entry's
        ``world`` and ``uid``, the fields above (the span as :meth:`KeySpan.to_json` or None) and
        ``text``, the whole record as one sentence (:meth:`describe`).

        Args:
            name_text: how ``text`` names the scanned texts (:meth:`describe`).
        """
        return {"world": self.entry.world, "uid": self.entry.uid, "outcome": self.outcome, "reason": self.reason,
                "detail": self.detail, "loop": self.loop, "key": self.key, "where": self.where,
                "span": self.span.to_json() if self.span is not None else None,
                "text": self.describe(name_text=name_text)}


def message_name(number: int, newest: int) -> str:
    """A scanned message as every tool names it (docs/sillytavern-mode.md#cli-turns): by the chat
    file's own message number, e.g. ``message 3, the newest``.

    Args:
        number: the message's number in the chat file (1 = its first message, system messages counted).
        newest: its place counting from the newest message scanned (0 = the newest), the
            ``index`` of a message :class:`KeySpan`; only the newest is marked.
    """
    return f"message {number}" + (", the newest" if newest == 0 else "")


def message_namer(numbers: Sequence[int]) -> Callable[[str, int, str], str]:
    """A ``name_text`` for :func:`describe_span` that names messages by :func:`message_name`.

    Args:
        numbers: the number of each scanned message in the chat (the file's, from 1, system
            messages counted; a service request's place in its ``messages``), oldest first.
    """
    def name(kind: str, index: int, label: str) -> str:
        if kind != "message" or label == "no message" or not 0 <= index < len(numbers):
            return label
        return message_name(numbers[len(numbers) - 1 - index], index)
    return name


def describe_span(span: KeySpan, *, name_text: Callable[[str, int, str], str] | None = None,
                  name_entry: Callable[[str], str] | None = None) -> str:
    """Where a key matched, the matched text in context and what is unusual about it, in
    words, e.g. ``in message 0 (newest = 0): "She ran to [embrace] her", inside the longer
    word 'embrace'``.

    Args:
        span: the match.
        name_text: ``(kind, index, label) -> words`` for a text (default: its label), so a
            tool can number messages as its chat file does.
        name_entry: ``"<book>.<uid>" -> words`` for the entry whose content a recursion
            text's match lies in (default: ``entry <book>.<uid>``).
    """
    def text(kind: str, index: int, label: str) -> str:
        if kind == "recursion":
            owner = ""
            if span.source_entry is not None:
                owner = f" (the content of {name_entry(span.source_entry) if name_entry else 'entry ' + span.source_entry})"
            return f"recursion text {index}{owner}"
        return name_text(kind, index, label) if name_text is not None else label
    first = text(span.kind, span.index, span.label)
    if span.end_label is not None:
        assert span.end_kind is not None and span.end_index is not None
        place = f"across two texts of the joined window, {first} and {text(span.end_kind, span.end_index, span.end_label)}"
    else:
        place = f"in {first}"
    out = f'{place}: "{span.shown()}"'
    if span.inside_word is not None:
        out += f", inside the longer word {quoted(span.inside_word)}"
    return out


def quoted(text: str) -> str:
    """``text`` in single quotes as a reader writes it: backslashes as they are (a regex key
    reads as written), only line breaks and quotes escaped so one line stays one line."""
    return "'" + text.replace("\n", "\\n").replace("\r", "\\r").replace("'", "\\'") + "'"


def _no_diagnostics() -> dict[EntryId, Diagnostic]:
    return {}


def _no_entries(eid: EntryId) -> Entry:
    raise KeyError(eid)


_EXPLAINED = threading.Lock()     # the first reader of a result's diagnostics stores them (once, for all readers)
_FIELDS = ('activated', 'placement', 'budget', 'budget_overflowed', 'overflow_alert_shown', 'timed_effects', 'loops', '_explain', 'regex_cutoffs', '_decided', '_entry', 'fuzzy_cutoffs', 'key_hit_cutoffs', 'layout', 'stability')
_PUBLIC = tuple(f for f in _FIELDS if not f.startswith("_"))


class STResult:
    """Everything one SillyTavern-mode generation produces (docs/sillytavern-mode.md#st-inputs and 11).

    Args:
        activated: the entries that fired, in activation order.
        placement: where their contents land in the prompt.
        budget: the token budget of this turn.
        budget_overflowed: whether an entry was refused for the budget.
        overflow_alert_shown: whether SillyTavern would show its overflow alert.
        timed_effects: the timed-effects state to pass to the next turn.
        loops: one record per scan loop.
        regex_cutoffs: one line per regex key cut off by the scan's regex time budget
            ("regex key … was cut off after N ms …"): such a key counted as not matching
            this turn. Empty normally.
        fuzzy_cutoffs: one line when the scan's fuzzy-key comparisons reached
            ``Limits.fuzzy_comparisons_per_scan`` ("fuzzy matching was cut off in …"): in the
            texts named there the fuzzy keys matched only exactly. Empty normally.
        key_hit_cutoffs: one line when a scanned text gave more key hits than
            ``Limits.key_hits_per_text`` / ``key_hits_per_char`` allow ("key matching was cut
            off in …"): keys occurring only past that point in it did not match this turn.
            Empty normally (only degenerate texts and keys reach it).
        layout: the placement layout to pass to the next turn's ``layout`` (None when the scan
            was given none and ``stable_placement`` is off; docs/improved-profile.md#cache-stable).
        stability: how much of each placement text is unchanged from the layout the scan was
            given (None when it was given none).

    A result is frozen: the engine builds it complete, and assigning or deleting an attribute
    raises ``dataclasses.FrozenInstanceError`` (as for :class:`~lorescan.slot.SlotResult`). The
    explanation is computed on the first read of :attr:`diagnostics` and kept. The fields are
    held in one tuple (one store, not fifteen: a frozen dataclass's ``__init__`` cost a steady
    turn about 2%); the properties below read it.
    """
    __slots__ = ("_v", "_diagnostics")
    _v: tuple[Any, ...]
    _diagnostics: dict[EntryId, Diagnostic]

    def __init__(self, activated: list[EntryId], placement: Placement, budget: int, budget_overflowed: bool,
                 overflow_alert_shown: bool, timed_effects: TimedEffects, loops: list[LoopRecord],
                 _explain: Callable[[], dict[EntryId, Diagnostic]] = _no_diagnostics,
                 regex_cutoffs: tuple[str, ...] = (),
                 _decided: Callable[[], dict[EntryId, Diagnostic]] | None = None,
                 _entry: Callable[[EntryId], Entry] = _no_entries, fuzzy_cutoffs: tuple[str, ...] = (),
                 key_hit_cutoffs: tuple[str, ...] = (), layout: Layout | None = None,
                 stability: Stability | None = None) -> None:
        # _explain: every entry's diagnostic, computed when first read; _decided: the diagnostics a
        # pass decided (None after pickling: then every entry's is stored); _entry: EntryId -> the
        # Entry (the engine's books; after pickling, a dict of them)
        object.__setattr__(self, "_v", (activated, placement, budget, budget_overflowed, overflow_alert_shown,
                                        timed_effects, loops, _explain, regex_cutoffs, _decided, _entry,
                                        fuzzy_cutoffs, key_hit_cutoffs, layout, stability))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}: an STResult is frozen")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}: an STResult is frozen")

    def __repr__(self) -> str:
        return "STResult(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _PUBLIC) + ")"

    @property
    def activated(self) -> list[EntryId]:
        """The entries that fired, in activation order."""
        return self._v[0]

    @property
    def placement(self) -> Placement:
        """Where their contents land in the prompt."""
        return self._v[1]

    @property
    def budget(self) -> int:
        """The token budget of this turn."""
        return self._v[2]

    @property
    def budget_overflowed(self) -> bool:
        """Whether an entry was refused for the budget."""
        return self._v[3]

    @property
    def overflow_alert_shown(self) -> bool:
        """Whether SillyTavern would show its overflow alert."""
        return self._v[4]

    @property
    def timed_effects(self) -> TimedEffects:
        """The timed-effects state to pass to the next turn."""
        return self._v[5]

    @property
    def loops(self) -> list[LoopRecord]:
        """One record per scan loop."""
        return self._v[6]

    @property
    def regex_cutoffs(self) -> tuple[str, ...]:
        """One line per regex key cut off by the scan's regex time budget (empty normally)."""
        return self._v[8]

    @property
    def fuzzy_cutoffs(self) -> tuple[str, ...]:
        """One line when the fuzzy-key comparisons were cut off (empty normally)."""
        return self._v[11]

    @property
    def key_hit_cutoffs(self) -> tuple[str, ...]:
        """One line when key matching was cut off in a degenerate text (empty normally)."""
        return self._v[12]

    @property
    def layout(self) -> Layout | None:
        """The placement layout to pass to the next turn's ``layout`` (or None)."""
        return self._v[13]

    @property
    def stability(self) -> Stability | None:
        """How much of each placement text is unchanged from the given layout (or None)."""
        return self._v[14]

    @property
    def world_info_before(self) -> str:
        """The text placed before the character definitions."""
        return self.placement.before

    @property
    def world_info_after(self) -> str:
        """The text placed after the character definitions."""
        return self.placement.after

    @property
    def diagnostics(self) -> dict[EntryId, Diagnostic]:
        """Why each entry of the books did or did not fire (computed on first access, then kept)."""
        try:
            return self._diagnostics
        except AttributeError:           # not read yet: the slot is empty
            pass
        computed = self._v[7]()
        with _EXPLAINED:                 # two threads reading it first: both get the first one stored
            try:
                return self._diagnostics
            except AttributeError:
                object.__setattr__(self, "_diagnostics", computed)   # frozen: the one write, a cache
                return computed

    def __reduce__(self):
        # A result is a value: pickling materialises the explanation, so the copy owns plain
        # data only (no engine, views or caches).
        diagnostics = self.diagnostics
        entries = {}
        for eid in diagnostics:
            try:
                entries[eid] = self._v[10](eid)
            except KeyError:               # a result built by hand, without its books
                pass
        return (STResult, (self.activated, self.placement, self.budget, self.budget_overflowed,
                           self.overflow_alert_shown, self.timed_effects, self.loops,
                           functools.partial(dict, diagnostics), self.regex_cutoffs, None,
                           entries.__getitem__, self.fuzzy_cutoffs, self.key_hit_cutoffs,
                           self.layout, self.stability))

    def entry(self, eid: EntryId | tuple[str, int | str]) -> Entry:
        """The entry behind an id of this result (its ``comment`` is the name authors give it).

        Args:
            eid: an :class:`EntryId` (or a ``(world, uid)`` pair) from :attr:`activated`,
                :attr:`diagnostics` or :attr:`loops`.

        Raises:
            KeyError: no such entry in the engine's books.
        """
        return self._v[10](EntryId(*eid))

    def name(self, eid: EntryId | tuple[str, int | str]) -> str:
        """The entry's display name: its comment, else its first key, else ``#uid``.

        Raises:
            KeyError: no such entry in the engine's books.
        """
        e = self.entry(eid)
        name = (e.comment or "").strip()
        if not name and e.key:
            name = str(e.key[0])
        return name or f"#{e.uid}"

    def decisions(self) -> dict[EntryId, Diagnostic]:
        """The diagnostics of the entries a pass of this turn decided about.

        Returns:
            Fired entries and those stopped by a gate, a group, a roll or the budget,
            without explaining every other entry of the books: on a large book much cheaper
            than :attr:`diagnostics`. A result that went through pickle holds every entry's
            diagnostic and returns all of them.
        """
        decided = self._v[9]
        if decided is not None:
            return decided()
        return dict(self.diagnostics)

    def explain(self, world: str, uid: int | str) -> Diagnostic:
        """The diagnostic record of one entry.

        Args:
            world: the entry's book name.
            uid: the entry's uid.

        Raises:
            KeyError: no such entry in the engine's books.
        """
        return self.diagnostics[EntryId(world, uid)]

    def to_json(self, *, diagnostics: bool = False,
                name_text: Callable[[str, int, str], str] | None = None) -> dict[str, Any]:
        """The result as plain JSON data: what the service's ``/v1/st/scan`` answers
        (``lorescan.serve.models.STScanResponse`` is its schema; a test holds the two together).

        Args:
            diagnostics: also give ``diagnostics``, one :meth:`Diagnostic.to_json` per entry of
                the books in global order (:attr:`diagnostics`: computed if not yet).
            name_text: how each diagnostic's ``text`` names the scanned texts
                (:meth:`Diagnostic.describe`; the service numbers messages by their place in the request).

        Returns:
            The conformance vectors' ``expected`` fields (``activated``, the placement,
            ``budget_overflowed``, ``overflow_alert_shown``, ``timed_effects``, ``loops``), then
            ``budget``, ``regex_cutoffs``, ``fuzzy_cutoffs``, ``key_hit_cutoffs``, ``layout`` and
            ``placement_stability`` (each only when there is one) and, when asked for, ``diagnostics``.
        """
        out: dict[str, Any] = {
            "activated": [e.to_json() for e in self.activated],
            **self.placement.to_json(),
            "budget_overflowed": self.budget_overflowed,
            "overflow_alert_shown": self.overflow_alert_shown,
            "timed_effects": self.timed_effects.to_json(),
            "loops": [lr.to_json() for lr in self.loops],
            "budget": self.budget,
            "regex_cutoffs": list(self.regex_cutoffs),
            "fuzzy_cutoffs": list(self.fuzzy_cutoffs),
            "key_hit_cutoffs": list(self.key_hit_cutoffs),
        }
        # cache-stable placement (docs/improved-profile.md#cache-stable): only when there is one
        if self.layout:
            out["layout"] = self.layout.to_json()
        if self.stability:
            out["placement_stability"] = self.stability.to_json()
        if diagnostics:
            out["diagnostics"] = [d.to_json(name_text=name_text) for d in self.diagnostics.values()]
        return out
