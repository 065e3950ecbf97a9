"""The book part of the compact compiled form: a SillyTavern book's entries and engine columns.

A compiled book's ``.lsc`` file (and its pickle) holds two parts (``lorescan.match.lsc``):
the keys part, written by the match core, and this part, in sections ``book:*`` and the
header's ``meta["book"]``:

- ``book:entries``: one JSON record per entry (uid, fields in file order, filled defaults),
  each zlib-compressed against the preset dictionary ``book:zdict``, end to end, with
  ``book:entry_offsets``; an :class:`Entry` is built the first time something asks for it;
- ``book:book`` (the book's other fields, ``entry_keys``, format and ``origin``) and
  ``book:uids``, small values through this module's :func:`encode_value` (the match core's
  encoder extended with the model's FrozenMap, EntryFields and Origin, and references to
  entry fields stored in the records);
- ``book:entry_order``, ``book:entry_flags`` and ``book:timed_hash_loose`` / ``_strict``
  (the engine's per-entry columns: the timed entries' fingerprints, which a cold engine
  would otherwise compute for the first timed-effect record), and the
  entry embeddings of meaning-based activation (``book:emb:rows``, ``book:emb:matrix``), and
  ``book:unit_tokens`` (each entry's ``content + "\n"`` token count as ``tokens.storable_count``
  stores it, under the tiktoken encoding and versions named by ``meta["book"]["unit_tokens"]``,
  -1 where not stored; only for books compiled with ``token_counts=True``).

A reader that needs only the keys (``match.lsc.decode_keys``) never reads these sections.
"""
from __future__ import annotations

import dataclasses
import json
import math
import operator
import sys
import threading
import weakref
import zlib
from collections import OrderedDict
from itertools import compress
from typing import Any, Callable

import numpy as np

from ..errors import LorebookError
from ..match.columns import lazy_sequence
from ..match.compile import TYPES as KEY_TYPES
from ..match.lsc import (CompiledFormError, FormReader, FormWriter, ValueDecoder, ValueEncoder, read_form,
                         narrow_offsets, read_keys, write_keys)
from ..model import (_MAX_NUMBER, Entry, EntryFields, FrozenMap, Lorebook, Origin, entry_from_fields,
                     entry_from_stored)

__all__ = ["BOOK_KIND", "encode_book", "decode_book", "encode_value", "decode_value"]

BOOK_KIND = "CompiledBook"
_TIMED = 32          # st.compiled.FLAG_TIMED (st.compiled imports this module)


# -- small values with the model's types ----------------------------------------------------

class _BookEncoder(ValueEncoder):
    def __init__(self, known: dict[int, int]) -> None:
        super().__init__()
        self.known = known

    def share(self, value: Any) -> Any:
        if id(value) in self.known:
            return {"\x00e": self.known[id(value)]}
        return super().share(value)

    def run(self, value: Any) -> Any:
        t = type(value)
        if t is FrozenMap or t is EntryFields:       # EntryFields: stored as a FrozenMap
            return self.mapping(value, "\x00m")
        if t is Origin:
            return {"\x00o": {f.name: self.run(getattr(value, f.name)) for f in dataclasses.fields(value)}}
        return super().run(value)


class _BookDecoder(ValueDecoder):
    def __init__(self, entry_fields: Callable[[int], Any] | None) -> None:
        super().__init__()
        self.entry_fields = entry_fields

    def tagged(self, tag: str, data: Any) -> Any:
        if tag == "\x00e":
            if self.entry_fields is None:
                raise ValueError("a reference to entry fields outside a compiled book")
            return self.entry_fields(data)
        if tag == "\x00m":
            slot = self.reserve()
            made = self.objects[slot] = FrozenMap(self.body(data))
            return made
        if tag == "\x00o":
            return Origin(**{name: self.run(x) for name, x in data.items()})
        return super().tagged(tag, data)


def encode_value(value: Any, *, known: dict[int, int] | None = None) -> Any:
    """``match.lsc.encode_value`` that also keeps FrozenMap, EntryFields (as a FrozenMap) and
    Origin; ``known`` maps ``id(mapping)`` to an entry index for entry ``fields`` stored in
    the entry records (decoded through ``entry_fields``).

    Raises TypeError for a type it does not know.
    """
    return _BookEncoder(known or {}).run(value)


def decode_value(data: Any, *, entry_fields: Callable[[int], Any] | None = None) -> Any:
    """The value :func:`encode_value` encoded (``entry_fields(i)``: entry i's fields)."""
    return _BookDecoder(entry_fields).run(data)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _loads(data: bytes | memoryview) -> Any:
    return json.loads(bytes(data).decode("utf-8", "surrogatepass"))


# -- entry records ----------------------------------------------------------------------------

def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 != 1.0 != True here; NaN == NaN)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return (len(a) == len(b) and list(a) == list(b)
                and all(_same(v, b[k]) for k, v in a.items()))
    if isinstance(a, frozenset):
        return a == b
    return a == b


_ENTRY_FIELDS = tuple(f.name for f in dataclasses.fields(Entry))
_ATTRS = tuple(n for n in _ENTRY_FIELDS if n != "fields")   # fields: checked by _json_exact


def _entry_from_record(record: Any, source: str) -> Entry:
    """The entry of a decoded record. Raises LorebookError for ill-typed fields (as
    ``entry_from_fields``), TypeError/ValueError/... for a record of no known form."""
    tag = record[0]
    if tag == "f":                        # every field as stored, which of them are filled defaults
        _, uid, fields, filled = record
        return entry_from_stored(_canonical(fields), source=source, uid=uid, filled=filled)
    if tag == "d":                        # the file's own fields; the defaults filled in again
        _, uid, fields = record
        return entry_from_fields(_canonical(fields), source=source, uid=uid)
    if tag == "a":                        # every attribute stored as is
        return Entry(**decode_value(record[1]))
    raise ValueError(f"unknown record form {tag!r:.20}")


# Field names are shared by every entry: each decoded record would hold its own copies. A
# record's names (in its order) map to the process's one copy of each (sys.intern), looked up
# as one tuple; msgspec's decoder gives the same name objects record after record already.
_CANON: dict[tuple[str, ...], tuple[str, ...]] = {}
_is = operator.is_


def _canonical(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with interned names (the same dict when its names are those already)."""
    names = tuple(fields)
    canon = _CANON.get(names)
    if canon is None:
        canon = tuple(map(sys.intern, names))
        if len(_CANON) >= 1024:
            _CANON.clear()
        _CANON[names] = canon
    if all(map(_is, canon, names)):
        return fields
    return dict(zip(canon, fields.values()))


def _decode_record(raw: bytes) -> Any:
    """``_loads(raw)``: by msgspec where it reads the record (the same values: ints of any size,
    floats correctly rounded, the same last-wins duplicate keys), else (NaN, infinities, lone
    surrogates, anything msgspec refuses) by ``_loads``."""
    decoder = _DECODER[0]
    if decoder is _UNSET:
        decoder = _DECODER[0] = _msgspec_decoder()
    if decoder is not None:
        try:
            return decoder[0](raw)
        except decoder[1]:
            pass
    return _loads(raw)


def _msgspec_decoder() -> tuple[Callable[[bytes], Any], type[Exception]] | None:
    try:
        import msgspec  # import-cost: the serve extra's, at the first entry a loaded book builds
    except ImportError:                  # pragma: no cover - msgspec is installed wherever the tests run
        return None
    return msgspec.json.Decoder().decode, msgspec.DecodeError


_JSON_SCALARS = (type(None), bool, int, float, str)


def _json_exact(value: Any) -> bool:
    """True when JSON gives ``value`` back with the same types (no tuples, no non-str keys)."""
    return _json_kind(value) > 0


def _json_kind(value: Any) -> int:
    """0: JSON does not give ``value`` back with the same types (a tuple, a non-str key, another
    type); 1: it does; 2: it does, and below the top the containers are plain ``dict`` and
    ``list`` and no value is a float (what :func:`_record_bytes` may write with msgspec).

    A walk over the containers only, with a stack (no recursion): each container's keys and
    values are sorted out by their types in C (one set of types, one ``compress`` of the
    containers among them), so a string or number costs no Python step. An
    :class:`EntryFields`' filled defaults are looked at once per set of filled names
    (:func:`_layer_kind`)."""
    t = type(value)
    if t in _SCALAR_TYPES:
        return 2
    if t is float:
        return 1
    if t not in _CONTAINER_TYPES:
        return 0
    kind = 2
    stack = [value]
    pop, extend = stack.pop, stack.extend
    top = True
    while stack:
        v = pop()
        t = type(v)
        if t is list:
            items: Any = v
        else:                                    # a dict, FrozenMap or EntryFields
            if t is not dict and not top:
                kind = 1
            if t is EntryFields:
                layer = _layer_kind(v)
                if not layer:
                    return 0
                kind = min(kind, layer)
            if _dict_len(v) and not _ONLY_STR.issuperset(map(type, _dict_iter(v))):
                return 0                         # (the stored part: an EntryFields' own fields)
            items = _dict_values(v)
        top = False
        types = set(map(type, items))
        if types <= _SCALAR_TYPES:
            continue
        if float in types:
            kind = 1
            types.discard(float)
            if types <= _SCALAR_TYPES:
                continue
        if not types <= _PLAIN_TYPES:
            return 0
        extend(compress(items, map(_CONTAINER_TYPES.__contains__, map(type, items))))
    return kind


_SCALAR_TYPES = frozenset((str, int, bool, type(None)))      # what JSON gives back as itself (not float)
_CONTAINER_TYPES = frozenset((list, dict, FrozenMap, EntryFields))
_PLAIN_TYPES = _SCALAR_TYPES | _CONTAINER_TYPES
_ONLY_STR = frozenset((str,))
_dict_iter = dict.__iter__
_dict_values = dict.values
_dict_items = dict.items
_dict_len = dict.__len__
_LAYER_KIND: dict[frozenset[str], int] = {}


def _layer_kind(fields: EntryFields) -> int:
    # :func:`_json_kind` of an EntryFields' filled defaults: the shared layer's values (the same
    # for every entry lacking the same fields: looked at once) and displayIndex, the entry's uid.
    layer = fields._layer
    names = layer.names
    kind = _LAYER_KIND.get(names)
    if kind is None:
        kind = _json_kind([layer.value(n, None) for n in layer.order if n != "displayIndex"])
        if len(_LAYER_KIND) >= 256:
            _LAYER_KIND.clear()
        _LAYER_KIND[names] = kind
    if "displayIndex" in names:
        t = type(fields._uid)
        if t is float:
            return min(kind, 1)
        if t not in _JSON_SCALARS:
            return 0
    return kind


def _record_bytes(value: list[Any], kind: int) -> bytes:
    """``_dumps(value)``: by msgspec where it writes the same bytes (``kind`` 2, see
    :func:`_json_kind`: plain dicts and lists, no floats; a lone surrogate, which msgspec
    refuses, goes to ``_dumps``), else by ``_dumps``."""
    if kind == 2:
        encode = _ENCODER[0]
        if encode is _UNSET:
            encode = _ENCODER[0] = _msgspec_encoder()
        if encode is not None:
            try:
                return encode(value)
            except UnicodeEncodeError:
                pass
    return _dumps(value)


def _msgspec_encoder() -> Callable[[Any], bytes] | None:
    try:
        from msgspec.json import encode  # import-cost: the serve extra's, at the first record written (never by a reader)
    except ImportError:                  # pragma: no cover - msgspec is installed wherever the tests run
        return None
    return encode


_UNSET: Any = object()
_ENCODER: list[Any] = [_UNSET]          # msgspec's encoder, None without msgspec: looked up once
_DECODER: list[Any] = [_UNSET]          # (msgspec's decode, its error), None without msgspec: looked up once


def _same_attr(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b) or _same(a, b)


_attrs = operator.attrgetter(*_ATTRS)


def _field_names(fields: Any) -> list[str]:
    # list(fields) in C for an EntryFields (its own names, then its layer's: what its __iter__ yields)
    if type(fields) is EntryFields:
        return [*_dict_iter(fields), *fields._layer.order]
    return list(fields)


def _same_entry(rebuilt: Entry, entry: Entry) -> bool:
    if not (rebuilt.filled == entry.filled and _field_names(rebuilt.fields) == _field_names(entry.fields)):
        return False
    a, b = _attrs(rebuilt), _attrs(entry)
    # every attribute of the same type and equal (``is`` first, as _same_attr), in C; else one by one
    if a == b and list(map(type, a)) == list(map(type, b)):
        return True
    return all(map(_same_attr, a, b))


def _entry_record(entry: Entry, source: str) -> bytes:
    """An entry's record: its fields as JSON when they rebuild it exactly, else every attribute.

    A record holds the file's own fields only when the entry's other fields are the defaults
    a reader fills in (``"d"``: rebuilt with ``fill_defaults``), else all of its fields and
    which of them are filled defaults (``"f"``). The rebuild check builds the entry from the
    fields in memory: JSON gives them back with the same types (``_json_exact``)."""
    fields = entry.fields
    try:
        kind = _json_kind(fields)
        if kind:
            if entry.filled and type(fields) is EntryFields:
                own = fields.own
                rebuilt = entry_from_fields(own, source=source, uid=entry.uid)
                if _same_entry(rebuilt, entry):
                    return _record_bytes(["d", entry.uid, own], kind)
            # every field as a plain dict (what json.dumps writes of ``fields`` too, in its order)
            whole = fields.own if type(fields) is EntryFields and _dict_len(fields) == len(fields) else dict(fields)
            rebuilt = entry_from_fields(whole, source=source, fill_defaults=False, uid=entry.uid,
                                        filled=entry.filled)
            if _same_entry(rebuilt, entry):
                return _record_bytes(["f", entry.uid, whole, sorted(entry.filled)], kind)
    except (LorebookError, TypeError, ValueError):
        pass
    try:
        return _dumps(["a", encode_value({name: getattr(entry, name) for name in _ENTRY_FIELDS})])
    except TypeError as exc:
        raise CompiledFormError(f"cannot store this entry in a compiled form: {exc}", source=source,
                                entry=entry.uid) from None


# -- the book part ----------------------------------------------------------------------------

def encode_book(cb: Any) -> bytes:
    """The compact form of a CompiledBook: its keys part and its book part."""
    w = FormWriter()
    keys_meta = write_keys(w, cb.keys)
    loaded = getattr(cb._load_book, "reader", None) if cb._book is None else None
    if loaded is not None:
        # A loaded book whose entries were never all built: copy its sections as they are.
        source = loaded.meta["book"]["source"]
        for name in _LATER:
            w.blob(name, loaded.blob(name), squeeze=-1 if name == "book:entries" else 0)
        w.array("book:entry_offsets", cb._load_book.records.off)
        w.array("book:entry_crcs", cb._load_book.records.crcs)
        n_entries = loaded.meta["book"]["n_entries"]
    else:
        book = cb.book
        source = book.source
        records = [_entry_record(e, source) for e in cb.entries]
        n_entries = len(records)
        _write_records(w, records)
        known = {id(e.fields): i for i, e in enumerate(cb.entries)}
        try:
            w.value("book:book", {"fields": book.fields, "entry_keys": book.entry_keys, "format": book.format,
                                  "origin": book.origin}, encode=lambda v: encode_value(v, known=known))
        except TypeError as exc:
            raise CompiledFormError(f"cannot store the book's format data in a compiled form: {exc}",
                                    source=source, field="origin") from None
        w.value("book:uids", list(cb.uids), encode=encode_value)
    w.array("book:entry_order", np.asarray(cb.entry_order, dtype=np.float64))
    w.array("book:entry_flags", np.asarray(cb.entry_flags, dtype=np.uint8))
    w.array("book:timed_hashes", np.asarray(cb.timed_hashes, dtype=np.int64))
    embedded = cb.embeddings
    if embedded is not None:         # meaning-based activation's entry embeddings (lorescan.semantic.store)
        w.array("book:emb:rows", np.asarray(embedded[1], dtype=np.int32))
        w.array("book:emb:matrix", np.asarray(embedded[2], dtype=np.float32))
    counted = getattr(cb, "unit_tokens", None)
    if counted is not None:          # the entries' content token counts (st.compiled.compile_book(token_counts=True))
        w.array("book:unit_tokens", np.asarray(counted[2], dtype=np.int32))
    book_meta = {"name": cb.name, "source": source, "n_entries": n_entries, "levels": cb.levels,
                 "max_entry_depth": cb.max_entry_depth, "embeddings": None if embedded is None else embedded[0],
                 "unit_tokens": None if counted is None else [counted[0], counted[1]]}
    return w.finish(BOOK_KIND, {"keys": keys_meta, "book": book_meta})


def decode_book(data: Any, make: Callable[..., Any], source: str = "<pickled compiled book>",
                limits: Any = None, verify: bool = False) -> Any:
    """A CompiledBook (built by ``make``, ``st.compiled.CompiledBook``) from :func:`encode_book` bytes.

    Each section's checksum is checked when the section is first read (the entry records at
    the first entry built); ``verify``: check every section now.

    Raises:
        CompiledFormError: the data is truncated, not a compiled book, from another format
            version, or corrupted.
    """
    def read(r: FormReader) -> Any:
        book = _read_book(r, make, limits)
        if verify:
            r.verify()
        return book
    return read_form(data, source, read)


_LATER = ("book:entries", "book:zdict", "book:book", "book:uids")


def _read_book(r: FormReader, make: Callable[..., Any], limits: Any = None) -> Any:
    if r.kind != BOOK_KIND:
        r.fail(f"holds a {r.kind!r}, not a compiled book")
    meta = r.meta["book"]
    source = meta["source"]
    n = meta["n_entries"]
    keys = read_keys(r, KEY_TYPES, limits)
    if len(keys) != n:
        r.fail("the keys part does not match the entry count")
    records = _EntryRecords(r, n, source)
    # weak: an entry a turn built stays while the engine's entry records hold it, not with the book
    entries = lazy_sequence(n, records.entry, weak=True)

    def load_book() -> Lorebook:
        b = r.value("book:book", decode=lambda d: decode_value(d, entry_fields=lambda i: entries[i].fields))
        return Lorebook(name=meta["name"], entries=tuple(entries), fields=b["fields"],
                        entry_keys=tuple(b["entry_keys"]), source=source, format=b["format"],
                        origin=b["origin"])
    load_book.reader = r          # type: ignore[attr-defined]  # encode_book copies from it
    load_book.records = records   # type: ignore[attr-defined]
    order, flags = r.array("book:entry_order"), r.array("book:entry_flags")
    hashes = r.array("book:timed_hashes")
    if any(column.shape != (n,) for column in (order, flags)):
        r.fail("entry columns do not match the entry count")
    if hashes.ndim != 2 or hashes.shape[1] != 3 or not np.array_equal(hashes[:, 0], np.flatnonzero(flags & _TIMED)):
        r.fail("the timed entries' fingerprints do not match the entries")
    embeddings = None
    if meta["embeddings"] is not None:
        rows, matrix = r.array("book:emb:rows"), r.array("book:emb:matrix")
        if matrix.ndim != 2 or rows.shape != (matrix.shape[0],) or (len(rows) and not 0 <= rows.min() <= rows.max() < n):
            r.fail("entry embeddings do not match the entries")
        embeddings = (str(meta["embeddings"]), rows, matrix)
    unit_tokens = None
    counted = meta.get("unit_tokens")
    if counted is not None:
        column = r.array("book:unit_tokens")
        if column.shape != (n,) or not (isinstance(counted, (list, tuple)) and len(counted) == 2
                                        and all(isinstance(x, str) for x in counted)):
            r.fail("the entries' token counts do not match the entries")
        unit_tokens = (counted[0], counted[1], column)
    # What the loaded book reads later: the entry records, the book's fields and the uids (the
    # rest is in objects and arrays already, each checked at its read).
    r.settle(_LATER, {"book": meta})
    return make(keys=keys, load_book=load_book, name=meta["name"], entries=entries, uids=_lazy_uids(r, n),
                entry_order=order, entry_flags=flags, timed_hashes=hashes, levels=tuple(meta["levels"]),
                max_entry_depth=meta["max_entry_depth"], embeddings=embeddings, unit_tokens=unit_tokens)


# Entry records are compressed one by one (zlib level 6) against a preset dictionary of the
# book (``book:zdict``: its first records, which hold the field names and default values every
# record repeats): a turn builds the entries it touches in any order, each from its own ~1 KB
# stream (a few us), and a loaded book holds its entries at about a quarter of their JSON's
# size (level 1 and a 4 KB dictionary: a third; a level-6 record costs ~10 us more to write).
# Every record is compressed (a stream carries the checksum its first read checks). The
# dictionary, inflated, is not kept by the book: the few books that built an entry last share
# a process-wide cache of them (``_ZDICTS``), so a cache of books held after their turns does not
# hold a dictionary each.
ZDICT = 8192
_LEVEL = 6
_ZDICTS_KEPT = 16
_ZDICTS: "OrderedDict[int, tuple[Any, bytes]]" = OrderedDict()     # id(records) -> (weak ref, zdict)
_ZDICTS_LOCK = threading.Lock()


def _write_records(w: FormWriter, records: list[bytes]) -> None:
    """``book:zdict`` (the preset dictionary), ``book:entries`` (the records, each a raw deflate
    stream, end to end), ``book:entry_offsets`` (where each record starts, and the end) and
    ``book:entry_crcs`` (each stored record's CRC-32: a zlib stream's Adler-32 covers what it
    inflates to, not the padding bits of its last byte, so a flipped bit there went unseen)."""
    zdict = b"".join(records)[:ZDICT]
    stored: list[bytes] = []
    # one compressor primed with the dictionary, copied per record (the same streams as a new
    # compressobj each: the priming, hashing the whole dictionary, is paid once a book)
    primed = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, zdict=zdict) if zdict else \
        zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)
    for rec in records:
        c = primed.copy()
        stored.append(c.compress(rec) + c.flush())
    offsets = np.zeros(len(records) + 1, dtype=np.int64)
    if records:
        np.cumsum([len(r) for r in stored], out=offsets[1:])
    w.blob("book:zdict", zdict, squeeze=ZDICT)     # (inflated when an entry is built: _EntryRecords.zdict)
    w.blob("book:entries", b"".join(stored), squeeze=-1)
    w.array("book:entry_offsets", narrow_offsets(offsets))
    w.array("book:entry_crcs", np.array([zlib.crc32(r) for r in stored], dtype=np.uint32))


class _EntryRecords:
    """The entries of a loaded book, each built from its own record at its first use.

    The offsets and checksums are checked here, their sections' checksums at their first read;
    ``book:entries`` is not checked whole at the first entry (``FormReader.verify`` does): each
    record is checked against its own CRC-32 before it is inflated, and a record that does not
    match, inflate or read is a CompiledFormError naming the file and the section."""

    __slots__ = ("r", "source", "off", "crcs", "blob", "__weakref__")

    def __init__(self, r: FormReader, n: int, source: str) -> None:
        self.r, self.source = r, source
        off = self.off = r.array("book:entry_offsets")
        if len(off) != n + 1 or int(off[0]) != 0 or (n and not np.all(np.diff(off) > 0)):
            r.fail("entry table does not match the entry count")
        self.crcs = r.array("book:entry_crcs")
        if self.crcs.shape != (n,):
            r.fail("entry checksums do not match the entry count")
        self.blob: memoryview | None = None           # book:entries, read on first use

    def zdict(self) -> bytes:
        """The records' preset dictionary, from the shared cache of the books that built an
        entry last, or inflated again (a few us)."""
        key = id(self)
        with _ZDICTS_LOCK:
            found = _ZDICTS.get(key)
            if found is not None and found[0]() is self:
                _ZDICTS.move_to_end(key)
                return found[1]
        zdict = bytes(self.r.blob("book:zdict"))
        with _ZDICTS_LOCK:
            _ZDICTS[key] = (weakref.ref(self), zdict)
            _ZDICTS.move_to_end(key)
            while len(_ZDICTS) > _ZDICTS_KEPT:
                _ZDICTS.popitem(last=False)
        return zdict

    def timed_values(self, i: int) -> tuple[Any, Any] | None:
        """Entry ``i``'s ``sticky`` and ``cooldown`` as its record stores them, read without
        building the entry (what timed-effect evaluation asks of an entry a record names).
        None: a record this does not vouch for (build the entry: its checks name what is wrong)."""
        raw = self._inflated(i)           # a damaged record: the error building it would raise
        try:
            record = _decode_record(raw)
        except (TypeError, ValueError, RecursionError):
            return None
        if type(record) is not list or not record or record[0] not in ("f", "d") \
                or len(record) != (4 if record[0] == "f" else 3) or type(record[2]) is not dict:
            return None
        values = (record[2].get("sticky"), record[2].get("cooldown"))   # absent: the default, null
        if all(v is None or (type(v) is int and -_MAX_NUMBER <= v <= _MAX_NUMBER) for v in values):
            return values
        return None

    def _inflated(self, i: int) -> bytes:
        blob = self.blob
        if blob is None:
            blob = self.r.blob("book:entries", checked=False)
            if blob.nbytes != int(self.off[-1]):
                self.r.fail("section 'book:entries' does not match its entry table")
            self.blob = blob
        stored = blob[int(self.off[i]):int(self.off[i + 1])]
        if zlib.crc32(stored) != int(self.crcs[i]):
            self.r.fail(f"corrupted section 'book:entries' (entry {i}: checksum mismatch)")
        zdict = self.zdict()
        inflate = zlib.decompressobj(-15, zdict=zdict) if zdict else zlib.decompressobj(-15)
        try:
            raw = inflate.decompress(stored)
        except zlib.error as exc:
            self.r.fail(f"corrupted section 'book:entries' (entry {i}: {exc})")
        if not inflate.eof or inflate.unused_data:
            self.r.fail(f"corrupted section 'book:entries' (entry {i} is cut short)")
        return raw

    def entry(self, i: int) -> Entry:
        raw = self._inflated(i)
        try:
            return _entry_from_record(_decode_record(raw), self.source)
        except LorebookError:
            raise                         # an ill-typed field, named
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            self.r.fail(f"corrupted section 'book:entries' (entry {i} is not an entry record: "
                        f"{type(exc).__name__}: {str(exc)[:120]})")


def _lazy_uids(r: FormReader, n: int) -> Any:
    decoded: list[Any] = []

    def whole() -> tuple[Any, ...]:
        if not decoded:
            uids = r.value("book:uids", decode=_decode_uids)
            if type(uids) is not list or len(uids) != n:
                r.fail("the uids do not match the entry count")
            decoded.append(tuple(uids))
        return decoded[0]

    return lazy_sequence(n, lambda i: whole()[i], whole=whole)


_PLAIN_SCALARS = frozenset((int, str, bool, float, type(None)))


def _decode_uids(data: Any) -> Any:
    """``decode_value(data)``; a list of plain values (what a book's uids are) is itself."""
    if type(data) is list and _PLAIN_SCALARS.issuperset(map(type, data)):
        return data
    return decode_value(data)
