"""Which entry of a second version of the books is which entry of the first, for
``replay-batch --compare``: by identity, never by file name.

An entry's identity is ``(book name, uid)`` (docs/sillytavern-mode.md#st-entries). A book's
name comes from its file (SillyTavern names a world after it), so an edited copy saved as
``weyland-v2.json`` is another book by name: books are paired by name first, and the rest in
the order given (the i-th ``--compare`` book is a version of the i-th book). Within a pair of
books, entries are paired by uid; only the entries whose uid is in one version alone are then
paired by content similarity (comment, keys and content), best pairs first, so a book whose
uids were renumbered still compares entry to entry. :class:`Pairing` says which way each
pair was made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..model import Entry, Lorebook

__all__ = ["Pairing", "pair_versions", "entry_name", "uid_order", "CONTENT_SCORE"]

CONTENT_SCORE = 80
"""The least similarity (0-100, rapidfuzz's ``ratio``) at which two entries whose uids differ
count as versions of one entry."""

EntryKey = tuple[str, str]            # (book name, uid as text): the rows' book and entry columns


@dataclass(frozen=True, slots=True)
class Pairing:
    """How the compare version's entries map onto the base version's.

    ``to_base``: compare ``(book, uid)`` -> base ``(book, uid)`` for every paired entry;
    ``by``: for each of those, ``"uid"`` or ``"content"``; ``books``: one record per pair of
    books (see :meth:`to_json`).
    """

    to_base: dict[EntryKey, EntryKey]
    by: dict[EntryKey, str]
    books: tuple[dict[str, Any], ...]

    def base_key(self, key: EntryKey) -> EntryKey:
        """The base identity of a compare entry (its own when it has no counterpart)."""
        return self.to_base.get(key, key)

    def to_json(self) -> dict[str, Any]:
        """Returns: ``{"books": [{"base", "compare", "books_by", "by_uid", "by_content",
        "only_base", "only_compare"}, ...]}``: per pair of books, how they were paired (``name``
        or ``position``), how many entries were paired by uid and by content, and the uids
        left without a counterpart on either side."""
        return {"books": [dict(b) for b in self.books]}


def entry_name(entry: Any) -> str:
    """An entry's display name: its comment (or name), else its first key, else ``#uid``."""
    name = (getattr(entry, "comment", "") or getattr(entry, "name", "") or "").strip()
    if not name and entry.key:
        name = str(entry.key[0])
    return name or f"#{entry.uid}"


def uid_order(uid: str) -> tuple[int, int, str]:
    """A sort key for uids as text: numbers in numeric order (``2`` before ``10``), then the rest."""
    return (0, int(uid), "") if uid.isdigit() else (1, 0, uid)


def _text(e: Entry) -> str:
    return "\n".join([e.comment or "", "\x1f".join(e.key), e.content or ""])


def _by_content(base: list[Entry], other: list[Entry]) -> list[tuple[Entry, Entry]]:
    """Pairs of similar entries, best first, each entry used once."""
    if not base or not other:
        return []
    from rapidfuzz import fuzz, process  # import-cost: loaded only when uids changed between versions
    scores = process.cdist([_text(e) for e in base], [_text(e) for e in other], scorer=fuzz.ratio,
                           score_cutoff=CONTENT_SCORE, dtype="uint8")
    found = sorted(((int(scores[i, j]), i, j) for i, j in zip(*scores.nonzero())), key=lambda t: (-t[0], t[1], t[2]))
    used_a: set[int] = set()
    used_b: set[int] = set()
    out = []
    for _, i, j in found:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            out.append((base[i], other[j]))
    return out


def _pair_books(base: Sequence[Lorebook], other: Sequence[Lorebook]) -> list[tuple[Lorebook | None, Lorebook | None, str]]:
    names = {b.name: b for b in base}
    by_name = {o.name for o in other if o.name in names}
    pairs: list[tuple[Lorebook | None, Lorebook | None, str]] = [(names[o.name], o, "name") for o in other
                                                                  if o.name in by_name]
    rest_base = [b for b in base if b.name not in by_name]
    rest_other = [o for o in other if o.name not in by_name]
    for i in range(max(len(rest_base), len(rest_other))):
        pairs.append((rest_base[i] if i < len(rest_base) else None, rest_other[i] if i < len(rest_other) else None,
                      "position"))
    return pairs


def pair_versions(base: Sequence[Lorebook], other: Sequence[Lorebook]) -> Pairing:
    """Pair the entries of two versions of the books (see the module docstring)."""
    to_base: dict[EntryKey, EntryKey] = {}
    by: dict[EntryKey, str] = {}
    books = []
    for a, b, books_by in _pair_books(base, other):
        a_entries = {str(e.uid): e for e in a.entries} if a is not None else {}
        b_entries = {str(e.uid): e for e in b.entries} if b is not None else {}
        record: dict[str, Any] = {"base": a.name if a is not None else None,
                                  "compare": b.name if b is not None else None, "books_by": books_by,
                                  "by_uid": 0, "by_content": 0}
        if a is not None and b is not None:
            for uid in b_entries:
                if uid in a_entries:
                    to_base[(b.name, uid)] = (a.name, uid)
                    by[(b.name, uid)] = "uid"
                    record["by_uid"] += 1
            left_a = [e for uid, e in a_entries.items() if uid not in b_entries]
            left_b = [e for uid, e in b_entries.items() if uid not in a_entries]
            for ea, eb in _by_content(left_a, left_b):
                to_base[(b.name, str(eb.uid))] = (a.name, str(ea.uid))
                by[(b.name, str(eb.uid))] = "content"
                record["by_content"] += 1
        paired_base = {v[1] for k, v in to_base.items() if b is not None and k[0] == b.name}
        record["only_base"] = [uid for uid in a_entries if uid not in paired_base]
        record["only_compare"] = [uid for uid in b_entries if b is None or (b.name, uid) not in to_base]
        books.append(record)
    return Pairing(to_base, by, tuple(books))
