"""The tree of a JS regex -> a ``regex`` (V0) pattern with the same matches (see the package doc).

The emission uses no flag-dependent construct of ``regex``: every class, ``.``, ``\\w``,
``\\s``, ``\\b``, ``^`` and ``$`` is spelt out, and case-insensitivity is compiled into the sets.
With a backreference every group starts captured empty and is reset at each iteration of an
enclosing quantifier (JS reads an unset group as ""). While emitting, it notes two facts of the
pattern for :attr:`JSRegex.line_local`: whether a consuming atom can match U+000A, and whether a
whole-input anchor was emitted; and, per disjunction, whether two alternatives overlap.
"""
from __future__ import annotations

from .chars import (_LINE_TERMINATORS, _REGEX_MAX_REPEAT, _WORD, _WORD_IU, _case_classes, _CharSet,
                    _charset_emission, _esc)
from .tree import Alt, Assertion, Backref, Char, Class, Concat, Dot, Group, Node, Parsed, Repeat

__all__ = ["Emitter", "emit"]


class Emitter:
    """One emission of a parsed pattern under its flags.

    ``reset_groups``: emit the group initialisation and resets (needed once the pattern has a
    backreference). ``ascii_case_scoped``: emit ASCII letters under ``i`` (non-``u``) as
    ``(?i:c)`` instead of ``[Cc]``, so the regex engine can search for literal runs quickly;
    exact only for texts without U+017F and U+212A, the non-ASCII characters whose simple
    case folding is ASCII (JS non-``u`` Canonicalize never equates them with ASCII letters;
    ``regex`` also pairs U+0130 and U+0131 with i/I); search() picks the variant.
    """

    def __init__(self, parsed: Parsed, *, reset_groups: bool, ascii_case_scoped: bool = False) -> None:
        flags = parsed.flags
        self.parsed = parsed
        self.u, self.i, self.s, self.m = "u" in flags, "i" in flags, "s" in flags, "m" in flags
        self.reset_groups = reset_groups
        self.ascii_case_scoped = ascii_case_scoped
        self.newline = False               # can a consuming atom (lookarounds included) match U+000A
        self.text_anchor = False           # was \A or \Z (^ or $ without m) emitted
        self.overlap: dict[int, bool] = {}  # id(Alt) -> one alternative's text starts another's

    def pattern(self) -> str:
        body = self.emit(self.parsed.root)
        if self.reset_groups:
            # An unset group reads as empty in a JS backreference: start every group captured
            # empty, so a backreference to a group that has not participated matches "".
            inits = "".join(f"(?P<g{k}>)" for k in range(1, self.parsed.groups + 1))
            body = f"{inits}(?:{body})"
        return body

    def charset_atom(self, cs: _CharSet, negate: bool = False) -> str:
        found = _charset_emission(cs.ranges, cs.props, negate, self.i, self.u)
        self.newline = self.newline or found[1]
        return found[0]

    def literal(self, cp: int) -> str:
        if cp == 0x0A:                  # no other character canonicalises to U+000A
            self.newline = True
        if self.i and self.ascii_case_scoped and not self.u and cp < 128 and chr(cp).isalpha():
            return f"(?i:{chr(cp)})"
        if self.i:
            members, _ = _case_classes(self.u)
            cls = members.get(cp)
            if cls:
                return _CharSet((c, c) for c in cls).emit()
        return _esc(cp)

    def emit(self, node: Node) -> str:
        if isinstance(node, Char):
            return self.literal(node.cp)
        if isinstance(node, Concat):
            return "".join(self.emit(item) for item in node.items)
        if isinstance(node, Alt):
            alts = [self.emit(a) for a in node.alts]
            # Overlap, syntactically: one alternative is a prefix of another (a|a, a|aa, \w|\w\d).
            ordered = sorted(alts)          # a prefix sorts right before the strings it starts
            self.overlap[id(node)] = any(b and a.startswith(b) for b, a in zip(ordered, ordered[1:]))
            return "|".join(alts)
        if isinstance(node, Repeat):
            return self.repeat(node)
        if isinstance(node, Class):
            return self.charset_atom(node.charset(), node.negate)
        if isinstance(node, Group):
            return self.group(node)
        if isinstance(node, Dot):
            self.newline = self.newline or self.s
            return _CharSet(() if self.s else _LINE_TERMINATORS).emit(negate=True)
        if isinstance(node, Assertion):
            return self.assertion(node.kind)
        assert isinstance(node, Backref)
        if node.inside:
            # Inside its own group the capture is always undefined (unset before it closes, and
            # reset by RepeatMatcher on each iteration), so the reference matches "".
            return "(?:)"
        number = self.parsed.names[node.name] if node.name is not None else node.number
        return f"(?P=g{number})"

    def assertion(self, kind: str) -> str:
        if kind == "^":
            self.text_anchor = self.text_anchor or not self.m
            return "(?:(?<=[\\n\\r\\u2028\\u2029])|\\A)" if self.m else "\\A"
        if kind == "$":
            self.text_anchor = self.text_anchor or not self.m
            return "(?=[\\n\\r\\u2028\\u2029]|\\Z)" if self.m else "\\Z"
        w = _CharSet(_WORD_IU if (self.u and self.i) else _WORD).emit()
        if kind == "b":
            return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
        return f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"

    def group(self, node: Group) -> str:
        inner = self.emit(node.body)
        if node.kind == "capture":
            return f"(?P<g{node.number}>{inner})"
        if node.kind == "noncap":
            return f"(?:{inner})"
        if node.kind in ("?=", "?!") and not self.u:
            return f"(?:({node.kind}{inner}))"       # Annex B: a lookahead is an atom (quantifiable)
        return f"({node.kind}{inner})"

    def repeat(self, node: Repeat) -> str:
        body = node.body
        atom = self.emit(body)
        lookahead = type(body) is Group and body.kind not in ("capture", "noncap")   # emitted as (?:(?=..))
        lo, hi = node.lo, node.hi
        lo = min(lo, _REGEX_MAX_REPEAT)
        hi = None if hi is None or hi > _REGEX_MAX_REPEAT else hi
        if self.reset_groups and type(body) is Group and body.last > body.groups:
            # ES RepeatMatcher step 4: captures inside the atom are reset on every iteration.
            resets = "".join(f"(?P<g{k}>)" for k in range(body.groups + 1, body.last + 1))
            atom = f"(?:{resets}{atom})"
        elif not (lookahead or (type(body) is Group and body.kind == "noncap")
                  or (type(body) is Backref and body.inside)):
            atom = f"(?:{atom})"            # one group to quantify
        if (lo, hi) == (0, None):
            q = "*"
        elif (lo, hi) == (1, None):
            q = "+"
        elif (lo, hi) == (0, 1):
            q = "?"
        elif hi is None:
            q = f"{{{lo},}}"
        elif hi == lo:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        return atom + q + ("?" if node.lazy else "")


def emit(parsed: Parsed, ascii_case_scoped: bool = False) -> tuple[str, Emitter]:
    """The ``regex`` text of a parsed pattern and the emitter that made it (its facts)."""
    em = Emitter(parsed, reset_groups=parsed.backrefs, ascii_case_scoped=ascii_case_scoped)
    return em.pattern(), em
