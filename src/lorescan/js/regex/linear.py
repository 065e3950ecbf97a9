"""How a JS regex key is run, and what one evaluation may cost, decided from the pattern alone.

:mod:`lorescan.js.regex.translate` emits a JS pattern as a ``regex`` (V0) pattern that spells
every class, case closure, ``\\b``, ``^`` and ``$`` out explicitly. This module reads the same
parse tree (:mod:`lorescan.js.regex.parser`), lowered node for node to what that translation
spells (:class:`_Lowering`), once per regex, and decides:

**Linear path.** A translation without lookaround (other than the spelt-out ASCII ``\\b`` and
``\\B``), backreference, property escape or ``^``/``$`` under ``m`` is re-emitted for RE2
(``google-re2``): code points as ``\\x{..}``, negated classes as explicit ranges, ``\\Z`` as
``\\z``, ``\\b`` as RE2's ``\\b`` (RE2's word characters are exactly JS's ``[0-9A-Za-z_]``), an
``[Ss]`` or ``[Kk]`` inside an alternation as ``(?:S|s)`` (RE2 widens a merged two-case class to
U+017F / U+212A).
Whether a match *exists* does not depend on backtracking order (greedy or lazy, alternative
order, JS's empty-iteration rule: without backreferences or lookarounds the only state is the
position), so RE2's answer is JS's answer. RE2 works on UTF-8 and cannot hold surrogates, so
without ``u`` (where texts are UTF-16 code units) every surrogate unit, in the pattern and in
the text, is moved to the private plane at ``U+F0000 + (unit - U+D800)``; such texts hold no
astral characters, so nothing else is there. With ``u`` a text holding a lone surrogate takes
the backtracking path. RE2 runs in time linear in the text: at most about
``bytes x program size`` steps, its worst case once its DFA cache gives up (measured here:
about 6 ns a step, ``.{0,1000}q`` over 1 MB of Cyrillic took 93 s). :func:`Plan.cost`
charges exactly that bound.

**Backtracking path** (``regex``), for the rest. Its cost is bounded from the parse tree by
counting the search tree a backtracking matcher can walk from one start (:func:`_bound`):
its *leaves* (the ways a node can end, where what follows is tried) and its *nodes* (the
steps inside it), each at most ``C * (n+1)**d`` for a text of ``n`` characters. A sequence
``A B`` has ``L_A * L_B`` leaves and ``N_A + L_A * N_B`` nodes, an alternation sums (only one
alternative gets past its first step when they start with disjoint characters), a
quantifier over a body with one way to match is a chain of at most ``n+1`` iterations, a
lookaround is atomic (one way out) and a backreference compares up to ``n`` characters. An
evaluation costs at most ``(n+1) * N`` steps (every start). ``/\\w+(?=ing)/`` is quadratic,
``/^.*x.*$/m`` cubic. A variable quantifier over a body with several ways to match
(``(a|aa)+``, ``(a+)+``: exponential) has no such bound: that regex is never run on this
path, and every evaluation of it is reported as cut off.

So the cost of an evaluation is a pure function of (pattern, text): no clock is read.
``lorescan.match.regexscope.RegexBudget`` charges these nominal costs (seconds at the rates
below) against the scan's allowance, and cuts off an evaluation whose cost exceeds what is
left, the same way on any machine under any load.
"""
from __future__ import annotations

import functools
import math

import re2 as _re2

from .chars import (_LINE_TERMINATORS, _MAX_CP, _REGEX_MAX_REPEAT, _WORD, _WORD_IU, _case_classes, _CharSet,
                    _closed, _complement, _merge)
from .parser import parse
from .tree import Alt, Backref, Char, Class, Concat, Dot, Group, Node, Parsed, Repeat

__all__ = ["Plan", "plan_of", "RE2_STEP_SECONDS", "BACKTRACK_STEP_SECONDS", "linear_text"]

RE2_STEP_SECONDS = 6e-9            # one byte against one RE2 instruction, NFA worst case (measured)
BACKTRACK_STEP_SECONDS = 3e-8      # one step of the bound on `regex` (measured: 24 ns on /\w+(?=ing)/)
_MAX_DEGREE = 8                    # a bound past this is no bound worth computing
_MAX_WAYS = 1e15
_SURROGATES = (0xD800, 0xDFFF)
_PRIVATE = 0xF0000                 # where non-u surrogate units go for RE2



class _NotLinear(Exception):
    """The translation uses a construct RE2 cannot run exactly (the message says which)."""


# -- the tree, as the translation spells it ------------------------------------------------------
# Nodes: ("char", cp) ("set", ranges, props) ("anchor", "A"|"Z") ("look", kind, node)
# ("backref",) ("group", node) ("seq", [nodes]) ("alt", [nodes]) ("rep", node, lo, hi): the
# translation (lorescan.js.regex.translate) node for node, every set as it is emitted (case
# closed under i, negated classes with their property escapes kept as a "^" set).

def _seq(items: list[tuple]) -> tuple:
    return items[0] if len(items) == 1 else ("seq", items)


def _alt(branches: list[tuple]) -> tuple:
    return branches[0] if len(branches) == 1 else ("alt", branches)


def _set_node(cs: _CharSet, negate: bool) -> tuple:
    """A set as ``_CharSet.emit`` writes it: the empty set as ``(?!)``, one character as itself."""
    if not cs.ranges and not cs.props:
        return ("set", ((0, _MAX_CP),), ()) if negate else ("look", "?!", ("seq", []))
    if not negate and not cs.props and len(cs.ranges) == 1 and cs.ranges[0][0] == cs.ranges[0][1]:
        return ("char", cs.ranges[0][0])
    if negate:
        if cs.props:
            return ("set", (), ("^",) + cs.props + tuple(f"{a:x}-{b:x}" for a, b in cs.ranges))
        return ("set", _complement(cs.ranges), ())
    return ("set", cs.ranges, cs.props)


_LINE_ENDS = ("set", _merge(_LINE_TERMINATORS), ())


class _Lowering:
    def __init__(self, parsed: Parsed) -> None:
        self.parsed = parsed
        self.u, self.i, self.s, self.m = parsed.unicode, parsed.ignore_case, "s" in parsed.flags, "m" in parsed.flags
        self.reset = parsed.backrefs

    def top(self) -> tuple:
        body = self.node(self.parsed.root)
        if not self.reset:
            return body
        return _seq([("group", ("seq", []))] * self.parsed.groups + [("group", body)])

    def node(self, node: Node) -> tuple:
        if isinstance(node, Char):
            cls = _case_classes(self.u)[0].get(node.cp) if self.i else None
            return _set_node(_CharSet((c, c) for c in cls), False) if cls else ("char", node.cp)
        if isinstance(node, Concat):
            return _seq([self.node(item) for item in node.items])
        if isinstance(node, Alt):
            return _alt([self.node(a) for a in node.alts])
        if isinstance(node, Class):
            cs = node.charset()
            return _set_node(_closed(cs.ranges, cs.props, self.i, self.u), node.negate)
        if isinstance(node, Dot):
            return _set_node(_CharSet(() if self.s else _LINE_TERMINATORS), True)
        if isinstance(node, Group):
            inner = self.node(node.body)
            if node.kind in ("capture", "noncap"):
                return ("group", inner)
            if node.kind in ("?=", "?!") and not self.u:
                return ("group", ("look", node.kind, inner))
            return ("look", node.kind, inner)
        if isinstance(node, Repeat):
            return self.repeat(node)
        if isinstance(node, Backref):
            return ("group", ("seq", [])) if node.inside else ("backref",)
        return self.assertion(node.kind)

    def assertion(self, kind: str) -> tuple:
        if kind == "^":
            return ("group", ("alt", [("look", "?<=", _LINE_ENDS), ("anchor", "A")])) if self.m else ("anchor", "A")
        if kind == "$":
            return ("look", "?=", ("alt", [_LINE_ENDS, ("anchor", "Z")])) if self.m else ("anchor", "Z")
        w = _set_node(_CharSet(_WORD_IU if (self.u and self.i) else _WORD), False)
        pairs = (("?<=", "?!"), ("?<!", "?=")) if kind == "b" else (("?<=", "?="), ("?<!", "?!"))
        return ("group", ("alt", [("seq", [("look", behind, w), ("look", ahead, w)]) for behind, ahead in pairs]))

    def repeat(self, node: Repeat) -> tuple:
        body = node.body
        atom = self.node(body)
        lo = min(node.lo, _REGEX_MAX_REPEAT)
        hi = None if node.hi is None or node.hi > _REGEX_MAX_REPEAT else node.hi
        if self.reset and type(body) is Group and body.last > body.groups:
            atom = ("group", _seq([("group", ("seq", []))] * (body.last - body.groups) + [atom]))
        elif not ((type(body) is Group and body.kind != "capture") or (type(body) is Backref and body.inside)):
            atom = ("group", atom)
        return ("rep", atom, lo, hi)


# -- RE2 emission -------------------------------------------------------------------------------

def _boundary(node: tuple) -> str | None:
    """``\\b`` / ``\\B`` when ``node`` is the translator's spelling of one over ASCII words."""
    if node[0] != "alt" or len(node[1]) != 2:
        return None
    kinds = []
    for branch in node[1]:
        if branch[0] != "seq" or len(branch[1]) != 2:
            return None
        for part in branch[1]:
            if part[0] != "look" or part[2] != ("set", _WORD, ()):
                return None
        kinds.append(tuple(part[1] for part in branch[1]))
    if kinds == [("?<=", "?!"), ("?<!", "?=")]:
        return "\\b"
    if kinds == [("?<=", "?="), ("?<!", "?!")]:
        return "\\B"
    return None


class _Emitter:
    def __init__(self, unicode_mode: bool) -> None:
        self.u = unicode_mode
        self.alt = 0                   # how many alternations the node being emitted is inside

    def cp(self, cp: int) -> str:
        if _SURROGATES[0] <= cp <= _SURROGATES[1]:
            if self.u:
                raise _NotLinear("a lone surrogate in a u pattern")
            cp = _PRIVATE + cp - _SURROGATES[0]
        return f"\\x{{{cp:x}}}"

    def ranges(self, ranges: tuple[tuple[int, int], ...]) -> str:
        out: list[str] = []
        runes: list[tuple[int, int]] = []
        for lo, hi in ranges:
            if self.u:                 # texts on this path hold no lone surrogate: drop them
                parts = [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)]
            else:                      # texts are code units: nothing astral; surrogates moved
                parts = [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), min(hi, 0xFFFF)),
                         (max(lo, 0xD800), min(hi, 0xDFFF))]
            for a, b in parts:
                if a > b:
                    continue
                if not self.u and a >= 0xD800 and b <= 0xDFFF:
                    a, b = _PRIVATE + a - 0xD800, _PRIVATE + b - 0xD800
                out.append(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}")
                runes.append((a, b))
        if self.alt and sorted(runes) in ([(0x4B, 0x4B), (0x6B, 0x6B)], [(0x53, 0x53), (0x73, 0x73)]):
            # RE2 parses a class of exactly an ASCII letter's two cases ([Ss]) as a case-folded
            # literal, and where it merges that literal with its neighbours, the alternatives
            # of an alternation (S|x, and a|k once Sa|Sk loses its prefix), it adds the
            # letter's Unicode fold orbit: U+017F for s, U+212A for k (no other ASCII letter
            # has one), where JS matches only what its own case table says. Two plain
            # literals are merged rune by rune. Outside alternations the case-folded literal
            # is kept: RE2 searches for a literal prefix of those fast.
            return f"(?:{out[0]}|{out[1]})"
        return f"[{''.join(out)}]" if out else "[^\\x{0}-\\x{10ffff}]"

    def emit(self, node: tuple) -> str:
        kind = node[0]
        if kind == "char":
            return self.cp(node[1])
        if kind == "set":
            if node[2]:
                raise _NotLinear("a Unicode property escape")
            return self.ranges(node[1])
        if kind == "anchor":
            return "\\A" if node[1] == "A" else "\\z"
        if kind == "seq":
            return "".join(self.emit(n) for n in node[1])
        if kind == "alt":
            self.alt += 1
            try:
                return "|".join(self.emit(n) for n in node[1])
            finally:
                self.alt -= 1
        if kind == "group":
            b = _boundary(node[1])
            return b if b is not None else f"(?:{self.emit(node[1])})"
        if kind == "rep":
            _, body, lo, hi = node
            if lo > 1000 or (hi is not None and hi > 1000):
                raise _NotLinear("a counted repeat above RE2's 1,000")
            q = "*" if (lo, hi) == (0, None) else "+" if (lo, hi) == (1, None) else "?" if (lo, hi) == (0, 1) \
                else f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
            return f"(?:{self.emit(body)}){q}"
        if kind == "look":
            if node[1] == "?!" and node[2] == ("seq", []):
                return "[^\\x{0}-\\x{10ffff}]"               # (?!) : the empty class
            raise _NotLinear("a lookaround (or ^/$ under m, or \\b under iu)")
        if kind == "backref":
            raise _NotLinear("a backreference")
        raise _NotLinear(f"{kind}")


# -- the backtracking bound ---------------------------------------------------------------------

def _first(node: tuple) -> tuple[tuple[int, int], ...] | None:
    """The characters a match of ``node`` must start with, when it cannot match empty; else None."""
    kind = node[0]
    if kind == "char":
        return ((node[1], node[1]),)
    if kind == "set":
        return None if node[2] else node[1]
    if kind == "seq":
        return _first(node[1][0]) if node[1] else None
    if kind == "group":
        return _first(node[1])
    if kind == "rep":
        return _first(node[1]) if node[2] >= 1 else None
    if kind == "alt":
        sets = [_first(b) for b in node[1]]
        return None if any(x is None for x in sets) else _merge(r for x in sets for r in x)  # type: ignore[union-attr]
    return None


def _disjoint(sets: list[tuple[tuple[int, int], ...] | None]) -> bool:
    if any(x is None for x in sets):
        return False
    spans = sorted(r for x in sets for r in x)  # type: ignore[union-attr]
    return all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


_Poly = tuple[float, int]              # (C, d): at most C * (n+1)**d


def _add(a: _Poly, b: _Poly) -> _Poly:
    return a[0] + b[0], max(a[1], b[1])


def _mul(a: _Poly, b: _Poly) -> _Poly:
    return _checked(a[0] * b[0], a[1] + b[1])


def _checked(c: float, d: int) -> _Poly:
    if c > _MAX_WAYS or d > _MAX_DEGREE or math.isinf(c):
        raise OverflowError("too many ways to match")
    return c, d


_ONE: _Poly = (1.0, 0)
_N: _Poly = (1.0, 1)


def _bound(node: tuple) -> tuple[_Poly, _Poly]:
    """(leaves, nodes) of the backtracking search tree of ``node`` from one position, each at
    most ``C * (n+1)**d``: *leaves* the ways it can end (where what follows is tried),
    *nodes* the steps spent inside it. A sequence ``A B`` has ``L_A * L_B`` leaves and
    ``N_A + L_A * N_B`` nodes; an alternation sums (or, when its alternatives start with
    disjoint characters, only one of them gets past its first step); a quantifier over a body
    with one way to match is a chain of at most ``k`` iterations (``k = n+1`` when unbounded or
    large): ``k`` leaves, ``k * N_body`` nodes. Raises OverflowError when there is no such bound:
    a variable quantifier over a body with several ways to match (``(a|aa)+``, ``(a+)+``)."""
    kind = node[0]
    if kind in ("char", "set", "anchor"):
        return _ONE, _ONE
    if kind == "backref":
        return _ONE, _N                                   # compares up to n characters
    if kind in ("group", "ci"):
        return _bound(node[1])
    if kind == "look":                                    # atomic: one way out, its search inside
        return _ONE, _add(_ONE, _bound(node[2])[1])
    if kind == "seq":
        leaves, nodes = _ONE, _ONE
        for part in node[1]:
            lp, np_ = _bound(part)
            leaves, nodes = _mul(leaves, lp), _add(nodes, _mul(leaves, np_))
        return leaves, nodes
    if kind == "alt":
        parts = [_bound(b) for b in node[1]]
        nodes = _ONE
        for p in parts:
            nodes = _add(nodes, p[1])
        if _disjoint([_first(b) for b in node[1]]):
            leaves = max((p[0] for p in parts), key=lambda x: (x[1], x[0]))
            return leaves, nodes
        leaves = parts[0][0]
        for p in parts[1:]:
            leaves = _add(leaves, p[0])
        return _checked(*leaves), nodes
    _, body, lo, hi = node
    lb, nb = _bound(body)
    if hi is not None and hi <= 1:                        # x? or x{1}
        return (_add(lb, _ONE) if lo == 0 else lb), _add(_ONE, nb)
    if lb == _ONE:
        k: _Poly = (float(hi - lo + 1), 0) if hi is not None and hi - lo + 1 <= 64 else _N
        return k, _mul(k, _add(_ONE, nb))
    if hi is None:
        raise OverflowError("a variable quantifier over a body that matches in more than one way")
    leaves = _checked(lb[0] ** hi * (hi - lo + 1), lb[1] * hi)
    return leaves, _mul(leaves, _add(_ONE, nb))


class Plan:
    """How one regex runs: ``re2`` (compiled, or None: backtracking), ``reason`` (why it
    backtracks), ``program`` (RE2's program size), and the backtracking bound from one start:
    ``nodes`` (steps) and ``leaves`` as ``(C, d)`` for ``C * (n+1)**d``, both None when there
    is none (``unbounded`` says why)."""

    __slots__ = ("re2", "reason", "program", "leaves", "nodes", "unbounded", "sticky")

    def __init__(self, parsed: Parsed) -> None:
        self.sticky = sticky = "y" in parsed.flags
        unicode_mode = parsed.unicode
        self.re2, self.reason, self.program = None, None, 0
        self.unbounded: str | None = None
        tree = _Lowering(parsed).top()
        try:
            text = _Emitter(unicode_mode).emit(tree)
            options = _re2.Options()
            options.log_errors = False
            options.never_capture = True
            self.re2 = _re2.compile(text, options)
            self.program = self.re2.programsize
        except _NotLinear as exc:
            self.reason = str(exc)
        except _re2.error as exc:
            self.re2, self.reason = None, f"RE2 refused it ({exc})"
        self.leaves: _Poly | None
        self.nodes: _Poly | None
        try:
            self.leaves, self.nodes = _bound(tree)
        except OverflowError as exc:
            self.leaves, self.nodes, self.unbounded = None, None, str(exc)

    def linear_cost(self, nbytes: int) -> float:
        """Nominal seconds of one RE2 evaluation on a text of ``nbytes`` UTF-8 bytes."""
        return (nbytes + 1) * max(self.program, 1) * RE2_STEP_SECONDS

    def backtrack_cost(self, n: int) -> float:
        """Nominal seconds of one backtracking evaluation on ``n`` characters (inf: no bound)."""
        if self.nodes is None:
            return math.inf
        starts = 1 if self.sticky else n + 1
        c, d = self.nodes
        return starts * c * (n + 1) ** d * BACKTRACK_STEP_SECONDS


@functools.lru_cache(maxsize=4096)
def plan_of(pattern: str, flags: str) -> Plan:
    """The :class:`Plan` of the JS regex ``/pattern/flags`` (memoised: books repeat their patterns)."""
    return Plan(parse(pattern, flags))


_SURROGATE_TABLE = {cp: _PRIVATE + cp - 0xD800 for cp in range(0xD800, 0xE000)}


def linear_text(prepared: str, unicode_mode: bool) -> bytes | None:
    """The UTF-8 bytes RE2 searches for a prepared text (code units without ``u``, code
    points with it), or None when RE2 cannot see it exactly (a lone surrogate under ``u``)."""
    if prepared.isascii():
        return prepared.encode("ascii")
    try:
        return prepared.encode("utf-8")
    except UnicodeEncodeError:
        if unicode_mode:
            return None
        return prepared.translate(_SURROGATE_TABLE).encode("utf-8")
