"""JavaScript literals read as data, never run: the ``dynamicLore`` array of a JanitorAI script.

:func:`parse_literal` reads one value at a position of a script's text: objects (unquoted,
quoted and numeric keys), arrays, strings in single, double or back quotes (templates without
``${}``), ``+`` concatenation of string literals, numbers (signed, fractions, exponents, hex,
octal, binary, ``_`` separators), ``true``/``false``/``null``, and ``undefined`` as an object
member's value (the member is left out: every read of it gives ``undefined`` either way).
Comments and JavaScript's whitespace are skipped anywhere. Everything else is code, and code
is refused with a :class:`~lorescan.errors.FormatError` naming the file, the line and column,
and the entry index and field when the parser is inside one: a call, a getter or setter, a
method, a computed key, a spread, an identifier reference, ``${}``, a function, an arrow
function, ``new``, a regex literal, an array hole, ``__proto__`` (which sets the prototype).

:func:`find_declarations` finds ``var``/``let``/``const NAME =`` at the top of a script,
skipping strings, comments, templates and regex literals, so a name inside them is not found.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import FormatError
from ..limits import DEFAULT_LIMITS, Limits

__all__ = ["parse_literal", "find_declarations", "Declaration", "location", "skip_space"]

_LINE_TERMINATORS = "\n\r\u2028\u2029"
# JavaScript's WhiteSpace and LineTerminator (ECMA-262 §12.2, §12.3): Zs plus these.
_SPACE = frozenset("\t\v\f \u00a0\ufeff\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                   "\u2009\u200a\u202f\u205f\u3000" + _LINE_TERMINATORS)
_IDENT_START = re.compile(r"[A-Za-z_$\u0080-\U0010ffff]")
_IDENT = re.compile(r"[A-Za-z_$\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff\u200c\u200d]*")
_NUMBER = re.compile(r"""0[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*
                        |0[oO][0-7](?:_?[0-7])*
                        |0[bB][01](?:_?[01])*
                        |(?:(?:0|[1-9](?:_?[0-9])*)(?:\.(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)
                         (?:[eE][+-]?[0-9](?:_?[0-9])*)?""", re.X)
_SPACE_CHARS = "".join(sorted(_SPACE))
_SKIP = re.compile("(?:[" + _SPACE_CHARS + "]+|//[^" + _LINE_TERMINATORS + "]*|/\\*.*?\\*/)*", re.S)
_PLAIN = {"'": re.compile(r"[^'\\\n\r]+"), '"': re.compile(r'[^"\\\n\r]+'), "`": re.compile(r"[^`\\$\r]+")}
_BORING = re.compile(r"[^'\"`/A-Za-z_$0-9\u0080-\U0010ffff]+")     # punctuation and whitespace between tokens
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}
_EXACT_INT = 2**53
_WORDS = {"true": True, "false": False, "null": None}


def location(text: str, pos: int) -> str:
    """``line L column C`` (both from 1, columns in characters) of ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def skip_space(text: str, pos: int, *, source: str = "<memory>") -> int:
    """The first position at or after ``pos`` that is neither whitespace nor a comment."""
    m = _SKIP.match(text, pos)
    end = m.end() if m is not None else pos          # the pattern matches the empty string: never None
    if text.startswith("/*", end):
        raise FormatError(f"{location(text, end)}: a block comment is never closed", source=source)
    return end


def _path_field(path: list[Any]) -> str | None:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


class _Parser:
    def __init__(self, text: str, source: str, limits: Limits, entry_level: bool) -> None:
        self.text, self.source, self.limits = text, source, limits
        self.path: list[Any] = []           # where we are: [index, "field", index, ...]
        self.entry_level = entry_level      # the value is the entry array: path[0] is the entry
        self.containers = 0

    def fail(self, pos: int, problem: str) -> FormatError:
        path = self.path
        if self.entry_level and path and isinstance(path[0], int):
            entry, field = path[0], _path_field(path[1:])
        else:
            entry, field = None, _path_field(path)
        return FormatError(f"{location(self.text, pos)}: {problem}", source=self.source, entry=entry,
                           field=field)

    def space(self, pos: int) -> int:
        return skip_space(self.text, pos, source=self.source)

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        pos = self.space(pos)
        text = self.text
        if pos >= len(text):
            raise self.fail(pos, "the value is missing (end of the file)")
        ch = text[pos]
        if ch == "{" or ch == "[":
            if depth >= self.limits.max_json_depth:
                raise self.fail(pos, f"nested deeper than {self.limits.max_json_depth} levels")
            self.containers += 1
            if self.containers > self.limits.max_json_containers:
                raise self.fail(pos, f"more than max_json_containers={self.limits.max_json_containers} "
                                     "arrays and objects")
            return self.object(pos + 1, depth + 1) if ch == "{" else self.array(pos + 1, depth + 1)
        if ch in "'\"`":
            return self.concatenation(pos)
        if ch in "+-" or ch.isdigit() or (ch == "." and text[pos + 1:pos + 2].isdigit()):
            return self.number(pos)
        return self.word(pos)

    def word(self, pos: int) -> tuple[Any, int]:
        text = self.text
        m = _IDENT.match(text, pos)
        if m is None:
            ch = text[pos]
            what = {"(": "a parenthesised expression or an arrow function", "/": "a regex literal",
                    ".": "a spread (...)" if text.startswith("...", pos) else "a member access"}.get(ch)
            raise self.fail(pos, f"{what or f'{ch!r}'} is not a literal value; lorescan reads data only and "
                                 "runs no code")
        name, end = m.group(), m.end()
        after = self.space(end)
        nxt = text[after:after + 1]
        if name in _WORDS and not text.startswith("=>", after) and nxt not in ("(", "."):
            return _WORDS[name], end
        if name == "undefined" and nxt not in ("(", ".") and not text.startswith("=>", after):
            return _UNDEFINED, end
        if name == "function":
            raise self.fail(pos, "a function is code, not data; lorescan runs no code")
        if name == "new":
            raise self.fail(pos, "a constructor call (new ...) is code, not data; lorescan runs no code")
        if text.startswith("=>", after):
            raise self.fail(pos, "an arrow function is code, not data; lorescan runs no code")
        if nxt == "(":
            raise self.fail(pos, f"a function call ({name}(...)) is code, not data; lorescan runs no code")
        if name in ("NaN", "Infinity"):
            raise self.fail(pos, f"{name} has no JSON form; write a finite number")
        raise self.fail(pos, f"an identifier reference ({name}) is not a literal; lorescan does not "
                             "evaluate variables")

    def number(self, pos: int) -> tuple[Any, int]:
        text = self.text
        sign = 1
        start = pos
        while text[pos:pos + 1] in ("+", "-"):
            if text[pos] == "-":
                sign = -sign
            pos = self.space(pos + 1)
        if text[pos:pos + 1] == "0" and text[pos + 1:pos + 2].isdigit():
            raise self.fail(pos, "a legacy octal number (leading 0) is ambiguous; write it without the 0")
        m = _NUMBER.match(text, pos)
        if m is None:
            raise self.fail(start, "a sign must be followed by a number literal")
        raw = m.group().replace("_", "")
        end = m.end()
        if end < len(text) and (_IDENT_START.match(text, end) or text[end].isdigit()):
            what = "a BigInt (n suffix)" if text[end] == "n" else "a malformed number"
            raise self.fail(pos, f"{what} is not a JSON number")
        if len(raw) > 4300:
            raise self.fail(pos, "a number literal of more than 4,300 digits")
        low = raw.lower()
        if low.startswith(("0x", "0o", "0b")):
            value: Any = int(raw[2:], {"x": 16, "o": 8, "b": 2}[low[1]])
        elif "." in raw or "e" in low:
            value = float(raw)
        else:
            value = int(raw)
        if isinstance(value, int) and abs(value) > _EXACT_INT:
            value = float(value)           # a JavaScript number: the nearest double
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(pos, f"the number {raw[:40]} is out of range (not finite)")
        return sign * value, end

    def concatenation(self, pos: int) -> tuple[str, int]:
        parts = []
        while True:
            part, pos = self.string(pos)
            parts.append(part)
            after = self.space(pos)
            if self.text.startswith("+", after) and not self.text.startswith("++", after):
                nxt = self.space(after + 1)
                if self.text[nxt:nxt + 1] in ("'", '"', "`"):
                    pos = nxt
                    continue
                raise self.fail(nxt, "only string literals may be joined with +")
            return _join_utf16("".join(parts)), pos

    def string(self, pos: int) -> tuple[str, int]:
        text = self.text
        quote = text[pos]
        pos += 1
        out: list[str] = []
        n = len(text)
        plain = _PLAIN[quote].match
        while True:
            m = plain(text, pos)
            if m is not None:
                out.append(m.group())
                pos = m.end()
            if pos >= n:
                raise self.fail(pos, "a string is never closed")
            ch = text[pos]
            if ch == quote:
                return "".join(out), pos + 1
            if ch == "\\":
                pos = self.escape(pos + 1, out, quote)
                continue
            if quote == "`":
                if text.startswith("${", pos):
                    raise self.fail(pos, "a template substitution (${...}) is code, not data; lorescan "
                                         "runs no code")
                if ch == "\r":            # a template's CR and CRLF read as LF
                    out.append("\n")
                    pos += 2 if text.startswith("\r\n", pos) else 1
                    continue
            elif ch in "\n\r":
                raise self.fail(pos, "a line break inside a quoted string (use \\n, or a template string)")
            out.append(ch)
            pos += 1

    def escape(self, pos: int, out: list[str], quote: str) -> int:
        text = self.text
        if pos >= len(text):
            raise self.fail(pos, "a string is never closed")
        ch = text[pos]
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
            return pos + 1
        if ch in _LINE_TERMINATORS:          # a line continuation: nothing
            return pos + (2 if text.startswith("\r\n", pos) else 1)
        if ch == "0" and not text[pos + 1:pos + 2].isdigit():
            out.append("\0")
            return pos + 1
        if ch.isdigit():
            raise self.fail(pos - 1, f"the octal escape \\{ch} is not allowed; write \\x or \\u")
        if ch == "x":
            digits = text[pos + 1:pos + 3]
            if not re.fullmatch(r"[0-9a-fA-F]{2}", digits):
                raise self.fail(pos - 1, "\\x needs two hexadecimal digits")
            out.append(chr(int(digits, 16)))
            return pos + 3
        if ch == "u":
            if text.startswith("{", pos + 1):
                end = text.find("}", pos + 2)
                digits = text[pos + 2:end] if end > 0 else ""
                if not re.fullmatch(r"[0-9a-fA-F]{1,8}", digits) or int(digits, 16) > 0x10FFFF:
                    raise self.fail(pos - 1, "\\u{...} needs a code point of at most 10FFFF")
                out.append(chr(int(digits, 16)))
                return end + 1
            digits = text[pos + 1:pos + 5]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise self.fail(pos - 1, "\\u needs four hexadecimal digits")
            out.append(chr(int(digits, 16)))
            return pos + 5
        out.append(ch)                       # \' \" \\ \` and any other character: itself
        return pos + 1

    def key(self, pos: int) -> tuple[str, int]:
        text = self.text
        ch = text[pos]
        if ch in "'\"":
            key, end = self.string(pos)
            return _join_utf16(key), end
        if ch == "`":
            raise self.fail(pos, "a template string cannot be a property name")
        if ch == "[":
            raise self.fail(pos, "a computed key ([...]) is code, not data; lorescan runs no code")
        if text.startswith("...", pos):
            raise self.fail(pos, "a spread (...) is code, not data; lorescan runs no code")
        if ch.isdigit() or ch == ".":
            value, end = self.number(pos)
            return _js_number_string(value), end
        m = _IDENT.match(text, pos)
        if m is None:
            raise self.fail(pos, f"expected a property name, found {ch!r}")
        return m.group(), m.end()

    def object(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        text = self.text
        out: dict[str, Any] = {}
        while True:
            pos = self.space(pos)
            if text.startswith("}", pos):
                return out, pos + 1
            start = pos
            if pos >= len(text):
                raise self.fail(pos, "an object is never closed")
            name, pos = self.key(pos)
            pos = self.space(pos)
            nxt = text[pos:pos + 1]
            bare = text[start] not in "'\"" and not text[start].isdigit()
            if nxt == "(":
                raise self.fail(start, "a method is code, not data; lorescan runs no code")
            if bare and name in ("get", "set", "async") and nxt not in (":", ",", "}"):
                what = {"get": "a getter", "set": "a setter"}.get(name, "a method")
                raise self.fail(start, f"{what} is code, not data; lorescan runs no code")
            if nxt in (",", "}"):
                raise self.fail(start, f"a shorthand property ({name}) refers to a variable; write "
                                       f"{name}: value")
            if nxt != ":":
                raise self.fail(pos, f"expected ':' after the property name {name!r}")
            if name == "__proto__":
                raise self.fail(start, "__proto__ in a literal sets the prototype instead of a field")
            self.path.append(name)
            value, pos = self.value(pos + 1, depth)
            if value is not _UNDEFINED:
                out[name] = value
            else:
                out.pop(name, None)
            self.path.pop()
            pos = self.space(pos)
            if text.startswith(",", pos):
                pos += 1
            elif not text.startswith("}", pos):
                raise self.fail(pos, self.unexpected(pos, "',' or '}' in an object"))

    def array(self, pos: int, depth: int) -> tuple[list[Any], int]:
        text = self.text
        out: list[Any] = []
        while True:
            pos = self.space(pos)
            if text.startswith("]", pos):
                return out, pos + 1
            if pos >= len(text):
                raise self.fail(pos, "an array is never closed")
            if text.startswith(",", pos):
                raise self.fail(pos, "an array hole (two commas in a row) has no JSON form")
            if text.startswith("...", pos):
                raise self.fail(pos, "a spread (...) is code, not data; lorescan runs no code")
            self.path.append(len(out))
            value, pos = self.value(pos, depth)
            if value is _UNDEFINED:
                raise self.fail(pos, "undefined inside an array has no JSON form; write null or leave it out")
            self.path.pop()
            out.append(value)
            pos = self.space(pos)
            if text.startswith(",", pos):
                pos += 1
            elif not text.startswith("]", pos):
                raise self.fail(pos, self.unexpected(pos, "',' or ']' in an array"))

    def unexpected(self, pos: int, wanted: str) -> str:
        if pos >= len(self.text):
            return f"expected {wanted}, found the end of the file"
        ch = self.text[pos]
        if ch in "(.[?":
            return f"the value continues with {ch!r}: only literals are read, no calls or expressions"
        return f"expected {wanted}, found {ch!r}"


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"


_UNDEFINED: Any = _Undefined()


def _join_utf16(text: str) -> str:
    """A JavaScript string's UTF-16 surrogate pairs as the characters they encode (lone halves stay)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _js_number_string(value: Any) -> str:
    """String(number) for a numeric property name (``1.50`` -> ``"1.5"``, ``0x10`` -> ``"16"``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def parse_literal(text: str, pos: int, *, source: str = "<memory>", limits: Limits = DEFAULT_LIMITS,
                  entries: bool = False, field: str | None = None) -> tuple[Any, int]:
    """The JavaScript literal at ``pos`` of ``text`` as JSON data, and the position after it.

    Args:
        text: the script.
        pos: where the value starts (whitespace and comments before it are skipped).
        source: names the file in errors.
        limits: ``max_json_depth`` and ``max_json_containers`` bound the value.
        entries: the value is the entry array, so errors inside it name the entry by index.
        field: the name errors use for the value itself (a knob), when ``entries`` is false.

    Raises:
        FormatError: anything that is not a literal, located by line and column (and entry
            and field).
    """
    parser = _Parser(text, source, limits, entries)
    if field:
        parser.path.append(field)
    try:
        value, end = parser.value(pos, 0)
    except RecursionError as exc:
        raise FormatError(f"{location(text, pos)}: nested too deeply to read from this call depth",
                          source=source) from exc
    if value is _UNDEFINED:
        value = None
    return value, end


@dataclass(frozen=True, slots=True)
class Declaration:
    """``var``/``let``/``const NAME =`` in a script: where the value starts."""
    name: str
    keyword: str
    start: int          # the declaration's first character
    value: int          # the first character after '='


_DECL = re.compile(r"\b(var|let|const)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*=(?![=>])")
_REGEX_AFTER = frozenset("(,=:[!&|?{};+-*%<>~^")
_REGEX_WORDS = frozenset({"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void",
                          "throw", "instanceof", "yield", "await"})


def find_declarations(text: str, names: frozenset[str], *, source: str = "<memory>") -> list[Declaration]:
    """Every ``var``/``let``/``const`` declaration of one of ``names`` outside strings, comments,
    templates and regex literals, in text order (the declaration must be the statement's first
    binding: ``var a = 1, NAME = 2`` is not found)."""
    out: list[Declaration] = []
    n = len(text)
    pos = 0
    prev = ""            # the last significant character, to tell a regex literal from a division
    prev_word = ""
    while pos < n:
        ch = text[pos]
        if ch not in "/'\"`" and not ch.isalnum() and ch not in "_$":
            m = _BORING.match(text, pos)
            if m is not None:
                run = m.group().strip(_SPACE_CHARS)
                if run:
                    prev, prev_word = run[-1], ""
                pos = m.end()
                continue
        if ch in _SPACE:
            pos += 1
            continue
        if text.startswith("//", pos) or text.startswith("/*", pos):
            pos = skip_space(text, pos, source=source)
            continue
        if ch in "'\"`":
            pos = _skip_string(text, pos, source)
            prev, prev_word = ch, ""
            continue
        if ch == "/" and (prev == "" or prev in _REGEX_AFTER or prev_word in _REGEX_WORDS):
            pos = _skip_regex(text, pos)
            prev, prev_word = "/", ""
            continue
        m = _IDENT.match(text, pos)
        if m is not None:
            word = m.group()
            if word in ("var", "let", "const"):
                d = _DECL.match(text, pos)
                if d is not None and d.group(2) in names:
                    out.append(Declaration(d.group(2), d.group(1), pos, d.end()))
            pos, prev, prev_word = m.end(), "a", word
            continue
        if ch.isdigit():
            m = _NUMBER.match(text, pos)
            pos = m.end() if m is not None and m.end() > pos else pos + 1
            prev, prev_word = "0", ""
            continue
        prev, prev_word = ch, ""
        pos += 1
    return out


def _skip_string(text: str, pos: int, source: str) -> int:
    quote = text[pos]
    pos += 1
    n = len(text)
    depth = 0                       # ${ ... } nesting inside a template (skipped as code)
    plain = _PLAIN[quote].match
    while pos < n:
        m = plain(text, pos)
        if m is not None and not depth:
            pos = m.end()
            if pos >= n:
                break
        ch = text[pos]
        if ch == "\\":
            pos += 2
            continue
        if quote == "`" and text.startswith("${", pos):
            depth += 1
            pos += 2
            continue
        if depth and ch == "}":
            depth -= 1
        elif not depth and ch == quote:
            return pos + 1
        elif quote != "`" and ch in "\n\r":
            return pos              # not a valid string; let the parser complain where it matters
        pos += 1
    return n


def _skip_regex(text: str, pos: int) -> int:
    pos += 1
    n = len(text)
    in_class = False
    while pos < n:
        ch = text[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch in "\n\r":
            return pos
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "/":
            pos += 1
            while pos < n and (text[pos].isalnum() or text[pos] == "_"):
                pos += 1
            return pos
        pos += 1
    return n
