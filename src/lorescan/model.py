"""The data model: entries and books (docs/sillytavern-mode.md#st-entries); SillyTavern mode's settings
live in :mod:`lorescan.st.settings`, the matching rules in :mod:`lorescan.match.options`.

An :class:`Entry` keeps every field exactly as read (``fields``, in file order, unknown
fields included) and exposes the values the engine needs as typed attributes computed
once, with SillyTavern's JavaScript truthiness rules (docs/sillytavern-mode.md#st-entries). Writers use ``fields``
(minus ``filled``, the defaults a reader added), so nothing is lost on a round trip.
"""
from __future__ import annotations

import dataclasses
import math
import operator
from collections import deque
from dataclasses import dataclass, field
from collections.abc import ItemsView, KeysView, ValuesView
from enum import IntEnum
from itertools import repeat
from types import MemberDescriptorType
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .errors import LorebookError
from .js.text import js_trim

__all__ = ["FrozenMap", "EntryFields", "ST_ENTRY_DEFAULTS", "Entry", "Lorebook", "js_truthy", "entry_from_fields", "Origin",
           "SelectiveLogic"]

# SillyTavern's new-entry template, in the order its editor writes the fields (docs/sillytavern-mode.md#st-entries).
# `uid` and `displayIndex` are filled from the entry's uid.
ST_ENTRY_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("key", []), ("keysecondary", []), ("comment", ""), ("content", ""), ("constant", False),
    ("vectorized", False), ("selective", True), ("selectiveLogic", 0), ("addMemo", False),
    ("order", 100), ("position", 0), ("disable", False), ("ignoreBudget", False),
    ("excludeRecursion", False), ("preventRecursion", False), ("matchPersonaDescription", False),
    ("matchCharacterDescription", False), ("matchCharacterPersonality", False),
    ("matchCharacterDepthPrompt", False), ("matchScenario", False), ("matchCreatorNotes", False),
    ("delayUntilRecursion", 0), ("probability", 100), ("useProbability", True), ("depth", 4),
    ("outletName", ""), ("group", ""), ("groupOverride", False), ("groupWeight", 100),
    ("scanDepth", None), ("caseSensitive", None), ("matchWholeWords", None),
    ("useGroupScoring", None), ("automationId", ""), ("role", 0), ("sticky", None),
    ("cooldown", None), ("delay", None), ("triggers", []), ("displayIndex", None),
    ("characterFilter", {"isExclude": False, "names": [], "tags": []}),
)


class SelectiveLogic(IntEnum):
    """An entry's ``selectiveLogic``: how its secondary keys combine (docs/sillytavern-mode.md#st-key-logic).

    The one vocabulary of SillyTavern mode, slot mode and the format conversions; the stored
    field stays the number (:attr:`Entry.selective_logic`).
    """

    AND_ANY = 0      # at least one secondary key matches
    NOT_ALL = 1      # not every secondary key matches
    NOT_ANY = 2      # no secondary key matches
    AND_ALL = 3      # every secondary key matches

    @property
    def words(self) -> str:
        """The name as the log and the docs write it: ``"AND ANY"``, ``"NOT ALL"`` ..."""
        return self.name.replace("_", " ")



class FrozenMap(dict):
    """A read-only dict: the stored fields of entries and books. Unlike
    ``types.MappingProxyType`` it pickles, so compiled books can go to worker processes."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("stored lorebook fields are read-only; build a new Entry/Lorebook instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenMap, (dict(self),))

    def __copy__(self) -> "FrozenMap":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenMap":
        import copy
        return FrozenMap(copy.deepcopy(dict(self), memo))


EMPTY_MAP = FrozenMap()        # the card fields of every entry that has none (immutable, so shared)
_ABSENT: Any = object()
_UID: Any = object()          # in a defaults layer: "the entry's uid" (displayIndex)
_dict_get = dict.get
_dict_contains = dict.__contains__
_dict_len = dict.__len__
_dict_iter = dict.__iter__
_dict_items = dict.items    # the stored part only (C iteration over the storage)


class _Defaults:
    """The defaults a reader filled in, shared by every entry that lacks the same fields:
    their names in the template's order and their values (``_UID``: the entry's uid).
    Immutable; list and object values are handed out as fresh copies (see ``EntryFields``)."""

    __slots__ = ("names", "order", "values")

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        pairs = [(k, _UID if k == "displayIndex" else v) for k, v in ST_ENTRY_DEFAULTS if k in names]
        self.order: tuple[str, ...] = tuple(k for k, _ in pairs)
        self.values: dict[str, Any] = dict(pairs)

    def value(self, name: str, uid: Any) -> Any:
        v = self.values[name]                  # KeyError: not a filled name
        if v is _UID:
            return uid
        if isinstance(v, (list, dict)):
            return _deep_copy_json(v)          # a caller may change what it was given; the layer stays
        return v


_NO_DEFAULTS = _Defaults(frozenset())
_LAYERS: dict[frozenset[str], _Defaults] = {}


def _defaults_for(names: frozenset[str]) -> _Defaults:
    """One layer per distinct set of filled names (a book's entries nearly always lack the
    same ones); capped like :func:`shared_names`, holding immutable values only."""
    if not names:
        return _NO_DEFAULTS
    layer = _LAYERS.get(names)
    if layer is None:
        if len(_LAYERS) >= 4096:
            _LAYERS.clear()
        layer = _LAYERS[names] = _Defaults(names)
    return layer


class EntryFields(FrozenMap):
    """An entry's stored fields (``Entry.fields``): the file's own fields, in file order, then the
    defaults the reader filled in (``Entry.filled``), in the template's order.

    Only the file's own fields are stored per entry; the defaults are read through from a layer
    shared by every entry that lacks the same fields (a 100k-entry book read from a minimal file
    held 40 default values per entry before, most of its memory). It reads as the complete
    mapping everywhere Python looks: indexing, ``get``, ``in``, ``len``, iteration, the
    ``keys``/``values``/``items`` views, ``==``, ``repr``, ``dict(x)``, ``{**x}`` and
    ``json.dumps`` (which reads a dict subclass's ``items()``; the stored part is never empty
    while defaults exist, so its empty-dict shortcut cannot drop them). Filled list and object
    values are fresh copies on every read, so changing one cannot reach other entries.
    Only C code that reads dict storage directly (``dict.items(x)``, ``PyDict_Next``) sees the
    file's own fields alone.
    """

    __slots__ = ("_layer", "_uid")

    def __init__(self, own: Any = (), layer: _Defaults = _NO_DEFAULTS, uid: Any = None) -> None:
        dict.__init__(self, own)
        self._layer = layer
        self._uid = uid

    @property
    def own(self) -> dict[str, Any]:
        """The fields the source itself had (a new plain dict, file order)."""
        return dict(_dict_items(self))

    def __missing__(self, key: str) -> Any:        # d[key] for a filled default
        if key in self._layer.names:
            return self._layer.value(key, self._uid)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        v = _dict_get(self, key, _ABSENT)
        if v is _ABSENT:
            layer = self._layer
            return layer.value(key, self._uid) if key in layer.names else default
        return v

    def __contains__(self, key: object) -> bool:
        return _dict_contains(self, key) or key in self._layer.names

    def __len__(self) -> int:
        return _dict_len(self) + len(self._layer.order)

    def __iter__(self) -> Iterator[str]:
        yield from _dict_iter(self)
        yield from self._layer.order

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self))

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return KeysView(self)

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        return ValuesView(self)

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        return ItemsView(self)

    def copy(self) -> dict[str, Any]:
        return {k: self[k] for k in self}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict):
            return NotImplemented
        return self.copy() == (other.copy() if isinstance(other, EntryFields) else other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __or__(self, other: Any) -> Any:
        return self.copy() | other if isinstance(other, dict) else NotImplemented

    def __ror__(self, other: Any) -> Any:
        return dict(other) | self.copy() if isinstance(other, dict) else NotImplemented

    def __repr__(self) -> str:
        return repr(self.copy())

    def __reduce__(self):
        return (_entry_fields, (dict(_dict_items(self)), self._layer.order, self._uid))

    def __deepcopy__(self, memo: dict) -> "EntryFields":
        import copy
        return EntryFields(copy.deepcopy(dict(_dict_items(self)), memo), self._layer, self._uid)


def _entry_fields(own: dict[str, Any], filled_order: Sequence[str], uid: Any) -> EntryFields:
    # unpickling: the layer is found again by its names, so a loaded book shares it too
    return EntryFields(own, _defaults_for(shared_names(filled_order)), uid)


def _frozen(value: Mapping[str, Any]) -> FrozenMap:
    return value if isinstance(value, FrozenMap) else FrozenMap(value)


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness: ``0``, ``NaN``, ``""``, ``null``, ``false`` are falsy."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def _js_loose_true(value: Any) -> bool:
    """``value == true`` with JS loose equality (``true``, ``1``, ``"1"``, ``" 1 "``)."""
    if value is True:
        return True
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return value == 1
    if isinstance(value, str):
        try:
            return float(js_trim(value)) == 1.0
        except ValueError:
            return False
    return False


# Field validation: which JSON types each modelled field may hold. A value of another
# type is an error naming the field (never a silent default). `None` is allowed where
# SillyTavern itself stores null.
_BOOL = (bool,)
_NUM = (int, float)
_NUM_BOOL = (int, float, bool)
_FIELD_TYPES: dict[str, tuple[tuple[type, ...], bool]] = {
    # name: (allowed types, null allowed)
    "key": ((list,), False), "keysecondary": ((list,), False),
    "comment": ((str,), True), "content": ((str,), True),
    "constant": (_NUM_BOOL, True), "vectorized": (_NUM_BOOL, True),
    "selective": (_NUM_BOOL, True), "selectiveLogic": (_NUM, True), "addMemo": (_NUM_BOOL, True),
    "order": (_NUM, True), "position": (_NUM, True), "disable": (_NUM_BOOL + (str,), True),
    "ignoreBudget": (_NUM_BOOL, True), "excludeRecursion": (_NUM_BOOL, True),
    "preventRecursion": (_NUM_BOOL, True), "delayUntilRecursion": (_NUM_BOOL, True),
    "matchPersonaDescription": (_NUM_BOOL, True), "matchCharacterDescription": (_NUM_BOOL, True),
    "matchCharacterPersonality": (_NUM_BOOL, True), "matchCharacterDepthPrompt": (_NUM_BOOL, True),
    "matchScenario": (_NUM_BOOL, True), "matchCreatorNotes": (_NUM_BOOL, True),
    "probability": (_NUM, True), "useProbability": (_NUM_BOOL, True),
    # role: 0/1/2 in SillyTavern; CCv3/RisuAI books may say "system"/"user"/"assistant"
    "depth": (_NUM, True), "role": (_NUM + (str,), True), "outletName": ((str,), True),
    "group": ((str,), True), "groupOverride": (_NUM_BOOL, True), "groupWeight": (_NUM, True),
    "scanDepth": (_NUM, True), "caseSensitive": (_NUM_BOOL, True),
    "matchWholeWords": (_NUM_BOOL, True), "useGroupScoring": (_NUM_BOOL, True),
    "sticky": (_NUM, True), "cooldown": (_NUM, True), "delay": (_NUM, True),
    "triggers": ((list,), True), "characterFilter": ((dict,), True),
}
_MAX_NUMBER = 2**53   # beyond JS's exact integers: such depths, orders or durations are rejected as absurd


def _check_value(name: str, value: Any, types: tuple[type, ...], nullable: bool, *, source: str,
                 uid: object) -> None:
    if value is None:
        if nullable:
            return
        raise LorebookError("must not be null", source=source, entry=uid, field=name)
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)
                                        and types != _NUM_BOOL):
        want = "/".join(sorted({t.__name__ for t in types}))
        raise LorebookError(f"expected {want}, got {type(value).__name__} {value!r:.60}",
                            source=source, entry=uid, field=name)
    if isinstance(value, float) and not math.isfinite(value):
        raise LorebookError(f"number must be finite, got {value!r}", source=source,
                            entry=uid, field=name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > _MAX_NUMBER:
        raise LorebookError(f"number out of range: {value!r}", source=source, entry=uid,
                            field=name)


def _check_fields(fields: Mapping[str, Any], *, source: str, uid: object) -> None:
    get = fields.get
    for name, (types, nullable) in _FIELD_TYPES.items():
        value = get(name, _ABSENT)
        if value is _ABSENT:
            continue
        # The common values, accepted here without a call; anything else gets every check.
        t = type(value)
        if t is str or t is list or t is dict or t is bool:
            if t in types:
                continue
        elif t is int:
            if int in types and -_MAX_NUMBER <= value <= _MAX_NUMBER:
                continue
        elif t is float:
            if float in types and -_MAX_NUMBER <= value <= _MAX_NUMBER:     # NaN fails both
                continue
        _check_value(name, value, types, nullable, source=source, uid=uid)
    for name in ("key", "keysecondary", "triggers"):
        items = fields.get(name)
        if isinstance(items, list):
            for i, item in enumerate(items):
                if not isinstance(item, str):
                    raise LorebookError(f"expected a string, got {type(item).__name__} {item!r:.60}",
                                        source=source, entry=uid, field=f"{name}[{i}]")
    cf = fields.get("characterFilter")
    if isinstance(cf, dict):
        for sub in ("names", "tags"):
            items = cf.get(sub, [])
            if not isinstance(items, list) or not all(isinstance(x, (str, int)) for x in items):
                raise LorebookError("expected a list of strings", source=source, entry=uid,
                                    field=f"characterFilter.{sub}")


class _WeakReferable:
    """A ``__weakref__`` slot for :class:`Entry`: a loaded compiled book keeps the entries it built
    only while an engine (or anything else) holds them (lorescan.match.columns.lazy_sequence(weak=True)),
    not for the book's life. A base class rather than ``dataclass(weakref_slot=True)``, which
    Python 3.10 does not have."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, slots=True, eq=False)
class Entry(_WeakReferable):
    """One lorebook entry: every stored field plus typed views used by the engine.

    ``fields`` holds the entry exactly as read, in file order (including fields lorescan
    does not model), followed by any defaults the reader filled in; ``filled`` names those
    defaults so a writer can leave them out (an :class:`EntryFields` stores only the former
    and reads the defaults from a layer shared across entries). Typed attributes follow SillyTavern's
    scan-time reading of the fields (JS truthiness, docs/sillytavern-mode.md#st-entries).
    """

    uid: int | str
    fields: Mapping[str, Any]
    filled: frozenset[str]
    key: tuple[str, ...]
    keysecondary: tuple[str, ...]
    content: str
    comment: str
    constant: bool
    disable: bool
    selective: bool
    selective_logic: int | None          # None when the field is missing (docs/sillytavern-mode.md#st-entries)
    order: float                          # NaN when not a number
    position: float | None                # numbers are int or float, finite, |x| <= 2**53 (_check_fields)
    depth: float | None
    role: float | str | None              # CCv3/RisuAI books may say "system"/"user"/"assistant"
    outlet_name: str
    ignore_budget: bool
    exclude_recursion: bool
    prevent_recursion: bool
    delay_until_recursion: float          # 0 = off; True counts as level 1
    match_sources: tuple[bool, bool, bool, bool, bool, bool]
    probability: float | None
    use_probability: bool
    group: str
    group_override: bool
    group_weight: float
    use_group_scoring: bool | None
    scan_depth: float | None
    case_sensitive: bool | None
    match_whole_words: bool | None
    sticky: float | None
    cooldown: float | None
    delay: float | None
    triggers: tuple[str, ...]
    character_filter: tuple[bool, tuple[str, ...], tuple[str, ...]]
    # Character Card fields SillyTavern has no name for (``priority``, ``use_regex``, top-level
    # ``case_sensitive``, ``name``), as the card stored them; empty for other formats. Not
    # part of ``fields``: card writers keep them through the raw entry (formats/card.py).
    card_fields: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _frozen(self.fields))
        object.__setattr__(self, "card_fields", _frozen(self.card_fields))

    def to_dict(self, *, include_filled: bool = False) -> dict[str, Any]:
        """The entry as a plain dict in field order (filled defaults left out by default)."""
        f = self.fields
        if include_filled:
            return f.copy() if isinstance(f, EntryFields) else dict(f)
        if isinstance(f, EntryFields) and f._layer.names is self.filled:
            return dict(_dict_items(f))        # its stored part is exactly what the file had
        return {k: v for k, v in f.items() if k not in self.filled}


# Entry.__init__ (a frozen dataclass's: one object.__setattr__ call per attribute, its keyword
# arguments bound first) is a third of building an entry from fields; _new_entry sets the same
# slots through their descriptors in one C loop. Its callers give it frozen ``fields`` and
# ``card_fields``, so __post_init__ has nothing to do.
_ENTRY_SLOTS = tuple(getattr(Entry, f.name) for f in dataclasses.fields(Entry))
_set_slot = MemberDescriptorType.__set__


def _new_entry(values: tuple[Any, ...]) -> Entry:
    """``Entry(*values)`` (every attribute, in field order)."""
    if len(values) != len(_ENTRY_SLOTS):
        raise TypeError(f"an Entry has {len(_ENTRY_SLOTS)} attributes, got {len(values)}")
    entry = object.__new__(Entry)
    deque(map(_set_slot, _ENTRY_SLOTS, repeat(entry), values), 0)
    return entry


_MATCH_FLAGS = ("matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
                "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes")


_SHARED_NAMES: dict[frozenset[str], frozenset[str]] = {}


def shared_names(names: Iterable[str]) -> frozenset[str]:
    """``frozenset(names)``, one object per distinct set: the filled-default names of a
    book's entries are nearly always the same ~40 names, and a frozenset of 40 strings
    takes 2 KB (22 MB of a 10k-entry book before this). The table holds immutable values
    only and is capped, so sharing is safe across threads."""
    key = frozenset(names)
    found = _SHARED_NAMES.get(key)
    if found is not None:
        return found
    if len(_SHARED_NAMES) >= 4096:
        _SHARED_NAMES.clear()
    _SHARED_NAMES[key] = key
    return key


def _tri(value: Any) -> bool | None:
    return None if value is None else js_truthy(value)


def entry_from_fields(fields: Mapping[str, Any], *, source: str = "<memory>",
                      fill_defaults: bool = True, uid: Any = None,
                      card_fields: Mapping[str, Any] | None = None,
                      filled: Iterable[str] | None = None) -> Entry:
    """Build an :class:`Entry` from a SillyTavern-shaped field mapping.

    ``fill_defaults`` adds the new-entry defaults for absent fields, as SillyTavern's editor
    does when it opens a book; the added names are recorded in ``Entry.filled``.
    ``filled`` (with ``fill_defaults=False``): names in ``fields`` that are such defaults
    already (an entry stored with its defaults, as the compact compiled form does).
    ``card_fields``: the card-only fields of a Character Card entry (``Entry.card_fields``).
    Raises :class:`LorebookError` naming the entry and field for ill-typed values.
    """
    if type(fields) is not dict and not isinstance(fields, Mapping):   # (the ABC's check only off the usual path)
        raise LorebookError(f"an entry must be an object, got {type(fields).__name__}",
                            source=source, entry=uid)
    uid = fields.get("uid", uid)
    if isinstance(uid, bool) or not isinstance(uid, (int, str)) or (isinstance(uid, str) and not uid):
        raise LorebookError(f"uid must be an integer, got {uid!r:.40}", source=source, entry=uid,
                            field="uid")
    if not (type(fields) is dict and _fast_checked(fields)):   # a plain dict of a shape seen before: one pass
        _check_fields(fields, source=source, uid=uid)
    own = dict(fields)
    data: Mapping[str, Any] = own          # what the typed attributes below read
    layer = _NO_DEFAULTS
    names: frozenset[str] = frozenset()
    if fill_defaults:
        if own.get("characterFilter", _ABSENT) is None:   # the editor replaces a null filter with the empty one
            own["characterFilter"] = {"isExclude": False, "names": [], "tags": []}
        missing = [name for name, _ in ST_ENTRY_DEFAULTS if name not in own]
        if missing:
            names = shared_names(missing)
            layer = _defaults_for(names)
            data = dict(own)
            for name in layer.order:           # read only here: the shared values, no copies
                data[name] = uid if name == "displayIndex" else layer.values[name]
            if not own:   # json.dumps writes an empty dict subclass as {} without asking it
                own = {name: layer.value(name, uid) for name in layer.order}
                layer = _NO_DEFAULTS
    elif filled is not None:
        names = shared_names(filled)
        own, layer = _relayer(own, names, uid)
    return _typed_entry(uid, own, layer, names, data, card_fields)


def entry_from_stored(fields: dict[str, Any], *, source: str, uid: Any, filled: Iterable[str]) -> Entry:
    """``entry_from_fields(fields, source=source, fill_defaults=False, uid=uid, filled=filled)``
    for a plain dict the caller gives away (the compact compiled form's decoded record: it is
    not copied): the same entry, the same errors. The field checks go through
    :func:`_fast_checked` (one pass per record shape); any record it does not vouch for gets
    every check of :func:`_check_fields`."""
    uid = fields.get("uid", uid)
    t = type(uid)
    if not ((t is int or (t is str and uid)) and _fast_checked(fields)):
        return entry_from_fields(fields, source=source, fill_defaults=False, uid=uid, filled=filled)
    own = data = fields
    names: frozenset[str] = _NO_NAMES
    layer = _NO_DEFAULTS
    if filled:
        names = shared_names(filled)
        own, layer = _relayer(own, names, uid)
    return _typed_entry(uid, own, layer, names, data, None)


_NO_NAMES: frozenset[str] = _NO_DEFAULTS.names      # the names of no filled default (Entry.to_dict's fast case)

# -- the field checks of one record shape, once (entry_from_stored) --------------------------
# A shape is the field names in order and the type of each value. For a shape whose every
# modelled field holds a type _check_fields accepts without more (str, list, dict or bool where
# allowed, null where nullable, int where numbers are: a float or any other type leaves the
# record to _check_fields), what is left to check per record is the range of its ints, the
# items of its key lists and its characterFilter.
_SHAPES: dict[tuple[tuple[str, ...], tuple[type, ...]], Any] = {}
_LIST_FIELDS = ("key", "keysecondary", "triggers")
_NONE = type(None)
_CF_ITEM_TYPES = frozenset((str, int, bool))


def _shape_plan(names: tuple[str, ...], types: tuple[type, ...]) -> Any:
    """False when a record of this shape needs :func:`_check_fields`; else (a getter of its ints'
    values or None, the positions of its key lists, the position of its characterFilter or -1)."""
    ints: list[int] = []
    lists: list[int] = []
    cf = -1
    for p, (name, t) in enumerate(zip(names, types)):
        spec = _FIELD_TYPES.get(name)
        if spec is None:
            continue
        allowed, nullable = spec
        if t is int:
            if int not in allowed:
                return False
            ints.append(p)
        elif t is _NONE:
            if not nullable:
                return False
        elif t in (str, list, dict, bool):
            if t not in allowed:
                return False
            if t is list and name in _LIST_FIELDS:
                lists.append(p)
            elif t is dict and name == "characterFilter":
                cf = p
        else:
            return False
    getter: Any = None
    if not ints:
        pass
    elif len(ints) == 1:
        getter = operator.itemgetter(slice(ints[0], ints[0] + 1))
    else:
        getter = operator.itemgetter(*ints)
    return getter, tuple(lists), cf


def _fast_checked(fields: dict[str, Any]) -> bool:
    """True when :func:`_check_fields` would accept ``fields`` (a plain dict); False when it
    must be asked (it may accept them too, or raise the error naming the field)."""
    values = tuple(fields.values())
    shape = (tuple(fields), tuple(map(type, values)))
    plan = _SHAPES.get(shape)
    if plan is None:
        if len(_SHAPES) >= 1024:
            _SHAPES.clear()
        plan = _SHAPES[shape] = _shape_plan(*shape)
    if plan is False:
        return False
    ints, lists, cf = plan
    if ints is not None:
        got = ints(values)
        if max(got) > _MAX_NUMBER or min(got) < -_MAX_NUMBER:
            return False
    for p in lists:
        try:
            "".join(values[p])         # every item a string, in C (a TypeError names none)
        except TypeError:
            return False
    if cf >= 0:
        get = values[cf].get
        for sub in ("names", "tags"):
            items = get(sub, _NO_ITEMS)
            if type(items) is not list or (items and not _CF_ITEM_TYPES.issuperset(map(type, items))):
                return False
    return True


_NO_ITEMS: list[Any] = []

# -- the typed attributes ----------------------------------------------------------------------
# The flags read with JavaScript truthiness; for values of these types Python's is the same.
_FLAG_NAMES = ("constant", "selective", "ignoreBudget", "excludeRecursion", "preventRecursion", "useProbability",
               "groupOverride", "useGroupScoring", "caseSensitive", "matchWholeWords") + _MATCH_FLAGS
_PLAIN_TRUTHY = frozenset((bool, int, str, _NONE))


def _typed_entry(uid: Any, own: dict[str, Any], layer: "_Defaults", names: frozenset[str],
                 data: Mapping[str, Any], card_fields: Mapping[str, Any] | None) -> Entry:
    """The Entry of checked fields: ``data`` all of them, ``own`` the stored ones, ``layer``
    the filled defaults ``names`` (built without Entry.__init__: :func:`_new_entry`)."""
    g = data.get
    flag_values = tuple(map(g, _FLAG_NAMES))
    flags = tuple(map(bool if _PLAIN_TRUTHY.issuperset(map(type, flag_values)) else js_truthy, flag_values))
    key = g("key")
    keysecondary = g("keysecondary")
    dur = g("delayUntilRecursion")
    if dur is True:
        dur_level: float = 1
    elif isinstance(dur, (int, float)) and not isinstance(dur, bool) and dur > 0:
        dur_level = dur
    else:
        dur_level = 0
    cf = g("characterFilter") or {}
    weight = g("groupWeight")
    order = g("order")
    disable = g("disable")
    cf_names = cf.get("names")
    cf_names = tuple(map(str, cf_names)) if cf_names else ()
    cf_tags = cf.get("tags")
    cf_tags = tuple(map(str, cf_tags)) if cf_tags else ()
    cf_exclude = cf.get("isExclude")
    cf_exclude = cf_exclude if cf_exclude is True or cf_exclude is False else js_truthy(cf_exclude)
    selective_logic = g("selectiveLogic")
    triggers = g("triggers")
    return _new_entry((
        uid, EntryFields(own, layer, uid), names,                               # uid, fields, filled
        tuple(key) if isinstance(key, list) else (),                            # key
        tuple(keysecondary) if isinstance(keysecondary, list) else (),          # keysecondary
        g("content") or "", g("comment") or "",                                 # content, comment
        flags[0], disable is True or (disable is not False and _js_loose_true(disable)),  # constant, disable
        flags[1], selective_logic,                                              # selective, selective_logic
        order if isinstance(order, (int, float)) and not isinstance(order, bool) else math.nan,
        g("position"), g("depth"), g("role"), g("outletName") or "",           # position .. outlet_name
        flags[2], flags[3], flags[4], dur_level,                                # ignore_budget .. delay_until_recursion
        _MATCH_SOURCES[flags[10:]],                                             # match_sources
        g("probability"), flags[5],                                             # probability, use_probability
        g("group") or "", flags[6], 100 if weight is None else weight,          # group .. group_weight
        None if flag_values[7] is None else flags[7],                           # use_group_scoring
        g("scanDepth"),                                                         # scan_depth
        None if flag_values[8] is None else flags[8],                           # case_sensitive
        None if flag_values[9] is None else flags[9],                           # match_whole_words
        g("sticky"), g("cooldown"), g("delay"),                                 # sticky, cooldown, delay
        tuple(triggers) if triggers else (),                                    # triggers
        _NO_FILTER[cf_exclude] if not cf_names and not cf_tags else (cf_exclude, cf_names, cf_tags),
        FrozenMap(card_fields) if card_fields else EMPTY_MAP,                   # card_fields
    ))


def _relayer(own: dict[str, Any], names: frozenset[str], uid: Any) -> tuple[dict[str, Any], _Defaults]:
    """``own`` without the filled defaults ``names`` it holds, and their layer, when reading
    them through the layer gives the same mapping (same values of the same types, same order);
    else ``own`` unchanged with no layer."""
    if not names:
        return own, _NO_DEFAULTS
    layer = _defaults_for(names)
    keys = list(own)
    n = len(keys) - len(layer.order)
    if n <= 0 or tuple(keys[n:]) != layer.order:
        return own, _NO_DEFAULTS
    for name in layer.order:
        if not _same_json(own[name], layer.value(name, uid)):
            return own, _NO_DEFAULTS
    return {k: own[k] for k in keys[:n]}, layer


def _same_json(a: Any, b: Any) -> bool:
    # equal with the same types all the way down (1 != 1.0 != True)
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(_same_json(v, b[k]) for k, v in a.items())
    return a == b


# Shared immutable attribute values: most entries of a book have the same ones.
_MATCH_SOURCE_TUPLES: tuple[Any, ...] = tuple(tuple(bool(bits >> i & 1) for i in range(len(_MATCH_FLAGS)))
                                              for bits in range(1 << len(_MATCH_FLAGS)))
_NO_FILTER = {False: (False, (), ()), True: (True, (), ())}
_MATCH_SOURCES = {t: t for t in _MATCH_SOURCE_TUPLES}   # six flags -> the shared tuple of them


def _deep_copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, eq=False)
class Origin:
    """What a same-format writer needs (``Lorebook.origin``): the document as read and each raw entry by uid.

    Filled by the readers in :mod:`lorescan.formats`; stored as a value in the compact compiled form.
    """
    document: Any
    raw_entries: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)
    read_fields: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)
    order: tuple[Any, ...] = ()
    container: bytes | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)
class Lorebook:
    """A named book: entries in SillyTavern's visiting order, plus its other top-level fields.

    ``entry_keys`` are the keys of the file's ``entries`` object (or list indexes), in file
    order, so a writer reproduces the file; ``fields`` holds every other top-level field
    (``name``, ``originalData``, ``extensions``, …) unchanged. ``format`` names the format
    the book was read from; ``origin`` is opaque format data kept for lossless write-back.
    """

    name: str
    entries: tuple[Entry, ...]
    fields: Mapping[str, Any] = field(default_factory=FrozenMap)
    entry_keys: tuple[str, ...] = ()
    source: str = "<memory>"
    format: str = "sillytavern"
    # What a writer of the same format needs to reproduce the file exactly (the container,
    # the raw entry objects); owned by lorescan.formats, None for books built in memory.
    origin: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _frozen(self.fields))

    def entry(self, uid: int | str) -> Entry:
        """The entry with this uid; KeyError if there is none."""
        for e in self.entries:
            if e.uid == uid:
                return e
        raise KeyError(uid)
