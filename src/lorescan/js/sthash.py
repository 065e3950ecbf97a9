"""SillyTavern's entry fingerprint: cyrb53 over ``JSON.stringify`` of the runtime entry.

docs/sillytavern-mode.md#st-fingerprint. Timed-effect records store it, so SillyTavern mode must
reproduce it exactly: JavaScript number formatting, JSON string escaping (lone
surrogates escaped, non-ASCII kept), and hashing over UTF-16 code units.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Callable, Mapping, Sequence

__all__ = ["cyrb53", "js_json_stringify", "js_number_to_string", "entry_fingerprint", "HASH_BACKEND"]

_M32 = 0xFFFFFFFF


def cyrb53(text: str, seed: int = 0) -> int:
    """SillyTavern's ``getStringHash``: 53-bit cyrb53 over the UTF-16 code units of ``text``
    (the native kernel ``lorescan._sthash_c`` when built, else its twin :func:`_cyrb53_py`)."""
    return _cyrb53(text, seed & _M32) if type(text) is str else _cyrb53_py(text, seed)


def _cyrb53_py(text: str, seed: int = 0) -> int:
    """The pure-Python twin of ``lorescan._sthash_c.cyrb53`` (the reference)."""
    h1 = (0xDEADBEEF ^ seed) & _M32
    h2 = (0x41C6CE57 ^ seed) & _M32
    for ch in text:
        c = ord(ch)
        if c > 0xFFFF:   # astral: two code units (a surrogate pair)
            c -= 0x10000
            for unit in (0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF)):
                h1 = ((h1 ^ unit) * 2654435761) & _M32
                h2 = ((h2 ^ unit) * 1597334677) & _M32
            continue
        h1 = ((h1 ^ c) * 2654435761) & _M32
        h2 = ((h2 ^ c) * 1597334677) & _M32
    h1 = (((h1 ^ (h1 >> 16)) * 2246822507) & _M32) ^ (((h2 ^ (h2 >> 13)) * 3266489909) & _M32)
    h2 = (((h2 ^ (h2 >> 16)) * 2246822507) & _M32) ^ (((h1 ^ (h1 >> 13)) * 3266489909) & _M32)
    return 4294967296 * (h2 & 0x1FFFFF) + h1


def _select_cyrb53() -> tuple[Callable[[str, int], int], str]:
    """The native cyrb53 if built (and ``LORESCAN_PURE_PYTHON`` is not ``1``), else the twin; a
    kernel that is built but fails to import is an error, not a fallback (as match/_kernels.py)."""
    if os.environ.get("LORESCAN_PURE_PYTHON") != "1":
        try:
            from .._sthash_c import cyrb53 as native   # import-cost: a small kernel, once per process
            return native, "native"
        except ModuleNotFoundError as exc:
            if exc.name != "lorescan._sthash_c":
                raise
    return _cyrb53_py, "python"


_cyrb53, HASH_BACKEND = _select_cyrb53()


def js_number_to_string(x: float | int) -> str:
    """``Number.prototype.toString()`` for a finite number (ECMAScript Number::toString)."""
    if isinstance(x, bool):
        raise TypeError("bool is not a number here")
    if isinstance(x, int):
        if abs(x) < 10**21:
            return str(x)
        try:
            x = float(x)
        except OverflowError:     # JSON.parse reads 1e400 as Infinity, which stringify writes as null
            return "null"
    if not math.isfinite(x):
        return "null"   # JSON.stringify writes NaN/Infinity as null
    if x == 0:
        return "0"
    if x < 0:
        return "-" + js_number_to_string(-x)
    # Shortest round-trip digits from repr, then JS layout rules.
    r = repr(x)
    mant, _, exp = r.partition("e")
    e = int(exp) if exp else 0
    if "." in mant:
        intpart, frac = mant.split(".")
    else:
        intpart, frac = mant, ""
    digits = (intpart + frac).lstrip("0")
    # decimal exponent n such that value = 0.d1d2... * 10^n
    lead_zeros = len(intpart + frac) - len((intpart + frac).lstrip("0"))
    n = len(intpart) + e - lead_zeros
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    sign = "+" if n - 1 >= 0 else "-"
    if k == 1:
        return f"{digits}e{sign}{abs(n - 1)}"
    return f"{digits[0]}.{digits[1:]}e{sign}{abs(n - 1)}"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_string(s: str) -> str:
    return _js_string_fix(json.dumps(s, ensure_ascii=False))


def _js_string_fix(out: str) -> str:
    """``json.dumps`` text with its surrogates escaped, as ``JSON.stringify`` escapes lone ones
    (Python strs hold code points: any surrogate here is lone; only strings can hold one)."""
    if _LONE_SURROGATE.search(out):
        out = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, (int, float)):
        return js_number_to_string(value)
    raise TypeError(f"not JSON data: {type(value).__name__}")


_PLAIN_DEPTH = 64       # deeper values take the general path (json.dumps recurses in C)
_JS_INT = 10 ** 21


def _plain(value: Any) -> bool:
    """Whether ``json.dumps`` writes ``value`` as ``JSON.stringify`` does (lone surrogates aside,
    :func:`_js_string`'s fix): plain dicts with str keys, lists, tuples, str, bool, None, ints
    below 1e21 and floats whose repr is their JS text, at most :data:`_PLAIN_DEPTH` deep."""
    stack = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        t = type(v)
        if t is str or t is bool or v is None:
            continue
        if t is int:
            if -_JS_INT < v < _JS_INT:
                continue
            return False
        if t is float:
            if float.__repr__(v) == js_number_to_string(v):
                continue
            return False
        if depth >= _PLAIN_DEPTH:
            return False
        if t is dict:
            for k, x in v.items():
                if type(k) is not str:
                    return False
                t = type(x)
                if t is str or t is bool or x is None or (t is int and -_JS_INT < x < _JS_INT):
                    continue
                push((x, depth + 1))
        elif t is list or t is tuple:
            for x in v:
                t = type(x)
                if t is str or t is bool or x is None or (t is int and -_JS_INT < x < _JS_INT):
                    continue
                push((x, depth + 1))
        else:
            return False
    return True


def js_json_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-shaped Python data (no whitespace, JS numbers).

    Plain data (:func:`_plain`: what JSON reading gives) is written by ``json.dumps`` in one
    call; anything else by :func:`_stringify`.
    """
    if _plain(value):
        return _js_string_fix(json.dumps(value, ensure_ascii=False, separators=(",", ":"), check_circular=False))
    return _stringify(value)


def _stringify(value: Any) -> str:
    """:func:`js_json_stringify` for any JSON-shaped data (the reference the plain path equals).

    Written without recursion: an entry's unknown fields may nest as deep as the loader
    allows, and fingerprinting runs from whatever call depth the caller is at.
    """
    out: list[str] = []
    # A stack of iterators over containers; each yields the text before an item and the item.
    stack: list[Any] = [iter((("", value),))]
    closers: list[str] = [""]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            out.append(closers.pop())
            continue
        prefix, item = step
        out.append(prefix)
        if isinstance(item, Mapping):
            out.append("{")
            stack.append(((("," if i else "") + _js_string(str(k)) + ":", v)
                          for i, (k, v) in enumerate(item.items())))
            closers.append("}")
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append((("," if i else "", v) for i, v in enumerate(item)))
            closers.append("]")
        else:
            out.append(_scalar(item))
    return "".join(out)


def entry_fingerprint(fields: Mapping[str, Any], *, uid: Any, world: str, content: str,
                      decorators: Sequence[str]) -> int:
    """The hash SillyTavern stores in timed-effect records for one entry (docs/sillytavern-mode.md#st-fingerprint).

    The serialised object is ``uid``, ``world``, then the entry's other fields in order
    with ``content`` replaced by the decorator-stripped text, then ``decorators``.
    """
    obj: dict[str, Any] = {"uid": uid, "world": world}
    for k, v in fields.items():
        if k in ("uid", "world", "decorators"):
            continue
        obj[k] = content if k == "content" else v
    if "content" not in obj:
        obj["content"] = content
    obj["decorators"] = list(decorators)
    return cyrb53(js_json_stringify(obj))
