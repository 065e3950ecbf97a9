"""SillyTavern regex keys as ECMAScript regexes, evaluated by the ``regex`` module (docs/sillytavern-mode.md#st-regex-keys, 13.1).

A JS pattern is parsed by a small recursive-descent parser that follows the ECMAScript 2024
grammar (without the ``v`` flag) including Annex B for non-``u`` patterns, and re-emitted as a
``regex`` (V0) pattern that uses no flag-dependent construct of its own: every character class,
``.``, ``\\w``, ``\\s``, ``\\b``, ``^`` and ``$`` is spelt out as an explicit code-point set or
lookaround, and case-insensitivity is compiled into the sets (JS Canonicalize; with ``i`` and a
backreference the text is also mapped through Canonicalize, so backreferences compare canonical
characters as JS does), so the result does not depend on ``regex``'s ideas of "word", "space" or
"case". Backreferences to groups that have not participated match "" as in JS: every group starts
captured empty and is reset to empty at each iteration of an enclosing quantifier (RepeatMatcher).

Engines. :meth:`JSRegex.search` runs a translation on RE2 (``google-re2``, linear time) when
:mod:`lorescan.js.linear` can re-emit it exactly (no lookaround, backreference or property
escape), else on ``regex``; :meth:`JSRegex.cost` is what an evaluation may cost, computed
from the pattern and the text alone, so budgets built on it do not depend on machine load.

Text model. JS strings are UTF-16. Without ``u`` the pattern and the text are both converted to
UTF-16 code units before matching (an astral character becomes two surrogate ``str`` characters),
so ``.``, classes and quantifiers see the same units JS sees: ``/^.$/`` does not match ``"😀"``,
``/^..$/`` does, ``/[😀]/`` matches either half. With ``u`` both are sequences of code points, and
a surrogate pair written in the text as two ``str`` characters is joined first.

Known approximations (everything else is intended to be exact and is checked against V8 in
``tests/data/jsregex/v8_cases.json``):

* ``v`` is rejected with JSRegexError (V8 accepts it; SillyTavern keys never carry it).
* Unicode data comes from Python's ``unicodedata`` (case mappings) and the ``regex`` module
  (``\\p{...}``), whose Unicode versions may differ from V8's ICU for recently added characters.
  ``u``-mode simple case folding is derived from ``str.casefold``/``str.lower`` (CaseFolding
  status C and S); S entries whose target is not ``lower()`` (U+1FD3, U+1FE3, U+FB05) are missed.
* ``\\p{Changes_When_NFKC_Casefolded}`` is computed from ``unicodedata`` NFKC + casefold.
* Script names in ``\\p{Script=...}``/``\\p{scx=...}`` are checked for JS's exact spelling by shape
  (``Latin``, ``Latn``, ``Old_Italic``, ``SignWriting``), then looked up by ``regex``.
* Captures made inside a lookbehind are taken left-to-right (JS matches lookbehinds right-to-left);
  this is only observable through a backreference to such a group.
* V8 quirk not reproduced: with ``u``, V8 also tries a match starting between the two halves of
  a surrogate pair, where ``\\B`` holds; so ``/\\B/u`` is true on ``"1😀K"`` in V8 (no code-point
  position qualifies, as the spec says) and false here. Only empty-matching starts are affected.
* An empty-matching quantified group with captures used by backreferences, such as
  ``/(?:(\\2)(?=(\\w)))+/``, can exhaust ``regex``'s memory; ``search`` raises RegexTimeout.
* Quantifier bounds above 10,000,000 are clamped (a larger min) or unbounded (a larger max):
  ``regex`` hangs compiling bigger counts. Only texts that long, or empty-matching atoms, differ.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator

import regex

from .linear import Plan, linear_text, plan_of

__all__ = ["JSRegexError", "RegexTimeout", "RegexTooComplex", "JSRegex", "JSText", "parse_regex_key", "compile_js_regex",
           "REGEX_MAX_EXPANSION",
           "compile_regex_key", "regex_key", "group_nesting"]


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


# ---------------------------------------------------------------------------------------------
# Character data
# ---------------------------------------------------------------------------------------------

_MAX_CP = 0x10FFFF
_REGEX_MAX_REPEAT = 10_000_000           # larger bounds make regex hang at compile time
# The most terms (after counted repeats multiply their atoms) a regex key may build when no
# limit is given: ``regex`` spends ~0.4 us and ~260 bytes per term at compile time.
REGEX_MAX_EXPANSION = 1_000_000
_LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))   # ES LineTerminator
# ES WhiteSpace + LineTerminator (Appendix A): the set of \s.
_JS_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
             (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
             (0xFEFF, 0xFEFF))
_DIGITS = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# ES WordCharacters with u and i: chars whose Canonicalize is a basic word char (U+017F, U+212A).
_WORD_IU = _WORD + ((0x17F, 0x17F), (0x212A, 0x212A))
_SYNTAX_CHARS = "^$\\.*+?()[]{}|"
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

# ES2024 table-nonbinary-unicode-properties / PropertyValueAliases: General_Category values.
_GENERAL_CATEGORIES = frozenset("""
Cased_Letter LC Close_Punctuation Pe Connector_Punctuation Pc Control Cc cntrl Currency_Symbol Sc
Dash_Punctuation Pd Decimal_Number Nd digit Enclosing_Mark Me Final_Punctuation Pf Format Cf
Initial_Punctuation Pi Letter L Letter_Number Nl Line_Separator Zl Lowercase_Letter Ll Mark M
Combining_Mark Math_Symbol Sm Modifier_Letter Lm Modifier_Symbol Sk Nonspacing_Mark Mn Number N
Open_Punctuation Ps Other C Other_Letter Lo Other_Number No Other_Punctuation Po Other_Symbol So
Paragraph_Separator Zp Private_Use Co Punctuation P punct Separator Z Space_Separator Zs
Spacing_Mark Mc Surrogate Cs Symbol S Titlecase_Letter Lt Unassigned Cn Uppercase_Letter Lu
""".split())
# ES2024 table-binary-unicode-properties (names and aliases).
_BINARY_PROPERTIES = frozenset("""
ASCII ASCII_Hex_Digit AHex Alphabetic Alpha Any Assigned Bidi_Control Bidi_C Bidi_Mirrored Bidi_M
Case_Ignorable CI Cased Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM
Changes_When_Lowercased CWL Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT
Changes_When_Uppercased CWU Dash Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia
Emoji Emoji_Component EComp Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation EPres
Extended_Pictographic ExtPict Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext Hex_Digit
Hex IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS Ideographic
Ideo Join_Control Join_C Logical_Order_Exception LOE Lowercase Lower Math Noncharacter_Code_Point
NChar Pattern_Syntax Pat_Syn Pattern_White_Space Pat_WS Quotation_Mark QMark Radical
Regional_Indicator RI Sentence_Terminal STerm Soft_Dotted SD Terminal_Punctuation Term
Unified_Ideograph UIdeo Uppercase Upper Variation_Selector VS White_Space space XID_Continue XIDC
XID_Start XIDS
""".split())
_SCRIPT_NAME_SHAPE = re.compile(r"(?:[A-Z][a-z]*|SignWriting)(?:_[A-Z][a-z]*)*\Z")


def _canon_legacy(cp: int) -> int:
    """ES Canonicalize without u: toUpperCase per code unit, never non-ASCII -> ASCII."""
    upper = chr(cp).upper()
    if len(upper) != 1:
        return cp
    if cp >= 128 and ord(upper) < 128:
        return cp
    return ord(upper)


def _canon_unicode(cp: int) -> int:
    """ES Canonicalize with u: simple case folding (CaseFolding.txt status C and S)."""
    ch = chr(cp)
    folded = ch.casefold()
    if len(folded) == 1:
        return ord(folded)
    lower = ch.lower()                  # status F chars: the S mapping, where one exists, is lower()
    return ord(lower) if len(lower) == 1 and lower.casefold() == folded else cp


@functools.lru_cache(maxsize=2)
def _case_classes(unicode_mode: bool) -> tuple[dict[int, tuple[int, ...]], tuple[tuple[int, ...], ...]]:
    """Equivalence classes of size > 1 under Canonicalize: member -> class, and all classes.

    Read from ``_casetables`` (generated from this Python's Unicode data) when that was made
    for the running Unicode version, else computed (some 65k-131k code points, ~0.1 s)."""
    from . import _casetables  # import-cost: the generated table loads with the first case-insensitive regex
    if _casetables.UNIDATA_VERSION == unicodedata.unidata_version:
        classes = _casetables.classes(_casetables.UNICODE if unicode_mode else _casetables.LEGACY)
    else:
        classes = compute_case_classes(unicode_mode)
    return {cp: cls for cls in classes for cp in cls}, classes


def compute_case_classes(unicode_mode: bool) -> tuple[tuple[int, ...], ...]:
    """The classes of :func:`_case_classes`, computed from ``str`` case mappings."""
    canon = _canon_unicode if unicode_mode else _canon_legacy
    limit = 0x20000 if unicode_mode else 0x10000     # no cased characters above U+1FFFF
    groups: dict[int, list[int]] = {}
    for cp in range(limit):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        groups.setdefault(canon(cp), []).append(cp)
    return tuple(tuple(g) for g in groups.values() if len(g) > 1)


@functools.lru_cache(maxsize=2)
def _sorted_cased(unicode_mode: bool) -> list[int]:
    """The members of ``_case_classes``, sorted."""
    return sorted(_case_classes(unicode_mode)[0])


@functools.lru_cache(maxsize=2)
def _canon_table(unicode_mode: bool) -> dict[int, int]:
    """``str.translate`` table mapping each character to its Canonicalize value."""
    canon = _canon_unicode if unicode_mode else _canon_legacy
    members, _ = _case_classes(unicode_mode)
    return {cp: canon(cp) for cp in members if canon(cp) != cp}


@functools.lru_cache(maxsize=1)
def _cwkcf_ranges() -> tuple[tuple[int, int], ...]:
    """Changes_When_NFKC_Casefolded, which ``regex`` lacks: NFKC(casefold(NFKC(c))) != c or DI."""
    ignorable = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    cps = []
    for cp in range(_MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        nfkc = unicodedata.normalize("NFKC", ch)
        if unicodedata.normalize("NFKC", nfkc.casefold()) != ch or ignorable.match(ch):
            cps.append(cp)
    return _merge((c, c) for c in cps)


# ---------------------------------------------------------------------------------------------
# Code-point sets
# ---------------------------------------------------------------------------------------------

def _merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out, nxt = [], 0
    for lo, hi in _merge(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return tuple(out)


def _esc(cp: int) -> str:
    if cp < 0x80 and (chr(cp).isalnum() or cp == 0x5F):
        return chr(cp)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


class _CharSet:
    """A union of code-point ranges and ``regex`` property escapes (``\\p{..}``/``\\P{..}``)."""

    __slots__ = ("ranges", "props")

    def __init__(self, ranges: Iterable[tuple[int, int]] = (), props: Iterable[str] = ()) -> None:
        self.ranges = _merge(ranges)
        self.props = tuple(props)

    def union(self, other: _CharSet) -> _CharSet:
        return _CharSet(self.ranges + other.ranges, self.props + other.props)

    def body(self) -> str:
        parts = [_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}" for lo, hi in self.ranges]
        return "".join(parts) + "".join(self.props)

    def contains(self) -> Callable[[int], bool]:
        if self.props:
            matcher = regex.compile(f"[{self.body()}]", regex.V0).fullmatch
            return lambda cp: matcher(chr(cp)) is not None
        los = [lo for lo, _ in self.ranges]
        ranges = self.ranges

        def member(cp: int) -> bool:
            i = bisect.bisect_right(los, cp) - 1
            return i >= 0 and ranges[i][1] >= cp
        return member

    def case_closed(self, unicode_mode: bool) -> _CharSet:
        """Add every char whose Canonicalize equals that of a member (ES CharacterSetMatcher)."""
        members, classes = _case_classes(unicode_mode)
        if self.props:
            member = self.contains()
            extra = [(cp, cp) for cls in classes if any(member(c) for c in cls) for cp in cls]
        else:                           # only the cased characters inside the ranges matter
            cased = _sorted_cased(unicode_mode)
            extra = [(cp, cp) for lo, hi in self.ranges
                     for c in cased[bisect.bisect_left(cased, lo):bisect.bisect_right(cased, hi)]
                     for cp in members[c]]
        return _CharSet(self.ranges + tuple(extra), self.props) if extra else self

    def emit(self, negate: bool = False) -> str:
        if not self.ranges and not self.props:
            return "[\\u0000-\\U0010ffff]" if negate else "(?!)"
        if not negate and not self.props and len(self.ranges) == 1 and self.ranges[0][0] == self.ranges[0][1]:
            return _esc(self.ranges[0][0])
        return ("[^" if negate else "[") + self.body() + "]"


# ---------------------------------------------------------------------------------------------
# Parser / translator
# ---------------------------------------------------------------------------------------------

def _parens(src: str) -> Iterator[tuple[int, str]]:
    """``(index, "(" or ")")`` of every parenthesis of a JS pattern that is syntax: not escaped
    and not inside a character class."""
    i, n, in_class = 0, len(src), False
    while i < n:
        ch = src[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(" or ch == ")":
            yield i, ch
        i += 1


def _prescan_groups(src: str) -> tuple[int, list[str]]:
    """Count capturing groups and list group names (decimal escapes and \\k depend on them)."""
    count, names, n = 0, [], len(src)
    for i, ch in _parens(src):
        if ch != "(":
            continue
        if src.startswith("(?<", i) and i + 3 < n and src[i + 3] not in "=!":
            count += 1
            end = src.find(">", i + 3)
            names.append(src[i + 3:end] if end >= 0 else "")
        elif not src.startswith("(?", i):
            count += 1
    return count, names


@functools.lru_cache(maxsize=4096)
def _charset_emission(ranges: tuple[tuple[int, int], ...], props: tuple[str, ...], negate: bool,
                      ignore_case: bool, unicode_mode: bool) -> tuple[str, bool]:
    """(the ``regex`` text of a JS class, whether it accepts U+000A). A pure function of its
    arguments, memoised across patterns: closing a large class under ``i`` (``[\\s\\S]``,
    ``[\\u0000-\\uffff]``, ``\\p{L}``) takes 1.5-4 ms, and books repeat their classes."""
    cs = _CharSet(ranges, props)
    if ignore_case:
        cs = cs.case_closed(unicode_mode)
    return cs.emit(negate), cs.contains()(0x0A) != negate


class _Translator:
    """One pass over a JS pattern (ES2024 Pattern[UnicodeMode, NamedCaptureGroups] + Annex B)."""

    def __init__(self, src: str, *, unicode_mode: bool, ignore_case: bool, dot_all: bool,
                 multiline: bool, reset_groups: bool, ascii_case_scoped: bool = False) -> None:
        self.src, self.pos = src, 0
        # Emit ASCII letters under i (non-u) as (?i:c) instead of [Cc]: the regex engine can
        # then search for literal runs quickly. Exact only for texts without U+017F and
        # U+212A, the non-ASCII characters whose simple case folding is ASCII (JS non-u
        # Canonicalize never equates them with ASCII letters; `regex` also pairs U+0130 and
        # U+0131 with i/I); search() picks the variant.
        self.ascii_case_scoped = ascii_case_scoped
        self.u, self.i, self.s, self.m = unicode_mode, ignore_case, dot_all, multiline
        self.reset_groups = reset_groups
        self.total_groups, raw_names = _prescan_groups(src)
        # Annex B: a non-u pattern is reparsed with [+NamedCaptureGroups] iff it has a GroupName.
        self.named = bool(raw_names) or unicode_mode
        self.group_count = 0
        self.open_groups: list[int] = []
        self.names: dict[str, int] = {}
        self.saw_backref = False
        self.pending_refs: list[str] = []
        # Facts for regexscope: can any consuming atom (lookarounds included) match U+000A;
        # was a whole-input anchor (\A / \Z: ^ and $ without m) emitted; a catastrophic shape.
        self.newline = False
        self.text_anchor = False
        self.hazard: str | None = None
        self.unbounded = 0                 # unbounded quantifiers emitted so far
        # Terms the regex engine builds: `regex` makes one copy of a quantified atom per
        # repetition of its minimum count (a{1000000} holds a million nodes, ~260 bytes each).
        self.units = 0
        self.alternations: list[bool] = []   # per disjunction closed: do two alternatives overlap

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

    def word_set(self) -> tuple[tuple[int, int], ...]:
        return _WORD_IU if (self.u and self.i) else _WORD

    # -- grammar --------------------------------------------------------------------------------
    def translate(self) -> str:
        body = self.disjunction()
        if self.pos < len(self.src):
            raise self.error("Unmatched ')'" if self.peek() == ")" else "Unexpected character")
        for name in self.pending_refs:
            if name not in self.names:
                raise self.error("Invalid named capture referenced")
        if self.reset_groups:
            # An unset group reads as empty in a JS backreference: start every group captured
            # empty, so a backreference to a group that has not participated matches "".
            inits = "".join(f"(?P<g{k}>)" for k in range(1, self.group_count + 1))
            body = f"{inits}(?:{body})"
        return body

    def disjunction(self) -> str:
        alts = [self.alternative()]
        while self.eat("|"):
            alts.append(self.alternative())
        # Overlap, syntactically: one alternative is a prefix of another (a|a, a|aa, \w|\w\d).
        ordered = sorted(alts)          # a prefix sorts right before the strings it starts
        overlap = any(b and a.startswith(b) for b, a in zip(ordered, ordered[1:]))
        self.alternations.append(overlap)
        return "|".join(alts)

    def alternative(self) -> str:
        out = []
        while self.pos < len(self.src) and self.peek() not in "|)":
            out.append(self.term())
        return "".join(out)

    def term(self) -> str:
        start_groups = self.group_count
        units_before = self.units
        self.units += 1
        ch = self.peek()
        # Assertions (not quantifiable, except lookahead in Annex B non-u mode).
        if ch == "^":
            self.pos += 1
            atom = "(?:(?<=[\\n\\r\\u2028\\u2029])|\\A)" if self.m else "\\A"
            self.text_anchor = self.text_anchor or not self.m
            return self.no_quantifier(atom)
        if ch == "$":
            self.pos += 1
            atom = "(?=[\\n\\r\\u2028\\u2029]|\\Z)" if self.m else "\\Z"
            self.text_anchor = self.text_anchor or not self.m
            return self.no_quantifier(atom)
        if self.src.startswith("\\b", self.pos) or self.src.startswith("\\B", self.pos):
            self.pos += 2
            w = _CharSet(self.word_set()).emit()
            if ch == "\\" and self.src[self.pos - 1] == "b":
                atom = f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
            else:
                atom = f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
            return self.no_quantifier(atom)
        for opener, emitted, quantifiable in (("(?=", "(?=", not self.u), ("(?!", "(?!", not self.u),
                                              ("(?<=", "(?<=", False), ("(?<!", "(?<!", False)):
            if self.eat(opener):
                inner = self.disjunction()
                if not self.eat(")"):
                    raise self.error("Unterminated group")
                atom = f"{emitted}{inner})"
                if quantifiable:
                    return self.quantified(f"(?:{atom})", start_groups, units_before)
                return self.no_quantifier(atom)
        before = self.unbounded
        n_alternations = len(self.alternations)
        atom = self.atom()
        inner_unbounded = self.unbounded > before
        overlapping = len(self.alternations) > n_alternations and self.alternations[-1]
        out = self.quantified(atom, start_groups, units_before)
        if self.hazard is None and self.unbounded > before + inner_unbounded:
            # This atom got an unbounded quantifier: classic catastrophic shapes under it.
            if inner_unbounded:
                self.hazard = "nested unbounded quantifiers (like (a+)+)"
            elif overlapping:
                self.hazard = "an unbounded quantifier over overlapping alternatives (like (a|aa)+)"
        return out

    def no_quantifier(self, atom: str) -> str:
        if self.at_quantifier():
            raise self.error("Nothing to repeat")
        return atom

    def braced_quantifier(self) -> tuple[int, int | None, int] | None:
        """Parse ``{n}``, ``{n,}``, ``{n,m}`` at pos without consuming: (min, max, length)."""
        m = re.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.src, self.pos)
        if not m:
            return None
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        return lo, hi, m.end() - m.start()

    def at_quantifier(self) -> bool:
        ch = self.peek()
        return ch in ("*", "+", "?") and ch != "" or (ch == "{" and self.braced_quantifier() is not None)

    def quantified(self, atom: str, start_groups: int, units_before: int) -> str:
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
        lazy = "?" if self.eat("?") else ""
        if hi is None:
            self.unbounded += 1
        if lo > 1:                          # the atom (and what it nests) is built lo times
            self.units += (self.units - units_before) * (lo - 1)
        lo = min(lo, _REGEX_MAX_REPEAT)
        hi = None if hi is None or hi > _REGEX_MAX_REPEAT else hi
        if self.reset_groups and self.group_count > start_groups:
            # ES RepeatMatcher step 4: captures inside the atom are reset on every iteration.
            resets = "".join(f"(?P<g{k}>)" for k in range(start_groups + 1, self.group_count + 1))
            atom = f"(?:{resets}{atom})"
        elif not (atom.startswith("(?:") and atom.endswith(")") and _balanced_single(atom)):
            atom = f"(?:{atom})"
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
        return atom + q + lazy

    def atom(self) -> str:
        ch = self.peek()
        if ch == "":
            raise self.error("Unexpected end")
        if ch in "*+?":
            raise self.error("Nothing to repeat")
        if ch == "{":
            if self.u or self.braced_quantifier() is not None:
                raise self.error("Nothing to repeat" if self.braced_quantifier() else "Lone quantifier brackets")
            self.pos += 1
            return self.literal(ord("{"))
        if ch in "}]":
            if self.u:
                raise self.error("Lone quantifier brackets")
            self.pos += 1                              # Annex B ExtendedPatternCharacter
            return self.literal(ord(ch))
        if ch == ".":
            self.pos += 1
            self.newline = self.newline or self.s
            cs = _CharSet(() if self.s else _LINE_TERMINATORS)
            return cs.emit(negate=True)
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == "\\":
            return self.atom_escape()
        self.pos += 1
        return self.literal(ord(ch))

    def group(self) -> str:
        self.pos += 1
        if self.eat("?:"):
            inner = self.disjunction()
            if not self.eat(")"):
                raise self.error("Unterminated group")
            return f"(?:{inner})"
        name = None
        if self.eat("?<"):
            name = self.group_name()
        elif self.peek() == "?":
            raise self.error("Invalid group")
        self.group_count += 1
        number = self.group_count
        if name is not None:
            if name in self.names:
                raise self.error("Duplicate capture group name")
            self.names[name] = number
        self.open_groups.append(number)
        inner = self.disjunction()
        self.open_groups.pop()
        if not self.eat(")"):
            raise self.error("Unterminated group")
        return f"(?P<g{number}>{inner})"

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
        if ch == "k" and self.named:
            raise self.error("Invalid named reference")
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

    def atom_escape(self) -> str:
        self.pos += 1                                   # the backslash
        ch = self.peek()
        if ch == "":
            raise self.error("\\ at end of pattern")
        # DecimalEscape: a backreference iff its value <= NcapturingParens (Annex B otherwise).
        if ch in "123456789":
            m = re.compile(r"[0-9]+").match(self.src, self.pos)
            assert m is not None
            number = int(m.group())
            if number <= self.total_groups:
                self.pos = m.end()
                return self.backref(number)
            if self.u:
                raise self.error("Invalid escape")
        if ch == "k" and self.named:
            self.pos += 1
            if not self.eat("<"):
                raise self.error("Invalid named reference")
            name = self.group_name()
            self.pending_refs.append(name)
            self.saw_backref = True
            if name in self.names and self.names[name] in self.open_groups:
                return "(?:)"
            return f"\x00ref:{name}\x00"                 # resolved in _translate once names are known
        self.pos += 1
        cs = self.class_escape_set(ch)
        if cs is not None:
            return self.charset_atom(cs)
        self.pos -= 1
        return self.literal(self.character_escape(in_class=False))

    def backref(self, number: int) -> str:
        self.saw_backref = True
        if number in self.open_groups:
            # Inside its own group the capture is always undefined (unset before it closes, and
            # reset by RepeatMatcher on each iteration), so the reference matches "".
            return "(?:)"
        return f"(?P=g{number})"

    # -- classes --------------------------------------------------------------------------------
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

    def char_class(self) -> str:
        self.pos += 1
        negate = self.eat("^")
        cs = _CharSet()
        ranges: list[tuple[int, int]] = []
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
                    ranges.append((first, second))
                    continue
                if self.u:
                    raise self.error("Invalid character class")
                # Annex B NonemptyClassRangesNoDash: a class escape at either end makes '-' literal.
                for part in (first, ord("-"), second):
                    if isinstance(part, int):
                        ranges.append((part, part))
                    else:
                        cs = cs.union(part)
                continue
            if isinstance(first, int):
                ranges.append((first, first))
            else:
                cs = cs.union(first)
        cs = cs.union(_CharSet(ranges))
        return self.charset_atom(cs, negate)


def _join_pair(pair: str) -> str:
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def _split_astral(text: str) -> str:
    """A str of code points -> the same text as UTF-16 code units (one str char per unit)."""
    if text.isascii() or not _ASTRAL.search(text):
        return text
    return _ASTRAL.sub(lambda m: _to_pair(ord(m.group())), text)


def _to_pair(cp: int) -> str:
    cp -= 0x10000
    return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))


def _join_surrogates(text: str) -> str:
    if text.isascii() or not _SURROGATE_PAIR.search(text):
        return text
    return _SURROGATE_PAIR.sub(lambda m: _join_pair(m.group()), text)


def _balanced_single(atom: str) -> bool:
    """True when ``atom`` (starting with ``(?:``) is one group, not ``(?:a)(?:b)``."""
    depth, i = 0, 0
    in_class = False
    while i < len(atom):
        ch = atom[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if atom.startswith("[^", i):
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(atom) - 1:
                return False
        i += 1
    return True


_FLAG_CHARS = "dgimsuy"


def _check_flags(flags: str) -> None:
    for k, f in enumerate(flags):
        if f == "v":
            raise JSRegexError("the 'v' flag is not supported (not accepted for regex keys)")
        if f not in _FLAG_CHARS:
            raise JSRegexError(f"Invalid flags supplied to RegExp constructor '{flags}'")
        if f in flags[:k]:
            raise JSRegexError(f"Invalid flags supplied to RegExp constructor '{flags}' (duplicate '{f}')")


def group_nesting(pattern: str) -> int:
    """The deepest nesting of ``(`` groups (lookarounds included) in a JS pattern, without
    recursion; parentheses inside classes and escaped ones do not count."""
    depth = deepest = 0
    for _, ch in _parens(pattern):
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def _translate(pattern: str, flags: str, ascii_case_scoped: bool = False) -> tuple[str, bool, _Translator]:
    """JS (pattern, flags) -> (``regex`` V0 pattern text, whether texts must be canonicalised,
    the translator, whose ``newline``/``text_anchor``/``hazard`` facts describe the pattern).

    ``ascii_case_scoped`` asks for the fast variant of an ``i`` (non-``u``) pattern (see
    ``_Translator``). Raises JSRegexError.
    """
    _check_flags(flags)
    unicode_mode = "u" in flags
    src = _join_surrogates(pattern) if unicode_mode else _split_astral(pattern)
    options = dict(unicode_mode=unicode_mode, ignore_case="i" in flags, dot_all="s" in flags,
                   multiline="m" in flags, ascii_case_scoped=ascii_case_scoped)
    tr = _Translator(src, reset_groups=False, **options)
    out = tr.translate()
    if tr.saw_backref:
        tr = _Translator(src, reset_groups=True, **options)
        out = tr.translate()
    for name in set(tr.pending_refs):
        out = out.replace(f"\x00ref:{name}\x00", f"(?P=g{tr.names[name]})")
    return out, tr.saw_backref and tr.i, tr


_FOLDS_TO_ASCII = regex.compile("[\\u0130\\u0131\\u017f\\u212a]")

_Compiled = tuple[regex.Pattern, "dict[int, int] | None", "regex.Pattern | None"]
_UNSET: object = object()        # JSRegex._lead before its first search


_Translated = tuple[str, bool, "str | None"]     # (regex text, canonicalise texts?, fast variant or None)


def _translation(pattern: str, flags: str, max_expansion: int | None = REGEX_MAX_EXPANSION
                 ) -> tuple[_Translated, bool, str | None, int]:
    """((the ``regex`` pattern text, whether texts must be canonicalised, the fast variant for
    texts without the characters of ``_FOLDS_TO_ASCII`` or None), whether the regex is
    line-local (see :attr:`JSRegex.line_local`), its catastrophic shape or None, the terms it
    builds). RegexTooComplex past ``max_expansion`` terms (None: no limit). Nothing is compiled."""
    text, canonical, tr = _translate(pattern, flags)
    if max_expansion is not None and tr.units > max_expansion:
        exc = RegexTooComplex(f"counted repeats expand the pattern to {tr.units:,} terms, more than the "
                              f"limit max_regex_expansion={max_expansion:,}")
        exc.expansion = tr.units
        raise exc
    fast_text = None
    if "i" in flags and "u" not in flags and not canonical:
        fast_text, _, _ = _translate(pattern, flags, True)
        if fast_text == text:
            fast_text = None
    line_local = not (tr.newline or tr.text_anchor or "y" in flags)
    return (text, canonical, fast_text), line_local, tr.hazard, tr.units


def _compile_texts(pattern: str, flags: str, translated: _Translated) -> _Compiled:
    """(the compiled pattern, the Canonicalize table to apply to texts or None, the compiled
    fast variant or None) of a :func:`_translation`."""
    text, canonical, fast_text = translated
    table = _canon_table("u" in flags) if canonical else None
    try:
        compiled = regex.compile(text, regex.V0)
        fast = regex.compile(fast_text, regex.V0) if fast_text is not None else None
    except regex.error as exc:  # a translator bug, not a user error: say so loudly
        raise RuntimeError(f"lorescan.js.regex produced an invalid regex for /{pattern}/{flags}: {exc}") from exc
    return compiled, table, fast


def _compile_translated(pattern: str, flags: str, max_expansion: int | None = REGEX_MAX_EXPANSION
                        ) -> tuple[_Compiled, bool, str | None, int]:
    """:func:`_translation`, compiled: (the :func:`_compile_texts` triple, line-local, hazard, terms)."""
    translated, line_local, hazard, units = _translation(pattern, flags, max_expansion)
    return _compile_texts(pattern, flags, translated), line_local, hazard, units


class JSRegex:
    """A compiled JS regex. Immutable and thread-safe; pickles as (source, flags).

    ``source``/``flags`` are the JS pattern and flags as given to :func:`compile_js_regex`.
    ``line_local``: no match can consume U+000A (no class, escape, ``.`` under ``s`` or
    literal that accepts it, lookarounds included), the pattern has no whole-input anchor
    (``^``/``$`` without ``m``) and no ``y``. Then a match in a text never reaches past the
    text's lines, and its assertions see a line break and the input edge alike, so on a
    SillyTavern haystack the regex can be tested text by text (see ``lorescan.match.regexscope``).
    ``hazard``: a classic catastrophic-backtracking shape found in the pattern, or None.
    ``expansion``: the terms the compiled pattern holds, counted repeats multiplied out (0 when
    not known: a regex unpickled and not compiled by :func:`compile_regex_key`).
    """

    __slots__ = ("source", "flags", "line_local", "hazard", "expansion", "_compiled", "_translated", "_sticky",
                 "_unicode", "_hash", "_lead", "_plan")
    # slot types (set once, via object.__setattr__, in __init__; _compiled also on first search)
    source: str
    flags: str
    line_local: bool
    hazard: str | None
    expansion: int
    _compiled: _Compiled | None
    _translated: _Translated | None   # compiled on the first search (regex.compile costs ~0.5 ms a pattern)
    _sticky: bool
    _hash: int
    _unicode: bool
    _lead: object                 # tuple[str, ...] | None once known; _UNSET before
    _plan: Plan | None            # how it runs and what it costs (js.linear), with _compiled

    def __init__(self, source: str, flags: str, compiled: _Compiled | None = None, line_local: bool = False,
                 hazard: str | None = None, expansion: int = 0, translated: _Translated | None = None) -> None:
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "flags", flags)
        object.__setattr__(self, "line_local", line_local)
        object.__setattr__(self, "hazard", hazard)
        object.__setattr__(self, "expansion", expansion)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_translated", translated)
        object.__setattr__(self, "_sticky", "y" in flags)
        object.__setattr__(self, "_unicode", "u" in flags)
        object.__setattr__(self, "_hash", hash((source, flags)))
        object.__setattr__(self, "_lead", _UNSET)
        object.__setattr__(self, "_plan", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("JSRegex is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("JSRegex is immutable")

    def __reduce__(self):
        # recompiled lazily on first search (the facts travel, so no translation is needed)
        return (JSRegex, (self.source, self.flags, None, self.line_local, self.hazard, self.expansion))

    def __repr__(self) -> str:
        return f"JSRegex(/{self.source}/{self.flags})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JSRegex) and (self.source, self.flags) == (other.source, other.flags)

    def __hash__(self) -> int:
        return self._hash

    def _ready(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        return compiled

    @property
    def plan(self) -> Plan:
        """How this regex runs (RE2 or backtracking) and what an evaluation costs (:mod:`lorescan.js.linear`)."""
        self._ready()
        return self._plan                               # type: ignore[return-value]

    def cost(self, text: str | JSText) -> float:
        """The nominal seconds :meth:`search` may take on ``text``: a pure function of the
        pattern and the text (inf: the regex backtracks with no polynomial bound)."""
        self._ready()
        plan = self._plan
        assert plan is not None
        if not isinstance(text, JSText):
            text = JSText(text)
        if plan.re2 is not None:
            data = text.linear(self._unicode)
            if data is not None:
                return plan.linear_cost(len(data))
        return plan.backtrack_cost(len(text.points() if self._unicode else text.units()))

    def search(self, text: str | JSText, *, timeout: float | None = 0.25, per_call: bool = False) -> bool:
        """True iff ``RegExp.prototype.test(text)`` is true for a fresh regex object.

        ``g`` has no effect; ``y`` anchors the match at index 0. A regex RE2 can run exactly
        runs there, in linear time (``timeout`` is not needed); any other on ``regex``, where
        ``timeout`` is in seconds of wall-clock time (None: no limit) and RegexTimeout is
        raised past it. ``per_call``: ``timeout`` bounds each call into ``regex`` (one per
        candidate start), so no Python clock is read (``RegexBudget``'s backstop). ``text``
        may be a :class:`JSText`, prepared once for many regexes.
        """
        compiled = self._ready()
        if not isinstance(text, JSText):
            text = JSText(text)
        re2 = self._plan.re2                            # type: ignore[union-attr]
        if re2 is not None:
            data = text.linear(self._unicode)
            if data is not None:
                return (re2.match(data) if self._sticky else re2.search(data)) is not None
        return self._backtrack(compiled, text, timeout, per_call)

    def _backtrack(self, compiled: _Compiled, text: JSText, timeout: float | None, per_call: bool = False) -> bool:
        """:meth:`search` on ``regex`` (the translation's own engine)."""
        lead = self._lead
        if lead is _UNSET:                              # computed once, like the translation
            lead = leading_literals(self.source, self.flags)
            object.__setattr__(self, "_lead", lead)
        pattern, canon_table, fast = compiled
        if fast is not None and not text.folds():
            pattern = fast
        seen = text.text
        if lead is not None and "i" in self.flags:
            seen = text.lower()
        prepared = text.points() if self._unicode else text.units()
        if canon_table is not None:
            # i + backreference: JS compares Canonicalize(ch) everywhere, so match the
            # canonicalised text (sets are case-closed, so they accept the canonical chars).
            prepared = prepared.translate(canon_table)
        try:
            if self._sticky:
                return pattern.match(prepared, timeout=timeout) is not None
            if lead is not None and len(seen) == len(prepared) == len(text.text):
                # Every match begins with a leading literal, and positions line up (no
                # character changed length in lowercasing or in the UTF-16/code-point form):
                # try the regex at those positions only.
                return _match_at_literals(pattern, prepared, seen, lead, timeout, per_call)  # type: ignore[arg-type]
            return pattern.search(prepared, timeout=timeout) is not None
        except TimeoutError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} exceeded {timeout}s") from exc
        except MemoryError as exc:
            # regex can loop without bound on an empty-matching quantified group whose captures
            # change every iteration (backreference bookkeeping): treat it as not completing.
            raise RegexTimeout(f"regex /{self.source}/{self.flags} ran out of memory") from exc


    def _compile(self) -> _Compiled:
        """Compile on the first search (idempotent, race-safe)."""
        translated = self._translated
        if translated is not None:                  # translated when the key was compiled
            compiled = _compile_texts(self.source, self.flags, translated)
        else:                                       # unpickled: translate again
            compiled = _compile_translated(self.source, self.flags, max(self.expansion, REGEX_MAX_EXPANSION))[0]
        object.__setattr__(self, "_plan", plan_of(compiled[0].pattern, self._unicode, self._sticky))
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_translated", None)
        return compiled

    def find(self, text: str, *, timeout: float | None = 0.25) -> tuple[int, int] | None:
        """The span of the match ``RegExp.prototype.exec(text)`` finds for a fresh regex object
        (the leftmost one), as indexes into ``text`` (a Python str: code points), or None.

        For explanations: :meth:`search` answers whether; this says where, at a higher cost.
        A match that starts or ends inside a UTF-16 surrogate pair (a pattern without ``u``
        can match half of an astral character) is widened to the whole character. Raises
        RegexTimeout like :meth:`search`.
        """
        pattern, canon_table, fast = self._ready()
        jtext = JSText(text)
        if fast is not None and not jtext.folds():
            pattern = fast
        prepared = jtext.points() if self._unicode else jtext.units()
        if canon_table is not None:
            prepared = prepared.translate(canon_table)
        try:
            m = pattern.match(prepared, timeout=timeout) if self._sticky else pattern.search(prepared, timeout=timeout)
        except TimeoutError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} exceeded {timeout}s") from exc
        except MemoryError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} ran out of memory") from exc
        if m is None:
            return None
        start, end = m.span()
        if len(prepared) == len(text):
            return start, end
        at = _prepared_offsets(text, self._unicode)
        last = bisect.bisect_left(at, end)
        while last < len(text) and at[last + 1] == at[last]:     # a low surrogate joined to the one before
            last += 1
        return bisect.bisect_right(at, start) - 1, last


def _prepared_offsets(text: str, unicode_mode: bool) -> list[int]:
    """Where each character of ``text`` (and its end) lands in the text a pattern matches:
    code units without ``u`` (an astral character takes two), code points with it (a
    surrogate pair written as two characters takes one)."""
    widths = [1] * len(text)
    if unicode_mode:
        for m in _SURROGATE_PAIR.finditer(text):
            widths[m.start() + 1] = 0
    else:
        for i, ch in enumerate(text):
            if ord(ch) > 0xFFFF:
                widths[i] = 2
    return [0, *itertools.accumulate(widths)]


class JSText:
    """One text prepared for many :meth:`JSRegex.search` calls: its UTF-16 and code-point
    forms and its case-folding check are computed once, on first use."""

    __slots__ = ("text", "_units", "_points", "_folds", "_lower", "_linear")

    def __init__(self, text: str) -> None:
        self.text = text
        self._units: str | None = None
        self._points: str | None = None
        self._folds: bool | None = None
        self._lower: str | None = None
        self._linear: dict[bool, bytes | None] | None = None

    def linear(self, unicode_mode: bool) -> bytes | None:
        """The bytes RE2 searches (see :func:`lorescan.js.linear.linear_text`), or None."""
        if self._linear is None:
            self._linear = {}
        try:
            return self._linear[unicode_mode]
        except KeyError:
            data = linear_text(self.points() if unicode_mode else self.units(), unicode_mode)
            self._linear[unicode_mode] = data
            return data

    def units(self) -> str:
        if self._units is None:
            self._units = _split_astral(self.text)
        return self._units

    def points(self) -> str:
        if self._points is None:
            self._points = _join_surrogates(self.text)
        return self._points

    def folds(self) -> bool:
        if self._folds is None:
            self._folds = _FOLDS_TO_ASCII.search(self.text) is not None
        return self._folds

    def lower(self) -> str:
        """``str.lower`` of the text (JS toLowerCase), where case-insensitive literals are looked for."""
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower


def _match_at_literals(pattern: regex.Pattern, text: str, seen: str, lead: tuple[str, ...],
                       timeout: float | None, per_call: bool = False) -> bool:
    """Whether ``pattern`` matches ``text`` at a position where ``seen`` (the text as the
    literals are written: itself, or lowercased, of the same length) has a leading literal.
    ``timeout`` bounds the whole search, or each ``match`` call when ``per_call``."""
    starts: set[int] = set()
    for lit in lead:
        at = seen.find(lit)
        while at != -1:
            starts.add(at)
            at = seen.find(lit, at + 1)
    if not starts:
        return False
    deadline = None if timeout is None or per_call else time.monotonic() + timeout
    for at in sorted(starts):
        left = timeout if deadline is None else max(deadline - time.monotonic(), 1e-6)
        if pattern.match(text, at, timeout=left) is not None:
            return True
    return False


def compile_regex_key(pattern: str, flags: str, *, max_length: int | None = None,
                      max_nesting: int | None = None, max_expansion: int | None = REGEX_MAX_EXPANSION) -> JSRegex:
    """Compile a JS RegExp (``new RegExp(pattern, flags)``) into a :class:`JSRegex`, uncached.
    The pattern is translated (and checked) now; ``regex`` compiles the translation on the
    first search, so a key that is never searched (its required literals never occur)
    never pays that (~0.5 ms a pattern, more than the translation).

    ``max_length`` / ``max_nesting``: refuse a pattern longer than this many characters or
    with groups nested deeper (RegexTooComplex), before translating it: translation is
    recursive in the nesting and costs time in the length. ``max_expansion``: refuse a
    pattern whose counted repeats multiply out to more terms than this (RegexTooComplex),
    after translating and before compiling it (None: no limit): ``regex`` builds one copy of an
    atom per repetition of its minimum count, so ``a{10000000}`` alone takes 4 s and 2.6 GB. Raises
    JSRegexError wherever JS would throw a SyntaxError, and for the ``v`` flag.
    """
    if max_length is not None and len(pattern) > max_length:
        raise RegexTooComplex(f"the pattern has {len(pattern):,} characters, more than the limit "
                              f"max_regex_length={max_length:,}")
    if max_nesting is not None:
        depth = group_nesting(pattern)
        if depth > max_nesting:
            raise RegexTooComplex(f"groups are nested {depth} deep, more than the limit "
                                  f"max_regex_nesting={max_nesting}")
    try:
        translated, line_local, hazard, expansion = _translation(pattern, flags, max_expansion)
    except RecursionError:          # nesting allowed by raised limits but deeper than the stack
        raise RegexTooComplex(f"groups are nested {group_nesting(pattern)} deep, too deep to "
                              "translate here") from None
    return JSRegex(pattern, flags, None, line_local, hazard, expansion, translated)


@functools.lru_cache(maxsize=1024)
def compile_js_regex(pattern: str, flags: str) -> JSRegex:
    """:func:`compile_regex_key` without limits, memoised: a convenience for tools, tests and
    explanations of keys an engine has accepted. Engines never use it: a compiled book holds
    its own compiled regexes."""
    return compile_regex_key(pattern, flags, max_expansion=None)


_KEY_SHAPE = re.compile(r"/([\s\S]+?)/([gimsuy]*)\Z")


def split_regex_key(key: str) -> tuple[str, str] | None:
    """(pattern, flags) of a key shaped like a SillyTavern regex key, without compiling it."""
    return _split_key(key)


def _split_key(key: str) -> tuple[str, str] | None:
    m = _KEY_SHAPE.match(key)
    if m is None:
        return None
    body, flags = m.group(1), m.group(2)
    for k, ch in enumerate(body):
        if ch == "/" and (k == 0 or body[k - 1] != "\\"):
            return None
    return body.replace("\\/", "/", 1), flags


def regex_key(key: str, *, max_length: int | None = None, max_nesting: int | None = None,
              max_expansion: int | None = REGEX_MAX_EXPANSION) -> JSRegex | None:
    """The compiled regex of a SillyTavern regex key, or None for a plain key (docs/sillytavern-mode.md#st-regex-keys; see
    :func:`parse_regex_key`). Uncached. Raises RegexTooComplex past ``max_length`` (of the
    pattern), ``max_nesting`` or ``max_expansion`` (see :func:`compile_regex_key`): such a key
    is a regex to SillyTavern, so it is refused rather than read as text."""
    split = _split_key(key)
    if split is None:
        return None
    try:
        return compile_regex_key(split[0], split[1], max_length=max_length, max_nesting=max_nesting,
                                 max_expansion=max_expansion)
    except JSRegexError:
        return None


def parse_regex_key(key: str) -> tuple[str, str] | None:
    """Split a SillyTavern regex key into (pattern, flags), or None for a plain key (docs/sillytavern-mode.md#st-regex-keys).

    The body is the shortest non-empty ``P`` with ``key == '/' + P + '/' + F`` and ``F`` drawn
    from ``gimsuy``; ``P`` must have no ``/`` that is at its start or not preceded by ``\\``;
    the returned pattern is ``P`` with its first ``\\/`` replaced by ``/`` (ST quirk) and must
    compile with ``F`` (duplicate flags fail).
    """
    split = _split_key(key)
    if split is None:
        return None
    try:
        compile_js_regex(*split)
    except JSRegexError:
        return None
    return split


# ---------------------------------------------------------------------------------------------
# Required literals: the prefilter of a regex key
# ---------------------------------------------------------------------------------------------
#
# What a scan may skip: a text (or window) that holds none of a key's required literals
# cannot hold a match, so the regex is not run there. The literals are found on the parse of
# the JS pattern, node by node, as two facts:
#   exact: every string the node can match, when that is a small finite set (else None);
#   req:   a set of strings one of which every match of the node contains (else None).
# A sequence's req is the best of its items' reqs and of the products of consecutive exact
# items; an alternation's req is the union of its alternatives' (each must have one). Under
# ``i`` a literal character stands for its whole JS case class, written as the Python
# lowercase of each member (the form the book's case-insensitive automaton pass sees); U+03A3
# lowercases by context (Final_Sigma), so it stands for both sigmas. Only BMP characters
# that are neither surrogates nor "\n" nor U+0001 go into a literal: a literal then never
# spans a haystack joiner, and it matches the same code units whether the regex works on
# UTF-16 units or on code points. Anything not understood contributes no requirement.

_MAX_LITERALS = 32                      # the largest literal set kept (per node and in the answer)
_LIT_IDENTITY = frozenset("^$\\.*+?()[]{}|/-")     # escapes that stand for the character itself
_LIT_QUANT = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_LIT_UNKNOWN: tuple[frozenset[str] | None, ...] = (None, None, None)
_LIT_EMPTY: tuple[frozenset[str] | None, ...] = (frozenset(("",)), None, None)
_LitInfo = tuple  # (exact, req, lead): lead, a set one of which every match begins with


class _GiveUp(Exception):
    """The literal scan met syntax it does not follow exactly: no prefilter for this key."""


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


class _LiteralScan:
    def __init__(self, src: str, ignore_case: bool, unicode_mode: bool, *, required: bool = True) -> None:
        self.src, self.n, self.i = src, len(src), 0
        self.ignore_case, self.unicode_mode = ignore_case, unicode_mode
        self.required = required        # False: only the leading literals are wanted

    def char(self, ch: str) -> _LitInfo:
        variants = _literal_char(ch, self.ignore_case, self.unicode_mode)
        return _LIT_UNKNOWN if variants is None else (variants, variants, variants)

    def disjunction(self) -> _LitInfo:
        alts = [self.alternative()]
        while self.i < self.n and self.src[self.i] == "|":
            self.i += 1
            alts.append(self.alternative())
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

    def alternative(self) -> _LitInfo:
        # items: (exact, req, edge); edge: what a repeated atom (x+, x{2,}) matches at least
        # at either end, x^lo, usable as the last piece of a run before it or the first
        # piece of a run after it (bo+b holds "bo" and "ob").
        items: list[tuple[frozenset[str] | None, ...]] = []
        while self.i < self.n and self.src[self.i] not in "|)":
            item = self.quantified(self.atom())
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
        for start in range(len(items) if self.required else 0):     # products of consecutive exact items
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

    def quantified(self, atom: _LitInfo) -> tuple[frozenset[str] | None, ...]:
        """(exact, req, edge, lead) of an atom and its quantifier."""
        src, i = self.src, self.i
        exact, req, lead = atom
        if i >= self.n:
            return exact, req, exact, lead
        ch = src[i]
        if ch in "*+?":
            lo, hi = (0, None) if ch == "*" else (1, None) if ch == "+" else (0, 1)
            i += 1
        elif ch == "{" and (m := _LIT_QUANT.match(src, i)) is not None:
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(2)) if m.group(2) else None)
            i = m.end()
        else:
            return exact, req, exact, lead
        if i < self.n and src[i] == "?":        # lazy
            i += 1
        self.i = i
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

    def atom(self) -> _LitInfo:
        src, i = self.src, self.i
        ch = src[i]
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == "\\":
            return self.escape()
        self.i = i + 1
        if ch == ".":
            return _LIT_UNKNOWN
        if ch in "^$":
            return _LIT_EMPTY
        if ch in "*+?":
            raise _GiveUp                       # a quantifier with nothing to repeat: not a valid key
        return self.char(ch)

    def group(self) -> _LitInfo:
        src, i = self.src, self.i
        kind = "capture"
        if src.startswith("(?:", i):
            i += 3
        elif src.startswith(("(?=", "(?!"), i):
            i, kind = i + 3, "look"
        elif src.startswith(("(?<=", "(?<!"), i):
            i, kind = i + 4, "look"
        elif src.startswith("(?<", i):
            close = src.find(">", i)
            if close == -1 or any(c in "()[]|" for c in src[i + 3:close]):
                raise _GiveUp
            i = close + 1
        elif src.startswith("(?", i):
            raise _GiveUp                       # modifiers or anything newer: not followed here
        else:
            i += 1
        self.i = i
        inner = self.disjunction()
        if self.i >= self.n or src[self.i] != ")":
            raise _GiveUp
        self.i += 1
        return _LIT_EMPTY if kind == "look" else inner

    def escape(self) -> _LitInfo:
        src, i = self.src, self.i
        if i + 1 >= self.n:
            raise _GiveUp
        c = src[i + 1]
        if c in "bB":
            self.i = i + 2
            return _LIT_EMPTY
        if c in _LIT_IDENTITY:
            self.i = i + 2
            return self.char(c)
        end = _escape_end(src, i)
        if any(x in "()[]|" for x in src[i + 2:end]):
            raise _GiveUp                       # e.g. \k<a|b> without named groups: not one atom
        self.i = end
        return _LIT_UNKNOWN

    def char_class(self) -> _LitInfo:
        src, i, n = self.src, self.i + 1, self.n
        negated = i < n and src[i] == "^"
        if negated:
            i += 1
        start = i
        simple = not negated
        while i < n and src[i] != "]":
            if src[i] == "\\":
                simple = False
                i += 2
            else:
                i += 1
        if i >= n:
            raise _GiveUp
        body = src[start:i]
        self.i = i + 1
        if not simple or not body:
            return _LIT_UNKNOWN
        chars: list[str] = []
        k = 0
        while k < len(body):
            if k + 2 < len(body) and body[k + 1] == "-":
                lo, hi = ord(body[k]), ord(body[k + 2])
                if hi < lo or hi - lo >= _MAX_LITERALS:
                    return _LIT_UNKNOWN
                chars.extend(chr(cp) for cp in range(lo, hi + 1))
                k += 3
            else:
                chars.append(body[k])
                k += 1
        out: set[str] = set()
        for ch in chars:
            variants = _literal_char(ch, self.ignore_case, self.unicode_mode)
            if variants is None:
                return _LIT_UNKNOWN
            out |= variants
        exact = frozenset(out)
        return (exact, exact, exact) if len(exact) <= _MAX_LITERALS else _LIT_UNKNOWN


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _escape_end(pattern: str, i: int) -> int:
    """Index just past the escape that starts at ``pattern[i] == "\\"`` (its longest JS reading)."""
    n = len(pattern)
    if i + 1 >= n:
        return n
    c = pattern[i + 1]
    j = i + 2
    if c == "x":
        k = j
        while k < n and k < j + 2 and pattern[k] in _HEX_DIGITS:
            k += 1
        return k
    if c == "u":
        if j < n and pattern[j] == "{":
            close = pattern.find("}", j)
            return n if close == -1 else close + 1
        k = j
        while k < n and k < j + 4 and pattern[k] in _HEX_DIGITS:
            k += 1
        return k
    if c == "c":
        return j + 1 if j < n and pattern[j].isascii() and pattern[j].isalpha() else j
    if c in "pP" and j < n and pattern[j] == "{":
        close = pattern.find("}", j)
        return n if close == -1 else close + 1
    if c == "k" and j < n and pattern[j] == "<":
        close = pattern.find(">", j)
        return n if close == -1 else close + 1
    if c.isdigit():
        while j < n and pattern[j].isdigit():
            j += 1
        return j
    return j


def required_literals(pattern: str, flags: str) -> tuple[str, ...] | None:
    """Literals one of which every match of the JS regex ``/pattern/flags`` contains, or None.

    Sorted; at most 32; each non-empty, without "\\n" or U+0001, and made of BMP characters
    that are not surrogates. Without ``i`` a literal is matched on the raw text; with ``i`` it
    is in Python lowercase and is to be looked for in the lowercased text (``str.lower``,
    which is JS ``toLowerCase``): whatever the regex matches, the lowercased text then holds
    one of them. Conservative: syntax the scan does not follow exactly gives None, never a
    literal that a match may lack. A prefilter only: the regex still decides.
    """
    scan = _LiteralScan(pattern, "i" in flags, "u" in flags)
    try:
        exact, req, _lead = scan.disjunction()
    except (_GiveUp, IndexError):
        return None
    if scan.i != scan.n:                # an unmatched ")": the scan lost the structure
        return None
    best = _lit_best((req, exact))
    return tuple(sorted(best)) if best is not None else None


def leading_literals(pattern: str, flags: str) -> tuple[str, ...] | None:
    """Literals one of which every match of ``/pattern/flags`` begins with, or None.

    The same form as :func:`required_literals` (lowercase under ``i``): a match can only
    start where one of them starts, so :meth:`JSRegex.search` tries the regex there alone.
    None for a sticky (``y``) regex, which only ever tries index 0.
    """
    if "y" in flags:
        return None
    scan = _LiteralScan(pattern, "i" in flags, "u" in flags, required=False)
    try:
        _exact, _req, lead = scan.disjunction()
    except (_GiveUp, IndexError):
        return None
    if scan.i != scan.n or not lead or "" in lead:
        return None
    # a literal that another one begins ("kasha" and "kashas") adds no start of its own
    return tuple(sorted(lit for lit in lead if not any(o != lit and lit.startswith(o) for o in lead)))
