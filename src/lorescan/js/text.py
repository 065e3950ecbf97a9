"""JavaScript string rules the engine must follow exactly (docs/sillytavern-mode.md#st-text-rules).

Python's ``str.strip``/``str.split``/``str.isspace`` use a different whitespace set, so
they must not be used on scanned text or keys.
"""
from __future__ import annotations

import re
import unicodedata

__all__ = [
    "JS_WHITESPACE", "js_trim", "js_count_words", "has_js_whitespace", "js_lower",
    "is_ascii_word_char", "is_unicode_word_char", "is_nospace_char",
]

# Appendix A: the characters of JS \s and String.prototype.trim.
JS_WHITESPACE = frozenset(
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_CLASS = "[" + "".join(f"\\u{ord(c):04x}" for c in sorted(JS_WHITESPACE)) + "]"
_WS_RUN = re.compile(_WS_CLASS + "+")
_WS_ANY = re.compile(_WS_CLASS)
_TRIM_CHARS = "".join(sorted(JS_WHITESPACE))


def js_trim(text: str) -> str:
    """``String.prototype.trim``: strip JS whitespace (not Python's) from both ends."""
    return text.strip(_TRIM_CHARS)


def js_count_words(text: str) -> int:
    """``text.split(/\\s+/).filter(Boolean).length``: the conformance suite's token count."""
    return sum(1 for piece in _WS_RUN.split(text) if piece)


def has_js_whitespace(text: str) -> bool:
    """True when ``text`` contains any JS whitespace character (the multi-word key test)."""
    return _WS_ANY.search(text) is not None


def js_lower(text: str) -> str:
    """``String.prototype.toLowerCase``: Unicode default lowercase with Final_Sigma.

    Python's ``str.lower`` implements the same mapping; the result may be
    longer than the input (``'İ'`` becomes ``'i̇'``).
    """
    return text.lower()


def is_ascii_word_char(ch: str) -> bool:
    """SillyTavern's word characters: exactly ``A-Z a-z 0-9 _`` (JS ``\\w`` without ``u``)."""
    return ch == "_" or ("0" <= ch <= "9") or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def is_unicode_word_char(ch: str) -> bool:
    """Improved word characters (docs/improved-profile.md#word-chars): categories L*, M*, N*, Pc, plus ZWNJ and ZWJ."""
    if ch < "\x80":
        return is_ascii_word_char(ch)
    if ch in "\u200c\u200d":
        return True
    cat = unicodedata.category(ch)
    return cat[0] in "LMN" or cat == "Pc"


# docs/improved-profile.md#nospace-scripts: scripts written without spaces. Script data is not in unicodedata, so the
# ranges below list the blocks of Han, Hiragana, Katakana, Bopomofo, Hangul, Thai, Lao,
# Khmer, Myanmar, Tai Tham, Tai Le, New Tai Lue and Yi, plus U+3005 and U+30FC.
NOSPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0E7F),    # Thai
    (0x0E80, 0x0EFF),    # Lao
    (0x1000, 0x109F),    # Myanmar
    (0x1100, 0x11FF),    # Hangul Jamo
    (0x1780, 0x17FF),    # Khmer
    (0x1950, 0x197F),    # Tai Le
    (0x1980, 0x19DF),    # New Tai Lue
    (0x19E0, 0x19FF),    # Khmer Symbols
    (0x1A20, 0x1AAF),    # Tai Tham
    (0x2E80, 0x2FDF),    # CJK Radicals, Kangxi
    (0x3005, 0x3007),    # iteration mark, closing mark, ideographic zero
    (0x3021, 0x3029),    # Hangzhou numerals
    (0x3038, 0x303B),
    (0x3040, 0x30FF),    # Hiragana, Katakana (incl. U+30FC)
    (0x3100, 0x312F),    # Bopomofo
    (0x3130, 0x318F),    # Hangul Compatibility Jamo
    (0x31A0, 0x31BF),    # Bopomofo Extended
    (0x31F0, 0x31FF),    # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),    # CJK Ext A
    (0x4E00, 0x9FFF),    # CJK Unified
    (0xA000, 0xA4CF),    # Yi
    (0xA960, 0xA97F),    # Hangul Jamo Ext A
    (0xA9E0, 0xA9FF),    # Myanmar Ext B
    (0xAA60, 0xAA7F),    # Myanmar Ext A
    (0xAA80, 0xAADF),    # Tai Viet
    (0xAC00, 0xD7FF),    # Hangul syllables, Jamo Ext B
    (0xF900, 0xFAFF),    # CJK Compatibility Ideographs
    (0xFF66, 0xFFDC),    # halfwidth Katakana, Hangul
    (0x16FE0, 0x16FFF),  # ideographic symbols
    (0x1B000, 0x1B16F),  # Kana supplement / extended
    (0x20000, 0x3134F),  # CJK Ext B..G
)


def is_nospace_char(ch: str) -> bool:
    """True for a character of a script written without spaces (docs/improved-profile.md#nospace-scripts)."""
    cp = ord(ch)
    if cp < 0x0E00:
        return False
    for lo, hi in NOSPACE_RANGES:
        if cp < lo:
            return False
        if cp <= hi:
            return True
    return False
