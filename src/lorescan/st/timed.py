"""Sticky and cooldown effects across turns (docs/sillytavern-mode.md#st-timed), in SillyTavern's own JSON shape.

The state is a plain value: ``{"sticky": {"<book>.<uid>": {"hash", "start", "end",
"protected"}}, "cooldown": {...}}``. A platform stores it next to the chat and passes it
back on the next turn; the engine never changes the caller's object.

The state comes from storage anyone may have edited, so every record is checked field by
field (``hash`` an integer in [0, 2**53), ``start``/``end`` finite numbers of at most 2**53 in
magnitude, ``protected`` a boolean) and a bad one raises a LorebookError naming the record and
the field. ``to_json`` refuses to write a non-finite number: the output is strict JSON.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from ..errors import LorebookError
from ..model import js_truthy

__all__ = ["TimedEffects", "EffectRecord", "TimedEntry", "ActiveEffects", "evaluate"]


@dataclass(slots=True)
class EffectRecord:
    """One running effect.

    Args:
        hash: the entry's fingerprint (docs/sillytavern-mode.md#st-fingerprint).
        start: the chat length when it was recorded.
        end: it is current while the chat length is below this.
        protected: a cooldown started by an ended sticky effect (kept even at ``start``).
    """

    hash: int
    start: float      # chat lengths: integers, unless an entry's sticky or cooldown is fractional
    end: float
    protected: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"hash": self.hash, "start": self.start, "end": self.end, "protected": self.protected}


@dataclass(slots=True)
class TimedEffects:
    """The timed-effects record of one chat (SillyTavern's ``timedWorldInfo``).

    Args:
        sticky, cooldown: entry key (``"<book>.<uid>"``) -> running effect.
    """

    sticky: dict[str, EffectRecord] = field(default_factory=dict)
    cooldown: dict[str, EffectRecord] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: "TimedEffects | Mapping[str, Any] | None", *,
                  source: str = "timed_effects") -> "TimedEffects":
        """Read the JSON shape.

        Args:
            data: ``None`` or ``{}`` for no effects, the JSON object, or a TimedEffects (copied).
            source: what error messages call the state.

        Raises:
            LorebookError: a bad record, naming it and the field.
        """
        if data is None:
            return cls()
        if isinstance(data, TimedEffects):
            return data.copy()
        if not isinstance(data, Mapping):
            raise LorebookError(f"expected an object, got {type(data).__name__}", source=source)
        out = cls()
        for kind in ("sticky", "cooldown"):
            records = data.get(kind)
            if records is None:
                records = {}
            if not isinstance(records, Mapping):
                raise LorebookError("expected an object", source=source, field=kind)
            for key, rec in records.items():
                if not isinstance(key, str):
                    raise LorebookError(f"record names must be strings, got {key!r:.40}", source=source,
                                        field=kind)
                if not isinstance(rec, Mapping):
                    raise LorebookError("expected an object", source=source, entry=key, field=kind)
                where = {"source": source, "entry": key}
                protected = rec.get("protected", False)
                if not isinstance(protected, bool):   # "false" is truthy: never guess
                    raise LorebookError(f"expected true or false, got {protected!r:.40}",
                                        field=f"{kind}.protected", **where)
                r = EffectRecord(_hash(rec, kind, where), _num(rec, "start", kind, where),
                                 _num(rec, "end", kind, where), protected)
                getattr(out, kind)[key] = r
        return out

    def to_json(self) -> dict[str, Any]:
        """Returns: the JSON shape SillyTavern stores.

        Raises:
            LorebookError: a non-finite number (the output is strict JSON).
        """
        out: dict[str, Any] = {}
        for kind in ("sticky", "cooldown"):
            records: dict[str, EffectRecord] = getattr(self, kind)
            for key, r in records.items():
                for name in ("start", "end"):
                    v = getattr(r, name)
                    if isinstance(v, float) and not math.isfinite(v):
                        raise LorebookError(f"{v} is not a JSON number (an entry's {kind} is not finite)",
                                            source="timed_effects", entry=key, field=f"{kind}.{name}")
            out[kind] = {k: r.to_json() for k, r in records.items()}
        return out

    def copy(self) -> "TimedEffects":
        """Returns: a copy whose records can change without touching this one."""
        return TimedEffects({k: copy.copy(r) for k, r in self.sticky.items()},
                            {k: copy.copy(r) for k, r in self.cooldown.items()})


_SAFE = 2 ** 53     # JavaScript's exact integers; chat lengths and hashes live far inside


def _hash(rec: Mapping[str, Any], kind: str, where: dict[str, Any]) -> int:
    if "hash" not in rec:
        raise LorebookError("missing", field=f"{kind}.hash", **where)
    v = rec["hash"]
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _SAFE:
        raise LorebookError(f"expected an entry hash (an integer in [0, 2**53)), got {v!r:.40}",
                            field=f"{kind}.hash", **where)
    return v


def _num(rec: Mapping[str, Any], name: str, kind: str, where: dict[str, Any]) -> float:
    if name not in rec:
        raise LorebookError("missing", field=f"{kind}.{name}", **where)
    v = rec[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise LorebookError(f"expected a number, got {v!r:.40}", field=f"{kind}.{name}", **where)
    if isinstance(v, float) and not math.isfinite(v) or not -_SAFE <= v <= _SAFE:
        # NaN would make a sticky entry permanent (every comparison is false)
        raise LorebookError(f"expected a finite number of at most 2**53 in magnitude, got {v!r:.40}",
                            field=f"{kind}.{name}", **where)
    return int(v) if float(v).is_integer() else v


@dataclass(slots=True)
class ActiveEffects:
    """What the evaluation at scan start found: entry ids currently sticky / on cooldown."""

    sticky: set[str]
    cooldown: set[str]


@dataclass(frozen=True, slots=True)
class TimedEntry:
    """What evaluation reads of the entry a record's fingerprint names.

    Args:
        key: the entry's ``"<book>.<uid>"`` key.
        sticky, cooldown: the entry's own durations (as stored: a number or None).
    """

    key: str
    sticky: Any
    cooldown: Any


class EntriesByHash(Protocol):
    """Fingerprint -> entry, precomputed by the engine (:class:`lorescan.st.tables.HashIndex`)."""

    def get(self, h: int, /) -> TimedEntry | None: ...

    # An implementation may also take ``get(h, False)`` (look the entry up without building its
    # record) and say so with a true ``peeks`` attribute.


def evaluate(state: TimedEffects, chat_length: int, entries: EntriesByHash) -> ActiveEffects:
    """Age the records at scan start (docs/sillytavern-mode.md#st-timed), in place: the caller passes a copy.

    Args:
        state: the chat's timed effects; ended and stale records are removed, and an ended
            sticky effect starts the entry's cooldown.
        chat_length: the number of messages in the chat.
        entries: the engine's entries by fingerprint.

    Returns:
        The keys (``"<book>.<uid>"``) of the entries currently sticky and on cooldown.
    """
    active = ActiveEffects(set(), set())
    peeks = getattr(entries, "peeks", False)     # get(h, False): the entry read, not built (HashIndex)
    for kind in ("sticky", "cooldown"):
        records: dict[str, EffectRecord] = getattr(state, kind)
        for key in list(records):
            rec = records.get(key)
            if rec is None:
                continue
            if chat_length <= rec.start and not rec.protected:
                del records[key]
                continue
            # a sticky record's entry is activated this turn: built; a cooldown's only read
            if kind == "sticky" or not peeks:
                entry = entries.get(rec.hash)
            else:
                entry = entries.get(rec.hash, False)   # type: ignore[call-arg]
            if entry is None:
                if chat_length >= rec.end:
                    del records[key]
                continue
            if not js_truthy(entry.sticky if kind == "sticky" else entry.cooldown):
                del records[key]
                continue
            if chat_length >= rec.end:
                del records[key]
                if kind == "sticky":
                    cd = entry.cooldown
                    if js_truthy(cd):
                        # keyed by the entry the hash found (SillyTavern's onEnded uses the entry's key)
                        state.cooldown[entry.key] = EffectRecord(rec.hash, chat_length, chat_length + cd, True)
                        active.cooldown.add(entry.key)
                continue
            getattr(active, kind).add(entry.key)
    return active
