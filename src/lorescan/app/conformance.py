"""Run SillyTavern conformance vectors (``shared/conformance/README.md`` format), and JanitorAI
script ones (``conformance/janitor/README.md``, run by :mod:`.conformance_janitor`).

Each case builds an :class:`~lorescan.st.engine.STEngine` in the ``sillytavern`` profile with
the suite's fixed rules (word-count tokens, a constant random number, identity macros),
replays its turns in order carrying the timed-effects record, and compares every
contract field of ``expected``. ``loops`` is informative and reported separately.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, TextIO

from ..errors import FormatError, LorebookError
from ..formats._safety import parse_json
from ..limits import DEFAULT_LIMITS
from ..formats.sillytavern import read_world
from ..st.settings import STSettings
from ..st import BookSource, Character, ChatMessage, STEngine
from ..js.text import js_count_words
from .conformance_janitor import FORMAT as JANITOR_FORMAT, check_janitor_case, janitor_turn_diffs

__all__ = ["CaseOutcome", "run_case", "run_janitor_case", "run_file", "run_files", "iter_cases",
           "iter_janitor_cases", "CONTRACT_FIELDS"]

ST_FORMAT = "sillytavern-world-info-conformance"

CONTRACT_FIELDS = ("activated", "world_info_before", "world_info_after", "depth_entries", "an_top",
                   "an_bottom", "em_entries", "outlets", "authors_note", "budget_overflowed", "timed_effects")
INFORMATIVE_FIELDS = ("loops", "overflow_alert_shown")


@dataclass(slots=True)
class TurnOutcome:
    index: int
    ok: bool
    diffs: list[str] = field(default_factory=list)
    informative: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CaseOutcome:
    name: str
    turns: list[TurnOutcome]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(t.ok for t in self.turns)


def _engine_for(case: dict[str, Any], source: str, engine_kwargs: dict[str, Any]) -> STEngine:
    settings = STSettings.from_mapping(case.get("settings") or {})
    books = []
    for b in case["books"]:
        book = read_world(b["data"], source=f"{source}:{case['name']}:{b['name']}", name=b["name"],
                          fill_defaults=False)
        books.append(BookSource(book, tuple(b["roles"])))
    rng = float(case.get("rng_constant", 0.5))
    return STEngine(books, settings, compat="sillytavern", count_tokens=js_count_words,
                    random=lambda: rng, **engine_kwargs)


def _sort_obj(v: Any) -> Any:
    # key order of maps is not significant for outlets and timed_effects
    if isinstance(v, dict):
        return {k: _sort_obj(v[k]) for k in sorted(v)}
    return v


def _diff(name: str, got: Any, want: Any) -> str:
    g = json.dumps(got, ensure_ascii=False, sort_keys=True)
    w = json.dumps(want, ensure_ascii=False, sort_keys=True)
    if len(g) > 600:
        g = g[:600] + "…"
    if len(w) > 600:
        w = w[:600] + "…"
    return f"    {name}:\n      expected {w}\n      got      {g}"


def run_case(case: dict[str, Any], *, source: str = "<memory>", engine_kwargs: dict[str, Any] | None = None,
             cache_factory: Callable[[], Any] | None = None) -> CaseOutcome:
    """Run every turn of one case; never raises for a failing case (the error is recorded)."""
    name = case.get("name", "?")
    try:
        engine = _engine_for(case, source, engine_kwargs or {})
    except (LorebookError, KeyError, TypeError, ValueError) as exc:
        return CaseOutcome(name, [], f"could not build the case: {exc}")
    ch = case.get("character")
    character = None
    if ch is not None:
        tags = ch.get("tags")
        character = Character(ch.get("name", ""), ch.get("avatar", ""),
                              tuple(str(t) for t in tags) if isinstance(tags, list) else None)
    an = case.get("authors_note")
    injects: list[str] = []
    if an is not None and an.get("scan"):
        injects.append(an["content"])
    injects.extend(i["content"] for i in case.get("injections", []) if i.get("scan"))
    state: Any = None
    cache = cache_factory() if cache_factory else None
    turns: list[TurnOutcome] = []
    for ti, turn in enumerate(case["turns"]):
        messages = [ChatMessage(m["name"], m["mes"], bool(m.get("is_user"))) for m in turn["messages"]]
        try:
            result = engine.scan(messages, max_context=case["max_context"], character=character,
                                 global_scan_data=case.get("global_scan_data"), injects=injects,
                                 authors_note=an["content"] if an is not None else None,
                                 trigger=turn.get("trigger", "normal"), dry_run=bool(turn.get("dry_run")),
                                 timed_effects=state, cache=cache)
        except Exception as exc:  # noqa: BLE001 - a crash is a failing turn, reported with its type
            turns.append(TurnOutcome(ti, False, [f"    raised {type(exc).__name__}: {exc}"]))
            break
        state = result.timed_effects
        got = result.to_json()
        want = turn["expected"]
        diffs = []
        for f in CONTRACT_FIELDS:
            g, w = got[f], want.get(f)
            if f in ("outlets", "timed_effects"):
                g, w = _sort_obj(g), _sort_obj(w)
            if g != w:
                diffs.append(_diff(f, got[f], w))
        info = [_diff(f, got[f], want[f]) for f in INFORMATIVE_FIELDS if f in want and got[f] != want[f]]
        turns.append(TurnOutcome(ti, not diffs, diffs, info))
    return CaseOutcome(name, turns)


def _load_vectors(path: str) -> tuple[str, list[Any]]:
    """The ``format`` and the ``cases`` list of one vector file (either format)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(DEFAULT_LIMITS.max_file_bytes + 1)
    except OSError as exc:
        raise FormatError(f"cannot read conformance file: {exc.strerror or exc}", source=path) from exc
    data = parse_json(raw, source=path)
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt not in (ST_FORMAT, JANITOR_FORMAT):
        raise FormatError(f"not a {ST_FORMAT} or {JANITOR_FORMAT} file", source=path, field="format")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise FormatError("'cases' must be a list", source=path, field="cases")
    return fmt, cases


def iter_cases(path: str) -> Iterator[dict[str, Any]]:
    """The cases of one SillyTavern vector file, each checked for the shape ``run_case`` reads.

    Raises :class:`FormatError` naming the file, the case and the field for anything
    malformed (deep nesting and huge integers included)."""
    fmt, cases = _load_vectors(path)
    if fmt != ST_FORMAT:
        raise FormatError(f"not a {ST_FORMAT} file", source=path, field="format")
    for i, case in enumerate(cases):
        _check_case(case, path, i)
    yield from cases


def iter_janitor_cases(path: str) -> Iterator[dict[str, Any]]:
    """The cases of one JanitorAI script vector file, each checked for the shape the runner reads."""
    fmt, cases = _load_vectors(path)
    if fmt != JANITOR_FORMAT:
        raise FormatError(f"not a {JANITOR_FORMAT} file", source=path, field="format")
    for i, case in enumerate(cases):
        check_janitor_case(case, path, i)
    yield from cases


def run_janitor_case(case: dict[str, Any], *, source: str = "<memory>") -> CaseOutcome:
    """Run every turn of one JanitorAI case (each turn is an independent run)."""
    turns: list[TurnOutcome] = []
    for ti, turn in enumerate(case["turns"]):
        try:
            diffs = janitor_turn_diffs(case, turn)
        except Exception as exc:  # noqa: BLE001 - a crash is a failing turn, reported with its type
            diffs = [f"    raised {type(exc).__name__}: {exc}"]
        turns.append(TurnOutcome(ti, not diffs, diffs))
    return CaseOutcome(case.get("name", "?"), turns)


def _check_case(case: Any, path: str, i: int) -> None:
    def bad(problem: str, field: str | None = None) -> FormatError:
        return FormatError(problem, source=path, entry=f"case {i}", field=field)

    def objects(value: Any, field: str) -> list[dict[str, Any]]:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise bad("expected a list of objects", field)
        return value

    if not isinstance(case, dict):
        raise bad(f"a case must be an object, got {type(case).__name__}")
    if not isinstance(case.get("name", "?"), str):
        raise bad("expected a string", "name")
    for b, book in enumerate(objects(case.get("books"), "books")):
        if not isinstance(book.get("name"), str) or not isinstance(book.get("roles"), list):
            raise bad("a book needs a string 'name' and a list of 'roles'", f"books[{b}]")
    mc = case.get("max_context")
    if isinstance(mc, bool) or not isinstance(mc, (int, float)):
        raise bad(f"expected a number, got {mc!r:.40}", "max_context")
    for name in ("character", "authors_note", "settings", "global_scan_data"):
        if case.get(name) is not None and not isinstance(case[name], dict):
            raise bad("expected an object", name)
    for f in ("authors_note",):
        if case.get(f) is not None and not isinstance(case[f].get("content", ""), str):
            raise bad("expected a string", f"{f}.content")
    for j, inj in enumerate(objects(case.get("injections", []), "injections")):
        if not isinstance(inj.get("content", ""), str):
            raise bad("expected a string", f"injections[{j}].content")
    for t, turn in enumerate(objects(case.get("turns"), "turns")):
        for m, msg in enumerate(objects(turn.get("messages"), f"turns[{t}].messages")):
            if not isinstance(msg.get("name"), str) or not isinstance(msg.get("mes"), str):
                raise bad("a message needs string 'name' and 'mes'", f"turns[{t}].messages[{m}]")
        if not isinstance(turn.get("expected"), dict):
            raise bad("expected an object", f"turns[{t}].expected")


def run_file(path: str, **kwargs: Any) -> list[CaseOutcome]:
    """Run every case of one vector file (SillyTavern or JanitorAI, by its ``format``)."""
    fmt, _ = _load_vectors(path)
    if fmt == JANITOR_FORMAT:
        return [run_janitor_case(c, source=path) for c in iter_janitor_cases(path)]
    return [run_case(c, source=path, **kwargs) for c in iter_cases(path)]


def run_files(paths: Iterable[str], *, out: TextIO, verbose: bool = False, show_loops: bool = False,
              **kwargs: Any) -> tuple[int, int]:
    """Run files, print a readable diff for each failing turn, end with ``N passed, M failed``
    (turns). Returns (passed, failed)."""
    passed = failed = 0
    loop_diffs = 0
    for path in paths:
        for outcome in run_file(path, **kwargs):
            if outcome.error is not None:
                failed += 1
                print(f"FAIL {os.path.basename(path)} {outcome.name}: {outcome.error}", file=out)
                continue
            for t in outcome.turns:
                if t.ok:
                    passed += 1
                    if verbose:
                        print(f"ok   {outcome.name} turn {t.index}", file=out)
                else:
                    failed += 1
                    print(f"FAIL {os.path.basename(path)} {outcome.name} turn {t.index}", file=out)
                    for d in t.diffs:
                        print(d, file=out)
                if t.informative:
                    loop_diffs += 1
                    if show_loops:
                        print(f"info {outcome.name} turn {t.index} (informative fields differ)", file=out)
                        for d in t.informative:
                            print(d, file=out)
    if loop_diffs:
        print(f"note: informative fields (loops, overflow_alert_shown) differ on {loop_diffs} turn(s)"
              + ("" if show_loops else "; --loops shows them"), file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    return passed, failed
