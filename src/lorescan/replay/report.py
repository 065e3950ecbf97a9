"""The HTML report of ``lorescan replay --report``: one self-contained file.

No network, no external script or font: the charts are inline SVG drawn here, the page
script and style are inline and pinned by a Content-Security-Policy that names their
hashes and allows nothing else (no fetch, no image, no other script). Every string that
comes from a book or a chat is untrusted: in markup it is HTML-escaped, in the page's JSON
data ``<``, ``>`` and ``&`` are escaped, and the script writes it with ``textContent``
only. The output depends on the replay alone (no clock, no random), so the same books,
chat and seed give the same bytes.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections import Counter
from typing import Callable, Iterable, Mapping, Sequence

from ..match.spans import KeySpan
from .report_page import SCRIPT as _SCRIPT, STYLE as _STYLE
from .single import ChatReplay, mean_stable_share

__all__ = ["render_report", "timeline_rows", "compare_turns", "MAX_TIMELINE_ROWS"]

MAX_TIMELINE_ROWS = 300        # entries drawn in the timeline (the most used ones); the rest are counted
TOP = 10                       # entries in the most-used and least-used tables
_LABEL_CHARS = 34

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _clean(text: str) -> str:
    """Text safe to put in UTF-8 markup: control characters and lone surrogates become U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def _esc(text: str) -> str:
    return html.escape(_clean(text), quote=True)


def _label(text: str, limit: int = _LABEL_CHARS) -> str:
    one = " ".join(_clean(text).split())
    return one if len(one) <= limit else one[:limit - 1] + "\u2026"


def _num(x: float) -> str:
    """Coordinates with at most two decimals and no trailing zeros (stable text)."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def timeline_rows(replay: ChatReplay) -> tuple[list[int], int]:
    """The entries the timeline draws, top to bottom, and how many more fired or were cut
    but are not drawn. Rows are the entries that fired or were cut on some turn; past
    :data:`MAX_TIMELINE_ROWS`, the most used ones are kept. They are ordered by the first
    turn they fired (or were cut) on, then by the engine's entry order."""
    used: Counter[int] = Counter()
    first: dict[int, int] = {}
    for t in replay.turns:
        for i in (*t.fired, *t.cut):
            used[i] += 1
            first.setdefault(i, t.number)
    keep = sorted(used, key=lambda i: (-used[i], first[i], i))[:MAX_TIMELINE_ROWS]
    return sorted(keep, key=lambda i: (first[i], i)), max(0, len(used) - MAX_TIMELINE_ROWS)


def _ticks(n: int, most: int = 12) -> list[int]:
    """Turn numbers to label on an axis of ``n`` turns (1-based): 1, then every step."""
    if n <= 0:
        return []
    step = 1
    for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000):
        step = s
        if n / s <= most:
            break
    else:
        step = math.ceil(n / most)
    return sorted({1, *range(step, n + 1, step)})


def _nice_max(v: float) -> tuple[float, float]:
    """An axis top at or above ``v`` and its tick step (1, 2 or 5 times a power of ten)."""
    if v <= 0:
        return 1.0, 1.0
    raw = v / 5
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            step = m * mag
            break
    return math.ceil(v / step) * step, step


# -- the two charts --------------------------------------------------------------------------
def _timeline_svg(replay: ChatReplay, rows: Sequence[int], hidden: int) -> str:
    n = len(replay.turns)
    cell_w = max(4.0, min(80.0, 760.0 / max(n, 1)))
    cell_h = 16
    left, top, bottom = 250, 46, 30
    width = left + cell_w * max(n, 1) + 20
    height = top + cell_h * max(len(rows), 1) + bottom
    pos = {e: r for r, e in enumerate(rows)}
    out = [f'<svg id="timeline" class="chart" xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" '
           f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" role="img" '
           f'data-turns="{n}" data-entries="{len(rows)}" aria-labelledby="timeline-title">',
           f'<title id="timeline-title">Activation timeline: {len(rows)} entries by {n} turns</title>']
    # columns: one clickable band per turn
    for t in replay.turns:
        x = left + cell_w * (t.number - 1)
        out.append(f'<rect class="col" data-turn="{t.number}" x="{_num(x)}" y="{top}" width="{_num(cell_w)}" '
                   f'height="{cell_h * max(len(rows), 1)}"/>')
    # row stripes and labels
    for r, e in enumerate(rows):
        y = top + cell_h * r
        info = replay.entries[e]
        if r % 2:
            out.append(f'<rect class="stripe" x="{left}" y="{y}" width="{_num(cell_w * max(n, 1))}" '
                       f'height="{cell_h}"/>')
        out.append(f'<text class="row-label" data-entry="{e}" x="{left - 8}" y="{y + cell_h - 4}" '
                   f'text-anchor="end"><title>{_esc(info.book)} #{_esc(info.id)}: {_esc(info.name)}</title>'
                   f'{_esc(_label(info.name))}</text>')
    # cells
    for t in replay.turns:
        x = left + cell_w * (t.number - 1) + 1
        for cls, ids in (("on", t.fired), ("cut", t.cut)):
            for e in ids:
                if e in pos:
                    out.append(f'<rect class="{cls}" x="{_num(x)}" y="{top + cell_h * pos[e] + 2}" '
                               f'width="{_num(max(cell_w - 2, 2))}" height="{cell_h - 4}"/>')
    # axes
    right = left + cell_w * max(n, 1)
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{_num(right)}" y2="{top}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + cell_h * max(len(rows), 1)}"/>')
    for k in _ticks(n):
        x = left + cell_w * (k - 0.5)
        out.append(f'<line class="tick" x1="{_num(x)}" y1="{top - 4}" x2="{_num(x)}" y2="{top}"/>')
        out.append(f'<text class="tick-label" x="{_num(x)}" y="{top - 8}" text-anchor="middle">{k}</text>')
    out.append(f'<text class="axis-label" x="{left}" y="14">turn \u2192</text>')
    out.append(f'<text class="axis-label" x="{left - 8}" y="{top - 8}" text-anchor="end">entry \u2193</text>')
    if not rows:
        out.append(f'<text class="empty" x="{left + 8}" y="{top + 12}">no entry fired on any turn</text>')
    foot = top + cell_h * max(len(rows), 1) + 20
    if hidden:
        out.append(f'<text class="note" x="{left}" y="{foot}">{hidden} more entries fired but are not drawn '
                   f'(the {len(rows)} most used are)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _budget_svg(replay: ChatReplay) -> str:
    turns = replay.turns
    n = len(turns)
    left, right_pad, top, bottom = 64, 20, 20, 44
    bar_w = max(3.0, min(120.0, 760.0 / max(n, 1)))
    plot_w = bar_w * max(n, 1)
    plot_h = 220
    width, height = left + plot_w + right_pad, top + plot_h + bottom
    top_v, step = _nice_max(max([t.tokens for t in turns] + [t.budget for t in turns] + [1]))

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / top_v

    out = [f'<svg id="budget" class="chart" xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" '
           f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" role="img" data-turns="{n}" '
           f'aria-labelledby="budget-title">',
           f'<title id="budget-title">Tokens of the fired entries against the budget, per turn</title>']
    v = 0.0
    while v <= top_v + 1e-9:
        out.append(f'<line class="grid" x1="{left}" y1="{_num(y(v))}" x2="{_num(left + plot_w)}" y2="{_num(y(v))}"/>')
        out.append(f'<text class="tick-label" x="{left - 6}" y="{_num(y(v) + 4)}" text-anchor="end">{_num(v)}</text>')
        v += step
    for t in turns:
        x = left + bar_w * (t.number - 1)
        h = plot_h * t.tokens / top_v
        over = " over" if t.tokens > t.budget else ""
        out.append(f'<rect class="bar{over}" data-turn="{t.number}" x="{_num(x + bar_w * 0.15)}" '
                   f'y="{_num(top + plot_h - h)}" width="{_num(bar_w * 0.7)}" height="{_num(h)}">'
                   f'<title>turn {t.number}: {t.tokens} of {t.budget} tokens</title></rect>')
    if turns:
        pts = []
        for t in turns:
            x0 = left + bar_w * (t.number - 1)
            pts += [f"{_num(x0)},{_num(y(t.budget))}", f"{_num(x0 + bar_w)},{_num(y(t.budget))}"]
        out.append(f'<polyline class="budget-line" points="{" ".join(pts)}"/>')
    else:
        out.append(f'<text class="empty" x="{left + 8}" y="{top + 20}">no turns</text>')
    out.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{_num(left + plot_w)}" y2="{top + plot_h}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>')
    for k in _ticks(n):
        x = left + bar_w * (k - 0.5)
        out.append(f'<text class="tick-label" x="{_num(x)}" y="{top + plot_h + 16}" text-anchor="middle">{k}</text>')
    out.append(f'<text class="axis-label" x="{_num(left + plot_w / 2)}" y="{height - 6}" '
               f'text-anchor="middle">turn</text>')
    out.append(f'<text class="axis-label" x="14" y="{_num(top + plot_h / 2)}" text-anchor="middle" '
               f'transform="rotate(-90 14 {_num(top + plot_h / 2)})">tokens</text>')
    out.append("</svg>")
    return "\n".join(out)


# -- tables ----------------------------------------------------------------------------------
def _entry_cells(replay: ChatReplay, e: int) -> str:
    info = replay.entries[e]
    return (f'<td class="entry-link" data-entry="{e}">{_esc(info.name)}</td><td>{_esc(info.book)}</td>'
            f'<td class="num">{_esc(info.id)}</td>')


def _head(*names: str) -> str:
    """A table head whose columns sort on a click (numbers as numbers)."""
    return "<thead><tr>" + "".join(f'<th class="sortable">{_esc(n)}</th>' for n in names) + "</tr></thead>"


def _usage_table(replay: ChatReplay, ids: Iterable[int], used: Counter[int], cut: Counter[int],
                 table_id: str) -> str:
    body = "".join(f'<tr>{_entry_cells(replay, e)}<td class="num">{used[e]}</td><td class="num">{cut[e]}</td></tr>'
                   for e in ids)
    return (f'<table id="{table_id}">{_head("entry", "book", "id", "turns fired", "turns cut")}'
            f'<tbody>{body}</tbody></table>')


_TIMED = {"sticky": "sticky", "cooldown": "cooldown", "delay": "delay"}   # reason -> lane state


def _timed_svg(replay: ChatReplay) -> str:
    """The timed-effect lane: per entry with a timed effect, the turns it fired by a running
    sticky effect, was held back by its cooldown, or waited for its delay."""
    states: dict[int, dict[int, str]] = {}
    for t in replay.turns:
        for x in t.explained:
            state = _TIMED.get(x.reason)
            if state is not None:
                states.setdefault(x.entry, {})[t.number] = state
    rows = sorted(states, key=lambda e: (min(states[e]), e))
    n = len(replay.turns)
    cell_w = max(4.0, min(80.0, 760.0 / max(n, 1)))
    cell_h, left, top = 16, 250, 24
    width = left + cell_w * max(n, 1) + 20 if rows else left + 360     # room for the note when empty
    height = top + cell_h * max(len(rows), 1) + 10
    out = [f'<svg id="timed" class="chart" xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" '
           f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" role="img" data-entries="{len(rows)}" '
           'aria-labelledby="timed-title">',
           f'<title id="timed-title">Timed effects: {len(rows)} entries by {n} turns</title>']
    if not rows:
        out.append(f'<text class="empty" x="{left + 8}" y="{top + 12}">no sticky, cooldown or delay on any turn</text>')
    else:
        for t in replay.turns:
            px = left + cell_w * (t.number - 1)
            out.append(f'<rect class="col" data-turn="{t.number}" x="{_num(px)}" y="{top}" width="{_num(cell_w)}" '
                       f'height="{cell_h * len(rows)}"/>')
    for r, e in enumerate(rows):
        y = top + cell_h * r
        info = replay.entries[e]
        out.append(f'<text class="row-label" data-entry="{e}" x="{left - 8}" y="{y + cell_h - 4}" '
                   f'text-anchor="end"><title>{_esc(info.book)} #{_esc(info.id)}: {_esc(info.name)}</title>'
                   f'{_esc(_label(info.name))}</text>')
        for number, state in sorted(states[e].items()):
            px = left + cell_w * (number - 1) + 1
            out.append(f'<rect class="{state}" data-state-turn="{number}" x="{_num(px)}" y="{y + 2}" '
                       f'width="{_num(max(cell_w - 2, 2))}" height="{cell_h - 4}"/>')
    out.append("</svg>")
    return "\n".join(out)


def compare_turns(replay: ChatReplay, other: ChatReplay,
                  to_base: Mapping[tuple[str, str], tuple[str, str]] | None = None) -> list[dict]:
    """The turns where two versions of the books fire differently, for the report's compare view.

    Args:
        replay, other: the same chat replayed against each version (same turns).
        to_base: ``other``'s ``(book, id)`` -> ``replay``'s, for entries whose identity
            changed (:func:`lorescan.replay.pairing.pair_versions`); others keep their own.

    Returns:
        One record per differing turn: ``turn``, ``only_base`` (entry indexes of ``replay``),
        ``only_compare`` (names of ``other``'s entries) and both token counts.

    Raises:
        ValueError: the replays have different turns.
    """
    if [t.messages for t in replay.turns] != [t.messages for t in other.turns]:
        raise ValueError("the two replays are not of the same chat")
    to_base = to_base or {}
    index = {(e.book, e.id): i for i, e in enumerate(replay.entries)}
    out = []
    for t, u in zip(replay.turns, other.turns):
        base = {(replay.entries[i].book, replay.entries[i].id) for i in t.fired}
        mine: dict[tuple[str, str], str] = {}
        for i in u.fired:
            e = other.entries[i]
            mine[to_base.get((e.book, e.id), (e.book, e.id))] = e.name
        if base == set(mine):
            continue
        out.append({"turn": t.number, "only_base": sorted(index[k] for k in base - set(mine)),
                    "only_compare": sorted(name for k, name in mine.items() if k not in base),
                    "tokens": (t.tokens, u.tokens)})
    return out


def _compare_section(replay: ChatReplay, other: ChatReplay, differ: list[dict]) -> list[str]:
    rows = []
    for d in differ:
        base = ", ".join(replay.entries[e].name for e in d["only_base"])
        rows.append(f'<tr data-turn="{d["turn"]}"><td class="num">{d["turn"]}</td><td>{_esc(base)}</td>'
                    f'<td>{_esc(", ".join(d["only_compare"]))}</td><td class="num">{d["tokens"][0]}</td>'
                    f'<td class="num">{d["tokens"][1]}</td></tr>')
    head = _head("turn", "fired only in base", "fired only in compare", "tokens (base)", "tokens (compare)")
    return [
        '<h2 id="compare">Compare with another version</h2>',
        f'<p class="meta" id="compare-summary">Base: {_esc(", ".join(replay.books))}; compare: '
        f'{_esc(", ".join(other.books))}. {len(differ)} of {len(replay.turns)} turns fire differently; click one '
        'to explain it (base version).</p>',
        f'<div class="scroll"><table id="compare-turns">{head}<tbody>{"".join(rows)}</tbody></table></div>',
    ]


# -- the page --------------------------------------------------------------------------------
def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _json_for_html(obj: object) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _span_place(span: KeySpan, name: Callable[[str, int, str], str]) -> str:
    """Which text a match is in, and the case, in words (the report's matched-text column);
    ``name``: :meth:`ChatReplay.text_namer` (docs/sillytavern-mode.md#cli-turns)."""
    words = name(span.kind, span.index, span.label)
    if span.across:
        assert span.end_kind is not None and span.end_index is not None and span.end_label is not None
        words += f" into {name(span.end_kind, span.end_index, span.end_label)}"
    if span.kind == "recursion" and span.source_entry:
        words += f", the content of {span.source_entry}"
    if span.inside_word is not None:
        words += f"; inside the longer word \u2018{span.inside_word}\u2019"
    return words


def _page_data(replay: ChatReplay) -> tuple[dict, int]:
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        text = _clean(text)
        if text not in strings:
            strings[text] = len(strings)
        return strings[text]

    outcomes = ["fired", "cut", "not"]
    code = {o: i for i, o in enumerate(outcomes)}
    # Most entries say the same thing on most turns ("no primary key occurs ..."): each
    # entry's most frequent row is its default, and a turn lists only the rows that differ.
    spans: dict[tuple, int] = {}

    def span_ref(span: KeySpan | None, name: Callable[[str, int, str], str]) -> int:
        """-1, or the index in ``data["spans"]`` of [before, matched, after, cases, where]."""
        if span is None:
            return -1
        before, matched, after = span.shown_parts()
        value = (s(before), s(matched), s(after), tuple(span.cases), s(_span_place(span, name)))
        return spans.setdefault(value, len(spans))

    seen: list[Counter[tuple[int, int, int, int]]] = [Counter() for _ in replay.entries]
    rows_of = []
    for t in replay.turns:
        name = replay.text_namer(t)
        rows = [(x.entry, (code[x.outcome], s(x.reason), s(x.detail), span_ref(x.span, name))) for x in t.explained]
        for e, row in rows:
            seen[e][row] += 1
        rows_of.append(rows)
    none = (code["not"], s(""), s(""), -1)
    defaults = [min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] if c else none for c in seen]
    turns = []
    for t, rows in zip(replay.turns, rows_of):
        turns.append({"n": t.number, "messages": t.messages, "speaker": _clean(t.speaker), "last": _clean(t.last_text),
                      "fired": len(t.fired), "cut": len(t.cut), "tokens": t.tokens, "budget": t.budget,
                      "rows": [[e, *row] for e, row in rows if row != defaults[e]]})
    # the turn shown first: the one where the most entries fired (the earliest of those)
    initial = max(replay.turns, key=lambda t: (len(t.fired), -t.number)).number if replay.turns else 0
    data = {"entries": [[_clean(e.book), _clean(e.id), _clean(e.name)] for e in replay.entries],
            "outcomes": outcomes, "strings": list(strings), "defaults": [list(d) for d in defaults],
            "spans": [[b, m, a, list(cases), w] for b, m, a, cases, w in spans],
            "turns": turns, "initial": initial}
    if replay.mode == "janitor":          # the script has no budget: APPLY_LIMIT cuts
        data["cut_by"] = "APPLY_LIMIT"
    return data, initial


def _stability_section(replay: ChatReplay) -> list[str]:
    """The share of the placement text unchanged from the previous turn, per turn, without and
    with cache-stable placement (docs/improved-profile.md#cache-stable); nothing in janitor mode."""
    means = mean_stable_share(replay)
    if means is None:
        return []
    rows = "".join(f'<tr><td class="num">{t.number}</td><td class="num">{t.stable_share[0]:.3f}</td>'
                   f'<td class="num">{t.stable_share[1]:.3f}</td></tr>'
                   for t in replay.turns if t.stable_share is not None)
    return ['<h2 id="cache-h">Prompt-cache stability</h2>',
            f'<p class="legend" id="cache-summary">The share of the placement text (leading characters, whole '
            f'entries) unchanged from the previous turn: {means[0]:.3f} on average without stable placement, '
            f'{means[1]:.3f} with it.</p>',
            f'<div class="scroll"><table id="cache-stability">{_head("turn", "without", "with")}'
            f"<tbody>{rows}</tbody></table></div>"]


def render_report(replay: ChatReplay, *, version: str = "", compare: ChatReplay | None = None,
                  to_base: Mapping[tuple[str, str], tuple[str, str]] | None = None) -> str:
    """The report of one replayed chat as one HTML document (a str; write it as UTF-8).

    Args:
        replay: the replay to show.
        version: lorescan's version, named in the page.
        compare: the same chat replayed against another version of the books: the page
            gains a compare view (see :func:`compare_turns`; ``to_base`` as there).
    """
    rows, hidden = timeline_rows(replay)
    used: Counter[int] = Counter()
    cut: Counter[int] = Counter()
    for t in replay.turns:
        used.update(t.fired)
        cut.update(t.cut)
    fired_ids = [e for e in range(len(replay.entries)) if used[e]]
    most = sorted(fired_ids, key=lambda e: (-used[e], e))[:TOP]
    least = sorted(fired_ids, key=lambda e: (used[e], e))[:TOP]
    never = [e for e in range(len(replay.entries)) if not used[e]]
    data, initial = _page_data(replay)
    n = len(replay.turns)
    total_tokens = sum(t.tokens for t in replay.turns)
    over = sum(1 for t in replay.turns if t.tokens > t.budget)
    options = "".join(
        f'<option value="{t.number}"{" selected" if t.number == initial else ""}>turn {t.number} '
        f'({t.messages} messages, {len(t.fired)} fired)</option>' for t in replay.turns)
    never_items = "".join(
        f'<tr>{_entry_cells(replay, e)}<td class="num">{cut[e]}</td></tr>' for e in never)
    by_name = sorted(range(len(replay.entries)), key=lambda e: (_label(replay.entries[e].name, 10_000).casefold(), e))
    first = most[0] if most else (by_name[0] if by_name else -1)
    entry_options = "".join(
        f'<option value="{e}"{" selected" if e == first else ""}>{_esc(_label(replay.entries[e].name, 60))} '
        f'({_esc(replay.entries[e].book)} #{_esc(replay.entries[e].id)})</option>' for e in by_name)
    compared = [] if compare is None else _compare_section(replay, compare, compare_turns(replay, compare, to_base))
    csp = (f"default-src 'none'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
           "img-src 'none'; connect-src 'none'; font-src 'none'; form-action 'none'; base-uri 'none'")
    books = ", ".join(replay.books)
    mode = {"sillytavern": "SillyTavern", "janitor": "JanitorAI script"}.get(replay.mode, "lorebook slot")
    janitor = replay.mode == "janitor"
    cut_by = "APPLY_LIMIT" if janitor else "the budget"
    lore = "" if janitor else f"{total_tokens} tokens of lore over all turns; {over} turns over the budget."
    budget = [] if janitor else [
        '<h2 id="budget-h">Tokens against the budget</h2>',
        '<p class="legend">Tokens of the fired entries\u2019 contents per turn.<span class="sw bar"></span>tokens'
        '<span class="sw line"></span>budget</p>',
        f'<div class="scroll">{_budget_svg(replay)}</div>',
        '<h2 id="timed-h">Timed effects</h2>',
        '<p class="legend">Entries with a sticky, cooldown or delay decision on some turn.<span class="sw sticky">'
        '</span>fired by a running sticky effect<span class="sw cooldown"></span>held back by its cooldown'
        '<span class="sw delay"></span>waiting for its delay</p>',
        f'<div class="scroll">{_timed_svg(replay)}</div>']
    cache = _stability_section(replay)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>lorescan replay: {_esc(replay.chat)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Replay of {_esc(replay.chat)}</h1>",
        f'<p class="meta">Books: {_esc(books)} ({len(replay.entries)} entries). Mode: {mode}. Seed: {replay.seed}. '
        f"{n} turns; {len(fired_ids)} entries fired at least once, {len(never)} never; "
        f"{lore}"
        f'{" Made by lorescan " + _esc(version) + "." if version else ""}</p>',
        '<h2 id="timeline-h">Activation timeline</h2>',
        f'<p class="legend">Entries that fired (or were cut by {cut_by}) on some turn, in the order they first '
        f'did; click a turn to explain it.<span class="sw on"></span>fired<span class="sw cut"></span>cut by '
        f'{cut_by}</p>',
        f'<div class="scroll" id="timeline-box">{_timeline_svg(replay, rows, hidden)}</div>',
        *budget,
        *cache,
        '<p><label for="search">Search the tables: </label><input id="search" type="search" '
        'placeholder="entry, book, reason or text"></p>',
        *compared,
        '<h2>Entries by use</h2><div class="cols">',
        f'<div><h3>Most used</h3>{_usage_table(replay, most, used, cut, "most-used")}</div>',
        f'<div><h3>Least used (of those that fired)</h3>{_usage_table(replay, least, used, cut, "least-used")}</div>',
        "</div>",
        f'<h3>Never fired ({len(never)})</h3>',
        f'<div class="scroll"><table id="never-fired">{_head("entry", "book", "id", "turns cut")}'
        f"<tbody>{never_items}</tbody></table></div>",
        '<h2 id="entry">One entry over the whole chat</h2>',
        f'<p><label for="entry-select">Entry: </label><select id="entry-select">{entry_options}</select> '
        '(or click an entry\u2019s name anywhere)</p><p id="entry-summary"></p>',
        f'<div class="scroll"><table id="entry-turns">{_head("turn", "outcome", "reason", "detail", "matched text")}'
        '<tbody></tbody></table></div>',
        '<h2 id="turn">Why each entry fired or not</h2>',
        f'<p><label for="turn-select">Turn: </label><select id="turn-select">{options}</select></p>',
        '<p id="turn-summary"></p><div id="turn-message"></div>',
        '<div class="scroll"><table id="explain">'
        f'{_head("entry", "book", "id", "outcome", "reason", "detail", "matched text")}<tbody></tbody></table></div>',
        f'<script type="application/json" id="replay-data">{_json_for_html(data)}</script>',
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
        "",
    ]
    return "\n".join(parts)
