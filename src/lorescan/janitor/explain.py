"""Why each entry of a JanitorAI book did or did not apply in one run (docs/janitor-mode.md#janitor-explain).

Built from the run's decisions (the engine notes every evaluation it makes, in order) and
its normalised window: which keyword hit and where (the window message and the offset in
its normalised text), or what stopped the entry (no keyword, its tag not emitted or only
by a later entry, a count bound, a name block, a text gate and its term, a tag gate, the
roll, the APPLY_LIMIT cut, a priority with no bucket), and for each shift of an applied
entry why it did or did not add its text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..js.coerce import js_string
from .result import Decision, JanitorResult
from .terms import NEVER

__all__ = ["EntryExplanation", "ShiftExplanation", "explain_entries", "explain_text"]

_GATES = {"gate_any": "requireAny/andAny/requires.any: none of", "gate_all": "requireAll/andAll/requires.all: missing",
          "gate_none": "requireNone/notAny/requires.none/block: present", "gate_not_all": "notAll: all present",
          "tags_any": "andAnyTags: none active of", "tags_all": "andAllTags: not active",
          "tags_none": "notAnyTags: active", "tags_not_all": "notAllTags: all active"}
_STAGES = {"direct": "the direct pass", "trigger": "the trigger pass", "post_shift": "the post-shift pass",
           "shift": "its shift", "select": "selection"}


@dataclass(frozen=True, slots=True)
class ShiftExplanation:
    shift: int
    applied: bool
    reason: str                       # "applied", "no_keyword", or the stopping gate
    text: str


@dataclass(frozen=True, slots=True)
class EntryExplanation:
    """One entry: ``status`` is ``"applied"``, ``"post_shift"`` (applied by the post-shift
    pass), ``"cut"`` (accepted, then cut by APPLY_LIMIT), ``"stopped"`` (a gate, the roll or
    the bucket) or ``"silent"`` (never reached: no keyword, no tag); ``reason`` is the
    decision's code; ``text`` the readable line."""
    index: int
    status: str
    stage: str | None
    reason: str
    text: str
    shifts: tuple[ShiftExplanation, ...] = field(default=())


def _term(result: JanitorResult, tid: int) -> str:
    term = result.engine.terms.terms[tid]
    note = " (can never match: the script only lower-cases and trims keywords)" if term.kind == NEVER else ""
    return f'"{term.text}"{note}'


def _where(result: JanitorResult, tid: int) -> str:
    """Where term ``tid`` occurs: window message and offset in its normalised text."""
    parts = result.haystack_parts
    hay = " " + " ".join(p for p in parts if p) + " "
    hits = result.engine.scanner.occurrences(hay, [tid]).get(tid)
    if not hits:
        return "(a lone * matches every window)"
    start = hits[0] + 1                     # past the space a script key starts with
    if result.profile != "script":
        start -= 1
    pos = 1
    for k, part in enumerate(parts):
        if not part:
            continue
        if start < pos + len(part) + 1:
            msg = (f"last_messages[{result.window_start + k}]" if result.window_start >= 0
                   else "last_message")
            offset = max(0, start - pos)
            spans = " (continues into the next message)" if start - pos + len(result.engine.terms.terms[tid].text) > len(part) else ""
            return f"in {msg} at {offset} of its normalised text{spans}"
        pos += len(part) + 1
    return "in the window"


def _detail(result: JanitorResult, d: Decision) -> str:
    det = d.detail
    if d.outcome in _GATES:
        items = det.get("terms") or det.get("tags") or ()
        shown = ", ".join(_term(result, t) for t in items) if "terms" in det else ", ".join(f'"{t}"' for t in items)
        return f"{_GATES[d.outcome]} {shown}"
    if d.outcome == "count":
        lo, hi, n = (js_string(float(det[k])) for k in ("min", "max", "count"))
        return f"message count {n} outside minMessages..maxMessages {lo}..{hi}"
    if d.outcome == "name_block":
        return f'nameBlock "{det["name"]}" blocks the character'
    if d.outcome == "roll":
        return f"roll {det['roll']} > probability {det['probability']}"
    if d.outcome == "apply_limit":
        return f"cut by APPLY_LIMIT ({det['limit']})"
    if d.outcome == "bucket":
        return f"priority {det['priority']} names no bucket: the script throws TypeError here"
    return d.outcome


def _hit_text(result: JanitorResult, entry: Any, det: Any) -> str:
    pos = det.get("keyword") if det else None
    if pos is None:
        return ""
    if pos < 0:
        return "always-on"
    tid = entry.keywords[pos]
    return f"keyword {_term(result, tid)} {_where(result, tid)}"


def _shifts(result: JanitorResult, entry: Any, decisions: list[Decision]) -> tuple[ShiftExplanation, ...]:
    out = []
    by_shift = {d.shift: d for d in decisions if d.stage == "shift"}
    for sh in entry.shifts:
        d = by_shift.get(sh.index)
        if d is None or d.outcome == "no_keyword":
            out.append(ShiftExplanation(sh.index, False, "no_keyword",
                                        f"shift[{sh.index}] not activated: no keyword matched"))
        elif d.outcome == "applied":
            out.append(ShiftExplanation(sh.index, True, "applied",
                                        f"shift[{sh.index}] applied: {_hit_text(result, sh, d.detail)}"))
        else:
            out.append(ShiftExplanation(sh.index, False, d.outcome,
                                        f"shift[{sh.index}] activated ({_hit_text(result, sh, d.detail)}, "
                                        f"its triggers emitted) but filtered: {_detail(result, d)}"))
    return tuple(out)


def _explain_one(result: JanitorResult, i: int, decisions: list[Decision]) -> EntryExplanation:
    entry = result.engine.entries[i]
    mine = [d for d in decisions if d.entry == i and d.shift is None]
    head = f"entry[{i}]"
    accepted = next((d for d in mine if d.outcome == "accepted"), None)
    stopped = next((d for d in mine if d.outcome not in ("accepted", "applied")), None)
    post = next((d for d in mine if d.stage == "post_shift" and d.outcome == "applied"), None)
    if post is not None:
        return EntryExplanation(i, "post_shift", "post_shift", "applied",
                                f'{head} applied by the post-shift pass (tag "{entry.tag}" emitted by a shift)')
    if accepted is not None:
        how = (_hit_text(result, entry, accepted.detail) if accepted.stage == "direct"
               else f'tag "{entry.tag}" emitted')
        where = f"{_STAGES[accepted.stage]}, p={entry.p_text}"
        if stopped is not None and stopped.stage == "direct" and accepted.stage == "trigger":
            how += f" (stopped earlier in the direct pass: {_detail(result, stopped)})"
        cut = next((d for d in mine if d.outcome == "apply_limit"), None)
        if cut is not None:
            return EntryExplanation(i, "cut", accepted.stage, "apply_limit",
                                    f"{head} accepted in {where} ({how}), then {_detail(result, cut)}")
        applied = i in (result.trace.get("selected") or ())
        if applied:
            return EntryExplanation(i, "applied", accepted.stage, "applied", f"{head} applied ({where}): {how}",
                                    _shifts(result, entry, [d for d in decisions if d.entry == i]))
        return EntryExplanation(i, "stopped", accepted.stage, "error",
                                f"{head} accepted in {where} ({how}); the run stopped before its text")
    if stopped is not None:
        how = _hit_text(result, entry, stopped.detail) if stopped.stage == "direct" else f'tag "{entry.tag}" emitted'
        return EntryExplanation(i, "stopped", stopped.stage, stopped.outcome,
                                f"{head} reached in {_STAGES[stopped.stage]} ({how}) but stopped: "
                                f"{_detail(result, stopped)}")
    tags = set(result.trace.get("tags") or ())
    if entry.tag is not None and entry.tag in tags:
        return EntryExplanation(i, "silent", None, "later_tag",
                                f'{head} silent: its tag "{entry.tag}" was emitted only by a later entry '
                                "(the trigger pass runs once, front to back)")
    if entry.keywords:
        kws = ", ".join(_term(result, t) for t in entry.keywords)
        tag = f'; its tag "{entry.tag}" was not emitted' if entry.tag is not None else ""
        return EntryExplanation(i, "silent", None, "no_keyword", f"{head} silent: no keyword matched ({kws}){tag}")
    if entry.tag is not None:
        return EntryExplanation(i, "silent", None, "no_tag", f'{head} silent: its tag "{entry.tag}" was not emitted')
    if entry.has_keywords:
        return EntryExplanation(i, "silent", None, "no_keyword", f"{head} silent: no keyword matched")
    return EntryExplanation(i, "silent", None, "count_gated",
                            f"{head} silent: no keywords, and minMessages/maxMessages make it not always-on")


def explain_entries(result: JanitorResult, index: int | None = None) -> list[EntryExplanation]:
    """One :class:`EntryExplanation` per entry (or only for entry ``index``)."""
    if result.engine is None:
        raise ValueError("this result carries no engine to explain it with")
    n = len(result.engine.entries)
    indices = range(n) if index is None else [index]
    if index is not None and not 0 <= index < n:
        raise IndexError(f"entry {index} is not in a book of {n} entries")
    decisions = list(result.decisions)
    return [_explain_one(result, i, decisions) for i in indices]


def explain_text(result: JanitorResult, index: int | None = None) -> str:
    """The explanation as text: one line per entry, then one indented line per shift."""
    lines = []
    if result.error is not None:
        lines.append(f"the script threw {result.error.name}: {result.error.message} (texts left as they were)")
    for ex in explain_entries(result, index):
        lines.append(ex.text)
        lines.extend("  " + s.text for s in ex.shifts)
    return "\n".join(lines)
