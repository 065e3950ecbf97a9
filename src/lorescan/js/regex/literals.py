"""Required and leading literals of a JS regex key: the prefilter and the search plan, read
from the one parse tree (:mod:`lorescan.js.regex.parser`).

What a scan may skip: a text (or window) that holds none of a key's required literals
cannot hold a match, so the regex is not run there. The literals are found on the parse of
the JS pattern, node by node, as two facts:
  exact: every string the node can match, when that is a small finite set (else None);
  req:   a set of strings one of which every match of the node contains (else None).
A sequence's req is the best of its items' reqs and of the products of consecutive exact
items; an alternation's req is the union of its alternatives' (each must have one). Under
``i`` a literal character stands for its whole JS case class, written as the Python
lowercase of each member (the form the book's case-insensitive automaton pass sees); U+03A3
lowercases by context (Final_Sigma), so it stands for both sigmas. Only BMP characters
that are neither surrogates nor "\n" nor U+0001 go into a literal: a literal then never
spans a haystack joiner, and it matches the same code units whether the regex works on
UTF-16 units or on code points. Anything not understood contributes no requirement.

Only characters written as themselves (or as an escape of a syntax character, ``/`` or ``-``)
and classes written without escapes count; every other node contributes no requirement.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable

from .chars import _case_classes
from .parser import parse
from .tree import Alt, Assertion, Char, Class, Concat, Group, JSRegexError, Node, Parsed, Repeat

__all__ = ["required_literals", "leading_literals", "literal_facts"]

_MAX_LITERALS = 32                      # the largest literal set kept (per node and in the answer)
_LIT_UNKNOWN: tuple[frozenset[str] | None, ...] = (None, None, None)
_LIT_EMPTY: tuple[frozenset[str] | None, ...] = (frozenset(("",)), None, None)
_LitInfo = tuple  # (exact, req, lead): lead, a set one of which every match begins with


def _literal_char(ch: str, ignore_case: bool, unicode_mode: bool) -> frozenset[str] | None:
    """The strings a case-insensitive scan sees for pattern character ``ch`` (see above), or None."""
    cp = ord(ch)
    if cp > 0xFFFF or 0xD800 <= cp <= 0xDFFF or ch in "\n\x01":
        return None
    if not ignore_case:
        return frozenset((ch,))
    if cp < 128:                        # ASCII: the class is the two cases, plus U+017F for s
        low = ch.lower()                # and U+212A (lowercase: k) for k under u
        return frozenset((low, "\u017f")) if unicode_mode and low == "s" else frozenset((low,))
    out: set[str] = set()
    for member in _case_classes(unicode_mode)[0].get(cp, (cp,)):
        low = "\u03c3\u03c2" if member == 0x3A3 else chr(member).lower()
        if any(ord(c) > 0xFFFF or 0xD800 <= ord(c) <= 0xDFFF or c in "\n\x01" for c in low):
            return None
        if member == 0x3A3:
            out.update(low)
        else:
            out.add(low)
    return frozenset(out)


def _lit_product(sets: list[frozenset[str]]) -> frozenset[str] | None:
    acc = frozenset(("",))
    for s in sets:
        if len(acc) * len(s) > _MAX_LITERALS:
            return None
        acc = frozenset(a + b for a in acc for b in s)
    return acc


def _lit_best(candidates: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The most selective usable set: longest shortest literal, then fewest literals."""
    best, best_key = None, None
    for c in candidates:
        if not c or len(c) > _MAX_LITERALS or "" in c:
            continue
        key = (min(map(len, c)), -len(c))
        if best_key is None or key > best_key:
            best, best_key = c, key
    return best



class _Facts:
    """(exact, req, lead) of each node, bottom-up."""

    def __init__(self, parsed: Parsed) -> None:
        self.src = parsed.src
        self.ignore_case, self.unicode_mode = parsed.ignore_case, parsed.unicode

    def char(self, ch: str) -> _LitInfo:
        variants = _literal_char(ch, self.ignore_case, self.unicode_mode)
        return _LIT_UNKNOWN if variants is None else (variants, variants, variants)

    def disjunction(self, node: Alt) -> _LitInfo:
        alts = [self.alternative(a) for a in node.alts]
        if len(alts) == 1:
            return alts[0]
        exact: frozenset[str] | None = None
        if all(a[0] is not None for a in alts):
            union = frozenset().union(*(a[0] for a in alts))
            exact = union if len(union) <= _MAX_LITERALS else None
        reqs = [_lit_best((a[1], a[0])) for a in alts]
        req = None
        if all(r is not None for r in reqs):
            union = frozenset().union(*(r for r in reqs if r is not None))
            req = union if len(union) <= _MAX_LITERALS else None
        lead = None
        if all(a[2] is not None for a in alts):
            union = frozenset().union(*(a[2] for a in alts))
            lead = union if len(union) <= _MAX_LITERALS else None
        return exact, req, lead

    def alternative(self, node: Concat) -> _LitInfo:
        # items: (exact, req, edge); edge: what a repeated atom (x+, x{2,}) matches at least
        # at either end, x^lo, usable as the last piece of a run before it or the first
        # piece of a run after it (bo+b holds "bo" and "ob").
        items: list[tuple[frozenset[str] | None, ...]] = []
        for term in node.items:
            item = self.quantified(term)
            e = item[0]
            if e is not None and len(e) == 1 and items and items[-1][0] is not None and len(items[-1][0]) == 1:
                # two items that each match one known string match their concatenation
                joined = frozenset((next(iter(items[-1][0])) + next(iter(e)),))
                items[-1] = (joined, joined, joined, joined)
            else:
                items.append(item)
        exacts = [item[0] for item in items]
        exact = _lit_product(exacts) if all(e is not None for e in exacts) else None  # type: ignore[arg-type]
        candidates = [item[1] for item in items]
        for start in range(len(items)):     # products of consecutive exact items
            first = items[start][2]
            if first is None:
                continue
            product: frozenset[str] | None = first
            candidates.append(first)
            for e, _, edge, _ in items[start + 1:]:
                piece = e if e is not None else edge
                if piece is None:
                    break
                product = _lit_product([product, piece])     # type: ignore[list-item]
                if product is None:
                    break
                candidates.append(product)
                if e is None:                   # a repeated atom ends the run
                    break
            if product is not None and start + 1 < len(items) and all(
                    item[0] is not None for item in items[start:]):
                break                           # one run reached the end: later starts give less
        # lead: the leading exact items (zero-width ones add ""), then one more item's lead
        lead = frozenset(("",))
        for e, _, edge, item_lead in items:
            piece = e if e is not None else edge if edge is not None else item_lead
            longer = _lit_product([lead, piece]) if piece is not None else None
            if longer is None:
                break
            lead = longer
            if e is None:
                break
        return exact, _lit_best(candidates), (None if "" in lead else lead)

    def quantified(self, term: Node) -> tuple[frozenset[str] | None, ...]:
        """(exact, req, edge, lead) of an atom and its quantifier."""
        if type(term) is not Repeat:
            exact, req, lead = self.atom(term)
            return exact, req, exact, lead
        exact, req, lead = self.atom(term.body)
        lo, hi = term.lo, term.hi
        if lo == 0:
            if hi == 1 and exact is not None:
                optional = exact | {""}
                return optional, None, optional, None
            return None, None, None, None
        # x{lo,} holds x^k for every k <= lo; past a few repetitions the set grows, not its use
        least = _lit_product([exact] * min(lo, 8)) if exact is not None else None
        if hi == lo and lo <= 8:
            return least, _lit_best((req, least)), least, least
        return None, _lit_best((req, least)), least, least if least is not None else lead

    def atom(self, node: Node) -> _LitInfo:
        if isinstance(node, Char):
            return self.char(chr(node.cp)) if node.verbatim else _LIT_UNKNOWN
        if isinstance(node, Assertion):
            return _LIT_EMPTY
        if isinstance(node, Group):
            if node.kind in ("capture", "noncap"):
                return self.disjunction(node.body)
            return _LIT_EMPTY                           # a lookaround matches no characters
        if isinstance(node, Class):
            return self.char_class(node)
        return _LIT_UNKNOWN                             # ., a backreference

    def char_class(self, node: Class) -> _LitInfo:
        if not node.bracket or node.negate or not node.items or "\\" in self.src[node.start:node.end]:
            return _LIT_UNKNOWN
        chars: list[str] = []
        for lo, hi in node.items:                       # type: ignore[misc]
            if hi - lo >= _MAX_LITERALS:
                return _LIT_UNKNOWN
            chars.extend(chr(cp) for cp in range(lo, hi + 1))
        out: set[str] = set()
        for ch in chars:
            variants = _literal_char(ch, self.ignore_case, self.unicode_mode)
            if variants is None:
                return _LIT_UNKNOWN
            out |= variants
        exact = frozenset(out)
        return (exact, exact, exact) if len(exact) <= _MAX_LITERALS else _LIT_UNKNOWN


def literal_facts(parsed: Parsed) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """(:func:`required_literals`, :func:`leading_literals`) of a parsed pattern."""
    try:
        exact, req, lead = _Facts(parsed).disjunction(parsed.root)
    except RecursionError:
        return None, None
    best = _lit_best((req, exact))
    required = tuple(sorted(best)) if best is not None else None
    if "y" in parsed.flags or not lead or "" in lead:
        return required, None
    # a literal that another one begins ("kasha" and "kashas") adds no start of its own
    return required, tuple(sorted(lit for lit in lead if not any(o != lit and lit.startswith(o) for o in lead)))


@functools.lru_cache(maxsize=512)
def _facts(pattern: str, flags: str) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """Both answers from one walk of the tree (a book reads the one, a first search the other)."""
    try:
        return literal_facts(parse(pattern, flags))
    except JSRegexError:
        return None, None


def required_literals(pattern: str, flags: str) -> tuple[str, ...] | None:
    """Literals one of which every match of the JS regex ``/pattern/flags`` contains, or None.

    Sorted; at most 32; each non-empty, without "\\n" or U+0001, and made of BMP characters
    that are not surrogates. Without ``i`` a literal is matched on the raw text; with ``i`` it
    is in Python lowercase and is to be looked for in the lowercased text (``str.lower``,
    which is JS ``toLowerCase``): whatever the regex matches, the lowercased text then holds
    one of them. Conservative: syntax the scan does not follow exactly gives None, never a
    literal that a match may lack. A prefilter only: the regex still decides.
    """
    return _facts(pattern, flags)[0]


def leading_literals(pattern: str, flags: str) -> tuple[str, ...] | None:
    """Literals one of which every match of ``/pattern/flags`` begins with, or None.

    The same form as :func:`required_literals` (lowercase under ``i``): a match can only
    start where one of them starts, so :meth:`JSRegex.search` tries the regex there alone.
    None for a sticky (``y``) regex, which only ever tries index 0.
    """
    return _facts(pattern, flags)[1]
