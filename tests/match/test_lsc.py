"""The compact compiled form: pickled and .lsc books give what freshly compiled ones give;
bad files fail with a CompiledFormError naming the file (issue 8 part 3)."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pickle
import random
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import SHARED, need_shared, or_absent

from lorescan import BookSource, ChatMessage, CompiledBook, LorebookError, SlotEngine, STEngine, STSettings, compile_book, load, load_compiled, save_compiled
from lorescan.app.cli import main as cli_main
from lorescan.formats import convert
from lorescan.match import MatchOptions
from lorescan.match.compile import CompiledKeys, compile_keys, load_keys
from lorescan.match.keys import MacroKey, PlainKey, RegexKey
from lorescan.match.lsc import FORMAT_VERSION, MAGIC, CompiledFormError
from lorescan.st.compiled import key_spec, restore_compiled
from lorescan.st.lsc import decode_value, encode_value
from lorescan.model import Entry, FrozenMap, Lorebook, entry_from_fields
from lorescan.formats.sillytavern import book_from_entries

CORPUS = SHARED / "corpus"
REAL_BOOKS = sorted((CORPUS / "books").glob("*.json"))
BOOKS = or_absent(REAL_BOOKS)          # one placeholder that skips (one reason) without the corpus
FILES = or_absent(sorted(p for d in ("books", "cards", "other") for p in (CORPUS / d).glob("*") if p.is_file()))


def _name(p: object) -> str:
    return p.name if isinstance(p, Path) else "absent"
_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "conftest.py"


def _make_book(n: int) -> Lorebook:
    spec = importlib.util.spec_from_file_location("_bench_books", _BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                # type: ignore[union-attr]
    return mod.make_book(n)


SYNTHETIC = _make_book(400)


def test_the_corpus_books_are_present():
    need_shared("corpus/books")
    assert len(REAL_BOOKS) >= 30 and len(FILES) >= 40     # a missing corpus fails, it does not skip


def _chats(book: Lorebook, n: int = 6, seed: int = 3) -> list[list[ChatMessage]]:
    """Chats that mention keys and quote contents of the book's entries (deterministic)."""
    rng = random.Random(seed)
    entries = [e for e in book.entries if e.key or e.content]
    chats = []
    for _ in range(n):
        msgs = []
        for i in range(rng.randint(3, 8)):
            e = rng.choice(entries) if entries else None
            words = []
            if e is not None and e.key:
                words.append(rng.choice(e.key))
            if e is not None and e.content and rng.random() < 0.3:
                words.append(e.content[:200])
            words.append(rng.choice(["what now?", "Tell me more.", "они ушли", "他来了", ""]))
            msgs.append(ChatMessage("User" if i % 2 else "Bot", " ".join(words), is_user=bool(i % 2)))
        chats.append(msgs)
    return chats


def _st_results(engine: STEngine, chats) -> list:
    out = []
    for chat in chats:
        r = engine.scan(chat, max_context=200_000)
        out.append((r.to_json(), sorted((k.key, d.outcome, d.reason, d.detail, d.key, d.where)
                                       for k, d in r.diagnostics.items())))
    return out


def _half() -> float:
    return 0.5


def _engines(compiled: CompiledBook, compat: str) -> STEngine:
    return STEngine([BookSource(compiled, ("global",))], STSettings(scan_depth=6, recursive=True),
                    compat=compat, random=_half)


def _assert_same_entries(a: CompiledBook, b: CompiledBook) -> None:
    assert len(a.entries) == len(b.entries)
    for x, y in zip(a.entries, b.entries):
        for f in dataclasses.fields(Entry):
            vx, vy = getattr(x, f.name), getattr(y, f.name)
            assert type(vx) is type(vy) and (vx == vy or vx != vx), (x.uid, f.name)
        assert list(x.fields) == list(y.fields)


def _assert_same_tables(a: CompiledBook, b: CompiledBook) -> None:
    _assert_same_keys(a.keys, b.keys)
    assert b.options == a.options and b.name == a.name and tuple(b.uids) == tuple(a.uids)
    assert b.levels == a.levels and b.max_entry_depth == a.max_entry_depth
    assert list(b.entry_flags) == list(a.entry_flags)
    assert [x if x == x else None for x in b.entry_order] == [x if x == x else None for x in a.entry_order]


def _assert_same_keys(a: CompiledKeys, b: CompiledKeys) -> None:
    assert b.specs == a.specs and b.plans == a.plans and b.plans_sub == a.plans_sub
    assert b.vid_entries == a.vid_entries and b.content_hits == a.content_hits
    assert (b.always, b.always_sub, b.macro_keys, b.chunk_union_exact) == (
        a.always, a.always_sub, a.macro_keys, a.chunk_union_exact)
    assert (b.regex_lits, b.regex_hazards, b.regex_line_local) == (a.regex_lits, a.regex_hazards, a.regex_line_local)
    assert b.options == a.options and b.name == a.name


@pytest.mark.parametrize("path", BOOKS, ids=_name)
@pytest.mark.parametrize("compat", ["sillytavern", "improved"])
def test_a_loaded_corpus_book_scans_as_the_fresh_one(path, compat, tmp_path):
    book = load(need_shared(str(path.relative_to(SHARED))) if path else need_shared("corpus/books"))
    fresh = compile_book(book, _engines_options(compat))
    save_compiled(fresh, tmp_path / "b.lsc")
    loaded = load_compiled(tmp_path / "b.lsc")
    chats = _chats(book)
    want = _st_results(_engines(fresh, compat), chats)
    assert _st_results(_engines(loaded, compat), chats) == want
    engine = _engines(fresh, compat)
    assert _st_results(pickle.loads(pickle.dumps(engine)), chats) == want
    _assert_same_tables(fresh, loaded)
    _assert_same_entries(fresh, loaded)
    _assert_same_keys(fresh.keys, load_keys(tmp_path / "b.lsc"))      # the keys part read alone


def _engines_options(compat: str) -> MatchOptions:
    from lorescan.st import Compat
    return Compat.of(compat).match_options()


@pytest.mark.parametrize("compat", ["sillytavern", "improved"])
def test_a_loaded_synthetic_book_scans_as_the_fresh_one(compat, tmp_path):
    fresh = compile_book(SYNTHETIC, _engines_options(compat))
    save_compiled(fresh, tmp_path / "s.lsc")
    chats = _chats(SYNTHETIC, n=10)
    want = _st_results(_engines(fresh, compat), chats)
    assert _st_results(_engines(load_compiled(tmp_path / "s.lsc"), compat), chats) == want
    assert _st_results(pickle.loads(pickle.dumps(_engines(fresh, compat))), chats) == want


def _slot_results(engine: SlotEngine, chats) -> list:
    out = []
    for i, chat in enumerate(chats):
        r = engine.run([(("user" if m.is_user else "assistant"), m.text) for m in chat], turn_id=f"t{i}")
        out.append((r.messages, [x.to_dict() for x in r.log], r.state))
    return out


def _solid(data: bytes) -> bytes | None:
    """A solid form's inflated stream (its header's length, the header, the sections), read by
    hand from the layout; None for a form of sections stored one by one."""
    import zlib
    from lorescan.match.lsc import _solid_dictionary
    _magic, _version, hlen, _crc = struct.unpack_from("<8sIII", data, 0)
    start = struct.calcsize("<8sIII")
    if data[start:start + 1] == b"{":
        return None
    inflate = zlib.decompressobj(zdict=_solid_dictionary())
    return inflate.decompress(data[start:start + hlen])


def _parts(data: bytes) -> tuple[dict, dict[str, bytes]]:
    """(header, section name -> its bytes) of a compiled form, read by hand from the layout."""
    import zlib
    body = _solid(data)
    if body is not None:
        start = 4 + struct.unpack_from("<I", body, 0)[0]
        header, data = json.loads(body[4:start]), body
    else:
        _magic, _version, hlen, _crc = struct.unpack_from("<8sIII", data, 0)
        start = struct.calcsize("<8sIII") + hlen
        header = json.loads(data[struct.calcsize("<8sIII"):start])
    base = start + (-start % 8)
    out = {}
    for name, (_k, _d, _s, off, n, crc, raw_n) in header["sections"].items():
        stored = data[base + off:base + off + n]
        assert body is not None or zlib.crc32(stored) == crc, name
        out[name] = zlib.decompress(stored) if raw_n >= 0 else stored
    return header, out


def _with_header(data: bytes, edit) -> bytes:
    """``data`` with its header's JSON passed through ``edit`` (and its checksums made right)."""
    import zlib
    from lorescan.match.lsc import _solid_dictionary
    pre = struct.calcsize("<8sIII")
    body = _solid(data)
    if body is not None:
        start = 4 + struct.unpack_from("<I", body, 0)[0]
        header = edit(body[4:start])
        head = struct.pack("<I", len(header)) + header
        c = zlib.compressobj(9, zdict=_solid_dictionary())
        stream = c.compress(head + b"\0" * (-len(head) % 8) + body[start + (-start % 8):]) + c.flush()
        return bytes(struct.pack("<8sIII", MAGIC, FORMAT_VERSION, len(stream), zlib.crc32(stream)) + stream)
    hlen = struct.unpack_from("<I", data, len(MAGIC) + 4)[0]
    header = edit(data[pre:pre + hlen])
    out = bytearray(struct.pack("<8sIII", MAGIC, FORMAT_VERSION, len(header), zlib.crc32(header)) + header)
    out += b"\0" * (-len(out) % 8) + data[pre + hlen + (-(pre + hlen) % 8):]
    return bytes(out)


def test_a_book_file_holds_its_keys_part_as_a_keys_only_file_holds_it():
    fresh = compile_book(_regex_book())
    book_header, book_sections = _parts(fresh.to_lsc())
    keys_header, keys_sections = _parts(fresh.keys.to_lsc())
    assert (book_header["kind"], keys_header["kind"]) == ("CompiledBook", "CompiledKeys")
    assert keys_sections and all(name.startswith("keys:") for name in keys_sections)
    assert {n for n in book_sections if not n.startswith("keys:")} == {
        "book:entries", "book:zdict", "book:entry_offsets", "book:entry_crcs", "book:book", "book:uids", "book:entry_order", "book:entry_flags",
        "book:timed_hashes"}
    book_keys = {n: v for n, v in book_sections.items() if n.startswith("keys:")}
    assert book_keys.keys() == keys_sections.keys()
    # byte for byte, but for the automaton: pyahocorasick's node blob carries uninitialised padding
    # (a solid form, as this small book's, holds the automaton's pattern words instead)
    assert {n: v for n, v in book_keys.items() if n != "keys:automaton"} == {
        n: v for n, v in keys_sections.items() if n != "keys:automaton"}
    assert len(book_keys.get("keys:automaton", b"")) == len(keys_sections.get("keys:automaton", b""))
    assert book_header["meta"]["keys"] == keys_header["meta"]["keys"] and "book" not in keys_header["meta"]


def test_the_keys_part_of_a_book_file_loads_alone_and_a_keys_file_is_not_a_book(tmp_path):
    book = _regex_book()
    fresh = compile_book(book)
    save_compiled(fresh, tmp_path / "b.lsc")
    keys = load_keys(tmp_path / "b.lsc")
    assert type(keys) is CompiledKeys and not hasattr(keys, "entries")
    _assert_same_keys(fresh.keys, keys)
    _assert_same_keys(compile_keys([key_spec(e) for e in book.entries], name=book.name), keys)
    save_compiled(fresh.keys, tmp_path / "k.lsc")
    with pytest.raises(CompiledFormError, match=r"k\.lsc: holds a 'CompiledKeys', not a compiled book"):
        load_compiled(tmp_path / "k.lsc")
    _assert_same_keys(fresh.keys, load_keys(tmp_path / "k.lsc"))


@pytest.mark.parametrize("path", REAL_BOOKS + [None], ids=[p.name for p in REAL_BOOKS] + ["synthetic"])
def test_a_pickled_slot_engine_and_a_book_from_lsc_run_as_the_fresh_one(path, tmp_path):
    book = SYNTHETIC if path is None else load(path)
    chats = _chats(book, n=4)
    want = _slot_results(SlotEngine([book], count_tokens=len), chats)
    assert _slot_results(pickle.loads(pickle.dumps(SlotEngine([book], count_tokens=len))), chats) == want
    save_compiled(compile_book(book), tmp_path / "b.lsc")
    assert _slot_results(SlotEngine([load_compiled(tmp_path / "b.lsc").book], count_tokens=len), chats) == want


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_a_book_from_lsc_writes_back_what_the_original_writes(path, tmp_path):
    book = load(need_shared(str(path.relative_to(SHARED))) if path else need_shared("corpus"))
    save_compiled(compile_book(book), tmp_path / "b.lsc")
    back = load_compiled(tmp_path / "b.lsc").book
    assert (back.name, back.source, back.format, back.entry_keys) == (book.name, book.source, book.format,
                                                                     book.entry_keys)
    assert back.fields == book.fields and type(back.origin) is type(book.origin)
    if dataclasses.is_dataclass(book.origin):            # Origin compares by identity
        assert dataclasses.asdict(back.origin) == dataclasses.asdict(book.origin)
    else:
        assert back.origin == book.origin
    assert convert(back)[0] == convert(book)[0]


def test_unknown_fields_and_filled_defaults_survive():
    entry = entry_from_fields({"uid": 7, "key": ["a"], "content": "x", "myTool": {"n": [1, 2.5, None]},
                               "order": 3.0}, uid=7)
    book = Lorebook("b", (entry,), fields={"extensions": {"k": 1}})
    back = pickle.loads(pickle.dumps(compile_book(book))).book
    (got,) = back.entries
    assert got.fields == entry.fields and list(got.fields) == list(entry.fields)
    assert got.filled == entry.filled and "myTool" not in got.filled
    assert type(got.order) is float and got.to_dict() == entry.to_dict()
    assert back.fields == {"extensions": {"k": 1}}


def test_an_entry_not_built_from_its_fields_keeps_every_attribute():
    base = entry_from_fields({"uid": 1, "key": ["a"], "content": "c"}, uid=1)
    odd = dataclasses.replace(base, key=("b", "c"), order=float("nan"), constant=True)
    back = pickle.loads(pickle.dumps(compile_book(Lorebook("b", (odd,)))))
    (got,) = back.entries
    assert got.key == ("b", "c") and got.constant is True and got.order != got.order
    assert back.keys.plans == compile_book(Lorebook("b", (odd,))).keys.plans


def test_loaded_entries_are_built_lazily(tmp_path):
    save_compiled(compile_book(SYNTHETIC), tmp_path / "s.lsc")
    loaded = load_compiled(tmp_path / "s.lsc")
    assert all(item is None for item in loaded.entries._items)       # nothing built by loading
    engine = STEngine([BookSource(loaded, ("global",))])          # no recursion: few candidates
    result = engine.scan([ChatMessage("U", SYNTHETIC.entries[3].key[0])], max_context=100_000)
    built = sum(item is not None for item in loaded.entries._items)
    assert 0 < built < len(SYNTHETIC.entries) // 4
    assert result.explain("synthetic-400", 3).outcome == "activated"     # explaining builds them all


def test_the_small_value_encoder_keeps_types():
    value = {"t": (1, (2.5, "x")), "s": frozenset({1, 2}), "b": b"\x00\xff", 3: [None, True],
             "m": FrozenMap({"a": [1]}), "n": float("inf")}
    assert decode_value(json.loads(json.dumps(encode_value(value)))) == value
    tricky = {"\x00t": [1, 2]}                 # a real dict whose only key looks like a tag
    assert decode_value(json.loads(json.dumps(encode_value(tricky)))) == tricky
    with pytest.raises(TypeError):
        encode_value(object())


# -- bad files ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_bytes() -> bytes:
    book = book_from_entries("b", [{"uid": i, "key": [f"k{i}", f"/x{i}+/i"], "content": f"c{i} k{i + 1}"}
                                   for i in range(30)])
    return compile_book(book).to_lsc()


def _load_bytes(tmp_path: Path, data: bytes) -> CompiledBook:
    path = tmp_path / "bad.lsc"
    path.write_bytes(data)
    return load_compiled(path)


def test_every_truncation_fails_with_an_error_naming_the_file(tmp_path, good_bytes):
    for n in sorted({0, 1, 7, 8, 19, 20, 40, 100, len(good_bytes) // 2, len(good_bytes) - 1}):
        with pytest.raises(CompiledFormError, match="bad.lsc: .*truncated"):
            _load_bytes(tmp_path, good_bytes[:n])


def test_a_loaded_book_is_a_snapshot_that_a_file_rewritten_in_place_cannot_reach(tmp_path, good_bytes):
    path = tmp_path / "book.lsc"
    path.write_bytes(good_bytes)
    loaded = load_compiled(path)
    with open(path, "r+b") as f:               # the same inode, overwritten (a mapped file would show it;
        f.write(b"\0" * len(good_bytes))       # cut short, it would end the process: test_adversarial.py)
    engine = STEngine([BookSource(loaded, ("global",))], STSettings(scan_depth=5), count_tokens=len)
    assert sorted(e.uid for e in engine.scan([ChatMessage("u", "k3 and xxx7")], max_context=10**6).activated) \
        == [3, 7]            # k3 and /x7+/i
    with pytest.raises(CompiledFormError, match="book.lsc"):
        load_compiled(path)


def test_a_file_that_keeps_changing_while_it_is_read_is_refused_naming_it(tmp_path, good_bytes, monkeypatch):
    import lorescan.match.lsc as lsc
    path = tmp_path / "book.lsc"
    path.write_bytes(good_bytes)
    real_fstat, calls = os.fstat, []

    def moving_fstat(fd):       # another writer: every look at the file sees a new mtime
        st = real_fstat(fd)
        calls.append(1)
        return SimpleNamespace(st_dev=st.st_dev, st_ino=st.st_ino, st_size=st.st_size,
                               st_mtime_ns=st.st_mtime_ns + len(calls))
    monkeypatch.setattr(lsc.os, "fstat", moving_fstat)
    with pytest.raises(CompiledFormError, match="book.lsc: .*changed while it was being read"):
        load_compiled(path)
    monkeypatch.setattr(lsc.os, "fstat", real_fstat)
    assert len(load_compiled(path).book.entries) == 30


def test_a_foreign_file_fails_on_its_magic(tmp_path):
    with pytest.raises(CompiledFormError, match="bad magic"):
        _load_bytes(tmp_path, json.dumps({"entries": {}}).encode() * 3)


def test_another_format_version_fails_and_says_to_recompile(tmp_path, good_bytes):
    data = bytearray(good_bytes)
    struct.pack_into("<I", data, len(MAGIC), FORMAT_VERSION + 1)
    with pytest.raises(CompiledFormError, match=r"written by a newer lorescan .*: recompile it with `lorescan compile`"):
        _load_bytes(tmp_path, bytes(data))


@pytest.mark.parametrize("old", [2, 3, 4, 5])
def test_a_file_of_an_older_format_fails_saying_an_older_lorescan_wrote_it(tmp_path, good_bytes, old):
    # Version 6 keeps the key tables out of the loaded copy, narrows offsets and stores only the
    # timed entries' fingerprints; a version-5 file (both fingerprint columns), a version-4 one
    # (one payload checksum), a version-3 one (one mixed part) or a version-2 one (positional
    # special keys) is refused by the version check, never decoded.
    assert FORMAT_VERSION == 6
    data = bytearray(good_bytes)
    struct.pack_into("<I", data, len(MAGIC), old)
    for load_it in (load_compiled, load_keys):
        path = tmp_path / "bad.lsc"
        path.write_bytes(bytes(data))
        with pytest.raises(LorebookError, match=rf"bad\.lsc: written by an older lorescan \(compiled form version "
                                                rf"{old}; this lorescan reads version 6\): recompile it with "
                                                r"`lorescan compile`") as info:
            load_it(path)
        assert isinstance(info.value, CompiledFormError) and info.value.source.endswith("bad.lsc")


def _special_book() -> Lorebook:
    return book_from_entries("specials", [
        {"uid": 0, "key": ["/dra+gon/i", "{{char}} hunts"], "keysecondary": ["a\x01b"], "content": "zero"},
        {"uid": 1, "key": ["plain", "tail\n"], "keysecondary": ["/(x|xx)+y/", "{{user}}"], "content": "one"},
    ])


def _round_trip(compiled: CompiledBook, how: str, tmp_path) -> CompiledBook:
    """``compiled`` through pickle, or saved as ``.lsc`` and loaded back."""
    if how == "pickle":
        return pickle.loads(pickle.dumps(compiled))
    save_compiled(compiled, tmp_path / "book.lsc")
    return load_compiled(tmp_path / "book.lsc")


def _special_refs(cb: CompiledBook) -> list:
    return [r for plans in (cb.keys.plans, cb.keys.plans_sub) for p in plans
            for r in [r for _, r in p.primary] + list(p.secondary) + list(p.score_primary)
            + list(p.score_secondary) if type(r) is not int]


@pytest.mark.parametrize("how", ["pickle", "lsc"])
def test_special_keys_come_back_as_the_same_classes_and_values(how, tmp_path):
    fresh = compile_book(_special_book())
    loaded = _round_trip(fresh, how, tmp_path)
    want, got = _special_refs(fresh), _special_refs(loaded)
    assert {type(r) for r in want} == {RegexKey, PlainKey, MacroKey}
    assert [type(r) for r in got] == [type(r) for r in want]
    assert got == want
    assert loaded.keys.macro_keys == fresh.keys.macro_keys and all(type(m) is MacroKey for m in loaded.keys.macro_keys)
    assert all(loaded.keys.regexes[r.rid] is r.rx for r in got if type(r) is RegexKey)


def test_another_lorescan_version_fails_and_says_to_recompile(tmp_path, good_bytes, monkeypatch):
    import lorescan.match.lsc as lsc
    monkeypatch.setattr(lsc, "lorescan_version", lambda: "0.0.0-other")
    with pytest.raises(CompiledFormError, match="lorescan 0.0.0-other: recompile it with `lorescan compile`"):
        _load_bytes(tmp_path, good_bytes)


def test_a_flipped_byte_anywhere_is_caught(tmp_path, good_bytes):
    rng = random.Random(5)
    positions = sorted(set(range(0, 64)) | {rng.randrange(len(good_bytes)) for _ in range(150)})
    for pos in positions:
        data = bytearray(good_bytes)
        data[pos] ^= 1 << rng.randrange(8)
        path = tmp_path / "bad.lsc"
        path.write_bytes(bytes(data))
        with pytest.raises(LorebookError, match="bad.lsc"):
            load_compiled(path, verify=True)


@pytest.fixture(scope="module")
def large_bytes() -> bytes:
    """A book too large for a solid form: its sections stored one by one, each checked at its first read."""
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(4000)]
    book = book_from_entries("b", [{"uid": i, "key": [f"k{i}"], "content": " ".join(rng.choices(words, k=400))}
                                   for i in range(60)])
    data = compile_book(book).to_lsc()
    assert _solid(data) is None
    return data


def test_a_damaged_entry_section_loads_and_fails_at_its_first_use_naming_the_file_and_section(tmp_path, large_bytes):
    # Loading checks the header and the sections it reads (the keys); the entry records are
    # checked record by record (each against its own CRC-32) when its entry is first built, so
    # a load does not read what the turn never needs.
    header, _ = _parts(large_bytes)
    start = struct.calcsize("<8sIII") + struct.unpack_from("<I", large_bytes, len(MAGIC) + 4)[0]
    base = start + (-start % 8)
    off, n = header["sections"]["book:entries"][3:5]
    data = bytearray(large_bytes)
    data[base + off + n // 2] ^= 0x10
    path = tmp_path / "bad.lsc"
    path.write_bytes(bytes(data))
    loaded = load_compiled(path)                     # the keys are intact: it loads
    with pytest.raises(CompiledFormError, match=r"bad\.lsc: corrupted section 'book:entries' \(entry \d+"):
        for i in range(len(loaded.entries)):
            loaded.entries[i]
    with pytest.raises(CompiledFormError, match=r"bad\.lsc: corrupted section 'book:entries'"):
        load_compiled(path, verify=True)


def test_any_flipped_bit_of_an_entry_record_is_caught_at_its_first_use(tmp_path, large_bytes):
    # A deflate stream's last byte has padding bits its Adler-32 does not cover: each record's
    # CRC-32 covers every bit it stores.
    header, _ = _parts(large_bytes)
    start = struct.calcsize("<8sIII") + struct.unpack_from("<I", large_bytes, len(MAGIC) + 4)[0]
    base = start + (-start % 8)
    off = header["sections"]["book:entries"][3]
    ends = _parts(large_bytes)[1]["book:entry_offsets"]
    import numpy as np
    last = int(np.frombuffer(ends, dtype=header["sections"]["book:entry_offsets"][1])[1]) - 1   # entry 0's last byte
    for bit in range(8):
        data = bytearray(large_bytes)
        data[base + off + last] ^= 1 << bit
        path = tmp_path / "bad.lsc"
        path.write_bytes(bytes(data))
        with pytest.raises(CompiledFormError, match=r"bad\.lsc: corrupted section 'book:entries' \(entry 0"):
            load_compiled(path).entries[0]


def test_a_tiny_form_is_solid_and_any_damage_is_caught_at_load(tmp_path, good_bytes):
    assert _solid(good_bytes) is not None
    header, sections = _parts(good_bytes)
    assert "keys:words" in sections and "keys:automaton" not in sections      # the words, not the node blob
    data = bytearray(good_bytes)
    data[len(data) // 2] ^= 0x10
    with pytest.raises(CompiledFormError, match=r"bad\.lsc: corrupted header \(checksum mismatch\)"):
        _load_bytes(tmp_path, bytes(data))
    assert _st_results(_engines(restore_compiled(good_bytes), "sillytavern"),
                       [[ChatMessage("u", "k3 and x12x")]]) == _st_results(
        _engines(compile_book(book_from_entries("b", [{"uid": i, "key": [f"k{i}", f"/x{i}+/i"], "content": f"c{i} k{i + 1}"}
                                                     for i in range(30)])), "sillytavern"), [[ChatMessage("u", "k3 and x12x")]])


def test_a_pickled_book_with_bad_bytes_fails_cleanly(good_bytes):
    with pytest.raises(CompiledFormError, match="pickled compiled book"):
        restore_compiled(good_bytes[:-3])


def test_the_compile_command_writes_a_file_the_engine_loads(tmp_path, capsys):
    src = Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"
    out = tmp_path / "saltmere.lsc"
    assert cli_main(["compile", str(src), "-o", str(out), "--compat", "improved", "--whole-words"]) == 0
    loaded = load_compiled(out)
    assert loaded.options == MatchOptions.improved(match_whole_words=True)
    assert cli_main(["compile", str(tmp_path / "missing.json"), "-o", str(tmp_path / "other.lsc")]) == 2
    assert "missing.json" in capsys.readouterr().err
    assert cli_main(["compile", str(src), "-o", str(tmp_path / "no" / "dir.lsc")]) == 2
    assert "dir.lsc: cannot write" in capsys.readouterr().err


def test_a_registered_type_inside_a_special_key_round_trips():
    import re as _re
    from lorescan.match.lsc import register_value_type
    register_value_type(_re.Pattern, "test-re", lambda p: (p.pattern, p.flags), lambda t: _re.compile(*t))
    value = ("re", _re.compile("a+b", _re.I), 3)
    back = decode_value(json.loads(json.dumps(encode_value(value))))
    assert back == value


def test_an_array_of_an_unsupported_type_is_refused(tmp_path, good_bytes, large_bytes):
    for form in (good_bytes, large_bytes):
        data = _with_header(form, lambda h: h.replace(b'"<i8"', b'"|O8"', 1))
        with pytest.raises(CompiledFormError, match="unsupported type"):
            _load_bytes(tmp_path, data)


def test_pickling_a_loaded_book_copies_its_entries_without_building_them(tmp_path):
    fresh = compile_book(SYNTHETIC)
    save_compiled(fresh, tmp_path / "s.lsc")
    loaded = load_compiled(tmp_path / "s.lsc")
    again = pickle.loads(pickle.dumps(loaded))
    assert all(item is None for item in loaded.entries._items)
    _assert_same_entries(fresh, again)
    _assert_same_tables(fresh, again)
    assert again.book.entries == tuple(again.entries)


def test_compile_caps_entry_depths_as_the_scan_does():
    from lorescan.st.compiled import MAX_SCAN_DEPTH as compile_cap
    from lorescan.match.view import MAX_SCAN_DEPTH as scan_cap
    assert compile_cap == scan_cap
    book = book_from_entries("b", [{"uid": 0, "key": ["a"], "scanDepth": 5000}, {"uid": 1, "key": ["b"],
                                                                                  "scanDepth": 2.5}])
    assert compile_book(book).max_entry_depth == scan_cap


def _regex_book() -> Lorebook:
    return book_from_entries("regexes", [
        {"uid": 0, "key": ["/(a+)+$/", "/\\bcat\\b/i"], "content": "zero"},
        {"uid": 1, "key": ["/^dragon/m", "/\\bcat\\b/i"], "content": "one"},
        {"uid": 2, "key": ["/fire.*ice/s", "plain"], "keysecondary": ["/(x|xx)+y/"], "content": "two"},
    ])


@pytest.mark.parametrize("how", ["pickle", "lsc"])
def test_compiled_regexes_survive_the_compact_form(how, tmp_path):
    fresh = compile_book(_regex_book())
    loaded = _round_trip(fresh, how, tmp_path)
    assert [(rx.source, rx.flags, rx.line_local, rx.hazard) for rx in loaded.keys.regexes] == \
        [(rx.source, rx.flags, rx.line_local, rx.hazard) for rx in fresh.keys.regexes]
    assert len(fresh.keys.regexes) == 5 and fresh.keys.regex_hazards and fresh.keys.regex_line_local
    assert loaded.keys.regex_hazards == fresh.keys.regex_hazards
    assert loaded.keys.regex_line_local == fresh.keys.regex_line_local
    assert loaded.keys.regex_lits == fresh.keys.regex_lits
    # every regex special key of a loaded plan holds the book's own JSRegex for its rid
    refs = [r for p in loaded.keys.plans for r in [r for _, r in p.primary] + list(p.secondary)
            if type(r) is RegexKey]
    assert refs and all(loaded.keys.regexes[r.rid] is r.rx for r in refs)
    assert pickle.loads(pickle.dumps(loaded)).keys.regex_hazards == fresh.keys.regex_hazards


def test_a_loaded_book_translates_each_regex_once(tmp_path, monkeypatch):
    from lorescan.js.regex import compiled as jsregex
    save_compiled(compile_book(_regex_book()), tmp_path / "r.lsc")
    calls = []
    real = jsregex._compile_translated
    monkeypatch.setattr(jsregex, "_compile_translated", lambda p, f, *rest: calls.append((p, f)) or real(p, f, *rest))
    loaded = load_compiled(tmp_path / "r.lsc")
    assert calls == []                       # loading does no regex work
    engine = STEngine([BookSource(loaded, ("global",))], STSettings(scan_depth=4), random=_half)
    chats = [[ChatMessage("User", text, is_user=True)] for text in
             ("a cat and fire then ice", "dragon here", "xxy plain", "CAT", "aaaa")]
    first = [engine.scan(chat, max_context=10_000).to_json() for chat in chats]
    translated = sorted(calls)
    assert translated and len(translated) == len(set(translated)) <= 5
    again = [engine.scan(chat, max_context=10_000).to_json() for chat in chats]
    assert sorted(calls) == translated and again == first
    fresh = STEngine([BookSource(_regex_book(), ("global",))], STSettings(scan_depth=4), random=_half)
    assert [fresh.scan(chat, max_context=10_000).to_json() for chat in chats] == first


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), max_size=40))
def test_vid_table_from_pairs_lists_each_entry_once_in_order(pairs):
    from array import array

    from lorescan.match.columns import _csr_pairs
    pairs.sort(key=lambda p: p[1])                 # compile adds them in entry order
    rows: dict[int, list[int]] = {}
    for vid, entry in pairs:                       # what compile built before: a list per vid
        listed = rows.setdefault(vid, [])
        if not listed or listed[-1] != entry:
            listed.append(entry)
    offsets, values = _csr_pairs(7, array("i", [p[0] for p in pairs]), array("i", [p[1] for p in pairs]))
    assert [values[offsets[v]:offsets[v + 1]].tolist() for v in range(7)] == [rows.get(v, []) for v in range(7)]


def test_lazy_sequence_indexes_like_a_tuple():
    from lorescan.match.columns import _Lazy
    made: list[int] = []
    lazy = _Lazy(4, lambda i: made.append(i) or (i, "x"))
    assert lazy[-1] == (3, "x") and lazy[3] is lazy[-1] and made == [3]
    assert lazy[1:3] == [(1, "x"), (2, "x")] and list(lazy) == [(i, "x") for i in range(4)]
    with pytest.raises(IndexError):
        lazy[4]
    with pytest.raises(IndexError):
        lazy[-5]


def test_a_file_written_under_another_import_path_of_the_same_release_loads(tmp_path):
    # An installed lorescan and a bare checkout (PYTHONPATH=src, no installed metadata) of one release
    # must agree on the version a compiled file carries. A copy of the package under another path, in a
    # process where no installed distribution is found, writes; this process reads.
    import os
    import shutil
    import subprocess
    import sys

    import lorescan
    from lorescan import __version__
    from lorescan.match.lsc import lorescan_version

    other = tmp_path / "checkout"
    shutil.copytree(Path(lorescan.__file__).parent, other / "lorescan", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "written-by-checkout.lsc"
    code = ("import sys, importlib.metadata as md\n"
            "def hidden(name):\n"
            "    raise md.PackageNotFoundError(name)\n"
            "md.version = hidden\n"
            "import lorescan\n"
            "assert lorescan.__file__.startswith(sys.argv[2]), lorescan.__file__\n"
            "from lorescan import compile_book, save_compiled\n"
            "from lorescan.formats import book_from_entries\n"
            "save_compiled(compile_book(book_from_entries('b', [{'uid': 0, 'key': ['x'], 'content': 'y'}])), sys.argv[1])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(other)
    subprocess.run([sys.executable, "-c", code, str(out), str(other)], check=True, env=env, cwd=tmp_path)
    assert lorescan_version() == __version__
    assert len(load_compiled(out).book.entries) == 1


def _computed_fingerprint(entry: Entry, world: str, strict: bool) -> int:
    from lorescan.js.stdecorators import parse_st_decorators
    from lorescan.js.sthash import entry_fingerprint
    decorators, content = parse_st_decorators(entry.content, strict_lines=strict)
    return entry_fingerprint(entry.fields, uid=entry.uid, world=world, content=content, decorators=decorators)


def _timed_book() -> Lorebook:
    return book_from_entries("timed", [
        {"uid": 0, "key": ["dragon"], "content": "the dragon stays", "sticky": 5},
        {"uid": 1, "key": ["wyrm"], "content": "@@dont_activate\nthe wyrm rests", "cooldown": 3},
        {"uid": 2, "key": ["knight"], "content": "not timed"},
        {"uid": 3, "key": ["rook"], "content": "x" * 3000, "sticky": 2, "cooldown": 1},
    ])


@pytest.mark.parametrize("path", REAL_BOOKS + [None], ids=[p.name for p in REAL_BOOKS] + ["timed"])
def test_the_stored_fingerprints_of_timed_entries_are_the_ones_the_engine_computes(path, tmp_path):
    book = _timed_book() if path is None else load(path)
    fresh = compile_book(book)
    save_compiled(fresh, tmp_path / "b.lsc")
    loaded = load_compiled(tmp_path / "b.lsc")
    timed = [i for i, e in enumerate(book.entries) if e.sticky or e.cooldown]
    if path is None:
        assert timed == [0, 1, 3]
    for i, e in enumerate(book.entries):
        for strict in (False, True):
            for cb in (fresh, loaded):
                want = _computed_fingerprint(e, book.name, strict) if i in timed else None
                assert cb.timed_hash(i, book.name, strict) == want, (e.uid, strict)
                assert cb.timed_hash(i, "another name", strict) is None      # stored under the book's name only


def test_a_cold_engine_over_a_loaded_book_reads_a_timed_record_without_fingerprinting(tmp_path, monkeypatch):
    import lorescan.st.tables as tables
    book = _timed_book()
    save_compiled(compile_book(book), tmp_path / "b.lsc")
    state = {"sticky": {"timed.0": {"hash": _computed_fingerprint(book.entries[0], "timed", False),
                                    "start": 1, "end": 10 ** 6, "protected": False}}, "cooldown": {}}
    chat = [ChatMessage("U", "nothing that matches", is_user=True)] * 3
    want = STEngine([BookSource(book, ("global",))]).scan(chat, max_context=10_000, timed_effects=state)
    calls = []
    real = tables.entry_fingerprint
    monkeypatch.setattr(tables, "entry_fingerprint", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = STEngine([BookSource(load_compiled(tmp_path / "b.lsc"), ("global",))]).scan(
        chat, max_context=10_000, timed_effects=state)
    assert calls == []
    assert got.to_json() == want.to_json()
    assert [k.key for k in got.activated] == ["timed.0"]            # the sticky record kept it active



def _crafted(tmp_path, record: bytes, n: int = 120) -> Path:
    """A .lsc whose entry 1 record is ``record``, written by the writer itself: every checksum
    holds (a tool that knows the format, not a damaged file)."""
    from lorescan.st import lsc as book_lsc
    book = book_from_entries("b", [{"uid": i, "key": [f"k{i}"], "content": f"entry {i} " * 30} for i in range(n)])
    cb = compile_book(dataclasses.replace(book, source="b.json"))     # the book's file: what its errors name
    write = book_lsc._entry_record
    real = [write(e, "b.json") for e in cb.entries]
    real[1] = record
    records = iter(real)
    path = tmp_path / "crafted.lsc"
    try:
        book_lsc._entry_record = lambda entry, source: next(records)
        save_compiled(cb, path)
    finally:
        book_lsc._entry_record = write
    load_compiled(path, verify=True)          # every checksum holds
    return path


@pytest.mark.parametrize("field, value, where", [
    ("order", "x", "order"), ("order", 2**53 + 1, "order"), ("depth", 1e300, "depth"), ("key", [1], "key[0]"),
    ("key", "k1", "key"), ("content", 5, "content"), ("triggers", ["t", None], "triggers[1]"),
    ("characterFilter", {"isExclude": False, "names": [None], "tags": []}, "characterFilter.names"),
    ("constant", {}, "constant"), ("uid", True, "uid")])
def test_a_crafted_lsc_with_valid_checksums_and_an_ill_typed_field_names_the_entry_and_field(tmp_path, field, value, where):
    stored = ["f", 1, {"uid": 1, "key": ["k1"], "content": "entry 1", "order": 100, "depth": 4, "triggers": []}, []]
    stored[2][field] = value
    path = _crafted(tmp_path, json.dumps(stored).encode())
    loaded = load_compiled(path)
    assert loaded.entries[0].uid == 0                      # the others build
    with pytest.raises(LorebookError) as caught:
        STEngine([BookSource(loaded, ("global",))], STSettings()).scan([ChatMessage("u", "k1 k0", True)], max_context=8000)
    assert (caught.value.source, caught.value.entry, caught.value.field) == ("b.json", True if field == "uid" else 1, where)


@pytest.mark.parametrize("record", [b"not json", b'"f"', b"[]", b'["f", 1]', b'["f", 1, [], []]', b'["d", 1, 5]',
                                    b'["q", 1, {}, []]', b'["a", {"uid": 1}]', b'["f", 1, {"key": []}, [[1]]]',
                                    b"[" * 100_000 + b"]" * 100_000])
def test_a_crafted_lsc_record_of_no_known_form_is_a_compiled_form_error_naming_the_file(tmp_path, record):
    path = _crafted(tmp_path, record)
    loaded = load_compiled(path)
    with pytest.raises(CompiledFormError, match=r"crafted\.lsc: corrupted section 'book:entries' \(entry 1 is not an entry record"):
        loaded.entries[1]
