"""What lint reports: a :class:`Finding` with a stable code, and the table of every code.

Codes never change meaning once released; a retired check keeps its number unused. The
hundreds group the checks: ``LS1xx`` plain keys, ``LS2xx`` regex keys, ``LS3xx`` recursion,
``LS4xx`` flags, ``LS5xx`` budget, ``LS6xx`` duplicates, ``LS7xx`` language, ``LS8xx`` JanitorAI
script books.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

__all__ = ["Severity", "Finding", "CODES", "code_matches"]


class Severity(IntEnum):
    """How bad a finding is; the worst one decides the exit status of ``lorescan lint``."""

    INFO = 0        # worth knowing, often intended
    WARNING = 1     # probably not what the author meant
    ERROR = 2       # the entry cannot work as written

    def __str__(self) -> str:
        return self.name.lower()


# code -> (severity, short title). The title is the check's name in --help, JSON and GitHub annotations.
CODES: dict[str, tuple[Severity, str]] = {
    "LS101": (Severity.ERROR, "blank key matches every text"),
    "LS102": (Severity.INFO, "empty key is skipped"),
    "LS103": (Severity.WARNING, "key has leading or trailing whitespace"),
    "LS104": (Severity.WARNING, "whole-word key edged by punctuation"),
    "LS105": (Severity.WARNING, "whole words cannot bound a non-ASCII key"),
    "LS106": (Severity.WARNING, "macro in a key is never substituted"),
    "LS107": (Severity.WARNING, "entry has no key and can never fire"),
    "LS108": (Severity.INFO, "whole words do not apply to a multi-word key"),
    "LS110": (Severity.ERROR, "key expression is malformed"),
    "LS111": (Severity.ERROR, "primary key expression is true when no key matches"),
    "LS201": (Severity.ERROR, "regex key is not a valid JavaScript regex"),
    "LS202": (Severity.WARNING, "regex key can backtrack catastrophically"),
    "LS203": (Severity.ERROR, "regex key ran out of time on a probe text"),
    "LS204": (Severity.WARNING, "regex key is plain text in this format"),
    "LS205": (Severity.ERROR, "regex key is over lorescan's limits"),
    "LS301": (Severity.WARNING, "recursion cycle"),
    "LS302": (Severity.WARNING, "index entry triggers most of the book"),
    "LS303": (Severity.INFO, "recursion checks ran out of regex budget"),
    "LS401": (Severity.WARNING, "constant entry is disabled"),
    "LS402": (Severity.WARNING, "delayed until recursion but excluded from recursion"),
    "LS403": (Severity.WARNING, "secondary keys are ignored (selective is off)"),
    "LS404": (Severity.INFO, "secondary logic without secondary keys"),
    "LS405": (Severity.ERROR, "probability 0: the entry never fires"),
    "LS406": (Severity.INFO, "group override without a group"),
    "LS501": (Severity.ERROR, "constant entry is larger than the budget"),
    "LS502": (Severity.WARNING, "constant entries together exceed the budget"),
    "LS601": (Severity.INFO, "the same key in several entries"),
    "LS602": (Severity.INFO, "near-duplicate keys in different entries"),
    "LS701": (Severity.WARNING, "key is part of common words (substring matching)"),
    "LS801": (Severity.WARNING, "janitor term with non-ASCII characters never matches"),
    "LS802": (Severity.WARNING, "janitor term with punctuation never matches"),
    "LS803": (Severity.WARNING, "janitor term with inner double spaces never matches"),
    "LS804": (Severity.WARNING, "janitor term with regex syntax never matches (taken literally)"),
    "LS810": (Severity.ERROR, "count gate without keywords: the entry never fires"),
    "LS811": (Severity.ERROR, "maxMessages: null reads as 0"),
    "LS812": (Severity.ERROR, "only blank keywords: the entry never fires"),
    "LS813": (Severity.ERROR, "no keyword can match: the entry never fires"),
    "LS820": (Severity.ERROR, "fractional priority makes the script throw"),
    "LS830": (Severity.WARNING, "trigger names no tag"),
    "LS831": (Severity.WARNING, "tag that no entry triggers"),
    "LS832": (Severity.WARNING, "trigger chain runs backwards in book order (never fires)"),
    "LS840": (Severity.WARNING, "APPLY_LIMIT always hides the entry"),
    "LS850": (Severity.INFO, "near-duplicate janitor keywords in different entries"),
}


def code_matches(code: str, selectors: tuple[str, ...]) -> bool:
    """True when ``code`` is named by one of ``selectors`` (a code or a prefix: ``LS1``, ``LS20``)."""
    return any(code.startswith(s.strip().upper()) for s in selectors if s.strip())


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint finding: where (file, entry, field), what (code, message) and what to do.

    ``entry`` is the entry's uid (None for a finding about the whole book), ``name`` its
    comment or card name; ``field`` uses SillyTavern's field names whatever the format
    (``key[2]``, ``keysecondary[0]``, ``content``, ``probability``).
    """

    code: str
    message: str
    suggestion: str
    source: str
    entry: int | str | None = None
    name: str = ""
    field: str | None = None

    @property
    def severity(self) -> Severity:
        return CODES[self.code][0]

    @property
    def title(self) -> str:
        return CODES[self.code][1]

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": str(self.severity), "title": self.title, "source": self.source,
                "entry": self.entry, "name": self.name, "field": self.field, "message": self.message,
                "suggestion": self.suggestion}
