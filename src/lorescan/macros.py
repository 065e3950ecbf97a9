"""Macro substitution that measures what it would build before building it.

A key or a content is checked against its limit (``Limits.max_key_length``,
``max_content_length``) as written, but a macro hook replaces ``{{char}}`` by whatever the
request or the chat says: a 600,000-character name turned the 8-character key ``{{char}}``
into a 600,000-character key that reached the Aho-Corasick automaton, whose recursive free
ends the process (SIGSEGV; see ``lorescan.limits``), and ten ``{{char}}`` in one content
built 6 million characters. So every expansion is held to the limit of the text it produces,
*before* anything is built from it:

* :class:`MacroTable` (what the service and the CLI use) counts the length of an expansion
  from its matches and its values first (:meth:`MacroTable.expanded_length`, no string is
  built), so a text over its limit is never made;
* any other ``substitute`` hook (a plain ``text -> text`` callable given to an engine) is
  called and its result measured after (its own memory is its own business);
* a macro table itself is checked first: ``Limits.max_macro_chars`` (its names and values
  together) and ``Limits.max_macros`` (its names; each becomes an alternative of one regex).

An expansion past its limit raises :class:`~lorescan.errors.LorebookError` naming the limit
and the key or the entry's content: the request (its macro values) is what is wrong.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from .errors import LorebookError
from .limits import DEFAULT_LIMITS, Limits

__all__ = ["MacroTable", "macro_table", "name_macros", "check_macro_table", "expand_within", "expand_content"]


class MacroTable:
    """A ``text -> text`` macro hook whose expansion can be measured before it is built.

    ``pattern`` finds the macros; ``value(match)`` gives a match's replacement. A text with
    none of ``markers`` in it is returned as it is (the common case costs one ``in``).
    """

    __slots__ = ("pattern", "value", "markers", "_key")

    def __init__(self, pattern: re.Pattern[str], value: Callable[[re.Match[str]], str],
                 markers: tuple[str, ...] = ("{{",)) -> None:
        self.pattern, self.value, self.markers = pattern, value, markers
        self._key: tuple | bool | None = None     # False: not a table lookup

    def replay_key(self) -> tuple | None:
        """A value that two hooks share exactly when they substitute every text alike (the
        pattern, the markers and the table), so a turn recorded under one may be replayed under
        the other (``lorescan.st.memo``); None when ``value`` is not a table lookup of this module."""
        key = self._key
        if key is None:
            v = self.value
            key = (self.pattern.pattern, self.pattern.flags, self.markers, v.group,
                   tuple(sorted(v.table.items()))) if type(v) is _Lookup else False
            self._key = key
        return key if isinstance(key, tuple) else None

    def _may_hold(self, text: str) -> bool:
        return any(m in text for m in self.markers)

    def __call__(self, text: str) -> str:
        return self.pattern.sub(self.value, text) if self._may_hold(text) else text

    def expanded_length(self, text: str, stop: int | None = None) -> int:
        """The length ``self(text)`` has, computed without building it; counting stops once it
        is past ``stop`` (then the value returned is only known to be above it)."""
        n = len(text)
        if not self._may_hold(text):
            return n
        for mt in self.pattern.finditer(text):
            n += len(self.value(mt)) - (mt.end() - mt.start())
            if stop is not None and n > stop:
                break
        return n

    def __reduce__(self):           # engines pickle their hooks; a compiled pattern and a bound lookup pickle as is
        return (MacroTable, (self.pattern, self.value, self.markers))


class _Lookup:
    """``match -> table[key(match)]`` (a class, not a lambda, so a MacroTable pickles)."""

    __slots__ = ("table", "group")

    def __init__(self, table: dict[str, str], group: int) -> None:
        self.table, self.group = table, group

    def __call__(self, mt: re.Match[str]) -> str:
        return self.table[mt.group(self.group).lower()]


def check_macro_table(macros: Mapping[str, str], limits: Limits = DEFAULT_LIMITS, *,
                      source: str = "macros") -> None:
    """LorebookError when a macro table has more than ``limits.max_macros`` names or more than
    ``limits.max_macro_chars`` characters of names and values together."""
    if len(macros) > limits.max_macros:
        raise LorebookError(f"{len(macros):,} macros, above the limit max_macros={limits.max_macros:,}",
                            source=source)
    total = 0
    for name, value in macros.items():
        total += len(name) + len(value)
        if total > limits.max_macro_chars:
            raise LorebookError(f"the macros reach {total:,} characters by {name[:40]!r}, above the limit "
                                f"max_macro_chars={limits.max_macro_chars:,}", source=source)


def macro_table(macros: Mapping[str, str], limits: Limits = DEFAULT_LIMITS) -> MacroTable | None:
    """The hook replacing every ``{{name}}`` (name case-insensitive) by its value, as the
    service's ``macros`` field says; None for an empty table. The table is checked first
    (:func:`check_macro_table`)."""
    if not macros:
        return None
    check_macro_table(macros, limits)
    table = {k.lower(): v for k, v in macros.items()}
    pattern = re.compile(r"\{\{(" + "|".join(re.escape(k) for k in sorted(table, key=lambda k: (-len(k), k)))
                         + r")\}\}", re.IGNORECASE)
    return MacroTable(pattern, _Lookup(table, 1))


def name_macros(table: Mapping[str, str], limits: Limits = DEFAULT_LIMITS, *,
                source: str = "macros") -> MacroTable | None:
    """The hook replacing each of ``table``'s literal tokens (``{{user}}``, ``<USER>``, ...,
    matched case-insensitively) by its value; None for an empty table. Checked first like
    :func:`macro_table` (``source`` names where the values came from)."""
    if not table:
        return None
    check_macro_table(table, limits, source=source)
    lowered = {k.lower(): v for k, v in table.items()}
    pattern = re.compile("|".join(re.escape(k) for k in sorted(lowered, key=lambda k: (-len(k), k))), re.I)
    markers = tuple(sorted({k[:2] if k.startswith("{{") else k[0] for k in lowered}))
    return MacroTable(pattern, _Lookup(lowered, 0), markers)


def expand_within(substitute: Callable[[str], str], text: str, limit: int) -> str | None:
    """``substitute(text)``, or None when it is longer than ``limit`` characters. A
    :class:`MacroTable` is measured first and builds nothing past the limit; another hook is
    measured after."""
    if type(substitute) is MacroTable:
        if substitute.expanded_length(text, limit) > limit:
            return None
        return substitute(text)
    out = substitute(text)
    return out if len(out) <= limit else None


def expand_content(substitute: Callable[[str], str], content: str, limits: Limits, *, source: str,
                   entry: object) -> str:
    """An entry's content with its macros expanded, held to ``limits.max_content_length``
    (LorebookError naming the entry and the field ``content`` past it)."""
    out = expand_within(substitute, content, limits.max_content_length)
    if out is None:
        raise LorebookError(f"the content is longer than the limit max_content_length="
                            f"{limits.max_content_length:,} after macro substitution", source=source, entry=entry,
                            field="content")
    return out
