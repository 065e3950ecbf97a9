"""A tiny deterministic embedder for tests: hashed bags of lower-cased words; and the model guard.

Texts that share words score high; unrelated texts score near zero. It imports no model.
"""
from __future__ import annotations

import hashlib
import os
from typing import Sequence

import numpy as np
import pytest

from lorescan.semantic import semantic_available


def need_model() -> None:
    """Skip (visibly) without the semantic extra's model; fail instead with LORESCAN_REQUIRE_SEMANTIC=1 (CI)."""
    if semantic_available():
        return
    if os.environ.get("LORESCAN_REQUIRE_SEMANTIC") == "1":
        pytest.fail("the semantic extra is required here (LORESCAN_REQUIRE_SEMANTIC=1): pip install '.[semantic]'",
                    pytrace=False)
    pytest.skip("the semantic extra (wordllama) is not installed: pip install 'lorescan[semantic]'")


class FakeEmbedder:
    def __init__(self, dim: int = 512, name: str = "fake-bag-of-words") -> None:
        self.dim, self.name = dim, name
        self.calls: list[tuple[str, ...]] = []

    def _bucket(self, word: str) -> int:
        return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(tuple(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, self._bucket(word.strip(".,!?"))] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (out / norms).astype(np.float32)
