"""A worker-wide bound on the request-body bytes all its requests hold at once (issue 22: "30
stalled bodies holding 450 MB").

``--max-body-mb`` bounds one request and ``--body-timeout`` how long one may take, but without a
total, clients that send slowly (each within its timeout) or many at once can make one worker
hold any number of large bodies. :class:`BodyBudget` is that total: every request with a body
takes its declared ``Content-Length`` from the budget when its headers are in (a chunked body
takes its bytes as they arrive) and gives them back when its answer is sent or it ends. A
request that does not fit is answered ``503`` with ``Retry-After: 1`` and the documented JSON
body, before any more of it is read; the requests already held go on. The total is
``--max-inflight-mb``; its default (0) is ``max(--max-upload-mb, BODY_SLOTS x --max-body-mb)``:
room for :data:`BODY_SLOTS` turns of the largest size at once, or one largest upload.

Only the event loop's thread touches a budget (no lock).
"""
from __future__ import annotations

__all__ = ["BodyBudget", "BODY_SLOTS", "inflight_bytes", "over_budget"]

BODY_SLOTS = 8          # largest-size turn bodies one worker holds at once, by default
RETRY_AFTER = 1         # seconds a refused client is told to wait (bodies are read in well under that)


def inflight_bytes(max_inflight_mb: float, max_body_mb: float, max_upload_mb: float) -> int:
    """The worker's total in bytes: ``max_inflight_mb``, or (0) its default from the two per-request limits."""
    mb = max_inflight_mb if max_inflight_mb > 0 else max(max_upload_mb, BODY_SLOTS * max_body_mb)
    return int(mb * (1 << 20))


class BodyBudget:
    """Bytes of request bodies a worker may hold at once (``capacity``) and how many it holds (``used``)."""

    __slots__ = ("capacity", "used", "refused")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self.refused = 0            # requests refused for want of room (a counter for /metrics)

    def take(self, n: int) -> bool:
        """Hold ``n`` more bytes if they fit (True); else hold nothing more and count a refusal (False)."""
        if self.used + n > self.capacity:
            self.refused += 1
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        """Give back ``n`` bytes taken before."""
        self.used -= n


def over_budget(budget: BodyBudget) -> str:
    """The ``error`` text of a request refused because the worker's body budget is full."""
    return (f"this worker already holds {budget.used} bytes of request bodies, its limit of {budget.capacity} "
            f"(--max-inflight-mb); retry in a moment")
