"""Where each activated entry lands in the prompt (docs/sillytavern-mode.md#st-placement)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..model import Entry

__all__ = ["Placement", "DepthGroup", "place_entries", "assemble_authors_note"]


@dataclass(slots=True)
class DepthGroup:
    """@depth entries of one (depth, role): injected ``depth`` messages from the end."""

    depth: Any
    role: int
    entries: list[str]


@dataclass(slots=True)
class Placement:
    """The placement buckets of docs/sillytavern-mode.md#st-placement.

    ``before``/``after``: text around the character definitions; ``an_top``/``an_bottom``
    and the assembled ``authors_note``; ``depth``: groups by (depth, role); ``examples``:
    ``(0 = top | 1 = bottom, content)``; ``outlets``: name -> contents.
    """

    before: str = ""
    after: str = ""
    an_top: list[str] = field(default_factory=list)
    an_bottom: list[str] = field(default_factory=list)
    authors_note: str | None = None
    depth: list[DepthGroup] = field(default_factory=list)
    examples: list[tuple[int, str]] = field(default_factory=list)
    outlets: dict[str, list[str]] = field(default_factory=dict)


def assemble_authors_note(top: Sequence[str], note: str, bottom: Sequence[str]) -> str:
    """``top + "\\n" + note + "\\n" + bottom`` minus one leading and one trailing newline."""
    text = "\n".join(top) + "\n" + note + "\n" + "\n".join(bottom)
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def place_entries(activated: Sequence[tuple[Entry, str]], *, authors_note: str | None = None,
                  post_process: Callable[[str, int, int | None], str] | None = None) -> Placement:
    """Build the buckets from ``(entry, content)`` pairs in activation order.

    Entries are stable-sorted by order descending and each is put at the FRONT of its
    list, so lists read in ascending order (ties: later-activated first); outlets are
    appended instead (descending order). Empty contents are left out.
    """
    ranked = sorted(activated, key=lambda p: -p[0].order if not math.isnan(p[0].order) else 0.0)
    before: list[str] = []
    after: list[str] = []
    out = Placement()
    for entry, content in ranked:
        pos = entry.position
        if post_process is not None:
            depth = (entry.depth if entry.depth is not None else 4) if pos == 4 else None
            content = post_process(content, pos, depth)
        if not content:
            continue
        if pos == 0:
            before.insert(0, content)
        elif pos == 1:
            after.insert(0, content)
        elif pos == 2:
            out.an_top.insert(0, content)
        elif pos == 3:
            out.an_bottom.insert(0, content)
        elif pos == 4:
            depth = entry.depth if entry.depth is not None else 4
            role = entry.role if entry.role is not None else 0
            for g in out.depth:
                if g.depth == depth and g.role == role:
                    g.entries.insert(0, content)
                    break
            else:
                out.depth.append(DepthGroup(entry.depth, role, [content]))
        elif pos in (5, 6):
            out.examples.insert(0, (pos - 5, content))
        elif pos == 7:
            if entry.outlet_name:
                out.outlets.setdefault(entry.outlet_name, []).append(content)
    out.before = "\n".join(before)
    out.after = "\n".join(after)
    if authors_note is not None:
        out.authors_note = assemble_authors_note(out.an_top, authors_note, out.an_bottom)
    return out
