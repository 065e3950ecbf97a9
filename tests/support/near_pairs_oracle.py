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
