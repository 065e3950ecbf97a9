"""entry_from_fields' field checks: every ill-typed or absurd value is a located LorebookError,
whichever path (the quick one for common values, or the full checks) it takes."""
from __future__ import annotations

import pytest

from lorescan.errors import LorebookError
from lorescan.model import entry_from_fields


class Text(str):
    pass


@pytest.mark.parametrize("field, value, problem", [
    ("order", True, "expected float/int, got bool True"),
    ("order", float("inf"), "number must be finite, got inf"),
    ("order", float("nan"), "number must be finite, got nan"),
    ("depth", 2 ** 53 + 1, f"number out of range: {2 ** 53 + 1}"),
    ("depth", -(2 ** 53) - 1, f"number out of range: {-(2 ** 53) - 1}"),
    ("probability", 1e300, "number out of range: 1e+300"),
    ("key", None, "must not be null"),
    ("key", "dragon", "expected list, got str 'dragon'"),
    ("content", 5, "expected str, got int 5"),
    ("content", ["x"], "expected str, got list ['x']"),
    ("constant", "yes", "expected bool/float/int, got str 'yes'"),
    ("characterFilter", [], "expected dict, got list []"),
    ("group", True, "expected str, got bool True"),
])
def test_a_bad_value_names_the_entry_and_the_field(field, value, problem):
    with pytest.raises(LorebookError) as exc:
        entry_from_fields({"uid": 4, "key": ["k"], field: value}, source="book.json")
    assert str(exc.value) == f"book.json, entry 4, field '{field}': {problem}"


@pytest.mark.parametrize("field, value", [
    ("order", 2 ** 53), ("order", -(2 ** 53)), ("order", 100.5), ("depth", 0), ("disable", "true"),
    ("disable", True), ("constant", 1), ("constant", 0.0), ("content", Text("a str subclass")),
    ("comment", None), ("characterFilter", {"isExclude": False, "names": [], "tags": []}),
    ("probability", float(2 ** 53)),
])
def test_a_good_value_is_read(field, value):
    entry = entry_from_fields({"uid": 4, "key": ["k"], field: value}, source="book.json")
    assert entry.fields[field] == value


def test_the_first_bad_field_in_the_model_order_is_the_one_named():
    with pytest.raises(LorebookError) as exc:
        entry_from_fields({"uid": 1, "order": "x", "key": "k"}, source="b.json")
    assert exc.value.field == "key"
