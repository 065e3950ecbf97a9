"""What lorebook-slot mode takes in and gives back (docs/slot-mode.md#slot-log): the request's
messages, the slot's messages, one log record per pool entry, the request notes and the
result of one request.

Everything here is plain data: a :class:`SlotResult` is frozen and :meth:`SlotResult.to_json`
is the service's ``/v1/slot/run`` answer.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple, get_args

from ..errors import SettingsError
from ..layout import Stability
from ..match.spans import KeySpan
from .decorators import MESSAGE_ROLES

__all__ = ["SlotResult", "SlotMessage", "LogRecord", "RequestNote", "RoleMessage", "Outcome", "OUTCOMES",
           "MatchedBy", "MATCHED_BY", "LogDetail", "LOG_DETAILS", "NoteCode", "NOTE_CODES", "read_messages"]

# LogRecord.outcome: what happened to the entry (docs/slot-mode.md#slot-log).
Outcome = Literal["inserted", "dropped_budget", "probability_failed", "not_matched", "disabled",
                  "blocked:dont_activate", "blocked:dont_activate_after_match", "blocked:is_greeting",
                  "blocked:is_user_icon", "blocked:activate_only_after", "blocked:activate_only_every"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
_ROLE_SET = frozenset(MESSAGE_ROLES)

# One message of SlotEngine.run's input: (role, text) or {"role": ..., "content": ...}.
RoleMessage = tuple[str, str] | Mapping[str, Any]

# LogRecord.matched_by: what activated the entry (a key, constant, @@activate, @@keep, or meaning:
# docs/semantic.md#sem-engine).
MatchedBy = Literal["key", "constant", "activate", "keep", "semantic"]
MATCHED_BY: tuple[MatchedBy, ...] = get_args(MatchedBy)
# LogRecord.detail: a machine-readable refinement of the outcome (docs/slot-mode.md).
LogDetail = Literal["secondary_logic", "invalid_regex", "system_message_only", "recursion_only"]
LOG_DETAILS: tuple[LogDetail, ...] = ("secondary_logic", "invalid_regex", "system_message_only",
                                      "recursion_only")
# SlotResult.notes: what the request did as a whole, with a code each.
NoteCode = Literal["budget_stored", "budget_default", "system_message_skipped"]
NOTE_CODES: tuple[NoteCode, ...] = ("budget_stored", "budget_default", "system_message_skipped")


class SlotMessage(NamedTuple):
    """One message of the lorebook slot: ``(role, content)``."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class LogRecord:
    """What happened to one entry of the pool in one request (docs/slot-mode.md#slot-log).

    ``outcome``: one of :data:`OUTCOMES`; ``reason``: why, in words. ``pass_number``: the
    pass (1..3) in which the entry activated (None if it did not). ``matched_by``:
    ``"key"``, ``"constant"``, ``"activate"`` (``@@activate``) or ``"keep"`` (``@@keep``);
    ``matched_key``: the primary key that matched, as stored. ``roll``: the stable roll
    ``u`` when ``@@probability`` applied. ``tokens``: the content's token count (entries
    that activated only). ``priority``, ``order``, ``role``: effective values.
    ``ignore_on_max_context``: ranked below every entry without the decorator.
    ``detail``: None, or one of :data:`LOG_DETAILS` refining the outcome (the selective
    logic failed, a ``/…/`` key is not a valid regex, a key appeared only in a system
    message, a depth-0 entry that recursion text did not reach). ``span``: where the key
    matched (:class:`~lorescan.match.spans.KeySpan`); None from :meth:`SlotEngine.run`, set by
    :func:`lorescan.slot.spans.with_spans` on an explanation path.
    """

    book: str
    id: int | str
    name: str
    outcome: Outcome
    reason: str
    pass_number: int | None
    matched_by: MatchedBy | None
    matched_key: str | None
    roll: float | None
    tokens: int | None
    priority: float
    order: float
    role: str
    ignore_on_max_context: bool
    position: tuple[int, int]
    detail: LogDetail | None = None
    span: KeySpan | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON data (the span as :meth:`KeySpan.to_json` or None)."""
        data = asdict(self)
        data["position"] = list(self.position)
        data["span"] = self.span.to_json() if self.span is not None else None
        return data

    to_json = to_dict


class RequestNote(NamedTuple):
    """Something the request did as a whole: ``code`` (one of :data:`NOTE_CODES`), the
    reason in words, and the index of the message it is about (None if none)."""

    code: str
    text: str
    message: int | None = None


@dataclass(frozen=True, slots=True)
class SlotResult:
    """The answer to one request.

    ``messages``: the lorebook slot, in order; ``log``: one record per pool entry, in pool
    order; ``state``: the per-chat state to store for the next turn (the input state
    unchanged in a dry run); ``budget``: the token budget applied; ``tokens_used``: the
    tokens of the inserted entries; ``passes``: scan passes run; ``disabled_ui_prompts``:
    values of ``@@disable_ui_prompt`` on inserted entries (``system_prompt``,
    ``post_history_instructions``), for the caller to act on. ``budget_book``: the id of the
    book whose stored ``token_budget`` is the budget (None: the default applied).
    ``notes``: request-level log lines (:class:`RequestNote`): where the budget came from,
    each system message skipped.
    """

    messages: tuple[SlotMessage, ...]
    log: tuple[LogRecord, ...]
    state: dict[str, Any]
    budget: int
    tokens_used: int
    passes: int
    disabled_ui_prompts: frozenset[str]
    budget_book: str | None = None
    notes: tuple[RequestNote, ...] = ()
    regex_cutoffs: tuple[str, ...] = ()
    """One line per regex key cut off by the run's regex time budget (also in the log)."""
    fuzzy_cutoffs: tuple[str, ...] = ()
    """One line when the run's fuzzy-key comparisons reached ``Limits.fuzzy_comparisons_per_scan``
    (in the texts it names, fuzzy keys matched only exactly)."""
    key_hit_cutoffs: tuple[str, ...] = ()
    """One line when a scanned text gave more key hits than ``Limits.key_hits_per_text`` /
    ``key_hits_per_char`` allow (keys occurring only past that point did not match)."""
    stability: Stability | None = None
    """How much of the slot (its messages' contents joined by newlines) is unchanged from the
    layout the state held (None when it held none; docs/improved-profile.md#cache-stable)."""

    @property
    def inserted(self) -> tuple[LogRecord, ...]:
        """Log records of the inserted entries, in pool order."""
        return tuple(r for r in self.log if r.outcome == "inserted")

    def to_json(self) -> dict[str, Any]:
        """Returns: the result as plain JSON data, every field, in the order of the service's
        ``SlotRunResponse`` (``/v1/slot/run`` answers exactly this; ``state`` is already plain
        data, ``disabled_ui_prompts`` sorted)."""
        return {"messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "log": [r.to_dict() for r in self.log], "state": self.state, "budget": self.budget,
                "tokens_used": self.tokens_used, "passes": self.passes,
                "disabled_ui_prompts": sorted(self.disabled_ui_prompts), "budget_book": self.budget_book,
                "notes": [{"code": n.code, "text": n.text, "message": n.message} for n in self.notes],
                "regex_cutoffs": list(self.regex_cutoffs), "fuzzy_cutoffs": list(self.fuzzy_cutoffs),
                "key_hit_cutoffs": list(self.key_hit_cutoffs),
                "placement_stability": None if self.stability is None else self.stability.to_json()}


def read_messages(messages: Sequence[RoleMessage]) -> list[tuple[str, str]]:
    """A request's messages as ``(role, text)`` pairs.

    Raises:
        SettingsError: not a list of :data:`RoleMessage` values, a role other than
            ``system``, ``user`` or ``assistant``, or a text that is not a string.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise SettingsError("expected a list of (role, text) messages", source="messages")
    out: list[tuple[str, str]] = []
    roles = _ROLE_SET
    for i, m in enumerate(messages):
        if type(m) is tuple and len(m) == 2 and type(m[0]) is str and m[0] in roles and type(m[1]) is str:
            out.append(m)           # the common shape, already valid
            continue
        if isinstance(m, Mapping):
            role = m.get("role")
            text = m.get("content", m.get("text"))
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            role, text = m
        else:
            raise SettingsError(f"expected (role, text) or {{'role', 'content'}}, got {m!r:.60}",
                                source="messages", field=f"[{i}]")
        if role not in MESSAGE_ROLES:       # a tuple: an unhashable role is refused, not a TypeError
            raise SettingsError(f"role must be system, user or assistant, got {role!r:.40}",
                                source="messages", field=f"[{i}].role")
        if not isinstance(text, str):
            raise SettingsError(f"text must be a string, got {type(text).__name__}", source="messages",
                                field=f"[{i}].content")
        out.append((role, text))
    return out
