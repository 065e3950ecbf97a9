"""Shared reader/writer for formats whose entries are a JSON array (NovelAI, Agnai, RisuAI,
bare entry lists): rules map each raw entry to SillyTavern fields; see ``_mapping``."""
from __future__ import annotations

import copy
import os
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from ..errors import FormatError, LorebookError
from ..model import Entry, Lorebook, _js_loose_true, entry_from_fields
from ..js.text import js_trim
from ._mapping import MISSING, Ctx, Loss, Origin, Rule, apply_rules, entry_changes, raise_type, read_rules

__all__ = ["read_list_book", "write_list_entries", "rename", "fixed", "split_keys", "unmapped_fields"]


def rename(st: str, names: str | Sequence[str], default: Any = MISSING, *, want: type | tuple | None = None,
           negate: bool = False) -> Rule:
    """ST field ``st`` from the first raw name present (``None`` counts as absent).

    ``negate``: the raw field is the opposite flag (``enabled`` for ``disable``).
    """
    names = (names,) if isinstance(names, str) else tuple(names)

    def read(raw: Mapping[str, Any], ctx: Ctx) -> Any:
        for n in names:
            value = raw.get(n)
            if value is None:
                continue
            if want is not None and not isinstance(value, want):
                raise_type(ctx, n, getattr(want, "__name__", "a valid value"), value)
            return (not _js_loose_true(value)) if negate else value
        return default if default is MISSING else copy.deepcopy(default)

    def write(out: dict[str, Any], value: Any) -> None:
        name = next((n for n in names if n in out), names[0])
        out[name] = (not _js_loose_true(value)) if negate else value
    return Rule(st, read, write, names)


def fixed(st: str, value: Any) -> Rule:
    """An ST field with one value for every entry of the format (cannot be written)."""
    return Rule(st, lambda raw, ctx: copy.deepcopy(value), None, ())


def split_keys(st: str, names: str | Sequence[str]) -> Rule:
    """Keys stored as a comma-separated string (or a list): split, trimmed, empties dropped."""
    names = (names,) if isinstance(names, str) else tuple(names)

    def read(raw: Mapping[str, Any], ctx: Ctx) -> Any:
        for n in names:
            value = raw.get(n)
            if value is None:
                continue
            if isinstance(value, str):
                return [js_trim(k) for k in value.split(",") if js_trim(k)]
            if isinstance(value, list):
                return value
            raise_type(ctx, n, "string or array", value)
        return []

    def write(out: dict[str, Any], value: Any) -> None:
        name = next((n for n in names if n in out), names[0])
        if isinstance(out.get(name), list):
            out[name] = value
        else:
            out[name] = ", ".join(str(k) for k in value) if isinstance(value, list) else value
    return Rule(st, read, write, names)


def unmapped_fields(raw: Mapping[str, Any], rules: Sequence[Rule], fmt: str,
                    skip: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(field, why) for raw top-level fields no rule reads."""
    used = {k.split(".", 1)[0] for r in rules for k in r.raw_keys} | set(skip)
    return [(k, f"{fmt} field with no SillyTavern counterpart") for k in raw if k not in used]


def read_list_book(doc: Any, raw_entries: Any, *, source: str, fmt: str, rules: Sequence[Rule],
                   name: str | None, fields: Mapping[str, Any], where: str = "entries",
                   uid_of: Callable[[Mapping[str, Any], int], Any] | None = None) -> Lorebook:
    """A Lorebook from a JSON array of raw entries mapped with ``rules``."""
    if not isinstance(raw_entries, list):
        raise FormatError(f"{where} must be an array, got {type(raw_entries).__name__}", source=source,
                          field=where)
    entries: list[Entry] = []
    raws: dict[Any, Mapping[str, Any]] = {}
    reads: dict[Any, Mapping[str, Any]] = {}
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, Mapping):
            raise LorebookError(f"an entry must be an object, got {type(raw).__name__}", source=source, entry=i)
        uid = uid_of(raw, i) if uid_of else i
        if uid in raws:
            uid = i if i not in raws else f"#{i}"
        ctx = Ctx(source, uid, i)
        entry = entry_from_fields({"uid": uid, **read_rules(raw, rules, ctx)}, source=source, uid=uid)
        entries.append(entry)
        raws[uid], reads[uid] = raw, entry.fields
    if not name:
        name = os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"
    order = tuple(e.uid for e in entries)
    return Lorebook(name=name, entries=tuple(entries), fields=MappingProxyType(dict(fields)),
                    entry_keys=tuple(str(u) for u in order), source=source, format=fmt,
                    origin=Origin(document=doc, raw_entries=raws, read_fields=reads, order=order))


def write_list_entries(book: Lorebook, *, fmt: str, rules: Sequence[Rule],
                       template: Callable[[Any], dict[str, Any]], why: Mapping[str, str] | None = None,
                       uid_field: str | None = None) -> tuple[list[dict[str, Any]], list[Loss]]:
    """The entries as raw objects of ``fmt`` (raw originals reused for unchanged fields)."""
    origin = book.origin if isinstance(book.origin, Origin) and book.format == fmt else None
    by_rule = {r.st: r for r in rules}
    by_uid = {e.uid: e for e in book.entries}
    order = [u for u in (origin.order if origin else ()) if u in by_uid]
    seen = set(order)
    order += [e.uid for e in book.entries if e.uid not in seen]
    out, losses = [], []
    for uid in order:
        entry = by_uid[uid]
        raw = origin.raw_entries.get(uid) if origin else None
        target = copy.deepcopy(dict(raw)) if raw is not None else template(uid)
        fields_read = origin.read_fields.get(uid) if raw is not None and origin is not None else None
        names = entry_changes(entry, fields_read)
        if "uid" in names:
            names.remove("uid")
            if uid_field:
                target[uid_field] = entry.uid
            elif raw is not None or not isinstance(uid, int):
                losses.append(Loss(uid, "uid", f"{fmt} entries have no id; the array position is used"))
        losses += apply_rules(target, entry, names, by_rule, fmt=fmt, why=why or {}, new=raw is None)
        out.append(target)
    return out, losses
