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
from typing import Iterable, Sequence

from ..match.spans import KeySpan
from .single import ChatReplay

__all__ = ["render_report", "timeline_rows", "MAX_TIMELINE_ROWS"]

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
    return f'<td>{_esc(info.name)}</td><td>{_esc(info.book)}</td><td class="num">{_esc(info.id)}</td>'


def _usage_table(replay: ChatReplay, ids: Iterable[int], used: Counter[int], cut: Counter[int],
                 table_id: str) -> str:
    body = "".join(f'<tr>{_entry_cells(replay, e)}<td class="num">{used[e]}</td><td class="num">{cut[e]}</td></tr>'
                   for e in ids)
    return (f'<table id="{table_id}"><thead><tr><th>entry</th><th>book</th><th>id</th><th>turns fired</th>'
            f'<th>turns cut</th></tr></thead><tbody>{body}</tbody></table>')


# -- the page --------------------------------------------------------------------------------
_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:16px 24px;color:#1a202c;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e2e8f0;padding-bottom:4px}
.meta{color:#4a5568;margin:0 0 12px}.scroll{overflow:auto;max-height:620px;border:1px solid #e2e8f0;border-radius:4px}
.chart text{font:11px system-ui,sans-serif;fill:#2d3748}.chart .axis-label{font-weight:600}
.chart .axis,.chart .tick{stroke:#4a5568;stroke-width:1}.chart .grid{stroke:#edf2f7}
.chart .col{fill:transparent;cursor:pointer}.chart .col:hover{fill:#ebf8ff}.chart .col.sel{fill:#fefcbf}
.chart .stripe{fill:#f7fafc;pointer-events:none}.chart .on{fill:#2b6cb0;pointer-events:none}
.chart .cut{fill:#dd6b20;pointer-events:none}.chart .bar{fill:#4299e1;cursor:pointer}.chart .bar.over{fill:#c53030}
.chart .bar.sel{fill:#2c5282}.chart .budget-line{fill:none;stroke:#c53030;stroke-width:2;stroke-dasharray:6 3}
.chart .empty,.chart .note{fill:#718096;font-style:italic}
.legend{color:#4a5568;margin:6px 0}.sw{display:inline-block;width:11px;height:11px;margin:0 4px 0 12px;vertical-align:-1px}
.sw.on{background:#2b6cb0}.sw.cut{background:#dd6b20}.sw.bar{background:#4299e1}.sw.line{background:#c53030;height:3px;vertical-align:3px}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #edf2f7;vertical-align:top}
th{background:#f7fafc;position:sticky;top:0}td.num,th.num{text-align:right}
.cols{display:flex;gap:24px;flex-wrap:wrap}.cols>div{flex:1 1 420px;min-width:0}
tr.fired td:first-child{border-left:4px solid #2b6cb0}tr.cut td:first-child{border-left:4px solid #dd6b20}
tr.not td{color:#4a5568}#explain td:nth-child(4){white-space:nowrap}.detail{white-space:pre-wrap;word-break:break-word}
#turn-message{white-space:pre-wrap;word-break:break-word;background:#f7fafc;border-left:3px solid #a0aec0;padding:6px 10px;margin:8px 0}
#turn-summary{font-weight:600}select{font:inherit;padding:2px 4px}
.matched{word-break:break-word;min-width:16em}.matched mark{background:#fefcbf;font-weight:600}
.case{display:inline-block;margin:2px 4px 0 0;padding:0 6px;border-radius:8px;background:#fed7d7;color:#742a2a;font-size:12px}
.where{color:#4a5568;font-size:12px}
"""

_SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  var select = document.getElementById("turn-select");
  var body = document.querySelector("#explain tbody");
  var order = {fired: 0, cut: 1, not: 2};
  var words = {fired: "fired", cut: "cut by budget", not: "did not fire"};
  var caseWords = {inside_word: "inside a longer word", across: "across two texts", recursion: "in a recursion text"};
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
  }
  function matchedCell(ref) {
    var td = document.createElement("td");
    td.className = "matched";
    var span = ref >= 0 ? data.spans[ref] : null;
    if (!span) { return td; }
    var text = document.createElement("span");
    text.className = "context";
    text.appendChild(document.createTextNode(data.strings[span[0]]));
    var mark = document.createElement("mark");
    mark.textContent = data.strings[span[1]];
    text.appendChild(mark);
    text.appendChild(document.createTextNode(data.strings[span[2]]));
    td.appendChild(text);
    span[3].forEach(function (c) {
      var badge = document.createElement("span");
      badge.className = "case";
      badge.setAttribute("data-case", c);
      badge.textContent = caseWords[c] || c;
      td.appendChild(badge);
    });
    var where = document.createElement("div");
    where.className = "where";
    where.textContent = data.strings[span[4]];
    td.appendChild(where);
    return td;
  }
  function show(n) {
    var turn = data.turns[n - 1];
    if (!turn) { return; }
    select.value = String(n);
    var marked = document.querySelectorAll("[data-turn]");
    for (var i = 0; i < marked.length; i++) {
      marked[i].classList.toggle("sel", marked[i].getAttribute("data-turn") === String(n));
    }
    document.getElementById("turn-summary").textContent =
      "Turn " + n + ": " + turn.fired + " fired, " + turn.cut + " cut by the budget, " +
      turn.tokens + " of " + turn.budget + " tokens; " + turn.messages + " messages scanned, the last by " +
      (turn.speaker || "(no name)") + ":";
    document.getElementById("turn-message").textContent = turn.last;
    var rows = data.defaults.map(function (d, e) { return [e, d[0], d[1], d[2], d[3]]; });
    turn.rows.forEach(function (r) { rows[r[0]] = r; });
    rows.sort(function (a, b) {
      return order[data.outcomes[a[1]]] - order[data.outcomes[b[1]]] || a[0] - b[0];
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) {
      var e = data.entries[r[0]], outcome = data.outcomes[r[1]];
      var tr = document.createElement("tr");
      tr.className = outcome;
      cell(tr, e[2]); cell(tr, e[0]); cell(tr, e[1], "num");
      cell(tr, words[outcome]); cell(tr, data.strings[r[2]]); cell(tr, data.strings[r[3]], "detail");
      tr.appendChild(matchedCell(r[4]));
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    document.getElementById("explain").setAttribute("data-turn", String(n));
  }
  select.addEventListener("change", function () { show(Number(select.value)); });
  var clickable = document.querySelectorAll(".chart [data-turn]");
  for (var i = 0; i < clickable.length; i++) {
    clickable[i].addEventListener("click", function (ev) {
      show(Number(ev.currentTarget.getAttribute("data-turn")));
      document.getElementById("turn").scrollIntoView({block: "start"});
    });
  }
  if (data.turns.length) { show(data.initial); }
}());
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _json_for_html(obj: object) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _span_place(span: KeySpan) -> str:
    """Which text a match is in, and the case, in words (the report's matched-text column)."""
    words = span.label
    if span.across:
        words += f" into {span.end_label}"
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

    def span_ref(span: KeySpan | None) -> int:
        """-1, or the index in ``data["spans"]`` of [before, matched, after, cases, where]."""
        if span is None:
            return -1
        before, matched, after = span.shown_parts()
        value = (s(before), s(matched), s(after), tuple(span.cases), s(_span_place(span)))
        return spans.setdefault(value, len(spans))

    seen: list[Counter[tuple[int, int, int, int]]] = [Counter() for _ in replay.entries]
    rows_of = []
    for t in replay.turns:
        rows = [(x.entry, (code[x.outcome], s(x.reason), s(x.detail), span_ref(x.span))) for x in t.explained]
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
    return data, initial


def render_report(replay: ChatReplay, *, version: str = "") -> str:
    """The report of one replayed chat as one HTML document (a str; write it as UTF-8)."""
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
    csp = (f"default-src 'none'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
           "img-src 'none'; connect-src 'none'; font-src 'none'; form-action 'none'; base-uri 'none'")
    books = ", ".join(replay.books)
    mode = "SillyTavern" if replay.mode == "sillytavern" else "lorebook slot"
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
        f"{total_tokens} tokens of lore over all turns; {over} turns over the budget."
        f'{" Made by lorescan " + _esc(version) + "." if version else ""}</p>',
        '<h2 id="timeline-h">Activation timeline</h2>',
        '<p class="legend">Entries that fired (or were cut by the budget) on some turn, in the order they first '
        'did; click a turn to explain it.<span class="sw on"></span>fired<span class="sw cut"></span>cut by the '
        'budget</p>',
        f'<div class="scroll" id="timeline-box">{_timeline_svg(replay, rows, hidden)}</div>',
        '<h2 id="budget-h">Tokens against the budget</h2>',
        '<p class="legend">Tokens of the fired entries\u2019 contents per turn.<span class="sw bar"></span>tokens'
        '<span class="sw line"></span>budget</p>',
        f'<div class="scroll">{_budget_svg(replay)}</div>',
        '<h2>Entries by use</h2><div class="cols">',
        f'<div><h3>Most used</h3>{_usage_table(replay, most, used, cut, "most-used")}</div>',
        f'<div><h3>Least used (of those that fired)</h3>{_usage_table(replay, least, used, cut, "least-used")}</div>',
        "</div>",
        f'<h3>Never fired ({len(never)})</h3>',
        f'<div class="scroll"><table id="never-fired"><thead><tr><th>entry</th><th>book</th><th>id</th>'
        f"<th>turns cut</th></tr></thead><tbody>{never_items}</tbody></table></div>",
        '<h2 id="turn">Why each entry fired or not</h2>',
        f'<p><label for="turn-select">Turn: </label><select id="turn-select">{options}</select></p>',
        '<p id="turn-summary"></p><div id="turn-message"></div>',
        '<div class="scroll"><table id="explain"><thead><tr><th>entry</th><th>book</th><th>id</th><th>outcome</th>'
        "<th>reason</th><th>detail</th><th>matched text</th></tr></thead><tbody></tbody></table></div>",
        f'<script type="application/json" id="replay-data">{_json_for_html(data)}</script>',
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
        "",
    ]
    return "\n".join(parts)
