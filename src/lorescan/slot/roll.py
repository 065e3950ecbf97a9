"""The probability roll that is stable within a turn (docs/slot-mode.md#slot-gates).

``u = 100 * H(turn_id, book id, entry id) / 2**64`` where ``H`` is the first 8 bytes
(big-endian) of the BLAKE2b-512 digest of the UTF-8 of the three values, as text,
joined by U+001F. No process-seeded hashing is involved (Python's ``hash()`` of a str
changes with every interpreter start), so the same turn gives the same roll in every
recursion pass, dry run, swipe or regeneration, on every machine.
"""
from __future__ import annotations

import hashlib
import math

__all__ = ["roll_percent", "passes_roll"]

_SEP = "\x1f"


def roll_percent(turn_id: str | int, book_id: str, entry_id: str | int) -> float:
    """The roll ``u`` in [0, 100) for one entry in one turn.

    Values are turned into text with ``str()``: the turn id ``3`` and ``"3"`` give the
    same roll.
    """
    data = _SEP.join((str(turn_id), str(book_id), str(entry_id))).encode("utf-8", "surrogatepass")
    h = int.from_bytes(hashlib.blake2b(data).digest()[:8], "big")
    u = 100.0 * h / 2**64
    # float rounding must not turn the largest hashes into exactly 100 (100 always passes)
    return u if u < 100.0 else math.nextafter(100.0, 0.0)


def passes_roll(u: float, probability: float) -> bool:
    """True iff a roll ``u`` passes ``probability`` percent: 0 never, 100 always."""
    return u < probability
