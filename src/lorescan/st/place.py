"""Where each activated entry lands in the prompt (docs/sillytavern-mode.md#st-placement)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Optional, Sequence

from ..model import Entry

__all__ = ["Placement", "DepthGroup", "Position", "POSITION_NAMES", "place_entries", "place_keyed",
           "assemble_authors_note"]


class Position(IntEnum):
    """An entry's ``position`` field: where its content goes (docs/sillytavern-mode.md#st-placement)."""

    BEFORE = 0       # before the character definitions
    AFTER = 1        # after them
    AN_TOP = 2       # above the Author's Note
    AN_BOTTOM = 3    # below it
    AT_DEPTH = 4     # injected ``depth`` messages from the end, as ``role``
    EM_TOP = 5       # above the example messages
    EM_BOTTOM = 6    # below them
    OUTLET = 7       # into the named outlet


POSITION_NAMES: dict[int, str] = {p.value: p.name.lower() for p in Position}
"""Position value -> short name (``"before"``, ``"at_depth"``, ...), as replay reports name them."""
_DEFAULT_DEPTH = 4   # an @depth entry whose depth is null (SillyTavern's DEFAULT_DEPTH)
# Plain ints for the placement loop: reading an enum member costs more than the comparison.
_BEFORE, _AFTER, _AN_TOP, _AN_BOTTOM, _AT_DEPTH, _EM_TOP, _EM_BOTTOM, _OUTLET = (int(p) for p in Position)


def _rank(order: float) -> float:
    return -order if order == order else 0.0       # NaN (order != order) ranks as 0


@dataclass(slots=True)
class DepthGroup:
    """@depth entries of one (depth, role).

    Args:
        depth: how many messages from the end they are injected (the first entry's own
            value: ``None`` when its field is null, which places it at depth 4).
        role: 0 system, 1 user, 2 assistant (or the book's own value).
        entries: their contents, in prompt order.
    """

    depth: float | None
    role: int | float | str
    entries: list[str]


@dataclass(slots=True)
class Placement:
    """The placement buckets of docs/sillytavern-mode.md#st-placement.

    Args:
        before, after: text around the character definitions.
        an_top, an_bottom: contents around the Author's Note.
        authors_note: the assembled note (None when no note is inserted this turn).
        depth: @depth groups by (depth, role).
        examples: ``(0 = top | 1 = bottom, content)`` around the example messages.
        outlets: outlet name -> contents.
    """

    before: str = ""
    after: str = ""
    an_top: list[str] = field(default_factory=list)
    an_bottom: list[str] = field(default_factory=list)
    authors_note: str | None = None
    depth: list[DepthGroup] = field(default_factory=list)
    examples: list[tuple[float, str]] = field(default_factory=list)
    outlets: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Returns: the buckets under the conformance vectors' names (``world_info_before``, ...)."""
        return {
            "world_info_before": self.before, "world_info_after": self.after,
            "depth_entries": [{"depth": d.depth, "role": d.role, "entries": list(d.entries)} for d in self.depth],
            "an_top": list(self.an_top), "an_bottom": list(self.an_bottom),
            "em_entries": [{"position": pos, "content": c} for pos, c in self.examples],
            "outlets": {k: list(v) for k, v in self.outlets.items()},
            "authors_note": self.authors_note,
        }


def assemble_authors_note(top: Sequence[str], note: str, bottom: Sequence[str]) -> str:
    """The Author's Note with its entries around it.

    Returns:
        ``top + "\\n" + note + "\\n" + bottom`` minus one leading and one trailing newline.
    """
    text = "\n".join(top) + "\n" + note + "\n" + "\n".join(bottom)
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def place_entries(activated: Sequence[tuple[Entry, str]], *, authors_note: str | None = None,
                  post_process: Callable[[str, float | None, float | None], str] | None = None) -> Placement:
    """Build the buckets from the activated entries.

    Entries are stable-sorted by order descending and each is put at the FRONT of its
    list, so lists read in ascending order (ties: later-activated first); outlets are
    appended instead (descending order). Empty contents are left out.

    Args:
        activated: ``(entry, content)`` pairs in activation order.
        authors_note: the note's text when it is inserted this turn.
        post_process: ``(content, position, depth) -> content`` applied to each content
            first (depth only for @depth entries).

    Returns:
        The filled :class:`Placement`.
    """
    ranked = sorted(activated, key=lambda p: _rank(p[0].order))
    before: list[str] = []
    after: list[str] = []
    out = Placement()
    for entry, content in ranked:
        pos = entry.position
        if post_process is not None:
            depth = (entry.depth if entry.depth is not None else _DEFAULT_DEPTH) if pos == _AT_DEPTH else None
            content = post_process(content, pos, depth)
        if not content:
            continue
        if pos == _BEFORE:
            before.append(content)
        elif pos == _AFTER:
            after.append(content)
        elif pos == _AN_TOP:
            out.an_top.insert(0, content)
        elif pos == _AN_BOTTOM:
            out.an_bottom.insert(0, content)
        elif pos == _AT_DEPTH:
            depth = entry.depth if entry.depth is not None else _DEFAULT_DEPTH
            role = entry.role if entry.role is not None else 0
            for g in out.depth:
                if g.depth == depth and g.role == role:
                    g.entries.insert(0, content)
                    break
            else:
                out.depth.append(DepthGroup(entry.depth, role, [content]))
        elif pos == _EM_TOP or pos == _EM_BOTTOM:
            out.examples.insert(0, (pos - _EM_TOP, content))
        elif pos == _OUTLET:
            if entry.outlet_name:
                out.outlets.setdefault(entry.outlet_name, []).append(content)
    before.reverse()    # each content went to the front of its list: the lists read in reverse rank
    after.reverse()
    out.before = "\n".join(before)
    out.after = "\n".join(after)
    if authors_note is not None:
        out.authors_note = assemble_authors_note(out.an_top, authors_note, out.an_bottom)
    return out


_PLACE_NAMES: dict[Any, str] = {_BEFORE: "before", _AFTER: "after", _AN_TOP: "an_top", _AN_BOTTOM: "an_bottom",
                _EM_TOP: "em_top", _EM_BOTTOM: "em_bottom"}
Arrange = Callable[[str, list[tuple[str, str]]], list[tuple[str, str]]]


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def place_keyed(activated: Sequence[tuple[Entry, str]], keys: Sequence[str], *, authors_note: str | None = None,
                post_process: Callable[[str, float | None, float | None], str] | None = None,
                arrange: Optional[Arrange] = None) -> tuple[Placement, dict[str, list[tuple[str, str]]]]:
    """:func:`place_entries` with the entries' keys, for cache-stable placement (lorescan.layout).

    Without ``arrange`` the placement equals :func:`place_entries`'s. ``arrange(place,
    items)`` may reorder the ``(key, content)`` items of one place (it must return the same
    items); @depth groups and the top/bottom slots of the example entries keep their order.

    Args:
        keys: each activated entry's key, in the order of ``activated``.

    Returns:
        The placement, and place name (docs/improved-profile.md#cache-stable) -> its
        ``(key, content)`` items in prompt order.
    """
    ranked = sorted(zip(activated, keys), key=lambda p: _rank(p[0][0].order))
    places: dict[str, list[tuple[str, str]]] = {}
    groups: list[tuple[Any, Any, float | None, str]] = []     # (depth, role, own depth, place), first seen first
    outlets: dict[str, str] = {}                               # outlet name -> place, first seen first
    slots: list[float] = []                                    # 0 top / 1 bottom per example entry, ranked
    for (entry, content), key in ranked:
        pos = entry.position
        if post_process is not None:
            depth = (entry.depth if entry.depth is not None else _DEFAULT_DEPTH) if pos == _AT_DEPTH else None
            content = post_process(content, pos, depth)
        if not content:
            continue
        name = _PLACE_NAMES.get(pos)
        if pos == _AT_DEPTH:
            depth = entry.depth if entry.depth is not None else _DEFAULT_DEPTH
            role = entry.role if entry.role is not None else 0
            for g in groups:
                if g[2] == depth and g[1] == role:      # a group's own depth, as place_entries compares
                    name = g[3]
                    break
            else:
                name = f"at_depth {json.dumps(_plain(depth))} {json.dumps(_plain(role))}"
                if entry.depth is None or any(g[3] == name for g in groups):
                    name = f"{name} {key}"              # a group no other entry joins (null or NaN depth)
                groups.append((depth, role, entry.depth, name))
        elif pos == _OUTLET:
            if not entry.outlet_name:
                continue
            name = outlets.setdefault(entry.outlet_name, f"outlet {entry.outlet_name}")
        elif name is None:
            continue
        elif pos == _EM_TOP or pos == _EM_BOTTOM:
            slots.append(pos - _EM_TOP)
        places.setdefault(name, []).append((key, content))
    for name, items in places.items():
        if not name.startswith("outlet "):
            items.reverse()     # place_entries puts each at the front: ascending rank
        if arrange is not None:
            places[name] = arrange(name, items)
    slots.reverse()
    out = Placement()
    text = {name: [c for _, c in items] for name, items in places.items()}
    out.before = "\n".join(text.get("before", ()))
    out.after = "\n".join(text.get("after", ()))
    out.an_top = text.get("an_top", [])
    out.an_bottom = text.get("an_bottom", [])
    out.depth = [DepthGroup(own, role, text[name]) for _, role, own, name in groups]
    tops, bottoms = iter(text.get("em_top", ())), iter(text.get("em_bottom", ()))
    out.examples = [(s, next(bottoms if s else tops)) for s in slots]
    out.outlets = {o: text[name] for o, name in outlets.items()}
    if authors_note is not None:
        out.authors_note = assemble_authors_note(out.an_top, authors_note, out.an_bottom)
    return out, places
