"""The pool of lorebook-slot mode: book settings and the platform view of each entry.

Books arrive as :class:`~lorescan.model.Lorebook` values read from SillyTavern files
(ST field names) or from Character Card books (CC names; the CCv3 reader maps them to
ST names and keeps the originals). :func:`slot_entry_from` reads an entry's stored
``fields`` under both spellings and derives what docs/slot-mode.md#slot-entries uses; :class:`BookSettings`
reads and clamps the book-level settings of docs/slot-mode.md#slot-pool.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import LorebookError, SettingsError
from ..model import Entry, Lorebook, SelectiveLogic, js_truthy
from ..js.text import js_trim
from .decorators import MESSAGE_ROLES, Decorators, parse_decorators

__all__ = ["BookSettings", "SlotBook", "SlotEntry", "slot_entry_from", "raw_entry_of", "ROLE_NUMBERS",
           "DEFAULT_TOKEN_BUDGET", "SELECTIVE_LOGICS", "pool_budget"]

ROLE_NUMBERS = {0: "system", 1: "user", 2: "assistant"}

# docs/slot-mode.md#slot-pool: ranges from the seed, defaults [decision].
SCAN_DEPTH_RANGE = (0, 100)
TOKEN_BUDGET_RANGE = (100, 32000)
DEFAULT_TOKEN_BUDGET = 800      # only when no attached book stores a budget [decision, revised]

# SillyTavern's selectiveLogic values (docs/sillytavern-mode.md#st-key-logic), honoured in this mode [decision, revised].
SELECTIVE_LOGICS: dict[SelectiveLogic, str] = {logic: logic.words for logic in SelectiveLogic}


def _clamp(value: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, math.trunc(value))))


@dataclass(frozen=True, slots=True)
class BookSettings:
    """A book's scan settings (docs/slot-mode.md#slot-pool). Out-of-range numbers are clamped into range.

    Args:
        scan_depth: newest user and assistant messages scanned, 0..100 (default 5).
        token_budget: 100..32000, or None when the book stores none (the largest stored
            budget among the attached books applies; :data:`DEFAULT_TOKEN_BUDGET` only when
            no book stores one).
        recursive_scanning: whether the contents of this book's activated entries are
            scanned again (default on).

    Raises:
        SettingsError: a value of the wrong type.
    """

    scan_depth: int = 5
    token_budget: int | None = None
    recursive_scanning: bool = True

    def __post_init__(self) -> None:
        for name, (lo, hi) in (("scan_depth", SCAN_DEPTH_RANGE), ("token_budget", TOKEN_BUDGET_RANGE)):
            value = getattr(self, name)
            if value is None and name == "token_budget":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise SettingsError(f"expected a number, got {value!r}", source="book settings", field=name)
            object.__setattr__(self, name, _clamp(value, lo, hi) if math.isfinite(value)
                               else (hi if value > 0 else lo))
        if not isinstance(self.recursive_scanning, bool):
            raise SettingsError(f"expected true/false, got {self.recursive_scanning!r}",
                                source="book settings", field="recursive_scanning")

    @classmethod
    def from_book(cls, book: Lorebook) -> "BookSettings":
        """Settings stored in the book: CC names (``scan_depth``, ``token_budget``,
        ``recursive_scanning``) or camelCase ones, at the top level or, for a SillyTavern
        book imported from a card, inside ``originalData``. Missing ones take the defaults
        (a missing budget stays None: the book stores none)."""
        places: list[Mapping[str, Any]] = [book.fields]
        original = book.fields.get("originalData")
        if isinstance(original, Mapping):
            places.append(original)
        found: dict[str, Any] = {}
        for attr, names in (("scan_depth", ("scan_depth", "scanDepth")),
                            ("token_budget", ("token_budget", "tokenBudget")),
                            ("recursive_scanning", ("recursive_scanning", "recursiveScanning"))):
            for place in places:
                value = next((place[n] for n in names if place.get(n) is not None), None)
                if value is not None:
                    found[attr] = value
                    break
        try:
            return cls(**found)
        except SettingsError as exc:
            raise SettingsError(exc.problem, source=book.source, field=exc.field) from None


@dataclass(frozen=True, slots=True)
class SlotBook:
    """One attached book of a :class:`~lorescan.slot.SlotEngine`.

    Args:
        book: the book.
        id: names the book in the state, the roll and the log (default: the book's name).
        settings: its scan settings (default: read from the book, :meth:`BookSettings.from_book`).
    """

    book: Lorebook
    id: str | None = None
    settings: BookSettings | None = None

    def resolved(self) -> "SlotBook":
        """A copy with ``id`` and ``settings`` filled in."""
        return SlotBook(self.book, self.id if self.id is not None else self.book.name,
                        self.settings if self.settings is not None else BookSettings.from_book(self.book))


@dataclass(frozen=True, slots=True, eq=False)
class SlotEntry:
    """One entry of the pool as lorebook-slot mode sees it (docs/slot-mode.md#slot-entries + decorators).

    Values are *effective*: decorators applied (``order``, ``priority``, ``role``,
    ``scan_depth``, ``whole_words``), defaults of docs/slot-mode.md#slot-entries filled in. ``content`` is the
    text after the decorator header, trimmed. ``stored_priority`` is the entry's own
    ``priority`` field (None when absent: priority then defaults to the stored order).
    ``use_regex``: the stored CCv3 flag (None when absent); only ``regex_keys="strict"``
    reads it (docs/slot-mode.md#slot-keys [decision, revised]). ``selective_logic``: the stored
    ``selectiveLogic`` (a :class:`~lorescan.model.SelectiveLogic`), None when absent (AND ANY).
    """

    pool_index: int
    book_index: int
    index: int
    book_id: str
    id: int | str
    name: str
    entry: Entry = field(repr=False)
    keys: tuple[str, ...]
    secondary_keys: tuple[str, ...]
    content: str
    decorators: Decorators
    enabled: bool
    constant: bool
    selective: bool
    selective_logic: SelectiveLogic | None
    case_sensitive: bool
    whole_words: bool
    use_regex: bool | None
    order: float
    priority: float
    stored_priority: float | None
    role: str
    scan_depth: int
    feeds_recursion: bool

    @property
    def position(self) -> tuple[int, int]:
        """Pool position (book index, entry index): the final tie-breaker everywhere."""
        return (self.book_index, self.index)


# -- reading fields under both spellings ------------------------------------------------

def _stored(entry: Entry, name: str) -> bool:
    return name in entry.fields and name not in entry.filled


def _ext(entry: Entry) -> Mapping[str, Any]:
    ext = entry.fields.get("extensions")
    return ext if isinstance(ext, Mapping) else {}


class _Reader:
    """Field lookup over the entry's stored fields, its card-only fields
    (``Entry.card_fields``: ``priority``, ``use_regex``, ``case_sensitive``, ``name``), then
    the raw Character Card entry a reader kept (books built before ``card_fields`` existed)."""

    def __init__(self, entry: Entry, raw: Mapping[str, Any] | None, source: str) -> None:
        self.entry, self.raw, self.source = entry, raw if isinstance(raw, Mapping) else {}, source
        self.card = entry.card_fields

    def fail(self, problem: str, name: str) -> LorebookError:
        return LorebookError(problem, source=self.source, entry=self.entry.uid, field=name)

    def first(self, *names: str, ext: tuple[str, ...] = ()) -> tuple[str | None, Any]:
        """(field name, value) of the first stored, non-null field among the names."""
        for name in names:
            if _stored(self.entry, name) and self.entry.fields[name] is not None:
                return name, self.entry.fields[name]
            if self.card.get(name) is not None:
                return name, self.card[name]
            if self.raw.get(name) is not None:
                return name, self.raw[name]
        raw_ext = self.raw.get("extensions")
        for e in (_ext(self.entry), raw_ext if isinstance(raw_ext, Mapping) else {}):
            for name in ext:
                if e.get(name) is not None:
                    return f"extensions.{name}", e[name]
        return None, None

    def keys(self, st_name: str, cc_name: str) -> tuple[str, ...]:
        name, value = self.first(st_name, cc_name)
        if value is None:
            return ()
        if isinstance(value, str):          # RisuAI / editor form: "a, b, c"
            return tuple(k for k in (js_trim(p) for p in value.split(",")) if k)
        if not isinstance(value, list):
            raise self.fail(f"expected a list of keys, got {type(value).__name__}", name or st_name)
        for i, k in enumerate(value):
            if not isinstance(k, str):
                raise self.fail(f"expected a string, got {type(k).__name__} {k!r:.40}", f"{name}[{i}]")
        return tuple(value)

    def number(self, *names: str, ext: tuple[str, ...] = ()) -> float | None:
        name, value = self.first(*names, ext=ext)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"expected a number, got {value!r:.40}", name or names[0])
        return value

    def flag(self, *names: str, ext: tuple[str, ...] = ()) -> bool | None:
        _, value = self.first(*names, ext=ext)
        return None if value is None else js_truthy(value)

    def role(self) -> str:
        name, value = self.first("role", ext=("role",))
        if value is None:
            return "system"
        if isinstance(value, str) and js_trim(value).lower() in MESSAGE_ROLES:
            return js_trim(value).lower()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value in ROLE_NUMBERS:
            return ROLE_NUMBERS[int(value)]
        raise self.fail(f"expected a role (system/user/assistant or 0/1/2), got {value!r:.40}",
                        name or "role")


def raw_entry_of(book: Lorebook, entry: Entry) -> Mapping[str, Any] | None:
    """The raw Character Card entry a format reader kept for ``entry`` (None if none)."""
    raws = getattr(getattr(book, "origin", None), "raw_entries", None)
    raw = raws.get(entry.uid) if isinstance(raws, Mapping) else None
    return raw if isinstance(raw, Mapping) else None


def _unedited_missing_enabled(book: Lorebook, entry: Entry, raw: Mapping[str, Any]) -> bool:
    """True when the raw CC entry has no ``enabled`` and ``disable`` is still what the reader
    derived from that absence (the entry was not disabled by an edit since)."""
    if not raw or "enabled" in raw:
        return False
    read = getattr(getattr(book, "origin", None), "read_fields", None)
    fields = read.get(entry.uid) if isinstance(read, Mapping) else None
    return isinstance(fields, Mapping) and fields.get("disable") == entry.fields.get("disable")


def _selective_logic(r: _Reader, used: bool) -> SelectiveLogic | None:
    """The stored selectiveLogic; an unknown value is an error only where it would be used
    (a selective entry with secondary keys), else it reads as absent."""
    name, value = r.first("selectiveLogic", ext=("selectiveLogic",))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in SELECTIVE_LOGICS:
        if not used:
            return None
        # SillyTavern silently never fires such an entry; here it is a located error instead.
        raise r.fail(f"expected 0 (AND ANY), 1 (NOT ALL), 2 (NOT ANY) or 3 (AND ALL), got {value!r:.40}",
                     name or "selectiveLogic")
    return SelectiveLogic(int(value))


def pool_budget(books: "Sequence[SlotBook]") -> tuple[int, str | None, str]:
    """docs/slot-mode.md#slot-pool [decision, revised]: (budget, id of the book it comes from or None for the
    default, the reason in words). The largest budget a book stores wins; books that store
    none take no part; :data:`DEFAULT_TOKEN_BUDGET` applies only when no book stores one."""
    stored = [(b.settings.token_budget, str(b.id)) for b in books
              if b.settings is not None and b.settings.token_budget is not None]
    silent = [str(b.id) for b in books if b.settings is None or b.settings.token_budget is None]
    unstored = f"; {_names(silent)} {'stores' if len(silent) == 1 else 'store'} none" if silent else ""
    if not stored:
        return DEFAULT_TOKEN_BUDGET, None, (
            f"budget {DEFAULT_TOKEN_BUDGET}: the default, as no attached book stores a token_budget")
    budget, book_id = max(stored, key=lambda s: s[0])    # first book wins a tie (attachment order)
    others = [f"{i!r} {t}" for t, i in stored if i != book_id]
    also = f" (also stored: {', '.join(others)})" if others else ""
    return budget, book_id, (f"budget {budget} from book {book_id!r}: the largest stored token_budget"
                             f"{also}{unstored}")


def _names(ids: Sequence[str]) -> str:
    return ", ".join(f"book {i!r}" for i in ids)


def slot_entry_from(entry: Entry, *, pool_index: int, book_index: int, index: int, book: SlotBook,
                    user_icon: bool = False) -> SlotEntry:
    """The lorebook-slot view of ``entry`` (the ``index``-th entry of ``book``).

    Both spellings are read: the entry's stored fields first (SillyTavern names, which the
    CCv3 reader fills from the CC ones, and CC names if an entry carries them), then the
    card-only fields (``Entry.card_fields``: ``priority``, ``use_regex``, top-level
    ``case_sensitive``, ``name``), then the raw CC entry a reader kept in ``book.origin``. Raises
    :class:`LorebookError` naming the entry and field for a value of the wrong type.
    """
    settings = book.settings or BookSettings()
    r = _Reader(entry, raw_entry_of(book.book, entry), book.book.source)
    decorators, content = parse_decorators(r.first("content")[1] or "", user_icon=user_icon)
    raw_id = r.first("id")[1]
    entry_id = raw_id if isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool) else entry.uid
    name = r.first("comment")[1] or r.first("name")[1]
    enabled = not entry.disable if _stored(entry, "disable") else r.flag("enabled")
    if not enabled and _unedited_missing_enabled(book.book, entry, r.raw):
        # [decision] A CC entry without `enabled` is enabled in this mode; SillyTavern's import
        # (and so the reader's `disable`) treats it as disabled (`disable: !entry.enabled`).
        enabled = True
    order = r.number("order", "insertion_order")
    order = 100 if order is None else order
    stored_priority = r.number("priority")
    # [decision] docs/slot-mode.md#slot-entries: without a priority the entry's order is its priority. @@order
    # changes placement only (docs/slot-mode.md#slot-gates), so the default uses the stored order.
    priority = stored_priority if stored_priority is not None else order
    case_sensitive = r.flag("case_sensitive", "caseSensitive", ext=("case_sensitive",))
    whole_words = r.flag("matchWholeWords", ext=("match_whole_words",))
    use_regex_value = r.first("use_regex")[1]
    use_regex = use_regex_value if isinstance(use_regex_value, bool) else None
    d = decorators
    selective = bool(r.flag("selective"))             # missing = off (CC import rule, docs/sillytavern-mode.md#st-entries)
    secondary_keys = r.keys("keysecondary", "secondary_keys")
    return SlotEntry(
        pool_index=pool_index, book_index=book_index, index=index, book_id=str(book.id),
        id=entry_id, name=name if isinstance(name, str) else "", entry=entry,
        keys=r.keys("key", "keys"), secondary_keys=secondary_keys,
        content=content, decorators=d,
        enabled=True if enabled is None else enabled,
        constant=bool(r.flag("constant")),
        selective=selective,
        selective_logic=_selective_logic(r, used=selective and bool(secondary_keys)),
        case_sensitive=bool(case_sensitive),
        whole_words=d.whole_words if d.whole_words is not None else bool(whole_words),
        use_regex=use_regex,
        order=d.order if d.order is not None else order,
        priority=d.priority if d.priority is not None else priority,
        stored_priority=stored_priority,
        role=d.role if d.role is not None else r.role(),
        scan_depth=d.scan_depth if d.scan_depth is not None else settings.scan_depth,
        feeds_recursion=d.recursive if d.recursive is not None else settings.recursive_scanning,
    )
