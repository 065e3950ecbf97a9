"""What one run returns: the texts, the error, the random count, the trace, and the per-entry
record ``explain`` reads."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

__all__ = ["JanitorResult", "JanitorError", "Decision", "TRACE_FIELDS"]

TRACE_FIELDS = ("haystack", "message_count", "active_name", "window_depth", "apply_limit", "direct",
                "triggered", "selected", "post_shift", "tags", "post_shift_tags", "log")


@dataclass(frozen=True, slots=True)
class JanitorError:
    """The exception the script throws: its JavaScript ``name`` and a message."""
    name: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "message": self.message}


class Decision(NamedTuple):
    """How one entry (``shift`` is None) or one shift of it fared in one stage.

    ``stage``: ``"direct"``, ``"trigger"``, ``"shift"``, ``"post_shift"``, ``"select"`` (only
    the APPLY_LIMIT cut: the applied entries are the trace's ``selected``);
    ``outcome``: ``"accepted"``, ``"applied"``, or the reason it stopped: ``"no_keyword"``,
    ``"no_tag"``, ``"count"``, ``"name_block"``, ``"gate_any"``, ``"gate_all"``,
    ``"gate_none"``, ``"gate_not_all"``, ``"tags_any"``, ``"tags_all"``, ``"tags_none"``,
    ``"tags_not_all"``, ``"roll"``, ``"apply_limit"``, ``"bucket"`` (the fractional
    priority that throws). ``detail`` holds what explain prints (the keyword, the term,
    the roll and the probability, ...).
    """
    entry: int                       # the entry's position in the book (a shift's parent)
    shift: int | None
    stage: str
    outcome: str
    detail: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JanitorResult:
    """One run of the script on one context.

    ``personality`` / ``scenario``: ``context.character``'s texts afterwards (``None`` when
    the script leaves something that is not a string); after an ``error`` they are the
    initial ones. ``trace``: the vectors' trace object. ``decisions``: per-entry record,
    in evaluation order.
    """
    personality: str | None
    scenario: str | None
    error: JanitorError | None
    random_calls: int
    trace: Mapping[str, Any]
    decisions: tuple[Decision, ...] = ()
    haystack_parts: tuple[str, ...] = ()     # each window message normalised, oldest first
    profile: str = "script"
    window_start: int = 0                    # last_messages index of the window's first message (-1: last_message)
    engine: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The vectors' ``expected`` shape."""
        return {"personality": self.personality, "scenario": self.scenario,
                "error": None if self.error is None else self.error.to_json(),
                "random_calls": self.random_calls,
                "trace": {k: _plain(self.trace.get(k)) for k in TRACE_FIELDS}}

    def explain(self, index: int | None = None) -> str:
        """Readable account of why each entry (or only entry ``index``) did or did not apply."""
        from .explain import explain_text  # import-cost: explain is text formatting, loaded on use
        return explain_text(self, index)

    def explanations(self, index: int | None = None) -> list[Any]:
        """The same account as :class:`~lorescan.janitor.explain.EntryExplanation` records."""
        from .explain import explain_entries  # import-cost: explain is text formatting, loaded on use
        return explain_entries(self, index)


def _plain(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v
