"""Per-chat state of lorebook-slot mode: a plain JSON value the caller stores with the chat.

Shape (version 1)::

    {"version": 1, "first_matched_turn": {"<book id>": {"<entry id>": <turn index>}}}

``first_matched_turn`` records, for each entry that was ever inserted, the turn index
(SPEC 15.5 ``M``) of the first turn it was inserted in; ``@@keep`` and
``@@dont_activate_after_match`` read it (SPEC 15.10). Entry ids are written as text
(JSON object keys are strings). Top-level keys lorescan does not know are kept.
The engine never changes the value it is given: it reads it and returns a new one.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping

from ..errors import SettingsError

__all__ = ["STATE_VERSION", "empty_state", "read_first_matched", "with_first_matched"]

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
    version = state.get("version", STATE_VERSION)
    if version != STATE_VERSION:
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


def with_first_matched(state: Mapping[str, Any] | None,
                       first_matched: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """A new state: ``state``'s other keys (deep-copied) with this ``first_matched_turn``."""
    out = copy.deepcopy(dict(state)) if state is not None else {}
    out["version"] = STATE_VERSION
    out["first_matched_turn"] = {book: dict(row) for book, row in first_matched.items()}
    return out
