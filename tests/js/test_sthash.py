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
