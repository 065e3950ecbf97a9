"""Static checks of a lorebook (``lorescan lint``): keys that cannot match as meant, broken or
dangerous regex keys, recursion cycles, contradictory flags, constant entries over the
budget, duplicate keys, keys hidden in common words; for JanitorAI script books, their own
checks (``LS8xx``, :mod:`lorescan.lint.janitor`).

:func:`lint_book` returns :class:`Finding` objects, each with a stable code (table:
:data:`CODES`), a severity, the entry (uid and name), the field, a message and a suggestion.
Every check reads the book the way SillyTavern does (docs/sillytavern-mode.md), under the
global settings given in :class:`LintOptions` (SillyTavern's defaults unless told).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import RegexKeyError
from ..match.options import MatchOptions
from ..model import Lorebook
from .findings import CODES, Finding, Severity, code_matches
from ..st.compiled import compile_book
from .book import (check_budget, check_common_words, check_duplicates, check_flags, check_recursion,
                   check_recursion_budget, entry_name, recursion_budget, recursion_graph)
from .janitor import check_janitor
from .keys import KeyContext, check_keys
from .words import book_vocabulary, detect_language

__all__ = ["LintOptions", "lint_book", "Finding", "Severity", "CODES", "worst_severity"]


@dataclass(frozen=True, slots=True)
class LintOptions:
    """The global settings the book will run under, and which checks to run.

    ``case_sensitive`` / ``match_whole_words`` / ``recursive``: SillyTavern's global World Info
    settings (entries' own overrides win). The budget is ``budget_percent`` of ``max_context``
    tokens, capped at ``budget_cap`` when that is positive, counted with ``count_tokens``
    (default: tiktoken cl100k, offline). ``select`` / ``ignore``: codes or code prefixes.
    ``regex_probe_ms``: the nominal milliseconds (``JSRegex.cost``, a function of the pattern
    and the text, never a clock) each regex key may cost on the probe texts (LS203);
    ``regex_probe_total_ms``: the same for all of a book's regex keys together (at 0.1 s a key,
    100,000 regex keys were hours of lint; weyland's 128 cost 819 ms); a key that needs
    backtracking and comes after the budget is spent is not probed and reported as LS203 (it
    may be cut off in a scan).
    ``recursion_regex_total_ms``: the nominal milliseconds the recursion checks (LS301, LS302)
    may spend running regex keys on the book's contents (20 ms an evaluation, 20 ms an entry,
    at most this in all); when it runs out, LS303 names the keys not run.
    ``max_findings_per_code``: findings listed per code (in entry order; 0: all); the rest of a code
    are counted in one book-wide finding of that code (729,000 LS602 findings of a 1.1 MB book
    are not a report).
    """

    case_sensitive: bool = False
    match_whole_words: bool = False
    recursive: bool = True
    max_context: int = 8192
    budget_percent: float = 25
    budget_cap: int = 0
    count_tokens: Callable[[str], int] | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    regex_probe_ms: float = 100.0
    regex_probe_total_ms: float = 100_000.0
    recursion_regex_total_ms: float = 10_000.0
    max_findings_per_code: int = 200

    def wants(self, code: str) -> bool:
        if self.select and not code_matches(code, self.select):
            return False
        return not code_matches(code, self.ignore)

    def wants_any(self, prefix: str) -> bool:
        return any(self.wants(c) for c in CODES if c.startswith(prefix))

    def budget(self) -> tuple[int, str]:
        budget = int(self.max_context * self.budget_percent / 100)
        note = f"{self.budget_percent:g}% of {self.max_context:,} tokens"
        if 0 < self.budget_cap < budget:
            budget, note = self.budget_cap, f"the budget cap of {self.budget_cap:,}"
        return budget, note


def worst_severity(findings: list[Finding]) -> Severity | None:
    """The highest severity among ``findings``, or None for none."""
    return max((f.severity for f in findings), default=None)


def lint_book(book: Lorebook, options: LintOptions = LintOptions()) -> list[Finding]:
    """Every finding for ``book``, in entry order (book-wide findings last)."""
    source = book.source
    entries = book.entries
    out: list[tuple[int | None, str, str | None, str, str]] = []
    unlisted: dict[str, int] = {}        # findings counted but not built (LS602 past the cap)
    ctx = KeyContext(source, book.format, options.case_sensitive, options.match_whole_words,
                     options.regex_probe_ms, options.regex_probe_total_ms)
    if book.format == "janitor":          # a JanitorAI script book: its own checks, on its own fields
        if options.wants_any("LS8"):
            out.extend(check_janitor(book))
        entries = ()
    for i, e in enumerate(entries):
        if options.wants_any("LS1") or options.wants_any("LS2"):
            out.extend((i, *raw) for raw in check_keys(e, ctx))
        if options.wants_any("LS4"):
            out.extend((i, *raw) for raw in check_flags(e))
    if options.wants_any("LS3") and options.recursive and entries:
        try:
            compiled = compile_book(book, MatchOptions.sillytavern(case_sensitive=options.case_sensitive,
                                                                    match_whole_words=options.match_whole_words))
        except RegexKeyError:
            compiled = None          # reported as LS205 by the key checks; no recursion graph then
        if compiled is not None:
            regex_budget = recursion_budget(len(compiled.entries), total_ms=options.recursion_regex_total_ms)
            out.extend(check_recursion(compiled, recursion_graph(compiled, budget=regex_budget)))
            out.extend(check_recursion_budget(regex_budget, options.recursion_regex_total_ms))
    if options.wants_any("LS5") and entries:
        budget, note = options.budget()
        count = options.count_tokens
        if count is None:
            from ..tokens import TiktokenCounter  # import-cost: the tokenizer loads only for the budget check
            count = TiktokenCounter()
        out.extend(check_budget(entries, count, budget, note))
    if options.wants_any("LS6") and entries:
        out.extend(check_duplicates(entries, options.case_sensitive, options.max_findings_per_code, unlisted))
    if options.wants_any("LS7") and entries:
        language = detect_language(e.content for e in entries if not e.disable)
        if language is not None:
            out.extend(check_common_words(entries, language, options.match_whole_words))
        else:                       # no word list: the book's own words
            vocabulary = book_vocabulary(e.content for e in entries if not e.disable)
            out.extend(check_common_words(entries, None, options.match_whole_words, vocabulary))
    findings = []
    entries = book.entries
    for at, code, field, message, suggestion in out:
        if not options.wants(code):
            continue
        owner = entries[at] if at is not None else None
        findings.append(Finding(code, message, suggestion, source, owner.uid if owner is not None else None,
                                entry_name(owner) if owner is not None else "", field))
    position = {e.uid: n for n, e in enumerate(entries)}
    findings.sort(key=lambda f: (f.entry is None, position.get(f.entry, 0) if f.entry is not None else 0, f.code))
    return _capped(findings, options.max_findings_per_code, source,
                   {c: n for c, n in unlisted.items() if options.wants(c)})


def _capped(findings: list[Finding], cap: int, source: str, unlisted: dict[str, int]) -> list[Finding]:
    """The first ``cap`` findings of each code, then one book-wide finding per code counting the rest
    (``cap`` 0: every finding)."""
    if cap <= 0:
        return findings
    seen: dict[str, int] = {}
    kept: list[Finding] = []
    for f in findings:
        n = seen[f.code] = seen.get(f.code, 0) + 1
        if n <= cap:
            kept.append(f)
    for code, n in unlisted.items():
        seen[code] = seen.get(code, 0) + n
    for code, n in seen.items():
        if n > cap:
            kept.append(Finding(code, f"{n - cap:,} more {code} findings are not listed (the first {cap:,} are; "
                                f"max_findings_per_code)", "fix the listed ones first, or raise the cap "
                                "(--max-findings-per-code)", source))
    return kept
