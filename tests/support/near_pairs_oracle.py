"""The LS602 / LS850 near-duplicate search as it was before the index (lint602): every key
compared with every key of a length that can score NEAR_SCORE, by rapidfuzz's ``cdist``. The
oracle :func:`lorescan.lint.book._similar_pairs` must agree with, pair for pair and score for
score."""
from __future__ import annotations

import bisect
from typing import Iterator, Sequence

from lorescan.lint.book import NEAR_SCORE


def pairwise_similar_pairs(keys: Sequence[str]) -> list[tuple[int, int, int]]:
    """Sorted ``(i, j, score)``, ``i < j``, of every pair of ``keys`` whose ratio is at least NEAR_SCORE."""
    from rapidfuzz import fuzz, process
    return sorted(_pairs(keys, process, fuzz.ratio))


def _pairs(keys: Sequence[str], process, ratio) -> Iterator[tuple[int, int, int]]:
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
                    continue
                x, y = order[ra], order[rb]
                yield (min(x, y), max(x, y), int(scores[r, c]))
        start = end


def pairwise_near_duplicates(entries, owners: dict, cap: int = 0, unlisted: dict | None = None) -> list:
    """LS602's raw findings as :func:`lorescan.lint.book._near_duplicates` gave them before the index:
    the oracle pairs, each filtered by set intersection, the cap's rows kept by a heap."""
    import heapq
    from lorescan.lint.book import NEAR_MIN_LENGTH, _forms_of_each_other, _label
    keys = [k for k in owners if len(k) >= NEAR_MIN_LENGTH]
    if len(keys) < 2:
        return []
    found: list = []
    heap: list = []
    total = 0
    for ia, jb, score in pairwise_similar_pairs(keys):
        a, b = keys[ia], keys[jb]
        if _forms_of_each_other(a, b):
            continue
        if {i for i, _ in owners[a]} & {i for i, _ in owners[b]}:
            continue
        total += 1
        i, k = min(owners[b])
        if cap <= 0:
            found.append((i, k, ia, jb, score))
            continue
        neg = (-i, -k, -ia, -jb, -score)
        if len(heap) < cap:
            heapq.heappush(heap, neg)
        elif neg > heap[0]:
            heapq.heapreplace(heap, neg)
    if cap > 0:
        found = [(-i, -k, -ia, -jb, -score) for i, k, ia, jb, score in heap]
        if unlisted is not None and total > len(found):
            unlisted["LS602"] = unlisted.get("LS602", 0) + total - len(found)
    out = []
    for i, k, ia, jb, score in sorted(found):
        a, b = keys[ia], keys[jb]
        j = min(e for e, _ in owners[a])
        out.append((i, "LS602", f"key[{k}]", f"the key {b!r} is nearly {a!r}, a key of {_label(entries[j])} "
                    f"(similarity {score}): a typo, or two things named alike?",
                    "if it is a typo, fix it; if they are different, nothing to do"))
    return out
