"""Entry fields: only the file's own fields are stored; the defaults a reader fills in are read
through a shared layer, and the whole mapping reads the same everywhere (issue 8, memory)."""
from __future__ import annotations

import copy
import json
import pickle
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import load
from lorescan.errors import LorebookError
from lorescan.st.compiled import compile_book, restore_compiled
from lorescan.model import ST_ENTRY_DEFAULTS, EntryFields, FrozenMap, Lorebook, entry_from_fields

RAW = {"uid": 7, "key": ["Ash", "ash tree"], "content": "An old tree.", "zzUnknown": {"a": [1, 2]},
       "characterFilter": None, "order": 5}


def expected_fields(raw: dict, uid: object) -> dict:
    """What the reader filled in before (the defaults copied into each entry), built independently."""
    out = dict(raw)
    if out.get("characterFilter", 0) is None:
        out["characterFilter"] = {"isExclude": False, "names": [], "tags": []}
    for name, default in ST_ENTRY_DEFAULTS:
        if name not in out:
            out[name] = uid if name == "displayIndex" else copy.deepcopy(default)
    return out


def test_fields_read_as_the_whole_mapping():
    e = entry_from_fields(RAW)
    want = expected_fields(RAW, 7)
    f = e.fields
    assert isinstance(f, EntryFields) and isinstance(f, dict)
    assert list(f) == list(want) and len(f) == len(want)
    assert list(f.keys()) == list(want) and list(f.values()) == list(want.values())
    assert list(f.items()) == list(want.items())
    assert f == want and want == f and not (f != want) and f != {**want, "order": 6}
    assert dict(f) == want and list(dict(f)) == list(want)
    assert {**f} == want and list({**f}) == list(want)
    assert f.copy() == want and type(f.copy()) is dict
    assert f["displayIndex"] == 7 and f.get("probability") == 100 and f["zzUnknown"] == {"a": [1, 2]}
    assert "triggers" in f and "nope" not in f and f.get("nope", 3) == 3
    with pytest.raises(KeyError):
        f["nope"]
    assert json.loads(json.dumps(f)) == want
    assert json.dumps(f) == json.dumps(want) and json.dumps(f, indent=1) == json.dumps(want, indent=1)
    assert json.dumps(f, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert repr(f) == repr(want)
    assert list(reversed(f)) == list(reversed(list(want)))
    assert (f | {"x": 1}) == {**want, "x": 1} and ({"x": 1} | f) == {"x": 1, **want}
    assert set(f.keys()) - set(RAW) == e.filled


def test_only_the_files_fields_are_stored():
    e = entry_from_fields(RAW)
    own = {**RAW, "characterFilter": {"isExclude": False, "names": [], "tags": []}}
    assert e.fields.own == own and dict.__len__(e.fields) == len(RAW)
    assert e.to_dict() == own and list(e.to_dict()) == list(own)
    assert e.to_dict(include_filled=True) == expected_fields(RAW, 7)
    # a full copy of the fields takes several times the memory of what an entry keeps
    assert sys.getsizeof(e.fields) * 3 < sys.getsizeof(FrozenMap(e.fields))
    other = entry_from_fields({**RAW, "uid": 8})
    assert other.fields._layer is e.fields._layer and other.filled is e.filled


def test_filled_values_handed_out_are_copies():
    a, b = entry_from_fields({"uid": 1}), entry_from_fields({"uid": 2})
    a.fields["triggers"].append("x")
    a.fields["characterFilter"]["names"].append("x")
    dict(a.fields)["keysecondary"].append("x")
    assert a.fields["triggers"] == [] and b.fields["triggers"] == []
    assert a.fields["characterFilter"] == {"isExclude": False, "names": [], "tags": []}
    assert b.to_dict(include_filled=True)["keysecondary"] == []
    with pytest.raises(TypeError):
        a.fields["order"] = 1                        # read-only, as every FrozenMap


def test_an_entry_without_fields_still_dumps_its_defaults():
    e = entry_from_fields({}, uid=5)
    want = expected_fields({}, 5)
    assert json.loads(json.dumps(e.fields)) == want and e.fields == want
    assert e.to_dict() == {} and e.filled == set(want)


def test_copies_and_pickles_keep_the_mapping_and_the_sharing():
    e = entry_from_fields(RAW)
    want = expected_fields(RAW, 7)
    for back in (pickle.loads(pickle.dumps(e.fields)), copy.deepcopy(e.fields)):
        assert type(back) is EntryFields and back == want and list(back) == list(want)
        assert dict.__len__(back) == len(RAW) and back._layer is e.fields._layer
    assert copy.copy(e.fields) is e.fields
    book = Lorebook(name="b", entries=(e,))
    again = pickle.loads(pickle.dumps(book)).entries[0]
    assert again.fields == want and again.filled == e.filled and again.to_dict() == e.to_dict()


def test_compact_form_rebuilds_the_layer():
    book = Lorebook(name="b", entries=(entry_from_fields(RAW), entry_from_fields({"uid": 3, "key": ["x"]})))
    cb = restore_compiled(compile_book(book).to_lsc())
    for got, e in zip(cb.entries, book.entries):
        assert got.fields == e.fields and list(got.fields) == list(e.fields) and got.filled == e.filled
        assert dict.__len__(got.fields) == dict.__len__(e.fields)        # the defaults are not stored again


def test_stored_defaults_that_differ_stay_stored():
    full = expected_fields({"uid": 4, "key": ["k"]}, 4)
    full["probability"] = 50                       # said to be filled, but not the default value
    e = entry_from_fields(full, fill_defaults=False, filled=[n for n in full if n not in ("uid", "key")])
    assert e.fields == full and list(e.fields) == list(full) and e.probability == 50
    assert e.to_dict() == {"uid": 4, "key": ["k"]}


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from([n for n, _ in ST_ENTRY_DEFAULTS if n not in ("characterFilter",)]
                                       + ["x", "y"]),
                       st.one_of(st.none(), st.booleans(), st.integers(-5, 5)), max_size=8))
def test_fields_match_the_filled_mapping(raw):
    raw = {k: v for k, v in raw.items() if k not in ("key", "keysecondary", "triggers", "comment", "content",
                                                      "outletName", "group", "automationId", "role",
                                                      "displayIndex")}
    try:
        e = entry_from_fields(raw, uid=9)
    except LorebookError:                          # ill-typed values: the reader's business, not this test's
        return
    want = expected_fields(raw, 9)
    assert list(e.fields.items()) == list(want.items()) and json.dumps(e.fields) == json.dumps(want)


def test_a_loaded_world_writes_back_what_it_read(tmp_path):
    from lorescan.formats.sillytavern import write_world
    data = {"entries": {"0": RAW, "1": {"uid": 1, "key": []}}, "name": "w"}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    book = load(str(path))
    assert write_world(book) == data
    full = write_world(book, include_filled=True)["entries"]
    assert full["0"] == {**expected_fields(RAW, 7), "characterFilter": None}
