"""Text output of the commands: colour on a terminal, plain when piped, tables that survive
odd names (line breaks, control characters, very long names)."""
from __future__ import annotations

import os
import shutil
import textwrap
import unicodedata
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Style", "one_line", "table"]

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


@dataclass(frozen=True, slots=True)
class Style:
    """ANSI colour or nothing. ``Style.for_stream(out, choice)``: ``always``, ``never`` or
    ``auto`` (a terminal, ``NO_COLOR`` unset, ``TERM`` not ``dumb``)."""

    color: bool
    width: int | None        # wrap to this width; None: never wrap (piped output)

    @classmethod
    def for_stream(cls, out: TextIO, choice: str = "auto") -> "Style":
        tty = bool(getattr(out, "isatty", lambda: False)())
        if choice == "always":
            color = True
        elif choice == "never":
            color = False
        else:
            color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        width = shutil.get_terminal_size((100, 24)).columns if tty else None
        return cls(color, width)

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        return "\x1b[" + ";".join(_CODES[s] for s in styles) + "m" + text + "\x1b[0m"


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line: line breaks as ``⏎``, other control characters as ``?``,
    cut to ``limit`` characters with ``…``."""
    if text.isprintable():
        s = text
        return s if limit is None or len(s) <= limit else s[:max(1, limit - 1)] + "…"
    out = []
    for ch in text:
        if ch in "\r\n":
            out.append("⏎")
        elif ch == "\t":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("?")
        else:
            out.append(ch)
    s = "".join(out)
    if limit is not None and len(s) > limit:
        s = s[:max(1, limit - 1)] + "…"
    return s


def _cell_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _cell_width(text))


def table(rows: list[tuple[str, str, str, str, list[str]]], style: Style, out: TextIO,
          headers: tuple[str, str, str] = ("Entry", "Result", "Why")) -> None:
    """Rows of (entry label, result, result colour, why, extra lines under why). The first
    two columns are padded; the why column wraps to the terminal's width (never when
    piped). Every cell is made one line first."""
    labels = [one_line(r[0], 48) for r in rows]
    results = [one_line(r[1], 24) for r in rows]
    w0 = max([_cell_width(x) for x in labels] + [len(headers[0])])
    w1 = max([_cell_width(x) for x in results] + [len(headers[1])])
    indent = w0 + w1 + 4
    why_width = None if style.width is None else max(30, style.width - indent - 1)

    def wrap(text: str) -> list[str]:
        text = one_line(text)
        if why_width is None:
            return [text]
        return textwrap.wrap(text, why_width, break_long_words=True, break_on_hyphens=False) or [""]

    print(style(_pad(headers[0], w0) + "  " + _pad(headers[1], w1) + "  " + headers[2], "bold"), file=out)
    for label, result, (_, _, colour, why, extra) in zip(labels, results, rows):
        lines = wrap(why)
        for x in extra:
            lines.extend(style(s, "yellow") for s in wrap("↳ " + x))
        first = _pad(label, w0) + "  " + style(_pad(result, w1), colour) + "  " + (lines[0] if lines else "")
        print(first.rstrip(), file=out)
        for more in lines[1:]:
            print(" " * indent + more, file=out)
