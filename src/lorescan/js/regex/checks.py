"""Facts of a parsed JS regex that bound or describe its cost: the terms the regex engine builds
(counted repeats multiplied out), the group nesting, and a classic catastrophic shape."""
from __future__ import annotations

from .tree import Alt, Assertion, Group, Node, Parsed, Repeat

__all__ = ["expansion", "hazard"]

NESTED = "nested unbounded quantifiers (like (a+)+)"
OVERLAPPING = "an unbounded quantifier over overlapping alternatives (like (a|aa)+)"


def expansion(parsed: Parsed) -> int:
    """The terms ``regex`` builds for the pattern: one per term (an atom, an assertion or a
    lookaround), and a counted atom, with what it nests, once per repetition of its minimum
    (``a{1000000}`` holds a million nodes, ~260 bytes each)."""
    return _alt_units(parsed.root)


def _alt_units(alt: Alt) -> int:
    return sum(_term_units(item) for concat in alt.alts for item in concat.items)


def _term_units(item: Node) -> int:
    atom = item.body if type(item) is Repeat else item
    units = 1 + (_alt_units(atom.body) if type(atom) is Group else 0)
    if type(item) is Repeat and item.lo > 1:
        units *= item.lo
    return units


def hazard(parsed: Parsed, overlap: dict[int, bool]) -> str | None:
    """A classic catastrophic-backtracking shape under a group, or None: unbounded quantifiers
    nested (``(a+)+``; also a group holding two of them, as the translator has always said),
    or an unbounded quantifier over a group whose alternatives overlap (``(a|aa)+``; ``overlap``:
    per disjunction, from :class:`~lorescan.js.regex.translate.Emitter`). The first found,
    inner terms before the term holding them."""
    found: list[str] = []

    def alt(node: Alt) -> int:
        return sum(term(item) for concat in node.alts for item in concat.items)

    def term(item: Node) -> int:
        """The unbounded quantifiers in ``item``, its own included."""
        atom = item.body if type(item) is Repeat else item
        own = 1 if type(item) is Repeat and item.hi is None else 0
        if type(atom) is Assertion:
            return own
        inner = alt(atom.body) if type(atom) is Group else 0
        if type(atom) is Group and atom.kind not in ("capture", "noncap"):
            return inner + own                          # a lookaround: not a shape of its own
        if not found and inner + own > (1 if inner else 0):
            if inner:
                found.append(NESTED)
            elif type(atom) is Group and overlap.get(id(atom.body), False):
                found.append(OVERLAPPING)
        return inner + own

    alt(parsed.root)
    return found[0] if found else None
