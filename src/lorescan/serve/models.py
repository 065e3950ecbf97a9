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
from msgspec import UNSET, Meta, Struct, UnsetType, field

from ..st.result import ROLES as ST_ROLES, DiagnosticOutcome, Role
from ..st.settings import InsertionStrategy, STSettings

__all__ = ["BookInfo", "BookLoss", "BookRef", "CharacterIn", "MessageIn", "STSettingsIn", "STScanRequest",
           "ForcedEntry", "SlotBookRef", "SlotSettingsIn", "SlotMessageIn", "SlotRunRequest", "ErrorBody",
           "STScanResponse", "SlotRunResponse", "DiagnosticOut", "BookList", "ST_ROLES", "TOKENIZERS",
           "JanitorRunRequest", "JanitorRunResponse", "JanitorErrorOut"]

TOKENIZERS = ("cl100k", "words", "chars")
EXAMPLE_BOOK_ID = "5d41402abc4b2a76b9719d911017c592"


def doc(description: str, *examples: Any, **constraints: Any) -> Meta:
    """The schema text of one field: what it means and example values (``/openapi.json``
    shows both; tests/serve/test_serve_openapi.py requires them on every field)."""
    return Meta(description=description, examples=list(examples), **constraints)


BookId = Annotated[str, doc("a book id returned by POST /v1/books (32 lowercase hex digits)", EXAMPLE_BOOK_ID,
                            pattern="^[0-9a-f]{32}$")]
ChatId = Annotated[str, Meta(min_length=1, max_length=200)]
Tokenizer = Literal["cl100k", "words", "chars"]
_TOKENIZER_DOC = doc("how entry and prompt tokens are counted: cl100k (tiktoken), words or chars", "cl100k")
MacroName = Annotated[str, Meta(min_length=1, max_length=100, pattern=r"^[^{}]+$")]
_MACROS_DOC = doc("macro name -> value: every '{{name}}' (name case-insensitive) is replaced", {"user": "Rowan"})
_CHAT_ID_DOC = doc("names the chat so the worker keeps its key-hit cache warm between turns (no effect on the "
                   "answer)", "chat-42")
UnitInterval = Annotated[float, Meta(ge=0, lt=1)]
Uid = Union[int, str]


class _Strict(Struct, forbid_unknown_fields=True, omit_defaults=False):
    """Unknown fields are an error (a typo must not be silently ignored)."""


# -- books ------------------------------------------------------------------------------

class BookLoss(Struct):
    """One field the SillyTavern engine model does not carry over (``entry``: uid, None = book)."""

    entry: Annotated[Union[int, str, None], doc("the entry's uid; null for a book-level field", 3)]
    field: Annotated[str, doc("the field not carried over", "extensions.weight")]
    why: Annotated[str, doc("why it is not carried over", "not a SillyTavern World Info field")]


class BookInfo(Struct):
    """A stored book: ``POST /v1/books`` and ``GET /v1/books/{id}``."""

    id: Annotated[str, doc("the book's id: a hash of its content, the same on every replica", EXAMPLE_BOOK_ID)]
    name: Annotated[str, doc("the book's name (the query's `name`, else read from the file)", "Saltmere")]
    format: Annotated[str, doc("the file format it was read as", "sillytavern")]
    entries: Annotated[int, doc("how many entries it holds", 12)]
    bytes: Annotated[int, doc("the size of the upload in bytes", 5120)]
    filename: Annotated[str, doc("the upload's file name, or `<upload>`", "saltmere.json")]
    losses: Annotated[list[BookLoss], doc("fields the engine does not carry over", [])]
    created: Annotated[bool, doc("true when this upload stored it; false when it was already stored", True)] = False


# -- SillyTavern mode -----------------------------------------------------------------------

class BookRef(_Strict):
    """A stored book and the roles it plays in this scan (docs/sillytavern-mode.md#st-order)."""

    id: BookId
    roles: Annotated[list[Role],
                     doc("the roles the book plays, which set its place in the scan order", ["global"],
                         min_length=1)] = field(default_factory=lambda: ["global"])


# name -> (description, example) of every SillyTavern setting (docs/sillytavern-mode.md#st-settings);
# _SETTINGS_RANGE: the ranges STSettings checks, declared in the schema too (tests/serve/test_serve_openapi.py)
_SETTINGS_DOC: dict[str, tuple[str, Any]] = {
    "scan_depth": ("how many of the newest messages are scanned for keys", 4),
    "budget_percent": ("the World Info budget as a percentage of max_context", 25),
    "budget_cap": ("a cap on the budget in tokens; 0 = no cap", 0),
    "min_activations": ("scan deeper until at least this many entries fire; 0 = off", 0),
    "min_activations_depth_max": ("the deepest the min-activations scan goes; 0 = the whole chat", 0),
    "max_recursion_steps": ("the most recursion steps; 0 = no limit", 0),
    "recursive": ("activated entries' content is scanned for further keys", True),
    "case_sensitive": ("keys match case-sensitively (an entry may override)", False),
    "match_whole_words": ("keys match whole words only (an entry may override)", False),
    "use_group_scoring": ("inclusion groups pick by key score (an entry may override)", False),
    "include_names": ("scanned messages are prefixed with the speaker's name", True),
    "insertion_strategy": ("the order character and global books are placed in", "character_first"),
    "overflow_alert": ("report when the budget overflows", False),
    "stable_placement": ("cache-stable placement: entries keep their place from turn to turn (improved profile "
                         "only; send the returned layout back)", False),
}
_SETTINGS_RANGE: dict[str, dict[str, int]] = {
    **{name: {"ge": 0, "le": 10_000_000} for name in ("scan_depth", "budget_cap", "min_activations",
                                                      "min_activations_depth_max", "max_recursion_steps")},
    "budget_percent": {"ge": 0, "le": 100},
}


def _settings_struct() -> type[Struct]:
    """``STSettingsIn``, generated from :class:`lorescan.STSettings` so the two cannot drift: the
    same fields, types and defaults; ``insertion_strategy`` as its ``Literal`` so the schema lists
    the values. Ranges are checked by ``STSettings`` itself (a 422 naming the field). A setting
    missing from ``_SETTINGS_DOC`` has no description, which the OpenAPI test reports."""
    hints = get_type_hints(STSettings)
    hints["insertion_strategy"] = InsertionStrategy
    fields = []
    for f in dataclasses.fields(STSettings):
        tp = hints[f.name]
        if f.name in _SETTINGS_DOC:
            description, example = _SETTINGS_DOC[f.name]
            tp = Annotated[tp, doc(description, example, **_SETTINGS_RANGE.get(f.name, {}))]
        fields.append((f.name, tp, f.default))
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

    mes: Annotated[str, doc("the message text", "Who keeps the lighthouse?")]
    name: Annotated[str, doc("the speaker's name", "Rowan")] = ""
    is_user: Annotated[bool, doc("true for the user's messages", True)] = False


class CharacterIn(_Strict):
    """The selected character: name, avatar file name (filters use it without extension), tag ids."""

    name: Annotated[str, doc("the character's name", "Mara")] = ""
    avatar: Annotated[str, doc("the avatar file name; character filters use it without extension",
                               "mara.png")] = ""
    tags: Annotated[Union[list[str], None], doc("the character's tag ids, for character filters",
                                                ["keeper"])] = None


class ForcedEntry(_Strict):
    """An entry activated for this scan only (docs/sillytavern-mode.md#st-gates, gate 12)."""

    world: Annotated[str, doc("the book's name", "Saltmere")]
    uid: Annotated[Uid, doc("the entry's uid", 3)]


class ChatPrefix(_Strict):
    """The delta form (docs/service.md#chat-delta): ``messages`` follow the first ``count``
    messages of the chat this worker holds under ``chat_id``, whose digest is ``digest``; a
    worker that does not hold them answers 409 with ``code: "prefix_unknown"``."""

    count: Annotated[int, doc("how many messages of the held chat come before ``messages``", 1, ge=1)]
    digest: Annotated[str, doc("the digest of those messages (a SHA-256 hash chain, lowercase hex)",
                               "81017c1ae3f3ad24c9c847ee1d5c51777eb9db0392f36637c1ef8a94318ea982",
                               pattern="^[0-9a-f]{64}$")]


class STScanRequest(_Strict):
    """``POST /v1/st/scan``: one SillyTavern-mode generation."""

    books: Annotated[list[BookRef], doc("the books in play and their roles", [{"id": EXAMPLE_BOOK_ID}],
                                        max_length=64)]
    messages: Annotated[list[MessageIn], doc("the chat, oldest first (with a prefix: the messages after it)",
                                             [{"mes": "Who keeps the lighthouse?", "is_user": True}])]
    max_context: Annotated[int, doc("the model's context size in tokens; the budget is a share of it", 8192,
                                    ge=0)]
    settings: Annotated[STSettingsIn, doc("global World Info settings", {"scan_depth": 4})] = \
        field(default_factory=STSettingsIn)
    compat: Annotated[Literal["sillytavern", "improved"],
                      doc("sillytavern reproduces SillyTavern exactly; improved fixes its known bugs",
                          "sillytavern")] = "sillytavern"
    character: Annotated[Union[CharacterIn, None], doc("the selected character, for character filters",
                                                       {"name": "Mara"})] = None
    global_scan_data: Annotated[Union[dict[str, str], None],
                                doc("extra text scanned by entries that opt in (persona, character fields)",
                                    {"personaDescription": "a tired sailor"})] = None
    injects: Annotated[list[str], doc("extension prompts scanned with the chat", [])] = \
        field(default_factory=list)
    authors_note: Annotated[Union[str, None], doc("the author's note text entries are placed around",
                                                  "Keep it foggy.")] = None
    trigger: Annotated[str, doc("the generation type (normal, continue, impersonate, swipe, ...), for "
                                "trigger filters", "normal")] = "normal"
    dry_run: Annotated[bool, doc("scan without advancing timed effects", False)] = False
    timed_effects: Annotated[Union[dict[str, Any], None],
                             doc("the timed_effects state the previous turn returned", None)] = None
    forced: Annotated[list[ForcedEntry], doc("entries activated for this scan only", [])] = \
        field(default_factory=list)
    layout: Annotated[Union[dict[str, Any], None],
                      doc("the layout the previous turn returned ({} on a chat's first turn to measure "
                          "placement_stability; docs/improved-profile.md#cache-stable)", None)] = None
    tokenizer: Annotated[Tokenizer, _TOKENIZER_DOC] = "cl100k"
    random: Annotated[Union[UnitInterval, None], doc("a fixed value in [0, 1) for every probability roll",
                                                     0.5)] = None
    seed: Annotated[Union[int, None], doc("seeds the probability rolls (repeatable answers)", 42)] = None
    macros: Annotated[Union[dict[MacroName, str], None], _MACROS_DOC] = None
    explain: Annotated[bool, doc("add one diagnostic per entry: why it did or did not fire", False)] = False
    chat_id: Annotated[Union[ChatId, None], _CHAT_ID_DOC] = None
    prefix: Annotated[Union[ChatPrefix, None],
                      doc("send only the messages after a prefix this worker holds (needs chat_id; "
                          "docs/service.md#chat-delta)", None)] = None


# -- lorebook-slot mode -----------------------------------------------------------------------

class SlotSettingsIn(_Strict):
    """A book's slot settings (docs/slot-mode.md#slot-pool); absent ones are read from the book."""

    scan_depth: Annotated[Union[int, None], doc("how many of the newest messages are scanned", 4)] = None
    token_budget: Annotated[Union[int, None], doc("the book's token budget", 1024)] = None
    recursive_scanning: Annotated[Union[bool, None], doc("activated entries are scanned for further keys",
                                                         True)] = None


class SlotBookRef(_Strict):
    """An attached book, in attachment order; ``book_id`` names it in the state and log."""

    id: BookId
    book_id: Annotated[Union[Annotated[str, Meta(min_length=1, max_length=200)], None],
                       doc("the name the book has in the state and log (default: the stored id)",
                           "saltmere")] = None
    settings: Annotated[Union[SlotSettingsIn, None], doc("overrides of the book's own slot settings",
                                                         {"scan_depth": 4})] = None


class SlotMessageIn(_Strict):
    """A message with its role, oldest first."""

    role: Annotated[Literal["system", "user", "assistant"], doc("who wrote it", "user")]
    content: Annotated[str, doc("the message text", "Who keeps the lighthouse?")]


class SlotRunRequest(_Strict):
    """``POST /v1/slot/run``: one lorebook-slot request."""

    books: Annotated[list[SlotBookRef], doc("the attached books, in attachment order", [{"id": EXAMPLE_BOOK_ID}],
                                            max_length=64)]
    messages: Annotated[list[SlotMessageIn], doc("the chat, oldest first",
                                                 [{"role": "user", "content": "Who keeps the lighthouse?"}])]
    turn_id: Annotated[Uid, doc("identifies the turn: a retried turn with the same id gives the same answer",
                                "chat-42:7")]
    state: Annotated[Union[dict[str, Any], None], doc("the state the previous turn returned", None)] = None
    dry_run: Annotated[bool, doc("run without advancing the state", False)] = False
    at_greeting: Annotated[Union[bool, None], doc("the chat is at its greeting (default: read from messages)",
                                                  None)] = None
    greeting_index: Annotated[Union[int, None], doc("which greeting is shown", 0)] = None
    user_icon: Annotated[Union[str, None], doc("the user's icon text, for entries that mention it", None)] = None
    user_icon_decorator: Annotated[bool, doc("the user icon decorator is on", False)] = False
    regex_keys: Annotated[Literal["ccv3", "auto"], doc("ccv3: only entries marked use_regex have regex keys; "
                                                       "auto: /.../ keys are regexes", "ccv3")] = "ccv3"
    rules: Annotated[Literal["improved", "sillytavern"], doc("improved, or SillyTavern's own rules",
                                                             "improved")] = "improved"
    case_sensitive: Annotated[bool, doc("keys match case-sensitively (an entry may override)", False)] = False
    match_whole_words: Annotated[bool, doc("keys match whole words only (an entry may override)", False)] = False
    stable_placement: Annotated[bool, doc("cache-stable placement: the slot's messages keep their order from "
                                          "turn to turn (the layout travels in the state)", False)] = False
    tokenizer: Annotated[Tokenizer, _TOKENIZER_DOC] = "cl100k"
    macros: Annotated[Union[dict[MacroName, str], None], _MACROS_DOC] = None
    chat_id: Annotated[Union[ChatId, None], _CHAT_ID_DOC] = None


# -- responses (encoded from the engines' own JSON; these structs describe them and the
#    end-to-end tests decode every answer with them, so the schema cannot drift) -------

_WORLD_DOC = doc("the book's name", "Saltmere")
_UID_DOC = doc("the entry's uid", 3)
_TEXT_LIST = doc("entry contents, in placement order", ["The keeper is old Mara."])


class EntryRef(Struct, forbid_unknown_fields=True):
    """One entry, by book and uid."""

    world: Annotated[str, _WORLD_DOC]
    uid: Annotated[Uid, _UID_DOC]


class DepthGroupOut(Struct, forbid_unknown_fields=True):
    """Entries placed at one depth and role in the chat."""

    depth: Annotated[Any, doc("the depth (messages from the end)", 4)]
    role: Annotated[Any, doc("the role they are placed with (0 system, 1 user, 2 assistant)", 0)]
    entries: Annotated[list[str], _TEXT_LIST]


class ExampleOut(Struct, forbid_unknown_fields=True):
    """An entry placed with the example messages."""

    position: Annotated[int, doc("0: before the examples, 1: after", 0)]
    content: Annotated[str, doc("the entry's content", "The keeper is old Mara.")]


class LoopOut(Struct, forbid_unknown_fields=True):
    """One pass of the scan loop."""

    state: Annotated[str, doc("the scan state of the pass", "INITIAL")]
    next: Annotated[str, doc("the state the loop went to next", "RECURSION")]
    activated: Annotated[list[EntryRef], doc("entries activated in the pass", [{"world": "Saltmere", "uid": 3}])]


class SpanOut(Struct, forbid_unknown_fields=True):
    """Where a key matched (``lorescan.st.KeySpan.to_json()``): the text, the character span, the
    matched text with a few words of context, and the unusual cases (inside a longer word, across
    two messages of the joined window, in a recursion chunk)."""

    key: Annotated[str, doc("the key as matched (substituted and trimmed; a regex key as /body/flags)", "race")]
    kind: Annotated[str, doc("the kind of text the match starts in", "message")]
    index: Annotated[int, doc("which text of that kind (messages: newest = 0)", 0)]
    label: Annotated[str, doc("the text, for people", "message 0 (newest = 0)")]
    start: Annotated[int, doc("where the match starts in that text (character offset)", 12)]
    end: Annotated[int, doc("where it ends, in the text it ends in", 16)]
    matched: Annotated[str, doc("the matched text as it stands in the haystack", "race")]
    before: Annotated[str, doc("a few words of context before the match", "a warm emb")]
    after: Annotated[str, doc("a few words of context after it", " at the door")]
    inside_word: Annotated[Union[str, None], doc("the longer word the match lies inside, if any", "embrace")]
    across: Annotated[bool, doc("whether the match runs across two texts of the joined window", False)]
    end_kind: Annotated[Union[str, None], doc("the kind of text the match ends in, when across", None)]
    end_index: Annotated[Union[int, None], doc("which text it ends in, when across", None)]
    end_label: Annotated[Union[str, None], doc("that text, for people, when across", None)]
    source_entry: Annotated[Union[str, None], doc("in a recursion chunk: the entry whose content holds the match",
                                                  "Saltmere.3")]
    cases: Annotated[list[Literal["inside_word", "across", "recursion"]],
                     doc("the unusual cases that hold", ["inside_word"])]


class DiagnosticOut(Struct, forbid_unknown_fields=True):
    """Why one entry did or did not fire (``lorescan.Diagnostic.to_json()``)."""

    world: Annotated[str, _WORLD_DOC]
    uid: Annotated[Uid, _UID_DOC]
    outcome: Annotated[DiagnosticOutcome, doc("whether it fired", "activated")]
    reason: Annotated[str, doc("the rule that decided it", "key_match")]
    detail: Annotated[str, doc("the same, for people", "primary key 'lighthouse' in message 1")]
    loop: Annotated[Union[int, None], doc("the loop pass that decided it", 0)]
    key: Annotated[Union[str, None], doc("the key that matched", "lighthouse")]
    where: Annotated[Union[str, None], doc("where the key matched", "message 1")]
    span: Annotated[Union[SpanOut, None], doc("where the key matched, exactly (null: no key match)", None)]
    text: Annotated[str, doc("the whole explanation as one sentence",
                             "Entry Saltmere.1 fired (key_match): primary key 'lighthouse' matched in message 0.")]


class PlaceStabilityOut(Struct, forbid_unknown_fields=True):
    """One placement text: its length and its leading characters unchanged from the previous turn."""

    place: Annotated[str, doc("the place (position kind, with depth and role at depth)", "before")]
    length: Annotated[int, doc("its length in characters", 120)]
    unchanged: Annotated[int, doc("its leading characters (whole entries) as the previous turn had them", 120)]


class StabilityOut(Struct, forbid_unknown_fields=True):
    """How much of the placement texts is unchanged from the previous turn's layout."""

    share: Annotated[float, doc("unchanged characters over all characters", 1.0)]
    length: Annotated[int, doc("characters of all placement texts", 120)]
    unchanged: Annotated[int, doc("unchanged leading characters, summed", 120)]
    places: Annotated[list[PlaceStabilityOut], doc("one per non-empty placement text", [])]


_STABILITY_DOC = doc("how much of each placement text is unchanged from the layout sent (null: none was sent)",
                     None)


class STScanResponse(Struct, forbid_unknown_fields=True):
    """``STResult.to_json(diagnostics=explain)``: the conformance vectors' ``expected`` shape, the
    budget and cut-off reports and, with ``explain``, one diagnostic per entry in global order
    (tests/serve/test_serve.py holds this schema and that method to one another)."""

    activated: Annotated[list[EntryRef], doc("the entries that fired, in global order",
                                             [{"world": "Saltmere", "uid": 3}])]
    world_info_before: Annotated[str, doc("the text placed before the character description",
                                          "The keeper is old Mara.")]
    world_info_after: Annotated[str, doc("the text placed after the character description", "")]
    depth_entries: Annotated[list[DepthGroupOut], doc("entries placed in the chat at a depth", [])]
    an_top: Annotated[list[str], doc("entries placed above the author's note", [])]
    an_bottom: Annotated[list[str], doc("entries placed below the author's note", [])]
    em_entries: Annotated[list[ExampleOut], doc("entries placed with the example messages", [])]
    outlets: Annotated[dict[str, list[str]], doc("outlet name -> entry contents", {})]
    authors_note: Annotated[Union[str, None], doc("the author's note with its entries", None)]
    budget_overflowed: Annotated[bool, doc("the budget ran out before every activated entry fit", False)]
    overflow_alert_shown: Annotated[bool, doc("the overflow alert would be shown", False)]
    timed_effects: Annotated[dict[str, Any], doc("the timed-effects state to send with the next turn",
                                                 {"sticky": {}, "cooldown": {}})]
    loops: Annotated[list[LoopOut], doc("the scan loop's passes",
                                        [{"state": "INITIAL", "next": "NONE", "activated": []}])]
    budget: Annotated[int, doc("the budget in tokens", 2048)]
    regex_cutoffs: Annotated[list[str], doc("regex keys cut off at the scan's regex budget (their entries did not "
                                            "match)", [])] = field(default_factory=list)
    fuzzy_cutoffs: Annotated[list[str], doc("one line when fuzzy matching was cut off at the scan's comparison "
                                            "budget (its texts matched fuzzy keys exactly only)", [])] = \
        field(default_factory=list)
    key_hit_cutoffs: Annotated[list[str], doc("one line when key matching was cut off in a text at its key-hit "
                                              "budget (keys only past that point did not match)", [])] = \
        field(default_factory=list)
    layout: Annotated[Union[dict[str, Any], None],
                      doc("the placement layout to send with the next turn (absent unless stable_placement "
                          "is on or a layout was sent)", None)] = None
    placement_stability: Annotated[Union[StabilityOut, None], _STABILITY_DOC] = None
    diagnostics: Annotated[Union[list[DiagnosticOut], None], doc("with explain: one per entry", None)] = None


class SlotMessageOut(Struct, forbid_unknown_fields=True):
    """A message the slot adds to the prompt."""

    role: Annotated[str, doc("its role", "system")]
    content: Annotated[str, doc("its text", "The keeper is old Mara.")]


class LogRecordOut(Struct, forbid_unknown_fields=True):
    """One entry's fate in one request (``lorescan.slot.LogRecord``)."""

    book: Annotated[str, doc("the book's name in the state and log", "saltmere")]
    id: Annotated[Uid, doc("the entry's id", 3)]
    name: Annotated[str, doc("the entry's name", "The keeper")]
    outcome: Annotated[str, doc("what happened to it", "inserted")]
    reason: Annotated[str, doc("why", "key")]
    pass_number: Annotated[Union[int, None], doc("the pass it matched in", 1)]
    matched_by: Annotated[Union[str, None], doc("what matched it", "key")]
    matched_key: Annotated[Union[str, None], doc("the key that matched", "lighthouse")]
    roll: Annotated[Union[float, None], doc("its probability roll", None)]
    tokens: Annotated[Union[int, None], doc("its size in tokens", 7)]
    priority: Annotated[float, doc("its priority", 10)]
    order: Annotated[float, doc("its insertion order", 100)]
    role: Annotated[str, doc("the role it is placed with", "system")]
    ignore_on_max_context: Annotated[bool, doc("it may be dropped when the context is full", False)]
    position: Annotated[list[int], doc("where it is placed", [0, 0])]
    detail: Annotated[Union[str, None], doc("one of lorescan.slot.LOG_DETAILS", None)] = None
    span: Annotated[Union[SpanOut, None], doc("where the key matched; null from /v1/slot/run, which builds "
                                              "no span (lorescan.slot.spans.with_spans explains a run)",
                                              None)] = None


class SlotRunResponse(Struct, forbid_unknown_fields=True):
    """``SlotResult`` as JSON: the slot's messages, the request log, the new state."""

    messages: Annotated[list[SlotMessageOut], doc("the messages the slot adds",
                                                  [{"role": "system", "content": "The keeper is old Mara."}])]
    log: Annotated[list[LogRecordOut], doc("one record per entry considered", [])]
    state: Annotated[dict[str, Any], doc("the state to send with the next turn", {})]
    budget: Annotated[int, doc("the token budget", 1024)]
    tokens_used: Annotated[int, doc("the tokens the messages use", 7)]
    passes: Annotated[int, doc("how many passes ran", 1)]
    disabled_ui_prompts: Annotated[list[str], doc("UI prompts the books turn off", [])]
    budget_book: Annotated[Union[str, None], doc("the book whose budget applied", None)] = None
    notes: Annotated[list[dict[str, Any]], doc("notes about the request", [])] = field(default_factory=list)
    regex_cutoffs: Annotated[list[str], doc("regex keys cut off at the run's regex budget", [])] = \
        field(default_factory=list)
    fuzzy_cutoffs: Annotated[list[str], doc("one line when fuzzy matching was cut off at the run's comparison "
                                            "budget", [])] = field(default_factory=list)
    key_hit_cutoffs: Annotated[list[str], doc("one line when key matching was cut off in a text at its key-hit "
                                              "budget", [])] = field(default_factory=list)
    placement_stability: Annotated[Union[StabilityOut, None], _STABILITY_DOC] = None


# -- JanitorAI script mode -----------------------------------------------------------------

class JanitorRunRequest(_Strict):
    """``POST /v1/janitor/run``: one run of the JanitorAI script (docs/janitor-mode.md).

    ``book``: the raw ``dynamicLore`` value; ``context``: the object the script is given;
    ``settings``: ``apply_limit`` / ``window_depth`` (any JSON, as in the script's text; a
    missing key is the script's default); ``random``: the values ``Math.random`` returns,
    in order (too few is a 422), else ``seed`` seeds them; ``explain``: add the per-entry
    account."""

    book: Annotated[Any, doc("the raw dynamicLore value: normally a list of entry objects",
                             [{"keywords": ["lighthouse"], "personality": "Ellery keeps the light."}])]
    context: Annotated[Any, doc("the context object the script is given (character, chat)",
                                {"character": {"name": "Isolde", "personality": "", "scenario": ""},
                                 "chat": {"last_messages": [{"is_bot": False,
                                                             "message": "Who keeps the lighthouse?"}]}})]
    settings: Annotated[dict[Literal["apply_limit", "window_depth"], Any],
                        doc("the script's two knobs, any JSON as written in the script (missing: its default)",
                            {"apply_limit": 6, "window_depth": 5})] = field(default_factory=dict)
    profile: Annotated[Literal["script", "improved"],
                       doc("script: the v12 script exactly; improved: Unicode words and a fixed-point trigger pass",
                           "script")] = "script"
    random: Annotated[Union[Annotated[list[UnitInterval], Meta(max_length=1_000_000)], None],
                      doc("the values Math.random returns, in order (too few is a 422)", [0.42])] = None
    seed: Annotated[Union[int, None], doc("seeds the random values when `random` is not given", 7)] = None
    explain: Annotated[bool, doc("add one explanation line per entry", False)] = False


class JanitorErrorOut(Struct, forbid_unknown_fields=True):
    """The exception the script would have thrown."""

    name: Annotated[str, doc("the JavaScript error's name", "TypeError")]
    message: Annotated[str, doc("a message (need not be V8's text)", "priority bucket 2.5 does not exist")]


class JanitorRunResponse(Struct, forbid_unknown_fields=True):
    """The vectors' ``expected`` shape, plus ``explain`` (one line per entry) when asked."""

    personality: Annotated[Union[str, None], doc("character.personality after the run", "Ellery keeps the light.")]
    scenario: Annotated[Union[str, None], doc("character.scenario after the run", "")]
    error: Annotated[Union[JanitorErrorOut, None], doc("the error the script threw (then the texts are the "
                                                       "initial ones)", None)]
    random_calls: Annotated[int, doc("how many values the script read from Math.random", 1)]
    trace: Annotated[dict[str, Any], doc("the script's intermediate values (the vectors' trace)",
                                         {"direct": [0], "triggered": [], "selected": [0], "post_shift": []})]
    explain: Annotated[Union[list[str], None], doc("one line per entry, when asked",
                                                   ["entry[0] fired: keyword 'lighthouse'"])] = None


class BookList(Struct):
    """Every stored book."""

    books: Annotated[list[BookInfo], doc("the stored books", [])]
    unreadable: Annotated[list[str], doc("ids of stored books whose description cannot be read (left out of "
                                         "books; GET /v1/books/{book_id} answers 409 for them)", [])] = []


class ErrorBody(Struct):
    """Every error answer: ``error`` says what is wrong; ``path`` locates it in the request
    (422); ``source``/``entry``/``field`` locate it in a book (400); ``reasons`` lists why a
    worker is not ready (503 from /readyz). A field that does not apply is absent (never null)."""

    error: Annotated[str, doc("what is wrong", "Expected `int`, got `str` - at `$.max_context`")]
    path: Annotated[Union[str, UnsetType], doc("where in the request (422)", "$.max_context")] = UNSET
    source: Annotated[Union[str, UnsetType], doc("the book file (400)", "saltmere.json")] = UNSET
    entry: Annotated[Union[int, str, UnsetType], doc("the entry (400)", 3)] = UNSET
    field: Annotated[Union[str, UnsetType], doc("the entry's field (400)", "key")] = UNSET
    reasons: Annotated[Union[list[str], UnsetType], doc("why the worker is not ready (503 from /readyz)",
                                                        ["the books directory is not writable"])] = UNSET
    code: Annotated[Union[Literal["prefix_unknown"], UnsetType],
                    doc("what to do about it (409 prefix_unknown: send the whole chat)", "prefix_unknown")] = UNSET


def decoder(kind: type) -> msgspec.json.Decoder:
    """A reusable validating decoder for one request type."""
    return msgspec.json.Decoder(kind)
