"""The summary of a replay result, computed with pyarrow compute: per entry, fire rate,
budget-cut rate and mean tokens; the entries that never fired; bad chats per file; and,
for a ``--compare`` run, the share of turns that changed and the entries responsible."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from ..errors import LorebookError
from .output import read_rows
from .pairing import uid_order

__all__ = ["summarize", "print_summary"]


def _rate(n: int, d: int) -> float:
    return round(n / d, 6) if d else 0.0


def summarize(results: str) -> dict[str, Any]:
    """The summary of the result folder ``results`` as plain JSON data."""
    import pyarrow.compute as pc  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
    table = read_rows(results)
    run_file = Path(results) / "run.json"
    if not run_file.is_file():           # written last, when every part is in
        raise LorebookError("an unfinished replay-batch result (no run.json: the run was interrupted or is "
                            "still going), so its rows are partial", source=str(results))
    run = json.loads(run_file.read_text())
    base = table.filter(pc.equal(table["variant"], "base"))
    turns = base.filter(pc.equal(base["outcome"], "turn")).num_rows
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    names: dict[str, dict[str, str]] = run.get("names") or {}

    def name(book: str, entry: str) -> str | None:
        return names.get(book, {}).get(entry)

    def order(r: dict[str, Any]) -> tuple:
        return (r["book"], uid_order(r["entry"]))

    def slot(book: str, entry: str) -> dict[str, Any]:
        return entries.setdefault((book, entry), {"book": book, "entry": entry, "name": name(book, entry),
                                                  "fired": 0, "cut": 0, "fire_rate": 0.0, "cut_rate": 0.0,
                                                  "mean_tokens": None})
    for outcome in ("fired", "cut"):
        part = base.filter(pc.equal(base["outcome"], outcome))
        agg = part.group_by(["book", "entry"]).aggregate([("turn", "count"), ("tokens", "mean")])
        for row in agg.to_pylist():
            s = slot(row["book"], row["entry"])
            s[outcome] = row["turn_count"]
            s[f"{'fire' if outcome == 'fired' else 'cut'}_rate"] = _rate(row["turn_count"], turns)
            if outcome == "fired" and row["tokens_mean"] is not None:
                s["mean_tokens"] = round(row["tokens_mean"], 3)
    known = [tuple(e) for e in run.get("entries", [])]
    for book, entry in known:
        slot(book, entry)
    never = [{"book": s["book"], "entry": s["entry"], "name": s["name"]}
             for s in sorted(entries.values(), key=order) if s["fired"] == 0]
    problems = table.filter(pc.equal(table["outcome"], "problem"))
    bad: dict[str, dict[str, int]] = {}
    for row in problems.select(["source", "reason"]).to_pylist():
        per = bad.setdefault(row["source"], {})
        per[row["reason"]] = per.get(row["reason"], 0) + 1
    out: dict[str, Any] = {
        "turns": turns,
        "chats": len(pc.unique(base.filter(pc.equal(base["outcome"], "turn"))["chat_id"])),
        "entries": sorted(entries.values(), key=lambda s: (-s["fired"], *order(s))),
        "never_fired": never if known else None,
        "problems_by_file": bad,
    }
    if run.get("compare") is not None:
        other = table.filter(pc.equal(table["variant"], "compare"))
        cmp_turns = other.filter(pc.equal(other["outcome"], "turn"))
        changed = cmp_turns.filter(pc.equal(cmp_turns["changed"], True)).num_rows
        fired = table.filter(pc.equal(table["outcome"], "fired"))
        per = fired.group_by(["chat_id", "turn", "book", "entry"]).aggregate(
            [("variant", "count_distinct"), ("variant", "min")])
        diff = per.filter(pc.equal(per["variant_count_distinct"], 1))
        responsible: dict[tuple[str, str], dict[str, Any]] = {}
        for row in diff.select(["book", "entry", "variant_min"]).to_pylist():
            r = responsible.setdefault((row["book"], row["entry"]), {
                "book": row["book"], "entry": row["entry"], "name": name(row["book"], row["entry"]),
                "only_base": 0, "only_compare": 0})
            r["only_base" if row["variant_min"] == "base" else "only_compare"] += 1
        out["compare"] = {
            "changed_turns": changed, "changed_share": _rate(changed, cmp_turns.num_rows),
            "responsible": sorted(responsible.values(),
                                  key=lambda r: (-(r["only_base"] + r["only_compare"]), *order(r))),
            "pairing": run.get("pairing"),
        }
    return out


def _entry(r: dict[str, Any]) -> str:
    """An entry as the summary prints it: its name and uid (``Tavern (#7)``), or its uid."""
    return f"{r['name']} (#{r['entry']})" if r.get("name") else f"#{r['entry']}"


def _pairing_lines(pairing: dict[str, Any] | None) -> list[str]:
    lines = []
    for b in (pairing or {}).get("books", []):
        if b["base"] is None or b["compare"] is None:
            lines.append(f"  book {b['base'] or b['compare']!r} is in one version only")
            continue
        books = (f"{b['base']!r} with {b['compare']!r} (by position)" if b["books_by"] == "position"
                 else f"{b['base']!r} (by name)")
        how = f"{b['by_uid']} by uid"
        if b["by_content"]:
            how += f", {b['by_content']} by content (their uids changed)"
        lines.append(f"  entries of {books}: {how}; {len(b['only_base'])} only in base, "
                     f"{len(b['only_compare'])} only in compare")
    return lines


def print_summary(summary: dict[str, Any], out: TextIO, *, top: int = 20) -> None:
    """The summary as a readable table."""
    turns = summary["turns"]
    print(f"{summary['chats']} chats, {turns} turns", file=out)
    rows = summary["entries"][:top]
    if rows:
        print(f"\n{'book':<24} {'entry':<32} {'fire rate':>10} {'cut rate':>9} {'mean tokens':>12}", file=out)
        for s in rows:
            mt = "" if s["mean_tokens"] is None else f"{s['mean_tokens']:.1f}"
            print(f"{s['book'][:24]:<24} {_entry(s)[:32]:<32} {s['fire_rate']:>10.2%} {s['cut_rate']:>9.2%} "
                  f"{mt:>12}", file=out)
        if len(summary["entries"]) > top:
            print(f"... {len(summary['entries']) - top} more entries (see the JSON)", file=out)
    never = summary["never_fired"]
    if never is not None:
        print(f"\nNever fired: {len(never)} entries" + (
            ": " + ", ".join(f"{n['book']}/{_entry(n)}" for n in never[:10]) + (" ..." if len(never) > 10 else "")
            if never else ""), file=out)
    if summary["problems_by_file"]:
        print("\nBad chats (not replayed, or with ignored fields), per file:", file=out)
        for source, codes in sorted(summary["problems_by_file"].items()):
            print(f"  {source}: " + ", ".join(f"{n} {c}" for c, n in sorted(codes.items())), file=out)
    cmp = summary.get("compare")
    if cmp is not None:
        print(f"\nCompare: {cmp['changed_turns']} turns changed ({cmp['changed_share']:.2%})", file=out)
        for line in _pairing_lines(cmp.get("pairing")):
            print(line, file=out)
        for r in cmp["responsible"][:top]:
            print(f"  {r['book']}/{_entry(r)}: only in base {r['only_base']}, only in compare "
                  f"{r['only_compare']}", file=out)
