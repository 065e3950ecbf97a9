"""LS602's near-duplicate search as it was before the segment index: every key against every
key in its length window through ``rapidfuzz.process.cdist``. The oracle for
``lorescan.lint.book._similar_pairs`` (tests/test_lint_near.py) and its baseline in
benchmarks/bench_lint.py."""
from __future__ import annotations

import bisect
from typing import Any, Iterator, Sequence

from lorescan.lint.book import NEAR_SCORE


def similar_pairs_all(keys: Sequence[str], process: Any, ratio: Any) -> Iterator[tuple[int, int, int]]:
    """Every pair ``(i, j, score)``, ``i < j``, whose ratio is at least NEAR_SCORE: each key is
    compared with every key no shorter and at most ``len * (200 - t) // t`` long."""
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
