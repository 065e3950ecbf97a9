"""Write JSON data as JavaScript literal text in many spellings, for the janitor reader's tests.

Independent of the reader: a small writer driven by a ``random.Random`` that picks, node by
node, quotes, key quoting, trailing commas, comments, string concatenation, escapes and
number spellings. ``Style`` fixes one choice everywhere (the named spellings); ``mixed``
picks per node.
"""
from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from typing import Any

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class Style:
    quotes: str = '"'              # '"', "'", "`", or "mixed"
    unquoted_keys: bool = False
    trailing_commas: bool = False
    comments: bool = False
    concatenate: bool = False
    escapes: bool = False          # \uXXXX, \x, \u{...} escapes for some characters
    hex_numbers: bool = False
    mixed: bool = False            # every choice random per node


SPELLINGS = {
    "json": Style(),
    "single_quotes": Style(quotes="'"),
    "unquoted_keys": Style(unquoted_keys=True),
    "trailing_commas": Style(trailing_commas=True),
    "comments": Style(comments=True),
    "concatenations": Style(concatenate=True),
    "template_strings": Style(quotes="`"),
    "escapes": Style(escapes=True, quotes="'"),
    "hex_numbers": Style(hex_numbers=True),
    "everything": Style(quotes="mixed", unquoted_keys=True, trailing_commas=True, comments=True,
                        concatenate=True, escapes=True, hex_numbers=True, mixed=True),
}


@dataclass(frozen=True)
class Code:
    """A JavaScript expression written as is (a refusal test's payload)."""
    text: str


class _Writer:
    def __init__(self, style: Style, rng: random.Random) -> None:
        self.style, self.rng = style, rng

    def pick(self, flag: bool) -> bool:
        return flag and (not self.style.mixed or self.rng.random() < 0.5)

    def gap(self) -> str:
        if not self.pick(self.style.comments):
            return self.rng.choice(["", " ", "\n  "]) if self.style.mixed else ""
        return self.rng.choice([" /* note */ ", " // a line comment\n", "\n/** doc\n * block */\n"])

    def value(self, v: Any) -> str:
        if isinstance(v, Code):
            return v.text
        if v is None:
            return "null"
        if v is True or v is False:
            return "true" if v else "false"
        if isinstance(v, int):
            if v >= 0 and self.pick(self.style.hex_numbers):
                return hex(v)
            return str(v)
        if isinstance(v, float):
            assert math.isfinite(v)
            return repr(v)
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, list):
            items = [self.gap() + self.value(x) + self.gap() for x in v]
            tail = "," if items and self.pick(self.style.trailing_commas) else ""
            return "[" + ",".join(items) + tail + "]"
        assert isinstance(v, dict)
        members = [self.gap() + self.key(k) + self.gap() + ":" + self.gap() + self.value(x) + self.gap()
                   for k, x in v.items()]
        tail = "," if members and self.pick(self.style.trailing_commas) else ""
        return "{" + ",".join(members) + tail + "}"

    def key(self, k: str) -> str:
        if self.pick(self.style.unquoted_keys) and _IDENT.fullmatch(k) and k != "__proto__":
            return k
        return self.quoted(k, self.rng.choice("'\"") if self.style.mixed else (
            '"' if self.style.quotes == "`" else self.style.quotes if self.style.quotes != "mixed" else "'"))

    def string(self, s: str) -> str:
        if self.pick(self.style.concatenate) and len(s) > 1:
            cuts = sorted(self.rng.sample(range(1, len(s)), min(len(s) - 1, self.rng.randint(1, 3))))
            pieces = [s[a:b] for a, b in zip([0] + cuts, cuts + [len(s)])]
            return (" + " if not self.style.comments else " /* + */ + ").join(self.one_string(p) for p in pieces)
        return self.one_string(s)

    def one_string(self, s: str) -> str:
        quote = self.style.quotes
        if quote == "mixed":
            quote = self.rng.choice(["'", '"', "`"])
        return self.quoted(s, quote)

    def quoted(self, s: str, quote: str) -> str:
        out = []
        for ch in s:
            code = ord(ch)
            if ch == "\\":
                out.append("\\\\")
            elif ch == quote:
                out.append("\\" + ch)
            elif quote == "`" and ch == "$":
                out.append("\\$")                 # never a ${ substitution
            elif ch == "\n":
                out.append("\n" if quote == "`" and self.rng.random() < 0.5 else "\\n")
            elif ch == "\r":
                out.append("\\r")
            elif ch == "\t":
                out.append("\\t")
            elif code < 0x20 or code in (0x2028, 0x2029) or 0xD800 <= code <= 0xDFFF:
                out.append(f"\\u{code:04x}")
            elif self.pick(self.style.escapes) and (code > 0x7E or self.rng.random() < 0.1):
                out.append(self.escaped(ch))
            else:
                out.append(ch)
        return quote + "".join(out) + quote

    def escaped(self, ch: str) -> str:
        code = ord(ch)
        kinds = ["u{}"] + (["u"] if code <= 0xFFFF else ["pair"]) + (["x"] if code <= 0xFF else [])
        kind = self.rng.choice(kinds)
        if kind == "x":
            return f"\\x{code:02X}"
        if kind == "u":
            return f"\\u{code:04X}"
        if kind == "pair":
            hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
            return f"\\u{hi:04x}\\u{lo:04x}"
        return f"\\u{{{code:x}}}"


def spell(value: Any, style: Style, seed: int = 0) -> str:
    """``value`` (JSON data) as JavaScript literal text in ``style``."""
    return _Writer(style, random.Random(seed)).value(value)


PRELUDE = """/* ============================================================================
   a pasted lorebook script (an engine would follow; this test prelude only holds decoys)
   var dynamicLore = ["in a comment"];
   ========================================================================== */
var DEBUG = 0;
var decoy = "var dynamicLore = 'in a string'";
var rx = /var dynamicLore = ["']/g;
"""


def script(value: Any, style: Style, seed: int = 0, *, knobs: dict[str, Any] | None = None,
           keyword: str = "var") -> str:
    """A whole script text declaring ``dynamicLore`` (and the knobs) in ``style``."""
    lines = [PRELUDE]
    for name, v in (knobs or {}).items():
        lines.append(f"{keyword} {name} = {json.dumps(v)};")
    lines.append(f"{keyword} dynamicLore = {spell(value, style, seed)};")
    lines.append("function after() { return dynamicLore.length; }\n")
    return "\n".join(lines)
