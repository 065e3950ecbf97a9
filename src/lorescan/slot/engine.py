"""Lorebook-slot mode (SPEC Part B, section 15): one pool, priority for the budget, order for
placement, one role-tagged message per surviving entry.

:class:`SlotEngine` compiles the attached books once (through the same
``compile_book``/``ScanView`` machinery as SillyTavern mode, with each text matched on
its own) and answers one request per :meth:`SlotEngine.run`: which entries go into the
lorebook slot, in which order and with which role, plus the request log of SPEC 15.11
and the updated per-chat state.

Choices where SPEC 15 is silent (see also the [decision] marks there):

* Messages are given oldest first, with roles; ``M`` (the turn index) counts every one of
  them, system messages included. An entry with scan depth 0 sees no text at all,
  recursion text included ("scans nothing", SPEC 15.4).
* Keys: ``use_regex`` absent (SillyTavern books) = SillyTavern's per-key auto-detection;
  ``true`` = only valid ``/pattern/flags`` keys can match; ``false`` = every key is literal,
  so a ``/…/``-shaped key is matched here as plain text with the shared plain-key rule
  (``matching.match_plain_key``) instead of going to the matcher, which would read it as
  a regex. Decorator key lists (``@@additional_keys`` …) follow the entry's rule.
  ``selectiveLogic`` is not used: secondary keys always mean "primary AND any secondary".
* Only ``@@probability`` rolls; SillyTavern's ``probability``/``useProbability`` fields and
  per-entry ``scanDepth`` are not platform fields (SPEC 15.3) and are ignored.
* A re-inserted entry keeps the earliest ``first_matched_turn`` (a record from a later turn,
  left by a rolled-back branch, is lowered to this turn).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from ..compile import CompiledBook, compile_book
from ..limits import DEFAULT_LIMITS, Limits, check_book
from ..hitcache import ChatScan
from ..errors import SettingsError
from ..matching import EntryMatch, ScanView, Window, match_plain_key
from ..model import Lorebook, MatchOptions, entry_from_fields
from ..textrules import js_trim
from ..tokens import TiktokenCounter
from .pool import SlotBook, SlotEntry, slot_entry_from
from .roll import passes_roll, roll_percent
from .state import read_first_matched, with_first_matched

__all__ = ["SlotEngine", "SlotResult", "SlotMessage", "LogRecord", "ChatMessage", "OUTCOMES", "MAX_PASSES"]

MAX_PASSES = 3          # SPEC 15.6 [decision]: 3 passes in total
OUTCOMES = ("inserted", "dropped_budget", "probability_failed", "not_matched", "disabled",
            "blocked:dont_activate", "blocked:dont_activate_after_match", "blocked:is_greeting",
            "blocked:is_user_icon", "blocked:activate_only_after", "blocked:activate_only_every")
ROLES = ("system", "user", "assistant")

ChatMessage = tuple[str, str] | Mapping[str, Any]

# what gates 1-9 decide (SlotEngine._gates): ("matched", by, reason) or (blocked outcome, reason)
_GateBlocked = Literal["disabled", "blocked:dont_activate", "blocked:dont_activate_after_match",
                       "blocked:is_greeting", "blocked:is_user_icon", "blocked:activate_only_after",
                       "blocked:activate_only_every"]
_GateVerdict = tuple[Literal["matched"], str, str] | tuple[_GateBlocked, str]


class SlotMessage(NamedTuple):
    """One message of the lorebook slot: ``(role, content)``."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class LogRecord:
    """What happened to one entry of the pool in one request (SPEC 15.11).

    ``outcome``: one of :data:`OUTCOMES`; ``reason``: why, in words. ``pass_number``: the
    pass (1..3) in which the entry activated (None if it did not). ``matched_by``:
    ``"key"``, ``"constant"``, ``"activate"`` (``@@activate``) or ``"keep"`` (``@@keep``);
    ``matched_key``: the primary key that matched, as stored. ``roll``: the stable roll
    ``u`` when ``@@probability`` applied. ``tokens``: the content's token count (entries
    that activated only). ``priority``, ``order``, ``role``: effective values.
    ``ignore_on_max_context``: ranked below every entry without the decorator.
    """

    book: str
    id: int | str
    name: str
    outcome: str
    reason: str
    pass_number: int | None
    matched_by: str | None
    matched_key: str | None
    roll: float | None
    tokens: int | None
    priority: float
    order: float
    role: str
    ignore_on_max_context: bool
    position: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON data."""
        data = asdict(self)
        data["position"] = list(self.position)
        return data


@dataclass(frozen=True, slots=True)
class SlotResult:
    """The answer to one request.

    ``messages``: the lorebook slot, in order; ``log``: one record per pool entry, in pool
    order; ``state``: the per-chat state to store for the next turn (the input state
    unchanged in a dry run); ``budget``: the token budget applied; ``tokens_used``: the
    tokens of the inserted entries; ``passes``: scan passes run; ``disabled_ui_prompts``:
    values of ``@@disable_ui_prompt`` on inserted entries (``system_prompt``,
    ``post_history_instructions``), for the caller to act on.
    """

    messages: tuple[SlotMessage, ...]
    log: tuple[LogRecord, ...]
    state: dict[str, Any]
    budget: int
    tokens_used: int
    passes: int
    disabled_ui_prompts: frozenset[str]

    @property
    def inserted(self) -> tuple[LogRecord, ...]:
        """Log records of the inserted entries, in pool order."""
        return tuple(r for r in self.log if r.outcome == "inserted")


# -- key plans: which keys the shared matcher answers, which are tested here -----------

@dataclass(frozen=True, slots=True)
class _KeyRef:
    text: str
    how: Literal["matcher", "literal", "never"]
    slot: int = -1          # index in the derived entry's key / keysecondary list
    primary: bool = False   # slot indexes the derived ``key`` list (else ``keysecondary``)


@dataclass(frozen=True, slots=True)
class _Plan:
    primary: tuple[_KeyRef, ...]
    secondary: tuple[_KeyRef, ...]
    additional: tuple[tuple[_KeyRef, ...], ...]
    exclude: tuple[_KeyRef, ...]
    exclude_all: tuple[tuple[_KeyRef, ...], ...]
    uses_matcher: bool
    has_literal: bool


def _regex_kind(key: str) -> str:
    """How the shared matcher would read ``key``: ``"regex"``, ``"invalid"`` (``/…/``-shaped
    but not a usable ECMAScript regex) or ``"plain"``."""
    from ..jsregex import compile_js_regex, parse_regex_key
    k = js_trim(key)
    parsed = parse_regex_key(k)
    if parsed is not None:
        try:
            compile_js_regex(*parsed)
        except Exception:       # whatever the translator raises for a pattern it rejects
            return "invalid"
        return "regex"
    return "invalid" if len(k) >= 2 and k.startswith("/") and "/" in k[1:] else "plain"


def _plan_keys(e: SlotEntry) -> tuple[_Plan, list[str], list[str]]:
    primary_keys: list[str] = []
    secondary_keys: list[str] = []

    def ref(text: str, target: list[str]) -> _KeyRef:
        if e.use_regex is None or "{{" in text:
            how = "matcher"                 # SillyTavern auto-detection (macros: decided after substitution)
        else:
            kind = _regex_kind(text)
            if e.use_regex:                 # CCv3: every key is /pattern/flags; an invalid one never matches
                how = "matcher" if kind == "regex" else "never"
            else:                           # CCv3 use_regex=false: keys are literal even when /…/-shaped
                how = "literal" if kind == "regex" else "matcher"
        if how != "matcher":
            return _KeyRef(text, how)       # type: ignore[arg-type]
        target.append(text)
        return _KeyRef(text, "matcher", len(target) - 1, target is primary_keys)

    d = e.decorators
    primary = tuple(ref(k, primary_keys) for k in e.keys)
    # CCv3: secondary keys are ignored when use_regex is true; they apply only to selective entries.
    secondary = tuple(ref(k, secondary_keys) for k in e.secondary_keys) if (
        e.selective and not e.use_regex) else ()
    additional = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.additional_keys)
    exclude = tuple(ref(k, secondary_keys) for k in d.exclude_keys)
    exclude_all = tuple(tuple(ref(k, secondary_keys) for k in group) for group in d.exclude_keys_all)
    refs = [*primary, *secondary, *exclude, *(r for g in additional + exclude_all for r in g)]
    plan = _Plan(primary, secondary, additional, exclude, exclude_all,
                 uses_matcher=bool(primary_keys or secondary_keys),
                 has_literal=any(r.how == "literal" for r in refs))
    return plan, primary_keys, secondary_keys


# -- the engine ---------------------------------------------------------------------------

@dataclass(slots=True)
class _Run:
    """Mutable bookkeeping of one entry during one request."""

    e: SlotEntry
    outcome: str | None = None
    reason: str = ""
    pass_number: int | None = None
    matched_by: str | None = None
    matched_key: str | None = None
    roll: float | None = None
    tokens: int | None = None
    text: str = ""


class SlotEngine:
    """Lorebook-slot mode over a fixed set of attached books, compiled once.

    ``books``: the attached books in attachment order (a :class:`Lorebook`, or a
    :class:`SlotBook` to set the book's id or settings); their entries form one pool.
    ``count_tokens``: the model's tokenizer, any ``str -> int`` (default: tiktoken
    ``cl100k_base`` loaded offline); each entry's count is cached with the engine.
    ``substitute``: macro hook applied to keys containing ``{{`` and to the content of
    every entry that passes its roll (may be overridden per request). ``match_options``:
    plain-key rules (default: the improved rules of SPEC 16). ``regex_keys``: ``"ccv3"``
    honours each entry's ``use_regex`` (SPEC 15.4); ``"auto"`` ignores it and
    auto-detects ``/pattern/flags`` keys as SillyTavern does. ``user_icon_decorator``:
    accept ``@@is_user_icon`` (the caller then passes ``user_icon`` to :meth:`run`).
    ``regex_timeout``: seconds allowed to one regex key on one text.
    ``limits``: bounds for untrusted books (:class:`~lorescan.limits.Limits`).

    The engine is immutable once built apart from its token-count cache; one engine
    may serve many chats and threads at once (per-chat data lives in the ``state``).
    Raises :class:`LorebookError` for an entry field of the wrong type and
    :class:`SettingsError` for bad settings or two books with the same id.
    """

    def __init__(self, books: Sequence[Lorebook | SlotBook], *,
                 count_tokens: Callable[[str], int] | None = None,
                 substitute: Callable[[str], str] | None = None,
                 match_options: MatchOptions | None = None,
                 regex_keys: Literal["ccv3", "auto"] = "ccv3",
                 user_icon_decorator: bool = False,
                 regex_timeout: float | None = 0.25, limits: Limits = DEFAULT_LIMITS) -> None:
        if not isinstance(limits, Limits):
            raise SettingsError(f"limits must be a Limits, got {type(limits).__name__}", source="SlotEngine",
                                field="limits")
        self.limits = limits
        if regex_keys not in ("ccv3", "auto"):
            raise SettingsError(f"must be 'ccv3' or 'auto', got {regex_keys!r}", source="SlotEngine",
                                field="regex_keys")
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
        self.count_tokens: Callable[[str], int] = count_tokens if count_tokens is not None else TiktokenCounter()
        self.substitute = substitute
        self.match_options = match_options if match_options is not None else MatchOptions.improved()
        self.user_icon_decorator = user_icon_decorator
        self.regex_timeout = regex_timeout
        # SPEC 15.2 [seed]: when the attached books disagree, the largest budget wins.
        self.budget: int = max((b.settings.token_budget for b in slot_books if b.settings), default=0)

        pool: list[SlotEntry] = []
        plans: list[_Plan] = []
        derived = []
        for bi, b in enumerate(slot_books):
            for ei, entry in enumerate(b.book.entries):
                e = slot_entry_from(entry, pool_index=len(pool), book_index=bi, index=ei, book=b,
                                    auto_regex=regex_keys == "auto", user_icon=user_icon_decorator)
                plan, primary, secondary = _plan_keys(e)
                pool.append(e)
                plans.append(plan)
                # The matcher's view of the entry: ST field names, every option explicit.
                derived.append(entry_from_fields({
                    "uid": e.pool_index, "key": primary, "keysecondary": secondary,
                    "content": e.content, "comment": e.name, "selective": True,
                    "caseSensitive": e.case_sensitive, "matchWholeWords": e.whole_words,
                }, source=b.book.source, fill_defaults=False))
        self.pool: tuple[SlotEntry, ...] = tuple(pool)
        self._plans = tuple(plans)
        self.compiled: CompiledBook = compile_book(
            Lorebook(name="lorebook slot pool", entries=tuple(derived), source="<slot pool>",
                     format="lorebook-slot"), self.match_options, limits=limits)
        self._max_depth = max((e.scan_depth for e in self.pool), default=0)
        self._token_cache: list[tuple[str, int] | None] = [None] * len(self.pool)

    # -- token counts (cached per entry: a compiled book's contents are counted once) ----
    def entry_tokens(self, pool_index: int, text: str | None = None) -> int:
        """Token count of a pool entry's content (or of ``text``, its substituted form).

        The last count per entry is kept, so a content is tokenised once however many
        turns insert it.
        """
        if text is None:
            text = self.pool[pool_index].content
        cached = self._token_cache[pool_index]
        if cached is not None and (cached[0] is text or cached[0] == text):
            return cached[1]
        count = self.count_tokens(text) if text else 0
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(f"count_tokens must return an int >= 0, got {count!r}")
        self._token_cache[pool_index] = (text, count)
        return count

    # -- one request ----------------------------------------------------------------------
    def run(self, messages: Sequence[ChatMessage], *, turn_id: str | int,
            state: Mapping[str, Any] | None = None, dry_run: bool = False,
            at_greeting: bool | None = None, greeting_index: int | None = None,
            user_icon: str | None = None,
            substitute: Callable[[str], str] | None = None,
            cache: ChatScan | None = None) -> SlotResult:
        """Build the lorebook slot for one request.

        ``messages``: the conversation so far, **oldest first**, as ``(role, text)`` pairs or
        ``{"role": ..., "content": ...}`` mappings (role ``system``, ``user`` or
        ``assistant``; the greeting is the character's first message), not including the
        reply being generated. Its length is the turn index ``M`` of SPEC 15.5.
        ``turn_id``: identifies this turn for the probability roll (recommended:
        conversation id plus ``M``); the same id gives the same rolls in every pass, dry
        run, swipe and regeneration. ``state``: the value returned by the previous
        request of this chat (None for a new chat); it is never modified. ``dry_run``:
        the returned state equals the input. ``at_greeting``: whether the chat is still
        at the greeting (default: no assistant message besides the greeting);
        ``greeting_index``: the active greeting (0 = first message, k = k-th alternate),
        None if unknown. ``user_icon``: the active user icon (with
        ``user_icon_decorator``). ``substitute``: overrides the engine's macro hook for
        this request. ``cache``: the chat's :class:`~lorescan.hitcache.ChatScan` (pass the same
        one every turn so messages already scanned are not scanned again).
        Raises :class:`SettingsError` for malformed messages or state.
        """
        chat = _read_messages(messages)
        first_matched = read_first_matched(state)
        turn = len(chat)
        if at_greeting is None:
            at_greeting = _at_greeting(chat)
        substitute = substitute if substitute is not None else self.substitute
        view = ScanView(self.compiled, [text for _, text in reversed(chat)], cache=cache,
                        substitute=substitute, joined=False, regex_timeout=self.regex_timeout)
        runs = [_Run(e) for e in self.pool]

        # Gates 1-9 (SPEC 15.5): decided once for the turn.
        prematched: list[_Run] = []
        pending: list[_Run] = []
        for r in runs:
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
            candidates = view.candidates(self._max_depth, chunks)
            allowed = None if candidates is None else set(candidates)
            still: list[_Run] = []
            for r in pending:
                e = r.e
                if pass_number > 1 and (e.decorators.no_recursive_search or e.scan_depth <= 0):
                    still.append(r)         # its texts have not changed since pass 1
                    continue
                recursion = 0 if e.decorators.no_recursive_search else chunks
                if self._match_keys(r, view, Window(e.scan_depth, 0, recursion), allowed):
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
                r.text = substitute(r.e.content) if substitute is not None and r.e.content else r.e.content
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

        used = self._fit_budget(activated)
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
        log = tuple(LogRecord(
            book=r.e.book_id, id=r.e.id, name=r.e.name, outcome=r.outcome or "not_matched",
            reason=r.reason, pass_number=r.pass_number, matched_by=r.matched_by,
            matched_key=r.matched_key, roll=r.roll, tokens=r.tokens, priority=r.e.priority,
            order=r.e.order, role=r.e.role, ignore_on_max_context=r.e.decorators.ignore_on_max_context,
            position=r.e.position) for r in runs)
        prompts = frozenset(r.e.decorators.disable_ui_prompt for r in inserted
                            if r.e.decorators.disable_ui_prompt)
        return SlotResult(messages=messages_out, log=log, state=new_state, budget=self.budget,
                          tokens_used=used, passes=passes, disabled_ui_prompts=prompts)

    # -- pipeline stages ----------------------------------------------------------------
    @staticmethod
    def _gates(e: SlotEntry, turn: int, first_matched: int | None, at_greeting: bool,
               greeting_index: int | None, user_icon: str | None
               ) -> _GateVerdict | None:
        """SPEC 15.5 gates 1-9: ("<outcome>", reason), ("matched", by, reason), or None
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

    def _match_keys(self, r: _Run, view: ScanView, window: Window, allowed: set[int] | None) -> bool:
        """SPEC 15.4 and gate 10 for one entry in one window; records the reason."""
        e, plan = r.e, self._plans[r.e.pool_index]
        if not plan.primary:
            r.reason = "no keys"
            return False
        if all(ref.how == "never" for ref in plan.primary):
            r.reason = "use_regex is true and no key is a valid /pattern/flags regex"
            return False
        if window.depth <= 0:
            r.reason = "scan depth 0: no text is scanned"
            return False
        if allowed is not None and e.pool_index not in allowed and not plan.has_literal:
            r.reason = "no primary key matched"
            return False
        m = view.match_entry(e.pool_index, window) if plan.uses_matcher else EntryMatch(None, ())
        texts: list[str] | None = None

        def hit(ref: _KeyRef) -> bool:
            nonlocal texts
            if ref.how == "matcher":
                # m.primary is the first matching key in list order; the scan stops there,
                # and refs are visited in list order, so "== slot" is exact.
                return m.primary == ref.slot if ref.primary else m.secondary[ref.slot]
            if ref.how == "never":
                return False
            if texts is None:
                texts = view.texts(window)
            return self._literal_hit(ref.text, e, texts, view)

        timed = f" (regex timed out: {', '.join(m.timed_out)})" if m.timed_out else ""
        key = next((ref.text for ref in plan.primary if hit(ref)), None)
        if key is None:
            r.reason = "no primary key matched" + timed
            return False
        if plan.secondary and not any(hit(ref) for ref in plan.secondary):
            r.reason = f"primary key {key!r} matched but no secondary key" + timed
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

    def _literal_hit(self, raw: str, e: SlotEntry, texts: Sequence[str], view: ScanView) -> bool:
        # A /…/-shaped key of a use_regex=false entry: literal text (CCv3), so it bypasses the
        # matcher's regex auto-detection and goes through the same plain-key rule.
        key = raw
        if view.substitute is not None and "{{" in key:
            key = view.substitute(key)
        key = js_trim(key) if key else ""
        if not key:
            return False
        return any(match_plain_key(t, key, case_sensitive=e.case_sensitive, whole_words=e.whole_words,
                                   options=self.match_options) for t in texts)

    def _roll(self, r: _Run, turn_id: str | int) -> bool:
        """SPEC 15.7: the stable roll; records the outcome when the entry fails it."""
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
        """SPEC 15.9: rank by (no @@ignore_on_max_context first, priority desc, order desc,
        pool position) and keep the longest prefix that fits the budget."""
        for r in activated:
            r.tokens = self.entry_tokens(r.e.pool_index, r.text)
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
                r.reason = (f"{r.reason}; {used} + {r.tokens} tokens exceed the budget of "
                            f"{self.budget} (rank {rank})")
            else:
                r.outcome = "dropped_budget"
                r.reason = (f"{r.reason}; ranked after the entry that overflowed the budget "
                            f"(rank {cut_at}): only the longest prefix is kept")
        return used


def _read_messages(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise SettingsError("expected a list of (role, text) messages", source="messages")
    out: list[tuple[str, str]] = []
    for i, m in enumerate(messages):
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
    """SPEC 15.8 [decision]: no character message other than the greeting exists yet.

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

