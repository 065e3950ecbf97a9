"""What the match core compiles (:class:`KeySpec`, one per entry) and the special keys of its plans.

Special keys are the keys of a compiled book that cannot be decided per text.

A plain key that can be matched text by text becomes a key variant (an int, its vid, in an
:class:`~lorescan.match.compile.EntryPlan`). Every other key is one of the small immutable
values below, evaluated by :class:`~lorescan.match.view.ScanView` on the assembled haystack
(or text by text, for line-local regexes):

- :class:`RegexKey`: a ``/pattern/flags`` key;
- :class:`PlainKey`: a plain key that no per-text automaton can decide (it holds U+0001, is
  empty after trimming, or ends in ``"\\n"`` so it can span the joiner);
- :class:`MacroKey`: a key holding ``{{`` under a substitution hook, classified again per
  scan once the macros are expanded.

Code tells them apart by type (``type(ref) is RegexKey``: as cheap as the old tag check) and
reads named fields, never positions: they are frozen slotted dataclasses, so ``ref[1]`` fails
loudly, two kinds never compare equal, and they hash (a view caches results per
``(key, window)``) and pickle by value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Union

from ..js.regex import JSRegex

__all__ = ["RegexKey", "PlainKey", "MacroKey", "SpecialKey", "KeyRef", "SPECIAL_KEY_TYPES", "KeySpec"]


@dataclass(frozen=True, slots=True)
class RegexKey:
    """A regex key.

    ``rx``: the compiled :class:`~lorescan.js.regex.JSRegex`; ``rid``: its index in
    ``CompiledKeys.regexes`` (-1: made at scan time from a macro key, so not in the book);
    ``lit``: the prefilter, the vid of a literal every match contains, a tuple of vids one of
    which every match contains, or ``SKIP`` (-1) for none (see ``compile.literal_absent``);
    ``raw``: the entry's key string as stored (for cut-off reports).
    """

    rx: JSRegex
    rid: int
    lit: int | tuple[int, ...]
    raw: str


@dataclass(frozen=True, slots=True)
class PlainKey:
    """A plain key matched on the haystack with ``match_plain_key``: ``text`` (trimmed, as
    matched), ``case_sensitive``, ``whole_words``, and ``raw``, the key as stored."""

    text: str
    case_sensitive: bool
    whole_words: bool
    raw: str


@dataclass(frozen=True, slots=True)
class MacroKey:
    """A key holding ``{{`` when a substitution hook is given: ``raw`` is expanded by the hook
    at scan time, then trimmed and classified like any key (``case_sensitive`` and
    ``whole_words`` are the entry's resolved options; ``literal``: plain text even in
    ``/pattern/flags`` form, see :attr:`KeySpec.literal`)."""

    raw: str
    case_sensitive: bool
    whole_words: bool
    literal: bool = False


SpecialKey = Union[RegexKey, PlainKey, MacroKey]
# A plan's reference to one key: a vid (>= 0), SKIP (-1: never matches in this path), or a special key.
KeyRef = Union[int, RegexKey, PlainKey, MacroKey]
SPECIAL_KEY_TYPES = (RegexKey, PlainKey, MacroKey)


class KeySpec(NamedTuple):
    """One entry's keys as the match core compiles them, whatever engine the entry belongs to.

    An immutable record (a NamedTuple: a compiler makes one per entry, and this is the
    cheapest immutable value Python builds; ``spec._replace(fuzzy=80.0)`` makes a variant).

    SillyTavern mode builds one per entry (``lorescan.st.compiled.key_spec``);
    lorebook-slot mode builds them from its pool entries. :func:`~lorescan.match.compile.compile_keys`
    turns a sequence of them into a :class:`~lorescan.match.compile.CompiledKeys` whose entry
    ``i`` is ``specs[i]``; a :class:`~lorescan.match.view.EntryMatch` answers in their terms
    (``primary`` indexes ``primary``, ``secondary`` has one bool per ``secondary`` key).

    Attributes:
        primary: the primary keys as stored (untrimmed, macros unexpanded). A key in
            ``/pattern/flags`` form that parses as a regex is a regex key, any other is plain
            text (SillyTavern's per-key rule), unless ``literal`` says otherwise; a key holding
            ``{{`` is classified after the scan's substitution hook expands it.
        secondary: the secondary keys, the same way (how they combine is the engine's business).
        content: the text the entry contributes to recursion (its key hits are computed once).
        case_sensitive: None: ``MatchOptions.case_sensitive``.
        whole_words: None: ``MatchOptions.match_whole_words``.
        fuzzy: the typo-tolerance threshold (1-100) of the plain keys, None for exact keys
            only (applied when ``MatchOptions.word_chars`` is ``"unicode"``, see match/fuzzy.py).
        uid: names the entry in errors (``RegexKeyError.entry``; the field is ``key[i]`` or
            ``keysecondary[i]``).
        literal: keys (as stored, primary or secondary) that are plain text even in
            ``/pattern/flags`` form: never a regex, and matched exactly even when ``fuzzy``
            is set (lorebook-slot mode's ``use_regex: false`` keys).
    """

    primary: tuple[str, ...]
    secondary: tuple[str, ...] = ()
    content: str = ""
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    fuzzy: float | None = None
    uid: int | str = 0
    literal: frozenset[str] = frozenset()
