"""Character data and code-point sets of the JS regex translation: JS Canonicalize and its case
classes, the sets of ``\\s``/``\\w``/``\\d``, Unicode property names, UTF-16 helpers."""
from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable, Iterable

import regex

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
    from .. import _casetables  # import-cost: the generated table loads with the first case-insensitive regex
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




@functools.lru_cache(maxsize=4096)
def _closed(ranges: tuple[tuple[int, int], ...], props: tuple[str, ...], ignore_case: bool,
            unicode_mode: bool) -> _CharSet:
    """The set a JS class matches: itself, closed under Canonicalize under ``i``."""
    cs = _CharSet(ranges, props)
    return cs.case_closed(unicode_mode) if ignore_case else cs


@functools.lru_cache(maxsize=4096)
def _charset_emission(ranges: tuple[tuple[int, int], ...], props: tuple[str, ...], negate: bool,
                      ignore_case: bool, unicode_mode: bool) -> tuple[str, bool]:
    """(the ``regex`` text of a JS class, whether it accepts U+000A). A pure function of its
    arguments, memoised across patterns: closing a large class under ``i`` (``[\\s\\S]``,
    ``[\\u0000-\\uffff]``, ``\\p{L}``) takes 1.5-4 ms, and books repeat their classes."""
    cs = _closed(ranges, props, ignore_case, unicode_mode)
    return cs.emit(negate), cs.contains()(0x0A) != negate



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


