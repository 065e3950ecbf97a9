"""The replay report's page style and script (:mod:`lorescan.replay.report`), kept apart from
the Python that writes the page. Both are inlined into the page and pinned by hash in its
Content-Security-Policy; the script writes untrusted text with ``textContent`` only."""
from __future__ import annotations

__all__ = ["STYLE", "SCRIPT"]

STYLE = """
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
.entry-link{cursor:pointer;color:#2b6cb0;text-decoration:underline dotted}.chart .row-label{cursor:pointer}
th.sortable{cursor:pointer;user-select:none}th[data-sort=asc]::after{content:" \\25B2"}th[data-sort=desc]::after{content:" \\25BC"}
#search{font:inherit;padding:3px 6px;width:22em}.hidden{display:none}
.chart .sticky{fill:#38a169;pointer-events:none}.chart .cooldown{fill:#a0aec0;pointer-events:none}
.chart .delay{fill:#d69e2e;pointer-events:none}.sw.sticky{background:#38a169}.sw.cooldown{background:#a0aec0}
.sw.delay{background:#d69e2e}#compare-turns tr{cursor:pointer}#compare-turns tr:hover{background:#ebf8ff}
#entry-summary{font-weight:600}
"""

SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  var select = document.getElementById("turn-select");
  var entrySelect = document.getElementById("entry-select");
  var search = document.getElementById("search");
  var body = document.querySelector("#explain tbody");
  var order = {fired: 0, cut: 1, not: 2};
  var cutBy = data.cut_by || "the budget";
  var words = {fired: "fired", cut: "cut by " + (data.cut_by || "budget"), not: "did not fire"};
  var caseWords = {inside_word: "inside a longer word", across: "across two texts", recursion: "in a recursion text"};
  var searched = ["explain", "most-used", "least-used", "never-fired", "entry-turns", "compare-turns"];
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
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
  function rowOf(turn, e) {
    for (var i = 0; i < turn.rows.length; i++) {
      if (turn.rows[i][0] === e) { return turn.rows[i]; }
    }
    var d = data.defaults[e];
    return [e, d[0], d[1], d[2], d[3]];
  }
  function applySearch() {
    var q = search.value.trim().toLowerCase();
    searched.forEach(function (id) {
      var table = document.getElementById(id);
      if (!table) { return; }
      var rows = table.querySelectorAll("tbody tr");
      for (var i = 0; i < rows.length; i++) {
        rows[i].classList.toggle("hidden", q !== "" && rows[i].textContent.toLowerCase().indexOf(q) === -1);
      }
    });
  }
  function entryCell(tr, e) {
    var td = cell(tr, data.entries[e][2], "entry-link");
    td.setAttribute("data-entry", String(e));
  }
  function show(n) {
    var turn = data.turns[n - 1];
    if (!turn) { return; }
    select.value = String(n);
    var marked = document.querySelectorAll(".chart [data-turn]");
    for (var i = 0; i < marked.length; i++) {
      marked[i].classList.toggle("sel", marked[i].getAttribute("data-turn") === String(n));
    }
    document.getElementById("turn-summary").textContent =
      "Turn " + n + ": " + turn.fired + " fired, " + turn.cut + " cut by " + cutBy + ", " +
      (data.cut_by ? "" : turn.tokens + " of " + turn.budget + " tokens; ") + turn.messages +
      " messages scanned, the last by " +
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
      entryCell(tr, r[0]); cell(tr, e[0]); cell(tr, e[1], "num");
      cell(tr, words[outcome]); cell(tr, data.strings[r[2]]); cell(tr, data.strings[r[3]], "detail");
      tr.appendChild(matchedCell(r[4]));
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    document.getElementById("explain").setAttribute("data-turn", String(n));
    clearSort("explain");
    applySearch();
  }
  function showEntry(e) {
    var info = data.entries[e];
    if (!info) { return; }
    entrySelect.value = String(e);
    var fired = 0, cut = 0;
    var frag = document.createDocumentFragment();
    data.turns.forEach(function (turn) {
      var r = rowOf(turn, e), outcome = data.outcomes[r[1]];
      if (outcome === "fired") { fired++; }
      if (outcome === "cut") { cut++; }
      var tr = document.createElement("tr");
      tr.className = outcome;
      tr.setAttribute("data-entry-turn", String(turn.n));
      cell(tr, String(turn.n), "num"); cell(tr, words[outcome]); cell(tr, data.strings[r[2]]);
      cell(tr, data.strings[r[3]], "detail");
      tr.appendChild(matchedCell(r[4]));
      frag.appendChild(tr);
    });
    var tbody = document.querySelector("#entry-turns tbody");
    tbody.textContent = "";
    tbody.appendChild(frag);
    document.getElementById("entry-turns").setAttribute("data-entry", String(e));
    document.getElementById("entry-summary").textContent = info[2] + " (" + info[0] + " #" + info[1] + "): fired on " +
      fired + " of " + data.turns.length + " turns, cut by " + cutBy + " on " + cut + ".";
    clearSort("entry-turns");
    applySearch();
  }
  function cellValue(tr, k) {
    var c = tr.cells[k];
    return c ? c.textContent : "";
  }
  function clearSort(id) {
    var ths = document.querySelectorAll("#" + id + " th");
    for (var i = 0; i < ths.length; i++) { ths[i].removeAttribute("data-sort"); }
  }
  function sortBy(th) {
    var table = th.closest("table"), tbody = table.tBodies[0];
    var k = Array.prototype.indexOf.call(th.parentNode.children, th);
    var dir = th.getAttribute("data-sort") === "asc" ? "desc" : "asc";
    clearSort(table.id);
    th.setAttribute("data-sort", dir);
    var rows = Array.prototype.slice.call(tbody.rows);
    var numeric = rows.every(function (tr) { var v = cellValue(tr, k).trim(); return v === "" || !isNaN(Number(v)); });
    rows.sort(function (a, b) {
      var x = cellValue(a, k), y = cellValue(b, k), c;
      if (numeric) { c = (Number(x) || 0) - (Number(y) || 0); } else { c = x.localeCompare(y); }
      return dir === "asc" ? c : -c;
    });
    rows.forEach(function (tr) { tbody.appendChild(tr); });
  }
  var ths = document.querySelectorAll("th.sortable");
  for (var i = 0; i < ths.length; i++) {
    ths[i].addEventListener("click", function (ev) { sortBy(ev.currentTarget); });
  }
  select.addEventListener("change", function () { show(Number(select.value)); });
  entrySelect.addEventListener("change", function () { showEntry(Number(entrySelect.value)); });
  search.addEventListener("input", applySearch);
  document.addEventListener("click", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-entry]") : null;
    if (t && (t.classList.contains("entry-link") || t.classList.contains("row-label"))) {
      showEntry(Number(t.getAttribute("data-entry")));
      document.getElementById("entry").scrollIntoView({block: "start"});
      return;
    }
    var row = ev.target.closest ? ev.target.closest("#compare-turns tr[data-turn]") : null;
    if (row) {
      show(Number(row.getAttribute("data-turn")));
      document.getElementById("turn").scrollIntoView({block: "start"});
    }
  });
  var clickable = document.querySelectorAll(".chart [data-turn]");
  for (var j = 0; j < clickable.length; j++) {
    clickable[j].addEventListener("click", function (ev) {
      show(Number(ev.currentTarget.getAttribute("data-turn")));
      document.getElementById("turn").scrollIntoView({block: "start"});
    });
  }
  if (data.turns.length) { show(data.initial); }
  if (data.entries.length) { showEntry(Number(entrySelect.value)); }
}());
"""
