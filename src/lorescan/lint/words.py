"""The book's language, detected cheaply, and keys that hide inside its common words (LS701).

Languages with a word list: English (``words_en.txt``: the 4,000 most frequent words, most
frequent first; how it is made: ``tests/data/lint/make_words_en.py``). Detection looks at the
entries' contents only: the share of letters that are ASCII, then the share of words that
are a language's function words (:data:`_FUNCTION_WORDS`). A book in any other language (or a mix) is
checked against its own text instead (:func:`book_vocabulary`): the words its contents use
at least :data:`BOOK_MIN_COUNT` times, in scripts written with spaces.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from importlib import resources
from typing import Callable, Iterable, NamedTuple

import regex

from ..js.text import is_nospace_char

__all__ = ["detect_language", "common_words", "hidden_in_words", "LANGUAGES", "Vocabulary", "book_vocabulary",
           "hidden_in_vocabulary", "BOOK_MIN_COUNT"]

LANGUAGES = ("en",)
_SAMPLE = 200_000                   # characters of content looked at
_WORD = re.compile(r"[A-Za-z]+")
# The closed-class words that make up a third or more of any English prose, short ones included.
# Not the head of words_en.txt: that list ranks tokens of a tokenizer trained on code as well as
# prose (its top 100 holds "return", "class", "public") and keeps words of 3 letters or more only
# (no "a", "of", "to", "in", "is", "it"), so it under-counts prose and over-counts code: English
# books made of short descriptive lines (weyland: 0.19) fell under the threshold and lost the
# English word list, and LS701 then missed keys such as "race" that hide in common words.
_FUNCTION_WORDS = {"en": frozenset("""
    a about after all an and are as at be been but by can could do for from had has have he her him his
    i if in into is it its me my no not of on one or our out she should so than that the their them then
    there they this to up us was we were what when which who will with would you your""".split())}
_LANGUAGE_SHARE = 0.2               # at least this share of the sample's words are function words
# Endings that make a word a form of the key rather than another word ("dragon" in "dragons").
_INFLECTIONS = ("", "s", "es", "ed", "d", "ing", "er", "ers", "ly", "y", "n", "en", "ness", "ish")
# A book without a word list: its own words, letters and marks of any script.
_UNICODE_WORD = regex.compile(r"[\p{L}\p{M}]+")
BOOK_MIN_COUNT = 3                  # a word of the book's text is common from this many occurrences
_BOOK_FORM_SUFFIX = 3               # ... and the key plus up to this many letters is a form of the key


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
    function_words = _FUNCTION_WORDS["en"]
    share = sum(1 for w in words if w in function_words) / max(1, len(words))
    return "en" if share >= _LANGUAGE_SHARE else None


def hidden_in_words(key: str, language: str, limit: int = 4) -> list[str]:
    """Common words of ``language`` that contain ``key`` (lowercase) and are not merely a form
    of it, most frequent first, at most ``limit``."""
    return _hidden(key, _joined(language), lambda word: word.startswith(key) and word[len(key):] in _INFLECTIONS,
                   limit)


class Vocabulary(NamedTuple):
    """A book's own common words (lowercase) and how often each occurs, most frequent first."""

    counts: dict[str, int]
    joined: str                     # "\n" + the words joined by "\n" + "\n"

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.counts)


def book_vocabulary(texts: Iterable[str]) -> Vocabulary:
    """The words of ``texts`` (up to 200,000 characters) seen at least :data:`BOOK_MIN_COUNT`
    times, most frequent first; words with a character of a script written without spaces
    are left out (there a run of letters is a phrase, not a word)."""
    counts: Counter[str] = Counter()
    size = 0
    for t in texts:
        counts.update(w.lower() for w in _UNICODE_WORD.findall(t[:_SAMPLE - size]))
        size += len(t)
        if size >= _SAMPLE:
            break
    common = {w: n for w, n in counts.most_common() if n >= BOOK_MIN_COUNT and not any(map(is_nospace_char, w))}
    return Vocabulary(common, "\n" + "\n".join(common) + "\n")


def is_book_word(key: str) -> bool:
    """Whether ``key`` is one word as :func:`book_vocabulary` splits text."""
    return _UNICODE_WORD.fullmatch(key) is not None and not any(map(is_nospace_char, key))


def hidden_in_vocabulary(key: str, vocabulary: Vocabulary, limit: int = 4) -> list[str]:
    """Words of the book's own text that contain ``key`` (lowercase) and are not a form of it
    (the key plus up to three letters, as inflections go in most languages), most frequent
    first, at most ``limit``."""
    return _hidden(key, vocabulary.joined,
                   lambda word: word.startswith(key) and len(word) - len(key) <= _BOOK_FORM_SUFFIX, limit)


def _hidden(key: str, joined: str, is_form: Callable[[str], bool], limit: int) -> list[str]:
    found: list[tuple[int, str]] = []
    start = joined.find(key)
    while start != -1:
        line_start = joined.rfind("\n", 0, start) + 1
        line_end = joined.find("\n", start)
        word = joined[line_start:line_end]
        if not is_form(word):
            found.append((line_start, word))
        start = joined.find(key, line_end)
    found.sort()
    return [w for _, w in found[:limit]]
