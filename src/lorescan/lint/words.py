"""The book's language, detected cheaply, and keys that hide inside its common words (LS701).

Languages with a word list: English (``words_en.txt``: the 4,000 most frequent words, most
frequent first; how it is made: ``tests/data/lint/make_words_en.py``). Detection looks at the
entries' contents only: the share of letters that are ASCII, then the share of words that
are among the most frequent ones of a language. A book in another language (or a mix) is
not checked.
"""
from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Iterable

__all__ = ["detect_language", "common_words", "hidden_in_words", "LANGUAGES"]

LANGUAGES = ("en",)
_SAMPLE = 200_000                   # characters of content looked at
_WORD = re.compile(r"[A-Za-z]+")
# Endings that make a word a form of the key rather than another word ("dragon" in "dragons").
_INFLECTIONS = ("", "s", "es", "ed", "d", "ing", "er", "ers", "ly", "y", "n", "en", "ness", "ish")


@functools.lru_cache(maxsize=None)
def common_words(language: str) -> tuple[str, ...]:
    """The word list of ``language``, most frequent first."""
    text = resources.files(__package__).joinpath(f"words_{language}.txt").read_text(encoding="utf-8")
    return tuple(w for w in text.split("\n") if w and not w.startswith("#"))


@functools.lru_cache(maxsize=None)
def _joined(language: str) -> str:
    return "\n" + "\n".join(common_words(language)) + "\n"


def detect_language(texts: Iterable[str]) -> str | None:
    """``"en"`` when the texts read as English, else None (unknown, mixed or not supported)."""
    parts: list[str] = []
    size = 0
    for t in texts:
        parts.append(t)
        size += len(t)
        if size >= _SAMPLE:
            break
    sample = "\n".join(parts)[:_SAMPLE]
    letters = sum(1 for c in sample if c.isalpha())
    if letters < 200:
        return None
    ascii_letters = sum(1 for c in sample if c.isascii() and c.isalpha())
    if ascii_letters < 0.8 * letters:
        return None
    words = [w.lower() for w in _WORD.findall(sample)]
    top = set(common_words("en")[:100])
    share = sum(1 for w in words if w in top) / max(1, len(words))
    return "en" if share >= 0.2 else None


def hidden_in_words(key: str, language: str, limit: int = 4) -> list[str]:
    """Common words of ``language`` that contain ``key`` (lowercase) and are not merely a form
    of it, most frequent first, at most ``limit``."""
    joined = _joined(language)
    found: list[tuple[int, str]] = []
    start = joined.find(key)
    while start != -1:
        line_start = joined.rfind("\n", 0, start) + 1
        line_end = joined.find("\n", start)
        word = joined[line_start:line_end]
        if not (word.startswith(key) and word[len(key):] in _INFLECTIONS):
            found.append((line_start, word))
        start = joined.find(key, line_end)
    found.sort()
    return [w for _, w in found[:limit]]
