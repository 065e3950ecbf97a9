"""JavaScript's implicit conversions of JSON values: ``String(x)``, ``Number(x)``, ``parseInt``,
``parseFloat``, ``isFinite``, and property reads (``x.name``, ``x[i]``) on parsed JSON.

JSON values are Python ``None`` (``null``; a missing member reads as ``None`` too, where
``undefined`` and ``null`` behave alike), ``bool``, ``int``, ``float``, ``str``, ``list``
and ``dict``. Numbers are returned as ``float`` (``int`` where the input already was one).
"""
from __future__ import annotations

import math
import re
from typing import Any

from .sthash import js_number_to_string
from .text import JS_WHITESPACE, js_trim

__all__ = ["js_string", "js_to_number", "js_parse_int", "js_parse_float", "js_is_finite",
           "js_get", "js_length", "js_number_to_string", "is_js_number", "utf16_units", "utf16_sort_key", "js_sorted"]

NAN = float("nan")
_LEADING_WS = "".join(sorted(JS_WHITESPACE))
# ASCII digits only: Python's \d would also take other scripts' digits, which JS rejects
_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_INT_PREFIX = re.compile(r"[+-]?[0-9]+")
_RADIX_LITERAL = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def is_js_number(value: Any) -> bool:
    """``typeof value === "number"`` for a JSON value (a bool is not a number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def js_string(value: Any) -> str:
    """``String(value)``: ``null``, ``true``, numbers as JS prints them, arrays joined with
    commas (``null`` items empty), objects as ``[object Object]``."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if isinstance(value, float) and math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return js_number_to_string(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_to_number(value: Any) -> float:
    """``Number(value)`` (unary ``+``)."""
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:          # an integer beyond the double range
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        return _string_to_number(value)
    if isinstance(value, list):
        return _string_to_number(js_string(value))
    return NAN


def _string_to_number(text: str) -> float:
    s = js_trim(text)
    if not s:
        return 0.0
    m = _RADIX_LITERAL.fullmatch(s)
    if m:
        base = {"x": 16, "o": 8, "b": 2}[m.group(1)[0].lower()]
        return float(int(m.group(1)[1:], base))
    if _DECIMAL.fullmatch(s):
        return _decimal(s)
    return NAN


def _decimal(s: str) -> float:
    body = s.lstrip("+-")
    sign = -1.0 if s.startswith("-") else 1.0
    if body == "Infinity":
        return sign * math.inf
    return sign * float(body)


def js_parse_float(value: Any) -> float:
    """``parseFloat(value)``: the longest decimal prefix after leading JS whitespace, else NaN."""
    s = js_string(value).lstrip(_LEADING_WS)
    m = _DECIMAL.match(s)
    return _decimal(m.group()) if m else NAN


def js_parse_int(value: Any) -> float:
    """``parseInt(value, 10)``: the leading decimal integer after leading JS whitespace, else NaN."""
    s = js_string(value).lstrip(_LEADING_WS)
    m = _INT_PREFIX.match(s)
    if not m:
        return NAN
    n = int(m.group())
    if n == 0 and m.group().startswith("-"):
        return -0.0
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def js_is_finite(value: Any) -> bool:
    """The global ``isFinite(value)`` (which converts with ``Number`` first)."""
    return math.isfinite(js_to_number(value))


def utf16_units(text: str) -> list[str]:
    """The UTF-16 code units of ``text``, each as a one-character string (astral characters
    become two lone surrogates), as JS indexes a string."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return out


def utf16_sort_key(text: str) -> list[int]:
    """Sort key giving JS's default ``Array.prototype.sort`` order (UTF-16 code units)."""
    return [ord(u) for u in utf16_units(text)]


def js_sorted(strings: Any) -> list[str]:
    """``Array.prototype.sort()`` of strings: UTF-16 order (code point order unless a string
    holds an astral character)."""
    items = list(strings)
    if any(s and max(s) > "\uffff" for s in items):
        return sorted(items, key=utf16_sort_key)
    return sorted(items)


def js_length(value: Any) -> Any:
    """``value.length`` for a JSON value: a number for strings and arrays, the member of an
    object (any JSON value, ``None`` if absent), ``None`` (undefined) otherwise."""
    if isinstance(value, str):
        return sum(2 if ord(ch) > 0xFFFF else 1 for ch in value)
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return value.get("length")
    return None


def js_get(value: Any, key: str | float) -> Any:
    """``value[key]`` for a JSON value that is not ``null``: an object's member, an array's or
    a string's element at a numeric key (string elements are UTF-16 code units); ``None``
    stands for ``undefined``. Numbers as keys are turned into strings as JS does."""
    if isinstance(key, float) or isinstance(key, int):
        name = js_number_to_string(key) if math.isfinite(key) else js_string(key)
    else:
        name = key
    if isinstance(value, dict):
        return value.get(name)
    if isinstance(value, (list, str)):
        if name == "length":
            return js_length(value)
        if name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0")):
            i = int(name)
            seq = utf16_units(value) if isinstance(value, str) else value
            return seq[i] if i < len(seq) else None
    return None
