"""Vector Storage's world-info matching: which vectorized entries the recent messages are close to.

SillyTavern's Vector Storage extension (``extensions/vectors``) embeds the content of every
enabled entry marked ``vectorized`` (or of every entry, with "Enabled for all entries"),
embeds the last ``query`` chat messages joined by newlines (here: the mean of their
embeddings, :meth:`SemanticIndex.query_row`), and force-activates the
``max_entries`` best entries that score at least ``score_threshold``; they then pass every
other check as a caller-forced entry does (docs/semantic.md#sem-engine).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import SettingsError
from .embed import Embedder, MessageEmbeddings, default_embedder, embed_entries, scores

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["SemanticHit", "SemanticIndex", "VectorSettings"]


@dataclass(frozen=True)
class VectorSettings:
    """Vector Storage's world-info settings, under their SillyTavern names and defaults.

    Args:
        query: how many of the newest messages form the query ("Query messages").
        max_entries: at most this many entries activate by similarity per scan ("Max Entries").
        score_threshold: the least score that activates ("Score threshold").
        enabled_for_all: every entry is a candidate, not only those marked ``vectorized``.
        embedder: the model (default: the shipped one, :func:`~lorescan.semantic.default_embedder`).
    """

    query: int = 2
    max_entries: int = 5
    score_threshold: float = 0.25
    enabled_for_all: bool = False
    embedder: Embedder | None = None

    def __post_init__(self) -> None:
        for name in ("query", "max_entries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"must be an integer >= 1, got {value!r:.40}", source="semantic", field=name)
        t = self.score_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not -1.0 <= t <= 1.0:
            raise SettingsError(f"must be a number in [-1, 1], got {t!r:.40}", source="semantic",
                                field="score_threshold")
        if not isinstance(self.enabled_for_all, bool):
            raise SettingsError(f"must be True or False, got {self.enabled_for_all!r:.40}", source="semantic",
                                field="enabled_for_all")

    def model(self) -> Embedder:
        return self.embedder if self.embedder is not None else default_embedder()


@dataclass(frozen=True)
class SemanticHit:
    """Why an entry activated by meaning: its score and the query text it was scored against."""

    score: float
    query: str

    def detail(self, threshold: float) -> str:
        shown = self.query if len(self.query) <= 120 else self.query[:117] + "..."
        return f"similarity {self.score:.6f} >= {threshold:g} to the recent messages {shown!r}"


class SemanticIndex:
    """The candidate entries' embeddings (computed once, when the engine is built) and the query.

    Args:
        settings: the Vector Storage settings.
        keys: the candidates' entry keys, in the engine's global order.
        contents: their contents (what is embedded), in the same order.
        matrix: their embeddings, if already computed (a loaded ``.lsc``); else computed here.
    """

    def __init__(self, settings: VectorSettings, keys: Sequence[str], contents: Sequence[str],
                 matrix: NDArray[np.float32] | None = None) -> None:
        self.settings = settings
        self.embedder = settings.model()
        self.keys = list(keys)
        self.matrix = embed_entries(self.embedder, contents) if matrix is None else matrix
        if self.matrix.shape != (len(self.keys), self.embedder.dim):
            raise SettingsError(f"entry embeddings have shape {self.matrix.shape}, expected "
                                f"{(len(self.keys), self.embedder.dim)}", source="semantic")
        self._wide = self.matrix.astype(np.float64)      # exact widening, done once, not per scan
        self.cache = MessageEmbeddings()

    def query_row(self, texts: Sequence[str]) -> NDArray[np.float64]:
        """The query's embedding: the unit mean of its messages' embeddings, each cached per text.

        (SillyTavern embeds the joined text; for a static model the mean of the parts is the
        same idea, and a new turn then embeds only its new message.)
        """
        total = np.zeros(self.embedder.dim, dtype=np.float64)
        for text in texts:                       # summed in message order
            total += self.cache.get(self.embedder, text)
        norm = float(np.sqrt(total @ total))
        return total / norm if norm else total

    def select(self, newest_first: Sequence[str]) -> dict[str, SemanticHit]:
        """The entries the newest ``query`` messages activate: best score first, then entry order."""
        texts = [t for t in newest_first[:self.settings.query]][::-1]
        query = "\n".join(texts)
        if not self.keys or not query.strip():
            return {}
        got = scores(self.query_row(texts), self._wide)
        passing = np.flatnonzero(got >= self.settings.score_threshold)
        best = passing[np.lexsort((passing, -got[passing]))[:self.settings.max_entries]]   # score, then order
        return {self.keys[i]: SemanticHit(float(got[i]), query) for i in best.tolist()}
