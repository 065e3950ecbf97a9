"""How a translated JS regex is run, and what one evaluation may cost, decided from the pattern alone.

:mod:`lorescan.js.regex` translates a JS pattern into a ``regex`` (V0) pattern that spells
every class, case closure, ``\\b``, ``^`` and ``$`` out explicitly. This module parses that
translation (a small, fixed grammar: it is our own output) once per regex and decides:

**Linear path.** A translation without lookaround (other than the spelt-out ASCII ``\\b`` and
``\\B``), backreference, property escape or ``^``/``$`` under ``m`` is re-emitted for RE2
(``google-re2``): code points as ``\\x{..}``, negated classes as explicit ranges, ``\\Z`` as
``\\z``, ``\\b`` as RE2's ``\\b`` (RE2's word characters are exactly JS's ``[0-9A-Za-z_]``).
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
evaluation costs at most ``(n+1) * N`` steps (every start). ``/\w+(?=ing)/`` is quadratic,
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

__all__ = ["Plan", "plan_of", "RE2_STEP_SECONDS", "BACKTRACK_STEP_SECONDS", "linear_text"]

RE2_STEP_SECONDS = 6e-9            # one byte against one RE2 instruction, NFA worst case (measured)
BACKTRACK_STEP_SECONDS = 3e-8      # one step of the bound on `regex` (measured: 24 ns on /\w+(?=ing)/)
_MAX_DEGREE = 8                    # a bound past this is no bound worth computing
_MAX_WAYS = 1e15
_SURROGATES = (0xD800, 0xDFFF)
_PRIVATE = 0xF0000                 # where non-u surrogate units go for RE2
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_MAX_CP = 0x10FFFF



class _NotLinear(Exception):
    """The translation uses a construct RE2 cannot run exactly (the message says which)."""


# -- parsing the translation ------------------------------------------------------------------
# Nodes: ("char", cp) ("set", ranges, props) ("anchor", "A"|"Z") ("look", kind, node)
# ("backref",) ("group", node) ("ci", node) ("seq", [nodes]) ("alt", [nodes]) ("rep", node, lo, hi)

class _Parser:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def parse(self) -> tuple:
        node = self.alt()
        if self.i != len(self.s):
            raise ValueError(f"unexpected {self.s[self.i]!r} at {self.i}")
        return node

    def alt(self) -> tuple:
        branches = [self.seq()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self.seq())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def seq(self) -> tuple:
        items: list[tuple] = []
        s = self.s
        while self.i < len(s) and s[self.i] not in "|)":
            atom = self.atom()
            items.append(self.quantifier(atom))
        return items[0] if len(items) == 1 else ("seq", items)

    def quantifier(self, atom: tuple) -> tuple:
        s = self.s
        if self.i >= len(s):
            return atom
        ch = s[self.i]
        if ch == "*":
            lo, hi, self.i = 0, None, self.i + 1
        elif ch == "+":
            lo, hi, self.i = 1, None, self.i + 1
        elif ch == "?":
            lo, hi, self.i = 0, 1, self.i + 1
        elif ch == "{":
            end = s.index("}", self.i)
            body = s[self.i + 1:end]
            self.i = end + 1
            if "," in body:
                a, b = body.split(",")
                lo, hi = int(a), (int(b) if b else None)
            else:
                lo = hi = int(body)
        else:
            return atom
        if self.i < len(s) and s[self.i] == "?":        # lazy: the same language
            self.i += 1
        return ("rep", atom, lo, hi)

    def atom(self) -> tuple:
        s = self.s
        ch = s[self.i]
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == "\\":
            return self.escape(in_class=False)
        self.i += 1
        return ("char", ord(ch))

    def group(self) -> tuple:
        s = self.s
        self.i += 1
        kind = None
        for opener in ("?:", "?<=", "?<!", "?=", "?!", "?i:", "?P=", "?P<"):
            if s.startswith(opener, self.i):
                kind = opener
                self.i += len(opener)
                break
        if kind == "?P=":
            self.i = s.index(")", self.i) + 1
            return ("backref",)
        if kind == "?P<":
            self.i = s.index(">", self.i) + 1
        inner = self.alt()
        if self.i >= len(s) or s[self.i] != ")":
            raise ValueError("unterminated group")
        self.i += 1
        if kind in ("?=", "?!", "?<=", "?<!"):
            return ("look", kind, inner)
        if kind == "?i:":
            return ("ci", inner)
        return ("group", inner)

    def escape(self, in_class: bool) -> tuple:
        s = self.s
        letter = s[self.i + 1]
        self.i += 2
        if letter == "u":
            self.i += 4
            return ("char", int(s[self.i - 4:self.i], 16))
        if letter == "U":
            self.i += 8
            return ("char", int(s[self.i - 8:self.i], 16))
        if letter in "pP":
            end = s.index("}", self.i)
            prop = s[self.i - 2:end + 1]
            self.i = end + 1
            return ("set", (), (prop,))
        if not in_class and letter in "AZ":
            return ("anchor", letter)
        return ("char", {"n": 0x0A, "r": 0x0D, "t": 0x09}.get(letter, ord(letter)))

    def char_class(self) -> tuple:
        s = self.s
        self.i += 1
        negate = s.startswith("^", self.i)
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        props: list[str] = []
        while s[self.i] != "]":
            first = self.class_item()
            if first[0] == "set":
                props.extend(first[2])
                continue
            lo = first[1]
            if s[self.i] == "-" and s[self.i + 1] != "]":
                self.i += 1
                hi = self.class_item()[1]
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        self.i += 1
        merged = _merge(ranges)
        if negate:
            if props:
                return ("set", (), ("^",) + tuple(props) + tuple(f"{a:x}-{b:x}" for a, b in merged))
            return ("set", _complement(merged), ())
        return ("set", merged, tuple(props))

    def class_item(self) -> tuple:
        s = self.s
        if s[self.i] == "\\":
            return self.escape(in_class=True)
        self.i += 1
        return ("char", ord(s[self.i - 1]))


def _merge(ranges) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return tuple(out)


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

    def cp(self, cp: int) -> str:
        if _SURROGATES[0] <= cp <= _SURROGATES[1]:
            if self.u:
                raise _NotLinear("a lone surrogate in a u pattern")
            cp = _PRIVATE + cp - _SURROGATES[0]
        return f"\\x{{{cp:x}}}"

    def ranges(self, ranges: tuple[tuple[int, int], ...]) -> str:
        out = []
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
            return "|".join(self.emit(n) for n in node[1])
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

    def __init__(self, v0: str, unicode_mode: bool, sticky: bool) -> None:
        self.sticky = sticky
        self.re2, self.reason, self.program = None, None, 0
        self.unbounded: str | None = None
        tree = _Parser(v0).parse()
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
def plan_of(v0: str, unicode_mode: bool, sticky: bool) -> Plan:
    """The :class:`Plan` of a translation (memoised: books repeat their patterns)."""
    return Plan(v0, unicode_mode, sticky)


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
