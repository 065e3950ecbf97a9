"""Inclusion groups (docs/sillytavern-mode.md#st-groups): timed-effect filter, group scoring, winner selection."""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from ..js.text import JS_WHITESPACE

__all__ = ["split_group_names", "js_key_order", "PendingList"]

_GROUP_SPLIT = re.compile(",[" + "".join(sorted(JS_WHITESPACE)) + "]*")


def split_group_names(group: str) -> list[str]:
    """Group names of an entry: split on a comma and the whitespace after it; empty names dropped."""
    return [g for g in _GROUP_SPLIT.split(group) if g]


def _is_array_index(name: str) -> bool:
    return name == "0" or (name[:1] in "123456789" and name.isascii() and name.isdigit()
                           and int(name) <= 2**32 - 2)


def js_key_order(names: Sequence[str]) -> list[str]:
    """JS object key order: integer-like names ascending, then the rest in first-seen order."""
    ints = sorted((n for n in names if _is_array_index(n)), key=int)
    return ints + [n for n in names if not _is_array_index(n)]


class PendingList:
    """The loop's new-entry list, with SillyTavern's removal quirk as an option.

    SillyTavern removes with ``splice(indexOf(x), 1)``: removing an entry that is no
    longer there removes the LAST element instead (docs/sillytavern-mode.md#st-groups). ``on_remove`` is told of
    every entry actually removed and why.
    """

    def __init__(self, items: Sequence[Any], *, quirk: bool,
                 on_remove: Callable[[Any, Any, str], None] | None = None) -> None:
        self.items = list(items)
        self.quirk = quirk
        self.on_remove = on_remove

    def remove(self, item: Any, reason: str) -> None:
        try:
            i = self.items.index(item)
        except ValueError:
            if not self.quirk or not self.items:
                return
            i = len(self.items) - 1
        removed = self.items.pop(i)
        if self.on_remove is not None:
            self.on_remove(removed, item, reason)

    def __contains__(self, item: Any) -> bool:
        return item in self.items
