"""Why each entry did or did not fire (docs/sillytavern-mode.md#st-inputs), computed at the end of a
turn from data the turn kept: its notes, the windows entries matched in and the texts of those
windows, never the match views or the caller's cache."""
from __future__ import annotations

import threading
from typing import cast

from ..js.regex import RegexTimeout, tool_regex
from ..js.text import js_trim
from ..match.spans import KeySpan, WindowHaystack
from ..match.view import Window, WindowTexts
from .activate import static_gate
from .result import Diagnostic, DiagnosticOutcome, EntryId, Reason
from .tables import EntryInfo
from .turn import Turn, detail_text

__all__ = ["TurnExplanation", "explain_turn", "regex_cutoffs"]


class TurnExplanation:
    """What a finished turn keeps for its explanation; calling it explains every entry.

    Made by :func:`explain_turn`. It holds the engine's tables, the turn's notes and the
    texts of the windows where entries fired, and none of the turn's views or caches. The
    notes become :class:`Diagnostic` records when first asked for, once (under a lock, so
    every caller sees the same records).
    """

    __slots__ = ("_turn", "_noted", "_texts", "_lock")

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self._noted: dict[str, Diagnostic] | None = None
        self._texts: list[WindowTexts] | None = None
        self._lock = threading.Lock()

    def _diagnostics_of_notes(self) -> dict[str, Diagnostic]:
        noted = self._noted
        if noted is None:
            with self._lock:
                noted = self._noted
                if noted is None:
                    noted = self._noted = {k: Diagnostic(n[0].eid, cast(DiagnosticOutcome, n[1]), cast(Reason, n[2]),
                                                      detail_text(n[3]), n[4], n[5])
                                           for k, n in self._turn.notes.items()}
        return noted

    def decisions(self) -> dict[EntryId, Diagnostic]:
        """The notes of the entries a pass decided about, by entry."""
        return {d.entry: d for d in self._diagnostics_of_notes().values()}

    def __call__(self) -> dict[EntryId, Diagnostic]:
        """Returns: every entry's diagnostic, in global order."""
        turn = self._turn
        tables = turn.tables
        noted = self._diagnostics_of_notes()
        if self._texts is None:
            self._texts = [build() for build in turn.texts_of]
        texts_of = self._texts
        haystacks: dict[tuple[int, Window], WindowHaystack] = {}    # entries share windows: join each once
        out: dict[EntryId, Diagnostic] = {}
        for info in tables.entries:
            d = noted.get(info.world_uid)
            if d is None:
                static = static_gate(turn, info)
                if static is not None:
                    d = Diagnostic(info.eid, "not_activated", cast(Reason, static[0]), static[1])
                elif not info.has_keys:
                    d = Diagnostic(info.eid, "not_activated", "no_keys", "the entry has no primary keys")
                else:
                    d = Diagnostic(info.eid, "not_activated", "no_key_match", "no primary key matched")
            elif d.outcome == "activated" and info.world_uid not in turn.activated:
                d = Diagnostic(info.eid, "not_activated", "not_reached", "matched, but the scan ended first",
                               d.loop, d.key)
            if d.key is not None and d.outcome == "activated" and d.span is None:
                window = turn.last_windows.get(info.world_uid)
                if window is not None:
                    hay = haystacks.get((info.book, window))
                    if hay is None:
                        hay = haystacks[(info.book, window)] = WindowHaystack(texts_of[info.book].parts(window))
                    span = _locate(turn, hay, info, d.key)
                    if span is not None:     # records are frozen: the located one replaces the note's
                        d = noted[info.world_uid] = Diagnostic(d.entry, d.outcome, d.reason, d.detail, d.loop,
                                                               d.key, span.label, span)
            out[info.eid] = d
        return out


def explain_turn(turn: Turn) -> TurnExplanation:
    """End the turn: keep only what explanations need.

    Args:
        turn: the finished turn; its views are replaced by deferred snapshots of their
            texts (built when an explanation first needs them), and dropped.

    Returns:
        The explainer a result calls when its diagnostics are first read.
    """
    turn.texts_of = [view.snapshot_later() for view in turn.views]
    turn.views = []
    return TurnExplanation(turn)


def _locate(turn: Turn, hay: WindowHaystack, info: EntryInfo, raw: str) -> KeySpan | None:
    """Where key ``raw`` of an entry first matched in the window of ``hay``, found again with
    the rules the engine applied (macros substituted, JS trim, case and whole words, regex);
    None when it cannot be shown (a fuzzy match, a regex cut off)."""
    tables = turn.tables
    e = info.entry
    options = tables.match_options
    cs = e.case_sensitive if e.case_sensitive is not None else options.case_sensitive
    ww = e.match_whole_words if e.match_whole_words is not None else options.match_whole_words
    key = js_trim(turn.substitute(raw) if turn.substitute is not None and "{{" in raw else raw)
    try:
        span = hay.locate(key, regex=tool_regex(key),
                          case_sensitive=cs, whole_words=ww, options=options, timeout=tables.regex_timeout)
    except RegexTimeout:
        return None
    if span is None or span.kind != "recursion" or span.index > len(turn.chunk_parts):
        return span
    offset = 0
    for key_of, content in turn.chunk_parts[span.index - 1]:     # the chunk: contents joined by "\n"
        if span.start <= offset + len(content):
            return span.with_source(key_of)
        offset += len(content) + 1
    return span


def regex_cutoffs(turn: Turn) -> tuple[str, ...]:
    """Every regex key cut off in this turn, one report line each (all books); call before :func:`explain_turn`."""
    if not turn.regex_budget.cut:
        return ()
    lines: list[str] = []
    for view in turn.views:
        lines.extend(view.cut_off_report(list(view.cut_keys())))
    return tuple(dict.fromkeys(lines))
