"""Per-format field mapping, from small files the tests build themselves (SPEC 2.2, 2.7)."""
from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib

import pytest

from lorescan.errors import LorebookError
from lorescan.formats import convert, detect_format, load, load_data, main_convert
from lorescan.formats._mapping import json_equal


def chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def png_with(*text_chunks: bytes) -> bytes:
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(b"\0\0\0\0\0"))
    return b"\x89PNG\r\n\x1a\n" + ihdr + b"".join(text_chunks) + idat + chunk(b"IEND", b"")


def b64card(card) -> bytes:
    return base64.b64encode(json.dumps(card).encode())


def card_with(entries, spec="chara_card_v3"):
    return {"spec": spec, "spec_version": "3.0", "data": {"name": "Ann", "character_book": {
        "name": "Ann's book", "entries": entries}}}


CC_ENTRY = {"id": 7, "keys": ["dragon"], "secondary_keys": ["red"], "comment": "Dragons", "content": "Big.",
            "constant": True, "selective": True, "insertion_order": 42, "enabled": False, "position": "after_char",
            "name": "n", "priority": 3, "use_regex": True,
            "extensions": {"depth": 2, "probability": 50, "useProbability": True, "selectiveLogic": 3,
                           "exclude_recursion": True, "prevent_recursion": True, "delay_until_recursion": 2,
                           "group": "g", "group_override": True, "group_weight": 7, "scan_depth": 5,
                           "case_sensitive": True, "match_whole_words": False, "use_group_scoring": True,
                           "automation_id": "a", "role": 1, "vectorized": True, "sticky": 3, "cooldown": 4,
                           "delay": 5, "outlet_name": "o", "match_scenario": True, "triggers": ["normal"],
                           "ignore_budget": True, "display_index": 9, "custom": {"x": 1}}}

CC_EXPECT = {"uid": 7, "key": ["dragon"], "keysecondary": ["red"], "comment": "Dragons", "content": "Big.",
             "constant": True, "selective": True, "order": 42, "disable": True, "position": 1, "depth": 2,
             "probability": 50, "useProbability": True, "selectiveLogic": 3, "excludeRecursion": True,
             "preventRecursion": True, "delayUntilRecursion": 2, "group": "g", "groupOverride": True,
             "groupWeight": 7, "scanDepth": 5, "caseSensitive": True, "matchWholeWords": False,
             "useGroupScoring": True, "automationId": "a", "role": 1, "vectorized": True, "sticky": 3,
             "cooldown": 4, "delay": 5, "outletName": "o", "matchScenario": True, "triggers": ["normal"],
             "ignoreBudget": True, "displayIndex": 9, "extensions": {"custom": {"x": 1}}}


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()


def _text(keyword: str, card) -> bytes:
    return chunk(b"tEXt", keyword.encode() + b"\0" + b64card(card))


def _ztxt(keyword: str, card) -> bytes:
    return chunk(b"zTXt", keyword.encode() + b"\0\0" + zlib.compress(b64card(card)))


def _itxt(keyword: str, card, compressed: bool) -> bytes:
    body = zlib.compress(b64card(card)) if compressed else b64card(card)
    return chunk(b"iTXt", keyword.encode() + b"\0" + bytes([int(compressed), 0]) + b"en\0\0" + body)


CC_FILES = {
    "ccv3 json": (lambda: json.dumps(card_with([CC_ENTRY])).encode(), "ccv3"),
    "ccv2 json": (lambda: json.dumps(card_with([CC_ENTRY], "chara_card_v2")).encode(), "ccv2"),
    "lorebook_v3": (lambda: json.dumps({"spec": "lorebook_v3", "data": {"entries": [CC_ENTRY]}}).encode(),
                    "lorebook_v3"),
    "character_book": (lambda: json.dumps({"entries": [CC_ENTRY]}).encode(), "character_book"),
    "png tEXt chara": (lambda: png_with(_text("chara", card_with([CC_ENTRY], "chara_card_v2"))), "png"),
    "png zTXt ccv3": (lambda: png_with(_ztxt("ccv3", card_with([CC_ENTRY]))), "png"),
    "png iTXt plain": (lambda: png_with(_itxt("ccv3", card_with([CC_ENTRY]), False)), "png"),
    "png iTXt compressed": (lambda: png_with(_itxt("chara", card_with([CC_ENTRY]), True)), "png"),
    "charx": (lambda: _zip({"card.json": json.dumps(card_with([CC_ENTRY])).encode(), "assets/a.png": b"x"}),
              "charx"),
}


@pytest.mark.parametrize("name", CC_FILES)
def test_character_card_entry_fields_map_to_sillytavern_fields(name):
    build, fmt = CC_FILES[name]
    data = build()
    book = load(data)
    assert book.format == fmt
    (entry,) = book.entries
    for k, v in CC_EXPECT.items():
        assert json_equal(entry.fields[k], v), k
    again, report = convert(book)
    assert not report
    assert json_equal(load(again if isinstance(again, bytes) else json.dumps(again).encode()).entries[0].fields,
                      entry.fields)


def test_png_ccv3_chunk_is_read_before_chara():
    v2 = card_with([{**CC_ENTRY, "content": "old"}], "chara_card_v2")
    v3 = card_with([CC_ENTRY])
    assert load(png_with(_text("chara", v2), _text("ccv3", v3))).entries[0].content == "Big."


def test_cc_missing_fields_take_the_sillytavern_import_defaults():
    (e,) = load_data({"entries": [{"keys": ["a"], "content": "x", "enabled": True}]}).entries
    assert (e.uid, e.selective, e.constant, e.position, e.fields["probability"], e.use_probability) == (
        0, False, False, 1, 100, True)


@pytest.mark.parametrize("raw_position, ext_position, expect", [
    ("before_char", None, 0), ("after_char", None, 1), (0, None, 1), ("", None, 1), ("after_char", 4, 4)])
def test_cc_position_comes_from_extensions_else_the_v2_name(raw_position, ext_position, expect):
    raw = {"keys": [], "content": "", "enabled": True, "position": raw_position,
           "extensions": {} if ext_position is None else {"position": ext_position}}
    assert load_data({"entries": [raw]}).entries[0].position == expect


FOREIGN = [
    # (format, document, expected ST fields of entry 0)
    ("novelai", {"lorebookVersion": 4, "entries": [
        {"text": "T", "displayName": "D", "keys": ["k"], "enabled": False, "forceActivation": True,
         "searchRange": 1000, "contextConfig": {"budgetPriority": 300, "prefix": ""}}]},
     {"key": ["k"], "content": "T", "comment": "D", "disable": True, "order": 300, "constant": True,
      "selective": False, "position": 0}),
    ("novelai_story", {"storyContainerVersion": 1, "metadata": {"title": "S"}, "content": {"lorebook": {
        "lorebookVersion": 1, "entries": [{"text": "T", "keys": ["k"]}]}}},
     {"key": ["k"], "content": "T", "order": 0, "disable": False}),
    ("agnai", {"kind": "memory", "name": "M", "entries": [
        {"name": "N", "entry": "E", "keywords": ["w"], "priority": 1, "weight": 9, "enabled": True}]},
     {"key": ["w"], "content": "E", "comment": "N", "order": 9, "disable": False, "selective": False,
      "position": 0}),
    ("risu", {"type": "risu", "ver": 1, "data": [
        {"key": "a, b ,", "secondkey": "c", "comment": "C", "content": "X", "alwaysActive": True,
         "selective": True, "insertorder": 5, "activationPercent": 0, "mode": "normal"}]},
     {"key": ["a", "b"], "keysecondary": ["c"], "comment": "C", "content": "X", "constant": True,
      "selective": True, "order": 5, "probability": 0, "useProbability": 0, "position": 0}),
    ("kobold", {"folders": {"F": [0]}, "entries": {"0": {
        "uid": 0, "title": "t", "key": ["k"], "keysecondary": [], "folder": "F", "constant": False,
        "content": "c", "comment": "", "selective": True, "wpp": {}}}},
     {"key": ["k"], "content": "c", "selective": True, "title": "t"}),
    ("entry_list", [{"key": "Ann, the Queen", "content": "c"}],
     {"key": ["Ann", "the Queen"], "content": "c"}),
    ("entry_list", [{"entry_id": "x", "title": "T", "keys": ["k"], "insertion_order": 3,
                     "activation_chance": 40, "enabled": False, "position": "char"}],
     {"key": ["k"], "comment": "T", "order": 3, "probability": 40, "disable": True, "position": 1}),
    ("sillytavern", {"entries": [{"uid": 3, "key": ["k"], "content": "c"}]}, {"uid": 3, "key": ["k"]}),
]


@pytest.mark.parametrize("fmt, doc, expect", FOREIGN, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(FOREIGN)])
def test_foreign_format_maps_its_fields_and_writes_itself_back_unchanged(fmt, doc, expect):
    assert detect_format(doc) == fmt
    book = load(json.dumps(doc).encode())
    e = book.entries[0]
    for k, v in expect.items():
        assert json_equal(e.fields[k], v), k
    data, report = convert(book)
    assert not report
    assert json_equal(data, doc)


def test_edited_foreign_entry_rewrites_only_the_changed_field():
    doc = {"type": "risu", "ver": 1, "data": [{"key": "a,b", "content": "X", "mystery": 1}]}
    book = load_data(doc)
    from dataclasses import replace
    from lorescan.model import entry_from_fields
    e = book.entries[0]
    new = entry_from_fields({**e.fields, "content": "Y"}, uid=e.uid)
    data, report = convert(replace(book, entries=(new,)))
    assert data["data"] == [{"key": "a,b", "content": "Y", "mystery": 1}]
    assert not report


def test_novelai_to_sillytavern_reports_every_unmapped_field():
    doc = FOREIGN[0][1]
    _, report = convert(load_data(doc), "sillytavern")
    lost = {(x.entry, x.field) for x in report}
    assert lost >= {(0, "searchRange"), (None, "lorebookVersion")}
    # an empty prefix is what NovelAI assumes when there is none: not a loss
    assert (0, "contextConfig.prefix") not in lost


def test_loss_reports_leave_out_default_values_and_values_that_come_back():
    book = load_data({"entries": {
        "0": {"uid": 0, "key": ["a"], "disable": False, "triggers": [], "sticky": 0, "delayUntilRecursion": False,
              "order": 100, "group": "", "characterFilter": {"isExclude": False, "names": [], "tags": []}},
        "1": {"uid": 1, "key": ["b"], "disable": True, "sticky": 2, "group": "g"}}})
    _, report = convert(book, "risu")
    assert report.fields_of(0) == set()
    assert report.fields_of(1) >= {"disable", "sticky", "group"}


def test_card_fields_sillytavern_keeps_elsewhere_are_not_losses():
    card = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "C", "character_book": {"entries": [
        {"id": 1, "keys": ["a"], "content": "x", "comment": "Alpha", "name": "Alpha", "use_regex": True,
         "enabled": True, "insertion_order": 10, "extensions": {}},
        {"id": 2, "keys": ["b"], "content": "y", "comment": "Beta", "name": "Other name", "use_regex": True,
         "enabled": True, "insertion_order": 10, "priority": 3, "extensions": {}}]}}}
    _, report = convert(load_data(card), "sillytavern")
    assert report.fields_of(1) == set()
    assert report.fields_of(2) == {"name", "priority"}


def test_loss_report_render_groups_by_field_with_a_summary_first():
    book = load_data({"entries": {str(i): {"uid": i, "key": ["k"], "addMemo": True, "group": "g" if i == 0 else ""}
                                  for i in range(12)}})
    _, report = convert(book, "agnai")
    lines = report.render().splitlines()
    assert lines[0] == "sillytavern -> agnai: 13 values in 2 fields not carried over (12 entries)"
    assert lines[1].startswith("  addMemo: ") and lines[1].endswith("[12 entries: 0, 1, 2, 3, 4, 5, 6, 7, and 4 more]")
    assert lines[2].startswith("  group: ") and lines[2].endswith("[1 entry: 0]")
    assert len(report.render(verbose=True).splitlines()) == 1 + 13


def test_st_to_ccv3_reports_character_filter_and_add_memo():
    book = load_data({"entries": {"0": {"uid": 0, "key": ["a"], "addMemo": True,
                                        "characterFilter": {"isExclude": True, "names": ["Bob"], "tags": []}}}})
    data, report = convert(book, "ccv3")
    assert report.fields_of(0) == {"addMemo", "characterFilter"}
    assert data["spec"] == "chara_card_v3" and data["data"]["character_book"]["entries"][0]["keys"] == ["a"]


def test_st_to_png_and_charx_make_loadable_cards():
    book = load_data({"entries": {"0": {"uid": 0, "key": ["a"], "content": "c"}}})
    for to in ("png", "charx", "lorebook_v3"):
        data, _ = convert(book, to)
        back = load(data if isinstance(data, bytes) else json.dumps(data).encode())
        assert back.entries[0].key == ("a",) and back.entries[0].content == "c"


@pytest.mark.parametrize("data, field", [
    (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", b"x")[:-1], None),
    (png_with(chunk(b"zTXt", b"ccv3\0\0" + zlib.compress(b"A" * (33 * 1024 * 1024)))), "ccv3"),
    (json.dumps({"entries": {"0": {"uid": 0, "key": "notalist"}}}).encode(), "key"),
    (json.dumps({"entries": [{"keys": 5, "enabled": True}]}).encode(), "keys"),
    (b"[" * 5000 + b"]" * 5000, None),
    (_zip({"../card.json": b"{}"}), None),
    (b'{"entries": {"0": {"uid": 0, "order": NaN}}}', None),
])
def test_malformed_input_raises_a_located_lorebook_error(data, field):
    with pytest.raises(LorebookError) as info:
        load(data, source="bad.bin")
    assert info.value.source.startswith("bad.bin")
    if field:
        assert info.value.field == field


def test_main_convert_writes_output_and_prints_the_report(tmp_path, capsys):
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["a"], "addMemo": True}}}))
    out = tmp_path / "out.json"
    assert main_convert([str(src), str(out), "--to", "ccv3"]) == 0
    assert "addMemo" in capsys.readouterr().out
    assert load(out).entries[0].key == ("a",)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main_convert([str(bad), str(tmp_path / "other.json"), "--to", "st"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err


def test_comma_separated_keys_are_trimmed_with_javascript_whitespace():
    # JS trim removes U+FEFF and keeps U+001C-U+001F; Python's str.strip does the opposite.
    from lorescan.formats._listbook import split_keys
    rule = split_keys("key", "keys")
    assert rule.read({"keys": "\ufeffdragon , \x1cwyrm\x1c,  "}, None) == ["dragon", "\x1cwyrm\x1c"]
