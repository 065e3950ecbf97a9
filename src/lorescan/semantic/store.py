"""Entry embeddings computed at compile time and kept in the compiled book (and its ``.lsc`` file).

:func:`embed_book` returns a copy of a :class:`~lorescan.st.compiled.CompiledBook` that
carries ``embeddings = (model name, entry indices, float32 rows)`` for its candidate
entries (enabled, with content, marked ``vectorized`` unless ``enabled_for_all``). The
``.lsc`` writer stores them as the sections ``emb:rows`` and ``emb:matrix``; an engine built
from such a book with the same model and the same candidates uses them instead of
embedding the contents again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..js.stdecorators import parse_st_decorators
from ..model import Entry, js_truthy
from .embed import Embedder, embed_entries

if TYPE_CHECKING:
    from ..st.compiled import CompiledBook

__all__ = ["embed_book", "embedded_content", "is_candidate"]


def embedded_content(entry: Entry, *, strict_lines: bool) -> str:
    """What is embedded for an entry: its content without decorator lines (as the engine places it)."""
    return parse_st_decorators(entry.content, strict_lines=strict_lines)[1]


def is_candidate(entry: Entry, content: str, enabled_for_all: bool) -> bool:
    return (enabled_for_all or js_truthy(entry.fields.get("vectorized"))) and not entry.disable and bool(content)


def embed_book(cb: CompiledBook, embedder: Embedder, *, enabled_for_all: bool = False,
               strict_lines: bool = True) -> CompiledBook:
    """A copy of ``cb`` carrying its candidates' embeddings (``strict_lines``: the profile's decorator rule)."""
    contents = [embedded_content(e, strict_lines=strict_lines) for e in cb.entries]
    rows = [i for i, (e, c) in enumerate(zip(cb.entries, contents)) if is_candidate(e, c, enabled_for_all)]
    matrix = embed_entries(embedder, [contents[i] for i in rows])
    copy = object.__new__(type(cb))
    for name in type(cb).__slots__:
        if name != "__weakref__" and hasattr(cb, name):
            object.__setattr__(copy, name, getattr(cb, name))
    object.__setattr__(copy, "embeddings", (embedder.name, np.asarray(rows, dtype=np.int32), matrix))
    return copy
