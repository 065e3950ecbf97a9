"""Compiled keys' tables as numpy columns, and lazy sequences over them.

A compiled set of keys holds no Python object per plan or hit set: :class:`TableBuilder`
writes each entry's plans, content hits and the vid table straight into CSR columns (offsets
plus int32 values) as the compiler walks the entries, and :func:`lazy_tables` gives them
back as read-only sequences that build an item the first time a scan asks for it. The
compact form (``match.lsc``) writes the columns as they are.
"""
from __future__ import annotations

import weakref
from array import array
from typing import Any, Callable, Iterator, Sequence, cast

import numpy as np

__all__ = ["TableBuilder", "TABLE_COLUMNS", "build_columns", "lazy_tables", "lazy_sequence"]

_UNBUILT: Any = object()


class _Lazy(Sequence):
    """A read-only sequence whose item ``i`` is ``make(i)``, built once on first use.

    The items built so far are kept in a dict: a turn asks for a few of a large book's
    plans and hit sets, and a list of ``n`` empty slots per table cost 13 MB at 100k entries.
    ``whole``: every item at once, in order (what iterating reads: one call, not one per item)."""

    __slots__ = ("_n", "_make", "_items", "_whole", "_found", "_weak")

    def __init__(self, n: int, make: Callable[[int], Any], weak: bool = False,
                 whole: Callable[[], Sequence[Any]] | None = None) -> None:
        self._n = n
        self._make = make
        self._items: Any = weakref.WeakValueDictionary() if weak else {}
        self._whole = whole
        self._weak = weak
        # what the path a turn takes reads: the items' dict, or the weak dict's own dict of
        # references (read without a Python-level call; the weak dict still adds and drops them)
        self._found: dict[Any, Any] = cast(Any, self._items).data if weak else cast(Any, self._items)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if type(i) is slice:           # before the dict: a slice is hashable from Python 3.12
            return [self[j] for j in range(*i.indices(self._n))]
        found = self._found.get(i, _UNBUILT)       # built already (the path a turn takes)
        if found is not _UNBUILT:
            if not self._weak:
                return found
            found = found()
            if found is not None:
                return found
        i = range(self._n)[i]          # IndexError / negative indexes as a list does
        item = self._items.get(i, _UNBUILT)
        if item is _UNBUILT:
            item = self._items[i] = self._make(i)
        return item

    def __iter__(self) -> Iterator[Any]:
        if self._whole is not None:
            return iter(self._whole())
        return self._each()

    def _each(self) -> Iterator[Any]:
        for i in range(self._n):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Sequence, _Lazy)) and not isinstance(other, (str, bytes)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<lazy sequence of {self._n}>"

    def __reduce__(self):
        return (tuple, (tuple(self),))


def _csr(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    if rows:
        np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.fromiter((v for r in rows for v in r), dtype=np.int32, count=int(offsets[-1]))
    return offsets, values


def _csr_pairs(n_rows: int, rows: array[int], values: array[int]) -> tuple[np.ndarray, np.ndarray]:
    # Row r lists the values paired with r, ascending and distinct (values come ascending).
    r = np.frombuffer(rows, dtype=np.int32) if len(rows) else np.zeros(0, np.int32)
    v = np.frombuffer(values, dtype=np.int32) if len(values) else np.zeros(0, np.int32)
    order = np.argsort(r, kind="stable")
    r, v = r[order], v[order]
    keep = np.ones(len(r), dtype=bool)
    keep[1:] = (r[1:] != r[:-1]) | (v[1:] != v[:-1])
    r, v = r[keep], v[keep]
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n_rows), out=offsets[1:])
    return offsets, v.astype(np.int32)


def _csr_rows(offsets: np.ndarray, values: np.ndarray, wrap: Callable[[list[int]], Any]) -> _Lazy:
    def make(i: int) -> Any:
        return wrap(values[offsets[i]:offsets[i + 1]].tolist())
    return _Lazy(len(offsets) - 1, make)


_NO_HITS: frozenset[int] = frozenset()


def _frozen_hits(items: list[int]) -> frozenset[int]:
    return frozenset(items) if items else _NO_HITS


class TableBuilder:
    """Builds compiled keys' tables as columns one entry at a time, so compiling
    never holds a Python object per plan or hit set (they would stay in the heap)."""

    def __init__(self) -> None:
        self.specials: dict[Any, int] = {}
        self.plans = _PlanColumns(self)
        self.subs = _PlanColumns(self)
        self.sub_index = array("i")
        self.hit_offsets = array("q", [0])
        self.hit_values = array("i")
        self.spec_cols: dict[str, np.ndarray] = {}

    def ref(self, r: Any) -> int:
        if type(r) is int:
            return r                      # a vid, or SKIP (-1)
        return -2 - self.specials.setdefault(r, len(self.specials))

    def add_plans(self, plan: Any, sub: Any) -> None:
        """The entry's plan without and with a substitution hook (often the same object)."""
        self.plans.add(plan)
        if sub is plan or sub == plan:
            self.sub_index.append(-1)
        else:
            self.sub_index.append(len(self.subs.flags))
            self.subs.add(sub)

    def add_hits(self, hits: frozenset[int]) -> None:
        self.hit_values.extend(sorted(hits))
        self.hit_offsets.append(len(self.hit_values))

    def add_specs(self, specs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """The key variants (text, case-sensitive, bounded); returns (UTF-8 text, offsets)."""
        spec_text = [sp[0].encode("utf-8", "surrogatepass") for sp in specs]
        cols = self.spec_cols = {}
        cols["spec_text"] = np.frombuffer(b"".join(spec_text), dtype=np.uint8)
        spec_off = np.zeros(len(spec_text) + 1, dtype=np.int64)
        if spec_text:
            np.cumsum([len(t) for t in spec_text], out=spec_off[1:])
        cols["spec_offsets"] = spec_off
        cols["spec_flags"] = np.array([(1 if cs else 0) | (2 if b else 0) for _, cs, b in specs], dtype=np.uint8)
        return cols["spec_text"], spec_off

    def finish(self, specs: Sequence[Any] | None, vid_entries: Sequence[Sequence[int]] | None = None,
               *, vid_pairs: tuple[array[int], array[int]] | None = None
               ) -> tuple[dict[str, np.ndarray], list[Any]]:
        """The columns (``specs``: None when given to :meth:`add_specs` already). The entries of
        each vid come as rows, or as ``vid_pairs`` (vids, entries), one pair per primary key in
        entry order (a pair per key costs 8 bytes; a list per vid took ~45 MB at 100k entries)."""
        if specs is not None:
            self.add_specs(specs)
        cols: dict[str, np.ndarray] = dict(self.spec_cols)
        for name, pc in (("plans", self.plans), ("sub", self.subs)):
            cols[f"{name}_offsets"] = np.array(pc.offsets, dtype=np.int64)
            cols[f"{name}_values"] = np.array(pc.values, dtype=np.int32)
            cols[f"{name}_flags"] = np.frombuffer(bytes(pc.flags), dtype=np.uint8)
        cols["sub_index"] = np.array(self.sub_index, dtype=np.int32)
        if vid_pairs is not None:
            n_specs = len(cols["spec_offsets"]) - 1
            cols["vid_offsets"], cols["vid_values"] = _csr_pairs(n_specs, *vid_pairs)
        else:
            cols["vid_offsets"], cols["vid_values"] = _csr(vid_entries or ())
        cols["hit_offsets"] = np.array(self.hit_offsets, dtype=np.int64)
        cols["hit_values"] = np.array(self.hit_values, dtype=np.int32)
        return cols, list(self.specials)


class _PlanColumns:
    # Per plan four rows (primary as key-index/ref pairs, secondary, score primary, score
    # secondary) in one CSR, and a flags byte (1: simple, 2: score_simple).
    def __init__(self, owner: TableBuilder) -> None:
        self.ref = owner.ref
        self.offsets = array("q", [0])
        self.values = array("i")
        self.flags = bytearray()

    def add(self, p: Any) -> None:
        ref, values, offsets = self.ref, self.values, self.offsets
        for k, r in p.primary:
            values.append(k)
            values.append(ref(r))
        offsets.append(len(values))
        for row in (p.secondary, p.score_primary, p.score_secondary):
            values.extend([ref(r) for r in row])
            offsets.append(len(values))
        self.flags.append((1 if p.simple else 0) | (2 if p.score_simple else 0))


def _plan_seq(offsets: np.ndarray, values: np.ndarray, flags: np.ndarray, specials: list[Any],
              plan_type: Callable[..., Any]) -> _Lazy:
    def refs(j: int) -> list[Any]:
        return [v if v >= -1 else specials[-2 - v] for v in values[offsets[j]:offsets[j + 1]].tolist()]

    def make(i: int) -> Any:
        j = 4 * i
        pri = refs(j)
        f = int(flags[i])
        return plan_type(tuple(zip(pri[0::2], pri[1::2])), tuple(refs(j + 1)), bool(f & 1),
                         tuple(refs(j + 2)), tuple(refs(j + 3)), bool(f & 2))
    return _Lazy(len(flags), make)


TABLE_COLUMNS = ("spec_text", "spec_offsets", "spec_flags", "plans_offsets", "plans_values", "plans_flags",
                 "sub_index", "sub_offsets", "sub_values", "sub_flags", "vid_offsets", "vid_values",
                 "hit_offsets", "hit_values")


def build_columns(specs: Sequence[Any], plans: Sequence[Any], plans_sub: Sequence[Any],
                  vid_entries: Sequence[Sequence[int]], content_hits: Sequence[frozenset[int]]
                  ) -> tuple[dict[str, np.ndarray], list[Any]]:
    """A compiled book's key tables as numpy columns, and its special keys (what a plan ref
    ``-2 - i`` points at)."""
    tb = TableBuilder()
    for p, q in zip(plans, plans_sub):
        tb.add_plans(p, q)
    for h in content_hits:
        tb.add_hits(h)
    return tb.finish(specs, vid_entries)


def lazy_tables(cols: dict[str, np.ndarray], specials: list[Any], plan_type: Callable[..., Any]
                ) -> tuple[_Lazy, _Lazy, _Lazy, _Lazy, _Lazy]:
    """(specs, plans, plans_sub, vid_entries, content_hits) as lazy sequences over ``cols``.

    ``plan_type`` builds one entry plan (``match.compile.EntryPlan``: this module sits below
    the compiler, which hands it its types).
    """
    spec_blob, spec_off, spec_flags = cols["spec_text"], cols["spec_offsets"], cols["spec_flags"]

    def make_spec(i: int) -> tuple[str, bool, bool]:
        f = int(spec_flags[i])
        text = spec_blob[spec_off[i]:spec_off[i + 1]].tobytes().decode("utf-8", "surrogatepass")
        return (text, bool(f & 1), bool(f & 2))
    plans = _plan_seq(cols["plans_offsets"], cols["plans_values"], cols["plans_flags"], specials, plan_type)
    subs = _plan_seq(cols["sub_offsets"], cols["sub_values"], cols["sub_flags"], specials, plan_type)
    sub_index = cols["sub_index"]
    plans_sub = _Lazy(len(sub_index), lambda i: plans[i] if sub_index[i] < 0 else subs[int(sub_index[i])])
    return (_Lazy(len(spec_flags), make_spec), plans, plans_sub,
            _csr_rows(cols["vid_offsets"], cols["vid_values"], tuple),
            _csr_rows(cols["hit_offsets"], cols["hit_values"], _frozen_hits))




def lazy_sequence(n: int, make: Callable[[int], Any], *, weak: bool = False,
                  whole: Callable[[], Sequence[Any]] | None = None) -> Sequence[Any]:
    """A read-only sequence of ``n`` items whose item ``i`` is ``make(i)``, built once on first use.

    ``weak``: an item is kept only while something else holds it (its type must take weak
    references), and built again when asked for after that: a loaded book's entries, which the
    engines over it hold in their own entry records, so an entry a turn built goes with the
    engine instead of staying with the book for its life (a book cache of small books held
    the entries of every turn it had served). ``whole``: all ``n`` items at once, in order, for
    iterating (an immutable sequence of the same items ``make`` gives: a loaded book's uids,
    decoded once)."""
    return _Lazy(n, make, weak, whole)
