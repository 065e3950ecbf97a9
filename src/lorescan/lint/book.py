"""Checks that look at several entries, or at an entry's flags: recursion (LS3xx), flags
(LS4xx), budget (LS5xx), duplicate keys (LS6xx), keys inside common words (LS7xx)."""
from __future__ import annotations

import bisect
import heapq
from typing import Any, Iterator, Sequence

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
    for ia, jb, score in _similar_pairs(keys, process, fuzz.ratio):
        a, b = keys[ia], keys[jb]
        if _forms_of_each_other(a, b):
            continue
        ea = {i for i, _ in owners[a]}
        eb = {i for i, _ in owners[b]}
        if ea & eb:
            continue          # both spellings on one entry: deliberate variants
        total += 1
        i, k = min(owners[b])
        if cap <= 0:
            found.append((i, k, ia, jb, score))
            continue
        neg: Row = (-i, -k, -ia, -jb, -score)
        if len(heap) < cap:
            heapq.heappush(heap, neg)
        elif neg > heap[0]:
            heapq.heapreplace(heap, neg)
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


def _similar_pairs(keys: Sequence[str], process: Any, ratio: Any) -> Iterator[tuple[int, int, int]]:
    """Every pair ``(i, j, score)`` with ``i < j`` (indexes into ``keys``) whose ratio is at least
    NEAR_SCORE. The ratio of lengths ``la <= lb`` is at most ``200 * la / (la + lb)``, so a key
    is compared only with keys no shorter and at most ``la * (200 - t) / t`` long: with keys
    sorted by length that is one slice per length, not the whole book (a 10k-entry book went
    from about 10 s to well under one)."""
    order = sorted(range(len(keys)), key=lambda x: len(keys[x]))
    by_len = [keys[x] for x in order]
    lengths = [len(k) for k in by_len]
    t = NEAR_SCORE
    start = 0
    while start < len(by_len):
        length = lengths[start]
        end = bisect.bisect_right(lengths, length, lo=start)
        hi = bisect.bisect_right(lengths, (length * (200 - t)) // t, lo=end)
        cols = by_len[start:hi]
        step = max(1, 2_000_000 // max(1, len(cols)))
        for r0 in range(start, end, step):
            rows = by_len[r0:min(end, r0 + step)]
            scores = process.cdist(rows, cols, scorer=ratio, score_cutoff=t, dtype="uint8", workers=-1)
            for r, c in zip(*scores.nonzero()):
                ra, rb = r0 + int(r), start + int(c)
                if rb <= ra:
                    continue          # each pair once; same-length pairs appear in both orders
                x, y = order[ra], order[rb]
                yield (min(x, y), max(x, y), int(scores[r, c]))
        start = end


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
