"""The compiled form's entry records (st/lsc.py) against the way they were written before the
speed-ups: the same bytes for every entry (the record's form, "d", "f" or "a", and its JSON,
whether msgspec or json.dumps wrote it), and each record builds its entry back."""
from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from lorescan.errors import LorebookError
from lorescan.model import Entry, FrozenMap, entry_from_fields
from lorescan.st import lsc


# -- the writer as it was (the oracle): recursive checks, every attribute one by one, json.dumps --

def _old_json_exact(value):
    t = type(value)
    if t is dict or t is FrozenMap or t is lsc.EntryFields:
        return all(type(k) is str and _old_json_exact(v) for k, v in value.items())
    if t is list:
        return all(_old_json_exact(v) for v in value)
    return t in lsc._JSON_SCALARS


def _old_same_entry(rebuilt, entry):
    return (list(rebuilt.fields) == list(entry.fields) and rebuilt.filled == entry.filled
            and all(lsc._same_attr(getattr(rebuilt, n), getattr(entry, n)) for n in lsc._ATTRS))


def _old_record(entry: Entry, source: str) -> bytes:
    fields = entry.fields
    try:
        if _old_json_exact(fields):
            if entry.filled and type(fields) is lsc.EntryFields:
                own = fields.own
                rebuilt = entry_from_fields(own, source=source, uid=entry.uid)
                if _old_same_entry(rebuilt, entry):
                    return lsc._dumps(["d", entry.uid, own])
            rebuilt = entry_from_fields(dict(fields), source=source, fill_defaults=False, uid=entry.uid,
                                        filled=entry.filled)
            if _old_same_entry(rebuilt, entry):
                return lsc._dumps(["f", entry.uid, fields, sorted(entry.filled)])
    except (LorebookError, TypeError, ValueError):
        pass
    return lsc._dumps(["a", lsc.encode_value({n: getattr(entry, n) for n in lsc._ENTRY_FIELDS})])


# -- entries of every shape ------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)       # lone surrogates too
_SCALAR = (st.none() | st.booleans() | st.integers(min_value=-2**60, max_value=2**60) | _TEXT
           | st.floats(allow_nan=False, allow_infinity=False, width=32))
_VALUE = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner)
                      | st.dictionaries(_TEXT, inner, max_size=3)
                      | st.dictionaries(_TEXT, inner, max_size=2).map(FrozenMap), max_leaves=8)
_KNOWN = st.fixed_dictionaries({}, optional={
    "key": st.lists(_TEXT, max_size=3), "keysecondary": st.lists(_TEXT, max_size=2), "content": _TEXT,
    "comment": _TEXT, "constant": st.booleans(), "order": st.integers(0, 1000) | st.floats(0, 10, width=32),
    "position": st.integers(0, 7), "sticky": st.none() | st.integers(0, 5), "probability": st.integers(0, 100),
    "characterFilter": st.none() | st.fixed_dictionaries({"isExclude": st.booleans(), "names": st.lists(_TEXT, max_size=2),
                                                          "tags": st.just([])}),
    "displayIndex": st.integers(0, 50), "scanDepth": st.none() | st.integers(0, 10),
})


@st.composite
def _entries(draw):
    fields = dict(draw(_KNOWN))
    fields.update(draw(st.dictionaries(st.sampled_from(["extra", "x_ext", "data", "name"]), _VALUE, max_size=2)))
    uid = draw(st.integers(0, 10**6) | st.sampled_from(["a", "uid-7"]))
    if draw(st.booleans()):
        fields["uid"] = uid
    try:
        return entry_from_fields(fields, source="t.json", fill_defaults=draw(st.booleans()), uid=uid)
    except LorebookError:
        return entry_from_fields({"uid": 1, "content": "x"}, source="t.json", uid=1)


@given(_entries())
@settings(max_examples=400, deadline=None)
def test_an_entry_record_is_the_same_bytes_as_before_and_builds_the_entry_back(entry):
    record = lsc._entry_record(entry, "t.json")
    assert record == _old_record(entry, "t.json")
    back = lsc._entry_from_record(json.loads(record.decode("utf-8", "surrogatepass")), "t.json")
    assert _old_same_entry(back, entry) if record[2:3] != b"a" else back.uid == entry.uid


@given(_VALUE)
@settings(max_examples=400, deadline=None)
def test_the_kind_of_a_value_says_what_json_gives_back_and_which_writer_may_write_it(value):
    kind = lsc._json_kind(value)
    assert (kind > 0) == _old_json_exact(value)
    record = ["f", 1, value, []]
    assert lsc._record_bytes(record, kind) == lsc._dumps(record)


def test_floats_lone_surrogates_and_nested_frozen_maps_are_written_by_json_dumps():
    assert lsc._json_kind({"a": 1.5}) == 1 and lsc._json_kind({"a": [1e16]}) == 1
    assert lsc._json_kind({"a": FrozenMap({"b": 1})}) == 1
    assert lsc._json_kind({"a": (1,)}) == 0 and lsc._json_kind({1: "a"}) == 0
    assert lsc._json_kind({"a": ["x", {"b": None, "c": True, "d": 2**70}]}) == 2
    for value in ({"a": 1e16}, {"a": "\ud800"}, {"a": math.pi}):
        record = ["f", 1, value, []]
        assert lsc._record_bytes(record, lsc._json_kind(value)) == lsc._dumps(record)
    entry = entry_from_fields({"content": "a\udfffb", "key": ["k"]}, uid=3)
    assert lsc._entry_record(entry, "t.json") == _old_record(entry, "t.json")
