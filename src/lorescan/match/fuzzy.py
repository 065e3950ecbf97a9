"""Typo-tolerant ("fuzzy") keys (docs/improved-profile.md#fuzzy-keys, docs/slot-mode.md#slot-fuzzy).

An entry opts in with ``extensions.lorescan_fuzzy: 85`` (a book opts all its entries in with
the same field in the book's ``extensions``; ``@@fuzzy 85`` in the content's decorator header
does it for one entry and wins over both). A plain key of such an entry then also matches
a *word* of the scanned text whose similarity to the key is at or above the threshold:

- similarity is ``rapidfuzz.fuzz.ratio`` (the normalised Indel similarity, 0-100) of the
  key and the word, both lowercased (``str.lower``, as the exact path) unless the key is
  case-sensitive, in which case they are compared as written;
- words are maximal runs of word characters of the Unicode whole-word rule (letters,
  marks, numbers, connector punctuation, ZWNJ/ZWJ); fuzzy matching always compares whole
  words, whatever the entry's whole-word setting (which still governs the exact match);
- a key of n words is compared with every run of n consecutive words of one line of the
  text; both sides are reduced to their words joined by one space, so ``Mr. Smith`` and
  ``Mr Smith`` are the same two words. A run never spans a line break, so the hits of a
  "\\n"-joined text are the union of its lines' hits (recursion chunks stay a union);
- regex keys, macro keys (``{{...}}`` under a substitution hook) and keys without any
  word character are never fuzzy; they match exactly as before.

Only the improved word rule has words in this sense: under SillyTavern's ASCII word rule
(``MatchOptions.word_chars == "ascii"``, the ``sillytavern`` profile) the field and the
decorator are ignored and matching stays exact.

The compiler gives every fuzzy key a vid of its own (so an exact key of another entry with
the same text is not made fuzzy) and records it in a :class:`FuzzyIndex` that the key
matcher runs after the automaton: a fuzzy vid is hit when its exact variant is hit, or when
a word (run of words) of the text is similar enough. The matcher's result is cached per
text like any hit set (``ChatScan``), so a chat turn compares only the new message's words.
A book without fuzzy keys has no index, never imports rapidfuzz and pays one ``if`` per
scanned text.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import regex

from ..errors import LorebookError

__all__ = ["FIELD", "FuzzyIndex", "FuzzyKey", "FuzzyTooCostly", "FuzzyWork", "book_threshold", "entry_threshold", "parse_threshold",
           "decorator_threshold", "fuzzy_field", "key_words", "text_words"]

FIELD = "lorescan_fuzzy"          # the extension field, on an entry or on the book
OFF = 0.0                         # an explicit "not fuzzy" (false / @@fuzzy off), wins over a book default
# The lowest threshold: below 50 a word reaches a key sharing under half its letters, so
# nearly every word hits nearly every key (random 7-letter words, 2,000 entries: 188 MB and
# 2 s to compile and run at 50, 584 MB and 13 s at 40; at 1 every content hit every entry,
# entries x entries hit sets: a 383 KB book reached 5.7 GB). Such a threshold is refused.
MIN_THRESHOLD = 50.0
_CELLS = 4_000_000                 # words x keys compared in one cdist call (bounds its matrix)

# The Unicode whole-word rule's word characters (_wordchars.MODEL_UNICODE, the kernels' table).
_WORD = regex.compile(r"[\p{L}\p{M}\p{N}\p{Pc}\u200c\u200d]+")


def parse_threshold(value: Any, *, source: str, entry: Any = None, field: str = f"extensions.{FIELD}"
                    ) -> float | None:
    """A stored fuzzy setting: None (absent or null: inherit), ``OFF`` (false) or a threshold
    in [``MIN_THRESHOLD``, 100]. Anything else raises :class:`LorebookError` naming the source, entry and field."""
    if value is None:
        return None
    if value is False:
        return OFF
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not MIN_THRESHOLD <= value <= 100:
        raise LorebookError(f"a fuzzy threshold is a number from {MIN_THRESHOLD:g} to 100 (or false; a lower one "
                            f"makes nearly every word a hit), got {value!r:.40}",
                            source=source, entry=entry, field=field)
    return float(value)


def _ext_value(fields: Mapping[str, Any]) -> Any:
    ext = fields.get("extensions")
    return ext.get(FIELD) if isinstance(ext, Mapping) else None


def book_threshold(book: Any) -> float | None:
    """The book-level default (``extensions.lorescan_fuzzy`` of the book), validated."""
    fields = getattr(book, "fields", None)
    if not isinstance(fields, Mapping):
        return None
    return parse_threshold(_ext_value(fields), source=getattr(book, "source", "<memory>"))


def decorator_threshold(args: Sequence[str]) -> float | str:
    """The value of a ``@@fuzzy`` decorator's arguments, or why it is rejected."""
    if len(args) == 1 and args[0].lower() == "off":
        return OFF
    if len(args) == 1:
        try:
            value = float(args[0])
        except ValueError:
            value = math.nan
        if math.isfinite(value) and MIN_THRESHOLD <= value <= 100:
            return value
    return f"expects a threshold from {MIN_THRESHOLD:g} to 100, or off"


def _st_decorator(content: str) -> float | None:
    # The leading "@@" lines of a SillyTavern-mode content (js/stdecorators.py drops the
    # unknown ones from the prompt); the first @@fuzzy line counts, a rejected one is ignored.
    for line in content.split("\n"):
        if not line.startswith("@@"):
            break
        body = line[2:].strip()
        if body == "fuzzy" or body.startswith(("fuzzy ", "fuzzy\t")):
            value = decorator_threshold([a.strip() for a in body[5:].split(",") if a.strip()])
            if not isinstance(value, str):
                return value
    return None


def entry_threshold(entry: Any, book_default: float | None, source: str) -> float | None:
    """The fuzzy threshold of ``entry`` (None: exact keys only). A ``@@fuzzy`` decorator line
    wins over the entry's ``extensions.lorescan_fuzzy``, which wins over the book's default."""
    value = None
    content = entry.content
    if content.startswith("@@"):
        value = _st_decorator(content)
    if value is None:
        value = parse_threshold(_ext_value(entry.fields), source=source, entry=entry.uid)
    if value is None:
        value = book_default
    return value or None          # OFF -> None


def fuzzy_field(decorator: float | None, entry: Any, book: Any) -> dict[str, Any]:
    """For an entry handed to the compiler on another book's behalf (the slot pool): its
    resolved setting as an ``extensions`` field (``{}`` when it has none). ``decorator``:
    the entry's ``@@fuzzy`` value (slot/decorators.py), which wins over the entry's field,
    which wins over ``book``'s default."""
    value = decorator
    if value is None:
        value = parse_threshold(_ext_value(entry.fields), source=getattr(book, "source", "<memory>"),
                                entry=entry.uid)
    if value is None:
        value = book_threshold(book)
    return {} if value is None else {"extensions": {FIELD: value or False}}


def key_words(key: str) -> tuple[str, ...]:
    """The words of a key (or of any text) under the Unicode word rule."""
    return tuple(_WORD.findall(key))


def text_words(text: str) -> list[list[str]]:
    """The words of ``text``, line by line (a run of words never spans a line break)."""
    if "\n" not in text:
        return [_WORD.findall(text)]
    return [_WORD.findall(line) for line in text.split("\n")]


FuzzyKey = tuple[int, int, str, bool, float]     # (fuzzy vid, exact vid, key as matched, case-sensitive, threshold)


class FuzzyIndex:
    """The fuzzy keys of one key matcher, grouped by (word count, case-sensitive).

    ``hits(text, exact)`` returns the fuzzy vids hit in ``text``, given the exact hit set.
    Immutable after construction; safe to share between threads.
    """

    __slots__ = ("keys", "aliases", "groups", "_cdist", "_ratio", "_np")

    def __init__(self, keys: Iterable[FuzzyKey]) -> None:
        from rapidfuzz import fuzz, process  # import-cost: only books with fuzzy keys load rapidfuzz
        self._np, self._cdist, self._ratio = np, process.cdist, fuzz.ratio
        self.keys: tuple[FuzzyKey, ...] = tuple(keys)
        aliases: dict[int, list[int]] = {}
        grouped: dict[tuple[int, bool], list[tuple[int, str, float, int]]] = {}
        for fvid, evid, text, cs, threshold in self.keys:
            aliases.setdefault(evid, []).append(fvid)
            words = key_words(text if cs else text.lower())
            if words:
                joined = " ".join(words)
                grouped.setdefault((len(words), cs), []).append((len(joined), joined, threshold, fvid))
        self.aliases = {e: tuple(f) for e, f in aliases.items()}
        # per group: key strings sorted by length, their lengths, thresholds, fuzzy vids, lowest threshold
        self.groups: list[tuple[int, bool, list[str], Any, Any, Any, float]] = []
        for (n, cs), rows in sorted(grouped.items()):
            rows.sort()
            self.groups.append((n, cs, [r[1] for r in rows], np.array([r[0] for r in rows], dtype=np.int64),
                                np.array([r[2] for r in rows], dtype=np.float64),
                                np.array([r[3] for r in rows], dtype=np.int64), min(r[2] for r in rows)))

    def to_bytes(self) -> bytes:
        """The index as a KeyMatcher table (UTF-8 JSON, padded to whole 32-bit words)."""
        data = json.dumps([list(k) for k in self.keys], ensure_ascii=False, separators=(",", ":")).encode()
        return data + b" " * (-len(data) % 4)

    @classmethod
    def from_bytes(cls, data: bytes) -> "FuzzyIndex":
        return cls((int(f), int(e), str(t), bool(cs), float(th)) for f, e, t, cs, th in json.loads(data))

    def hits(self, text: str, exact: frozenset[int], work: "FuzzyWork | None" = None) -> list[int]:
        """The fuzzy vids hit in ``text`` (``exact``: the text's exact hit set). With ``work``:
        past its limit, only the vids hit through their exact variants (``work.cut`` counts it)."""
        try:
            return self.hits_many([text], [exact], None, work)[0]
        except FuzzyTooCostly:
            assert work is not None
            work.cut += 1
            return self.hits_many([text], [exact], None, _NO_WORK)[0]

    def hits_many(self, texts: Sequence[str], exacts: Sequence[frozenset[int]],
                  memo: dict[tuple[int, str], tuple[int, ...]] | None = None,
                  work: "FuzzyWork | None" = None) -> list[list[int]]:
        """:meth:`hits` for several texts at once: each distinct word (run of words) of all of
        them is compared with the keys once. ``memo`` (word group and gram -> fuzzy vids), when
        given, carries those answers across calls: compiling a book passes one for all of its
        contents, whose vocabulary repeats from entry to entry. ``work``, when given, is charged
        the comparisons before they are made (:class:`FuzzyWork` raises past its limit)."""
        out: list[list[int]] = []
        aliases = self.aliases
        for exact in exacts:
            row: list[int] = []
            for v in exact:
                found = aliases.get(v)
                if found is not None:
                    row.extend(found)
            out.append(row)
        if not self.groups or work is _NO_WORK:
            return out
        memo = {} if memo is None else memo
        lines_of = [text_words(t) for t in texts]
        lowered_of: list[list[list[str]]] | None = None
        for gi, (n, cs, keys, lengths, thresholds, fvids, tmin) in enumerate(self.groups):
            if cs:
                source = lines_of
            else:
                if lowered_of is None:
                    lowered_of = [[[w.lower() for w in line] for line in lines] for lines in lines_of]
                source = lowered_of
            per_text = [{" ".join(line[i:i + n]) for line in lines for i in range(len(line) - n + 1)}
                        for lines in source]
            new = list({g for grams in per_text for g in grams if (gi, g) not in memo})
            if new:
                bands = list(self._bands(new, lengths, tmin))
                if work is not None:
                    work.charge(sum(len(rows) * (hi - lo) for _, rows, lo, hi in bands))
                for g, found in zip(new, self._match_each(new, keys, bands, thresholds, fvids, tmin)):
                    memo[gi, g] = found
            for row, grams in zip(out, per_text):
                hit: set[int] = set()
                for g in grams:
                    found = memo[gi, g]
                    if found:
                        hit.update(found)
                row.extend(hit)
        return out

    def _bands(self, grams: list[str], lengths: Any, tmin: float) -> Iterator[tuple[int, list[int], int, int]]:
        # Per gram length: (length, the grams' indexes, lo, hi): the slice of keys (sorted by length)
        # a gram can reach. ratio(a, b) <= 200 * min(la, lb) / (la + lb), so a word of length L
        # can only reach tmin against keys of length in [L * t / (200 - t), L * (200 - t) / t].
        np = self._np
        by_length: dict[int, list[int]] = {}
        for j, g in enumerate(grams):
            by_length.setdefault(len(g), []).append(j)
        low_f, high_f = tmin / (200.0 - tmin), (200.0 - tmin) / tmin
        for length, rows in by_length.items():
            lo = int(np.searchsorted(lengths, math.floor(length * low_f), side="left"))
            hi = int(np.searchsorted(lengths, math.ceil(length * high_f), side="right"))
            if lo < hi:
                yield length, rows, lo, hi

    def _match_each(self, grams: list[str], keys: list[str], bands: list[tuple[int, list[int], int, int]],
                    thresholds: Any, fvids: Any, tmin: float) -> list[tuple[int, ...]]:
        # Per gram, the fuzzy vids it reaches (only keys of a possible length are compared:
        # ``bands`` is :meth:`_bands` of ``grams``).
        np = self._np
        found: list[tuple[int, ...]] = [()] * len(grams)
        cutoff = max(0.0, tmin - 0.5)       # a prefilter only: the exact test is the ">=" below
        for _, rows, lo, hi in bands:
            step = max(1, _CELLS // (hi - lo))
            for r0 in range(0, len(rows), step):
                chunk = rows[r0:r0 + step]
                scores = self._cdist([grams[j] for j in chunk], keys[lo:hi], scorer=self._ratio,
                                     score_cutoff=cutoff, dtype=np.float64)
                hit_r, hit_c = np.nonzero(scores >= thresholds[lo:hi])
                for r, c in zip(hit_r.tolist(), hit_c.tolist()):
                    found[chunk[r]] += (int(fvids[lo + c]),)
        return found


class FuzzyTooCostly(Exception):
    """Raised by :meth:`FuzzyWork.charge` past the limit (the caller names the book)."""

    def __init__(self, needed: int, limit: int) -> None:
        super().__init__(needed, limit)
        self.needed, self.limit = needed, limit


class FuzzyWork:
    """Word-to-key comparisons a batch of :meth:`FuzzyIndex.hits_many` calls may make.

    Compiling a book charges one for all of its contents (past the limit the book is
    refused); a scan charges one for all of its texts (``Limits.fuzzy_comparisons_per_scan``):
    a text whose comparisons would pass the limit is matched by its fuzzy keys' exact
    variants only, counted in ``cut`` and reported (:meth:`describe`), and its hit set is
    not cached, as a cut-off regex is not. The measure is a count, so whether a text is cut
    depends on the scan's texts and the book, never on the machine's load.
    """

    __slots__ = ("limit", "used", "cut")

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self.cut = 0                # texts whose fuzzy comparisons were refused

    @property
    def cuts(self) -> object:
        """Texts cut so far: a cache stores a result only when this did not change."""
        return self.cut

    def charge(self, comparisons: int) -> None:
        """Count ``comparisons`` about to be made; past the limit raise :class:`FuzzyTooCostly`
        (and count nothing: what was refused is not spent)."""
        if self.used + comparisons > self.limit:
            raise FuzzyTooCostly(self.used + comparisons, self.limit)
        self.used += comparisons

    def describe(self) -> str:
        """The report line of a scan that cut fuzzy matching off (empty when none was cut)."""
        if not self.cut:
            return ""
        texts = "one scanned text" if self.cut == 1 else f"{self.cut} scanned texts"
        return (f"fuzzy matching was cut off in {texts}: the scan's word-to-key comparisons would pass "
                f"{self.limit:,} (limits.fuzzy_comparisons_per_scan; {self.used:,} made); its fuzzy keys "
                f"matched only exactly there this turn")


_NO_WORK = FuzzyWork(0)        # hits_many with this: the exact aliases only, no comparison
