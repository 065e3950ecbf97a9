"""Per-chat state of lorebook-slot mode: a plain JSON value the caller stores with the chat.

Shape (version 1)::

    {"version": 1, "first_matched_turn": {"<book id>": {"<entry id>": <turn index>}}}

``placement_layout`` (present with ``stable_placement`` or once a caller put one there) is the
previous request's :class:`lorescan.layout.Layout` of the slot (docs/improved-profile.md#cache-stable).
``first_matched_turn`` records, for each entry that was ever inserted, the turn index
(docs/slot-mode.md#slot-gates ``M``) of the first turn it was inserted in; ``@@keep`` and
``@@dont_activate_after_match`` read it (docs/slot-mode.md#slot-order). Entry ids are written as text
(JSON object keys are strings). Top-level keys lorescan does not know are kept.
The engine never changes the value it is given: it reads it and returns a new one.

The state comes from storage anyone may have edited: it must be JSON data (objects with
string keys, arrays, strings, finite numbers, booleans, null) nested at most
``max_json_depth`` levels, within ``MAX_STATE_VALUES`` values and ``MAX_STATE_CHARS``
characters of text, or a SettingsError names the first bad part (or the limit). It is read and
copied without recursion, so no depth reaches Python's recursion limit, and the returned
state is always strict JSON (``json.dumps(state, allow_nan=False)`` succeeds).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..errors import LorebookError, SettingsError
from ..layout import Layout
from ..limits import DEFAULT_LIMITS

__all__ = ["STATE_VERSION", "empty_state", "read_first_matched", "with_first_matched", "copy_json", "read_layout",
           "LAYOUT_KEY"]

LAYOUT_KEY = "placement_layout"

STATE_VERSION = 1


def empty_state() -> dict[str, Any]:
    """A fresh state for a new chat."""
    return {"version": STATE_VERSION, "first_matched_turn": {}}


def _bad(problem: str, field: str | None = None) -> SettingsError:
    return SettingsError(problem, source="state", field=field)


def read_first_matched(state: Mapping[str, Any] | None) -> dict[str, dict[str, int]]:
    """``first_matched_turn`` of ``state`` as a fresh dict (None = empty state).

    Raises :class:`SettingsError` naming the bad part of a malformed state.
    """
    if state is None:
        return {}
    if not isinstance(state, Mapping):
        raise _bad(f"the state must be an object, got {type(state).__name__}")
    copy_json(state)              # JSON data, finite numbers, bounded depth (the copy is dropped)
    version = state.get("version", STATE_VERSION)
    if type(version) is not int or version != STATE_VERSION:
        raise _bad(f"unsupported state version {version!r} (this lorescan reads {STATE_VERSION})",
                   "version")
    table = state.get("first_matched_turn", {})
    if not isinstance(table, Mapping):
        raise _bad("expected an object", "first_matched_turn")
    out: dict[str, dict[str, int]] = {}
    for book, entries in table.items():
        if not isinstance(book, str) or not isinstance(entries, Mapping):
            raise _bad("expected an object of entry ids", f"first_matched_turn.{book}")
        row: dict[str, int] = {}
        for entry_id, turn in entries.items():
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
                raise _bad(f"expected a turn index (integer >= 0), got {turn!r:.40}",
                           f"first_matched_turn.{book}.{entry_id}")
            row[str(entry_id)] = turn
        out[book] = row
    return out


def read_layout(state: Mapping[str, Any] | None) -> Layout | None:
    """The state's ``placement_layout`` (None when it has none).

    Raises :class:`SettingsError` naming the bad part (``placement_layout.<field>``).
    """
    if state is None or not isinstance(state, Mapping) or LAYOUT_KEY not in state:
        return None
    try:
        return Layout.from_json(state[LAYOUT_KEY])
    except LorebookError as exc:
        raise _bad(exc.problem, f"{LAYOUT_KEY}.{exc.field}" if exc.field else LAYOUT_KEY) from None


def with_first_matched(state: Mapping[str, Any] | None,
                       first_matched: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """A new state: ``state``'s other keys (deep-copied) with this ``first_matched_turn``."""
    out = copy_json(state) if state is not None else {}
    out["version"] = STATE_VERSION
    out["first_matched_turn"] = {book: dict(row) for book, row in first_matched.items()}
    return out


# A state is stored with its chat and sent with each request: past these sizes it is refused
# (a 4 MB state took 8.6 s to validate and copy; now about a second per million values).
MAX_STATE_VALUES = 1_000_000          # values (each array item and object member counts one)
MAX_STATE_CHARS = 16 * 1024 * 1024    # characters of all its strings and object keys

_Chain = tuple[Any, Any] | None        # (parent chain, key): a container's path, spelt out on error


def _path(chain: _Chain, key: Any = None) -> str:
    keys = [] if key is None else [key]
    while chain is not None:
        chain, k = chain
        keys.append(k)
    keys.reverse()
    out = ""
    for k in keys:
        if len(out) > 200:          # only the start of a very deep path is worth printing
            break
        out = f"{out}.{k}".lstrip(".") if isinstance(k, str) else f"{out}[{k}]"
    return out


def copy_json(value: Mapping[str, Any], *, max_depth: int = DEFAULT_LIMITS.max_json_depth,
              max_values: int = MAX_STATE_VALUES, max_chars: int = MAX_STATE_CHARS) -> dict[str, Any]:
    """A deep copy of the JSON object ``value``, built without recursion, in time linear in its size.

    Raises :class:`SettingsError` naming the path of the first part that is not JSON data
    (a non-string key, a NaN or infinite number, another type) or that nests deeper than
    ``max_depth``, or naming the limit when the value holds more than ``max_values`` values
    or ``max_chars`` characters of strings and keys.
    """
    root: dict[str, Any] = {}
    # (source container, its copy, its path chain, depth)
    stack: list[tuple[Any, Any, _Chain, int]] = [(value, root, None, 1)]
    values = chars = 0
    plain = (str, int, bool, type(None))
    while stack:
        src, dst, chain, depth = stack.pop()
        if depth > max_depth:
            raise _bad(f"nested deeper than {max_depth} levels (max_json_depth)", _path(chain)[:80] + "...")
        is_map = type(src) is dict or (type(src) is not list and isinstance(src, Mapping))
        items = src.items() if is_map else enumerate(src)
        values += len(src)
        if values > max_values:
            raise _bad(f"the state holds more than {max_values:,} values (MAX_STATE_VALUES)")
        for k, v in items:
            if is_map:
                if type(k) is not str:
                    if not isinstance(k, str):
                        raise _bad(f"object keys must be strings, got {k!r:.40}", _path(chain) or None)
                chars += len(k)
            item: Any
            t = type(v)
            if t in plain:
                item = v
                if t is str:
                    chars += len(v)
            elif t is float:
                if not math.isfinite(v):
                    raise _bad(f"{v} is not a JSON number", _path(chain, k))
                item = v
            elif t is dict or t is list or t is tuple:
                item = {} if t is dict else [None] * len(v)
                stack.append((v, item, (chain, k), depth + 1))
            elif isinstance(v, (str, bool, int)):
                item = v
                if isinstance(v, str):
                    chars += len(v)
            elif isinstance(v, float) and math.isfinite(v):
                item = v
            elif isinstance(v, (Mapping, list, tuple)):
                item = {} if isinstance(v, Mapping) else [None] * len(v)
                stack.append((v, item, (chain, k), depth + 1))
            elif isinstance(v, float):
                raise _bad(f"{v} is not a JSON number", _path(chain, k))
            else:
                raise _bad(f"not JSON data: {type(v).__name__}", _path(chain, k))
            dst[k] = item
        if chars > max_chars:
            raise _bad(f"the state holds more than {max_chars:,} characters of text (MAX_STATE_CHARS)")
    return root
