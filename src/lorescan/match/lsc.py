"""The compact compiled form: a CompiledBook as columns, loaded in milliseconds.

Pickling a :class:`~lorescan.match.compile.CompiledBook` (and so an ``STEngine``) and the
``.lsc`` file (``lorescan compile BOOK -o BOOK.lsc``, :func:`load_compiled`) share one
encoding: a few numpy columns and byte blobs instead of a graph of Python objects.

- entries: one JSON record per entry (uid, fields in file order, filled defaults) in one
  UTF-8 blob plus offsets (none for a book compiled from key specs, ``meta["keys_only"]``);
  an :class:`Entry` is built the first time something asks for it;
- key tables: CSR arrays (offsets + int32 values) for ``vid_entries``, ``content_hits`` and
  the entry plans (a ref is a vid ``>= 0``, ``SKIP``, or ``-2 - i`` for special key ``i``);
- special keys (``match.keys``): one list each, ``[kind, fields...]`` with kind ``"re"``
  (``[rid, lit, raw]``: the regex itself is ``meta["regexes"][rid]``), ``"plain"`` (``[text,
  case_sensitive, whole_words, raw]``) or ``"macro"`` (``[raw, case_sensitive, whole_words, literal]``);
- the automaton: pyahocorasick's own pickled node blob (its ``__reduce__`` arguments),
  which restores in about a third of the time a rebuild from the pattern strings takes
  (measured: 12 ms against 33 ms for 25k patterns; ``Automaton.save``/``load`` took 98 ms);
- everything small (options, special keys, the book's other fields and ``origin``) goes
  through :func:`encode_value`, a JSON encoder that keeps tuples, frozensets, bytes and
  non-string dict keys.

The file: ``MAGIC``, format version, header length and header CRC-32 (``<8sIII``), the
header (JSON: lorescan version, what the file holds, its sections, payload size and
CRC-32), zero padding to 64 bytes, then the sections, each 64-byte aligned. Reading checks
all of it before decoding anything and raises :class:`CompiledFormError` (a
``LorebookError`` naming the file) for a truncated, foreign, stale or corrupted file.
Nothing in the file is unpickled, so a hostile file cannot run code.

Adding data to the compiled form:

- a per-key or per-entry array computed by ``compile_book``: put it (a numpy array of
  uint8, int32, int64 or float64) into the ``cols`` dict that ``TableBuilder.finish``
  returns, under a new name. Every ``cols`` entry is written as section ``col:<name>`` and
  comes back, a view of the loaded copy, in ``cols`` on load; to expose it, add a ``CompiledBook``
  slot and pass ``cols[name]`` to it in ``_compile`` and in :func:`_decode_compiled`.
- a small value (a flag, a short tuple): add it to ``meta`` in :func:`encode_compiled`
  and read ``meta[name]`` in :func:`_decode_compiled`.
- a new kind of special key: give it a kind name in :func:`_encode_special` and
  :func:`_decode_special` (and raise ``FORMAT_VERSION``). A Python object inside a stored
  value: teach the encoder its type once with :func:`register_value_type`. (Compiled regexes
  do not go either way: a regex special key is stored with its rid, and ``meta["regexes"]``
  holds each regex once as (source, flags, line_local, hazard, expansion), so a loaded book shares one
  JSRegex per rid and translates it on its first search.)

A reader must accept files written before the addition (``meta.get``, a missing column),
or ``FORMAT_VERSION`` goes up.
"""
from __future__ import annotations

import base64
import dataclasses
import gc
import json
import math
import os
import struct
import sys
import threading
import zlib
from array import array
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import ahocorasick
import numpy as np

from .._version import __version__
from ..errors import LorebookError
from ..js.regex import JSRegex
from .keys import MacroKey, PlainKey, RegexKey, SpecialKey
from ..model import Entry, EntryFields, FrozenMap, Lorebook, Origin, entry_from_fields
from .options import MatchOptions

__all__ = ["CompiledFormError", "CompiledTypes", "FORMAT_VERSION", "MAGIC", "encode_compiled", "decode_compiled",
           "save_compiled", "read_compiled_file", "map_compiled_file", "encode_value", "decode_value", "register_value_type"]

MAGIC = b"LORESCN\x00"
# 2: regex special keys hold a rid into meta["regexes"]; 3: special keys are [kind, fields...]
# lists (match.keys classes), not positional tuples
FORMAT_VERSION = 3
_PRE = struct.Struct("<8sIII")        # magic, format version, header length, header CRC-32
_ALIGN = 64
_DTYPES = frozenset({"|u1", "<i4", "<i8", "<f4", "<f8"})      # what the arrays of a compiled form may hold


class CompiledFormError(LorebookError):
    """A compiled form (``.lsc`` file or pickled book) that cannot be read."""


def lorescan_version() -> str:
    """The running lorescan's version (written into every compiled form): the package's own
    ``_version``, so an installed copy and a bare checkout of one release agree."""
    return __version__


# -- small values ------------------------------------------------------------------------

_TAG = "\x00"      # tagged objects are one-key dicts whose key starts with NUL


def encode_value(value: Any, *, known: dict[int, int] | None = None) -> Any:
    """``value`` as plain JSON data that :func:`decode_value` turns back into an equal value
    of the same types (tuples, frozensets, bytes, FrozenMap, dicts with any keys, Origin),
    with the same sharing: a dict or list met twice is stored once and comes back as one
    object. ``known`` maps ``id(mapping)`` to an entry index for entry ``fields`` stored
    elsewhere (decoded through ``entry_fields``).

    Raises TypeError for a type it does not know.
    """
    return _Encoder(known or {}).run(value)


class _Encoder:
    def __init__(self, known: dict[int, int]) -> None:
        self.known = known
        self.seen: dict[int, tuple[int, Any]] = {}     # id -> (pre-order number, the object)

    def share(self, value: Any) -> Any:
        # None: first time (numbered now); else the reference to store instead.
        if id(value) in self.known:
            return {"\x00e": self.known[id(value)]}
        got = self.seen.get(id(value))
        if got is not None:
            return {"\x00r": got[0]}
        self.seen[id(value)] = (len(self.seen), value)
        return None

    def run(self, value: Any) -> Any:
        t = type(value)
        if value is None or t is bool or t is int or t is str or t is float:
            return value
        run = self.run
        if t is list:
            ref = self.share(value)
            return ref if ref is not None else [run(v) for v in value]
        if t is tuple:
            return {"\x00t": [run(v) for v in value]}
        if t is dict or t is FrozenMap or t is EntryFields:     # EntryFields: stored as a FrozenMap
            ref = self.share(value)
            if ref is not None:
                return ref
            plain = all(type(k) is str for k in value) and not (
                len(value) == 1 and next(iter(value)).startswith(_TAG))
            if plain:
                body: Any = {k: run(v) for k, v in value.items()}
            else:
                body = {"\x00d": [[run(k), run(v)] for k, v in value.items()]}
            return body if t is dict else {"\x00m": body}
        if t is frozenset:
            return {"\x00s": [run(v) for v in value]}
        if t is bytes:
            return {"\x00b": base64.b64encode(value).decode("ascii")}
        if t is Origin:
            return {"\x00o": {f.name: run(getattr(value, f.name)) for f in dataclasses.fields(value)}}
        extra = _VALUE_TYPES.get(t)
        if extra is not None:
            return {"\x00x": [extra[0], run(extra[1](value))]}
        raise TypeError(f"cannot store a {t.__module__}.{t.__qualname__} in a compiled form")


_VALUE_TYPES: dict[type, tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = {}
_VALUE_TAGS: dict[str, Callable[[Any], Any]] = {}


def register_value_type(cls: type, tag: str, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Let :func:`encode_value` store instances of ``cls``: ``encode(obj)`` gives a value it
    can already store, ``decode(that)`` the object again; ``tag`` names the type in files
    (never reuse a tag for another meaning). For example, a point type kept in a
    special key: ``register_value_type(Point, "point", lambda p: (p.x, p.y),
    lambda t: Point(*t))``."""
    _VALUE_TYPES[cls] = (tag, encode, decode)
    _VALUE_TAGS[tag] = decode


def decode_value(data: Any, *, entry_fields: Callable[[int], Any] | None = None) -> Any:
    """The value :func:`encode_value` encoded (``entry_fields(i)``: entry i's fields)."""
    return _Decoder(entry_fields).run(data)


class _Decoder:
    def __init__(self, entry_fields: Callable[[int], Any] | None) -> None:
        self.entry_fields = entry_fields
        self.objects: list[Any] = []          # shared containers by pre-order number

    def reserve(self) -> int:
        self.objects.append(None)
        return len(self.objects) - 1

    def run(self, data: Any) -> Any:
        t = type(data)
        run = self.run
        if t is list:
            out: list[Any] = []
            self.objects.append(out)
            out.extend(run(v) for v in data)
            return out
        if t is not dict:
            return data
        if len(data) == 1:
            (k, v), = data.items()
            if k.startswith(_TAG):
                if k == "\x00t":
                    return tuple(run(x) for x in v)
                if k == "\x00r":
                    return self.objects[v]
                if k == "\x00e":
                    if self.entry_fields is None:
                        raise ValueError("a reference to entry fields outside a compiled book")
                    return self.entry_fields(v)
                if k == "\x00d":
                    slot = self.reserve()
                    made = self.objects[slot] = {}
                    for a, b in v:
                        made[run(a)] = run(b)
                    return made
                if k == "\x00m":
                    slot = self.reserve()
                    made = self.objects[slot] = FrozenMap(self.body(v))
                    return made
                if k == "\x00s":
                    return frozenset(run(x) for x in v)
                if k == "\x00b":
                    return base64.b64decode(v)
                if k == "\x00o":
                    return Origin(**{name: run(x) for name, x in v.items()})
                if k == "\x00x":
                    decode = _VALUE_TAGS.get(v[0])
                    if decode is None:
                        raise ValueError(f"unknown stored type {v[0]!r}")
                    return decode(run(v[1]))
                raise ValueError(f"unknown tag {k!r}")
        made_dict: dict[Any, Any] = {}
        self.objects.append(made_dict)
        for key, value in data.items():
            made_dict[key] = run(value)
        return made_dict

    def body(self, data: dict[str, Any]) -> dict[Any, Any]:
        # A FrozenMap's body: numbered with the FrozenMap, not on its own.
        if len(data) == 1 and next(iter(data)) == "\x00d":
            return {self.run(a): self.run(b) for a, b in data["\x00d"]}
        return {key: self.run(value) for key, value in data.items()}


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _loads(data: bytes | memoryview) -> Any:
    return json.loads(bytes(data).decode("utf-8", "surrogatepass"))


# -- sections ------------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.sections: dict[str, list[Any]] = {}
        self.parts: list[bytes] = []
        self.size = 0

    def _add(self, name: str, kind: str, dtype: str, shape: tuple[int, ...], data: bytes) -> None:
        pad = -self.size % _ALIGN
        if pad:
            self.parts.append(b"\x00" * pad)
            self.size += pad
        self.sections[name] = [kind, dtype, list(shape), self.size, len(data)]
        self.parts.append(data)
        self.size += len(data)

    def array(self, name: str, arr: Any) -> None:
        arr = np.ascontiguousarray(arr)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        arr = arr.astype(dtype, copy=False)
        self._add(name, "array", dtype.str, arr.shape, arr.tobytes())

    def blob(self, name: str, data: bytes) -> None:
        self._add(name, "blob", "", (), bytes(data))

    def value(self, name: str, value: Any, *, known: dict[int, int] | None = None) -> None:
        self._add(name, "value", "", (), _dumps(encode_value(value, known=known)))

    def finish(self, kind: str, meta: Any) -> bytes:
        payload = b"".join(self.parts)
        header = _dumps({"lorescan": lorescan_version(), "kind": kind, "meta": encode_value(meta),
                         "sections": self.sections, "size": len(payload),
                         "crc": zlib.crc32(payload)})
        pre = _PRE.pack(MAGIC, FORMAT_VERSION, len(header), zlib.crc32(header))
        head = pre + header
        return head + b"\x00" * (-len(head) % _ALIGN) + payload


class _Reader:
    def __init__(self, buf: Any, source: str) -> None:
        self.source = source
        view = memoryview(buf)
        if view.nbytes < _PRE.size:
            self.fail(f"truncated: {view.nbytes} bytes, shorter than the {_PRE.size}-byte header")
        magic, version, hlen, hcrc = _PRE.unpack_from(view, 0)
        if magic != MAGIC:
            self.fail("not a lorescan compiled file (bad magic number)")
        if version != FORMAT_VERSION:
            self.fail(f"compiled form version {version}; this lorescan reads version {FORMAT_VERSION}: "
                      "compile the book again")
        start = _PRE.size + hlen
        if start > view.nbytes:
            self.fail("truncated inside the header")
        header_bytes = view[_PRE.size:start]
        if zlib.crc32(header_bytes) != hcrc:
            self.fail("corrupted header (checksum mismatch)")
        try:
            header = _loads(header_bytes)
            ours = lorescan_version()
            if header["lorescan"] != ours:
                self.fail(f"compiled by lorescan {header['lorescan']}, this is lorescan {ours}: "
                          "compile the book again")
            self.kind = header["kind"]
            self.meta = decode_value(header["meta"])
            self.sections = header["sections"]
            size, crc = header["size"], header["crc"]
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, LorebookError):
                raise
            self.fail(f"unreadable header ({type(exc).__name__}: {exc})")
        base = start + (-start % _ALIGN)
        if base + size != view.nbytes:
            self.fail(f"truncated or padded: the header announces {base + size} bytes, "
                      f"the data has {view.nbytes}")
        self.payload = view[base:]
        if zlib.crc32(self.payload) != crc:
            self.fail("corrupted data (checksum mismatch)")
        for name, (kind, _dtype, _shape, off, n) in self.sections.items():
            if not (isinstance(off, int) and isinstance(n, int) and 0 <= off <= off + n <= size):
                self.fail(f"section {name!r} lies outside the data")

    def fail(self, problem: str) -> None:
        raise CompiledFormError(problem, source=self.source)

    def _raw(self, name: str) -> memoryview:
        if name not in self.sections:
            self.fail(f"missing section {name!r}")
        _kind, _dtype, _shape, off, n = self.sections[name]
        return self.payload[off:off + n]

    def array(self, name: str) -> np.ndarray:
        raw = self._raw(name)
        _kind, dtype, shape, _off, _n = self.sections[name]
        if dtype not in _DTYPES:
            self.fail(f"section {name!r} has an unsupported type {dtype!r}")
        arr = np.frombuffer(raw, dtype=np.dtype(dtype))
        return arr.reshape(shape)

    def blob(self, name: str) -> memoryview:
        return self._raw(name)

    def value(self, name: str, *, entry_fields: Callable[[int], Any] | None = None) -> Any:
        return decode_value(_loads(self._raw(name)), entry_fields=entry_fields)


# -- lazy sequences ----------------------------------------------------------------------------

_UNBUILT: Any = object()


class _Lazy(Sequence):
    """A read-only sequence whose item ``i`` is ``make(i)``, built once on first use.

    The items built so far are kept in a dict: a turn asks for a few of a large book's
    plans and hit sets, and a list of ``n`` empty slots per table cost 13 MB at 100k entries."""

    __slots__ = ("_n", "_make", "_items")

    def __init__(self, n: int, make: Callable[[int], Any]) -> None:
        self._n = n
        self._make = make
        self._items: dict[int, Any] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if type(i) is slice:           # before the dict: a slice is hashable from Python 3.12
            return [self[j] for j in range(*i.indices(self._n))]
        try:
            return self._items[i]      # built already (the path a turn takes)
        except KeyError:
            pass
        i = range(self._n)[i]          # IndexError / negative indexes as a list does
        item = self._items.get(i, _UNBUILT)
        if item is _UNBUILT:
            item = self._items[i] = self._make(i)
        return item

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._n):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Sequence, _Lazy)) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<lazy sequence of {self._n}>"

    def __reduce__(self):
        return (tuple, (tuple(self),))


def _csr(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    if rows:
        np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.fromiter((v for r in rows for v in r), dtype=np.int32, count=int(offsets[-1]))
    return offsets, values


def _csr_pairs(n_rows: int, rows: array[int], values: array[int]) -> tuple[np.ndarray, np.ndarray]:
    # Row r lists the values paired with r, ascending and distinct (values come ascending).
    r = np.frombuffer(rows, dtype=np.int32) if len(rows) else np.zeros(0, np.int32)
    v = np.frombuffer(values, dtype=np.int32) if len(values) else np.zeros(0, np.int32)
    order = np.argsort(r, kind="stable")
    r, v = r[order], v[order]
    keep = np.ones(len(r), dtype=bool)
    keep[1:] = (r[1:] != r[:-1]) | (v[1:] != v[:-1])
    r, v = r[keep], v[keep]
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n_rows), out=offsets[1:])
    return offsets, v.astype(np.int32)


def _csr_rows(offsets: np.ndarray, values: np.ndarray, wrap: Callable[[list[int]], Any]) -> _Lazy:
    def make(i: int) -> Any:
        return wrap(values[offsets[i]:offsets[i + 1]].tolist())
    return _Lazy(len(offsets) - 1, make)


_NO_HITS: frozenset[int] = frozenset()


def _frozen_hits(items: list[int]) -> frozenset[int]:
    return frozenset(items) if items else _NO_HITS


# -- CompiledBook --------------------------------------------------------------------------

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


def _entry_from_record(record: list[Any], source: str) -> Entry:
    if record[0] == "a":                  # every attribute stored as is
        return Entry(**decode_value(record[1]))
    _, uid, fields, filled = record
    # Field names are shared by every entry; each json.loads call would make its own copies.
    fields = {sys.intern(k): v for k, v in fields.items()}
    return entry_from_fields(fields, source=source, fill_defaults=False, uid=uid, filled=filled)


_JSON_SCALARS = (type(None), bool, int, float, str)


def _json_exact(value: Any) -> bool:
    """True when JSON gives ``value`` back with the same types (no tuples, no non-str keys)."""
    t = type(value)
    if t is dict or t is FrozenMap or t is EntryFields:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    if t is list:
        return all(_json_exact(v) for v in value)
    return t in _JSON_SCALARS


def _same_attr(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b) or _same(a, b)


def _entry_record(entry: Entry, source: str) -> bytes:
    """An entry's record: its fields as JSON when they rebuild it exactly, else every attribute."""
    record: list[Any] = ["f", entry.uid, entry.fields, sorted(entry.filled)]
    try:
        if _json_exact(entry.fields):
            data = _dumps(record)
            rebuilt = _entry_from_record(_loads(data), source)
            if all(_same_attr(getattr(rebuilt, name), getattr(entry, name)) for name in _ATTRS):
                return data
    except (LorebookError, TypeError, ValueError):
        pass
    try:
        return _dumps(["a", encode_value({name: getattr(entry, name) for name in _ENTRY_FIELDS})])
    except TypeError as exc:
        raise CompiledFormError(f"cannot store this entry in a compiled form: {exc}", source=source,
                                entry=entry.uid) from None


class TableBuilder:
    """Builds a compiled book's key tables as columns one entry at a time, so compiling
    never holds a Python object per plan or hit set (they would stay in the heap)."""

    def __init__(self) -> None:
        self.specials: dict[Any, int] = {}
        self.plans = _PlanColumns(self)
        self.subs = _PlanColumns(self)
        self.sub_index = array("i")
        self.hit_offsets = array("q", [0])
        self.hit_values = array("i")
        self.spec_cols: dict[str, np.ndarray] = {}

    def ref(self, r: Any) -> int:
        if type(r) is int:
            return r                      # a vid, or SKIP (-1)
        return -2 - self.specials.setdefault(r, len(self.specials))

    def add_plans(self, plan: Any, sub: Any) -> None:
        """The entry's plan without and with a substitution hook (often the same object)."""
        self.plans.add(plan)
        if sub is plan or sub == plan:
            self.sub_index.append(-1)
        else:
            self.sub_index.append(len(self.subs.flags))
            self.subs.add(sub)

    def add_hits(self, hits: frozenset[int]) -> None:
        self.hit_values.extend(sorted(hits))
        self.hit_offsets.append(len(self.hit_values))

    def add_specs(self, specs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """The key variants (text, case-sensitive, bounded); returns (UTF-8 text, offsets)."""
        spec_text = [sp[0].encode("utf-8", "surrogatepass") for sp in specs]
        cols = self.spec_cols = {}
        cols["spec_text"] = np.frombuffer(b"".join(spec_text), dtype=np.uint8)
        spec_off = np.zeros(len(spec_text) + 1, dtype=np.int64)
        if spec_text:
            np.cumsum([len(t) for t in spec_text], out=spec_off[1:])
        cols["spec_offsets"] = spec_off
        cols["spec_flags"] = np.array([(1 if cs else 0) | (2 if b else 0) for _, cs, b in specs], dtype=np.uint8)
        return cols["spec_text"], spec_off

    def finish(self, specs: Sequence[Any] | None, vid_entries: Sequence[Sequence[int]] | None = None,
               *, vid_pairs: tuple[array[int], array[int]] | None = None
               ) -> tuple[dict[str, np.ndarray], list[Any]]:
        """The columns (``specs``: None when given to :meth:`add_specs` already). The entries of
        each vid come as rows, or as ``vid_pairs`` (vids, entries), one pair per primary key in
        entry order (a pair per key costs 8 bytes; a list per vid took ~45 MB at 100k entries)."""
        if specs is not None:
            self.add_specs(specs)
        cols: dict[str, np.ndarray] = dict(self.spec_cols)
        for name, pc in (("plans", self.plans), ("sub", self.subs)):
            cols[f"{name}_offsets"] = np.array(pc.offsets, dtype=np.int64)
            cols[f"{name}_values"] = np.array(pc.values, dtype=np.int32)
            cols[f"{name}_flags"] = np.frombuffer(bytes(pc.flags), dtype=np.uint8)
        cols["sub_index"] = np.array(self.sub_index, dtype=np.int32)
        if vid_pairs is not None:
            n_specs = len(cols["spec_offsets"]) - 1
            cols["vid_offsets"], cols["vid_values"] = _csr_pairs(n_specs, *vid_pairs)
        else:
            cols["vid_offsets"], cols["vid_values"] = _csr(vid_entries or ())
        cols["hit_offsets"] = np.array(self.hit_offsets, dtype=np.int64)
        cols["hit_values"] = np.array(self.hit_values, dtype=np.int32)
        return cols, list(self.specials)


class _PlanColumns:
    # Per plan four rows (primary as key-index/ref pairs, secondary, score primary, score
    # secondary) in one CSR, and a flags byte (1: simple, 2: score_simple).
    def __init__(self, owner: TableBuilder) -> None:
        self.ref = owner.ref
        self.offsets = array("q", [0])
        self.values = array("i")
        self.flags = bytearray()

    def add(self, p: Any) -> None:
        ref, values, offsets = self.ref, self.values, self.offsets
        for k, r in p.primary:
            values.append(k)
            values.append(ref(r))
        offsets.append(len(values))
        for row in (p.secondary, p.score_primary, p.score_secondary):
            values.extend([ref(r) for r in row])
            offsets.append(len(values))
        self.flags.append((1 if p.simple else 0) | (2 if p.score_simple else 0))


def _plan_seq(offsets: np.ndarray, values: np.ndarray, flags: np.ndarray, specials: list[Any],
              plan_type: Callable[..., Any]) -> _Lazy:
    def refs(j: int) -> list[Any]:
        return [v if v >= -1 else specials[-2 - v] for v in values[offsets[j]:offsets[j + 1]].tolist()]

    def make(i: int) -> Any:
        j = 4 * i
        pri = refs(j)
        f = int(flags[i])
        return plan_type(tuple(zip(pri[0::2], pri[1::2])), tuple(refs(j + 1)), bool(f & 1),
                         tuple(refs(j + 2)), tuple(refs(j + 3)), bool(f & 2))
    return _Lazy(len(flags), make)


TABLE_COLUMNS = ("spec_text", "spec_offsets", "spec_flags", "plans_offsets", "plans_values", "plans_flags",
                 "sub_index", "sub_offsets", "sub_values", "sub_flags", "vid_offsets", "vid_values",
                 "hit_offsets", "hit_values")


def build_columns(specs: Sequence[Any], plans: Sequence[Any], plans_sub: Sequence[Any],
                  vid_entries: Sequence[Sequence[int]], content_hits: Sequence[frozenset[int]]
                  ) -> tuple[dict[str, np.ndarray], list[Any]]:
    """A compiled book's key tables as numpy columns, and its special keys (what a plan ref
    ``-2 - i`` points at)."""
    tb = TableBuilder()
    for p, q in zip(plans, plans_sub):
        tb.add_plans(p, q)
    for h in content_hits:
        tb.add_hits(h)
    return tb.finish(specs, vid_entries)


def lazy_tables(cols: dict[str, np.ndarray], specials: list[Any], plan_type: Callable[..., Any]
                ) -> tuple[_Lazy, _Lazy, _Lazy, _Lazy, _Lazy]:
    """(specs, plans, plans_sub, vid_entries, content_hits) as lazy sequences over ``cols``.

    ``plan_type`` builds one entry plan (``match.compile.EntryPlan``: this module sits below
    the compiler, which hands it its types).
    """
    spec_blob, spec_off, spec_flags = cols["spec_text"], cols["spec_offsets"], cols["spec_flags"]

    def make_spec(i: int) -> tuple[str, bool, bool]:
        f = int(spec_flags[i])
        text = spec_blob[spec_off[i]:spec_off[i + 1]].tobytes().decode("utf-8", "surrogatepass")
        return (text, bool(f & 1), bool(f & 2))
    plans = _plan_seq(cols["plans_offsets"], cols["plans_values"], cols["plans_flags"], specials, plan_type)
    subs = _plan_seq(cols["sub_offsets"], cols["sub_values"], cols["sub_flags"], specials, plan_type)
    sub_index = cols["sub_index"]
    plans_sub = _Lazy(len(sub_index), lambda i: plans[i] if sub_index[i] < 0 else subs[int(sub_index[i])])
    return (_Lazy(len(spec_flags), make_spec), plans, plans_sub,
            _csr_rows(cols["vid_offsets"], cols["vid_values"], tuple),
            _csr_rows(cols["hit_offsets"], cols["hit_values"], _frozen_hits))


def encode_compiled(cb: Any) -> bytes:
    """The compact form of a CompiledBook (what pickling and ``.lsc`` files hold)."""
    w = _Writer()
    loaded = getattr(cb._load_book, "reader", None) if cb._book is None else None
    keys_only = cb._book is None and cb._load_book is None
    if keys_only:
        # Compiled from key specs (compile.compile_keys): no entries and no book to store.
        source = "<key specs>"
        n_entries = 0
        w.blob("entries", b"")
        w.array("entry_offsets", np.zeros(1, dtype=np.int64))
        w.value("book", None)
        w.value("uids", [])
    elif loaded is not None:
        # A loaded book whose entries were never all built: copy its sections as they are.
        source = loaded.meta["source"]
        for name in ("entries", "book", "uids"):
            w.blob(name, loaded.blob(name))
        w.array("entry_offsets", loaded.array("entry_offsets"))
        n_entries = loaded.meta["n_entries"]
    else:
        book = cb.book
        source = book.source
        records = [_entry_record(e, source) for e in cb.entries]
        n_entries = len(records)
        offsets = np.zeros(len(records) + 1, dtype=np.int64)
        if records:
            np.cumsum([len(r) for r in records], out=offsets[1:])
        w.blob("entries", b"".join(records))
        w.array("entry_offsets", offsets)
        known = {id(e.fields): i for i, e in enumerate(cb.entries)}
        try:
            w.value("book", {"fields": book.fields, "entry_keys": book.entry_keys, "format": book.format,
                             "origin": book.origin}, known=known)
        except TypeError as exc:
            raise CompiledFormError(f"cannot store the book's format data in a compiled form: {exc}",
                                    source=source, field="origin") from None
        w.value("uids", list(cb.uids))
    m = cb.matcher
    automaton_args = None
    if m.automaton is not None:
        _cls, args = m.automaton.__reduce__()[:2]
        blobs, rest = args[0], list(args[1:])
        w.blob("automaton", b"".join(blobs))
        automaton_args = [[len(b) for b in blobs], rest]
    for i, table in enumerate(m._table_bytes):
        w.blob(f"table{i}", table)
    if cb._columns is not None:
        cols, specials = cb._columns
    else:
        cols, specials = build_columns(cb.specs, cb.plans, cb.plans_sub, cb.vid_entries, cb.content_hits)
    for name, column in cols.items():
        w.array(f"col:{name}", column)
    w.array("entry_order", np.asarray(cb.entry_order, dtype=np.float64))
    w.array("entry_flags", np.asarray(cb.entry_flags, dtype=np.uint8))
    embedded = getattr(cb, "embeddings", None)
    if embedded is not None:         # meaning-based activation's entry embeddings (lorescan.semantic.store)
        w.array("emb:rows", np.asarray(embedded[1], dtype=np.int32))
        w.array("emb:matrix", np.asarray(embedded[2], dtype=np.float32))
    regexes = [[rx.source, rx.flags, rx.line_local, rx.hazard, rx.expansion] for rx in cb.regexes]
    o = cb.options
    meta = {"name": cb.name, "source": source, "n_entries": n_entries, "keys_only": keys_only,
            "options": [o.case_sensitive, o.match_whole_words, o.word_chars, o.nospace_scripts, o.multiword,
                        o.blank_keys, o.expressions],
            "token": m.token, "model": m.model, "n_variants": m.n_variants, "has_newline": m.has_newline,
            "n_tables": len(m._table_bytes), "automaton": automaton_args,
            "always": cb.always, "always_sub": cb.always_sub, "chunk_union_exact": cb.chunk_union_exact,
            "macro_keys": [[m.raw, m.case_sensitive, m.whole_words, m.literal] for m in cb.macro_keys], "specials": [_encode_special(s) for s in specials],
            "levels": cb.levels,
            "max_entry_depth": cb.max_entry_depth, "regexes": regexes, "regex_lits": cb.regex_lits,
            "regex_hazards": cb.regex_hazards, "regex_line_local": cb.regex_line_local,
            "embeddings": None if embedded is None else embedded[0]}
    return w.finish("CompiledBook", meta)


def _encode_special(s: SpecialKey) -> list[Any]:
    # A regex key holds its JSRegex; the file holds its rid instead and the regexes once
    # each (meta["regexes"]), so a loaded book shares one JSRegex per rid like a compiled one.
    if type(s) is RegexKey:
        if s.rid < 0:
            raise TypeError(f"regex key {s.raw!r} is not one of the book's regexes")
        return ["re", s.rid, s.lit, s.raw]
    if type(s) is PlainKey:
        return ["plain", s.text, s.case_sensitive, s.whole_words, s.raw]
    if type(s) is MacroKey:
        return ["macro", s.raw, s.case_sensitive, s.whole_words, s.literal]
    raise TypeError(f"cannot store a {type(s).__name__} as a special key")


def _decode_special(data: Any, regexes: Sequence[JSRegex]) -> SpecialKey:
    kind, *fields = data
    if kind == "re":
        rid, lit, raw = fields
        return RegexKey(regexes[rid], rid, lit, raw)
    if kind == "plain":
        return PlainKey(*fields)
    if kind == "macro":
        return MacroKey(*fields)
    raise ValueError(f"unknown special key kind {kind!r}")


class CompiledTypes(NamedTuple):
    """The classes a decoded book is made of; ``match.compile`` (above this module) passes them in."""
    book: Callable[..., Any]
    matcher: Callable[..., Any]
    plan: Callable[..., Any]


def _decode_compiled(r: _Reader, types: CompiledTypes) -> Any:
    if r.kind != "CompiledBook":
        r.fail(f"holds a {r.kind!r}, not a compiled book")
    meta = r.meta
    source = meta["source"]
    n = meta["n_entries"]
    entry_blob = r.blob("entries")
    off = r.array("entry_offsets")
    if len(off) != n + 1:
        r.fail("entry table does not match the entry count")

    def make_entry(i: int) -> Entry:
        return _entry_from_record(_loads(entry_blob[off[i]:off[i + 1]]), source)
    entries = _Lazy(n, make_entry)

    def load_book() -> Lorebook:
        b = r.value("book", entry_fields=lambda i: entries[i].fields)
        return Lorebook(name=meta["name"], entries=tuple(entries), fields=b["fields"],
                        entry_keys=tuple(b["entry_keys"]), source=source, format=b["format"],
                        origin=b["origin"])
    load_book.reader = r          # type: ignore[attr-defined]  # encode_compiled copies from it
    keys_only = meta["keys_only"]
    if type(keys_only) is not bool or (keys_only and n):
        r.fail("inconsistent key-spec flag")

    automaton = None
    if meta["automaton"] is not None:
        lengths, rest = meta["automaton"]
        blob = r.blob("automaton")
        if sum(lengths) != blob.nbytes:
            r.fail("automaton section has the wrong size")
        parts, pos = [], 0
        for k in lengths:
            parts.append(bytes(blob[pos:pos + k]))
            pos += k
        try:
            automaton = ahocorasick.Automaton(parts, *rest)
        except Exception as exc:  # noqa: BLE001 - pyahocorasick raises several types for bad data
            r.fail(f"unreadable automaton ({type(exc).__name__}: {exc})")
    tables = tuple(bytes(r.blob(f"table{i}")) for i in range(meta["n_tables"]))
    matcher = types.matcher(meta["token"], automaton, tables, meta["model"], meta["n_variants"],
                            meta["has_newline"])
    # The regexes are translated on their first search (JSRegex compiles itself once and
    # keeps the result): a load does no regex work, a scan never translates again.
    regexes = tuple(JSRegex(row[0], row[1], None, row[2], row[3], row[4] if len(row) > 4 else 0)
                    for row in meta["regexes"])          # a 4-item row (an older file): expansion unknown
    specials = [_decode_special(s, regexes) for s in meta["specials"]]
    cols = {name[4:]: r.array(name) for name in r.sections if name.startswith("col:")}
    missing = [name for name in TABLE_COLUMNS if name not in cols]
    if missing:
        r.fail(f"missing column(s) {', '.join(missing)}")
    specs, plans, plans_sub, vid_entries, content_hits = lazy_tables(cols, specials, types.plan)
    opts = MatchOptions(*meta["options"])
    embeddings = None
    if meta.get("embeddings") is not None:        # a file from before them has none
        rows, matrix = r.array("emb:rows"), r.array("emb:matrix")
        if matrix.ndim != 2 or rows.shape != (matrix.shape[0],) or (len(rows) and not 0 <= rows.min() <= rows.max() < n):
            r.fail("entry embeddings do not match the entries")
        embeddings = (str(meta["embeddings"]), rows, matrix)
    return types.book(
        book=None, load_book=None if keys_only else load_book, name=meta["name"], entries=entries, options=opts,
        matcher=matcher,
        specs=specs, plans=plans, plans_sub=plans_sub, vid_entries=vid_entries,
        always=tuple(meta["always"]), always_sub=tuple(meta["always_sub"]), content_hits=content_hits,
        chunk_union_exact=meta["chunk_union_exact"], macro_keys=tuple(MacroKey(*m) for m in meta["macro_keys"]),
        entry_order=r.array("entry_order"), entry_flags=r.array("entry_flags"),
        levels=tuple(meta["levels"]), max_entry_depth=meta["max_entry_depth"],
        regexes=regexes, regex_lits=tuple(meta["regex_lits"]), regex_hazards=tuple(meta["regex_hazards"]),
        regex_line_local=tuple(meta["regex_line_local"]),
        uids=() if keys_only else _lazy_uids(r, n), columns=(cols, specials), embeddings=embeddings)


def _lazy_uids(r: _Reader, n: int) -> _Lazy:
    decoded: list[Any] = []

    def make(i: int) -> Any:
        if not decoded:
            decoded.append(r.value("uids"))
        return decoded[0][i]
    return _Lazy(n, make)


def decode_compiled(data: Any, types: CompiledTypes, source: str = "<pickled compiled book>") -> Any:
    """A CompiledBook from :func:`encode_compiled` bytes.

    Args:
        data: the bytes (or a memory map of an ``.lsc`` file).
        types: the classes to build (``match.compile`` passes its own).
        source: names the data in errors.

    Returns:
        The CompiledBook; entries, plans and hit sets are built on first use.

    Raises:
        CompiledFormError: the data is truncated, not a compiled form, from another format
            version, or corrupted.
    """
    # Loading makes a few hundred objects and no cycles: a collection of the caller's heap
    # falling due here would cost more than the load (a second at 100k entries).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        r = _Reader(data, source)
        return _decode_compiled(r, types)
    except LorebookError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CompiledFormError(f"unreadable compiled form ({type(exc).__name__}: {exc})", source=source) from None
    finally:
        if was_enabled:
            gc.enable()


def save_compiled(compiled: Any, path: str | os.PathLike[str]) -> None:
    """Write a compiled book to a file in the ``.lsc`` format (atomically: readers never see half a file).

    Args:
        compiled: the :class:`~lorescan.match.CompiledBook`.
        path: the file to write (``lorescan.load_compiled`` reads it back).

    Raises:
        CompiledFormError: the book's format data cannot be stored in a compiled form.
        OSError: the file cannot be written.
    """
    data = encode_compiled(compiled)
    target = os.fspath(path)
    # A fresh temporary name beside the target (two threads or processes saving the same path
    # must not write into one temporary file), renamed into place: readers see the old file
    # or the new one, never half of one, and a file already loaded is never written into.
    tmp = f"{target}.tmp{os.getpid()}-{threading.get_ident()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_compiled_file(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """The content of an ``.lsc`` file, read whole into private memory, and its name.

    A loaded book is a snapshot: it never reads the file again, so a file replaced, rewritten
    or truncated in place later (a copy over it, ``rsync --inplace``, a restore) cannot reach
    it. (A memory map of the file would: a page past a truncation ends the process with
    SIGBUS at its next scan.) Reading is checked against the file's identity before and after
    (``st_ino``, ``st_size``, ``st_mtime_ns``) and its length: a file that changes while it is
    read is read again, and refused when it keeps changing. Copying costs one ``read`` of the
    file (about 1 ms per 10 MB), the arrays are then views of that copy as before.

    Raises:
        CompiledFormError: the file changed under every attempt to read it.
        OSError: the file cannot be opened or read.
    """
    source = os.fspath(path)
    with open(source, "rb") as f:
        for _ in range(_READ_ATTEMPTS):
            before = os.fstat(f.fileno())
            f.seek(0)
            data = f.read()
            after = os.fstat(f.fileno())
            if _identity(before) == _identity(after) and len(data) == after.st_size:
                return data, source
    raise CompiledFormError(f"the file changed while it was being read ({_READ_ATTEMPTS} attempts)", source=source)


_READ_ATTEMPTS = 3


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


map_compiled_file = read_compiled_file      # the name it had when .lsc files were memory-mapped
