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

This module is the request's orchestration only; the stages live beside it, as in ``st/``:
``plans`` (how each key reads, what the matcher compiles), ``gates`` (gates 1-10, the windows
of each pass, the roll), ``budget`` (token counts and the fit), ``explain`` (log records and
the system-message explanations) and ``result`` (what a request takes in and gives back).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from ..errors import LorebookError, RegexKeyError, SettingsError
from ..layout import Layout
from ..limits import DEFAULT_LIMITS, Limits, check_book
from ..macros import expand_content
from ..match.cache import ChatScan
from ..match.compile import CompiledKeys, compile_keys
from ..match.expr import EXPR_ERROR, layout_of
from ..match.keys import KeySpec
from ..match.options import MatchOptions
from ..match.regexscope import RegexBudget
from ..match.scanwork import ScanWork
from ..match.view import ScanView, Window
from ..model import Lorebook
from ..semantic.index import SemanticIndex, VectorSettings
from ..semantic.store import is_candidate
from ..tokens import shared_counter
from .budget import TokenCache, fit_budget
from .explain import Unmatched, record
from .gates import MAX_PASSES, Run, at_greeting as _at_greeting, entry_window, gateable, gates, match_keys, roll
from .plans import Plan, RegexKeys, fuzzy_threshold, plan_keys
from .pool import SlotBook, SlotEntry, pool_budget, slot_entry_from
from .result import (LOG_DETAILS, MATCHED_BY, NOTE_CODES, OUTCOMES, LogDetail, LogRecord, MatchedBy, NoteCode,
                     Outcome, RequestNote, RoleMessage, SlotMessage, SlotResult, read_messages)
from .state import LAYOUT_KEY, read_first_matched, read_layout, with_first_matched

# SlotEngine, and the names this module has always offered (defined in result, plans, gates)
__all__ = ["SlotEngine", "SlotResult", "SlotMessage", "LogRecord", "RequestNote", "RoleMessage", "Outcome", "OUTCOMES",
           "MatchedBy", "MATCHED_BY", "MAX_PASSES", "LogDetail", "LOG_DETAILS", "NoteCode", "NOTE_CODES", "RegexKeys"]

_NOTHING: frozenset[int] = frozenset()


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
        regex_timeout: the nominal seconds one regex key may cost on one text (``JSRegex.cost``, a
            function of the pattern and the text, never a clock; see ``RegexBudget``).
        limits: ``regex_time_per_scan`` bounds all regex time of one :meth:`run` (cut-off keys
            are listed in ``SlotResult.regex_cutoffs`` and in their entries' log reasons).
        stable_placement: cache-stable placement (docs/improved-profile.md#cache-stable): the
            slot's messages keep their order from request to request (the layout is kept in the
            state); which entries are inserted is unchanged.
        compile_with: what compiles the pool's key specs, called as
            ``match.compile.compile_keys`` (the default) is; a caller that has compiled the same
            specs before (the service's book store) may answer with those keys.

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
                 semantic: VectorSettings | None = None, stable_placement: bool = False,
                 compile_with: Callable[..., CompiledKeys] | None = None) -> None:
        if not isinstance(limits, Limits):
            raise SettingsError(f"limits must be a Limits, got {type(limits).__name__}", source="SlotEngine",
                                field="limits")
        if not isinstance(stable_placement, bool):
            raise SettingsError(f"expected true/false, got {stable_placement!r:.40}", source="SlotEngine",
                                field="stable_placement")
        self.stable_placement = stable_placement
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
        plans: list[Plan] = []
        specs: list[KeySpec] = []       # what the match core compiles; dropped once compiled (memory)
        for bi, b in enumerate(slot_books):
            for ei, entry in enumerate(b.book.entries):
                e = slot_entry_from(entry, pool_index=len(pool), book_index=bi, index=ei, book=b,
                                    user_icon=user_icon_decorator)
                pool.append(e)
                plan, spec = plan_keys(e, regex_keys)
                plans.append(plan)
                fuzzy = fuzzy_threshold(e, entry, b.book)
                specs.append(spec if fuzzy is None else spec._replace(fuzzy=fuzzy))
        self.pool: tuple[SlotEntry, ...] = tuple(pool)
        self._plans = tuple(plans)
        try:
            self.compiled: CompiledKeys = (compile_with or compile_keys)(specs, self.match_options, limits=limits,
                                                       name="lorebook slot pool",
                                                       source=" + ".join(dict.fromkeys(b.book.source for b in slot_books))
                                                       or "<slot pool>")
        except LorebookError as exc:    # a bad regex or key expression: locate it in the attached book, not the pool
            expression = exc.problem.startswith(EXPR_ERROR)
            if not isinstance(exc.entry, int) or not (isinstance(exc, RegexKeyError) or expression):
                raise
            e = self.pool[exc.entry]
            field = "secondary_keys" if expression and str(exc.field).startswith("keysecondary") else "keys"
            raise type(exc)(exc.problem, source=slot_books[e.book_index].book.source, entry=e.id,
                            field=field) from None
        if self.match_options.expressions:       # the compiler checked them: lay out each entry's atoms
            plans = [p if (lay := layout_of(sp.primary, sp.secondary)) is None else replace(p, exprs=lay)
                     for p, sp in zip(plans, specs)]
            self._plans = tuple(plans)
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
                               if gateable(e) or e.scan_depth <= 0 or e.pool_index in sem_candidates)
        # Idle entries whose unmatched reason is "no primary key matched", by scan depth: a
        # system message inside their window may explain them (explain.Unmatched).
        self._unmatched = Unmatched(self.pool, self._plans, set(self._explicit))
        # The log record of every idle entry, built on the first request (published whole).
        self._idle_log: tuple[LogRecord | None, ...] | None = None
        # the last token count per pool entry (threads share it)
        self._tokens = TokenCache(self.count_tokens, len(self.pool))

    def _content_of(self, i: int) -> str:
        """Pool entry ``i``'s content (the text the compiled matcher's content hits are of)."""
        return self.pool[i].content

    # -- token counts (cached per entry: a compiled book's contents are counted once) ----
    def entry_tokens(self, pool_index: int, text: str | None = None) -> int:
        """Token count of a pool entry's content (or of ``text``, its substituted form).

        The last count per entry is kept, so a content is tokenised once however many
        turns insert it.
        """
        return self._tokens.count(pool_index, self.pool[pool_index].content if text is None else text, None)[0]

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
            cache: ChatScan | None = None, deadline: float | None = None) -> SlotResult:
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
                every turn so messages already scanned are not scanned again; the type
                :meth:`STEngine.scan` takes).
            deadline: a ``time.monotonic()`` value; key matching checks it every 65,536 key
                hits of a text (None: no deadline). It never changes the answer, only whether
                there is one.

        Returns:
            The :class:`SlotResult`: the slot's messages, the request log (one
            :class:`LogRecord` per entry, its ``outcome`` an :data:`Outcome`) and the new state.

        Raises:
            SettingsError: malformed messages (as :meth:`STEngine.scan` raises for one), state or ``cache``.
            ScanDeadlineExceeded: ``deadline`` passed during the run.
        """
        chat = read_messages(messages)
        if cache is not None and not isinstance(cache, ChatScan):
            raise SettingsError(f"cache must be a ChatScan (or None), got {type(cache).__name__}", source="run",
                                field="cache")
        first_matched = read_first_matched(state)
        previous = read_layout(state)
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
                        fuzzy_work=ScanWork(self.limits, deadline))
        pool = self.pool
        by_meaning: dict[int, str] = {}
        if self._semantic is not None:
            threshold = self._semantic.settings.score_threshold
            by_meaning = {int(k): hit.detail(threshold) for k, hit in
                          self._semantic.select([chat[i][1] for i in reversed(scanned)]).items()}
        # Explicit entries get their Run now; an idle one when the matcher first names it.
        runs: dict[int, Run] = {}

        # Gates 1-9 (docs/slot-mode.md#slot-gates): decided once for the turn.
        prematched: list[Run] = []
        pending: list[Run] = []
        for i in self._explicit:
            r = runs[i] = Run(pool[i])
            e = r.e
            fm = first_matched.get(e.book_id, {}).get(str(e.id))
            verdict = gates(e, turn, fm, at_greeting, greeting_index, user_icon)
            if verdict is None:
                pending.append(r)
            elif verdict[0] == "matched":
                r.matched_by, r.reason = verdict[1], verdict[2]
                prematched.append(r)
            else:
                r.outcome, r.reason = verdict

        passes = 0
        activated: list[Run] = []
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
            still: list[Run] = []
            for r in pending:
                e = r.e
                if pass_number == 1 and e.pool_index in by_meaning:    # in place of its keys
                    r.matched_by, r.reason = "semantic", by_meaning[e.pool_index]
                    matched.append(r)
                    continue
                window = entry_window(e, pass_number, chunks, windows)
                if window is None:
                    still.append(r)         # no text, or the same texts as in an earlier pass
                    continue
                if match_keys(r, self._plans[e.pool_index], view, window, allowed, self.regex_keys):
                    r.matched_by = "key"
                    matched.append(r)
                else:
                    still.append(r)
            pending = still
            fed = False
            for r in sorted(matched, key=lambda r: r.e.pool_index):
                r.pass_number = pass_number
                if not roll(r, turn_id):
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
        notes = self._unmatched.explain(
            pending, runs, chat, scanned, idle_run=self._idle_run,
            system_view=lambda texts: ScanView(self.compiled, texts, cache=cache, substitute=substitute, joined=False,
                                               regex_timeout=self.regex_timeout, content_of=self._content_of,
                                               limits=self.limits))

        used = fit_budget(activated, self.budget, self._tokens.count)
        for r in activated:
            if r.outcome == "dropped_budget":
                r.reason = f"{r.reason} ({self.budget_reason})"
        inserted = sorted((r for r in activated if r.outcome == "inserted"),
                          key=lambda r: (-r.e.order, -r.e.priority, r.e.position))
        placed = [(f"{r.e.book_id}.{r.e.id}", r.text, r.e.role) for r in inserted if r.text]
        if self.stable_placement and previous is not None:
            placed = previous.arrange("slot", placed)
        messages_out = tuple(SlotMessage(role, text) for _, text, role in placed)
        items = {"slot": [(k, c) for k, c, _ in placed]}
        stability = None if previous is None else previous.stability(items)

        if dry_run:
            new_state = with_first_matched(state, read_first_matched(state))
        else:
            for r in inserted:
                row = first_matched.setdefault(r.e.book_id, {})
                key = str(r.e.id)
                if key not in row or row[key] > turn:
                    row[key] = turn
            new_state = with_first_matched(state, first_matched)
            if self.stable_placement or previous is not None:
                new_state[LAYOUT_KEY] = Layout.of(items).to_json()
        records = list(self._idle_records())
        for i, r in runs.items():
            records[i] = record(r)
        log: tuple[LogRecord, ...] = tuple(records)     # type: ignore[arg-type]  # every slot is filled
        prompts = frozenset(r.e.decorators.disable_ui_prompt for r in inserted
                            if r.e.decorators.disable_ui_prompt)
        budget_note = RequestNote("budget_stored" if self.budget_book is not None else "budget_default",
                                  self.budget_reason)
        return SlotResult(regex_cutoffs=tuple(view.cut_off_report(view.cut_keys())),
                          fuzzy_cutoffs=tuple(view.fuzzy_cutoff_report()),
                          key_hit_cutoffs=tuple(view.key_hit_cutoff_report()),
                          messages=messages_out, log=log, state=new_state, budget=self.budget,
                          tokens_used=used, passes=passes, disabled_ui_prompts=prompts,
                          budget_book=self.budget_book, notes=(budget_note, *notes), stability=stability)

    def _idle_run(self, i: int) -> Run:
        """Pool entry ``i`` as it stands after a pass in which the matcher did not name it
        (evaluating it in a later pass from here is the same as from a fresh run)."""
        r = Run(self.pool[i])
        match_keys(r, self._plans[i], None, None, _NOTHING, self.regex_keys)     # decided without the view
        return r

    def _idle_records(self) -> tuple[LogRecord | None, ...]:
        """The log record of every idle pool entry (None at the explicit ones): what a request
        that never names the entry logs. Built once, on the first request."""
        records = self._idle_log
        if records is None:
            explicit = set(self._explicit)
            records = tuple(None if i in explicit else record(self._idle_run(i), "not_matched")
                            for i in range(len(self.pool)))
            self._idle_log = records        # one assignment: threads see all of it or none
        return records
