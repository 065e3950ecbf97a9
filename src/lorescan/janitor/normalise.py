"""Text normalisation of the JanitorAI script engine, and of its improved profile.

Script (docs/janitor-mode.md): lower-case with JavaScript's rules, every character that is
not ``a-z``, ``0-9``, ``_``, ``-`` or JS whitespace becomes a space, runs of ``-`` and
``_`` become a space, whitespace runs collapse to one space, and the ends are trimmed. The
result holds only ``[a-z0-9]`` words separated by single spaces, so the normalisation of
messages joined with a space is the join of their normalisations (empty ones dropped): the
per-message cache relies on it.

Improved: the same, except that every Unicode word character (``lorescan.js.text``'s rule:
letters, marks, numbers, connector punctuation other than ``_``) is kept.
"""
from __future__ import annotations

import re

from ..js.text import JS_WHITESPACE, is_unicode_word_char, js_lower, js_trim

__all__ = ["normalise_script", "normalise_improved", "SCRIPT", "IMPROVED", "PROFILES"]

SCRIPT, IMPROVED = "script", "improved"
PROFILES = (SCRIPT, IMPROVED)

_WS = "".join(sorted(JS_WHITESPACE))
_ws_escaped = "".join(f"\\u{ord(c):04x}" for c in _WS)
_NOT_KEPT = re.compile(f"[^a-z0-9_\\-{_ws_escaped}]")
_DASH_RUN = re.compile(r"[-_]+")
_WS_RUN = re.compile(f"[{_ws_escaped}]+")


def normalise_script(text: str) -> str:
    """The script's ``_normalizeText`` of a string (lower, ASCII rule, dashes, whitespace)."""
    s = _NOT_KEPT.sub(" ", js_lower(text))
    if "-" in s or "_" in s:
        s = _DASH_RUN.sub(" ", s)
    return js_trim(_WS_RUN.sub(" ", s))


def _improved_char(ch: str) -> str:
    if ch in JS_WHITESPACE or ch in "-_":
        return " "
    return ch if is_unicode_word_char(ch) else " "


def normalise_improved(text: str) -> str:
    """Improved profile: keep Unicode word characters, everything else separates words."""
    lowered = js_lower(text)
    if lowered.isascii():
        return normalise_script(lowered)
    s = "".join(map(_improved_char, lowered))
    return js_trim(_WS_RUN.sub(" ", s))
