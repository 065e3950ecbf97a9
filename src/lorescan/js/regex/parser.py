"""The one parser of a JS regex: ``(pattern, flags)`` -> :class:`~lorescan.js.regex.tree.Parsed`.

It follows the ECMAScript 2024 grammar Pattern[UnicodeMode, NamedCaptureGroups] (without ``v``)
with Annex B for non-``u`` patterns, and raises JSRegexError wherever JS throws a SyntaxError.
Groups are parsed with an explicit stack, not by recursion, so any nesting parses and the
depth is a fact of the tree. Two grammar parameters depend on the whole pattern: whether a
decimal escape is a backreference (its value against the count of capturing groups) and, for
a non-``u`` pattern, whether ``\\k`` is a named reference (the pattern has a group name). The
parse assumes "backreference" and "no names"; when the finished tree shows an assumption was
used and is wrong, the pattern is parsed again with the counts now known (as the spec's
reparse with [+NamedCaptureGroups] does). Every reader then works on that one tree.
"""
from __future__ import annotations

import functools
import re

import regex

from .chars import (_BINARY_PROPERTIES, _DIGITS, _GENERAL_CATEGORIES, _JS_SPACE, _MAX_CP, _SCRIPT_NAME_SHAPE,
                    _SURROGATE_PAIR, _SYNTAX_CHARS, _WORD, _WORD_IU, _CharSet, _complement, _cwkcf_ranges,
                    _join_pair, _join_surrogates, _split_astral)
from .tree import (LOOKAROUNDS, Alt, Assertion, Backref, Char, Class, Concat, Dot, Group, JSRegexError, Node,
                   Parsed, Repeat)

__all__ = ["parse", "check_flags", "LITERAL_ESCAPES"]

_FLAG_CHARS = "dgimsuy"
LITERAL_ESCAPES = frozenset("^$\\.*+?()[]{}|/-")     # escapes that stand for the character itself
_BRACED = re.compile(r"\{([0-9]+)(,([0-9]*))?\}")
_DECIMAL = re.compile(r"[0-9]+")


def check_flags(flags: str) -> None:
    for k, f in enumerate(flags):
        if f == "v":
            raise JSRegexError("the 'v' flag is not supported (not accepted for regex keys)")
        if f not in _FLAG_CHARS:
            raise JSRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
        if f in flags[:k]:
            raise JSRegexError(f"Invalid flags supplied to RegExp constructor '{flags}' (duplicate '{f}')")


@functools.lru_cache(maxsize=512)
def parse(pattern: str, flags: str) -> Parsed:
    """Parse ``new RegExp(pattern, flags)``. Raises JSRegexError. Memoised: a key is compiled,
    then its prefilter is read, from the same tree (the tree is immutable)."""
    check_flags(flags)
    unicode_mode = "u" in flags
    src = _join_surrogates(pattern) if unicode_mode else _split_astral(pattern)
    p = _Parser(src, unicode_mode, "i" in flags, named=unicode_mode, total=None)
    root = p.run()
    if (p.saw_k and p.names) or any(n > p.group_count for n in p.decimals):
        p = _Parser(src, unicode_mode, "i" in flags, named=unicode_mode or bool(p.names), total=p.group_count)
        root = p.run()
    return Parsed(root, src, flags, p.group_count, p.saw_backref, p.deepest, dict(p.names))


class _Frame:
    """An open group (or the whole pattern) while its body is parsed."""

    __slots__ = ("kind", "start", "number", "name", "groups", "alts", "items", "alt_start")

    def __init__(self, kind: str, start: int, number: int, name: str | None, groups: int, body_start: int) -> None:
        self.kind, self.start, self.number, self.name, self.groups = kind, start, number, name, groups
        self.alts: list[Concat] = []
        self.items: list[Node] = []
        self.alt_start = body_start

    def end_alternative(self, pos: int) -> None:
        self.alts.append(Concat(tuple(self.items), self.alt_start, pos))
        self.items = []

    def body(self, pos: int) -> Alt:
        self.end_alternative(pos)
        return Alt(tuple(self.alts), self.alts[0].start, pos)


class _Parser:
    def __init__(self, src: str, unicode_mode: bool, ignore_case: bool, *, named: bool, total: int | None) -> None:
        self.src, self.pos = src, 0
        self.u, self.i = unicode_mode, ignore_case
        self.named = named                 # [+NamedCaptureGroups]
        self.total = total                 # NcapturingParens, once known
        self.group_count = 0
        self.open_groups: list[int] = []
        self.names: dict[str, int] = {}
        self.pending_refs: list[str] = []
        self.saw_backref = False
        self.saw_k = False                 # a \k read as "k" (only right when there are no names)
        self.decimals: list[int] = []      # decimal escapes read as backreferences before the count was known
        self.deepest = 0

    # -- helpers --------------------------------------------------------------------------------
    def error(self, message: str) -> JSRegexError:
        return JSRegexError(f"Invalid regular expression: /{self.src}/: {message}")

    def peek(self, k: int = 0) -> str:
        j = self.pos + k
        return self.src[j] if j < len(self.src) else ""

    def eat(self, text: str) -> bool:
        if self.src.startswith(text, self.pos):
            self.pos += len(text)
            return True
        return False

    def word_set(self) -> tuple[tuple[int, int], ...]:
        return _WORD_IU if (self.u and self.i) else _WORD

    # -- structure ------------------------------------------------------------------------------
    def run(self) -> Alt:
        src, n = self.src, len(self.src)
        frame = _Frame("top", 0, 0, None, 0, 0)
        stack: list[_Frame] = []
        while True:
            if self.pos >= n:
                if stack:
                    raise self.error("Unterminated group")
                break
            ch = src[self.pos]
            if ch == "|":
                frame.end_alternative(self.pos)
                self.pos += 1
                frame.alt_start = self.pos
                continue
            if ch == ")":
                if not stack:
                    raise self.error("Unmatched ')'")
                body = frame.body(self.pos)
                self.pos += 1
                group = Group(frame.kind, body, frame.number, frame.name, frame.groups, self.group_count,
                              frame.start, self.pos)
                if frame.kind == "capture":
                    self.open_groups.pop()
                frame = stack.pop()
                if group.kind not in LOOKAROUNDS or (group.kind in ("?=", "?!") and not self.u):
                    frame.items.append(self.quantified(group))      # Annex B: a lookahead is quantifiable
                else:
                    frame.items.append(self.no_quantifier(group))
                continue
            opened = self.term()
            if isinstance(opened, _Frame):
                stack.append(frame)
                frame = opened
                self.deepest = max(self.deepest, len(stack))
            else:
                frame.items.append(opened)
        for name in self.pending_refs:
            if name not in self.names:
                raise self.error("Invalid named capture referenced")
        return frame.body(n)

    def term(self) -> Node | _Frame:
        """One term at pos: its node, or the frame of the group it opens."""
        start = self.pos
        ch = self.peek()
        if ch in "^$":
            self.pos += 1
            return self.no_quantifier(Assertion(ch, start, self.pos))
        if self.src.startswith("\\b", start) or self.src.startswith("\\B", start):
            self.pos += 2
            return self.no_quantifier(Assertion(self.src[start + 1], start, self.pos))
        for opener in LOOKAROUNDS:
            if self.eat("(" + opener):
                return _Frame(opener, start, 0, None, self.group_count, self.pos)
        if ch in "*+?":
            raise self.error("Nothing to repeat")
        atom: Node
        if ch == "{":
            if self.u or self.braced_quantifier() is not None:
                raise self.error("Nothing to repeat" if self.braced_quantifier() else "Lone quantifier brackets")
            self.pos += 1
            atom = Char(ord(ch), start, self.pos, True)
        elif ch in "}]":
            if self.u:
                raise self.error("Lone quantifier brackets")
            self.pos += 1                              # Annex B ExtendedPatternCharacter
            atom = Char(ord(ch), start, self.pos, True)
        elif ch == ".":
            self.pos += 1
            atom = Dot(start, self.pos)
        elif ch == "(":
            return self.group()
        elif ch == "[":
            atom = self.char_class()
        elif ch == "\\":
            atom = self.atom_escape()
        else:
            self.pos += 1
            atom = Char(ord(ch), start, self.pos, True)
        return self.quantified(atom)

    def group(self) -> _Frame:
        start = self.pos
        self.pos += 1
        if self.eat("?:"):
            return _Frame("noncap", start, 0, None, self.group_count, self.pos)
        name = None
        if self.eat("?<"):
            name = self.group_name()
        elif self.peek() == "?":
            raise self.error("Invalid group")
        groups = self.group_count
        self.group_count += 1
        number = self.group_count
        if name is not None:
            if name in self.names:
                raise self.error("Duplicate capture group name")
            self.names[name] = number
        self.open_groups.append(number)
        return _Frame("capture", start, number, name, groups, self.pos)

    def no_quantifier(self, atom: Node) -> Node:
        if self.at_quantifier():
            raise self.error("Nothing to repeat")
        return atom

    def braced_quantifier(self) -> tuple[int, int | None, int] | None:
        """Parse ``{n}``, ``{n,}``, ``{n,m}`` at pos without consuming: (min, max, length)."""
        m = _BRACED.match(self.src, self.pos)
        if not m:
            return None
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        return lo, hi, m.end() - m.start()

    def at_quantifier(self) -> bool:
        ch = self.peek()
        return ch in ("*", "+", "?") and ch != "" or (ch == "{" and self.braced_quantifier() is not None)

    def quantified(self, atom: Node) -> Node:
        ch = self.peek()
        if ch == "*":
            lo, hi, length = 0, None, 1
        elif ch == "+":
            lo, hi, length = 1, None, 1
        elif ch == "?":
            lo, hi, length = 0, 1, 1
        elif ch == "{":
            braced = self.braced_quantifier()
            if braced is None:
                if self.u:
                    raise self.error("Incomplete quantifier")
                return atom                           # Annex B: '{' is a literal, parsed next
            lo, hi, length = braced
        else:
            return atom
        self.pos += length
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier")
        lazy = self.eat("?")
        return Repeat(atom, lo, hi, lazy, atom.start, self.pos)

    # -- escapes --------------------------------------------------------------------------------
    def atom_escape(self) -> Node:
        start = self.pos
        self.pos += 1                                   # the backslash
        ch = self.peek()
        if ch == "":
            raise self.error("\\ at end of pattern")
        # DecimalEscape: a backreference iff its value <= NcapturingParens (Annex B otherwise).
        if ch in "123456789":
            m = _DECIMAL.match(self.src, self.pos)
            assert m is not None
            number = int(m.group())
            if self.total is None or number <= self.total:
                if self.total is None:
                    self.decimals.append(number)
                self.pos = m.end()
                self.saw_backref = True
                return Backref(number, None, number in self.open_groups, start, self.pos)
            if self.u:
                raise self.error("Invalid escape")
        if ch == "k" and self.named:
            self.pos += 1
            if not self.eat("<"):
                raise self.error("Invalid named reference")
            name = self.group_name()
            self.pending_refs.append(name)
            self.saw_backref = True
            inside = name in self.names and self.names[name] in self.open_groups
            return Backref(0, name, inside, start, self.pos)
        self.pos += 1
        cs = self.class_escape_set(ch)
        if cs is not None:
            return Class((cs,), False, start, self.pos, bracket=False)
        self.pos -= 1
        cp = self.character_escape(in_class=False)
        return Char(cp, start, self.pos, self.pos - start == 2 and ch in LITERAL_ESCAPES)

    def group_name(self) -> str:
        """RegExpIdentifierName up to '>' (after '<' was consumed)."""
        chars: list[str] = []
        while True:
            ch = self.peek()
            if ch == "":
                raise self.error("Invalid capture group name")
            if ch == ">":
                self.pos += 1
                break
            if ch == "\\":
                self.pos += 1
                if not self.eat("u"):
                    raise self.error("Invalid capture group name")
                cp = self.unicode_escape_body(allow_braces=True, join_pairs=True)
                if cp is None:
                    raise self.error("Invalid Unicode escape in group name")
                chars.append(chr(cp))
                continue
            self.pos += 1
            chars.append(ch)
        name = _SURROGATE_PAIR.sub(lambda m: _join_pair(m.group()), "".join(chars))
        probe = name.replace("$", "_").replace("\u200c", "").replace("\u200d", "")
        if not name or not probe or not probe.isidentifier() or name[0] in "\u200c\u200d":
            raise self.error("Invalid capture group name")
        return name

    # -- escapes --------------------------------------------------------------------------------
    def hex_digits(self, count: int) -> int | None:
        text = self.src[self.pos:self.pos + count]
        if len(text) == count and all(c in "0123456789abcdefABCDEF" for c in text):
            self.pos += count
            return int(text, 16)
        return None

    def unicode_escape_body(self, *, allow_braces: bool, join_pairs: bool) -> int | None:
        """After ``\\u``: ``HHHH`` (joined with a following ``\\uHHHH`` trail surrogate when
        ``join_pairs``) or ``{H..}`` when ``allow_braces``. None if malformed (nothing consumed)."""
        start = self.pos
        if allow_braces and self.peek() == "{":
            m = re.compile(r"\{([0-9a-fA-F]+)\}").match(self.src, self.pos)
            if not m or int(m.group(1), 16) > _MAX_CP:
                if m is None and not self.u:
                    return None
                raise self.error("Invalid Unicode escape")
            self.pos = m.end()
            return int(m.group(1), 16)
        cp = self.hex_digits(4)
        if cp is None:
            self.pos = start
            return None
        if join_pairs and 0xD800 <= cp <= 0xDBFF and self.src.startswith("\\u", self.pos):
            save = self.pos
            self.pos += 2
            trail = self.hex_digits(4)
            if trail is not None and 0xDC00 <= trail <= 0xDFFF:
                return 0x10000 + ((cp - 0xD800) << 10) + (trail - 0xDC00)
            self.pos = save
        return cp

    def character_escape(self, in_class: bool) -> int:
        """CharacterEscape after the backslash (pos at the escape letter). Returns a code point."""
        ch = self.peek()
        self.pos += 1
        simple = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
        if ch in simple:
            return simple[ch]
        if ch == "c":
            nxt = self.peek()
            if nxt.isascii() and nxt.isalpha():
                self.pos += 1
                return ord(nxt) % 32
            if in_class and not self.u and (nxt.isdigit() and nxt.isascii() or nxt == "_"):
                self.pos += 1                           # Annex B ClassControlLetter
                return ord(nxt) % 32
            if self.u:
                raise self.error("Invalid unicode escape")
            self.pos -= 1                               # Annex B: '\' is literal, 'c' parsed next
            return ord("\\")
        if ch == "0" and not (self.peek().isascii() and self.peek().isdigit()):
            return 0
        if ch.isascii() and ch.isdigit():
            if self.u:
                raise self.error("Invalid escape" if in_class else "Invalid decimal escape")
            if ch in "89":
                return ord(ch)                          # Annex B IdentityEscape
            # Annex B LegacyOctalEscapeSequence: up to three octal digits, value <= 0o377.
            digits = ch
            while len(digits) < 3 and self.peek() in tuple("01234567") and self.peek() != "":
                if int(digits + self.peek(), 8) > 0o377:
                    break
                digits += self.peek()
                self.pos += 1
            return int(digits, 8)
        if ch == "x":
            cp = self.hex_digits(2)
            if cp is not None:
                return cp
            if self.u:
                raise self.error("Invalid escape")
            return ord("x")
        if ch == "u":
            cp = self.unicode_escape_body(allow_braces=self.u, join_pairs=self.u)
            if cp is not None:
                return cp
            if self.u:
                raise self.error("Invalid Unicode escape")
            return ord("u")
        if ch == "":
            raise self.error("\\ at end of pattern")
        # IdentityEscape
        if self.u:
            if ch in _SYNTAX_CHARS or ch == "/" or (in_class and ch == "-"):
                return ord(ch)
            raise self.error("Invalid escape")
        if ch == "k":
            if self.named:
                raise self.error("Invalid named reference")
            self.saw_k = True
        return ord(ch)

    def class_escape_set(self, letter: str) -> _CharSet | None:
        """CharacterClassEscape ``d D s S w W p{..} P{..}`` (pos after the letter), else None."""
        base: tuple[tuple[int, int], ...]
        if letter in "dD":
            base = _DIGITS
        elif letter in "sS":
            base = _JS_SPACE
        elif letter in "wW":
            base = self.word_set()
        elif letter in "pP" and self.u:
            return self.property_escape(negate=letter == "P")
        else:
            return None
        return _CharSet(_complement(base) if letter.isupper() else base)

    def property_escape(self, negate: bool) -> _CharSet:
        m = re.compile(r"\{([A-Za-z0-9_]+)(?:=([A-Za-z0-9_]+))?\}").match(self.src, self.pos)
        if not m:
            raise self.error("Invalid property name")
        self.pos = m.end()
        name, value = m.group(1), m.group(2)
        p = "P" if negate else "p"
        if value is not None:
            if name in ("General_Category", "gc") and value in _GENERAL_CATEGORIES:
                return _CharSet(props=[f"\\{p}{{gc={value}}}"])
            if (name in ("Script", "sc", "Script_Extensions", "scx") and _SCRIPT_NAME_SHAPE.match(value)
                    and value not in ("Katakana_Or_Hiragana", "Hrkt")):     # V8 rejects Hrkt
                key = "sc" if name in ("Script", "sc") else "scx"
                esc = f"\\{p}{{{key}={value}}}"
                try:
                    regex.compile(esc, regex.V0)
                except regex.error:
                    raise self.error("Invalid property name") from None
                return _CharSet(props=[esc])
            raise self.error("Invalid property name")
        if name in _GENERAL_CATEGORIES:
            return _CharSet(props=[f"\\{p}{{gc={name}}}"])
        if name not in _BINARY_PROPERTIES:
            raise self.error("Invalid property name")
        if name == "Any":
            ranges: tuple[tuple[int, int], ...] = ((0, _MAX_CP),)
        elif name == "ASCII":
            ranges = ((0, 0x7F),)
        elif name in ("Changes_When_NFKC_Casefolded", "CWKCF"):
            ranges = _cwkcf_ranges()
        else:
            return _CharSet(props=[f"\\{p}{{{name}}}"])
        return _CharSet(_complement(ranges) if negate else ranges)


    def class_atom(self) -> int | _CharSet:
        ch = self.peek()
        if ch == "":
            raise self.error("Unterminated character class")
        if ch != "\\":
            self.pos += 1
            return ord(ch)
        self.pos += 1
        letter = self.peek()
        if letter == "b":
            self.pos += 1
            return 0x08
        if letter == "-" and self.u:
            self.pos += 1
            return ord("-")
        if letter != "":
            self.pos += 1
            cs = self.class_escape_set(letter)
            if cs is not None:
                return cs
            self.pos -= 1
        # Inside a class a digit escape is never a backreference (Annex B: octal / identity).
        return self.character_escape(in_class=True)


    def char_class(self) -> Class:
        start = self.pos
        self.pos += 1
        negate = self.eat("^")
        items: list[tuple[int, int] | _CharSet] = []
        while True:
            if self.peek() == "":
                raise self.error("Unterminated character class")
            if self.eat("]"):
                break
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                second = self.class_atom()
                if isinstance(first, int) and isinstance(second, int):
                    if first > second:
                        raise self.error("Range out of order in character class")
                    items.append((first, second))
                    continue
                if self.u:
                    raise self.error("Invalid character class")
                # Annex B NonemptyClassRangesNoDash: a class escape at either end makes '-' literal.
                for part in (first, ord("-"), second):
                    items.append((part, part) if isinstance(part, int) else part)
                continue
            items.append((first, first) if isinstance(first, int) else first)
        return Class(tuple(items), negate, start, self.pos)
