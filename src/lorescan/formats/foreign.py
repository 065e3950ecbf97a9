"""Small foreign formats: RisuAI lorebook exports, Agnai memory books, KoboldAI world info
(KoboldAI's ``{"folders", "entries"}`` file) and bare JSON arrays of entries (KoboldAI Lite
style ``[{"key": "a, b", "content": ...}]`` and tool exports). Field mappings: docs/sillytavern-mode.md#st-import.
"""
from __future__ import annotations

import copy
import os
from dataclasses import replace
from typing import Any, Mapping

from ..errors import FormatError
from ..model import Lorebook, Origin
from ._listbook import fixed, read_list_book, rename, split_keys, unmapped_fields, write_list_entries
from ._mapping import Ctx, Loss, Rule
from .sillytavern import read_world, write_world

__all__ = ["RISU_RULES", "AGNAI_RULES", "LIST_RULES", "read_risu", "write_risu", "read_agnai", "write_agnai",
           "read_entry_list", "write_entry_list", "read_kobold", "write_kobold", "foreign_unmapped"]

# ---- RisuAI (type: "risu") -------------------------------------------------------------------


def _risu_percent(st: str, default: Any) -> Rule:
    def read(raw: Mapping[str, Any], ctx: Ctx) -> Any:
        value = raw.get("activationPercent")
        return default if value is None else value
    # ST quirk (docs/sillytavern-mode.md#st-import): useProbability = activationPercent itself, so only probability writes
    write = (lambda out, value: out.__setitem__("activationPercent", value)) if st == "probability" else None
    return Rule(st, read, write, ("activationPercent",))


RISU_RULES: tuple[Rule, ...] = (
    split_keys("key", "key"), split_keys("keysecondary", "secondkey"), rename("comment", "comment", ""),
    rename("content", "content", ""), rename("constant", "alwaysActive", False),
    rename("selective", "selective", False), rename("order", "insertorder", 100), fixed("position", 0),
    _risu_percent("probability", 100), _risu_percent("useProbability", True),
)
_RISU_WHY = {"position": "RisuAI has no insertion position (always 0)",
             "useProbability": "RisuAI derives it from activationPercent (docs/sillytavern-mode.md#st-import)"}


def read_risu(doc: Any, *, source: str) -> Lorebook:
    """A Lorebook from a RisuAI lorebook export (``{"type": "risu", "data": [...]}``)."""
    if not isinstance(doc, Mapping) or doc.get("type") != "risu":
        raise FormatError("not a RisuAI lorebook export", source=source, field="type")
    return read_list_book(doc, doc.get("data", []), source=source, fmt="risu", rules=RISU_RULES, name=None,
                          fields={k: v for k, v in doc.items() if k != "data"}, where="data")


def _risu_template(uid: Any) -> dict[str, Any]:
    return {"key": "", "secondkey": "", "comment": "", "content": "", "mode": "normal", "insertorder": 100,
            "alwaysActive": False, "selective": False}


def write_risu(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The book as a RisuAI lorebook export."""
    entries, losses = write_list_entries(book, fmt="risu", rules=RISU_RULES, template=_risu_template,
                                         why=_RISU_WHY)
    base = dict(book.fields) if book.format == "risu" else {"type": "risu", "ver": 1}
    return _keep_order({**copy.deepcopy(base), "data": entries}, book, "data"), losses

# ---- Agnai (kind: "memory") ------------------------------------------------------------------


AGNAI_RULES: tuple[Rule, ...] = (
    rename("key", "keywords", [], want=list), rename("content", "entry", ""), rename("comment", "name", ""),
    rename("order", "weight", 0), rename("disable", "enabled", False, negate=True),
    fixed("selective", False), fixed("position", 0),
)
_AGNAI_WHY = {"selective": "Agnai has no secondary keys (always false)",
              "position": "Agnai has no insertion position (always 0)"}


def read_agnai(doc: Any, *, source: str) -> Lorebook:
    """A Lorebook from an Agnai memory book (``{"kind": "memory", "entries": [...]}``)."""
    if not isinstance(doc, Mapping) or doc.get("kind") != "memory":
        raise FormatError("not an Agnai memory book", source=source, field="kind")
    own = doc.get("name")
    return read_list_book(doc, doc.get("entries", []), source=source, fmt="agnai", rules=AGNAI_RULES,
                          name=own if isinstance(own, str) else None,
                          fields={k: v for k, v in doc.items() if k != "entries"})


def write_agnai(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The book as an Agnai memory book."""
    entries, losses = write_list_entries(
        book, fmt="agnai", rules=AGNAI_RULES, why=_AGNAI_WHY,
        template=lambda uid: {"name": "", "entry": "", "keywords": [], "priority": 0, "weight": 0, "enabled": True})
    base = dict(book.fields) if book.format == "agnai" else {"kind": "memory", "name": book.name, "description": ""}
    return _keep_order({**copy.deepcopy(base), "entries": entries}, book, "entries"), losses

# ---- bare entry arrays -------------------------------------------------------------------------


def _read_position(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    value = raw.get("position")
    if value is None:
        return 0
    if isinstance(value, str):      # V2 names; like ST's card import, anything else is "after"
        return 0 if value == "before_char" else 1
    return value


def _write_position(out: dict[str, Any], value: Any) -> None:
    if isinstance(out.get("position"), str):
        out["position"] = "before_char" if value == 0 else "after_char"
    else:
        out["position"] = value


def _list_uid(raw: Mapping[str, Any], index: int) -> Any:
    uid = raw.get("uid")
    return uid if isinstance(uid, int) and not isinstance(uid, bool) else index


LIST_RULES: tuple[Rule, ...] = (
    split_keys("key", ("key", "keys")), split_keys("keysecondary", ("keysecondary", "secondary_keys", "secondkey")),
    rename("comment", ("comment", "title", "displayName", "name"), ""),
    rename("content", ("content", "text", "entry"), ""),
    rename("constant", ("constant", "alwaysActive", "forceActivation"), False),
    rename("selective", "selective", False), rename("order", ("order", "insertion_order", "insertorder"), 100),
    Rule("position", _read_position, _write_position, ("position",)),
    rename("probability", ("probability", "activation_chance", "activationPercent"), 100),
    rename("group", ("group", "wigroup"), ""),
)
_LIST_DISABLE = rename("disable", ("disable", "widisabled"), False)
_LIST_ENABLED = rename("disable", "enabled", False, negate=True)


def _list_rules(raw: Mapping[str, Any]) -> tuple[Rule, ...]:
    return LIST_RULES + ((_LIST_ENABLED,) if "enabled" in raw and "disable" not in raw else (_LIST_DISABLE,))


def read_entry_list(doc: Any, *, source: str) -> Lorebook:
    """A Lorebook from a top-level JSON array of entries (names recognised per entry)."""
    if not isinstance(doc, list):
        raise FormatError("expected a JSON array of entries", source=source)
    books: list[Lorebook] = []
    # each entry may name its fields differently; read them one by one with the fitting rules
    entries, raws, reads = [], {}, {}
    for i, raw in enumerate(doc):
        rules = _list_rules(raw) if isinstance(raw, Mapping) else LIST_RULES
        def uid_of(r: Mapping[str, Any], _i: int, i: int = i) -> Any:
            return _list_uid(r, i)
        one = read_list_book(doc, [raw], source=source, fmt="entry_list", rules=rules, name="x",
                    fields={}, uid_of=uid_of)
        e = one.entries[0]
        if e.uid in raws:
            raise FormatError(f"duplicate uid {e.uid!r}", source=source, entry=e.uid, field="uid")
        entries.append(e)
        raws[e.uid], reads[e.uid] = raw, e.fields
    del books
    name = os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"
    order = tuple(e.uid for e in entries)
    return Lorebook(name=name, entries=tuple(entries), entry_keys=tuple(str(u) for u in order), source=source,
                    format="entry_list", origin=Origin(document=doc, raw_entries=raws, read_fields=reads,
                                                       order=order))


def write_entry_list(book: Lorebook) -> tuple[list[dict[str, Any]], list[Loss]]:
    """The book as a bare JSON array of entries in the names each entry was read with."""
    out, losses = [], []
    origin = book.origin if book.format == "entry_list" else None
    for e in _ordered(book):
        raw = origin.raw_entries.get(e.uid) if origin else None
        rules = _list_rules(raw) if raw is not None else LIST_RULES + (_LIST_DISABLE,)
        one = replace(book, entries=(e,))
        rows, lost = write_list_entries(one, fmt="entry_list", rules=rules, uid_field="uid",
                                        template=lambda uid: {"uid": uid, "key": [], "content": ""})
        out += rows
        losses += lost
    return out, losses


def _ordered(book: Lorebook) -> list:
    origin = book.origin
    by_uid = {e.uid: e for e in book.entries}
    order = [u for u in (origin.order if origin is not None and hasattr(origin, "order") else ()) if u in by_uid]
    seen = set(order)
    return [by_uid[u] for u in order] + [e for e in book.entries if e.uid not in seen]

# ---- KoboldAI world info ({"folders", "entries"}) ----------------------------------------------


def read_kobold(doc: Any, *, source: str) -> Lorebook:
    """KoboldAI world info: SillyTavern-named entries plus Kobold fields, all kept as read."""
    return replace(read_world(doc, source=source), format="kobold")


def write_kobold(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The book as KoboldAI world info (the SillyTavern shape with Kobold fields kept)."""
    return write_world(book), []


def foreign_unmapped(book: Lorebook, raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for raw fields of a foreign entry with no SillyTavern counterpart."""
    rules = {"risu": RISU_RULES, "agnai": AGNAI_RULES}.get(book.format)
    if book.format == "entry_list":
        rules = _list_rules(raw)
    if rules is None:
        return []
    skip = ("uid",) if book.format == "entry_list" else ()
    return unmapped_fields(raw, rules, book.format, skip=skip)


def _keep_order(out: dict[str, Any], book: Lorebook, entries_key: str) -> dict[str, Any]:
    doc = getattr(book.origin, "document", None)
    if not isinstance(doc, Mapping) or book.format not in ("risu", "agnai"):
        return out
    keys = list(doc) + [k for k in out if k not in doc]
    return {k: out[k] for k in keys if k in out}
