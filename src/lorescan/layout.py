"""Cache-stable placement (docs/improved-profile.md#cache-stable): the previous turn's layout of the
placement texts, how a turn keeps it, and how much of each text stayed the same.

A *place* is one placement text: a position kind with, for @depth entries, the depth and
role (``"before"``, ``"after"``, ``"an_top"``, ``"an_bottom"``, ``"em_top"``, ``"em_bottom"``,
``"at_depth 4 0"``, ``"outlet <name>"``; lorebook-slot mode has one place, ``"slot"``). An
entry's *place* from one turn to the next is its place and its rank there. A place's text is
its entries' contents joined by ``"\\n"``.

The layout is a plain JSON value the caller stores with the chat and passes back, like the
timed effects::

    {"version": 1, "places": {"<place>": [["<entry key>", "<content fingerprint>"], ...]}}

With the option on, :meth:`Layout.arrange` orders a place as the previous turn did: the
entries still there keep their previous order, the dropped ones leave a gap that closes, and
the newly placed ones follow them in the engine's own order (the end of the text is where an
addition changes the least). Which entries are placed is never changed, only the order.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypeVar

from .errors import LorebookError

__all__ = ["Layout", "Stability", "PlaceStability", "LAYOUT_VERSION", "MAX_LAYOUT_ENTRIES", "MAX_LAYOUT_KEY"]

LAYOUT_VERSION = 1
MAX_LAYOUT_ENTRIES = 100_000     # placed entries over all places (a layout is sent with every turn)
MAX_LAYOUT_KEY = 1_000           # characters of one place name or entry key

Item = tuple[str, str]           # (entry key, content) as a turn places it
_Placed = TypeVar("_Placed", bound=tuple)     # an item, maybe with more fields after the two


def fingerprint(content: str) -> str:
    """Returns: 16 hex digits identifying ``content`` (the same on every run and platform)."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _bad(problem: str, field: str | None = None) -> LorebookError:
    return LorebookError(problem, source="layout", field=field)


@dataclass(frozen=True, slots=True)
class PlaceStability:
    """One placement text this turn: its length and how many of its leading characters, made of
    whole entries in the same place and rank with the same content, are as the previous turn had them."""

    place: str
    length: int
    unchanged: int

    def to_json(self) -> dict[str, Any]:
        return {"place": self.place, "length": self.length, "unchanged": self.unchanged}


@dataclass(frozen=True, slots=True)
class Stability:
    """How much of this turn's placement texts is unchanged from the previous turn.

    ``places``: one record per non-empty placement text, in place-name order; ``share``:
    unchanged characters over all characters (an empty placement is 1.0 when the previous
    turn placed nothing either, else 0.0).
    """

    places: tuple[PlaceStability, ...]
    previous_empty: bool

    @property
    def length(self) -> int:
        return sum(p.length for p in self.places)

    @property
    def unchanged(self) -> int:
        return sum(p.unchanged for p in self.places)

    @property
    def share(self) -> float:
        total = self.length
        if total == 0:
            return 1.0 if self.previous_empty else 0.0
        return self.unchanged / total

    def to_json(self) -> dict[str, Any]:
        return {"share": self.share, "length": self.length, "unchanged": self.unchanged,
                "places": [p.to_json() for p in self.places]}


@dataclass(frozen=True, slots=True)
class Layout:
    """The entries of each place, in prompt order, with their content fingerprints.

    Args:
        places: place name -> ``(entry key, fingerprint)`` pairs in prompt order.
    """

    places: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: "Layout | Mapping[str, Any] | None") -> "Layout":
        """Read the JSON shape (None or ``{}``: no previous turn).

        Raises:
            LorebookError: a malformed layout, naming the field (source ``layout``).
        """
        if data is None:
            return cls()
        if isinstance(data, Layout):
            return data
        if not isinstance(data, Mapping):
            raise _bad(f"expected an object, got {type(data).__name__}")
        unknown = [k for k in data if k not in ("version", "places")]
        if unknown:
            raise _bad(f"unknown field {str(unknown[0])!r:.60}", str(unknown[0])[:MAX_LAYOUT_KEY])
        version = data.get("version", LAYOUT_VERSION)
        if type(version) is not int or version != LAYOUT_VERSION:
            raise _bad(f"unsupported layout version {version!r:.40} (this lorescan reads {LAYOUT_VERSION})",
                       "version")
        places = data.get("places", {})
        if not isinstance(places, Mapping):
            raise _bad(f"expected an object, got {type(places).__name__}", "places")
        out: dict[str, tuple[tuple[str, str], ...]] = {}
        count = 0
        for name, items in places.items():
            if not isinstance(name, str) or len(name) > MAX_LAYOUT_KEY:
                raise _bad(f"a place name must be a string of at most {MAX_LAYOUT_KEY} characters, "
                           f"got {name!r:.40}", "places")
            where = f"places.{name}"
            if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
                raise _bad(f"expected a list of [entry key, fingerprint] pairs, got {type(items).__name__}", where)
            count += len(items)
            if count > MAX_LAYOUT_ENTRIES:
                raise _bad(f"the layout holds more than {MAX_LAYOUT_ENTRIES:,} entries (MAX_LAYOUT_ENTRIES)",
                           "places")
            pairs = []
            for i, item in enumerate(items):
                if (isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) != 2
                        or not all(isinstance(x, str) and len(x) <= MAX_LAYOUT_KEY for x in item)):
                    raise _bad(f"expected an [entry key, fingerprint] pair of strings, got {item!r:.60}",
                               f"{where}[{i}]")
                pairs.append((item[0], item[1]))
            out[name] = tuple(pairs)
        return cls(out)

    def to_json(self) -> dict[str, Any]:
        """Returns: the JSON shape (strict JSON, lists for pairs)."""
        return {"version": LAYOUT_VERSION,
                "places": {name: [list(p) for p in items] for name, items in self.places.items()}}

    @classmethod
    def of(cls, placed: Mapping[str, Sequence[Item]]) -> "Layout":
        """The layout of a turn's placed entries (place -> ``(key, content)`` in prompt order;
        empty places are left out)."""
        return cls({name: tuple((k, fingerprint(c)) for k, c in items)
                    for name, items in placed.items() if items})

    def arrange(self, place: str, items: list[_Placed]) -> list[_Placed]:
        """``items`` (the engine's order for ``place`` this turn, each starting with its entry
        key) in cache-stable order: the entries this layout has in ``place`` in its order, then
        the others in their given order."""
        before = self.places.get(place)
        if not before or not items:
            return items
        rank = {k: r for r, (k, _) in enumerate(before)}
        kept = sorted((it for it in items if it[0] in rank), key=lambda it: rank[it[0]])
        if not kept:
            return items
        return kept + [it for it in items if it[0] not in rank]

    def stability(self, placed: Mapping[str, Sequence[Item]]) -> Stability:
        """How much of this turn's placement (place -> ``(key, content)`` in prompt order) is
        unchanged from this layout: per place, the leading entries with the same key and
        fingerprint at the same rank, their contents and the newlines between (and after,
        when both turns' texts go on)."""
        out = []
        for name in sorted(placed):
            items = placed[name]
            if not items:
                continue
            length = sum(len(c) for _, c in items) + len(items) - 1
            before = self.places.get(name, ())
            same = 0
            chars = 0
            for (key, content), prev in zip(items, before):
                if prev[0] != key or prev[1] != fingerprint(content):
                    break
                same += 1
                chars += len(content) + (same > 1)
            if 0 < same < len(items) and same < len(before):
                chars += 1           # the newline after the last unchanged entry is in both texts
            out.append(PlaceStability(name, length, chars))
        return Stability(tuple(out), previous_empty=not any(self.places.values()))
