"""SillyTavern's entry fingerprint: JSON.stringify and cyrb53 agree with V8 (tests/data/sthash)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lorescan.js.sthash import cyrb53, entry_fingerprint, js_json_stringify, js_number_to_string

CASES = json.loads((Path(__file__).parent.parent / "data" / "sthash" / "v8_cases.json").read_text())["cases"]


def _units_to_str(units):
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")


def _decode(v):
    if isinstance(v, dict):
        if "$units" in v:
            return _units_to_str(v["$units"])
        if "$negzero" in v:
            return -0.0
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_stringify_and_hash_match_v8(case):
    value = _decode(case["value"])
    expected_json = _units_to_str(case["json_units"])
    assert js_json_stringify(value) == expected_json
    assert cyrb53(expected_json) == case["hash"]


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=1000, deadline=None)
def test_number_strings_parse_back_to_the_same_number(x):
    # JS Number#toString gives the shortest round-trip digits, like Python's repr.
    assert float(js_number_to_string(x)) == x


def test_the_fingerprint_puts_uid_and_world_first_and_decorators_last():
    fields = {"key": ["a"], "content": "@@activate\nhello", "uid": 7}
    h = entry_fingerprint(fields, uid=7, world="Lore", content="hello", decorators=["@@activate"])
    assert h == cyrb53('{"uid":7,"world":"Lore","key":["a"],"content":"hello","decorators":["@@activate"]}')


# -- the native cyrb53 and the plain stringify path against their references ------------------

from conftest import built  # noqa: E402

from lorescan.js import sthash  # noqa: E402

# any code point, lone surrogates included (what a Python str may hold)
_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=300)


@given(_ANY_TEXT, st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=500, deadline=None)
def test_the_native_cyrb53_equals_its_twin(text, seed):
    native = built("_sthash_c")
    assert native.cyrb53(text, seed) == sthash._cyrb53_py(text, seed)


@pytest.mark.parametrize("text", ["", "a", "é" * 70, "€x", "😀", "a\ud800b", "\udc00\U0010ffff\x00"])
def test_the_native_cyrb53_reads_every_string_width(text):
    native = built("_sthash_c")
    assert native.cyrb53(text) == sthash._cyrb53_py(text) == cyrb53(text)
    assert cyrb53(text, -3) == sthash._cyrb53_py(text, -3)      # any int seed: its low 32 bits


def test_the_selected_cyrb53_is_the_native_one_where_built():
    native = built("_sthash_c")
    import os
    wanted = "python" if os.environ.get("LORESCAN_PURE_PYTHON") == "1" else "native"
    assert sthash.HASH_BACKEND == wanted
    assert (sthash._cyrb53 is native.cyrb53) == (wanted == "native")


_SCALARS = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
            | st.floats(allow_nan=True, allow_infinity=True) | _ANY_TEXT)
_JSONISH = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                        | st.dictionaries(_ANY_TEXT | st.integers(), inner, max_size=4), max_leaves=25)


@given(_JSONISH)
@settings(max_examples=1000, deadline=None)
def test_the_plain_stringify_path_equals_the_general_one(value):
    assert js_json_stringify(value) == sthash._stringify(value)


def test_deep_values_take_the_general_path():
    value: object = "x"
    for _ in range(5000):
        value = [value]
    assert not sthash._plain(value)
    assert js_json_stringify(value) == "[" * 5000 + '"x"' + "]" * 5000
    assert js_json_stringify({"a": 1.0, "b": -0.0, "c": 1e21, "d": 10**21}) == '{"a":1,"b":0,"c":1e+21,"d":1e+21}'
