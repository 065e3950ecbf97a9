"""The parse tree of a JS regex, and the errors of the package.

:func:`lorescan.js.regex.parser.parse` builds it once per key; the translator, the literal
prefilter, the checks and the RE2 plan all read it. Every node has ``start``/``end``: its span
in the parsed source (the pattern as UTF-16 code units without ``u``, as code points with it).
Node set:

* :class:`Char` one character (``verbatim``: written as itself, or as an escape of a syntax
  character, ``/`` or ``-``: the literal scan trusts only those);
* :class:`Class` a character class (``[...]``, or ``\\d`` ``\\w`` ``\\s`` ``\\p{..}`` outside one);
* :class:`Dot`, :class:`Assertion` (``^ $ \\b \\B``), :class:`Backref`;
* :class:`Group` (capturing, named, non-capturing or a lookaround), :class:`Alt` (every
  disjunction, one alternative or more), :class:`Concat`, :class:`Repeat`.

A tree is shared (the parse is memoised) and never changed after the parse; the classes are
not ``frozen`` only because a frozen dataclass is slower to build (a book parses every key).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .chars import _CharSet

__all__ = ["JSRegexError", "RegexTimeout", "RegexTooComplex", "Char", "Class", "Dot", "Assertion", "Backref",
           "Group", "Alt", "Concat", "Repeat", "Node", "Parsed", "LOOKAROUNDS"]


class JSRegexError(ValueError):
    """The pattern/flags pair is not a valid JS RegExp (JS would throw a SyntaxError)."""


class RegexTimeout(Exception):
    """One regex evaluation ran past its time limit."""


class RegexTooComplex(Exception):
    """A pattern past a size limit: its length or group nesting (refused before it is
    translated), or the terms its counted repeats build (refused before it is compiled).

    Not a JSRegexError: the key is a valid JS regex, so it must not silently become a plain key.
    ``expansion``: the pattern's terms when that was the limit passed (else None).
    """

    expansion: int | None = None


@dataclass(slots=True)
class Char:
    cp: int
    start: int
    end: int
    verbatim: bool = False


@dataclass(slots=True)
class Class:
    """``items``: in source order, code-point ranges ``(lo, hi)`` and the sets of class escapes.
    ``bracket``: written ``[...]`` (False: a class escape such as ``\\d`` outside a class)."""
    items: tuple[tuple[int, int] | _CharSet, ...]
    negate: bool
    start: int
    end: int
    bracket: bool = True

    def charset(self) -> _CharSet:
        ranges = [i for i in self.items if isinstance(i, tuple)]
        sets = [i for i in self.items if not isinstance(i, tuple)]
        return _CharSet(ranges + [r for s in sets for r in s.ranges], [p for s in sets for p in s.props])


@dataclass(slots=True)
class Dot:
    start: int
    end: int


@dataclass(slots=True)
class Assertion:
    kind: str                   # "^", "$", "b" or "B"
    start: int
    end: int


@dataclass(slots=True)
class Backref:
    """``number``: the group referred to (by number, or by ``name`` resolved after the parse).
    ``inside``: written inside that group, where the capture is always undefined (matches "")."""
    number: int
    name: str | None
    inside: bool
    start: int
    end: int


LOOKAROUNDS = ("?=", "?!", "?<=", "?<!")


@dataclass(slots=True)
class Group:
    """``kind``: "capture" (``number``, ``name`` when named), "noncap", or a lookaround opener of
    :data:`LOOKAROUNDS`. ``groups``: the capturing groups numbered before it (its own and those
    inside it are ``groups+1 .. last``)."""
    kind: str
    body: Alt
    number: int
    name: str | None
    groups: int
    last: int
    start: int
    end: int


@dataclass(slots=True)
class Alt:
    alts: tuple[Concat, ...]
    start: int
    end: int


@dataclass(slots=True)
class Concat:
    items: tuple[Node, ...]
    start: int
    end: int


@dataclass(slots=True)
class Repeat:
    """``lo``/``hi`` as written (``hi`` None: unbounded), before any clamping."""
    body: Node
    lo: int
    hi: int | None
    lazy: bool
    start: int
    end: int


Node = Union[Char, Class, Dot, Assertion, Backref, Group, Alt, Concat, Repeat]


@dataclass(slots=True)
class Parsed:
    """A parsed pattern: its ``root``, the flags it was parsed under, the source it spans
    (``src``), its capturing ``groups``, whether it holds a backreference, ``depth``, the
    deepest group nesting (lookarounds included), and the number of each group ``name``."""
    root: Alt
    src: str
    flags: str
    groups: int
    backrefs: bool
    depth: int
    names: dict[str, int]

    @property
    def unicode(self) -> bool:
        return "u" in self.flags

    @property
    def ignore_case(self) -> bool:
        return "i" in self.flags
