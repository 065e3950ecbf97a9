"""``lorescan lint BOOK...``: arguments in, findings out.

Exit status: 0 when no finding is worse than ``info``, 1 when the worst is a warning, 3 when
there is an error; 2 is kept for what it means everywhere in this CLI, bad input: a bad
argument, or a book that could not be read (the other books are still linted and shown).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from ..errors import LorebookError
from . import CODES, Finding, LintOptions, Severity, lint_book, worst_severity

__all__ = ["add_parser", "lint_command", "EXIT_CLEAN", "EXIT_WARNINGS", "EXIT_BAD_INPUT", "EXIT_ERRORS"]

EXIT_CLEAN, EXIT_WARNINGS, EXIT_BAD_INPUT, EXIT_ERRORS = 0, 1, 2, 3


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``lint`` on the ``lorescan`` command's subparsers."""
    p = sub.add_parser(
        "lint", help="check lorebooks for keys that cannot match, broken regexes, cycles, contradictions",
        description="Static checks of lorebooks under SillyTavern's rules. Exit status: 0 clean (or only "
                    "info findings), 1 warnings, 3 errors, 2 bad arguments or an unreadable book.",
        epilog="codes:\n" + "\n".join(f"  {c}  {str(s):<8} {t}" for c, (s, t) in CODES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("books", nargs="+", metavar="BOOK", help="lorebook files (any supported format, or a .lsc file "
                                                         "from lorescan compile)")
    p.add_argument("--format", choices=("text", "json", "github"), default="text",
                   help="output: readable text (default), JSON, or GitHub Actions annotation lines")
    p.add_argument("--json", action="store_const", const="json", dest="format", help="the same as --format json")
    p.add_argument("--select", default="", metavar="CODES", help="only these codes or prefixes (LS1,LS203)")
    p.add_argument("--ignore", default="", metavar="CODES", help="skip these codes or prefixes (LS6,LS701)")
    p.add_argument("--case-sensitive", action="store_true", help="global setting: case-sensitive keys")
    p.add_argument("--whole-words", action="store_true", help="global setting: match whole words")
    p.add_argument("--no-recursive", action="store_true",
                   help="global setting: recursive scanning off (skips the recursion checks)")
    p.add_argument("--max-context", type=_positive_int, default=8192, help="context size in tokens (default 8192)")
    p.add_argument("--budget-percent", type=_percent, default=25.0, help="budget, %% of the context (default 25)")
    p.add_argument("--budget-cap", type=_positive_int, default=0, help="budget cap in tokens (default 0: none)")
    p.add_argument("--max-findings-per-code", type=_positive_int, default=200, metavar="N",
                   help="findings listed per code and book; the rest are counted in one finding (default 200; 0: all)")
    p.set_defaults(func=lint_command)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text}")
    return value


def _codes(text: str, flag: str) -> tuple[str, ...]:
    items = tuple(c.strip().upper() for c in text.split(",") if c.strip())
    for c in items:
        if not any(code.startswith(c) for code in CODES):
            raise LorebookError(f"{flag}: no lint code starts with {c!r} (codes: LS101 ... LS850)",
                                source="arguments")
    return items


def lint_command(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``lorescan lint``; returns the exit status."""
    from ..app.inputs import load_book  # import-cost: the readers load when lint runs, not when the CLI starts
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    options = LintOptions(case_sensitive=args.case_sensitive, match_whole_words=args.whole_words,
                          recursive=not args.no_recursive, max_context=args.max_context,
                          budget_percent=args.budget_percent, budget_cap=args.budget_cap,
                          select=_codes(args.select, "--select"), ignore=_codes(args.ignore, "--ignore"),
                          max_findings_per_code=getattr(args, "max_findings_per_code", 200))
    results: list[tuple[str, Any, list[Finding]]] = []
    unreadable = False
    for path in args.books:
        try:
            book, _ = load_book(path)        # any format, a .lsc file's source book; a chat gets a hint
        except LorebookError as exc:
            print(f"lorescan lint: {exc}", file=err)
            unreadable = True
            continue
        results.append((path, book, lint_book(book, options)))
    worst = worst_severity([f for _, _, fs in results for f in fs])
    status = (EXIT_BAD_INPUT if unreadable else EXIT_ERRORS if worst == Severity.ERROR
              else EXIT_WARNINGS if worst == Severity.WARNING else EXIT_CLEAN)
    try:
        if args.format == "json":
            _write_json(out, results, status)
        elif args.format == "github":
            for _, _, findings in results:
                for f in findings:
                    out.write(github_line(f) + "\n")
        else:
            for path, _, findings in results:
                _write_text(out, path, findings)
        out.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop writing, keep the status, and make sure the
        # interpreter's last flush at exit does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return status


def _where(f: Finding) -> str:
    if f.entry is None:
        return "book"
    short = f.name if len(f.name) <= 60 else f.name[:59] + "…"
    name = f" ({short})" if short else ""
    return f"entry {f.entry}{name}" + (f" {f.field}" if f.field else "")


def _write_text(out: TextIO, path: str, findings: list[Finding]) -> None:
    for f in findings:
        out.write(f"{path}: {_where(f)}: {f.code} {f.severity}: {f.message}\n    suggestion: {f.suggestion}\n")
    out.write(f"{path}: {summary(findings)}\n")


def summary(findings: list[Finding]) -> str:
    """``no findings`` or ``N findings (1 error, 2 warnings, 3 info)``."""
    if not findings:
        return "no findings"
    counts = {s: sum(1 for f in findings if f.severity == s) for s in Severity}
    parts = [f"{counts[Severity.ERROR]} error" + ("" if counts[Severity.ERROR] == 1 else "s"),
             f"{counts[Severity.WARNING]} warning" + ("" if counts[Severity.WARNING] == 1 else "s"),
             f"{counts[Severity.INFO]} info"]
    n = len(findings)
    return f"{n} finding{'' if n == 1 else 's'} ({', '.join(parts)})"


def _write_json(out: TextIO, results: list[tuple[str, Any, list[Finding]]], status: int) -> None:
    doc = {
        "books": [{"source": path, "format": book.format, "name": book.name, "entries": len(book.entries),
                   "findings": [f.to_json() for f in findings]} for path, book, findings in results],
        "exit_status": status,
    }
    json.dump(doc, out, ensure_ascii=False, indent=2)
    out.write("\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(f: Finding) -> str:
    """One GitHub Actions workflow command: ``::warning file=…,title=…::message``
    (``info`` findings become ``notice``)."""
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}[f.severity]
    title = f"{f.code} {f.title}"
    body = f"{_where(f)}: {f.message} Suggestion: {f.suggestion}"
    return f"::{level} file={_escape_property(f.source)},title={_escape_property(title)}::{_escape_data(body)}"
