"""Table-driven field mapping between a format's raw entries and SillyTavern fields.

How lossless write-back works (every non-SillyTavern format uses it):

* A reader maps each raw entry to SillyTavern-named fields with the format's rules and keeps
  the raw object and the fields it produced in :class:`Origin` (``Lorebook.origin``).
* A writer of the SAME format starts from a copy of the raw object and re-maps only the
  SillyTavern fields whose value differs from what was read. An unchanged book is therefore
  written back as exactly the data that was read, including fields lorescan does not know.
* A writer of ANOTHER format (or a new entry) maps every field; each field the target cannot
  hold becomes a :class:`Loss`, never a silent drop.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import LorebookError
from ..model import Entry, Origin

__all__ = ["MISSING", "Rule", "Origin", "Loss", "LossReport", "json_equal", "entry_changes",
           "apply_rules", "read_rules", "Ctx"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True, slots=True)
class Ctx:
    """Where a value came from, for error messages."""
    source: str
    entry: object
    index: int = 0


Reader = Callable[[Mapping[str, Any], Ctx], Any]      # raw entry -> ST value or MISSING
Writer = Callable[[dict[str, Any], Any], None]          # (raw entry being built, ST value)


@dataclass(frozen=True, slots=True)
class Rule:
    """One SillyTavern field and where it lives in a format's entry.

    ``raw_keys`` are the raw top-level names (``"extensions.x"`` for nested ones) the rule
    consumes when reading; ``write`` is None where the format cannot hold the field.
    """
    st: str
    read: Reader
    write: Writer | None
    raw_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Loss:
    """One thing a write could not carry over: ``entry`` is a uid, or None for the book."""
    entry: object
    field: str
    why: str

    def __str__(self) -> str:
        where = "book" if self.entry is None else f"entry {self.entry!r}"
        return f"{where}, field {self.field!r}: {self.why}"


@dataclass(frozen=True, slots=True)
class LossReport:
    """Everything a conversion did not carry over, in entry order (what :func:`~lorescan.formats.convert` returns).

    ``source_format`` and ``target_format`` are :data:`~lorescan.formats.FormatName` values;
    each :class:`Loss` names the entry (None: the book), the field and why. Only real losses
    are listed: a value that differs from what the target's default would give and that does
    not come back from the written data.
    """
    source_format: str
    target_format: str
    losses: tuple[Loss, ...] = ()

    def __len__(self) -> int:
        return len(self.losses)

    def __iter__(self):
        return iter(self.losses)

    def __bool__(self) -> bool:
        return bool(self.losses)

    def fields_of(self, entry: object) -> set[str]:
        """Names of the fields reported lost for one entry (None: the book)."""
        return {x.field for x in self.losses if x.entry == entry}

    def by_field(self) -> list[tuple[str, str, list[object]]]:
        """``(field, why, entries)`` groups, the most frequent first (ties in first-seen order).

        ``entries`` lists the uids (None for a book-level field) that lost this field for
        this reason.
        """
        groups: dict[tuple[str, str], list[object]] = {}
        for x in self.losses:
            groups.setdefault((x.field, x.why), []).append(x.entry)
        ranked = sorted(enumerate(groups.items()), key=lambda item: (-len(item[1][1]), item[0]))
        return [(name, why, entries) for _, ((name, why), entries) in ranked]

    def summary(self) -> str:
        """One line: how many values in how many fields of how many entries were not carried over."""
        head = f"{self.source_format} -> {self.target_format}: "
        if not self.losses:
            return head + "nothing lost"
        fields = {x.field for x in self.losses}
        entries = {x.entry for x in self.losses if x.entry is not None}
        book = any(x.entry is None for x in self.losses)
        where = [_count(len(entries), "entry", "entries")] if entries else []
        if book:
            where.append("the book")
        return (head + f"{_count(len(self.losses), 'value')} in {_count(len(fields), 'field')} "
                f"not carried over ({' and '.join(where)})")

    def render(self, verbose: bool = False) -> str:
        """The report as text: the summary line, then one line per lost field with the entries
        it affects (``verbose``: one line per entry and field instead)."""
        lines = [self.summary()]
        if verbose:
            lines += [f"  {x}" for x in self.losses]
            return "\n".join(lines)
        for name, why, entries in self.by_field():
            uids = [e for e in entries if e is not None]
            where = []
            if len(uids) < len(entries):
                where.append("book")
            if uids:
                shown = ", ".join(_one_line(repr(u)) for u in uids[:8])
                more = f", and {len(uids) - 8} more" if len(uids) > 8 else ""
                where.append(f"{_count(len(uids), 'entry', 'entries')}: {shown}{more}")
            lines.append(f"  {name}: {_one_line(why)} [{'; '.join(where)}]")
        return "\n".join(lines)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON data: ``true`` is not ``1``; ``1`` equals ``1.0`` (one JS number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and math.isnan(a):
            return isinstance(b, float) and math.isnan(b)
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def read_rules(raw: Mapping[str, Any], rules: Sequence[Rule], ctx: Ctx) -> dict[str, Any]:
    """SillyTavern fields from one raw entry (absent where a rule yields MISSING)."""
    out: dict[str, Any] = {}
    for rule in rules:
        value = rule.read(raw, ctx)
        if value is not MISSING:
            out[rule.st] = value
    return out


def entry_changes(entry: Entry, read_fields: Mapping[str, Any] | None) -> list[str]:
    """Fields to (re)write: those changed since reading, or every set field of a new entry."""
    if read_fields is None:
        return list(entry.fields)
    names = list(entry.fields) + [k for k in read_fields if k not in entry.fields]
    return [k for k in names if k not in entry.fields or k not in read_fields
            or not json_equal(entry.fields[k], read_fields[k])]


def apply_rules(target: dict[str, Any], entry: Entry, names: Iterable[str],
                rules: Mapping[str, Rule], *, fmt: str, why: Mapping[str, str],
                new: bool) -> list[Loss]:
    """Write ``names`` of ``entry`` into ``target`` with ``rules``; return what had no home.

    A filled-in default with no home is not a loss (the source never had it). A field removed
    from the entry since reading is a loss where the format keeps a value for it anyway.
    """
    losses: list[Loss] = []
    for name in names:
        rule = rules.get(name)
        present = name in entry.fields
        if rule is not None and rule.write is not None and present:
            rule.write(target, copy.deepcopy(entry.fields[name]))
            continue
        if name in entry.filled and (new or not present):
            continue
        if rule is not None and rule.write is None and not new:
            reason = why.get(name, f"{fmt} has a fixed value for it")
        elif not present:
            reason = f"removed from the entry, but {fmt} cannot drop it"
        else:
            reason = why.get(name, f"{fmt} has no field for it")
        losses.append(Loss(entry.uid, name, reason))
    return losses


def raise_type(ctx: Ctx, field_name: str, want: str, got: Any) -> None:
    raise LorebookError(f"expected {want}, got {type(got).__name__} {got!r:.60}", source=ctx.source,
                        entry=ctx.entry, field=field_name)
