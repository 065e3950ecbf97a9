"""SillyTavern world JSON: ``{"entries": {"<uid>": {...}}, ...}`` (docs/sillytavern-mode.md#st-entries)."""
from __future__ import annotations

import json
import os
from operator import is_not
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..errors import FormatError, LorebookError
from ..model import Entry, EntryFields, Lorebook, Origin, entry_from_fields
from ._mapping import json_equal

__all__ = ["read_world", "write_world", "st_key_order", "book_from_entries", "load_world_file"]

_MAX_INDEX = 2**32 - 2


_GONE: Any = object()     # a field the model did not keep (a sentinel no JSON value is)


def _kept_as_read(raw: Any, fields: Any) -> bool:
    # True when the entry's stored fields are ``raw``'s own names in order with the very same
    # values (the usual case, found in C: no per-field step); False leaves it to the field loop
    return (type(raw) is dict and type(fields) is EntryFields and list(raw) == list(_dict_iter(fields))
            and not any(map(is_not, raw.values(), _dict_values(fields))))


_dict_iter = dict.__iter__
_dict_values = dict.values


def _array_index(key: str) -> int | None:
    """The integer of a canonical array-index property name, else None (JS key order)."""
    if key == "0":
        return 0
    if key and key[0] in "123456789" and key.isascii() and key.isdigit():
        n = int(key)
        return n if n <= _MAX_INDEX else None
    return None


def _same(a: Any, b: Any) -> bool:
    return json_equal(a, b)


def st_key_order(keys: list[str]) -> list[str]:
    """JS object key order: canonical integer keys ascending, then the others in file order."""
    ints = sorted((k for k in keys if _array_index(k) is not None), key=lambda k: int(k))
    return ints + [k for k in keys if _array_index(k) is None]


def read_world(data: Any, *, source: str = "<memory>", name: str | None = None,
               fill_defaults: bool = True) -> Lorebook:
    """A :class:`Lorebook` from parsed SillyTavern world JSON.

    Args:
        data: the parsed world (``{"entries": {...}, ...}``; entries as a list are accepted).
        source: names the data in errors, and the book when it has no name.
        name: the book's name (default: its own ``name`` field, else ``source``'s file stem).
        fill_defaults: fill the fields an entry lacks with SillyTavern's editor defaults
            (listed in ``Entry.filled``, left out when written back).

    Returns:
        The book, with what a lossless write-back needs in ``origin``.

    Raises:
        FormatError: a book that is not an object, or has no ``entries``.
        LorebookError: non-object entries, duplicate uids and ill-typed fields, naming the
            file, entry and field.
    """
    if not isinstance(data, Mapping):
        raise FormatError(f"a SillyTavern world must be a JSON object, got {type(data).__name__}",
                          source=source)
    raw_entries = data.get("entries")
    if isinstance(raw_entries, list):
        pairs = [(str(i), e) for i, e in enumerate(raw_entries)]
        keys_in_order = [k for k, _ in pairs]
    elif isinstance(raw_entries, Mapping):
        pairs = list(raw_entries.items())
        keys_in_order = st_key_order([k for k, _ in pairs])
    else:
        raise FormatError("missing 'entries' (expected an object mapping uids to entries)",
                          source=source, field="entries")
    by_key = dict(pairs)
    entries: list[Entry] = []
    seen: dict[Any, str] = {}
    normalised: dict[Any, dict[str, tuple[Any, Any]]] = {}
    for k in keys_in_order:
        raw = by_key[k]
        if type(raw) is not dict and not isinstance(raw, Mapping):     # (the ABC's check only off the usual path)
            raise LorebookError(f"an entry must be an object, got {type(raw).__name__}", source=source,
                                entry=k)
        index = _array_index(k)
        fallback_uid = index if index is not None else k
        entry = entry_from_fields(raw, source=source, fill_defaults=fill_defaults, uid=fallback_uid)
        if entry.uid in seen:
            raise LorebookError(f"duplicate uid {entry.uid!r} (also under entries[{seen[entry.uid]!r}])",
                                source=source, entry=entry.uid, field="uid")
        seen[entry.uid] = k
        entries.append(entry)
        # values the model normalised on reading (a null characterFilter): restore on write
        if not _kept_as_read(raw, entry.fields):
            read = entry.fields.get
            changed = {}
            for f, was in raw.items():
                now = read(f, _GONE)
                if now is not was and now is not _GONE and not _same(was, now):
                    changed[f] = (was, now)
            if changed:
                normalised[entry.uid] = changed
    if name is None:
        own = data.get("name")
        if isinstance(own, str) and own:
            name = own
        else:
            name = os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"
    others = {k: v for k, v in data.items() if k != "entries"}
    origin = Origin(document=None, order=tuple(k for k, _ in pairs),
                    extra={"key_by_uid": {e.uid: seen[e.uid] for e in entries},
                           "entries_list": isinstance(raw_entries, list), "top_keys": tuple(data),
                           "normalised": normalised})
    return Lorebook(name=name, entries=tuple(entries), fields=MappingProxyType(others),
                    entry_keys=tuple(k for k, _ in pairs), source=source, format="sillytavern",
                    origin=origin)


def write_world(book: Lorebook, *, include_filled: bool | None = None) -> dict[str, Any]:
    """The book as SillyTavern world JSON data.

    A book read from a world file is written under its original entry keys, in file order,
    with its other top-level fields. Use :func:`lorescan.formats.convert` to also get the
    report of what a book from another format loses on the way.

    Args:
        book: the book.
        include_filled: also write the editor defaults the reader filled in, as SillyTavern
            does on import (default: only for books read from another format).

    Returns:
        The world as JSON data (a dict), ready for ``json.dump``.
    """
    if include_filled is None:
        include_filled = book.format not in ("sillytavern", "kobold")
    origin = book.origin if isinstance(book.origin, Origin) and book.format in ("sillytavern", "kobold") else None
    key_by_uid = dict(origin.extra.get("key_by_uid", {})) if origin else {}
    used = set(key_by_uid.values())
    file_pos = {k: i for i, k in enumerate(origin.order)} if origin else {}
    rows: list[tuple[float, int, str, Entry]] = []
    for n, e in enumerate(book.entries):
        k = key_by_uid.get(e.uid)
        if k is None:
            k = str(e.uid)
            while k in used:
                k = f"{k}_"
            used.add(k)
        rows.append((file_pos.get(k, len(file_pos) + n), n, k, e))
    rows.sort(key=lambda r: (r[0], r[1]))
    as_list = bool(origin and origin.extra.get("entries_list"))
    normalised = origin.extra.get("normalised", {}) if origin else {}

    def as_written(e: Entry) -> dict[str, Any]:
        d = e.to_dict(include_filled=include_filled)
        for f, (raw, read) in normalised.get(e.uid, {}).items():
            if f in d and _same(d[f], read):
                d[f] = raw
        return d
    entries: Any = ([as_written(e) for _, _, _, e in rows] if as_list else
                    {k: as_written(e) for _, _, k, e in rows})
    out: dict[str, Any] = {}
    top = origin.extra.get("top_keys", ()) if origin else ()
    for k in top:                       # the file's own top-level order
        if k == "entries":
            out["entries"] = entries
        elif k in book.fields:
            out[k] = book.fields[k]
    out.setdefault("entries", entries)
    for k, v in book.fields.items():
        out.setdefault(k, v)
    return out


def load_world_file(path: str) -> Lorebook:
    """Read a SillyTavern world JSON file (without :func:`~lorescan.formats.load`'s format detection and limits).

    Raises:
        FormatError: the file is not UTF-8 JSON.
        LorebookError: see :func:`read_world`.
        OSError: the file cannot be read.
    """
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"not valid JSON: {exc}", source=path) from exc
    return read_world(data, source=path)


def book_from_entries(name: str, entries: Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
                      *, source: str = "<memory>") -> Lorebook:
    """A book from SillyTavern-shaped entry dicts, as :func:`read_world` reads them.

    Args:
        name: the book's name.
        entries: entry dicts as a list (keyed by their ``uid``, else their index) or a uid-keyed map.
        source: names the book in errors.

    Returns:
        The :class:`~lorescan.model.Lorebook`, with SillyTavern's defaults filled in.

    Raises:
        LorebookError: an entry is not an object, a uid repeats, or a field has the wrong type.
    """
    if not isinstance(entries, Mapping):
        entries = {str(e.get("uid", i)) if isinstance(e, Mapping) else str(i): e for i, e in enumerate(entries)}
    return read_world({"entries": dict(entries)}, source=source, name=name)
