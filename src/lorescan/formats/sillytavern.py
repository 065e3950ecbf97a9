"""SillyTavern world JSON: ``{"entries": {"<uid>": {...}}, ...}`` (SPEC 2.1)."""
from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import FormatError, LorebookError
from ..model import Entry, Lorebook, entry_from_fields

__all__ = ["read_world", "write_world", "st_key_order"]

_MAX_INDEX = 2**32 - 2


def _array_index(key: str) -> int | None:
    """The integer of a canonical array-index property name, else None (JS key order)."""
    if key == "0":
        return 0
    if key and key[0] in "123456789" and key.isascii() and key.isdigit():
        n = int(key)
        return n if n <= _MAX_INDEX else None
    return None


def st_key_order(keys: list[str]) -> list[str]:
    """JS object key order: canonical integer keys ascending, then the others in file order."""
    ints = sorted((k for k in keys if _array_index(k) is not None), key=lambda k: int(k))
    return ints + [k for k in keys if _array_index(k) is None]


def read_world(data: Any, *, source: str = "<memory>", name: str | None = None,
               fill_defaults: bool = True) -> Lorebook:
    """A :class:`Lorebook` from parsed SillyTavern world JSON.

    ``name`` defaults to the book's own ``name`` field, else ``source``'s file stem.
    Raises :class:`LorebookError` for a non-object book, non-object entries, duplicate uids
    and ill-typed fields, naming the file, entry and field.
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
    for k in keys_in_order:
        raw = by_key[k]
        if not isinstance(raw, Mapping):
            raise LorebookError(f"an entry must be an object, got {type(raw).__name__}", source=source,
                                entry=k)
        fallback_uid = _array_index(k) if _array_index(k) is not None else k
        entry = entry_from_fields(raw, source=source, fill_defaults=fill_defaults, uid=fallback_uid)
        if entry.uid in seen:
            raise LorebookError(f"duplicate uid {entry.uid!r} (also under entries[{seen[entry.uid]!r}])",
                                source=source, entry=entry.uid, field="uid")
        seen[entry.uid] = k
        entries.append(entry)
    if name is None:
        own = data.get("name")
        if isinstance(own, str) and own:
            name = own
        else:
            import os
            name = os.path.splitext(os.path.basename(source))[0] if source != "<memory>" else "book"
    others = {k: v for k, v in data.items() if k != "entries"}
    return Lorebook(name=name, entries=tuple(entries), fields=MappingProxyType(others),
                    entry_keys=tuple(k for k, _ in pairs), source=source, format="sillytavern")


def write_world(book: Lorebook, *, include_filled: bool = False) -> dict[str, Any]:
    """The book as SillyTavern world JSON data (entries under their original keys)."""
    by_uid_key: dict[str, Entry] = {}
    keys = list(book.entry_keys) or [str(e.uid) for e in book.entries]
    if len(keys) != len(book.entries):
        keys = [str(e.uid) for e in book.entries]
    # entry_keys is in file order; entries are in visiting order: map them by sorted position.
    visiting = st_key_order(keys) if book.entry_keys else keys
    for k, e in zip(visiting, book.entries):
        by_uid_key[k] = e
    out: dict[str, Any] = {"entries": {k: by_uid_key[k].to_dict(include_filled=include_filled) for k in keys}}
    for k, v in book.fields.items():
        out[k] = v
    # keep the file's own top-level order when 'entries' was not first
    return out


def load_world_file(path: str) -> Lorebook:
    """Read a SillyTavern world JSON file."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"not valid JSON: {exc}", source=path) from exc
    return read_world(data, source=path)
