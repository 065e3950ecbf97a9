"""The slot engine's request loop as it was before issue 8's bulk rewrite: every pool entry
walked in every pass, one ``_Run`` and one ``LogRecord`` built per entry per request.

Kept verbatim (only the imports, the class around it and, since slot/ was split by stage, the
module functions it calls in place of the engine's old methods are new) as the oracle of
``tests/slot/test_slot_bulk.py``: the bulk ``SlotEngine.run`` must give exactly the same
messages, log records, notes and state on every input.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lorescan.match.cache import ChatScan
from lorescan.match.regexscope import RegexBudget
from lorescan.match.view import ScanView, Window
from lorescan.slot.budget import fit_budget
from lorescan.slot.engine import SlotEngine
from lorescan.slot.gates import MAX_PASSES, Run as _Run, at_greeting as _at_greeting, entry_window as _entry_window
from lorescan.slot.gates import gates, match_keys, roll
from lorescan.slot.result import LogRecord, RequestNote, RoleMessage, SlotMessage, SlotResult
from lorescan.slot.result import read_messages as _read_messages
from lorescan.slot.state import read_first_matched, with_first_matched


class ReferenceSlotEngine(SlotEngine):
    """A :class:`SlotEngine` whose ``run`` is the per-entry loop of before the bulk rewrite."""

    def run(self, messages: Sequence[RoleMessage], *, turn_id: str | int,
            state: Mapping[str, Any] | None = None, dry_run: bool = False,
            at_greeting: bool | None = None, greeting_index: int | None = None,
            user_icon: str | None = None,
            substitute: Callable[[str], str] | None = None,
            cache: ChatScan | None = None) -> SlotResult:
        """Build the lorebook slot for one request.

        ``messages``: the conversation so far, **oldest first**, as ``(role, text)`` pairs or
        ``{"role": ..., "content": ...}`` mappings (role ``system``, ``user`` or
        ``assistant``; the greeting is the character's first message), not including the
        reply being generated. System messages are not scanned and not counted; the number
        of the others is the turn index ``M`` of docs/slot-mode.md#slot-gates.
        ``turn_id``: identifies this turn for the probability roll (recommended:
        conversation id plus ``M``); the same id gives the same rolls in every pass, dry
        run, swipe and regeneration. ``state``: the value returned by the previous
        request of this chat (None for a new chat); it is never modified. ``dry_run``:
        the returned state equals the input. ``at_greeting``: whether the chat is still
        at the greeting (default: no assistant message besides the greeting);
        ``greeting_index``: the active greeting (0 = first message, k = k-th alternate),
        None if unknown. ``user_icon``: the active user icon (with
        ``user_icon_decorator``). ``substitute``: overrides the engine's macro hook for
        this request. ``cache``: the chat's :class:`~lorescan.match.cache.ChatScan` (pass the same
        one every turn so messages already scanned are not scanned again).
        Raises :class:`SettingsError` for malformed messages or state.
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
                        regex_budget=RegexBudget(self.limits.regex_time_per_scan, self.regex_timeout))
        runs = [_Run(e) for e in self.pool]

        # Gates 1-9 (docs/slot-mode.md#slot-gates): decided once for the turn.
        prematched: list[_Run] = []
        pending: list[_Run] = []
        for r in runs:
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
        activated: list[_Run] = []
        for pass_number in range(1, MAX_PASSES + 1):
            passes = pass_number
            matched = list(prematched) if pass_number == 1 else []
            chunks = len(view.chunks)
            # (at least depth 1, so the recursion chunks count even when every entry has depth
            # 0: a superset of candidates is safe, each window is checked on its own)
            candidates = view.candidates(max(self._max_depth, 1), chunks)
            allowed = None if candidates is None else set(candidates)
            windows: dict[tuple[float, int], Window] = {}     # one Window value per shape and pass
            still: list[_Run] = []
            for r in pending:
                e = r.e
                window = _entry_window(e, pass_number, chunks, windows)
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
        notes = self._explain_unmatched(pending, chat, scanned, cache, substitute)

        used = fit_budget(activated, self.budget, self._tokens.count)
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
        log = tuple(LogRecord(
            book=r.e.book_id, id=r.e.id, name=r.e.name, outcome=r.outcome or "not_matched",
            reason=r.reason, pass_number=r.pass_number, matched_by=r.matched_by,
            matched_key=r.matched_key, roll=r.roll, tokens=r.tokens, priority=r.e.priority,
            order=r.e.order, role=r.e.role, ignore_on_max_context=r.e.decorators.ignore_on_max_context,
            position=r.e.position, detail=r.detail) for r in runs)
        prompts = frozenset(r.e.decorators.disable_ui_prompt for r in inserted
                            if r.e.decorators.disable_ui_prompt)
        budget_note = RequestNote("budget_stored" if self.budget_book is not None else "budget_default",
                                  self.budget_reason)
        return SlotResult(regex_cutoffs=tuple(view.cut_off_report(view.cut_keys())),
                          messages=messages_out, log=log, state=new_state, budget=self.budget,
                          tokens_used=used, passes=passes, disabled_ui_prompts=prompts,
                          budget_book=self.budget_book, notes=(budget_note, *notes))

    def _explain_unmatched(self, pending: Sequence[_Run], chat: Sequence[tuple[str, str]],
                           scanned: Sequence[int], cache: ChatScan | None,
                           substitute: Callable[[str], str] | None) -> list[RequestNote]:
        """Request notes for the skipped system messages (those inside the deepest window,
        where they would have been scanned), and the log details of entries that did not
        match: depth 0 never reached by recursion text, or a primary key that occurs only in
        a system message inside the entry's window."""
        deepest = self._max_depth
        start = -1 if deepest >= len(scanned) else scanned[-deepest] if deepest > 0 else len(chat)
        system = [i for i in range(start + 1, len(chat)) if chat[i][0] == "system"]
        notes = [RequestNote("system_message_skipped", f"message {i} is a system message: not scanned and "
                             "not counted (neither in the turn index nor toward any scan depth)", i)
                 for i in system]
        system_view: ScanView | None = None
        in_system: set[int] = set()
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
            if not system or not r.reason.startswith("no primary key matched"):
                continue
            # The system messages newer than the oldest message the entry's window scans.
            oldest = scanned[-e.scan_depth] if e.scan_depth < len(scanned) else -1
            inside = len(system) - bisect.bisect_right(system, oldest)
            if not inside:
                continue
            if system_view is None:
                system_view = ScanView(self.compiled, [t for role, t in reversed(chat) if role == "system"],
                                       cache=cache, substitute=substitute, joined=False,
                                       regex_timeout=self.regex_timeout)
                found_in = system_view.candidates(len(system), 0)
                in_system = set(range(len(self.pool))) if found_in is None else set(found_in)
            plan = self._plans[e.pool_index]
            if not plan.uses_matcher or e.pool_index not in in_system:
                continue
            found = system_view.match_entry(e.pool_index, Window(inside)).primary
            key = next((ref.text for ref in plan.primary if ref.primary and ref.slot == found), None)
            if found is not None and key is not None:
                r.detail = "system_message_only"
                r.reason = (f"no primary key matched; {key!r} occurs only in a system message, and "
                            "system messages are not scanned")
        return notes

