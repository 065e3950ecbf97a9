"""Request and response shapes of the ``/v1`` API, as msgspec structs.

msgspec decodes and validates a request body in one pass (C code, no intermediate dict)
and reports the failing field as a JSON path (``$.messages[3].mes``); the same structs
give the JSON Schema that ``/openapi.json`` serves. Field names follow the conformance
vectors (SillyTavern mode) and docs/slot-mode.md (lorebook-slot mode); ``docs/service.md`` shows
every shape with an example.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_type_hints

import msgspec
from msgspec import Meta, Struct, field

from ..st.settings import InsertionStrategy, STSettings

__all__ = ["BookInfo", "BookLoss", "BookRef", "CharacterIn", "MessageIn", "STSettingsIn", "STScanRequest",
           "ForcedEntry", "SlotBookRef", "SlotSettingsIn", "SlotMessageIn", "SlotRunRequest", "ErrorBody",
           "STScanResponse", "SlotRunResponse", "DiagnosticOut", "BookList", "ST_ROLES", "TOKENIZERS",
           "JanitorRunRequest", "JanitorRunResponse", "JanitorErrorOut"]

ST_ROLES = ("global", "character", "character_extra", "chat", "persona")
TOKENIZERS = ("cl100k", "words", "chars")

BookId = Annotated[str, Meta(pattern="^[0-9a-f]{32}$", description="a book id returned by POST /v1/books")]
ChatId = Annotated[str, Meta(min_length=1, max_length=200)]
Tokenizer = Literal["cl100k", "words", "chars"]
Macros = Annotated[dict[Annotated[str, Meta(min_length=1, max_length=100, pattern=r"^[^{}]+$")], str],
                   Meta(description="macro name -> value: every '{{name}}' (name case-insensitive) is replaced")]
UnitInterval = Annotated[float, Meta(ge=0, lt=1)]


class _Strict(Struct, forbid_unknown_fields=True, omit_defaults=False):
    """Unknown fields are an error (a typo must not be silently ignored)."""


# -- books ------------------------------------------------------------------------------

class BookLoss(Struct):
    """One field the SillyTavern engine model does not carry over (``entry``: uid, None = book)."""

    entry: Union[int, str, None]
    field: str
    why: str


class BookInfo(Struct):
    """A stored book: ``POST /v1/books`` and ``GET /v1/books/{id}``."""

    id: str
    name: str
    format: str
    entries: int
    bytes: int
    filename: str
    losses: list[BookLoss]
    created: bool = False


# -- SillyTavern mode -----------------------------------------------------------------------

class BookRef(_Strict):
    """A stored book and the roles it plays in this scan (docs/sillytavern-mode.md#st-order)."""

    id: BookId
    roles: Annotated[list[Literal["global", "character", "character_extra", "chat", "persona"]],
                     Meta(min_length=1)] = field(default_factory=lambda: ["global"])


def _settings_struct() -> type[Struct]:
    """``STSettingsIn``, generated from :class:`lorescan.STSettings` so the two cannot drift: the
    same fields, types and defaults; ``insertion_strategy`` as its ``Literal`` so the schema lists
    the values. Ranges are checked by ``STSettings`` itself (a 422 naming the field)."""
    hints = get_type_hints(STSettings)
    hints["insertion_strategy"] = InsertionStrategy
    fields = [(f.name, hints[f.name], f.default) for f in dataclasses.fields(STSettings)]
    struct = msgspec.defstruct("STSettingsIn", fields, bases=(_Strict,), module=__name__)
    struct.__doc__ = ("Global World Info settings (docs/sillytavern-mode.md#st-settings); the names of the "
                      "conformance vectors.")
    return struct


if TYPE_CHECKING:
    STSettingsIn = _Strict
else:
    STSettingsIn = _settings_struct()


class MessageIn(_Strict):
    """A chat message, SillyTavern-shaped."""

    mes: str
    name: str = ""
    is_user: bool = False


class CharacterIn(_Strict):
    """The selected character: name, avatar file name (filters use it without extension), tag ids."""

    name: str = ""
    avatar: str = ""
    tags: Union[list[str], None] = None


class ForcedEntry(_Strict):
    """An entry activated for this scan only (docs/sillytavern-mode.md#st-gates, gate 12)."""

    world: str
    uid: Union[int, str]


class STScanRequest(_Strict):
    """``POST /v1/st/scan``: one SillyTavern-mode generation."""

    books: Annotated[list[BookRef], Meta(max_length=64)]
    messages: list[MessageIn]
    max_context: Annotated[int, Meta(ge=0)]
    settings: STSettingsIn = field(default_factory=STSettingsIn)
    compat: Literal["sillytavern", "improved"] = "sillytavern"
    character: Union[CharacterIn, None] = None
    global_scan_data: Union[dict[str, str], None] = None
    injects: list[str] = field(default_factory=list)
    authors_note: Union[str, None] = None
    trigger: str = "normal"
    dry_run: bool = False
    timed_effects: Union[dict[str, Any], None] = None
    forced: list[ForcedEntry] = field(default_factory=list)
    tokenizer: Tokenizer = "cl100k"
    random: Union[UnitInterval, None] = None
    seed: Union[int, None] = None
    macros: Union[Macros, None] = None
    explain: bool = False
    chat_id: Union[ChatId, None] = None


# -- lorebook-slot mode -----------------------------------------------------------------------

class SlotSettingsIn(_Strict):
    """A book's slot settings (docs/slot-mode.md#slot-pool); absent ones are read from the book."""

    scan_depth: Union[int, None] = None
    token_budget: Union[int, None] = None
    recursive_scanning: Union[bool, None] = None


class SlotBookRef(_Strict):
    """An attached book, in attachment order; ``book_id`` names it in the state and log."""

    id: BookId
    book_id: Union[Annotated[str, Meta(min_length=1, max_length=200)], None] = None
    settings: Union[SlotSettingsIn, None] = None


class SlotMessageIn(_Strict):
    """A message with its role, oldest first."""

    role: Literal["system", "user", "assistant"]
    content: str


class SlotRunRequest(_Strict):
    """``POST /v1/slot/run``: one lorebook-slot request."""

    books: Annotated[list[SlotBookRef], Meta(max_length=64)]
    messages: list[SlotMessageIn]
    turn_id: Union[str, int]
    state: Union[dict[str, Any], None] = None
    dry_run: bool = False
    at_greeting: Union[bool, None] = None
    greeting_index: Union[int, None] = None
    user_icon: Union[str, None] = None
    user_icon_decorator: bool = False
    regex_keys: Literal["ccv3", "auto"] = "ccv3"
    rules: Literal["improved", "sillytavern"] = "improved"
    case_sensitive: bool = False
    match_whole_words: bool = False
    tokenizer: Tokenizer = "cl100k"
    macros: Union[Macros, None] = None
    chat_id: Union[ChatId, None] = None


# -- responses (encoded from the engines' own JSON; these structs describe them and the
#    end-to-end tests decode every answer with them, so the schema cannot drift) -------

class EntryRef(Struct, forbid_unknown_fields=True):
    world: str
    uid: Union[int, str]


class DepthGroupOut(Struct, forbid_unknown_fields=True):
    depth: Any
    role: Any
    entries: list[str]


class ExampleOut(Struct, forbid_unknown_fields=True):
    position: int
    content: str


class LoopOut(Struct, forbid_unknown_fields=True):
    state: str
    next: str
    activated: list[EntryRef]


class DiagnosticOut(Struct, forbid_unknown_fields=True):
    """Why one entry did or did not fire (``lorescan.Diagnostic``)."""

    world: str
    uid: Union[int, str]
    outcome: Literal["activated", "not_activated"]
    reason: str
    detail: str
    loop: Union[int, None]
    key: Union[str, None]
    where: Union[str, None]


class STScanResponse(Struct, forbid_unknown_fields=True):
    """``STResult.to_json()`` (the conformance vectors' ``expected`` shape) plus ``budget``
    and, with ``explain``, one diagnostic per entry in global order."""

    activated: list[EntryRef]
    world_info_before: str
    world_info_after: str
    depth_entries: list[DepthGroupOut]
    an_top: list[str]
    an_bottom: list[str]
    em_entries: list[ExampleOut]
    outlets: dict[str, list[str]]
    authors_note: Union[str, None]
    budget_overflowed: bool
    overflow_alert_shown: bool
    timed_effects: dict[str, Any]
    loops: list[LoopOut]
    budget: int
    diagnostics: Union[list[DiagnosticOut], None] = None
    regex_cutoffs: list[str] = field(default_factory=list)
    fuzzy_cutoffs: list[str] = field(default_factory=list)


class SlotMessageOut(Struct, forbid_unknown_fields=True):
    role: str
    content: str


class LogRecordOut(Struct, forbid_unknown_fields=True):
    """One entry's fate in one request (``lorescan.slot.LogRecord``)."""

    book: str
    id: Union[int, str]
    name: str
    outcome: str
    reason: str
    pass_number: Union[int, None]
    matched_by: Union[str, None]
    matched_key: Union[str, None]
    roll: Union[float, None]
    tokens: Union[int, None]
    priority: float
    order: float
    role: str
    ignore_on_max_context: bool
    position: list[int]
    detail: Union[str, None] = None      # one of lorescan.slot.LOG_DETAILS, or None


class SlotRunResponse(Struct, forbid_unknown_fields=True):
    """``SlotResult`` as JSON: the slot's messages, the request log, the new state."""

    messages: list[SlotMessageOut]
    log: list[LogRecordOut]
    state: dict[str, Any]
    budget: int
    tokens_used: int
    passes: int
    disabled_ui_prompts: list[str]
    budget_book: Union[str, None] = None
    notes: list[dict[str, Any]] = field(default_factory=list)
    regex_cutoffs: list[str] = field(default_factory=list)
    fuzzy_cutoffs: list[str] = field(default_factory=list)


# -- JanitorAI script mode -----------------------------------------------------------------

class JanitorRunRequest(_Strict):
    """``POST /v1/janitor/run``: one run of the JanitorAI script (docs/janitor-mode.md).

    ``book``: the raw ``dynamicLore`` value; ``context``: the object the script is given;
    ``settings``: ``apply_limit`` / ``window_depth`` (any JSON, as in the script's text; a
    missing key is the script's default); ``random``: the values ``Math.random`` returns,
    in order (too few is a 422), else ``seed`` seeds them; ``explain``: add the per-entry
    account."""

    book: Any
    context: Any
    settings: dict[Literal["apply_limit", "window_depth"], Any] = field(default_factory=dict)
    profile: Literal["script", "improved"] = "script"
    random: Union[Annotated[list[UnitInterval], Meta(max_length=1_000_000)], None] = None
    seed: Union[int, None] = None
    explain: bool = False


class JanitorErrorOut(Struct, forbid_unknown_fields=True):
    name: str
    message: str


class JanitorRunResponse(Struct, forbid_unknown_fields=True):
    """The vectors' ``expected`` shape, plus ``explain`` (one line per entry) when asked."""

    personality: Union[str, None]
    scenario: Union[str, None]
    error: Union[JanitorErrorOut, None]
    random_calls: int
    trace: dict[str, Any]
    explain: Union[list[str], None] = None


class BookList(Struct):
    books: list[BookInfo]


class ErrorBody(Struct):
    """Every error answer: ``error`` says what is wrong; ``path`` locates it in the request
    (422); ``source``/``entry``/``field`` locate it in a book (400); ``reasons`` lists why a
    worker is not ready (503 from /readyz)."""

    error: str
    path: Union[str, None] = None
    source: Union[str, None] = None
    entry: Union[int, str, None] = None
    field: Union[str, None] = None
    reasons: Union[list[str], None] = None


def decoder(kind: type) -> msgspec.json.Decoder:
    """A reusable validating decoder for one request type."""
    return msgspec.json.Decoder(kind)
