"""Boolean key expressions (docs/improved-profile.md#key-expressions): ``&expr: (dragon AND red) OR /wyrm/i``.

A key whose text starts (after leading whitespace) with :data:`EXPR_PREFIX` is an expression
over keys in the profiles that read them; SillyTavern reads it as one ordinary plain key that
never matches in practice, so a book holding expressions stays loadable there.

Syntax, from loosest to tightest binding: ``OR``, ``AND``, ``NOT`` (the operators in capitals;
``and`` in lower case is a word), parentheses group. An atom is

- a quoted phrase ``"..."``: plain text, never a regex; ``\\"`` is a quote and ``\\\\`` a backslash;
- a regex key ``/pattern/flags`` (flags from ``gimsuy``), exactly as a SillyTavern regex key;
- bare words: one or more words that are not operators, up to the next operator or parenthesis;
  ``red dragon`` is the one key ``red dragon`` (the text between the first and last word, as written).

Every atom is compiled as an ordinary key of the entry (:func:`expand_spec`), so the engine
computes its hits per message with every other key; an expression is then evaluated over the
atoms' hits in a window (:meth:`Expr.value`). This module parses once per key text
(:func:`parse_expression` is memoised) and never scans text.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

from ..errors import LorebookError
from ..js.regex import tool_regex
from .keys import KeySpec

__all__ = ["EXPR_PREFIX", "EXPR_ERROR", "Atom", "Not", "And", "Or", "Expr", "ExprError", "is_expression",
           "parse_expression", "atoms_of", "true_without_keys", "ExprLayout", "layout_of", "expand_spec", "expression_problems"]

EXPR_PREFIX = "&expr:"
EXPR_ERROR = "bad key expression"      # how a LorebookError about an expression starts
_OPERATORS = ("AND", "OR", "NOT")
_SPACE = " \t\r\n\f\v\u00a0\u3000"


class ExprError(ValueError):
    """A malformed expression: ``problem`` at ``column`` (1-based, in the whole key text)."""

    def __init__(self, problem: str, column: int) -> None:
        super().__init__(f"{problem} (column {column})")
        self.problem, self.column = problem, column


@dataclass(frozen=True, slots=True)
class Atom:
    """A key of the expression: ``key`` as the compiler reads it, ``index`` in :attr:`ExprLayout.atoms`
    (-1 until laid out), ``literal``: a quoted phrase (plain text even in ``/.../`` form)."""

    key: str
    literal: bool = False
    index: int = -1

    def value(self, bits: Sequence[bool]) -> bool:
        return bits[self.index]


@dataclass(frozen=True, slots=True)
class Not:
    operand: "Expr"

    def value(self, bits: Sequence[bool]) -> bool:
        return not self.operand.value(bits)


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple["Expr", ...]

    def value(self, bits: Sequence[bool]) -> bool:
        return all(o.value(bits) for o in self.operands)


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple["Expr", ...]

    def value(self, bits: Sequence[bool]) -> bool:
        return any(o.value(bits) for o in self.operands)


Expr = Union[Atom, Not, And, Or]


def is_expression(key: str) -> bool:
    """Whether ``key`` is written as an expression (:data:`EXPR_PREFIX` after leading whitespace)."""
    return key.lstrip(_SPACE).startswith(EXPR_PREFIX)


# Tokens: (kind, text, column) with kind "(" ")" "AND" "OR" "NOT" "atom"; an atom token's text
# is the key, and literal atoms are kind "quoted".
_Token = tuple[str, str, int]


def _tokens(text: str, start: int) -> list[_Token]:
    out: list[_Token] = []
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
        elif ch in "()":
            out.append((ch, ch, i + 1))
            i += 1
        elif ch == '"':
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise ExprError("unclosed quote", i + 1)
                c = text[j]
                if c == '"':
                    break
                if c == "\\":
                    if j + 1 >= n or text[j + 1] not in '"\\':
                        raise ExprError('unknown escape (write \\" or \\\\)', j + 1)
                    c, j = text[j + 1], j + 1
                buf.append(c)
                j += 1
            if not buf:
                raise ExprError("empty quoted phrase", i + 1)
            out.append(("quoted", "".join(buf), i + 1))
            i = j + 1
        elif ch == "/":
            j = i + 1
            if j < n and text[j] == "/":
                raise ExprError("empty regex", i + 1)
            while j < n and not (text[j] == "/" and text[j - 1] != "\\"):
                j += 1
            if j >= n:
                raise ExprError("unclosed regex (a / ends it)", i + 1)
            j += 1
            while j < n and text[j] in "gimsuy":
                j += 1
            if j < n and text[j] not in _SPACE and text[j] not in "()":
                raise ExprError("unknown regex flag", j + 1)
            key = text[i:j]
            if tool_regex(key) is None:
                raise ExprError("not a valid regex", i + 1)
            out.append(("atom", key, i + 1))
            i = j
        else:
            j = i
            while j < n and text[j] not in _SPACE and text[j] not in '()"':
                j += 1
            word = text[i:j]
            if word in _OPERATORS:
                out.append((word, word, i + 1))
            elif out and out[-1][0] == "atom" and not out[-1][1].startswith("/"):
                kind, prev, col = out.pop()   # bare words run together: one key, as written
                out.append((kind, text[col - 1:j], col))
            else:
                out.append(("atom", word, i + 1))
            i = j
    return out


class _Parser:
    def __init__(self, tokens: list[_Token], end: int) -> None:
        self.tokens, self.pos, self.end = tokens, 0, end

    def peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def column(self) -> int:
        return self.tokens[self.pos][2] if self.pos < len(self.tokens) else self.end

    def or_(self) -> Expr:
        parts = [self.and_()]
        while self.peek() == "OR":
            self.pos += 1
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_(self) -> Expr:
        parts = [self.not_()]
        while self.peek() == "AND":
            self.pos += 1
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_(self) -> Expr:
        if self.peek() == "NOT":
            self.pos += 1
            return Not(self.not_())
        return self.primary()

    def primary(self) -> Expr:
        kind = self.peek()
        if kind is None:
            raise ExprError("expected a key or '(' here, the expression ends", self.end)
        kind, text, col = self.tokens[self.pos]
        if kind == "(":
            self.pos += 1
            inner = self.or_()
            if self.peek() != ")":
                raise ExprError("expected ')' to close the '(' of column %d" % col, self.column())
            self.pos += 1
            return inner
        if kind in ("atom", "quoted"):
            self.pos += 1
            return Atom(text, kind == "quoted")
        raise ExprError(f"expected a key or '(', got {text!r}", col)


@functools.lru_cache(maxsize=4096)
def parse_expression(key: str) -> Expr:
    """The tree of an expression key (its atoms not yet laid out: ``index`` -1).

    Args:
        key: the key as stored, :data:`EXPR_PREFIX` included.

    Raises:
        ExprError: the key is no expression, or is malformed (with its 1-based column).
    """
    stripped = key.lstrip(_SPACE)
    if not stripped.startswith(EXPR_PREFIX):
        raise ExprError(f"an expression starts with {EXPR_PREFIX!r}", 1)
    start = len(key) - len(stripped) + len(EXPR_PREFIX)
    tokens = _tokens(key, start)
    if not tokens:
        raise ExprError("empty expression", len(key) + 1)
    parser = _Parser(tokens, len(key) + 1)
    tree = parser.or_()
    if parser.pos < len(tokens):
        kind, text, col = tokens[parser.pos]
        raise ExprError("unmatched ')'" if kind == ")" else f"expected AND or OR before {text!r}", col)
    return tree


def atoms_of(tree: Expr) -> tuple[Atom, ...]:
    """The atoms of ``tree``, each once, in order of first appearance."""
    found: dict[tuple[str, bool], int] = {}
    _atoms_of(tree, found)
    return tuple(Atom(k, lit, i) for i, (k, lit) in enumerate(found))


def true_without_keys(tree: Expr) -> bool:
    """Whether ``tree`` is true when none of its atoms matches (refused as a primary key)."""
    found: dict[tuple[str, bool], int] = {}
    return _atoms_of(tree, found).value([False] * len(found))


def _atoms_of(tree: Expr, out: dict[tuple[str, bool], int]) -> Expr:
    # the tree with every atom's index in ``out`` (added in order of first appearance)
    if isinstance(tree, Atom):
        return Atom(tree.key, tree.literal, out.setdefault((tree.key, tree.literal), len(out)))
    if isinstance(tree, Not):
        return Not(_atoms_of(tree.operand, out))
    return type(tree)(tuple(_atoms_of(o, out) for o in tree.operands))


@dataclass(frozen=True, slots=True)
class ExprLayout:
    """Where one entry's expression keys find their atoms among its compiled keys.

    The compiled entry's primary keys are its own primary keys (an expression key compiled as
    an empty key, never a hit) followed by ``atoms`` (every
    distinct atom of its primary and secondary expressions, in order): atom ``i`` is primary
    key ``n_primary + i``. ``primary``/``secondary``: key index -> the laid-out tree of each
    expression key of that list.
    """

    n_primary: int
    atoms: tuple[tuple[str, bool], ...]
    primary: dict[int, Expr]
    secondary: dict[int, Expr]
    # (primary hits, secondary hits) -> (primary, secondary) results: generated once per
    # shape of an entry's keys (a scan calls it for every candidate entry with expressions)
    _resolve: Callable[[Sequence[bool], Sequence[bool]], tuple[tuple[bool, ...], tuple[bool, ...]]] = field(
        default=None, compare=False, repr=False)  # type: ignore[assignment]

    # primary hits -> the index of the first true primary key (-1: none), the same way
    first: Callable[[Sequence[bool]], int] = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    # ``first`` over a simple plan's ``(key, vid)`` pairs and a hit set, valid when the plan has
    # ``n_pairs`` pairs (no key skipped but the expression keys)
    first_vids: Callable[[Sequence[tuple[int, Any]], frozenset[int]], int] = field(
        default=None, compare=False, repr=False)  # type: ignore[assignment]
    n_pairs: int = field(default=-1, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self._resolve is None:
            object.__setattr__(self, "_resolve", _resolver(self.n_primary, self.primary, self.secondary))
        if self.first is None:
            conds = [_code(self.primary[i], self.n_primary) if i in self.primary else f"p[{i}]"
                     for i in range(self.n_primary)]
            object.__setattr__(self, "first", _compile_resolver(
                "lambda p: " + "".join(f"{i} if {c} else " for i, c in enumerate(conds)) + "-1"))
            # the same over a plan of variant ids, ``(key index, vid)`` pairs without the skipped
            # expression keys, and a window's hit set
            plain = [i for i in range(self.n_primary) if i not in self.primary]
            pos = {i: j for j, i in enumerate(plain + list(range(self.n_primary, self.n_primary + len(self.atoms))))}
            conds = [_code(self.primary[i], self.n_primary) if i in self.primary else f"p[{i}]"
                     for i in range(self.n_primary)]
            src = "".join(f"{i} if {c} else " for i, c in enumerate(conds)) + "-1"
            src = re.sub(r"p\[(\d+)\]", lambda m: f"(pp[{pos[int(m.group(1))]}][1] in h)", src)
            object.__setattr__(self, "n_pairs", len(pos))
            object.__setattr__(self, "first_vids", _compile_resolver("lambda pp, h: " + src))

    def resolve(self, primary: Sequence[bool], secondary: Sequence[bool]
                ) -> tuple[tuple[bool, ...], tuple[bool, ...], Sequence[bool]]:
        """The entry's key results with every expression key evaluated.

        Args:
            primary, secondary: one bool per compiled key (``ScanView.key_hits``: the
                primary keys then the atoms, and the secondary keys).

        Returns:
            ``(primary, secondary, hits)``: one bool per key of the entry's own lists (an
            expression key is true when its expression is), and ``primary`` as given (what
            :meth:`atom_report` reads).
        """
        p, s = self._resolve(primary, secondary)
        return p, s, primary

    def atom_report(self, tree: Expr, atoms: Sequence[bool]) -> str:
        """Which atoms of ``tree`` matched and which did not (``atoms``: the compiled primary
        hits, as :meth:`resolve` returns them), as ``matched: "a", "b"; absent: "c"`` (what
        ``explain`` shows for an expression)."""
        found: dict[int, None] = {}
        _indexes(tree, found)
        parts = []
        n = self.n_primary
        for label, want in (("matched", True), ("absent", False)):
            names = [_quote(self.atoms[i][0]) for i in found if bool(atoms[n + i]) == want]
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        return "; ".join(parts)


def _code(tree: Expr, base: int) -> str:
    # Python source of ``tree`` over ``p``, the compiled entry's primary hits (atoms from ``base``)
    if isinstance(tree, Atom):
        return f"p[{base + tree.index}]"
    if isinstance(tree, Not):
        return f"(not {_code(tree.operand, base)})"
    joiner = " and " if isinstance(tree, And) else " or "
    return "(" + joiner.join(_code(o, base) for o in tree.operands) + ")"


def _resolver(n_primary: int, primary: dict[int, Expr], secondary: dict[int, Expr]
              ) -> Callable[[Sequence[bool], Sequence[bool]], tuple[tuple[bool, ...], tuple[bool, ...]]]:
    n_secondary = max(secondary, default=-1) + 1
    p = [_code(primary[i], n_primary) if i in primary else f"p[{i}]" for i in range(n_primary)]
    s = [_code(secondary[i], n_primary) if i in secondary else f"s[{i}]" for i in range(n_secondary)]
    if secondary:              # plain secondary keys past the last expression: the rest of ``s``
        tail = f"tuple(s[{n_secondary}:])"
        sec = f"({''.join(x + ', ' for x in s)}) + {tail}"
    else:
        sec = "tuple(s)"
    return _compile_resolver(f"lambda p, s: (({''.join(x + ', ' for x in p)}), {sec})")


@functools.lru_cache(maxsize=1024)
def _compile_resolver(source: str) -> Callable[[Sequence[bool], Sequence[bool]], Any]:
    # the source is made by _resolver from indexes and operators only
    return eval(source, {"__builtins__": {"tuple": tuple}})  # noqa: S307


def _quote(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _indexes(tree: Expr, out: dict[int, None]) -> None:
    if isinstance(tree, Atom):
        out[tree.index] = None
    elif isinstance(tree, Not):
        _indexes(tree.operand, out)
    else:
        for o in tree.operands:
            _indexes(o, out)


def layout_of(primary: Sequence[str], secondary: Sequence[str]) -> ExprLayout | None:
    """The layout of an entry's expression keys, or None if it has none.

    Raises:
        LorebookError: without ``source``/``entry`` (the caller adds them): a malformed
            expression, or a primary expression true when none of its keys matches (it would
            fire on every scan; write the NOT part in a secondary key or AND it with a key).
            ``field`` is ``key[i]`` or ``keysecondary[i]``.
    """
    if not any(is_expression(k) for k in primary) and not any(is_expression(k) for k in secondary):
        return None
    return _layout(tuple(primary), tuple(secondary))


# Memoised per key lists: the compiler lays out every entry's expressions (expand_spec), and an
# engine over the compiled book asks again for each entry it gates (a fresh engine, a new pool).
@functools.lru_cache(maxsize=1 << 16)
def _layout(primary: tuple[str, ...], secondary: tuple[str, ...]) -> ExprLayout:
    atoms: dict[tuple[str, bool], int] = {}
    trees: list[dict[int, Expr]] = [{}, {}]
    for side, (name, keys) in enumerate((("key", primary), ("keysecondary", secondary))):
        for i, k in enumerate(keys):
            if not is_expression(k):
                continue
            try:
                tree = parse_expression(k)
            except ExprError as exc:
                raise LorebookError(f"{EXPR_ERROR}: {exc}", field=f"{name}[{i}]") from None
            laid = _atoms_of(tree, atoms)
            if side == 0 and laid.value([False] * len(atoms)):
                raise LorebookError(f"{EXPR_ERROR}: true when none of its keys matches, so it would fire on "
                                    "every scan (AND it with a key, or move the NOT part to a secondary key)",
                                    field=f"{name}[{i}]")
            trees[side][i] = laid
    return ExprLayout(len(primary), tuple(atoms), trees[0], trees[1])


def expand_spec(spec: KeySpec, source: str = "<memory>") -> KeySpec:
    """``spec`` with the atoms of its expression keys appended to its primary keys and each
    expression key itself made an empty key, which the compiler skips (the compiled form of
    :class:`ExprLayout`); a spec without expressions is returned as is.

    Raises:
        LorebookError: a malformed expression, naming ``source``, the entry and the field.
    """
    try:
        layout = layout_of(spec.primary, spec.secondary)
    except LorebookError as exc:
        raise LorebookError(exc.problem, source=source, entry=spec.uid, field=exc.field) from None
    if layout is None:
        return spec
    literal = spec.literal | {k for k, lit in layout.atoms if lit and k.startswith("/")}
    # the expression keys themselves become empty keys: skipped (SillyTavern's reading of the
    # text is not wanted here), so the automaton does not carry their long texts
    primary = tuple("" if i in layout.primary else k for i, k in enumerate(spec.primary))
    secondary = tuple("" if i in layout.secondary else k for i, k in enumerate(spec.secondary))
    return spec._replace(primary=primary + tuple(k for k, _ in layout.atoms), secondary=secondary,
                         literal=frozenset(literal))


def expression_problems(key: str) -> str | None:
    """What is wrong with an expression key (for the lint), or None when it is well formed."""
    try:
        parse_expression(key)
    except ExprError as exc:
        return str(exc)
    return None
