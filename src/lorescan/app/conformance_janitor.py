"""Run JanitorAI script conformance vectors (``tests/conformance/janitor/README.md`` format).

Every turn is an independent run of :class:`~lorescan.janitor.JanitorEngine` built from the
case's ``book`` and the turn's ``settings``, fed the turn's ``random`` values; it passes
when the personality, the scenario, the error's name (or its absence), the number of random
values read and every member of the trace equal the expectation.
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import FormatError
from ..janitor import JanitorEngine

__all__ = ["FORMAT", "check_janitor_case", "janitor_turn_diffs", "SETTING_KEYS"]

FORMAT = "janitor-lorebook-conformance"
SETTING_KEYS = ("apply_limit", "window_depth")
CONTRACT = ("personality", "scenario", "error", "random_calls")


def check_janitor_case(case: Any, path: str, i: int) -> None:
    """Raise a located :class:`FormatError` unless ``case`` has the shape the runner reads."""
    def bad(problem: str, field: str | None = None) -> FormatError:
        return FormatError(problem, source=path, entry=f"case {i}", field=field)

    if not isinstance(case, dict):
        raise bad(f"a case must be an object, got {type(case).__name__}")
    if not isinstance(case.get("name", "?"), str):
        raise bad("expected a string", "name")
    if "book" not in case:
        raise bad("missing", "book")
    turns = case.get("turns")
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise bad("expected a list of objects", "turns")
    for t, turn in enumerate(turns):
        if not isinstance(turn.get("settings", {}), dict):
            raise bad("expected an object", f"turns[{t}].settings")
        rnd = turn.get("random", [])
        if not isinstance(rnd, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                for v in rnd):
            raise bad("expected a list of numbers", f"turns[{t}].random")
        exp = turn.get("expected")
        if not isinstance(exp, dict) or not isinstance(exp.get("trace", {}), dict):
            raise bad("expected an object with a 'trace' object", f"turns[{t}].expected")


def _diff(name: str, got: Any, want: Any) -> str:
    g = json.dumps(got, ensure_ascii=False)
    w = json.dumps(want, ensure_ascii=False)
    if len(g) > 600:
        g = g[:600] + "…"
    if len(w) > 600:
        w = w[:600] + "…"
    return f"    {name}:\n      expected {w}\n      got      {g}"


def janitor_turn_diffs(case: dict[str, Any], turn: dict[str, Any], engine: JanitorEngine | None = None) -> list[str]:
    """The differences between one turn's run and its expectation (empty: the turn passes)."""
    if engine is None:
        settings = turn.get("settings") or {}
        engine = JanitorEngine(case["book"], **{k: settings[k] for k in SETTING_KEYS if k in settings})
    got = engine.run(turn.get("context"), random=list(turn.get("random", []))).to_json()
    want = turn["expected"]
    diffs = []
    for f in CONTRACT:
        g, w = got[f], want.get(f)
        if f == "error":
            g, w = (g or {}).get("name"), (w or {}).get("name")
        if g != w:
            diffs.append(_diff(f, g, w))
    for k, w in (want.get("trace") or {}).items():
        if got["trace"].get(k) != w:
            diffs.append(_diff(f"trace.{k}", got["trace"].get(k), w))
    return diffs
