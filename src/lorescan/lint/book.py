"""Checks that look at several entries, or at an entry's flags: recursion (LS3xx), flags
(LS4xx), budget (LS5xx), duplicate keys (LS6xx), keys inside common words (LS7xx)."""
from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Iterable, Iterator, Sequence

from ..js.regex import _split_regex_key  # the key's shape alone (no compile)
from ..js.text import has_js_whitespace, js_lower, js_trim
from ..st.compiled import CompiledBook
from ..match.keys import RegexKey
from ..match.regexscope import RegexBudget
from ..model import Entry
from .words import Vocabulary, hidden_in_vocabulary, hidden_in_words, is_book_word

__all__ = ["recursion_graph", "recursion_budget", "check_recursion", "check_recursion_budget", "check_flags", "check_budget", "check_duplicates",
           "check_common_words"]

# (entry index or None, code, field, message, suggestion)
Raw = tuple["int | None", str, "str | None", str, str]

INDEX_SHARE = 0.5          # an entry whose content triggers more than this share of the keyed entries
INDEX_MIN = 5              # ... and at least this many
NEAR_SCORE = 85            # rapidfuzz ratio at or above which two different keys are near-duplicates
NEAR_MIN_LENGTH = 5


def recursion_graph(compiled: CompiledBook, regex_ms: float = 20.0, total_ms: float = 10_000.0,
                    budget: RegexBudget | None = None) -> list[list[int]]:
    """``edges[i]``: the entries whose primary keys occur in entry i's content, as recursion
    sees it: i neither disabled nor ``preventRecursion``, the target neither disabled,
    constant nor ``excludeRecursion``. Secondary keys are not looked at (an edge says
    "may trigger"). Plain keys use the compiled content hits; regex keys are run on the
    content under a nominal budget (:meth:`JSRegex.cost`, no clock): ``regex_ms`` an
    evaluation, ``regex_ms`` per entry for the book but never more than ``total_ms``
    together (the book-wide bound does not grow with the number of entries). ``budget``: a
    fresh :class:`RegexBudget` to use instead, whose ``cut`` tells the caller which regex keys
    were not run (their edges are missing)."""
    entries, keys = compiled.entries, compiled.keys
    n = len(entries)
    if budget is None:
        budget = recursion_budget(n, regex_ms, total_ms)
    targetable = [not (e.disable or e.constant or e.exclude_recursion) for e in entries]
    special = [j for j in keys.always if targetable[j]]
    edges: list[list[int]] = []
    for i, e in enumerate(entries):
        if e.disable or e.prevent_recursion or not e.content:
            edges.append([])
            continue
        hits = keys.content_hits[i]
        candidates: set[int] = set(special)
        for v in hits:
            candidates.update(keys.vid_entries[v])
        out = []
        for j in sorted(candidates):
            if j == i or not targetable[j]:
                continue
            for _, ref in keys.plans[j].primary:
                if type(ref) is int:
                    if ref in hits:
                        break
                elif type(ref) is RegexKey and budget.search(ref.rx, "\x01" + e.content):
                    break
            else:
                continue
            out.append(j)
        edges.append(out)
    return edges


def recursion_budget(entries: int, regex_ms: float = 20.0, total_ms: float = 10_000.0) -> RegexBudget:
    """The regex budget of :func:`recursion_graph` for a book of ``entries`` entries."""
    return RegexBudget(seconds=min(max(1.0, regex_ms * entries / 1000), max(0.0, total_ms) / 1000),
                       per_eval=regex_ms / 1000)


def check_recursion_budget(budget: RegexBudget, total_ms: float) -> Iterator[Raw]:
    """LS303 when :func:`recursion_graph` spent the book's regex budget and left regex keys unrun
    (a key cut off only for one evaluation's cost is a scan's cut-off too: LS203's business)."""
    each_ms = (budget.per_eval if budget.per_eval is not None else budget.seconds) * 1000
    unrun = sorted(key for key, ms in budget.cut.items() if ms <= each_ms)
    if unrun:
        shown = ", ".join(unrun[:3]) + (f" and {len(unrun) - 3} more" if len(unrun) > 3 else "")
        yield (None, "LS303", None,
               f"the recursion checks spent their regex budget ({budget.seconds * 1000:,.0f} nominal ms for this "
               f"book, at most {total_ms:,.0f}: recursion_regex_total_ms), so {len(unrun)} regex key(s) were not "
               f"run on every content ({shown}): cycles and index entries through them may be missing",
               "simplify those regex keys, or raise LintOptions.recursion_regex_total_ms")


def _strong_components(edges: Sequence[Sequence[int]]) -> list[list[int]]:
    # Tarjan's algorithm, iterative (books have thousands of entries).
    n = len(edges)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if k < len(edges[v]):
                work.append((v, k + 1))
                w = edges[v][k]
                if index[w] == -1:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _label(e: Entry) -> str:
    name = entry_name(e)
    return f"{e.uid} ({name})" if name else str(e.uid)


def entry_name(e: Entry) -> str:
    """The entry's human name: its comment, else a card entry's ``name``; one line."""
    name = e.comment or e.card_fields.get("name") or ""
    name = str(name).strip()
    return name.splitlines()[0] if name else ""


def check_recursion(compiled: CompiledBook, edges: list[list[int]]) -> Iterator[Raw]:
    entries = compiled.entries
    for comp in _strong_components(edges):
        if len(comp) < 2:
            continue
        first = comp[0]
        shown = ", ".join(_label(entries[j]) for j in comp[:6]) + (f" and {len(comp) - 6} more" if len(comp) > 6
                                                                     else "")
        yield (first, "LS301", "content",
               f"recursion cycle of {len(comp)} entries whose contents trigger each other: {shown}; "
               "with recursive scanning on, any one of them drags in all the others",
               "set preventRecursion on one entry of the cycle, or excludeRecursion on one it triggers")
    keyed = [i for i, e in enumerate(entries) if not (e.disable or e.constant) and compiled.keys.plans[i].primary]
    if len(keyed) < INDEX_MIN + 1:
        return
    for i, out in enumerate(edges):
        if len(out) >= INDEX_MIN and len(out) > INDEX_SHARE * (len(keyed) - 1):
            yield (i, "LS302", "content",
                   f"the content mentions keys of {len(out)} of the book's {len(keyed)} keyed entries, so with "
                   "recursive scanning on this entry pulls in most of the book",
                   "set preventRecursion on this entry")


def check_flags(entry: Entry) -> Iterator[tuple[str, str, str, str]]:
    """(code, field, message, suggestion) for contradictory flags of one entry."""
    if entry.constant and entry.disable:
        yield ("LS401", "disable", "the entry is constant but disabled, so it never fires",
               "enable it, or turn constant off")
    if entry.delay_until_recursion and entry.exclude_recursion and not entry.constant:
        yield ("LS402", "excludeRecursion",
               "delayUntilRecursion lets the entry fire only in a recursion pass, and excludeRecursion forbids "
               "exactly that: with recursive scanning on it never fires (without it, only through delay levels)",
               "drop one of the two flags")
    if entry.keysecondary and not entry.selective and any(js_trim(k) for k in entry.keysecondary):
        yield ("LS403", "selective", f"the entry has {len(entry.keysecondary)} secondary key(s), but selective "
               "is off, so they are ignored and the primary keys alone decide",
               "turn selective on, or remove the secondary keys")
    if (not entry.keysecondary and entry.selective and entry.selective_logic not in (None, 0)):
        logic = {1: "NOT_ALL", 2: "NOT_ANY", 3: "AND_ALL"}.get(entry.selective_logic, str(entry.selective_logic))
        yield ("LS404", "selectiveLogic", f"selectiveLogic is {logic} but there are no secondary keys, "
               "so it has no effect", "add the secondary keys the logic is meant for")
    p = entry.probability
    if entry.use_probability and isinstance(p, (int, float)) and not isinstance(p, bool) and p <= 0 \
            and not entry.disable:
        yield ("LS405", "probability", f"useProbability is on with probability {p:g}, so every roll fails and "
               "the entry never fires (constant entries included)", "set a probability above 0, or disable the entry")
    if entry.group_override and not entry.group.strip():
        yield ("LS406", "groupOverride", "groupOverride is set but the entry is in no inclusion group",
               "put the entry in a group, or clear groupOverride")


def check_budget(entries: Sequence[Entry], count, budget: int, budget_note: str) -> Iterator[Raw]:
    total = 0
    counted = []
    for i, e in enumerate(entries):
        if not e.constant or e.disable or e.ignore_budget or not e.content:
            continue
        tokens = count(e.content)
        total += tokens
        counted.append(i)
        if tokens > budget:
            yield (i, "LS501", "content", f"the constant entry has {tokens:,} tokens, more than the whole budget "
                   f"of {budget:,} ({budget_note}): it is cut every time", "shorten it, or set ignoreBudget")
    if total > budget and len(counted) > 1:
        yield (None, "LS502", None, f"the {len(counted)} constant entries have {total:,} tokens together, more "
               f"than the budget of {budget:,} ({budget_note}): some are cut on every turn",
               "shorten them, or raise the budget")


def _plain_primary(entries: Sequence[Entry], case_sensitive: bool) -> Iterator[tuple[str, int, int]]:
    for i, e in enumerate(entries):
        if e.disable:
            continue
        cs = e.case_sensitive if e.case_sensitive is not None else case_sensitive
        for k, raw in enumerate(e.key):
            key = js_trim(raw)
            if not key or "{{" in key or (key.startswith("/") and _split_regex_key(key) is not None):
                continue
            yield (key if cs else js_lower(key)), i, k


def check_duplicates(entries: Sequence[Entry], case_sensitive: bool, cap: int = 0,
                     unlisted: dict[str, int] | None = None) -> Iterator[Raw]:
    """LS601 and LS602. ``cap`` > 0: at most ``cap`` LS602 findings (the first in entry order) are
    built, the others only counted into ``unlisted["LS602"]``, so memory does not grow with the
    number of similar pairs."""
    owners: dict[str, list[tuple[int, int]]] = {}
    for key, i, k in _plain_primary(entries, case_sensitive):
        owners.setdefault(key, []).append((i, k))
    for key, places in owners.items():
        distinct = sorted({i for i, _ in places})
        if len(distinct) < 2:
            continue
        i, k = next(p for p in places if p[0] == distinct[1])
        others = ", ".join(_label(entries[j]) for j in distinct if j != i)
        yield (i, "LS601", f"key[{k}]", f"the key {key!r} is also a key of {others}: they fire together",
               "fine if intended; otherwise make the keys specific")
    yield from _near_duplicates(entries, owners, cap, unlisted)


def _near_duplicates(entries: Sequence[Entry], owners: dict[str, list[tuple[int, int]]], cap: int = 0,
                     unlisted: dict[str, int] | None = None) -> Iterator[Raw]:
    from rapidfuzz import fuzz, process  # import-cost: rapidfuzz loads only for the near-duplicate check
    keys = [k for k in owners if len(k) >= NEAR_MIN_LENGTH]
    if len(keys) < 2:
        return
    Row = tuple[int, int, int, int, int]                  # (entry, key index, ia, jb, score)
    found: list[Row] = []
    heap: list[Row] = []                                  # the cap smallest rows, negated: a max-heap
    total = 0
    # per key: its owning entries (one int when a single entry owns it), and its first (entry, key index)
    owning: list[int | frozenset[int]] = []
    first: list[tuple[int, int]] = []
    for key in keys:
        places = owners[key]
        ents = {i for i, _ in places}
        owning.append(next(iter(ents)) if len(ents) == 1 else frozenset(ents))
        first.append(min(places))
    worst = -1                                            # the heap's largest entry once it is full
    for ia, jb, score in _similar_pairs(keys, process, fuzz.ratio):
        oa, ob = owning[ia], owning[jb]
        if type(oa) is int and type(ob) is int:
            if oa == ob:
                continue      # both spellings on one entry: deliberate variants
        elif (oa in ob if type(oa) is int else ob in oa if type(ob) is int else oa & ob):  # type: ignore[operator]
            continue
        if _forms_of_each_other(keys[ia], keys[jb]):
            continue
        total += 1
        i, k = first[jb]
        if cap <= 0:
            found.append((i, k, ia, jb, score))
            continue
        if i > worst >= 0:
            continue          # past every listed row already: only counted
        neg: Row = (-i, -k, -ia, -jb, -score)
        if len(heap) < cap:
            heapq.heappush(heap, neg)
            if len(heap) == cap:
                worst = -heap[0][0]
        elif neg > heap[0]:
            heapq.heapreplace(heap, neg)
            worst = -heap[0][0]
    if cap > 0:
        found = [(-i, -k, -ia, -jb, -score) for i, k, ia, jb, score in heap]
        if unlisted is not None and total > len(found):
            unlisted["LS602"] = unlisted.get("LS602", 0) + total - len(found)
    for i, k, ia, jb, score in sorted(found):
        a, b = keys[ia], keys[jb]
        j = min(e for e, _ in owners[a])
        yield (i, "LS602", f"key[{k}]", f"the key {b!r} is nearly {a!r}, a key of {_label(entries[j])} "
               f"(similarity {score}): a typo, or two things named alike?",
               "if it is a typo, fix it; if they are different, nothing to do")


def _similar_pairs(keys: Sequence[str], process: Any, ratio: Any,
                   method: str = "auto") -> Iterator[tuple[int, int, int]]:
    """Every pair ``(i, j, score)`` with ``i < j`` (indexes into ``keys``, which are distinct) whose
    ratio is at least NEAR_SCORE, each once, in no particular order.

    The ratio of ``a`` and ``b`` is ``100 * (1 - d / (la + lb))``, ``d`` their indel distance
    (insertions plus deletions), so a pair can score NEAR_SCORE only if ``d <= T = 3 (la + lb) // 20``;
    as ``d >= lb - la`` that also bounds the lengths (``lb <= la * 115 / 85``). Pairs are looked for
    one block of two lengths ``la <= lb`` at a time, in whichever of two ways the block's sizes make
    cheaper; both give exactly the pairs and scores of comparing every pair:

    - ``pairwise``: rapidfuzz's ``cdist`` over the block (vectorised C, but quadratic; real books);
    - ``index``: a deletion neighbourhood. ``d <= T`` means ``a`` loses ``da = (d - (lb - la)) / 2 <=
      ka = (T - (lb - la)) // 2`` characters and ``b`` ``da + lb - la <= kb = ka + lb - la`` to reach
      their longest common subsequence, so some string made from ``a`` by deleting exactly ``ka``
      characters is also made from ``b`` by deleting exactly ``kb`` (delete ``ka - da`` more from
      the common subsequence). Keys sharing such a string are the candidates, scored by ``cpdist``
      (the scorer, cut-off and rounding of ``cdist``). Its cost is the keys' neighbourhoods plus
      the candidates, not the pairs: 100,000 numbered keys, an hour's pairs, take seconds.

    ``method``: ``"auto"``, or ``"pairwise"`` / ``"index"`` to force one way (tests compare them)."""
    if method not in ("auto", "pairwise", "index"):
        raise ValueError(f"method must be 'auto', 'pairwise' or 'index', not {method!r}")
    if not hasattr(process, "cpdist"):
        method = "pairwise"                # rapidfuzz < 3.6: no element-wise cpdist to score candidates
    by_len: dict[int, list[int]] = {}
    for x, key in enumerate(keys):
        by_len.setdefault(len(key), []).append(x)
    lengths = sorted(by_len)
    t = NEAR_SCORE
    for pos, la in enumerate(lengths):
        rows = by_len[la]
        compared: list[int] = []           # the columns left to cdist
        for lb in lengths[pos:]:
            if lb * t > la * (200 - t):
                break
            found = None if method == "pairwise" else _index_block(keys, rows, by_len[lb], la, lb,
                                                                   method == "index", process, ratio)
            if found is None:
                compared.extend(by_len[lb])
                continue
            for x, y, score in found:
                yield (x, y, score) if x < y else (y, x, score)
        if compared:
            yield from _pairwise_block(keys, rows, compared, process, ratio)


INDEX_COST = 60            # one string of a key's neighbourhood indexed, in cdist comparisons (measured)
PROBE_COST = 20            # one string of a longer key's neighbourhood looked up
CANDIDATE_COST = 30        # one candidate pair gathered and scored, in cdist comparisons
FORCED_NEIGHBOURS = 200_000  # a block's strings when the index is forced (tests): past it, cdist
MAX_NEIGHBOURS = 3_000_000  # strings in one block's index; a block needing more is compared pairwise (memory)


def _pairwise_block(keys: Sequence[str], rows: list[int], cols: list[int], process: Any,
                    ratio: Any) -> Iterator[tuple[int, int, int]]:
    # rows: keys of one length; cols: keys of that length or longer. A pair of two keys of one
    # length is met twice (each as the row): kept once, with the lower index as the row.
    t = NEAR_SCORE
    row_keys = [keys[x] for x in rows]
    col_keys = [keys[y] for y in cols]
    same = len(row_keys[0])
    step = max(1, 2_000_000 // max(1, len(cols)))
    for r0 in range(0, len(rows), step):
        scores = process.cdist(row_keys[r0:r0 + step], col_keys, scorer=ratio, score_cutoff=t, dtype="uint8",
                               workers=-1)
        for r, c in zip(*scores.nonzero()):
            x, y = rows[r0 + int(r)], cols[int(c)]
            if len(keys[y]) == same and y <= x:
                continue
            yield (min(x, y), max(x, y), int(scores[r, c]))


def _deletions(s: str, k: int) -> Iterable[str]:
    """The strings made from ``s`` by deleting exactly ``k`` of its characters."""
    if k <= 0:
        return (s,)
    return set(map("".join, itertools.combinations(s, len(s) - k)))


def _index_block(keys: Sequence[str], rows: list[int], cols: list[int], la: int, lb: int, force: bool,
                 process: Any, ratio: Any) -> Iterator[tuple[int, int, int]] | None:
    """The near pairs ``(x, y, score)`` of the block (row keys of length ``la``, column keys of length
    ``lb``; ``x`` the row, or the lower index of two keys of one length) found through deletion
    neighbourhoods; None when ``cdist`` is cheaper by the cost model or the index would not fit
    MAX_NEIGHBOURS (its probes: ten times that; forced: FORCED_NEIGHBOURS in all). Decided before the
    first pair is given."""
    same = la == lb
    threshold = 3 * (la + lb) // 20
    ka = (threshold - (lb - la)) // 2
    kb = ka + lb - la
    pairs = len(rows) * len(cols)
    indexed = len(rows) * math.comb(la, ka)
    probed = 0 if same else len(cols) * math.comb(lb, kb)
    if indexed > MAX_NEIGHBOURS or probed > 10 * MAX_NEIGHBOURS or (force and indexed + probed > FORCED_NEIGHBOURS):
        return None
    if not force and indexed * INDEX_COST + probed * PROBE_COST >= pairs:
        return None
    # a string made from one key maps to that key; from several, to the list of them (increasing)
    index: dict[str, int | list[int]] = {}
    for x in rows:
        for v in _deletions(keys[x], ka):
            seen = index.setdefault(v, x)
            if isinstance(seen, list):
                seen.append(x)
            elif seen != x:
                index[v] = [seen, x]
    shared = [b for b in index.values() if isinstance(b, list)]
    probes = cols
    if same:                              # only keys sharing a string with another have candidates
        probes = sorted({x for b in shared for x in b})
    if not force:
        if same:
            candidates = sum(len(b) * (len(b) - 1) // 2 for b in shared)
        else:
            candidates = sum(_size(index.get(v)) for y in cols for v in _deletions(keys[y], kb))
        if candidates > pairs // CANDIDATE_COST:
            return None
    return _index_pairs(keys, probes, index, ka if same else kb, same, process, ratio)


def _size(bucket: int | list[int] | None) -> int:
    return 0 if bucket is None else len(bucket) if isinstance(bucket, list) else 1


def _index_pairs(keys: Sequence[str], probes: list[int], index: dict[str, int | list[int]], k: int,
                 same: bool, process: Any, ratio: Any) -> Iterator[tuple[int, int, int]]:
    # Each probe's candidates are gathered in one set, so a pair met through several shared strings
    # is scored once; of two keys of one length, the lower index is the probe.
    xs: list[int] = []
    ys: list[int] = []
    for y in probes:
        found: set[int] = set()
        for v in _deletions(keys[y], k):
            bucket = index.get(v)
            if bucket is None:
                continue
            if isinstance(bucket, list):
                found.update(bucket)
            else:
                found.add(bucket)
        if same:
            found = {x for x in found if x > y}
        xs.extend(found)
        ys.extend([y] * len(found))
        if len(xs) >= 200_000:
            yield from _scored(keys, xs, ys, same, process, ratio)
            xs, ys = [], []
    yield from _scored(keys, xs, ys, same, process, ratio)


def _scored(keys: Sequence[str], xs: list[int], ys: list[int], same: bool, process: Any,
            ratio: Any) -> Iterator[tuple[int, int, int]]:
    if not xs:
        return
    if same:
        xs, ys = ys, xs                   # the lower index first, as cdist's row
    got = process.cpdist([keys[x] for x in xs], [keys[y] for y in ys], scorer=ratio, score_cutoff=NEAR_SCORE,
                         dtype="uint8", workers=-1)
    for i in got.nonzero()[0].tolist():
        yield (xs[i], ys[i], int(got[i]))


def _forms_of_each_other(a: str, b: str) -> bool:
    # a plural or possessive, or one key inside the other ("lead" / "female lead"): not a typo
    short, long_ = sorted((a, b), key=len)
    return short in long_


def check_common_words(entries: Sequence[Entry], language: str | None, whole_words: bool,
                       vocabulary: Vocabulary | None = None) -> Iterator[Raw]:
    """LS701 against ``language``'s word list, or (``language`` None) against ``vocabulary``,
    the book's own common words."""
    for i, e in enumerate(entries):
        if e.disable or e.constant:
            continue
        ww = e.match_whole_words if e.match_whole_words is not None else whole_words
        if ww:
            continue
        for k, raw in enumerate(e.key):
            key = js_trim(raw)
            if len(key) < 2 or has_js_whitespace(key):
                continue
            if language is not None:
                if not key.isascii() or not key.isalpha():
                    continue
                words = hidden_in_words(key.lower(), language)
                shown, where = ", ".join(repr(w) for w in words), "common words"
            elif vocabulary is not None and is_book_word(key):
                words = hidden_in_vocabulary(key.lower(), vocabulary)
                shown = ", ".join(f"{w} ({vocabulary.counts[w]}x)" for w in words)
                where = "words the book's own text uses often"
            else:
                continue
            if words:
                yield (i, "LS701", f"key[{k}]", f"whole words are off, so the key {key!r} also fires inside "
                       f"{where} such as {shown}", "turn on whole words for this entry, or use a longer key")
