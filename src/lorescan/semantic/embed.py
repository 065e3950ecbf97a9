"""Embedders, deterministic similarity scores and the per-text message-embedding cache.

The one shipped model is wordllama's 256-dimension static model (docs/semantic.md says
why: it was measured against the other candidates). Its weights and tokenizer are files
inside the installed ``wordllama`` wheel; they are read directly, without importing
``wordllama`` itself (whose loader looks for the tokenizer in the wrong folder and then
tries to download it). Nothing is ever downloaded.

Determinism: an embedding is the mean of the token rows, summed in float64 in token order
and stored as a unit float32 vector; a score is the float64 dot product of two float32
vectors, rounded to :data:`SCORE_DECIMALS` decimals before any comparison, so the last
bits of a BLAS or SIMD reduction never decide an activation.
"""
from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import SettingsError

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["DEFAULT_MODEL", "SCORE_DECIMALS", "Embedder", "MessageEmbeddings", "WordLlamaEmbedder",
           "default_embedder", "embed_entries", "scores", "semantic_available"]

DEFAULT_MODEL = "wordllama-l2-supercat-256"
SCORE_DECIMALS = 6
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")


@runtime_checkable
class Embedder(Protocol):
    """Texts in, one unit-length float32 row per text out (shape ``(len(texts), dim)``).

    ``name`` identifies the model (stored beside embeddings so a `.lsc` made with one model
    is never scored against another); the same text must give the same row on every call.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def _unit_rows(sums: NDArray[np.float64]) -> NDArray[np.float32]:
    norms = np.sqrt((sums * sums).sum(axis=1, keepdims=True))
    norms[norms == 0.0] = 1.0                  # an empty text embeds as the zero vector: scores 0
    return np.ascontiguousarray(sums / norms, dtype=np.float32)


class WordLlamaEmbedder:
    """wordllama's static model, read from the installed wheel (mean of token embeddings).

    Args:
        root: the ``wordllama`` package folder (default: where it is installed).
        dim: keep only the first ``dim`` dimensions (the model is trained Matryoshka-style,
            so 64 and 128 are usable smaller variants).
    """

    def __init__(self, root: Path | None = None, dim: int = 256) -> None:
        root = _package_root() if root is None else root
        from safetensors.numpy import load_file  # import-cost: the semantic extra, loaded only when used
        from tokenizers import Tokenizer           # import-cost: the semantic extra, loaded only when used
        table = load_file(str(root.joinpath(*_WEIGHTS)))["embedding.weight"]
        if not 0 < dim <= table.shape[1]:
            raise SettingsError(f"dim must be in 1..{table.shape[1]}, not {dim}", source="semantic",
                                field="dim")
        self._table = np.ascontiguousarray(table[:, :dim], dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(root.joinpath(*_TOKENIZER)))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self.dim = dim
        self.name = DEFAULT_MODEL if dim == 256 else f"wordllama-l2-supercat-{dim}"

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        last = self._table.shape[0] - 1
        encode = self._tokenizer.encode
        for row, text in enumerate(texts):
            ids = np.clip(np.asarray(encode(text).ids, dtype=np.int64), 0, last)
            if len(ids):
                sums[row] = self._table[ids].astype(np.float64).sum(axis=0) / len(ids)
        return _unit_rows(sums)


def _package_root() -> Path:
    spec = importlib.util.find_spec("wordllama")   # finds the folder without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError("meaning-based activation needs the semantic extra: pip install 'lorescan[semantic]'",
                            source="semantic")
    root = Path(next(iter(spec.submodule_search_locations)))
    for parts in (_WEIGHTS, _TOKENIZER):
        if not root.joinpath(*parts).is_file():
            raise SettingsError(f"the installed wordllama has no {'/'.join(parts)} (a 0.4.x wheel ships it)",
                                source="semantic")
    return root


def semantic_available() -> bool:
    """Whether the semantic extra's model package is installed (imports nothing)."""
    return importlib.util.find_spec("wordllama") is not None


_default: Embedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> Embedder:
    """The shipped model, loaded on first call and then shared by the whole process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = WordLlamaEmbedder()
        return _default


def embed_entries(embedder: Embedder, contents: Sequence[str]) -> NDArray[np.float32]:
    """The entry matrix (one unit float32 row per content), computed once at compile time."""
    if not contents:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return _checked(embedder, embedder.embed(list(contents)), len(contents))


def _checked(embedder: Embedder, rows: NDArray[np.float32], count: int) -> NDArray[np.float32]:
    rows = np.asarray(rows)
    if rows.shape != (count, embedder.dim):
        raise SettingsError(f"embedder {embedder.name!r} returned shape {rows.shape}, expected "
                            f"{(count, embedder.dim)}", source="semantic")
    return np.ascontiguousarray(rows, dtype=np.float32)


def scores(query: NDArray[np.floating], entries: NDArray[np.floating]) -> NDArray[np.float64]:
    """Cosine scores of one unit query row against the entry rows, rounded to 6 decimals.

    ``entries`` holds float32 rows, or the same rows already widened to float64 (exactly).

    The products are float32 values widened to float64 (exact) and summed in float64 by
    ``einsum``'s own loop (one fixed order, no BLAS threads), then rounded: the threshold
    comparison sees the same number on every run and backend.
    """
    if entries.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    wide = entries.astype(np.float64, copy=False)
    return np.round(np.einsum("ij,j->i", wide, query.astype(np.float64)), SCORE_DECIMALS)


class MessageEmbeddings:
    """A bounded LRU of text -> embedding, like :class:`~lorescan.match.cache.ChatScan` for hits.

    Keyed by (model name, text), so one cache may serve several embedders. Safe to share
    between threads.
    """

    def __init__(self, max_texts: int = 4096) -> None:
        if max_texts < 1:
            raise SettingsError(f"max_texts must be at least 1, not {max_texts}", source="semantic",
                                field="max_texts")
        self._max = max_texts
        self._rows: OrderedDict[tuple[str, str], NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def get(self, embedder: Embedder, text: str) -> NDArray[np.float32]:
        key = (embedder.name, text)
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
                return row
        row = _checked(embedder, embedder.embed([text]), 1)[0]
        row.setflags(write=False)
        with self._lock:
            self.misses += 1
            self._rows[key] = row
            while len(self._rows) > self._max:
                self._rows.popitem(last=False)
        return row

    def __len__(self) -> int:
        return len(self._rows)
