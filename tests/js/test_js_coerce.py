"""JavaScript conversions of JSON values (lorescan.js.coerce), checked against what JS gives."""
from __future__ import annotations

import math

import pytest

from lorescan.js.coerce import (js_get, js_is_finite, js_length, js_parse_float, js_parse_int, js_string,
                                js_to_number, utf16_sort_key)


@pytest.mark.parametrize("value, want", [
    (None, "null"), (True, "true"), (False, "false"), (5, "5"), (5.0, "5"), (2.5, "2.5"), (-0.0, "0"),
    (1e21, "1e+21"), (1e-7, "1e-7"), (0.000001, "0.000001"), (123456789012345680000, "123456789012345680000"),
    ([1, [2, 3], None, "x"], "1,2,3,,x"), ([], ""), ({"a": 1}, "[object Object]"), ("as is", "as is"),
])
def test_string_of_a_json_value(value, want):
    assert js_string(value) == want


@pytest.mark.parametrize("value, want", [
    (None, 0), (True, 1), (False, 0), ("", 0), ("  \u00a0 ", 0), (" 12 ", 12), ("1e3", 1000), (".5", 0.5),
    ("5.", 5), ("+5", 5), ("-2.5", -2.5), ("0x1A", 26), ("0b101", 5), ("0o17", 15), ("Infinity", math.inf),
    ("-Infinity", -math.inf), ([], 0), ([7], 7), (["8"], 8), (3, 3),
])
def test_number_of_a_json_value(value, want):
    assert js_to_number(value) == want


@pytest.mark.parametrize("value", ["1_000", "-0x10", "12px", "abc", "infinity", "1e", [1, 2], {}, "0x",
                                   "\u0661\u0662", "\uff11"])
def test_number_of_junk_is_nan(value):
    assert math.isnan(js_to_number(value))


@pytest.mark.parametrize("value, want", [
    ("3.9", 3), (" 42abc", 42), (2.9, 2), (-4, -4), (1e21, 1), (0.0000005, 5), ("0x10", 0), ("\ufeff7", 7),
    ("+8", 8), ([3], 3),
])
def test_parse_int(value, want):
    assert js_parse_int(value) == want


@pytest.mark.parametrize("value", [None, True, "abc", "", "-", {}, "\u00857", "\u0663"])
def test_parse_int_of_junk_is_nan(value):
    assert math.isnan(js_parse_int(value))


def test_parse_int_keeps_negative_zero():
    assert math.copysign(1, js_parse_int("-0")) == -1


@pytest.mark.parametrize("value, want", [
    ("40%", 40), (".5e1x", 5), ("1e", 1), ("  3.25 apples", 3.25), ("-Infinityx", -math.inf), ("1e-2", 0.01),
])
def test_parse_float(value, want):
    assert js_parse_float(value) == want


def test_is_finite_converts_first():
    assert js_is_finite(None) and js_is_finite("3") and js_is_finite("") and js_is_finite([4])
    assert not js_is_finite("abc") and not js_is_finite({}) and not js_is_finite("Infinity")


def test_property_reads_follow_js():
    assert js_length("a\U0001F600") == 3                        # UTF-16 code units
    assert js_get("a\U0001F600", 1) == "\ud83d"
    assert js_get(["x", "y"], 1) == "y" and js_get(["x"], 1) is None and js_get(["x"], "01") is None
    assert js_get({"0": "zero", "1.5": "frac"}, 0) == "zero" and js_get({"1.5": "frac"}, 1.5) == "frac"
    assert js_get([1, 2], "length") == 2 and js_get({"length": 9}, "length") == 9 and js_get(5, "x") is None


def test_sort_key_is_utf16_order():
    # U+FF5E sorts before U+1F600 by code point, after it in UTF-16 (JS's default sort)
    assert sorted(["\U0001F600", "\uff5e"], key=utf16_sort_key) == ["\U0001F600", "\uff5e"]
