"""formats._safety.check_depth: JSON nested deeper than the limit is refused, up to it is read."""
from __future__ import annotations

import pytest

from lorescan.errors import FormatError
from lorescan.formats._safety import check_depth


def _nested(depth: int, kind: str) -> object:
    value: object = 1
    for i in range(depth):
        value = [value] if kind == "list" or (kind == "mixed" and i % 2) else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
def test_the_limit_is_the_deepest_nesting_read(kind):
    check_depth(_nested(8, kind), limit=8, source="s.json")
    with pytest.raises(FormatError, match=r"^s\.json: JSON nested deeper than 8 levels$"):
        check_depth(_nested(9, kind), limit=8, source="s.json")


def test_a_deep_branch_beside_shallow_ones_is_found_and_scalars_have_no_depth():
    wide = {"entries": {str(i): {"key": ["a"], "n": i} for i in range(500)}}
    check_depth(wide, limit=4, source="w.json")
    wide["entries"]["250"]["key"].append(_nested(3, "mixed"))
    with pytest.raises(FormatError):
        check_depth(wide, limit=6, source="w.json")
    check_depth(wide, limit=7, source="w.json")
    check_depth("text", limit=0, source="w.json")
    with pytest.raises(FormatError):
        check_depth([], limit=0, source="w.json")


def test_containers_of_other_types_count_as_deep_as_plain_ones():
    # not what a JSON parser makes, but what a caller may hand in: a dict or list subclass
    # beside a value of another type still counts a level (the per-item path, not the C one)
    from collections import OrderedDict, UserString
    value = {"a": [UserString("x"), OrderedDict(b=[[1]])], "c": (1, 2)}
    check_depth(value, limit=5, source="o.json")
    with pytest.raises(FormatError):
        check_depth(value, limit=4, source="o.json")
