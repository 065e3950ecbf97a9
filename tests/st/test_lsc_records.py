"""The compiled form's entry records (st/lsc.py) against the way they were written before the
speed-ups: the same bytes for every entry (the record's form, "d", "f" or "a", and its JSON,
whether msgspec or json.dumps wrote it), and each record builds its entry back."""
from __future__ import annotations

import json
import math

import pytest
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


# -- the reader's fast path: entry_from_stored and the record decoder against the full path ------

def _old_typed(fields, uid, own, layer, names, data):
    """entry_from_fields' typed attributes as they were read before the fast path (the oracle):
    one js_truthy call per flag, Entry's own __init__."""
    from lorescan import model as m
    g = data.get
    key, keysecondary, dur = g("key"), g("keysecondary"), g("delayUntilRecursion")
    if dur is True:
        dur_level = 1
    elif isinstance(dur, (int, float)) and not isinstance(dur, bool) and dur > 0:
        dur_level = dur
    else:
        dur_level = 0
    cf = g("characterFilter") or {}
    weight, order = g("groupWeight"), g("order")
    cf_names = tuple(str(x) for x in cf.get("names") or ())
    cf_tags = tuple(str(x) for x in cf.get("tags") or ())
    cf_exclude = m.js_truthy(cf.get("isExclude"))
    return Entry(
        uid=uid, fields=m.EntryFields(own, layer, uid), filled=names,
        key=tuple(key) if isinstance(key, list) else (),
        keysecondary=tuple(keysecondary) if isinstance(keysecondary, list) else (),
        content=g("content") or "", comment=g("comment") or "",
        constant=m.js_truthy(g("constant")), disable=m._js_loose_true(g("disable")),
        selective=m.js_truthy(g("selective")), selective_logic=g("selectiveLogic"),
        order=order if isinstance(order, (int, float)) and not isinstance(order, bool) else math.nan,
        position=g("position"), depth=g("depth"), role=g("role"), outlet_name=g("outletName") or "",
        ignore_budget=m.js_truthy(g("ignoreBudget")), exclude_recursion=m.js_truthy(g("excludeRecursion")),
        prevent_recursion=m.js_truthy(g("preventRecursion")), delay_until_recursion=dur_level,
        match_sources=tuple(m.js_truthy(g(f)) for f in m._MATCH_FLAGS),
        probability=g("probability"), use_probability=m.js_truthy(g("useProbability")),
        group=g("group") or "", group_override=m.js_truthy(g("groupOverride")),
        group_weight=100 if weight is None else weight, use_group_scoring=m._tri(g("useGroupScoring")),
        scan_depth=g("scanDepth"), case_sensitive=m._tri(g("caseSensitive")),
        match_whole_words=m._tri(g("matchWholeWords")),
        sticky=g("sticky"), cooldown=g("cooldown"), delay=g("delay"), triggers=tuple(g("triggers") or ()),
        character_filter=(cf_exclude, cf_names, cf_tags))


def _same_attrs(a: Entry, b: Entry) -> bool:
    return (list(a.fields.items()) == list(b.fields.items()) and a.filled == b.filled
            and all(lsc._same(getattr(a, n), getattr(b, n)) for n in lsc._ATTRS if n != "fields"))


# every modelled field, each value of a type it allows or not: ints past 2**53, floats (NaN and
# infinities too), bools, nulls, strings, lists of strings or of anything, dicts
_ANY = (st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.sampled_from([2**53, -2**53, 2**53 + 1, 0, 1])
        | st.floats(allow_nan=True, allow_infinity=True) | _TEXT | st.sampled_from(["", "1", " 1 ", "0"])
        | st.lists(_TEXT, max_size=3) | st.lists(st.none() | st.integers() | _TEXT | st.booleans(), max_size=3)
        | st.dictionaries(st.sampled_from(["names", "tags", "isExclude"]),
                          st.none() | st.booleans() | st.integers(0, 3)
                          | st.lists(_TEXT | st.integers(0, 9) | st.none() | st.booleans(), max_size=2), max_size=3))
_NAMES = sorted(__import__("lorescan.model", fromlist=["_FIELD_TYPES"])._FIELD_TYPES) + ["uid", "displayIndex", "x"]


@st.composite
def _stored(draw):
    """A decoded record's fields (plain dict, any order, mostly well-typed) and its filled names."""
    fields = {}
    for name in draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=len(_NAMES))):
        default = dict(__import__("lorescan.model", fromlist=["ST_ENTRY_DEFAULTS"]).ST_ENTRY_DEFAULTS).get(name, 0)
        fields[name] = draw(st.just(default) | _ANY) if name != "uid" else draw(st.integers(0, 99) | _ANY)
    filled = draw(st.just([]) | st.lists(st.sampled_from(list(fields) or ["key"]), unique=True, max_size=4))
    return fields, filled


@given(_stored(), st.integers(0, 99) | st.sampled_from(["u", True, None, ""]))
@settings(max_examples=1500, deadline=None)
def test_an_entry_from_stored_fields_is_the_full_paths_entry_or_its_error(stored, uid):
    from lorescan.model import _check_fields, _fast_checked, entry_from_stored
    fields, filled = stored
    try:
        want = entry_from_fields(json.loads(json.dumps(fields)), source="b.json", fill_defaults=False, uid=uid,
                                 filled=filled)
    except LorebookError as exc:
        want = exc
    copy = json.loads(json.dumps(fields))
    if _fast_checked(copy):                    # what it vouches for, the full checks accept
        _check_fields(copy, source="b.json", uid=uid)
    try:
        got = entry_from_stored(copy, source="b.json", uid=uid, filled=filled)
    except LorebookError as exc:
        assert isinstance(want, LorebookError) and str(exc) == str(want)
        assert (exc.entry, exc.field) == (want.entry, want.field)
        return
    assert isinstance(want, Entry), want
    assert _same_attrs(got, want)
    names, own = got.filled, dict(got.fields._dict_items()) if hasattr(got.fields, "_dict_items") else None
    oracle = _old_typed(fields, got.uid, got.fields.own, got.fields._layer, names, json.loads(json.dumps(fields)))
    assert _same_attrs(got, oracle)
    assert got.to_dict() == want.to_dict() and got.to_dict(include_filled=True) == want.to_dict(include_filled=True)


def test_the_fast_checks_leave_every_ill_typed_field_to_the_full_checks_and_their_error():
    from lorescan.model import entry_from_stored
    good = {"uid": 4, "key": ["a"], "keysecondary": [], "content": "c", "order": 100, "depth": 4,
            "characterFilter": {"isExclude": False, "names": [], "tags": []}, "triggers": []}
    assert entry_from_stored(dict(good), source="b.json", uid=4, filled=[]).key == ("a",)
    for name, value, where in [("order", "x", "order"), ("order", 2**53 + 1, "order"), ("depth", -2**60, "depth"),
                               ("key", [1], "key[0]"), ("key", "a", "key"), ("keysecondary", None, "keysecondary"),
                               ("triggers", ["x", 2], "triggers[1]"), ("content", 5, "content"),
                               ("characterFilter", {"names": [None]}, "characterFilter.names"),
                               ("characterFilter", {"tags": "t"}, "characterFilter.tags"),
                               ("position", float("nan"), "position"), ("constant", [], "constant"),
                               ("uid", True, "uid"), ("uid", "", "uid")]:
        with pytest.raises(LorebookError) as caught:
            entry_from_stored({**good, name: value}, source="b.json", uid=4, filled=[])
        assert caught.value.source == "b.json" and caught.value.field == where, (name, value, caught.value)


def _same_json(a, b):
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if type(a) is list:
        return len(a) == len(b) and all(map(_same_json, a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(_same_json(v, b[k]) for k, v in a.items())
    return a == b


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.integers(-2**70, 2**70) | st.floats()
                     | st.text(st.characters(blacklist_categories=()), max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                     max_leaves=10)


@given(_JSON, st.booleans())
@settings(max_examples=800, deadline=None)
def test_a_record_decodes_to_what_json_loads_reads(value, ascii_only):
    data = lsc._dumps(value) if not ascii_only else json.dumps(value).encode()
    assert _same_json(lsc._decode_record(data), json.loads(data.decode("utf-8", "surrogatepass")))


def test_records_msgspec_refuses_are_read_by_json():
    for data in (b'[NaN,Infinity,-Infinity]', b'[1e400]', '["\ud800"]'.encode("utf-8", "surrogatepass"),
                 b'["\\udc00x"]', b'{"a":1,"a":[2]}', b'[123456789012345678901234567890123]', b'[-0.0, 5e-324]'):
        assert _same_json(lsc._decode_record(data), json.loads(data.decode("utf-8", "surrogatepass"))), data
    with pytest.raises(ValueError):
        lsc._decode_record(b"[1,")
