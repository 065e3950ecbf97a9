"""Meaning-based activation (the ``lorescan[semantic]`` extra): embeddings, scores, a cache.

Nothing here imports a model until one is asked for: :func:`default_embedder` loads the
installed package's files once per process, lazily. Tests and callers may pass any
:class:`Embedder` instead (a tiny deterministic fake, for example).
"""
from __future__ import annotations

from .embed import (DEFAULT_MODEL, SCORE_DECIMALS, Embedder, MessageEmbeddings, WordLlamaEmbedder,
                    default_embedder, embed_entries, scores, semantic_available)

__all__ = ["DEFAULT_MODEL", "SCORE_DECIMALS", "Embedder", "MessageEmbeddings", "WordLlamaEmbedder",
           "default_embedder", "embed_entries", "scores", "semantic_available"]
