"""JanitorAI script lorebooks (docs/janitor-format.md#janitor-read): the ``dynamicLore`` array
of the "ADVANCED LORE BOOK SYSTEM v12" script, read from the script text (never run) or from
JSON, and written back as the data for the script's slot (never the script itself).

Read from:

* a script (``.js``/``.txt``, any text that is not JSON): the ``var``/``let``/``const
  dynamicLore = [...]`` declaration's value is parsed as a JavaScript literal by
  :mod:`lorescan.formats._jsliteral` (anything that is code is a located error), and the two
  knobs ``APPLY_LIMIT`` and ``WINDOW_DEPTH`` are read where they are declared as literals;
* JSON: a bare array whose entries use janitor fields (``keywords``, ``personality``,
  ``scenario``, ``Shifts``, ``tag``, gates, ...) and none of a generic entry list's names
  (``key``, ``content``, ``comment``, ...), or an object with a ``dynamicLore`` member (and
  the knobs as members), which is also what the writer writes when a knob is set.

How the entries are represented. The data the script runs on is kept exactly as read:
``book.origin.document`` is ``{"dynamicLore": value, **knobs}``, and :func:`janitor_source`
returns the value and the knobs for :class:`~lorescan.janitor.JanitorEngine`. ``book.entries``
holds one SillyTavern-shaped :class:`~lorescan.model.Entry` per janitor entry (uid = index),
the closest SillyTavern reading of it (:func:`lorescan.formats._janitor_map.to_st`): keys from
the keywords (a word as a whole-word key, a phrase or ``stem*`` as a regex key), the one text
gate that fits as secondary keys and logic, content the personality text then the scenario
text, ``position`` 0 for personality and 1 for scenario, ``order`` from the priority bucket,
``delay`` from ``minMessages``, ``characterFilter`` from ``nameBlock``, ``scanDepth`` from
``WINDOW_DEPTH``. Generic tools (lint's key checks, ``lorescan convert``) read that view;
everything the view cannot hold stays in ``origin.raw_entries`` and is written back
unchanged. Writing a janitor book whose view entries were not changed gives back exactly the
data read; a changed view entry has its keywords, text, probability and ``minMessages``
written from the view, its other fields kept.

The knobs: ``APPLY_LIMIT`` is the last literal declaration. ``WINDOW_DEPTH`` is the value the
engine's own default slot receives: a standalone numeric declaration (the script reads it when
``typeof WINDOW_DEPTH === "number"``), else the literal in the script's
``typeof WINDOW_DEPTH === "number" ? WINDOW_DEPTH : <default>`` fallback, else a standalone
declaration as written. A knob the script does not declare is None in :class:`JanitorSource`
(``written`` says which were declared, so a declared ``null`` is told from an absent knob).
"""
from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import FormatError
from ..limits import Limits
from ..model import Entry, FrozenMap, Lorebook, Origin, entry_from_fields
from ._janitor_map import (JANITOR_FIELDS, book_links, effective_window_depth, keywords_of, read_term,
                           to_st)
from .janitor_convert import entry_to_janitor, st_to_janitor
from ._jsliteral import find_declarations, location, parse_literal, skip_space
from ._mapping import Loss
from ._safety import DEFAULT_LIMITS, cap_entries

__all__ = ["JanitorSource", "janitor_source", "read_script", "read_janitor_json", "is_janitor_script",
           "is_janitor_json", "write_janitor", "format_data_slot", "slot_text", "KNOBS", "JANITOR_FIELDS", "never_matching_keywords", "view_fields"]

KNOBS = ("APPLY_LIMIT", "WINDOW_DEPTH")
_KNOB_ARGS = {"APPLY_LIMIT": "apply_limit", "WINDOW_DEPTH": "window_depth"}
# Names a generic entry list reads (formats.foreign.LIST_RULES): an array using any of them is not janitor's.
_LIST_NAMES = frozenset({"key", "keys", "keysecondary", "secondary_keys", "secondkey", "comment", "title",
                         "displayName", "name", "content", "text", "entry", "constant", "alwaysActive",
                         "forceActivation", "selective", "order", "insertion_order", "insertorder", "position",
                         "activation_chance", "activationPercent", "group", "wigroup", "disable",
                         "widisabled", "enabled", "uid"})
_DECL_HINT = re.compile(rb"\b(?:var|let|const)\s+dynamicLore\s*=")
_DEFAULT_SLOT = re.compile(r"""typeof\s+WINDOW_DEPTH\s*===?\s*(["'])number\1\s*\?\s*WINDOW_DEPTH\s*:""")


@dataclass(frozen=True, slots=True)
class JanitorSource:
    """What the script runs on: the ``dynamicLore`` value and the two knobs as written.

    ``entries`` is the value exactly (normally a list of entry objects); ``apply_limit`` and
    ``window_depth`` are None when the script does not declare them; ``written`` names the
    knobs it declares (``"APPLY_LIMIT"``, ``"WINDOW_DEPTH"``).
    """
    entries: Any
    apply_limit: Any = None
    window_depth: Any = None
    written: tuple[str, ...] = ()

    def knobs(self) -> dict[str, Any]:
        """The declared knobs as engine keyword arguments (``apply_limit=``, ``window_depth=``)."""
        return {_KNOB_ARGS[k]: getattr(self, _KNOB_ARGS[k]) for k in self.written}


# ---- detection -----------------------------------------------------------------------------


def is_janitor_script(data: bytes) -> bool:
    """Whether file content is a script declaring ``dynamicLore`` (text that is not JSON)."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return head not in (b"{", b"[", b"") and _DECL_HINT.search(data) is not None


def _janitor_entry(raw: Any) -> bool:
    # a non-object item is read by the script as an empty entry (a generic entry list refuses it)
    return not isinstance(raw, Mapping) or not (_LIST_NAMES & raw.keys())


def is_janitor_json(doc: Any) -> bool:
    """Whether parsed JSON is janitor data: ``{"dynamicLore": ...}``, or a non-empty array of
    objects using janitor fields and none of a generic entry list's names."""
    if isinstance(doc, Mapping):
        return "dynamicLore" in doc and not ({"entries", "spec", "data", "kind", "type"} & doc.keys())
    return (isinstance(doc, list) and bool(doc) and all(_janitor_entry(e) for e in doc)
            and any(isinstance(e, Mapping) and JANITOR_FIELDS & e.keys() for e in doc))


# ---- reading -------------------------------------------------------------------------------


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", source=source) from exc


def _statement_end(text: str, pos: int, source: str, name: str) -> None:
    """After a declaration's value: ``;``, a line break, ``}`` or the end (nothing that continues it)."""
    after = skip_space(text, pos, source=source)
    if after >= len(text) or text[after] in ";}":
        return
    if any(c in "\n\r\u2028\u2029" for c in text[pos:after]) and text[after] not in "([.+-*/`,?":
        return
    raise FormatError(f"{location(text, after)}: the value of {name} continues with {text[after]!r}: only a "
                      "literal is read, no calls or expressions", source=source, field=name)


def _knob(text: str, decls: list, name: str, source: str, limits: Limits) -> tuple[bool, Any]:
    found, value, engine_line = False, None, False
    standalone: list[Any] = []
    for d in decls:
        if d.name != name:
            continue
        if engine_line:
            break                       # declared after the script's own line: the window is read by then
        if name == "WINDOW_DEPTH" and text[skip_space(text, d.value, source=source):][:1] == "(":
            engine_line = True
            slot = _DEFAULT_SLOT.search(text, d.value)
            if slot is None:
                raise FormatError(f"{location(text, d.value)}: WINDOW_DEPTH is computed by code lorescan does "
                                  "not know; declare it as a number", source=source, field=name)
            literal, end = parse_literal(text, slot.end(), source=source, limits=limits, field=name)
            if not (standalone and _is_number(standalone[-1])):
                found, value = True, literal
            continue
        literal, end = parse_literal(text, d.value, source=source, limits=limits, field=name)
        _statement_end(text, end, source, name)
        standalone.append(literal)
        found, value = True, literal
    return found, value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_script(data: bytes, *, source: str = "<memory>", limits: Limits = DEFAULT_LIMITS) -> Lorebook:
    """A Lorebook from a JanitorAI script's text (see the module docstring); nothing is run.

    Raises:
        FormatError: no ``dynamicLore`` declaration, two of them, or a value that is not a
            literal (located by line and column, entry index and field).
    """
    text = _decode(data, source)
    decls = find_declarations(text, frozenset(("dynamicLore",) + KNOBS), source=source)
    lore = [d for d in decls if d.name == "dynamicLore"]
    if not lore:
        raise FormatError("no dynamicLore declaration (var dynamicLore = [...]) outside comments and strings",
                          source=source)
    if len(lore) > 1:
        raise FormatError(f"dynamicLore is declared twice ({location(text, lore[0].start)} and "
                          f"{location(text, lore[1].start)}); keep one", source=source, field="dynamicLore")
    value, end = parse_literal(text, lore[0].value, source=source, limits=limits, entries=True)
    _statement_end(text, end, source, "dynamicLore")
    knobs = {}
    for name in KNOBS:
        found, knob = _knob(text, decls, name, source, limits)
        if found:
            knobs[name] = knob
    return _book(value, knobs, source=source, limits=limits, script=True)


def read_janitor_json(doc: Any, *, source: str = "<memory>") -> Lorebook:
    """A Lorebook from janitor JSON: an entry array, or ``{"dynamicLore": ..., "APPLY_LIMIT": ...}``."""
    if isinstance(doc, Mapping):
        if "dynamicLore" not in doc:
            raise FormatError("expected a dynamicLore member", source=source, field="dynamicLore")
        unknown = [k for k in doc if k != "dynamicLore" and k not in KNOBS]
        if unknown:
            raise FormatError(f"unknown member {unknown[0]!r} beside dynamicLore (only {', '.join(KNOBS)})",
                              source=source, field=unknown[0])
        return _book(doc["dynamicLore"], {k: doc[k] for k in KNOBS if k in doc}, source=source)
    return _book(doc, {}, source=source)


def _book(value: Any, knobs: Mapping[str, Any], *, source: str, limits: Limits = DEFAULT_LIMITS,
          script: bool = False) -> Lorebook:
    cap_entries(value, source=source, limits=limits)
    raws = value if isinstance(value, list) else []
    emitted, tagged = book_links(value)
    depth = effective_window_depth(knobs.get("WINDOW_DEPTH"))
    entries: list[Entry] = []
    raw_by_uid: dict[Any, Mapping[str, Any]] = {}
    reads: dict[Any, Mapping[str, Any]] = {}
    for i, raw in enumerate(raws):
        fields = view_fields(raw, i, emitted=emitted, tagged=tagged, window_depth=depth)
        entry = entry_from_fields({"uid": i, **fields}, source=source, uid=i)
        entries.append(entry)
        raw_by_uid[i] = raw if isinstance(raw, Mapping) else {}
        reads[i] = entry.fields
    name = os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"
    order = tuple(range(len(entries)))
    document = {"dynamicLore": value, **knobs}
    return Lorebook(name=name, entries=tuple(entries), fields=FrozenMap(knobs), entry_keys=tuple(map(str, order)),
                    source=source, format="janitor",
                    origin=Origin(document=document, raw_entries=raw_by_uid, read_fields=reads, order=order,
                                  extra={"script": script}))


def view_fields(raw: Any, index: int, **links: Any) -> dict[str, Any]:
    """The SillyTavern-shaped fields of a janitor entry (content: personality then scenario)."""
    mapping = to_st(raw, index, **links)
    fields = mapping.primary
    if mapping.scenario is not None:
        fields = {**fields, "content": fields["content"] + "\n\n" + mapping.scenario["content"]}
    return fields


def janitor_source(book: Lorebook) -> JanitorSource:
    """The ``dynamicLore`` value and knobs a :class:`~lorescan.janitor.JanitorEngine` runs.

    A janitor book read and not changed gives the value exactly as read; a changed one, or a
    book of another format, gives what :func:`write_janitor` writes for it.
    """
    doc = book.origin.document if book.format == "janitor" and isinstance(book.origin, Origin) else None
    if isinstance(doc, Mapping) and _unchanged(book):
        value = copy.deepcopy(doc["dynamicLore"])
        knobs = {k: copy.deepcopy(doc[k]) for k in KNOBS if k in doc}
    else:
        data, _ = write_janitor(book)
        value = data["dynamicLore"] if isinstance(data, Mapping) else data
        knobs = {k: data[k] for k in KNOBS if isinstance(data, Mapping) and k in data}
    return JanitorSource(value, knobs.get("APPLY_LIMIT"), knobs.get("WINDOW_DEPTH"), tuple(knobs))


def _unchanged(book: Lorebook) -> bool:
    origin = book.origin
    if len(book.entries) != len(origin.order) or dict(book.fields) != {k: origin.document[k] for k in KNOBS
                                                                         if k in origin.document}:
        return False
    return all(e.uid == uid and dict(e.fields) == dict(origin.read_fields[uid])
               for e, uid in zip(book.entries, origin.order))


# ---- writing -------------------------------------------------------------------------------


def write_janitor(book: Lorebook) -> tuple[Any, list[Loss]]:
    """The book's ``dynamicLore`` data: the entry array, or ``{"dynamicLore": [...], knobs}``
    when a knob is set. A janitor book's unchanged entries are written exactly as read; a
    book of another format is converted (:mod:`lorescan.formats.janitor_convert`)."""
    if book.format != "janitor" or not isinstance(book.origin, Origin):
        return st_to_janitor(book)
    origin = book.origin
    doc = origin.document
    knobs = {k: copy.deepcopy(book.fields[k]) for k in KNOBS if k in book.fields}
    if _unchanged(book):
        value = copy.deepcopy(doc["dynamicLore"])
        return ({"dynamicLore": value, **knobs} if knobs else value), []
    out: list[Any] = []
    losses: list[Loss] = []
    raws = doc["dynamicLore"] if isinstance(doc["dynamicLore"], list) else []
    for e in book.entries:
        if isinstance(e.uid, int) and e.uid in origin.read_fields and e.uid < len(raws):
            raw = raws[e.uid]
            if dict(e.fields) == dict(origin.read_fields[e.uid]):
                out.append(copy.deepcopy(raw))
                continue
            changed, view_losses = _apply_view(dict(copy.deepcopy(raw)) if isinstance(raw, Mapping) else {}, e,
                                               origin.read_fields[e.uid])
            out.append(changed)
            losses += view_losses
        else:
            entry, lost = entry_to_janitor(e)
            out.append(entry)
            losses += [Loss(e.uid, f, w) for f, w in lost]
    return ({"dynamicLore": out, **knobs} if knobs else out), losses


def _apply_view(raw: dict[str, Any], e: Entry, read: Mapping[str, Any]) -> tuple[dict[str, Any], list[Loss]]:
    new, _ = entry_to_janitor(e)
    losses: list[Loss] = []
    for name in e.fields:
        if name == "uid" or e.fields.get(name) == read.get(name):
            continue
        if name == "key":
            raw["keywords"] = new.get("keywords", [])
        elif name == "content":
            raw.pop("personality", None)
            raw.pop("scenario", None)
            raw.update({k: new[k] for k in ("personality", "scenario") if k in new})
        elif name in ("probability", "useProbability"):
            raw.pop("probability", None)
            if "probability" in new:
                raw["probability"] = new["probability"]
        elif name == "delay":
            raw.pop("minMessages", None)
            if "minMessages" in new:
                raw["minMessages"] = new["minMessages"]
        else:
            losses.append(Loss(e.uid, name, "a change to this field is not written back to the janitor entry"))
    return raw, losses


def format_data_slot(book: Lorebook, *, keyword: str = "var") -> str:
    """JavaScript text for the author's part of the script: the knobs and ``dynamicLore``
    declarations (JSON is a JavaScript literal), never the engine."""
    return slot_text(write_janitor(book)[0], keyword=keyword)


def slot_text(data: Any, *, keyword: str = "var") -> str:
    """:func:`format_data_slot` for data :func:`write_janitor` returned."""
    value = data["dynamicLore"] if isinstance(data, Mapping) else data
    lines = [f"{keyword} {k} = {json.dumps(data[k])};" for k in KNOBS if isinstance(data, Mapping) and k in data]
    lines.append(f"{keyword} dynamicLore = {json.dumps(value, ensure_ascii=False, indent=2)};")
    return "\n".join(lines) + "\n"


def never_matching_keywords(raw: Mapping[str, Any]) -> list[int]:
    """Indexes of keywords the script can never match."""
    return [j for j, t in enumerate(keywords_of(raw)) if read_term(t).kind == "never"]

