"""Fuzzing the readers: mutated JSON, PNG and zip input only ever raises LorebookError."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lorescan.errors import LorebookError
from lorescan.formats import Limits, convert, load, load_data

from tests.formats.test_formats_mapping import CC_ENTRY, FOREIGN, _itxt, _text, _zip, _ztxt, card_with, png_with

SMALL = Limits(max_file_bytes=1 << 20, max_inflated_bytes=1 << 16, max_zip_members=50,
               max_zip_total_bytes=1 << 20, max_json_depth=64, max_png_chunks=200)
JSON_SEEDS = [json.dumps(doc).encode() for _, doc, _ in FOREIGN] + [
    json.dumps(card_with([CC_ENTRY])).encode(),
    json.dumps({"spec": "lorebook_v3", "data": {"entries": [CC_ENTRY]}}).encode()]
PNG_SEEDS = [png_with(_text("chara", card_with([CC_ENTRY]))), png_with(_ztxt("ccv3", card_with([CC_ENTRY]))),
             png_with(_itxt("ccv3", card_with([CC_ENTRY]), True))]
ZIP_SEEDS = [_zip({"card.json": json.dumps(card_with([CC_ENTRY])).encode(), "x/y.bin": b"abc" * 50})]

mutation = st.tuples(st.sampled_from(["flip", "insert", "delete", "truncate", "dup"]),
                     st.integers(0, 1 << 16), st.integers(0, 255))


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op, pos, val in ops:
        if not buf:
            break
        i = pos % len(buf)
        if op == "flip":
            buf[i] ^= val or 1
        elif op == "insert":
            buf[i:i] = bytes([val])
        elif op == "delete":
            del buf[i:i + 1 + val % 8]
        elif op == "truncate":
            del buf[i:]
        else:
            buf[i:i] = buf[i:i + val]
    return bytes(buf)


def check(data: bytes) -> None:
    try:
        book = load(data, source="fuzz", limits=SMALL)
    except LorebookError:
        return
    for to in (None, "sillytavern", "ccv3"):
        try:
            out, losses = convert(book, to)
        except LorebookError:
            continue
        if to is None:            # its own format keeps every field: nothing may be reported lost
            assert not losses, (book.format, losses[:3])


FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(seed=st.sampled_from(JSON_SEEDS), ops=st.lists(mutation, min_size=1, max_size=6))
def test_mutated_json_only_raises_lorebook_error(seed, ops):
    check(mutate(seed, ops))


@FUZZ
@given(seed=st.sampled_from(PNG_SEEDS), ops=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_png_only_raises_lorebook_error(seed, ops):
    check(mutate(seed, ops))


@FUZZ
@given(seed=st.sampled_from(ZIP_SEEDS), ops=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_zip_only_raises_lorebook_error(seed, ops):
    check(mutate(seed, ops))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=20)
field_names = st.sampled_from(sorted({k for _, doc, exp in FOREIGN for k in exp} | set(CC_ENTRY)
                                     | set(CC_ENTRY["extensions"]) | {"contextConfig", "data", "entries"}))


@FUZZ
@given(seed=st.sampled_from(range(len(FOREIGN) + 1)),
       patch=st.dictionaries(field_names, json_values, min_size=1, max_size=4))
def test_entries_with_ill_typed_fields_only_raise_lorebook_error(seed, patch):
    if seed == len(FOREIGN):
        doc = card_with([{**CC_ENTRY, **patch}])
    else:
        doc = json.loads(json.dumps(FOREIGN[seed][1]))
        holder = doc if isinstance(doc, list) else (doc.get("entries") or doc.get("data")
                                                   or doc.get("content", {}).get("lorebook", {}).get("entries"))
        first = holder[0] if isinstance(holder, list) else next(iter(holder.values()))
        first.update(patch)
    try:
        book = load_data(doc, source="fuzz")
        convert(book)
        convert(book, "ccv3")
        convert(book, "sillytavern")
    except LorebookError:
        pass


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\{}[]/\n\u00e9\U0001f600', max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(alphabet='k"\\{[]}', max_size=4), inner, max_size=4),
    max_leaves=30)


def _containers(value) -> int:
    stack, n = [value], 0
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list)):
            n += 1
            stack.extend(v.values() if isinstance(v, dict) else v)
    return n


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES, st.sampled_from([None, 1]), st.booleans())
def test_the_container_count_before_parsing_is_the_parsed_value_s(value, indent, ascii_only):
    from lorescan.formats._safety import count_containers
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert count_containers(text) == _containers(json.loads(text))
