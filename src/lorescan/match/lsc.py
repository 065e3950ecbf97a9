"""The compact compiled form: compiled keys as columns, loaded in milliseconds; the container.

Pickling a :class:`~lorescan.match.compile.CompiledKeys` or a SillyTavern ``CompiledBook``
(and so an engine) and the ``.lsc`` file (``lorescan compile BOOK -o BOOK.lsc``,
``lorescan.load_compiled``) share one encoding: a few numpy columns and byte blobs instead
of a graph of Python objects. A file holds one or two *parts*, each its own sections:

- the keys part (this module; sections ``keys:*``, header ``meta["keys"]``), what the match
  core needs: key tables as CSR arrays (offsets + int32 values) for ``vid_entries``,
  ``content_hits`` and the entry plans (a ref is a vid ``>= 0``, ``SKIP``, or ``-2 - i`` for
  special key ``i``); special keys (``match.keys``), one list each, ``[kind, fields...]``
  with kind ``"re"`` (``[rid, lit, raw]``: the regex itself is ``meta["keys"]["regexes"][rid]``),
  ``"plain"`` (``[text, case_sensitive, whole_words, raw]``) or ``"macro"`` (``[raw,
  case_sensitive, whole_words, literal]``); the automaton, as pyahocorasick's own pickled
  node blob (its ``__reduce__`` arguments), which restores in about a third of the time a
  rebuild from the pattern strings takes (12 ms against 33 ms for 25k patterns);
- the book part (``lorescan.st.lsc``; sections ``book:*``, header ``meta["book"]``): the
  entries, one JSON record each, built the first time something asks for them, and the
  SillyTavern engine's per-entry columns.

A keys-only file (kind ``"CompiledKeys"``) has the first part; a book's file (kind
``"CompiledBook"``) both, and :func:`decode_keys` reads the keys part of either, so slot
mode, the service's store and other engines reuse it without decoding a book.

The file: ``MAGIC``, format version, header length and header CRC-32 (``<8sIII``), the
header (JSON: lorescan version, what the file holds, its sections, payload size and
CRC-32), zero padding to 64 bytes, then the sections, each 64-byte aligned. Reading checks
all of it before decoding anything and raises :class:`CompiledFormError` (a
``LorebookError`` naming the file) for a truncated, foreign, stale or corrupted file.
Nothing in the file is unpickled, so a hostile file cannot run code. Small values
(options, special keys) go through :func:`encode_value`, a JSON encoder that keeps tuples,
frozensets, bytes and non-string dict keys (the book part extends it with the model's types).

Adding data to the compiled form:

- a per-key or per-entry array computed by the key compiler: put it (a numpy array of
  uint8, int32, int64 or float64) into the ``cols`` dict that ``TableBuilder.finish``
  returns, under a new name. Every ``cols`` entry is written as section ``keys:col:<name>``
  and comes back, a view of the loaded copy, in ``cols`` on load; to expose it, add a
  ``CompiledKeys`` slot and pass ``cols[name]`` to it in ``_compile_tables`` and in
  :func:`read_keys`. A per-entry column of the SillyTavern engine goes in ``lorescan.st.lsc``.
- a small value (a flag, a short tuple): add it to the part's meta in :func:`write_keys`
  and read it in :func:`read_keys`.
- a new kind of special key: give it a kind name in :func:`_encode_special` and
  :func:`_decode_special` (and raise ``FORMAT_VERSION``). A Python object inside a stored
  value: teach the encoder its type once with :func:`register_value_type`. (Compiled regexes
  do not go either way: a regex special key is stored with its rid, and the keys meta's
  ``regexes`` holds each regex once as (source, flags, line_local, hazard, expansion), so
  loaded keys share one JSRegex per rid and translate it on its first search.)

A reader must accept files written before the addition (``meta.get``, a missing column),
or ``FORMAT_VERSION`` goes up.
"""
from __future__ import annotations

import functools
import gc
import json
import os
import struct
import threading
import zlib
from typing import Any, Callable, NamedTuple, NoReturn, Sequence, TypeVar

import ahocorasick
import numpy as np

from .._version import __version__
from ..errors import LorebookError
from ..js.regex import JSRegex, JSRegexError
from ..js.regex.checks import expansion
from ..js.regex.parser import parse
from ._ahoreduce import reduce_automaton
from .columns import TABLE_COLUMNS, build_columns, lazy_tables
from .keys import MacroKey, PlainKey, RegexKey, SpecialKey
from .lscvalue import (ValueDecoder as ValueDecoder, ValueEncoder as ValueEncoder, decode_value, encode_value,
                       register_value_type)
from .options import MatchOptions

__all__ = ["CompiledFormError", "CompiledTypes", "FORMAT_VERSION", "MAGIC", "FormReader", "FormWriter", "encode_keys",
           "decode_keys", "write_keys", "read_keys", "read_form", "save_compiled", "read_compiled_file",
           "map_compiled_file", "encode_value", "decode_value", "register_value_type", "narrow_offsets", "narrow_ints"]

MAGIC = b"LORESCN\x00"
# 2: regex special keys hold a rid into meta["regexes"]; 3: special keys are [kind, fields...]
# lists (match.keys classes), not positional tuples; 4: the keys and the book are separate
# parts (sections keys:* and book:*, meta {"keys": ..., "book": ...}); 5: a checksum per
# section (checked at its first read) instead of one for the payload, the automaton last
# (not kept after load), 8-byte alignment, the entry records compressed in chunks; 6: the key
# tables late (copied out at load, not kept twice), CSR offsets int32 when they fit, the timed
# entries' fingerprints as rows of those entries only (book:timed_hashes), entry records at
# zlib level 6 against an 8 KB dictionary
FORMAT_VERSION = 6
_PRE = struct.Struct("<8sIII")        # magic, format version, header length, header CRC-32
_ALIGN = 8           # numpy's widest column type (int64, float64)
# A tiny form (a book of a few entries: its file is mostly fixed-size parts, the automaton's
# node blob, the book's fields, the header) is solid: the header and sections one zlib stream,
# inflated whole at load, the automaton as its pattern words (rebuilt at load: a few tens of
# us there; its node blob was most of a tiny file). A larger form stores what a load or a
# first turn reads as it is (inflating costs more than it saves there: the automaton barely
# compresses), its entry records one by one.
_SQUEEZE_MIN = 64
_TINY = 96 << 10      # sections' bytes: ~35 corpus entries (a smaller book's file stayed above its JSON)
# A form of at most this many sections' bytes is solid (inflating a whole form costs ~1.5 us a
# KB at load: only books of up to ~15 entries, where the fixed costs made the file larger than
# its JSON; at 96 KB the platform benchmark's loads took 10 % longer)
_SOLID_SIZE = 48 << 10
_SOLID = struct.Struct("<I")        # a solid form's stream starts with its header's length
_SOLID_MAX = 4 * _TINY              # what a solid form's stream may inflate to (the header, padding)
# SillyTavern's entry template as an entry record writes it: part of the solid forms' preset
# dictionary (compression context only: a change here changes no reading, only how well a tiny
# file compresses; the match core may not import the book model, so it is written out here).
_ST_ENTRY_TEXT = (
    '["d",0,{"uid":0,"key":[],"keysecondary":[],"comment":"","content":"","constant":false,"vectorized":false,'
    '"selective":true,"selectiveLogic":0,"addMemo":false,"order":100,"position":0,"disable":false,'
    '"ignoreBudget":false,"excludeRecursion":false,"preventRecursion":false,"matchPersonaDescription":false,'
    '"matchCharacterDescription":false,"matchCharacterPersonality":false,"matchCharacterDepthPrompt":false,'
    '"matchScenario":false,"matchCreatorNotes":false,"delayUntilRecursion":0,"probability":100,'
    '"useProbability":true,"depth":4,"outletName":"","group":"","groupOverride":false,"groupWeight":100,'
    '"scanDepth":null,"caseSensitive":null,"matchWholeWords":null,"useGroupScoring":null,"automationId":"",'
    '"role":0,"sticky":null,"cooldown":null,"delay":null,"triggers":[],"displayIndex":0,'
    '"characterFilter":{"isExclude":false,"names":[],"tags":[]}}]')
_BOOK_SECTIONS = ("book:zdict", "book:entries", "book:entry_offsets", "book:entry_crcs", "book:book", "book:uids",
                  "book:entry_order", "book:entry_flags", "book:timed_hashes")


@functools.lru_cache(maxsize=1)
def _solid_dictionary() -> bytes:
    """The preset dictionary of every solid form's stream: what a tiny book's header and
    records repeat (a header of this layout, the section names, the entry template), so a
    tiny file pays for little beyond its own data. Fixed for a format version: a stream made
    with another names its dictionary's Adler-32, and is refused as another lorescan's."""
    names = [f"keys:col:{n}" for n in TABLE_COLUMNS] + list(_BOOK_SECTIONS) + \
        [f"keys:table{i}" for i in range(5)] + ["keys:words"]
    t: dict[str, list[Any]] = {"\x00t": []}
    header = {"lorescan": "", "kind": "CompiledBook", "meta": {
        "keys": {"name": "", "n_entries": 0, "options": [False, False, "ascii", False, "substring", "match_all", False],
                 "token": "", "model": 0, "n_variants": 0, "has_newline": False, "n_tables": 5, "automaton": None,
                 "always": t, "always_sub": t, "chunk_union_exact": True, "macro_keys": [], "specials": [],
                 "regexes": [], "regex_lits": t, "regex_hazards": t, "regex_line_local": t},
        "book": {"name": "", "source": "", "n_entries": 0, "levels": t, "max_entry_depth": 0, "embeddings": None,
                 "unit_tokens": None}},
        "sections": {n: ["array", "<i4", [0], 0, 0, 0, -1] for n in names}, "size": 0, "keep": 0}
    book = ('{"fields":{"\\u0000m":{}},"entry_keys":{"\\u0000t":["0"]},"format":"sillytavern","origin":{"\\u0000o":'
            '{"document":null,"raw_entries":{},"read_fields":{},"order":{"\\u0000t":["0"]},"container":null,"extra":'
            '{"key_by_uid":{"\\u0000d":[[0,"0"]]},"entries_list":false,"top_keys":{"\\u0000t":["entries"]}')
    return _dumps(header) + book.encode() + _ST_ENTRY_TEXT.replace('"d"', '"f"', 1).encode() + _ST_ENTRY_TEXT.encode()
_DTYPES = frozenset({"|u1", "|i1", "<i2", "<i4", "<u4", "<i8", "<f4", "<f8"})      # what the arrays of a compiled form may hold


class CompiledFormError(LorebookError):
    """A compiled form (``.lsc`` file or pickled book) that cannot be read."""


def lorescan_version() -> str:
    """The running lorescan's version (written into every compiled form): the package's own
    ``_version``, so an installed copy and a bare checkout of one release agree."""
    return __version__


# -- small values: lscvalue.py ------------------------------------------------------------


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _loads(data: bytes | memoryview) -> Any:
    return json.loads(bytes(data).decode("utf-8", "surrogatepass"))


# -- sections ------------------------------------------------------------------------------

class FormWriter:
    """Writes one compiled form: named sections, then :meth:`finish` with the header.

    A section added with ``late=True`` (the automaton: read once, at load, into objects of its
    own) goes after all the others, so a reader keeps only the bytes before it (``keep``)."""

    def __init__(self) -> None:
        self.added: list[tuple[str, str, str, list[int], bytes, bool, int, Any]] = []

    def _add(self, name: str, kind: str, dtype: str, shape: tuple[int, ...], data: bytes, late: bool = False,
             squeeze: int = 0, solid_alt: Any = None) -> None:
        self.added.append((name, kind, dtype, list(shape), data, late, squeeze, solid_alt))

    def array(self, name: str, arr: Any) -> None:
        arr = np.ascontiguousarray(arr)
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        arr = arr.astype(dtype, copy=False)
        self._add(name, "array", dtype.str, arr.shape, arr.tobytes())

    def blob(self, name: str, data: bytes, *, late: bool = False, squeeze: int = 0,
             solid_alt: tuple[str, bytes] | None = None) -> None:
        """``squeeze``: store the blob zlib-compressed when it is at most this long (it is
        inflated whole at its read, so only for what is read whole once); -1: never (a blob
        compressed in parts already). ``solid_alt``: (name, bytes) written instead in a solid
        form (the automaton's pattern words instead of its node blob)."""
        self._add(name, "blob", "", (), bytes(data), late, squeeze, solid_alt)

    def value(self, name: str, value: Any, *, encode: Callable[[Any], Any] = encode_value) -> None:
        self._add(name, "value", "", (), _dumps(encode(value)), False, 0)

    def finish(self, kind: str, meta: Any, solid: bool | None = None) -> bytes:
        # A tiny form (a book of a few entries: its file is mostly fixed costs) is solid: its
        # header and sections are one zlib stream, one checksum over it (no section's own).
        if solid is None:
            solid = sum(len(item[4]) for item in self.added) <= _SOLID_SIZE
        sections: dict[str, list[Any]] = {}
        parts: list[bytes] = []
        size = keep = 0
        for late in (False, True):
            if late:
                keep = size
            for name, skind, dtype, shape, data, is_late, squeeze, solid_alt in self.added:
                if is_late is not late:
                    continue
                raw_n = -1
                if solid and solid_alt is not None:
                    name, data = solid_alt
                elif not solid and squeeze >= 0 and _SQUEEZE_MIN <= len(data) <= squeeze:
                    packed = zlib.compress(data, 6)
                    if len(packed) <= 0.8 * len(data):
                        data, raw_n = packed, len(data)
                pad = -size % _ALIGN
                if pad:
                    parts.append(b"\x00" * pad)
                    size += pad
                sections[name] = [skind, dtype, shape, size, len(data), 0 if solid else zlib.crc32(data), raw_n]
                parts.append(data)
                size += len(data)
        payload = b"".join(parts)
        header = _dumps({"lorescan": lorescan_version(), "kind": kind, "meta": encode_value(meta),
                         "sections": sections, "size": len(payload), "keep": keep})
        if solid and len(header) + len(payload) > _SOLID_MAX - _ALIGN:
            return self.finish(kind, meta, False)        # (a header of many long keys)
        if solid:            # (a JSON header starts with "{", a zlib stream never does)
            head = _SOLID.pack(len(header)) + header
            c = zlib.compressobj(9, zdict=_solid_dictionary())
            body = c.compress(head + b"\x00" * (-len(head) % _ALIGN) + payload) + c.flush()
            return _PRE.pack(MAGIC, FORMAT_VERSION, len(body), zlib.crc32(body)) + body
        pre = _PRE.pack(MAGIC, FORMAT_VERSION, len(header), zlib.crc32(header))
        head = pre + header
        return head + b"\x00" * (-len(head) % _ALIGN) + payload


class FormReader:
    """One compiled form, its header checked on construction (magic, versions, header
    checksum, size, section bounds); each section's own checksum is checked the first time
    the section is read (:meth:`verify` checks them all). A solid form (a tiny one: header and
    sections one zlib stream) is checked whole by its one checksum and inflated here.

    The sections before the header's ``keep`` are copied into private memory the reader
    keeps; the late ones (the automaton) stay views of ``buf`` until :meth:`drop_late`, so a
    loaded book does not hold the bytes it has already turned into objects."""

    def __init__(self, buf: Any, source: str) -> None:
        self.source = source
        self._verified: set[str] = set()
        view = memoryview(buf)
        if view.nbytes < _PRE.size:
            self.fail(f"truncated: {view.nbytes} bytes, shorter than the {_PRE.size}-byte header")
        magic, version, hlen, hcrc = _PRE.unpack_from(view, 0)
        if magic != MAGIC:
            self.fail("not a lorescan compiled file (bad magic number)")
        if version < FORMAT_VERSION:
            self.fail(f"written by an older lorescan (compiled form version {version}; this lorescan reads "
                      f"version {FORMAT_VERSION}): recompile it with `lorescan compile`")
        if version != FORMAT_VERSION:
            self.fail(f"written by a newer lorescan (compiled form version {version}; this lorescan reads "
                      f"version {FORMAT_VERSION}): recompile it with `lorescan compile`")
        start = _PRE.size + hlen
        if start > view.nbytes:
            self.fail("truncated inside the header")
        header_bytes = view[_PRE.size:start]
        if zlib.crc32(header_bytes) != hcrc:
            self.fail("corrupted header (checksum mismatch)")
        solid = header_bytes[:1] != b"{"
        if solid:
            if start != view.nbytes:
                self.fail(f"truncated or padded: the header announces {start} bytes, the data has {view.nbytes}")
            view, start = self._inflate(header_bytes)
            header_bytes = view[_SOLID.size:start]
        try:
            header = _loads(header_bytes)
            ours = lorescan_version()
            if header["lorescan"] != ours:
                self.fail(f"compiled by lorescan {header['lorescan']}, this is lorescan {ours}: "
                          "recompile it with `lorescan compile`")
            self.kind = header["kind"]
            self.meta = decode_value(header["meta"])
            self.sections = header["sections"]
            size, keep = header["size"], header["keep"]
        except (KeyError, TypeError, ValueError, zlib.error) as exc:
            if isinstance(exc, LorebookError):
                raise
            self.fail(f"unreadable header ({type(exc).__name__}: {exc})")
        base = start + (-start % _ALIGN)
        if base + size != view.nbytes:
            self.fail(f"truncated or padded: the header announces {base + size} bytes, "
                      f"the data has {view.nbytes}")
        if not (type(keep) is int and 0 <= keep <= size):
            self.fail("unreadable header (the kept part lies outside the data)")
        for name, record in self.sections.items():
            if not (type(record) is list and len(record) == 7):
                self.fail(f"unreadable header (section {name!r})")
            _kind, _dtype, _shape, off, n, crc, raw_n = record
            if not (type(off) is int and type(n) is int and type(crc) is int and type(raw_n) is int
                    and 0 <= off <= off + n <= size and (off + n <= keep or off >= keep)
                    and not (solid and raw_n != -1)):
                self.fail(f"section {name!r} lies outside the data")
        # The bytes no checksum covers (the alignment padding) must be zero: every byte of the
        # file is then checked by the header's checksum, a section's or this.
        at = start
        for off, n in sorted((rec[3], rec[4]) for rec in self.sections.values()):
            if base + off > at and view[at:base + off].tobytes() != bytes(base + off - at):
                self.fail("corrupted data (padding is not zero)")
            at = max(at, base + off + n)
        if view[at:].tobytes() != bytes(view.nbytes - at):
            self.fail("corrupted data (padding is not zero)")
        if solid:            # every byte was checked with the stream
            self._verified = set(self.sections)
        self.keep = keep
        self.payload = memoryview(bytes(view[base:base + keep])) if keep < size or solid else view[base:]
        self.late: memoryview | None = view[base:] if keep < size else None

    def _inflate(self, body: memoryview) -> tuple[memoryview, int]:
        """A solid form's stream, inflated (at most what a tiny form can hold), and where its
        header ends."""
        zdict = _solid_dictionary()
        # a zlib stream made with a preset dictionary names it (FDICT, then its Adler-32)
        if body.nbytes < 6 or not body[1] & 0x20 or int.from_bytes(body[2:6], "big") != zlib.adler32(zdict):
            self.fail("written by another lorescan (its compressed form does not match this lorescan's): "
                      "recompile it with `lorescan compile`")
        inflate = zlib.decompressobj(zdict=zdict)
        try:
            data = inflate.decompress(body, _SOLID_MAX)
        except zlib.error as exc:
            self.fail(f"corrupted data ({exc})")
        if not inflate.eof or inflate.unused_data:
            self.fail("corrupted data (the compressed form is cut short or too large)")
        if len(data) < _SOLID.size:
            self.fail("truncated inside the header")
        start = _SOLID.size + _SOLID.unpack_from(data, 0)[0]
        if start > len(data):
            self.fail("truncated inside the header")
        return memoryview(data), start

    def fail(self, problem: str) -> NoReturn:
        raise CompiledFormError(problem, source=self.source)

    def _raw(self, name: str, checked: bool = True) -> memoryview:
        """A section's bytes (inflated if stored compressed), its checksum checked at its first
        read; ``checked=False``: not checked here (a blob of zlib streams, each of which checks
        itself when inflated: the book's entry chunks; :meth:`verify` still checks it whole)."""
        record = self.sections.get(name)
        if record is None:
            self.fail(f"missing section {name!r}")
        _kind, _dtype, _shape, off, n, crc, raw_n = record
        if off >= self.keep and n:
            if self.late is None:
                self.fail(f"section {name!r} was read already")
            raw = self.late[off:off + n]
        else:
            raw = self.payload[off:off + n]
        if checked and name not in self._verified:
            if zlib.crc32(raw) != crc:
                self.fail(f"corrupted section {name!r} (checksum mismatch)")
            self._verified.add(name)
        if raw_n >= 0:
            try:
                inflated = zlib.decompress(raw)
            except zlib.error as exc:
                self.fail(f"corrupted section {name!r} ({exc})")
            if len(inflated) != raw_n:
                self.fail(f"corrupted section {name!r} (inflates to the wrong size)")
            return memoryview(inflated)
        return raw

    def verify(self) -> None:
        """Check every section's checksum now (what a first read of each would check)."""
        for name, record in self.sections.items():
            if name not in self._verified and not (record[3] >= self.keep and self.late is None):
                self._raw(name)

    def settle(self, later: Sequence[str], meta: Any) -> None:
        """After a load: keep only the records of the sections in ``later`` (read after the
        load, or copied by a save) and ``meta`` for the header's meta. The header's other
        records and values were read into objects (a small book's header, held as decoded,
        was an eighth of its loaded size)."""
        self.sections = {name: self.sections[name] for name in later if name in self.sections}
        self._verified &= self.sections.keys()
        self.meta = meta

    def drop_late(self) -> None:
        """Forget the late sections (read into objects already): the reader stops holding ``buf``."""
        self.late = None

    def array(self, name: str) -> np.ndarray:
        raw = self._raw(name)
        _kind, dtype, shape, off, n, _crc, raw_n = self.sections[name]
        if dtype not in _DTYPES:
            self.fail(f"section {name!r} has an unsupported type {dtype!r}")
        dt = np.dtype(dtype)
        if raw_n < 0 and 0 < n and off + n <= self.keep and n % dt.itemsize == 0:
            # a view of the kept bytes themselves: no slice object per column kept as its base
            del raw
            arr = np.frombuffer(self.payload, dtype=dt, count=n // dt.itemsize, offset=off)
        else:
            arr = np.frombuffer(raw, dtype=dt)
        # (a 1-D column as read: a reshaped view is a second array object per column)
        return arr if len(shape) == 1 and arr.shape[0] == shape[0] else arr.reshape(shape)

    def blob(self, name: str, checked: bool = True) -> memoryview:
        return self._raw(name, checked)

    def value(self, name: str, *, decode: Callable[[Any], Any] = decode_value) -> Any:
        return decode(_loads(self._raw(name)))

    def has(self, name: str) -> bool:
        return name in self.sections


# -- the keys part ------------------------------------------------------------------------

KEYS_KIND = "CompiledKeys"


def write_keys(w: FormWriter, keys: Any) -> dict[str, Any]:
    """Write the keys part of a compiled form (sections ``keys:*``); returns its meta."""
    m = keys.matcher
    automaton_args = None
    if m.automaton is not None:
        _cls, args = reduce_automaton(m.automaton)     # __reduce__ without pyahocorasick's leak
        blobs, rest = args[0], list(args[1:])
        # A solid form holds the pattern words instead (pattern id order), rebuilt at load.
        words = [w for w, _ in sorted(m.automaton.items(), key=lambda item: item[1])]
        w.blob("keys:automaton", b"".join(blobs), late=True, solid_alt=("keys:words", _dumps(words)))
        automaton_args = [[len(b) for b in blobs], rest]
    for i, table in enumerate(m._table_bytes):      # (late: copied into the matcher's own bytes)
        w.blob(f"keys:table{i}", table, late=True)
    if keys._columns is not None:
        cols, specials = keys._columns
    else:
        cols, specials = build_columns(keys.specs, keys.plans, keys.plans_sub, keys.vid_entries, keys.content_hits)
    for name, column in cols.items():
        w.array(f"keys:col:{name}", narrow_ints(column))
    regexes = [[rx.source, rx.flags, rx.line_local, rx.hazard, rx.expansion] for rx in keys.regexes]
    o = keys.options
    return {"name": keys.name, "n_entries": len(keys.plans),
            "options": [o.case_sensitive, o.match_whole_words, o.word_chars, o.nospace_scripts, o.multiword,
                        o.blank_keys, o.expressions],
            "token": m.token, "model": m.model, "n_variants": m.n_variants, "has_newline": m.has_newline,
            "n_tables": len(m._table_bytes), "automaton": automaton_args,
            "always": keys.always, "always_sub": keys.always_sub, "chunk_union_exact": keys.chunk_union_exact,
            "macro_keys": [[k.raw, k.case_sensitive, k.whole_words, k.literal] for k in keys.macro_keys],
            "specials": [_encode_special(s) for s in specials],
            "regexes": regexes, "regex_lits": keys.regex_lits,
            "regex_hazards": keys.regex_hazards, "regex_line_local": keys.regex_line_local}


def narrow_offsets(offsets: Any) -> Any:
    """A CSR offset column as int32 when its last offset fits (a small book's file and loaded
    copy hold half the bytes), else as it is (int64)."""
    offsets = np.asarray(offsets)
    if offsets.dtype == np.int64 and (len(offsets) == 0 or int(offsets[-1]) < 2 ** 31):
        return offsets.astype(np.int32)
    return offsets


_NARROW = (np.int8, np.int16, np.int32)


def narrow_ints(column: Any) -> Any:
    """A signed integer column (int32 or int64) in the narrowest of int8, int16 and int32 that
    holds its values, else as it is: a small book's key tables are mostly int16 (its readers
    take each row's values as Python ints, whatever the type)."""
    column = np.asarray(column)
    if column.dtype not in (np.int32, np.int64):
        return column
    if not len(column):
        return column.astype(np.int8)
    lo, hi = int(column.min()), int(column.max())
    for t in _NARROW:
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return column.astype(t)
    return column


def encode_keys(keys: Any) -> bytes:
    """The compact form of CompiledKeys alone (what pickling them and a keys-only ``.lsc`` hold)."""
    w = FormWriter()
    meta = write_keys(w, keys)
    return w.finish(KEYS_KIND, {"keys": meta})


def _encode_special(s: SpecialKey) -> list[Any]:
    # A regex key holds its JSRegex; the file holds its rid instead and the regexes once
    # each (the keys meta's "regexes"), so loaded keys share one JSRegex per rid like compiled ones.
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
    """The classes decoded keys are made of; ``match.compile`` (above this module) passes them in."""
    keys: Callable[..., Any]
    matcher: Callable[..., Any]
    plan: Callable[..., Any]


def read_keys(r: FormReader, types: CompiledTypes, limits: Any = None) -> Any:
    """The keys part of a checked compiled form (a keys-only form or a book's); ``limits``:
    what the form's statements about its regexes are held to (None trusts them: a pickle)."""
    meta = r.meta.get("keys") if type(r.meta) is dict else None
    if type(meta) is not dict:
        r.fail("holds no compiled keys")
    automaton = None
    if meta["automaton"] is not None and r.has("keys:words"):
        automaton = _rebuilt_automaton(r, meta)
    elif meta["automaton"] is not None:
        lengths, rest = meta["automaton"]
        blob = r.blob("keys:automaton")
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
        del blob, parts
    tables = tuple(bytes(r.blob(f"keys:table{i}")) for i in range(meta["n_tables"]))
    r.drop_late()           # the automaton's and tables' bytes are in objects now: the reader lets them go
    matcher = types.matcher(meta["token"], automaton, tables, meta["model"], meta["n_variants"],
                            meta["has_newline"])
    # The regexes are translated on their first search (JSRegex compiles itself once and
    # keeps the result): a load does no regex work, a scan never translates again.
    regexes = tuple(JSRegex(row[0], row[1], None, row[2], row[3], row[4]) for row in meta["regexes"])
    if limits is not None:
        _check_regex_claims(r, regexes, limits)
    specials = [_decode_special(s, regexes) for s in meta["specials"]]
    prefix = "keys:col:"
    cols = {name[len(prefix):]: r.array(name) for name in r.sections if name.startswith(prefix)}
    missing = [name for name in TABLE_COLUMNS if name not in cols]
    if missing:
        r.fail(f"missing column(s) {', '.join(missing)}")
    specs, plans, plans_sub, vid_entries, content_hits = lazy_tables(cols, specials, types.plan)
    if len(plans) != meta["n_entries"] or len(content_hits) != meta["n_entries"]:
        r.fail("key tables do not match the entry count")
    return types.keys(
        name=meta["name"], options=MatchOptions(*meta["options"]), matcher=matcher,
        specs=specs, plans=plans, plans_sub=plans_sub, vid_entries=vid_entries,
        always=tuple(meta["always"]), always_sub=tuple(meta["always_sub"]), content_hits=content_hits,
        chunk_union_exact=meta["chunk_union_exact"], macro_keys=tuple(MacroKey(*m) for m in meta["macro_keys"]),
        regexes=regexes, regex_lits=tuple(meta["regex_lits"]), regex_hazards=tuple(meta["regex_hazards"]),
        regex_line_local=tuple(meta["regex_line_local"]), columns=(cols, specials))


def _rebuilt_automaton(r: FormReader, meta: dict[str, Any]) -> Any:
    """A solid form's automaton, from its pattern words (word i is pattern id i)."""
    words = _loads(r.blob("keys:words"))
    n_patterns = r.sections["keys:table0"][4] // 4 if r.has("keys:table0") else -1
    if type(words) is not list or len(words) != n_patterns or not all(type(w) is str and w for w in words):
        r.fail("the automaton's words do not match the key tables")
    automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
    for pid, word in enumerate(words):
        automaton.add_word(word, pid)
    if len(automaton) != len(words):
        r.fail("the automaton's words are not distinct")
    automaton.make_automaton()
    return automaton


@functools.lru_cache(maxsize=4096)
def _regex_size(source: str, flags: str) -> tuple[int, int]:
    """(group nesting depth, terms built) of a regex, from its (memoised) parse."""
    parsed = parse(source, flags)
    return parsed.depth, expansion(parsed)


def _check_regex_claims(r: FormReader, regexes: Sequence[JSRegex], limits: Any) -> None:
    """What a file says of its regexes, held to the limits compiling a book applies (a stated
    expansion sets how large a regex may build when it is first searched). The expansion is
    not taken on trust: each regex is parsed again (about 20 us a key; the parse is memoised,
    so its first search does not parse it a second time) and its terms counted, so a file that
    understates one is refused here, never by a search that would raise past the limit."""
    total = 0
    # Without a counted repeat ("{") a pattern builds at most one term per character, and it
    # nests no deeper than its "(" count: such a pattern within the length limit cannot pass
    # the other two, and is not parsed here (a cold load parsed ~17 regexes of a corpus book).
    short = limits.max_regex_length <= limits.max_regex_expansion
    for rx in regexes:
        if type(rx.source) is not str or len(rx.source) > limits.max_regex_length:
            r.fail(f"a regex longer than the limit max_regex_length={limits.max_regex_length}")
        if type(rx.flags) is not str or type(rx.expansion) is not int or \
                not 0 <= rx.expansion <= limits.max_regex_expansion:
            r.fail(f"a regex expanding past the limit max_regex_expansion={limits.max_regex_expansion:,}")
        total += rx.expansion
        if short and "{" not in rx.source and rx.source.count("(") <= limits.max_regex_nesting:
            continue
        try:
            depth, units = _regex_size(rx.source, rx.flags)
        except JSRegexError as exc:
            r.fail(f"an invalid regex /{rx.source[:60]}/{rx.flags[:8]} ({exc})")
        if depth > limits.max_regex_nesting:
            r.fail(f"a regex nested past the limit max_regex_nesting={limits.max_regex_nesting}")
        if units != rx.expansion:
            if units > limits.max_regex_expansion:
                r.fail(f"a regex expanding past the limit max_regex_expansion={limits.max_regex_expansion:,} "
                       f"(the file states {rx.expansion:,} terms, the pattern builds {units:,})")
            r.fail(f"a regex whose stated size ({rx.expansion:,} terms) is not its own ({units:,})")
    if total > limits.max_regex_expansion:
        r.fail(f"regexes expanding past the limit max_regex_expansion={limits.max_regex_expansion:,} together")


_T = TypeVar("_T")


def read_form(data: Any, source: str, read: Callable[[FormReader], _T]) -> _T:
    """``read(reader)`` over the checked compiled form in ``data``, any failure of the data as
    a :class:`CompiledFormError` naming ``source``.

    Raises:
        CompiledFormError: the data is truncated, not a compiled form, from another format
            version or lorescan, or corrupted.
    """
    # Loading makes a few hundred objects and no cycles: a collection of the caller's heap
    # falling due here would cost more than the load (a second at 100k entries).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return read(FormReader(data, source))
    except LorebookError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CompiledFormError(f"unreadable compiled form ({type(exc).__name__}: {exc})", source=source) from None
    finally:
        if was_enabled:
            gc.enable()


def decode_keys(data: Any, types: CompiledTypes, source: str = "<pickled compiled keys>",
                limits: Any = None) -> Any:
    """CompiledKeys from compact-form bytes: a keys-only form (:func:`encode_keys`) or the
    keys part of a compiled book's form (its entries are not read).

    Args:
        data: the bytes (or a memory map of an ``.lsc`` file).
        types: the classes to build (``match.compile`` passes its own).
        source: names the data in errors.
        limits: what the data's statements about its regexes (lengths, expansions) are held
            to: a file's ``Limits``; None trusts them (a pickle this process family wrote).

    Raises:
        CompiledFormError: the data is truncated, not a compiled form, from another format
            version, or corrupted.
    """
    return read_form(data, source, lambda r: read_keys(r, types, limits))


def save_compiled(compiled: Any, path: str | os.PathLike[str]) -> None:
    """Write compiled keys or a compiled book to a file in the ``.lsc`` format (atomically:
    readers never see half a file).

    Args:
        compiled: a :class:`~lorescan.st.compiled.CompiledBook` (``lorescan.load_compiled``
            reads it back) or :class:`~lorescan.match.compile.CompiledKeys`
            (``match.compile.load_keys``); anything with a ``to_lsc()`` giving its compact form.
        path: the file to write.

    Raises:
        CompiledFormError: the book's format data cannot be stored in a compiled form.
        OSError: the file cannot be written.
    """
    data = compiled.to_lsc()
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
