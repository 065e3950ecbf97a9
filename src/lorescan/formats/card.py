"""Character Card V2/V3 books: ``data.character_book`` in a card, V3's standalone
``{"spec": "lorebook_v3", "data": {...}}``, and a bare character_book object.

Field mapping: docs/sillytavern-mode.md#st-entries and #st-import, as SillyTavern imports and exports it. The
SillyTavern view of an entry's ``extensions`` holds only the keys SillyTavern does not map
to its own fields (the mapped ones become ST fields); writing puts them back together.
"""
from __future__ import annotations

import copy
import os
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..errors import FormatError, LorebookError
from ..model import Entry, Lorebook, _js_loose_true, entry_from_fields
from .sillytavern import st_key_order
from ._mapping import MISSING, Ctx, Loss, Origin, Rule, apply_rules, entry_changes, json_equal, raise_type, read_rules

__all__ = ["CC_RULES", "CC_EXT_NAMES", "read_character_book", "write_character_book",
           "read_card", "write_card", "read_lorebook_v3", "write_lorebook_v3", "new_card",
           "card_book_object", "cc_entry_unmapped", "CARD_ONLY_FIELDS"]


def _ext(raw: Mapping[str, Any], ctx: Ctx) -> Mapping[str, Any]:
    ext = raw.get("extensions")
    if ext is None:
        return {}
    if not isinstance(ext, Mapping):
        raise_type(ctx, "extensions", "object", ext)
    return ext


def _top(st: str, cc: str, default: Any = MISSING, *, is_list: bool = False) -> Rule:
    def read(raw: Mapping[str, Any], ctx: Ctx) -> Any:
        value = raw.get(cc)
        if value is None:        # ST reads these with `??` (null counts as missing)
            return default if default is MISSING else copy.deepcopy(default)
        if is_list and not isinstance(value, list):
            raise_type(ctx, cc, "array", value)
        return value

    def write(out: dict[str, Any], value: Any) -> None:
        out[cc] = value
    return Rule(st, read, write, (cc,))


def _in_ext(st: str, name: str, default: Any) -> Rule:
    def read(raw: Mapping[str, Any], ctx: Ctx) -> Any:
        value = _ext(raw, ctx).get(name)
        return copy.deepcopy(default) if value is None else value

    def write(out: dict[str, Any], value: Any) -> None:
        ext = out.get("extensions")
        if not isinstance(ext, dict):
            ext = out["extensions"] = {}
        ext[name] = value
    return Rule(st, read, write, (f"extensions.{name}",))


def _read_disable(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    enabled = raw.get("enabled")
    if enabled is not None and not isinstance(enabled, (bool, int, float)):
        raise_type(ctx, "enabled", "boolean", enabled)
    return not bool(enabled)          # ST: `disable: !entry.enabled` (missing -> disabled)


def _write_disable(out: dict[str, Any], value: Any) -> None:
    out["enabled"] = not _js_loose_true(value)


def _read_position(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    pos = _ext(raw, ctx).get("position")
    if pos is not None:
        return pos
    return 0 if raw.get("position") == "before_char" else 1     # docs/sillytavern-mode.md#st-import


def _write_position(out: dict[str, Any], value: Any) -> None:
    ext = out.get("extensions")
    if not isinstance(ext, dict):
        ext = out["extensions"] = {}
    ext["position"] = value
    out["position"] = "before_char" if value == 0 else "after_char"


def _read_display_index(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    value = _ext(raw, ctx).get("display_index")
    return ctx.index if value is None else value


_EXT_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("excludeRecursion", "exclude_recursion", False), ("preventRecursion", "prevent_recursion", False),
    ("delayUntilRecursion", "delay_until_recursion", False), ("probability", "probability", 100),
    ("useProbability", "useProbability", True), ("depth", "depth", 4),
    ("selectiveLogic", "selectiveLogic", 0), ("outletName", "outlet_name", ""), ("group", "group", ""),
    ("groupOverride", "group_override", False), ("groupWeight", "group_weight", 100),
    ("scanDepth", "scan_depth", None), ("caseSensitive", "case_sensitive", None),
    ("matchWholeWords", "match_whole_words", None), ("useGroupScoring", "use_group_scoring", None),
    ("automationId", "automation_id", ""), ("role", "role", 0), ("vectorized", "vectorized", False),
    ("sticky", "sticky", None), ("cooldown", "cooldown", None), ("delay", "delay", None),
    ("matchPersonaDescription", "match_persona_description", False),
    ("matchCharacterDescription", "match_character_description", False),
    ("matchCharacterPersonality", "match_character_personality", False),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", False),
    ("matchScenario", "match_scenario", False), ("matchCreatorNotes", "match_creator_notes", False),
    ("triggers", "triggers", []), ("ignoreBudget", "ignore_budget", False),
)
CC_EXT_NAMES = frozenset({"position", "display_index"} | {cc for _, cc, _ in _EXT_FIELDS})


def _read_foreign_ext(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    return {k: v for k, v in _ext(raw, ctx).items() if k not in CC_EXT_NAMES}


def _write_foreign_ext(out: dict[str, Any], value: Any) -> None:
    cur = out.get("extensions")
    mapped = {k: v for k, v in cur.items() if k in CC_EXT_NAMES} if isinstance(cur, dict) else {}
    new = {k: v for k, v in value.items() if k not in CC_EXT_NAMES} if isinstance(value, Mapping) else {}
    out["extensions"] = {**new, **mapped}


CC_RULES: tuple[Rule, ...] = (
    _top("key", "keys", [], is_list=True), _top("keysecondary", "secondary_keys", [], is_list=True),
    _top("comment", "comment", ""), _top("content", "content", ""),
    _top("constant", "constant", False), _top("selective", "selective", False),
    _top("order", "insertion_order"),
    Rule("position", _read_position, _write_position, ("position", "extensions.position")),
    Rule("disable", _read_disable, _write_disable, ("enabled",)),
    Rule("displayIndex", _read_display_index, _in_ext("displayIndex", "display_index", None).write,
         ("extensions.display_index",)),
    *(_in_ext(st, cc, d) for st, cc, d in _EXT_FIELDS),
    Rule("extensions", _read_foreign_ext, _write_foreign_ext, ("extensions",)),
)
_RULES_BY_ST = {r.st: r for r in CC_RULES}
_CONSUMED_TOP = {"id", "keys", "secondary_keys", "comment", "content", "constant", "selective",
                 "insertion_order", "position", "enabled", "extensions"}
_CC_WHY = {
    "addMemo": "UI-only flag; Character Card books have no field for it",
    "characterFilter": "character filters are not exported to Character Card books (docs/sillytavern-mode.md#st-import)",
}
_CC_TOP_WHY = {
    "name": "CC entry 'name' has no SillyTavern field",
    "priority": "CC 'priority' has no SillyTavern field",
    "case_sensitive": "CC top-level 'case_sensitive' is not read by SillyTavern (only extensions.case_sensitive)",
    "use_regex": "CC 'use_regex' has no SillyTavern field (regex keys are detected per key)",
}


# CC entry fields with no SillyTavern counterpart that engines read (Entry.card_fields).
CARD_ONLY_FIELDS = ("priority", "use_regex", "case_sensitive", "name")


def cc_entry_unmapped(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for the raw CC entry fields that have no SillyTavern counterpart."""
    return [(k, _CC_TOP_WHY.get(k, f"CC entry field {k!r} has no SillyTavern field"))
            for k in raw if k not in _CONSUMED_TOP]


def _uid_of(raw: Mapping[str, Any], index: int, source: str) -> int | str:
    uid = raw.get("id")
    if uid is None:
        return index                          # docs/sillytavern-mode.md#st-import: missing id -> array index
    if isinstance(uid, bool) or not isinstance(uid, (int, str)) or uid == "":
        raise LorebookError(f"expected an integer id, got {uid!r:.40}", source=source, entry=index,
                            field="id")
    return uid


def read_character_book(book_obj: Any, *, source: str, fmt: str, name: str | None = None,
                        document: Any = None, container: bytes | None = None,
                        extra: Mapping[str, Any] | None = None, where: str = "character_book") -> Lorebook:
    """A Lorebook from a CC ``character_book`` object (the entries mapped to ST fields)."""
    if not isinstance(book_obj, Mapping):
        raise FormatError(f"{where} must be an object, got {type(book_obj).__name__}", source=source,
                          field=where)
    raw_entries = book_obj.get("entries", [])
    if not isinstance(raw_entries, list):
        raise FormatError(f"{where}.entries must be an array, got {type(raw_entries).__name__}",
                          source=source, field=f"{where}.entries")
    entries: list[Entry] = []
    raws: dict[Any, Mapping[str, Any]] = {}
    read_fields: dict[Any, Mapping[str, Any]] = {}
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, Mapping):
            raise LorebookError(f"an entry must be an object, got {type(raw).__name__}", source=source,
                                entry=i)
        uid = _uid_of(raw, i, source)
        if uid in raws:
            raise LorebookError(f"duplicate id {uid!r}", source=source, entry=uid, field="id")
        ctx = Ctx(source, uid, i)
        fields = {"uid": uid, **read_rules(raw, CC_RULES, ctx)}
        entry = entry_from_fields(fields, source=source, uid=uid, card_fields={
            k: raw[k] for k in CARD_ONLY_FIELDS if raw.get(k) is not None})
        entries.append(entry)
        raws[uid] = raw
        read_fields[uid] = entry.fields
    own = book_obj.get("name")
    if name is None:
        name = own if isinstance(own, str) and own else _stem(source)
    order = tuple(e.uid for e in entries)
    visiting = st_key_order([str(u) for u in order])
    by_key = {str(e.uid): e for e in entries}
    return Lorebook(name=name, entries=tuple(by_key[k] for k in visiting),
                    fields=MappingProxyType({k: v for k, v in book_obj.items() if k != "entries"}),
                    entry_keys=tuple(str(u) for u in order), source=source, format=fmt,
                    origin=Origin(document=document if document is not None else book_obj,
                                  raw_entries=raws, read_fields=read_fields, order=order,
                                  container=container, extra=dict(extra or {}, book=book_obj)))


def _stem(source: str) -> str:
    return os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"


def _template(uid: Any) -> dict[str, Any]:
    # ST's export shape (docs/sillytavern-mode.md#st-import): use_regex is always true
    return {"id": uid, "keys": [], "secondary_keys": [], "comment": "", "content": "",
            "constant": False, "selective": False, "insertion_order": 100, "enabled": True,
            "position": "before_char", "use_regex": True, "extensions": {}}


def _base_from_original_data(book: Lorebook) -> tuple[dict[Any, Mapping], dict[Any, Mapping]]:
    """Raw CC entries (and what they read as) from an ST book's ``originalData``, by id."""
    od = book.fields.get("originalData")
    if not isinstance(od, Mapping):
        return {}, {}
    try:
        ref = read_character_book(od, source=book.source, fmt="character_book", where="originalData")
    except LorebookError:
        return {}, {}
    return dict(ref.origin.raw_entries), dict(ref.origin.read_fields)


def write_character_book(book: Lorebook, *, fmt: str) -> tuple[dict[str, Any], list[Loss]]:
    """The book as a CC ``character_book`` object, plus what could not be written.

    A book read from a CC source is written back from its raw entries (only changed fields
    re-mapped). A SillyTavern book that carries ``originalData`` uses those raw entries as the
    base for entries with the same id, the way SillyTavern keeps it for re-export.
    """
    losses: list[Loss] = []
    # the origin to write back from: one carrying a CC book, unless the book is a SillyTavern one
    origin = (book.origin if isinstance(book.origin, Origin) and "book" in book.origin.extra
              and book.format not in ("sillytavern",) else None)
    same = origin is not None
    if origin is not None:
        raws, reads = dict(origin.raw_entries), dict(origin.read_fields)
        out = {k: copy.deepcopy(v) for k, v in book.fields.items()}
    else:
        raws, reads = _base_from_original_data(book) if book.format == "sillytavern" else ({}, {})
        out = {"name": book.name}
        for k, v in book.fields.items():
            if k in ("description", "scan_depth", "token_budget", "recursive_scanning", "extensions"):
                out[k] = copy.deepcopy(v)
            elif k == "name":
                continue
            elif k == "originalData":
                losses.append(Loss(None, k, "SillyTavern's copy of an imported card book; its "
                                            "entries serve as the base of entries with the same id"))
            else:
                losses.append(Loss(None, k, f"book field with no place in a {fmt} book"))
    by_uid = {e.uid: e for e in book.entries}
    order = [u for u in (origin.order if origin is not None else ()) if u in by_uid]
    order += [e.uid for e in book.entries if e.uid not in set(order)]
    out_entries = []
    for uid in order:
        entry = by_uid[uid]
        base = raws.get(uid)
        if base is not None:
            target = copy.deepcopy(dict(base))
            names = entry_changes(entry, reads.get(uid))
        else:
            target = _template(uid)
            names = list(entry.fields)
        if "uid" in names:
            target["id"] = entry.uid
            names.remove("uid")
        losses += apply_rules(target, entry, names, _RULES_BY_ST, fmt=fmt, why=_CC_WHY,
                              new=base is None or not same)
        losses += _shadowed_ext(entry, target)
        out_entries.append(target)
    if origin is not None and "entries" in origin.extra["book"]:
        out = {k: (out_entries if k == "entries" else v) for k, v in {**out, "entries": None}.items()}
    else:
        out["entries"] = out_entries
    return out, losses


def _shadowed_ext(entry: Entry, target: Mapping[str, Any]) -> list[Loss]:
    st_ext = entry.fields.get("extensions")
    ext = target.get("extensions")
    if not isinstance(st_ext, Mapping) or not isinstance(ext, Mapping):
        return []
    return [Loss(entry.uid, f"extensions.{k}", "the CC book stores a mapped SillyTavern field under this "
                 "name, which takes its place") for k, v in st_ext.items()
            if k in CC_EXT_NAMES and not json_equal(v, ext.get(k, MISSING))]


# ---- cards --------------------------------------------------------------------------------

def card_book_object(card: Any, *, source: str) -> Any:
    """The ``data.character_book`` of a card (None if it has none)."""
    if not isinstance(card, Mapping):
        raise FormatError(f"a card must be a JSON object, got {type(card).__name__}", source=source)
    data = card.get("data")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise FormatError(f"card 'data' must be an object, got {type(data).__name__}", source=source,
                          field="data")
    return data.get("character_book")


def _card_fmt(card: Mapping[str, Any]) -> str:
    return "ccv3" if card.get("spec") == "chara_card_v3" else "ccv2"


def read_card(card: Any, *, source: str, fmt: str | None = None, container: bytes | None = None,
              extra: Mapping[str, Any] | None = None) -> Lorebook:
    """The lorebook embedded in a CCv2/CCv3 card (an empty book if the card has none)."""
    book_obj = card_book_object(card, source=source)
    fmt = fmt or _card_fmt(card)
    data = card.get("data") or {}
    card_name = data.get("name") if isinstance(data.get("name"), str) else card.get("name")
    if book_obj is None:
        book_obj = {"entries": []}
        extra = dict(extra or {}, no_book=True)
    own = book_obj.get("name") if isinstance(book_obj, Mapping) else None
    name = own if isinstance(own, str) and own else (card_name if isinstance(card_name, str) and card_name
                                                     else None)
    return read_character_book(book_obj, source=source, fmt=fmt, name=name, document=card,
                               container=container, extra=extra, where="data.character_book")


def new_card(name: str, spec: str = "chara_card_v3") -> dict[str, Any]:
    """A minimal card to carry a book (all required V3 fields present and empty)."""
    data = {"name": name, "description": "", "personality": "", "scenario": "", "first_mes": "",
            "mes_example": "", "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
            "alternate_greetings": [], "tags": [], "creator": "", "character_version": "",
            "extensions": {}}
    if spec == "chara_card_v3":
        data["group_only_greetings"] = []
        return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def write_card(book: Lorebook, *, card: Mapping[str, Any] | None = None,
               fmt: str = "ccv3") -> tuple[dict[str, Any], list[Loss]]:
    """A card carrying the book in ``data.character_book``; ``card`` defaults to the one read."""
    if card is None:
        origin = book.origin
        card = origin.document if isinstance(origin, Origin) and book.format in (
            "ccv2", "ccv3", "png", "charx") else new_card(book.name)
    out = copy.deepcopy(dict(card))
    data = out.get("data")
    if not isinstance(data, dict):
        data = out["data"] = {}
    book_obj, losses = write_character_book(book, fmt=fmt)
    if not (book.origin is not None and getattr(book.origin, "extra", {}).get("no_book")
            and not book_obj["entries"] and book.format == fmt):
        data["character_book"] = book_obj
    return out, losses


def read_lorebook_v3(doc: Any, *, source: str) -> Lorebook:
    """A Lorebook from V3's standalone ``{"spec": "lorebook_v3", "data": {...}}``."""
    if not isinstance(doc, Mapping) or doc.get("spec") != "lorebook_v3":
        raise FormatError("not a lorebook_v3 document", source=source, field="spec")
    return read_character_book(doc.get("data"), source=source, fmt="lorebook_v3", document=doc,
                               where="data")


def write_lorebook_v3(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The book as a standalone V3 lorebook document."""
    book_obj, losses = write_character_book(book, fmt="lorebook_v3")
    origin = book.origin
    if isinstance(origin, Origin) and book.format == "lorebook_v3" and isinstance(origin.document, Mapping):
        out = copy.deepcopy(dict(origin.document))
        out["data"] = book_obj
        return out, losses
    return {"spec": "lorebook_v3", "data": book_obj}, losses


def is_cc_entry_list(entries: Sequence[Any]) -> bool:
    """True when a list of entries uses CC names (``keys``) rather than ST ones (``key``)."""
    dicts = [e for e in entries if isinstance(e, Mapping)]
    return bool(dicts) and all("key" not in e for e in dicts) and any(
        k in e for e in dicts for k in ("keys", "insertion_order", "enabled", "secondary_keys"))
