"""Lorebook-slot mode (docs/slot-mode.md, section 15): one pool, priority for the budget, order for
placement, one role-tagged message per surviving entry.

:class:`SlotEngine` compiles the attached books once (through the same
``compile_book``/``ScanView`` machinery as SillyTavern mode, with each text matched on
its own) and answers one request per :meth:`SlotEngine.run`: which entries go into the
lorebook slot, in which order and with which role, plus the request log of docs/slot-mode.md#slot-log
and the updated per-chat state.

The rules in the project's words, with every choice the engine makes where the platform's own
description is silent, are in ``docs/slot-mode.md``. In short:

* Messages are given oldest first, with roles. System messages are neither scanned nor
  counted, in ``M`` (the turn index) or toward any scan depth [decision, revised]. An entry
  with scan depth 0 scans no message but still sees recursion text in later passes.
* Keys (``regex_keys="form"``, the default) [decision, revised]: a key in ``/pattern/flags``
  form is an ECMAScript regex whatever ``use_regex`` says (an invalid one never matches, and
  the log says so); any other key is plain text; secondary keys combine with the entry's
  ``selectiveLogic`` (AND ANY when it has none). ``regex_keys="strict"`` is the CCv3
  reading: ``use_regex`` true = only valid ``/pattern/flags`` keys can match and secondary
  keys are ignored; false = every key is literal, so a ``/…/``-shaped key goes to the matcher
  marked literal (``KeySpec.literal``: plain text, never a regex, never fuzzy); absent = as
  ``"form"``.
  ``regex_keys="auto"`` is SillyTavern's per-key detection (an invalid ``/…/`` key is
  literal text). Decorator key lists (``@@additional_keys`` …) follow the entry's rule.
* Only ``@@probability`` rolls; SillyTavern's ``probability``/``useProbability`` fields and
  per-entry ``scanDepth`` are not platform fields (docs/slot-mode.md#slot-entries) and are ignored.
* A re-inserted entry keeps the earliest ``first_matched_turn`` (a record from a later turn,
  left by a rolled-back branch, is lowered to this turn).
"""
from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple, get_args

from ..match.compile import CompiledKeys, compile_keys
from ..semantic.index import SemanticIndex, VectorSettings
from ..semantic.store import is_candidate
from ..match.fuzzy import FuzzyWork, entry_threshold, fuzzy_field
from ..match.keys import KeySpec
from ..limits import DEFAULT_LIMITS, Limits, check_book
from ..match.cache import ChatScan
from ..errors import RegexKeyError, SettingsError
from ..js.regex import RegexTooComplex, regex_key
from ..macros import expand_content
from ..match.regexscope import RegexBudget
from ..match.spans import KeySpan
from ..match.view import EntryMatch, ScanView, Window
from ..model import Lorebook
from ..match.options import MatchOptions
from ..js.text import js_trim
from ..tokens import count_upto, shared_counter
from .pool import SELECTIVE_LOGICS, SlotBook, SlotEntry, pool_budget, slot_entry_from
from .roll import passes_roll, roll_percent
from .state import read_first_matched, with_first_matched

__all__ = ["SlotEngine", "SlotResult", "SlotMessage", "LogRecord", "RequestNote", "RoleMessage", "Outcome", "OUTCOMES", "MatchedBy", "MATCHED_BY",
           "MAX_PASSES", "LogDetail", "LOG_DETAILS", "NoteCode", "NOTE_CODES", "RegexKeys"]

MAX_PASSES = 3          # docs/slot-mode.md#slot-texts [decision]: 3 passes in total
# A window deeper than 0 that covers no message: ScanView then sees only the recursion
# chunks (Window depth <= 0 means "nothing at all", SillyTavern's reading: its code, not its documentation, is followed).
_RECURSION_ONLY = 0.5
# LogRecord.outcome: what happened to the entry (docs/slot-mode.md#slot-log).
Outcome = Literal["inserted", "dropped_budget", "probability_failed", "not_matched", "disabled",
                  "blocked:dont_activate", "blocked:dont_activate_after_match", "blocked:is_greeting",
                  "blocked:is_user_icon", "blocked:activate_only_after", "blocked:activate_only_every"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
ROLES = ("system", "user", "assistant")
_ROLE_SET = frozenset(ROLES)

# One message of SlotEngine.run's input: (role, text) or {"role": ..., "content": ...}.
RoleMessage = tuple[str, str] | Mapping[str, Any]
RegexKeys = Literal["form", "strict", "auto"]

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

# what gates 1-9 decide (SlotEngine._gates): ("matched", by, reason) or (blocked outcome, reason)
_GateBlocked = Literal["disabled", "blocked:dont_activate", "blocked:dont_activate_after_match",
                       "blocked:is_greeting", "blocked:is_user_icon", "blocked:activate_only_after",
                       "blocked:activate_only_every"]
_GateVerdict = tuple[Literal["matched"], MatchedBy, str] | tuple[_GateBlocked, str]


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

    @property
    def inserted(self) -> tuple[LogRecord, ...]:
        """Log records of the inserted entries, in pool order."""
        return tuple(r for r in self.log if r.outcome == "inserted")

    def to_json(self) -> dict[str, Any]:
        """Returns: the result as plain JSON data (``state`` is already plain data)."""
        return {"messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "log": [r.to_dict() for r in self.log], "state": self.state, "budget": self.budget,
                "tokens_used": self.tokens_used, "passes": self.passes,
                "disabled_ui_prompts": sorted(self.disabled_ui_prompts), "budget_book": self.budget_book,
                "notes": [{"code": n.code, "text": n.text, "message": n.message} for n in self.notes],
                "regex_cutoffs": list(self.regex_cutoffs)}


# -- key plans: the keys the shared matcher answers, and those that never match --------

@dataclass(frozen=True, slots=True)
class _KeyRef:
    text: str
    how: Literal["matcher", "never"]
    slot: int = -1          # index in the entry's KeySpec.primary / KeySpec.secondary (the matcher's keys)
    primary: bool = False   # slot indexes ``KeySpec.primary`` (else ``KeySpec.secondary``)
    literal: bool = False   # in KeySpec.literal: plain text even in /pattern/flags form


@dataclass(frozen=True, slots=True)
class _Plan:
    primary: tuple[_KeyRef, ...]
    secondary: tuple[_KeyRef, ...]
    additional: tuple[tuple[_KeyRef, ...], ...]
    exclude: tuple[_KeyRef, ...]
    exclude_all: tuple[tuple[_KeyRef, ...], ...]
    uses_matcher: bool
    logic: int          # selectiveLogic for ``secondary`` (docs/sillytavern-mode.md#st-key-logic; 0 = AND ANY)
    never_note: str     # names the primary keys that can never match, for the log


_REGEX_FORM = re.compile(r"/([\s\S]+?)/([gimsuy]*)")


def _regex_kind(key: str) -> str:
    """How ``key`` reads: ``"regex"`` (a usable ``/pattern/flags`` key), ``"invalid"`` (in
    that form, docs/sillytavern-mode.md#st-regex-keys conditions 1 and 2, but not a usable ECMAScript regex) or
    ``"plain"`` (not in that form: ``/usr/bin``, ``a/b/``)."""
    k = js_trim(key)
    try:
        rx = regex_key(k, max_length=DEFAULT_LIMITS.max_regex_length, max_nesting=DEFAULT_LIMITS.max_regex_nesting,
                       max_expansion=DEFAULT_LIMITS.max_regex_expansion)
    except RegexTooComplex:     # a regex all the same: compile_book applies the engine's limits
        return "regex"
    if rx is not None:
        return "regex"
    m = _REGEX_FORM.fullmatch(k)
    if m is None or any(ch == "/" and (i == 0 or m.group(1)[i - 1] != "\\")
                        for i, ch in enumerate(m.group(1))):
        return "plain"
    return "invalid"


def _never_note(primary: Sequence[_KeyRef], strict: bool) -> str:
    never = [ref.text for ref in primary if ref.how == "never"]
    if not never or len(never) == len(primary):     # all of them: the log says so on its own
        return ""
    why = "not a valid /pattern/flags regex" + (" (regex_keys='strict', use_regex true)" if strict else "")
    return f" ({', '.join(map(repr, never))}: {why}, never matches)"


def _plan_keys(e: SlotEntry, mode: RegexKeys) -> tuple[_Plan, KeySpec]:
    """The entry's key plan, and the key spec the matcher compiles for it (uid: pool index;
    the plan's ``slot`` values index its key lists)."""
    primary_keys: list[str] = []
    secondary_keys: list[str] = []
    literal: set[str] = set()
    strict = mode == "strict" and e.use_regex is not None

    def ref(text: str, target: list[str]) -> _KeyRef:
        if mode == "auto" or "{{" in text:
            how = "matcher"                 # SillyTavern auto-detection (macros: decided after substitution)
        elif not strict:                    # docs/slot-mode.md#slot-keys [decision, revised]: the key's form decides
            how = "never" if _regex_kind(text) == "invalid" else "matcher"
        else:
            kind = _regex_kind(text)
            if e.use_regex:                 # CCv3: every key is /pattern/flags; an invalid one never matches
                how = "matcher" if kind == "regex" else "never"
            else:                           # CCv3 use_regex=false: keys are literal even when /…/-shaped
                how = "literal" if kind == "regex" else "matcher"
        if how == "never":
            return _KeyRef(text, "never")
        target.append(text)
        if how == "literal":
            literal.add(text)
        return _KeyRef(text, "matcher", len(target) - 1, target is primary_keys, how == "literal")

    d = e.decorators
    primary = tuple(ref(k, primary_keys) for k in e.keys)
    # Secondary keys apply only to selective entries; the strict CCv3 reading ignores them
    # when use_regex is true.
    secondary = tuple(ref(k, secondary_keys) for k in e.secondary_keys) if (
        e.selective and not (strict and e.use_regex)) else ()
    additional = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.additional_keys)
    exclude = tuple(ref(k, secondary_keys) for k in d.exclude_keys)
    exclude_all = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.exclude_keys_all)
    plan = _Plan(primary, secondary, additional, exclude, exclude_all,
                 uses_matcher=bool(primary_keys or secondary_keys),
                 logic=e.selective_logic or 0,
                 never_note=_never_note(primary, strict))
    spec = KeySpec(tuple(primary_keys), tuple(secondary_keys), e.content, e.case_sensitive, e.whole_words,
                   uid=e.pool_index, literal=frozenset(literal) if literal else _NO_LITERAL)
    return plan, spec


# -- the engine ---------------------------------------------------------------------------

@dataclass(slots=True)
class _Run:
    """Mutable bookkeeping of one entry during one request."""

    e: SlotEntry
    outcome: Outcome | None = None
    reason: str = ""
    pass_number: int | None = None
    matched_by: MatchedBy | None = None
    matched_key: str | None = None
    roll: float | None = None
    tokens: int | None = None
    text: str = ""
    detail: LogDetail | None = None


class SlotEngine:
    """Lorebook-slot mode over a fixed set of attached books, compiled once.

    ``budget`` is the pool's token budget (docs/slot-mode.md#slot-pool [decision, revised]: the
    largest budget an attached book stores, the default 800 only when none stores one);
    ``budget_book`` names the book it comes from (None for the default) and ``budget_reason``
    says so in words. The engine is immutable once built apart from caches of values that
    never change (token counts, the matcher's entries and the log records of entries no
    request named, each built on first use and published whole); one engine may serve many
    chats and threads at once (per-chat data lives in the ``state``). A request walks only
    the entries a gate or a key outside the matcher decides, the depth-0 ones and the
    candidates the matcher names; every other entry's record is the same in every request.

    Args:
        books: the attached books in attachment order (a :class:`Lorebook`, or a
            :class:`SlotBook` to set the book's id or settings); their entries form one pool.
        count_tokens: the model's tokenizer, any ``str -> int`` (default: the process-wide
            tiktoken ``cl100k_base`` counter, :func:`lorescan.tokens.shared_counter`, loaded
            offline on the first count); each entry's count is cached with the engine.
        substitute: macro hook applied to keys containing ``{{`` and to the content of every
            entry that passes its roll (may be overridden per request).
        match_options: plain-key rules (default: the improved rules of docs/improved-profile.md).
        regex_keys: ``"form"`` (docs/slot-mode.md#slot-keys [decision, revised]): a
            ``/pattern/flags`` key is a regex whatever ``use_regex`` says, an invalid one never
            matches, any other key is plain text; ``"strict"`` (``"ccv3"`` is accepted as its
            older name): the CCv3 reading of each entry's ``use_regex`` (true: every key must
            be ``/pattern/flags`` and secondary keys are ignored; false: every key is literal);
            ``"auto"``: SillyTavern's per-key detection (an invalid ``/…/`` key is literal text).
        user_icon_decorator: accept ``@@is_user_icon`` (the caller then passes ``user_icon``
            to :meth:`run`).
        regex_timeout: CPU seconds allowed to one regex key on one text.
        limits: ``regex_time_per_scan`` bounds all regex time of one :meth:`run` (cut-off keys
            are listed in ``SlotResult.regex_cutoffs`` and in their entries' log reasons).

    Raises:
        RegexKeyError: a regex key past ``max_regex_length`` / ``max_regex_nesting``.
        LorebookError: an entry field of the wrong type.
        SettingsError: bad settings, or two books with the same id.
    """

    def __init__(self, books: Sequence[Lorebook | SlotBook], *,
                 count_tokens: Callable[[str], int] | None = None,
                 substitute: Callable[[str], str] | None = None,
                 match_options: MatchOptions | None = None,
                 regex_keys: RegexKeys | Literal["ccv3"] = "form",
                 user_icon_decorator: bool = False,
                 regex_timeout: float | None = 0.25, limits: Limits = DEFAULT_LIMITS,
                 semantic: VectorSettings | None = None) -> None:
        if not isinstance(limits, Limits):
            raise SettingsError(f"limits must be a Limits, got {type(limits).__name__}", source="SlotEngine",
                                field="limits")
        if semantic is not None and not isinstance(semantic, VectorSettings):
            raise SettingsError(f"semantic must be a VectorSettings, got {type(semantic).__name__}",
                                source="SlotEngine", field="semantic")
        self.limits = limits
        if regex_keys == "ccv3":
            regex_keys = "strict"
        if regex_keys not in ("form", "strict", "auto"):
            raise SettingsError(f"must be 'form', 'strict' or 'auto', got {regex_keys!r}",
                                source="SlotEngine", field="regex_keys")
        self.regex_keys: RegexKeys = regex_keys
        slot_books = tuple((b if isinstance(b, SlotBook) else SlotBook(b)).resolved() for b in books)
        seen: set[str] = set()
        for b in slot_books:
            if b.id in seen:
                raise SettingsError(f"two attached books have the id {b.id!r}; give each a unique "
                                    "SlotBook id", source="SlotEngine", field="books")
            seen.add(str(b.id))
        self.books: tuple[SlotBook, ...] = slot_books
        for b in slot_books:
            check_book(b.book, limits)
        self.count_tokens: Callable[[str], int] = count_tokens if count_tokens is not None else shared_counter()
        self.substitute = substitute
        self.match_options = match_options if match_options is not None else MatchOptions.improved()
        self.user_icon_decorator = user_icon_decorator
        self.regex_timeout = regex_timeout
        # docs/slot-mode.md#slot-pool [seed]: when the attached books disagree, the largest budget wins; only
        # budgets a book stores take part [decision, revised].
        self.budget, self.budget_book, self.budget_reason = pool_budget(slot_books)

        pool: list[SlotEntry] = []
        plans: list[_Plan] = []
        specs: list[KeySpec] = []       # what the match core compiles; not kept (issue 8: memory)
        for bi, b in enumerate(slot_books):
            for ei, entry in enumerate(b.book.entries):
                e = slot_entry_from(entry, pool_index=len(pool), book_index=bi, index=ei, book=b,
                                    user_icon=user_icon_decorator)
                pool.append(e)
                plan, spec = _plan_keys(e, regex_keys)
                plans.append(plan)
                fuzzy = _fuzzy_threshold(e, entry, b.book)
                specs.append(spec if fuzzy is None else spec._replace(fuzzy=fuzzy))
        self.pool: tuple[SlotEntry, ...] = tuple(pool)
        self._plans = tuple(plans)
        try:
            self.compiled: CompiledKeys = compile_keys(specs, self.match_options, limits=limits,
                                                       name="lorebook slot pool",
                                                       source=" + ".join(dict.fromkeys(b.book.source for b in slot_books))
                                                       or "<slot pool>")
        except RegexKeyError as exc:    # locate it in the attached book, not the pool
            if not isinstance(exc.entry, int):
                raise
            e = self.pool[exc.entry]
            raise RegexKeyError(exc.problem, source=slot_books[e.book_index].book.source, entry=e.id,
                                field="keys") from None
        del specs
        self._max_depth = max((e.scan_depth for e in self.pool), default=0)
        # Most entries of a large pool do the same thing in every request: no gate decides them,
        # their keys are all the matcher's, and unless the matcher lists them as candidates
        # they end "not matched" with the same log record (docs/slot-mode.md#slot-log). Only
        # the others are walked one by one: ``_explicit`` (a gate may decide them, a key is
        # tested here, or scan depth 0) from the start, the candidates as the matcher names them.
        # Vector Storage's matching (docs/semantic.md#sem-engine): its candidates are walked every request.
        self.semantic = semantic
        self._semantic: SemanticIndex | None = None
        if semantic is not None:
            picked = [e for e in self.pool if e.enabled and is_candidate(e.entry, e.content, semantic.enabled_for_all)]
            if picked:
                self._semantic = SemanticIndex(semantic, [str(e.pool_index) for e in picked],
                                               [e.content for e in picked])
        sem_candidates = set() if self._semantic is None else {int(k) for k in self._semantic.keys}
        self._explicit = tuple(e.pool_index for e in self.pool
                               if _gateable(e) or e.scan_depth <= 0 or e.pool_index in sem_candidates)
        explicit = set(self._explicit)
        # Idle entries whose unmatched reason is "no primary key matched", by scan depth: a
        # system message inside their window may explain them (_explain_unmatched).
        # (compact: int32 arrays and one flag byte per entry, not sets of int objects)
        self._plain_by_depth: dict[int, array[int]] = {}
        self._plain_idle = bytearray(len(self.pool))
        for e in self.pool:
            plan = self._plans[e.pool_index]
            if e.pool_index not in explicit and plan.primary and any(ref.how != "never" for ref in plan.primary):
                self._plain_by_depth.setdefault(e.scan_depth, array("i")).append(e.pool_index)
                self._plain_idle[e.pool_index] = 1
        # The log record of every idle entry, built on the first request (published whole).
        self._idle_log: tuple[LogRecord | None, ...] | None = None
        # (text, count, exact) per pool entry; a whole tuple is written at once (threads share it)
        self._token_cache: list[tuple[str, int, bool] | None] = [None] * len(self.pool)

    def _content_of(self, i: int) -> str:
        """Pool entry ``i``'s content (the text the compiled matcher's content hits are of)."""
        return self.pool[i].content

    # -- token counts (cached per entry: a compiled book's contents are counted once) ----
    def entry_tokens(self, pool_index: int, text: str | None = None) -> int:
        """Token count of a pool entry's content (or of ``text``, its substituted form).

        The last count per entry is kept, so a content is tokenised once however many
        turns insert it.
        """
        return self._count(pool_index, text, None)[0]

    def _count(self, pool_index: int, text: str | None, limit: int | None) -> tuple[int, bool]:
        """(count, exact). ``limit``: only whether the count exceeds it matters, so a long
        content is counted only until it certainly does (then the count is a floor > limit)."""
        if text is None:
            text = self.pool[pool_index].content
        cached = self._token_cache[pool_index]
        if cached is not None and (cached[0] is text or cached[0] == text) and (
                cached[2] or (limit is not None and cached[1] > limit)):
            return cached[1], cached[2]
        count, exact = count_upto(self.count_tokens, text, None if limit is None else limit + 1)
        self._token_cache[pool_index] = (text, count, exact)
        return count, exact

    # -- one request ----------------------------------------------------------------------
    async def arun(self, messages: Sequence[RoleMessage], **kwargs: Any) -> SlotResult:
        """:meth:`run` for an asyncio application: the request runs in a worker thread
        (``asyncio.to_thread``), so the event loop keeps serving while it runs. Same
        arguments, result and errors as :meth:`run`; concurrent calls are safe (one engine
        serves many threads, see the class docstring)."""
        import asyncio      # stdlib; only async callers pay for it
        return await asyncio.to_thread(self.run, messages, **kwargs)

    def run(self, messages: Sequence[RoleMessage], *, turn_id: str | int,
            state: Mapping[str, Any] | None = None, dry_run: bool = False,
            at_greeting: bool | None = None, greeting_index: int | None = None,
            user_icon: str | None = None,
            substitute: Callable[[str], str] | None = None,
            cache: ChatScan | None = None) -> SlotResult:
        """Build the lorebook slot for one request.

        Args:
            messages: the conversation so far, **oldest first**, as :data:`RoleMessage`
                values (role ``system``, ``user`` or ``assistant``; the greeting is the
                character's first message), not including the reply being generated. System
                messages are not scanned and not counted; the number of the others is the
                turn index ``M`` of docs/slot-mode.md#slot-gates.
            turn_id: identifies this turn for the probability roll (recommended:
                conversation id plus ``M``); the same id gives the same rolls in every pass,
                dry run, swipe and regeneration.
            state: the value returned by the previous request of this chat (None for a new
                chat); it is never modified.
            dry_run: the returned state equals the input.
            at_greeting: whether the chat is still at the greeting (default: no assistant
                message besides the greeting).
            greeting_index: the active greeting (0 = first message, k = k-th alternate),
                None if unknown.
            user_icon: the active user icon (with ``user_icon_decorator``).
            substitute: overrides the engine's macro hook for this request.
            cache: the chat's :class:`~lorescan.match.cache.ChatScan` (pass the same one
                every turn so messages already scanned are not scanned again).

        Returns:
            The :class:`SlotResult`: the slot's messages, the request log (one
            :class:`LogRecord` per entry, its ``outcome`` an :data:`Outcome`) and the new state.

        Raises:
            SettingsError: malformed messages or state.
        """
        chat = _read_messages(messages)
        first_matched = read_first_matched(state)
        # docs/slot-mode.md#slot-revised: system messages are neither scanned nor counted.
        scanned = [i for i, (role, _) in enumerate(chat) if role != "system"]
        turn = len(scanned)
        if at_greeting is None:
            at_greeting = _at_greeting(chat)
        substitute = substitute if substitute is not None else self.substitute
        view = ScanView(self.compiled, [chat[i][1] for i in reversed(scanned)], cache=cache,
                        substitute=substitute, joined=False, regex_timeout=self.regex_timeout,
                        regex_budget=RegexBudget(self.limits.regex_time_per_scan, self.regex_timeout),
                        content_of=self._content_of, limits=self.limits,
                        fuzzy_work=FuzzyWork(self.limits.fuzzy_comparisons_per_scan))
        pool = self.pool
        by_meaning: dict[int, str] = {}
        if self._semantic is not None:
            threshold = self._semantic.settings.score_threshold
            by_meaning = {int(k): hit.detail(threshold) for k, hit in
                          self._semantic.select([chat[i][1] for i in reversed(scanned)]).items()}
        # Explicit entries get their _Run now; an idle one when the matcher first names it.
        runs: dict[int, _Run] = {}

        # Gates 1-9 (docs/slot-mode.md#slot-gates): decided once for the turn.
        prematched: list[_Run] = []
        pending: list[_Run] = []
        for i in self._explicit:
            r = runs[i] = _Run(pool[i])
            e = r.e
            fm = first_matched.get(e.book_id, {}).get(str(e.id))
            verdict = self._gates(e, turn, fm, at_greeting, greeting_index, user_icon)
            if verdict is None:
                pending.append(r)
            elif verdict[0] == "matched":
                r.matched_by, r.reason = verdict[1], verdict[2]
                prematched.append(r)
            else:
                r.outcome, r.reason = verdict

        passes = 0
        activated: list[_Run] = []
        for pass_number in range(1, MAX_PASSES + 1):
            passes = pass_number
            matched = list(prematched) if pass_number == 1 else []
            chunks = len(view.chunks)
            # (at least depth 1, so the recursion chunks count even when every entry has depth
            # 0: a superset of candidates is safe, each window is checked on its own)
            candidates = view.candidates(max(self._max_depth, 1), chunks)
            allowed = None if candidates is None else set(candidates)
            woken = [self._idle_run(i) for i in (range(len(pool)) if candidates is None else candidates)
                     if i not in runs]
            if woken:
                for r in woken:
                    runs[r.e.pool_index] = r
                pending = sorted(pending + woken, key=lambda r: r.e.pool_index)
            windows: dict[tuple[float, int], Window] = {}     # one Window value per shape and pass
            still: list[_Run] = []
            for r in pending:
                e = r.e
                if pass_number == 1 and e.pool_index in by_meaning:    # in place of its keys
                    r.matched_by, r.reason = "semantic", by_meaning[e.pool_index]
                    matched.append(r)
                    continue
                window = _entry_window(e, pass_number, chunks, windows)
                if window is None:
                    still.append(r)         # no text, or the same texts as in an earlier pass
                    continue
                if self._match_keys(r, view, window, allowed):
                    r.matched_by = "key"
                    matched.append(r)
                else:
                    still.append(r)
            pending = still
            fed = False
            for r in sorted(matched, key=lambda r: r.e.pool_index):
                r.pass_number = pass_number
                if not self._roll(r, turn_id):
                    continue
                r.text = (expand_content(substitute, r.e.content, self.limits, source=r.e.book_id, entry=r.e.id)
                          if substitute is not None and r.e.content else r.e.content)
                activated.append(r)
                if r.e.feeds_recursion and r.text:
                    if r.text is r.e.content:
                        # the compiled matcher reuses the content hits it found at compile time
                        view.add_recursion_chunk(r.text, entries=(r.e.pool_index,))
                    else:
                        view.add_recursion_chunk(r.text)
                    fed = True
            if not fed:
                break
        for r in pending:
            r.outcome = "not_matched"
        notes = self._explain_unmatched(pending, runs, chat, scanned, cache, substitute)

        used = self._fit_budget(activated)
        for r in activated:
            if r.outcome == "dropped_budget":
                r.reason = f"{r.reason} ({self.budget_reason})"
        inserted = sorted((r for r in activated if r.outcome == "inserted"),
                          key=lambda r: (-r.e.order, -r.e.priority, r.e.position))
        messages_out = tuple(SlotMessage(r.e.role, r.text) for r in inserted if r.text)

        if dry_run:
            new_state = with_first_matched(state, read_first_matched(state))
        else:
            for r in inserted:
                row = first_matched.setdefault(r.e.book_id, {})
                key = str(r.e.id)
                if key not in row or row[key] > turn:
                    row[key] = turn
            new_state = with_first_matched(state, first_matched)
        records = list(self._idle_records())
        for i, r in runs.items():
            records[i] = _record(r)
        log: tuple[LogRecord, ...] = tuple(records)     # type: ignore[arg-type]  # every slot is filled
        prompts = frozenset(r.e.decorators.disable_ui_prompt for r in inserted
                            if r.e.decorators.disable_ui_prompt)
        budget_note = RequestNote("budget_stored" if self.budget_book is not None else "budget_default",
                                  self.budget_reason)
        return SlotResult(regex_cutoffs=tuple(view.cut_off_report(view.cut_keys())),
                          fuzzy_cutoffs=tuple(view.fuzzy_cutoff_report()),
                          messages=messages_out, log=log, state=new_state, budget=self.budget,
                          tokens_used=used, passes=passes, disabled_ui_prompts=prompts,
                          budget_book=self.budget_book, notes=(budget_note, *notes))

    def _idle_run(self, i: int) -> _Run:
        """Pool entry ``i`` as it stands after a pass in which the matcher did not name it
        (evaluating it in a later pass from here is the same as from a fresh run)."""
        r = _Run(self.pool[i])
        self._match_keys(r, None, None, _NOTHING)       # type: ignore[arg-type]  # returns before the view
        return r

    def _idle_records(self) -> tuple[LogRecord | None, ...]:
        """The log record of every idle pool entry (None at the explicit ones): what a request
        that never names the entry logs. Built once, on the first request."""
        records = self._idle_log
        if records is None:
            explicit = set(self._explicit)
            records = tuple(None if i in explicit else _record(self._idle_run(i), "not_matched")
                            for i in range(len(self.pool)))
            self._idle_log = records        # one assignment: threads see all of it or none
        return records

    def _explain_unmatched(self, pending: Sequence[_Run], runs: dict[int, _Run],
                           chat: Sequence[tuple[str, str]], scanned: Sequence[int], cache: ChatScan | None,
                           substitute: Callable[[str], str] | None) -> list[RequestNote]:
        """Request notes for the skipped system messages (those inside the deepest window,
        where they would have been scanned), and the log details of entries that did not
        match: depth 0 never reached by recursion text, or a primary key that occurs only in
        a system message inside the entry's window. ``pending``: the unmatched entries that
        have a ``_Run``; an idle entry gets one here when a system message explains it."""
        deepest = self._max_depth
        start = -1 if deepest >= len(scanned) else scanned[-deepest] if deepest > 0 else len(chat)
        system = [i for i in range(start + 1, len(chat)) if chat[i][0] == "system"]
        notes = [RequestNote("system_message_skipped", f"message {i} is a system message: not scanned and "
                             "not counted (neither in the turn index nor toward any scan depth)", i)
                 for i in system]

        def inside(depth: int) -> int:
            """System messages newer than the oldest message a window of ``depth`` scans."""
            oldest = scanned[-depth] if depth < len(scanned) else -1
            return len(system) - bisect.bisect_right(system, oldest)

        checks: list[_Run] = []
        for r in pending:
            e = r.e
            if e.scan_depth <= 0:
                why = ("no recursion text matched it" if r.reason.startswith("no primary key matched")
                       else r.reason or "no recursion text was produced")
                if e.decorators.no_recursive_search:
                    why = "@@no_recursive_search keeps recursion text from it too"
                r.reason = f"scan depth 0: no message is scanned, only recursion text can trigger it; {why}"
                r.detail = r.detail or "recursion_only"
                continue
            if system and r.reason.startswith("no primary key matched") and inside(e.scan_depth):
                checks.append(r)
        if not system:
            return notes
        idle_depths = [d for d, ix in self._plain_by_depth.items()
                       if inside(d) and any(i not in runs for i in ix)]
        if not checks and not idle_depths:
            return notes
        system_view = ScanView(self.compiled, [t for role, t in reversed(chat) if role == "system"],
                               cache=cache, substitute=substitute, joined=False,
                               regex_timeout=self.regex_timeout, content_of=self._content_of, limits=self.limits)
        found_in = system_view.candidates(len(system), 0)
        in_system = set(range(len(self.pool))) if found_in is None else set(found_in)
        if idle_depths:
            depths = set(idle_depths)
            for i in sorted(in_system):
                if i not in runs and self._plain_idle[i] and self.pool[i].scan_depth in depths:
                    r = runs[i] = self._idle_run(i)
                    r.outcome = "not_matched"
                    checks.append(r)
            checks.sort(key=lambda r: r.e.pool_index)
        for r in checks:
            e = r.e
            plan = self._plans[e.pool_index]
            if not plan.uses_matcher or e.pool_index not in in_system:
                continue
            found = system_view.match_entry(e.pool_index, Window(inside(e.scan_depth))).primary
            key = next((ref.text for ref in plan.primary if ref.primary and ref.slot == found), None)
            if key is not None:
                r.detail = "system_message_only"
                r.reason = (f"no primary key matched; {key!r} occurs only in a system message, and "
                            "system messages are not scanned")
        return notes

    # -- pipeline stages ----------------------------------------------------------------
    @staticmethod
    def _gates(e: SlotEntry, turn: int, first_matched: int | None, at_greeting: bool,
               greeting_index: int | None, user_icon: str | None
               ) -> _GateVerdict | None:
        """docs/slot-mode.md#slot-gates gates 1-9: ("<outcome>", reason), ("matched", by, reason), or None
        when key matching (gate 10) decides."""
        d = e.decorators
        earlier = first_matched is not None and first_matched < turn
        if not e.enabled:
            return "disabled", "the entry is disabled"
        if d.dont_activate and not d.activate:
            return "blocked:dont_activate", "@@dont_activate"
        if d.activate:
            return "matched", "activate", "@@activate"
        if d.dont_activate_after_match and earlier:
            return ("blocked:dont_activate_after_match",
                    f"@@dont_activate_after_match: inserted in turn {first_matched}")
        if d.keep and earlier:
            return "matched", "keep", f"@@keep: inserted in turn {first_matched}"
        if d.is_greeting:
            if not at_greeting:
                return "blocked:is_greeting", "@@is_greeting: the chat is past the greeting"
            if d.greeting_index is not None and greeting_index is not None and greeting_index != d.greeting_index:
                return ("blocked:is_greeting",
                        f"@@is_greeting {d.greeting_index}: the active greeting is {greeting_index}")
        if d.is_user_icon is not None and d.is_user_icon != user_icon:
            return "blocked:is_user_icon", f"@@is_user_icon {d.is_user_icon}: the active icon is {user_icon!r}"
        if d.activate_only_after is not None and turn < d.activate_only_after:
            return ("blocked:activate_only_after",
                    f"@@activate_only_after {d.activate_only_after}: {turn} messages")
        if d.activate_only_every is not None and turn % d.activate_only_every:
            return ("blocked:activate_only_every",
                    f"@@activate_only_every {d.activate_only_every}: {turn} messages")
        if e.constant:
            return "matched", "constant", "constant"
        return None

    def _match_keys(self, r: _Run, view: ScanView, window: Window, allowed: Set[int] | None) -> bool:
        """docs/slot-mode.md#slot-keys and gate 10 for one entry in one window; records the reason."""
        e, plan = r.e, self._plans[r.e.pool_index]
        if not plan.primary:
            r.reason = "no keys"
            return False
        if all(ref.how == "never" for ref in plan.primary):
            r.reason = self._never_reason(plan.primary)
            r.detail = "invalid_regex" if self.regex_keys != "strict" or not r.e.use_regex else None
            return False
        if allowed is not None and e.pool_index not in allowed:
            r.reason = "no primary key matched" + plan.never_note
            return False
        m = view.match_entry(e.pool_index, window) if plan.uses_matcher else EntryMatch(None, ())

        def hit(ref: _KeyRef) -> bool:
            if ref.how == "matcher":
                # m.primary is the first matching key in list order; the scan stops there,
                # and refs are visited in list order, so "== slot" is exact.
                return m.primary == ref.slot if ref.primary else m.secondary[ref.slot]
            return False                    # "never"

        timed = f" ({'; '.join(view.cut_off_report(m.timed_out))})" if m.timed_out else ""
        key = next((ref.text for ref in plan.primary if hit(ref)), None)
        if key is None:
            r.reason = "no primary key matched" + plan.never_note + timed
            return False
        if plan.secondary:
            failed = _secondary_logic_failure(plan, hit)
            if failed is not None:
                r.reason = f"primary key {key!r} matched but {failed}" + timed
                r.detail = "secondary_logic"
                return False
        for group in plan.additional:
            if not any(hit(ref) for ref in group):
                r.reason = f"@@additional_keys {', '.join(x.text for x in group)}: none matched" + timed
                return False
        bad = next((ref.text for ref in plan.exclude if hit(ref)), None)
        if bad is not None:
            r.reason = f"@@exclude_keys: {bad!r} matched" + timed
            return False
        for group in plan.exclude_all:
            if all(hit(ref) for ref in group):
                r.reason = f"@@exclude_keys_all {', '.join(x.text for x in group)}: all matched" + timed
                return False
        r.matched_key = key
        r.reason = f"key {key!r} matched" + timed
        return True

    def _never_reason(self, refs: Sequence[_KeyRef]) -> str:
        if self.regex_keys == "strict" and any(_regex_kind(ref.text) == "plain" for ref in refs):
            return "use_regex is true and no key is a valid /pattern/flags regex (regex_keys='strict')"
        bad = ", ".join(repr(ref.text) for ref in refs)
        return f"no usable key: {bad} {'is' if len(refs) == 1 else 'are'} in /pattern/flags form but not a valid regex"

    def _roll(self, r: _Run, turn_id: str | int) -> bool:
        """docs/slot-mode.md#slot-gates: the stable roll; records the outcome when the entry fails it."""
        p = r.e.decorators.probability
        if p is None:
            return True
        u = roll_percent(turn_id, r.e.book_id, r.e.id)
        r.roll = u
        if passes_roll(u, p):
            return True
        r.outcome = "probability_failed"
        r.reason = f"@@probability {p:g}: roll {u:.2f} >= {p:g}"
        return False

    def _fit_budget(self, activated: Sequence[_Run]) -> int:
        """docs/slot-mode.md#slot-budget: rank by (no @@ignore_on_max_context first, priority desc, order desc,
        pool position) and keep the longest prefix that fits the budget."""
        floors = set()
        for r in activated:
            r.tokens, exact = self._count(r.e.pool_index, r.text, self.budget)
            if not exact:
                floors.add(id(r))   # counted only until it certainly exceeds the budget
        ranked = sorted(activated, key=lambda r: (r.e.decorators.ignore_on_max_context, -r.e.priority,
                                                  -r.e.order, r.e.position))
        used, cut_at = 0, None
        for rank, r in enumerate(ranked, 1):
            assert r.tokens is not None
            if cut_at is None and used + r.tokens <= self.budget:
                used += r.tokens
                r.outcome = "inserted"
                r.reason = f"{r.reason}; fits the budget ({used} of {self.budget} tokens)"
            elif cut_at is None:
                cut_at = rank
                r.outcome = "dropped_budget"
                r.reason = (f"{r.reason}; {used} + {'at least ' if id(r) in floors else ''}{r.tokens} "
                            f"tokens exceed the budget of "
                            f"{self.budget} (rank {rank})")
            else:
                r.outcome = "dropped_budget"
                r.reason = (f"{r.reason}; ranked after the entry that overflowed the budget "
                            f"(rank {cut_at}): only the longest prefix is kept")
        return used


_NOTHING: frozenset[int] = frozenset()
_NO_LITERAL: frozenset[str] = frozenset()


class _FuzzyProbe(NamedTuple):
    # What match.fuzzy.entry_threshold reads of an entry.
    content: str
    fields: Mapping[str, Any]
    uid: int


def _fuzzy_threshold(e: SlotEntry, entry: Any, book: Lorebook) -> float | None:
    """The fuzzy threshold of pool entry ``e`` (None: exact keys): its ``@@fuzzy`` decorator,
    else its ``extensions.lorescan_fuzzy``, else its book's default (match/fuzzy.py). A content
    that still starts with ``@@`` after the slot decorators are read may hold SillyTavern's
    ``@@fuzzy`` line, which the compiler has always honoured: entry_threshold reads it here."""
    ext = fuzzy_field(e.decorators.fuzzy, entry, book)
    if not ext and not e.content.startswith("@@"):
        return None                     # the common case: no fuzzy setting anywhere
    return entry_threshold(_FuzzyProbe(e.content, ext, e.pool_index), None, "<slot pool>")


def _gateable(e: SlotEntry) -> bool:
    """Whether gates 1-9 (SlotEngine._gates) can decide ``e`` in some request."""
    d = e.decorators
    return (not e.enabled or e.constant or d.dont_activate or d.activate or d.dont_activate_after_match
            or d.keep or d.is_greeting or d.is_user_icon is not None or d.activate_only_after is not None
            or d.activate_only_every is not None)


def _record(r: _Run, outcome: Outcome | None = None) -> LogRecord:
    e = r.e
    return LogRecord(
        book=e.book_id, id=e.id, name=e.name, outcome=outcome or r.outcome or "not_matched",
        reason=r.reason, pass_number=r.pass_number, matched_by=r.matched_by,
        matched_key=r.matched_key, roll=r.roll, tokens=r.tokens, priority=e.priority,
        order=e.order, role=e.role, ignore_on_max_context=e.decorators.ignore_on_max_context,
        position=e.position, detail=r.detail)


def _read_messages(messages: Sequence[RoleMessage]) -> list[tuple[str, str]]:
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
        if role not in ROLES:
            raise SettingsError(f"role must be system, user or assistant, got {role!r:.40}",
                                source="messages", field=f"[{i}].role")
        if not isinstance(text, str):
            raise SettingsError(f"text must be a string, got {type(text).__name__}", source="messages",
                                field=f"[{i}].content")
        out.append((role, text))
    return out


def _at_greeting(chat: Sequence[tuple[str, str]]) -> bool:
    """docs/slot-mode.md#slot-gates [decision]: no character message other than the greeting exists yet.

    The greeting is the first assistant message when no user message precedes it.
    """
    greeting_seen = False
    user_seen = False
    for role, _ in chat:
        if role == "user":
            user_seen = True
        elif role == "assistant":
            if not greeting_seen and not user_seen:
                greeting_seen = True
            else:
                return False
    return True


def _entry_window(e: SlotEntry, pass_number: int, chunks: int,
                  windows: dict[tuple[float, int], Window]) -> Window | None:
    """The texts entry ``e`` sees in this pass, or None when there is nothing new to see: no
    text at all, or the same texts as in pass 1 (``@@no_recursive_search``). ``windows``
    shares one Window per shape (ScanView answers a repeated Window object fastest)."""
    own = 0 if e.decorators.no_recursive_search else chunks
    if e.scan_depth <= 0:
        # docs/slot-mode.md#slot-keys [decision, revised]: depth 0 scans no message, but recursion text still
        # reaches the entry ("only lore can trigger this").
        if not own:
            return None
        depth: float = _RECURSION_ONLY
    elif pass_number > 1 and not own:
        return None
    else:
        depth = e.scan_depth
    window = windows.get((depth, own))
    if window is None:
        window = windows[(depth, own)] = Window(depth, 0, own)
    return window


def _secondary_logic_failure(plan: _Plan, hit: Callable[[_KeyRef], bool]) -> str | None:
    """docs/sillytavern-mode.md#st-key-logic / 15.4 [decision, revised]: None when the secondary keys pass the entry's
    selective logic, else why not, in words (a key that can never match counts as absent)."""
    refs, logic = plan.secondary, plan.logic
    name = SELECTIVE_LOGICS[logic]
    if logic == 0:                  # AND ANY
        if any(hit(ref) for ref in refs):
            return None
        return f"no secondary key matched ({name}: at least one must)"
    hits = [hit(ref) for ref in refs]
    if logic == 1 and all(hits):                        # NOT ALL
        return f"every secondary key matched ({name}: at least one must be absent)"
    if logic == 2 and any(hits):                        # NOT ANY
        return f"secondary key {refs[hits.index(True)].text!r} matched ({name}: none may)"
    if logic == 3 and not all(hits):                    # AND ALL
        return f"secondary key {refs[hits.index(False)].text!r} did not match ({name}: every one must)"
    return None
