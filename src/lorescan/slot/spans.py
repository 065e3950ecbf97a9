"""Where each key activation of a slot-mode request matched (docs/slot-mode.md#slot-spans).

For explanations only: :meth:`SlotEngine.run` never builds a span. :func:`with_spans` rebuilds,
from the request's messages and its log, the texts each entry saw in the pass it matched
(its newest ``scan_depth`` user and assistant messages, trimmed, and the recursion texts fed by
earlier passes, one per activated entry) and finds the matched key there with
:mod:`lorescan.match.spans`, under the rules the matcher applied (macros substituted, JS trim,
the entry's case and whole-words flags, ``/pattern/flags`` keys as JS regexes). Slot mode scans
each text on its own, so a slot span never runs across two messages.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..js.regex import RegexTimeout, tool_regex
from ..js.text import js_trim
from ..macros import expand_content
from ..match.spans import KeySpan, locate_key
from ..match.view import MAX_SCAN_DEPTH, SOURCE_NAMES, Window, WindowPart, WindowTexts
from .engine import SlotEngine
from .result import LogRecord, RoleMessage, SlotResult, read_messages

__all__ = ["with_spans", "message_number"]

_ACTIVATED = frozenset({"inserted", "dropped_budget"})


def message_number(messages: Sequence[tuple[str, str]], index: int) -> int | None:
    """The place in the request's ``messages`` (oldest = 0, system messages counted) of the
    scanned message ``index`` of a span (newest user or assistant message = 0), or None."""
    scanned = [i for i, (role, _) in enumerate(messages) if role != "system"]
    return scanned[len(scanned) - 1 - index] if 0 <= index < len(scanned) else None


def with_spans(engine: SlotEngine, messages: Sequence[RoleMessage], result: SlotResult, *,
               substitute: Callable[[str], str] | None = None) -> SlotResult:
    """``result`` with :attr:`LogRecord.span` set on every record activated by a key.

    Args:
        engine, messages, substitute: the engine, messages and macro hook of the
            :meth:`SlotEngine.run` call that made ``result``.
        result: that call's answer.

    Returns:
        A new :class:`SlotResult` (records without a key match, a fuzzy or semantic one, or a
        regex cut off by its time limit keep ``span=None``).
    """
    chat = read_messages(messages)
    substitute = substitute if substitute is not None else engine.substitute
    segments = _segments([text for role, text in reversed(chat) if role != "system"])
    pool = engine.pool
    # the recursion texts in the order the passes fed them: (pass, pool order), one per entry
    fed = sorted((rec.pass_number, i) for i, rec in enumerate(result.log)
                 if rec.outcome in _ACTIVATED and rec.pass_number is not None and pool[i].feeds_recursion
                 and pool[i].content)
    chunks: list[tuple[int, str, str]] = []         # (pass fed in, text, "<book>.<id>")
    for pass_number, i in fed:
        e = pool[i]
        text = (expand_content(substitute, e.content, engine.limits, source=e.book_id, entry=e.id)
                if substitute is not None else e.content)
        if text:
            chunks.append((pass_number, text, f"{e.book_id}.{e.id}"))
    log: list[LogRecord] = list(result.log)
    for i, rec in enumerate(log):
        if rec.matched_by != "key" or rec.matched_key is None or rec.pass_number is None:
            continue
        e = pool[i]
        seen = [c for c in chunks if c[0] < rec.pass_number] if not e.decorators.no_recursive_search else []
        depth = e.scan_depth if e.scan_depth > 0 else 0
        texts = WindowTexts(tuple(segments), ("",) * len(SOURCE_NAMES), (), tuple(c[1] for c in seen))
        parts = texts.parts(Window(depth, 0, len(seen))) if depth else _chunk_parts(seen)
        span = _locate(engine, e, rec.matched_key, parts, substitute)
        if span is not None and span.kind == "recursion":
            span = span.with_source(seen[span.index - 1][2])
        if span is not None:
            log[i] = replace(rec, span=span)
    return replace(result, log=tuple(log))


def _segments(newest_first: Sequence[str]) -> list[str]:
    """The scanned message texts as the matcher sees them (trimmed; empty oldest ones dropped)."""
    msgs = list(newest_first[:MAX_SCAN_DEPTH])
    last = max((i for i, m in enumerate(msgs) if m), default=-1)
    return [js_trim(m) if m else "" for m in msgs[:last + 1]]


def _chunk_parts(seen: Sequence[tuple[int, str, str]]) -> list[WindowPart]:
    return [WindowPart("recursion", k + 1, f"recursion text {k + 1}", c[1]) for k, c in enumerate(seen)]


def _locate(engine: SlotEngine, e: Any, raw: str, parts: Sequence[WindowPart],
            substitute: Callable[[str], str] | None) -> KeySpan | None:
    key = js_trim(substitute(raw) if substitute is not None and "{{" in raw else raw)
    plan = engine._plans[e.pool_index]
    literal = any(ref.literal for ref in plan.primary if ref.text == raw)
    try:
        return locate_key(parts, key, regex=None if literal else tool_regex(key),
                          case_sensitive=e.case_sensitive, whole_words=e.whole_words,
                          options=engine.match_options, joined=False, timeout=engine.regex_timeout)
    except RegexTimeout:
        return None
