"""Keywords and gate terms: what one term of the script can ever match.

The script tests a term with a regular expression over the haystack ``" " + window + " "``
(docs/janitor-mode.md#janitor-terms): the term is lower-cased and trimmed (JS whitespace), not
normalised; a term ending in ``*`` is a stem followed by ``[a-z]*``; both must start after
a whitespace character (or at the start) and end before one (or at the end); regex syntax
is escaped. As the haystack holds only ``[a-z0-9]`` words separated by single spaces, every
term reduces to one of:

- ``NEVER``: blank, or holding a character the haystack cannot contain (punctuation,
  non-ASCII, a tab, two spaces in a row, a ``*`` other than the last);
- ``ALWAYS``: a lone ``*`` (the empty stem matches at the haystack's first space);
- ``PHRASE``: the haystack contains ``" " + term + " "``;
- ``STEM``: the haystack contains ``" " + stem`` followed by letters only up to the next
  space or the end (a stem ending in a space therefore needs a letters-only next word, or
  the end of the window).

The improved profile normalises the term as it normalises text, and matches with the
Unicode word boundary rule (no-space scripts such as Chinese need no boundary).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..js.coerce import js_string
from ..js.text import js_lower, js_trim
from .normalise import IMPROVED, normalise_improved

__all__ = ["Term", "NEVER", "ALWAYS", "PHRASE", "STEM", "compile_term", "term_text"]

NEVER, ALWAYS, PHRASE, STEM = "never", "always", "phrase", "stem"
_HAYSTACK_WORDS = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*")
_STEM_BODY = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)* ?")


@dataclass(frozen=True, slots=True)
class Term:
    """One compiled term: ``kind`` and the automaton ``key`` (``""`` for NEVER and ALWAYS).

    Script keys carry their spaces (``" dark "``, ``" dra"``); improved keys are bare and
    are checked against word boundaries.
    """
    kind: str
    key: str
    text: str          # the term as the script sees it (lower-cased, trimmed)


def term_text(value: Any) -> str:
    """``String(term).toLowerCase().trim()`` (``null`` is the empty term)."""
    return js_trim(js_lower("" if value is None else js_string(value)))


def compile_term(value: Any, profile: str) -> Term:
    """Compile one keyword or gate term (any JSON value) for ``profile``."""
    t = term_text(value)
    if profile == IMPROVED:
        return _compile_improved(t)
    if not t:
        return Term(NEVER, "", t)
    if t.endswith("*"):
        stem = t[:-1]
        if not stem:
            return Term(ALWAYS, "", t)
        if _STEM_BODY.fullmatch(stem):
            return Term(STEM, " " + stem, t)
        return Term(NEVER, "", t)
    if _HAYSTACK_WORDS.fullmatch(t):
        return Term(PHRASE, " " + t + " ", t)
    return Term(NEVER, "", t)


def _compile_improved(t: str) -> Term:
    if not t:
        return Term(NEVER, "", t)
    if t.endswith("*"):
        if t == "*":
            return Term(ALWAYS, "", t)
        stem = normalise_improved(t[:-1])
        return Term(STEM, stem, t) if stem else Term(NEVER, "", t)
    norm = normalise_improved(t)
    return Term(PHRASE, norm, t) if norm else Term(NEVER, "", t)
