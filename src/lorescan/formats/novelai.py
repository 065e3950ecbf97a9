"""NovelAI lorebooks: a ``.lorebook`` (``{"lorebookVersion": n, "entries": [...]}``) and the
lorebook inside a ``.story`` container (``content.lorebook``).

Mapping (docs/sillytavern-mode.md#st-import, plus ``forceActivation``): ``keys``->``key``, ``text``->``content``,
``displayName``->``comment``, ``enabled``->``disable`` (negated),
``contextConfig.budgetPriority``->``order`` (missing: 0), ``forceActivation``->``constant``;
``selective`` is false and ``position`` 0 for every entry. Everything else is kept raw.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any, Mapping

from ..errors import FormatError
from ..model import Lorebook
from ._listbook import fixed, read_list_book, rename, unmapped_fields, write_list_entries
from ._mapping import Ctx, Loss, Origin, Rule, raise_type

__all__ = ["NOVELAI_RULES", "read_novelai", "write_novelai", "read_story", "write_story", "novelai_unmapped"]


def _read_order(raw: Mapping[str, Any], ctx: Ctx) -> Any:
    cc = raw.get("contextConfig")
    if cc is None:
        return 0
    if not isinstance(cc, Mapping):
        raise_type(ctx, "contextConfig", "object", cc)
    value = cc.get("budgetPriority")
    return 0 if value is None else value


def _write_order(out: dict[str, Any], value: Any) -> None:
    cc = out.get("contextConfig")
    if not isinstance(cc, dict):
        cc = out["contextConfig"] = {}
    cc["budgetPriority"] = value


NOVELAI_RULES: tuple[Rule, ...] = (
    rename("key", "keys", [], want=list), rename("content", "text", ""),
    rename("comment", "displayName", ""), rename("disable", "enabled", False, negate=True),
    Rule("order", _read_order, _write_order, ("contextConfig.budgetPriority",)),
    rename("constant", "forceActivation", False), fixed("selective", False), fixed("position", 0),
)
_WHY = {"selective": "NovelAI has no secondary keys (always false)",
        "position": "NovelAI places entries by contextConfig, not by ST position (always 0)"}


def novelai_unmapped(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for NovelAI entry fields with no SillyTavern counterpart."""
    out = unmapped_fields(raw, NOVELAI_RULES, "NovelAI", skip=("contextConfig",))
    cc = raw.get("contextConfig")
    if isinstance(cc, Mapping):
        out += [(f"contextConfig.{k}", "NovelAI context setting with no SillyTavern counterpart")
                for k in cc if k != "budgetPriority"]
    return out


def _template(uid: Any) -> dict[str, Any]:
    return {"text": "", "contextConfig": {"prefix": "", "suffix": "\n", "tokenBudget": 2048,
                                          "reservedTokens": 0, "budgetPriority": 400,
                                          "trimDirection": "trimBottom", "insertionType": "newline",
                                          "insertionPosition": -1},
            "displayName": "", "keys": [], "searchRange": 1000, "enabled": True, "forceActivation": False}


def read_novelai(doc: Any, *, source: str, fmt: str = "novelai", document: Any = None,
                 name: str | None = None) -> Lorebook:
    """A Lorebook from a NovelAI lorebook object."""
    if not isinstance(doc, Mapping):
        raise FormatError("a NovelAI lorebook must be an object", source=source)
    book = read_list_book(doc, doc.get("entries", []), source=source, fmt=fmt, rules=NOVELAI_RULES,
                          name=name, fields={k: v for k, v in doc.items() if k != "entries"})
    if document is not None:
        o = book.origin
        book = replace(book, origin=Origin(document, o.raw_entries, o.read_fields, o.order, None, {"lorebook": doc}))
    return book


def write_novelai(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The book as a NovelAI lorebook object."""
    entries, losses = write_list_entries(book, fmt=book.format if book.format in (
        "novelai", "png_novelai") else "novelai", rules=NOVELAI_RULES, template=_template, why=_WHY)
    base = dict(book.fields) if book.format in ("novelai", "png_novelai", "novelai_story") else {"lorebookVersion": 4}
    return {**copy.deepcopy(base), "entries": entries}, losses


def read_story(doc: Any, *, source: str) -> Lorebook:
    """The lorebook inside a NovelAI ``.story`` container (``content.lorebook``)."""
    content = doc.get("content") if isinstance(doc, Mapping) else None
    if not isinstance(content, Mapping) or not isinstance(content.get("lorebook"), Mapping):
        raise FormatError("a .story must hold an object at content.lorebook", source=source,
                          field="content.lorebook")
    meta = doc.get("metadata")
    title = meta.get("title") if isinstance(meta, Mapping) else None
    return read_novelai(content["lorebook"], source=source, fmt="novelai_story", document=doc,
                        name=title if isinstance(title, str) and title else None)


def write_story(book: Lorebook) -> tuple[dict[str, Any], list[Loss]]:
    """The story container with its lorebook replaced by the book."""
    origin = book.origin
    if not (isinstance(origin, Origin) and book.format == "novelai_story"):
        raise FormatError("only a book read from a .story can be written back into one", source=book.source)
    entries, losses = write_list_entries(book, fmt="novelai_story", rules=NOVELAI_RULES, template=_template,
                                         why=_WHY)
    doc = copy.deepcopy(origin.document)
    doc["content"]["lorebook"] = {**copy.deepcopy(dict(book.fields)), "entries": entries}
    if "entries" in origin.extra["lorebook"]:     # keep the file's key order
        lb = doc["content"]["lorebook"]
        keys = list(origin.extra["lorebook"]) + [k for k in lb if k not in origin.extra["lorebook"]]
        doc["content"]["lorebook"] = {k: lb[k] for k in keys if k in lb}
    return doc, losses
