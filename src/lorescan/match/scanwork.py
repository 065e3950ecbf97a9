"""The bounded work of one scan or slot run: fuzzy comparisons, key hits per text, a deadline.

Every bound here is a count, so whether a text is cut depends on the text and the book,
never on the machine's load; the deadline is the one clock, and it can only turn an answer
into :class:`~lorescan.errors.ScanDeadlineExceeded`, never into a different answer.
"""
from __future__ import annotations

from ..limits import DEFAULT_LIMITS, Limits
from .fuzzy import FuzzyWork

__all__ = ["ScanWork"]


class ScanWork(FuzzyWork):
    """:class:`FuzzyWork` for one scan, plus the key-hit budget and the caller's deadline.

    Key hits: the automaton reports every (end, key) occurrence, so keys that are suffixes of
    one another (``a``, ``aa``, ...) give up to ``max_key_length`` hits per character. One
    text's passes may take :meth:`hit_budget` hits (``Limits.key_hits_per_text``, or
    ``Limits.key_hits_per_char`` per character of a longer text); past it the text is not
    enumerated further: its hit set holds the keys of the hits taken (none false, some perhaps
    missing), ``key_cut`` counts it, the scan reports it (:meth:`describe_key_cut`) and the set is
    not cached. The budget is per text, not per scan, so a text's answer is the same whether or
    not the chat's other texts were already cached. ``deadline``: a ``time.monotonic()`` value
    the kernels check every 65,536 hits (None: no deadline). ``fuzzy_limit``: the comparison
    limit (default ``Limits.fuzzy_comparisons_per_scan``; compiling uses ``max_fuzzy_comparisons``).
    """

    __slots__ = ("hits_per_text", "hits_per_char", "deadline", "key_cut", "first_cut")

    def __init__(self, limits: Limits = DEFAULT_LIMITS, deadline: float | None = None,
                 fuzzy_limit: int | None = None) -> None:
        super().__init__(limits.fuzzy_comparisons_per_scan if fuzzy_limit is None else fuzzy_limit)
        self.hits_per_text, self.hits_per_char = limits.key_hits_per_text, limits.key_hits_per_char
        self.deadline = deadline
        self.key_cut = 0            # texts whose key hits passed their budget
        self.first_cut: str | None = None      # the first of them

    @property
    def cuts(self) -> tuple[int, int]:
        """Texts cut so far (fuzzy, key hits): a cache stores a result only when this did not change."""
        return (self.cut, self.key_cut)

    def hit_budget(self, text: str) -> int:
        """The automaton hits ``text``'s passes may take."""
        return max(self.hits_per_text, self.hits_per_char * len(text))

    def describe_budget(self) -> str:
        """The budget in words: "N key hits, or M per character (limits...)"."""
        return (f"{self.hits_per_text:,} key hits, or {self.hits_per_char} per character "
                f"(limits.key_hits_per_text, limits.key_hits_per_char)")

    def describe_key_cut(self) -> str:
        """The report line of a scan that cut key matching off in a text (empty when none was cut)."""
        if not self.key_cut:
            return ""
        texts = "one scanned text" if self.key_cut == 1 else f"{self.key_cut:,} scanned texts"
        return (f"key matching was cut off in {texts}: a text may give {self.describe_budget()}; "
                f"keys occurring only past that point there were not matched this turn")
