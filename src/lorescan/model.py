"""The data model: entries and books (docs/sillytavern-mode.md#st-entries); SillyTavern mode's settings
live in :mod:`lorescan.st.settings`, the matching rules in :mod:`lorescan.match.options`.

An :class:`Entry` keeps every field exactly as read (``fields``, in file order, unknown
fields included) and exposes the values the engine needs as typed attributes computed
once, with SillyTavern's JavaScript truthiness rules (docs/sillytavern-mode.md#st-entries). Writers use ``fields``
(minus ``filled``, the defaults a reader added), so nothing is lost on a round trip.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import LorebookError
from .js.text import js_trim

__all__ = ["FrozenMap", "ST_ENTRY_DEFAULTS", "Entry", "Lorebook", "js_truthy", "entry_from_fields", "Origin"]

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


def _check_fields(fields: Mapping[str, Any], *, source: str, uid: object) -> None:
    for name, (types, nullable) in _FIELD_TYPES.items():
        if name not in fields:
            continue
        value = fields[name]
        if value is None:
            if nullable:
                continue
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


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One lorebook entry: every stored field plus typed views used by the engine.

    ``fields`` holds the entry exactly as read, in file order (including fields lorescan
    does not model), followed by any defaults the reader filled in; ``filled`` names those
    defaults so a writer can leave them out. Typed attributes follow SillyTavern's
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
    card_fields: Mapping[str, Any] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", _frozen(self.fields))
        object.__setattr__(self, "card_fields", _frozen(self.card_fields))

    def to_dict(self, *, include_filled: bool = False) -> dict[str, Any]:
        """The entry as a plain dict in field order (filled defaults left out by default)."""
        return {k: v for k, v in self.fields.items() if include_filled or k not in self.filled}


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
                      card_fields: Mapping[str, Any] | None = None) -> Entry:
    """Build an :class:`Entry` from a SillyTavern-shaped field mapping.

    ``fill_defaults`` adds the new-entry defaults for absent fields, as SillyTavern's editor
    does when it opens a book; the added names are recorded in ``Entry.filled``.
    ``card_fields``: the card-only fields of a Character Card entry (``Entry.card_fields``).
    Raises :class:`LorebookError` naming the entry and field for ill-typed values.
    """
    if not isinstance(fields, Mapping):
        raise LorebookError(f"an entry must be an object, got {type(fields).__name__}",
                            source=source, entry=uid)
    uid = fields.get("uid", uid)
    if isinstance(uid, bool) or not isinstance(uid, (int, str)) or (isinstance(uid, str) and not uid):
        raise LorebookError(f"uid must be an integer, got {uid!r:.40}", source=source, entry=uid,
                            field="uid")
    _check_fields(fields, source=source, uid=uid)
    data = dict(fields)
    filled: set[str] = set()
    if fill_defaults:
        for name, default in ST_ENTRY_DEFAULTS:
            if name not in data:
                if name == "displayIndex":
                    default = uid
                elif isinstance(default, (list, dict)):
                    default = _deep_copy_json(default)
                data[name] = default
                filled.add(name)
        cf = data.get("characterFilter")
        if cf is None:   # the editor replaces a null filter with the empty one
            data["characterFilter"] = {"isExclude": False, "names": [], "tags": []}
    g = data.get
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
    return Entry(
        uid=uid, fields=FrozenMap(data), filled=shared_names(filled),
        key=tuple(key) if isinstance(key, list) else (),
        keysecondary=tuple(keysecondary) if isinstance(keysecondary, list) else (),
        content=g("content") or "", comment=g("comment") or "",
        constant=js_truthy(g("constant")), disable=_js_loose_true(g("disable")),
        selective=js_truthy(g("selective")),
        selective_logic=None if g("selectiveLogic") is None else g("selectiveLogic"),
        order=order if isinstance(order, (int, float)) and not isinstance(order, bool) else math.nan,
        position=g("position"), depth=g("depth"), role=g("role"),
        outlet_name=g("outletName") or "",
        ignore_budget=js_truthy(g("ignoreBudget")),
        exclude_recursion=js_truthy(g("excludeRecursion")),
        prevent_recursion=js_truthy(g("preventRecursion")),
        delay_until_recursion=dur_level,
        match_sources=tuple(js_truthy(g(f)) for f in _MATCH_FLAGS),  # type: ignore[arg-type]
        probability=g("probability"), use_probability=js_truthy(g("useProbability")),
        group=g("group") or "", group_override=js_truthy(g("groupOverride")),
        group_weight=100 if weight is None else weight,
        use_group_scoring=_tri(g("useGroupScoring")),
        scan_depth=g("scanDepth"),
        case_sensitive=_tri(g("caseSensitive")), match_whole_words=_tri(g("matchWholeWords")),
        sticky=g("sticky"), cooldown=g("cooldown"), delay=g("delay"),
        triggers=tuple(g("triggers") or ()),
        character_filter=(js_truthy(cf.get("isExclude")), tuple(str(x) for x in cf.get("names") or ()),
                          tuple(str(x) for x in cf.get("tags") or ())),
        card_fields=FrozenMap(card_fields or {}),
    )


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
