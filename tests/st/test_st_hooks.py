"""Per-call hooks: ``STEngine.scan(..., substitute=, random=, post_process=)`` gives exactly what the
same hooks given to the constructor give, leaves the shared engine untouched, and never copies it."""
from __future__ import annotations

import copy
import functools
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import need_shared, shared_files
from tests.support.hook_helpers import OTHER, SERA, chat_of, macro_book, macros, tagged
from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.app.conformance import iter_cases
from lorescan.errors import SettingsError
from lorescan.formats.sillytavern import read_world
from lorescan.js.text import js_count_words
from lorescan.match.cache import ChatScan
from lorescan.model import Lorebook, entry_from_fields
from lorescan.st import Character
from tests.support.reference_matcher import ReferenceScanView

VECTORS = sorted((Path(__file__).resolve().parent.parent / "conformance" / "st").glob("*.json"))
REAL_VECTORS = shared_files("conformance/st-real", "*.json")


# -- the conformance vectors, hooks at construction vs per call ------------------------------------

def _case_runs(case: dict, source: str, *, per_call: bool) -> list[dict]:
    settings = STSettings.from_mapping(case.get("settings") or {})
    books = [BookSource(read_world(b["data"], source=source, name=b["name"], fill_defaults=False),
                        tuple(b["roles"])) for b in case["books"]]
    rng = random.Random(len(case["name"]))
    hooks = {"substitute": macros(SERA), "random": rng.random, "post_process": tagged}
    engine = STEngine(books, settings, compat="sillytavern", count_tokens=js_count_words,
                      **({} if per_call else hooks))
    ch = case.get("character")
    character = Character(ch.get("name", ""), ch.get("avatar", ""), None) if ch else None
    an = case.get("authors_note")
    injects = ([an["content"]] if an is not None and an.get("scan") else []) + \
        [i["content"] for i in case.get("injections", []) if i.get("scan")]
    state, out = None, []
    for turn in case["turns"]:
        messages = [ChatMessage(m["name"], m["mes"], bool(m.get("is_user"))) for m in turn["messages"]]
        result = engine.scan(messages, max_context=case["max_context"], character=character,
                             global_scan_data=case.get("global_scan_data"), injects=injects,
                             authors_note=an["content"] if an is not None else None,
                             trigger=turn.get("trigger", "normal"), dry_run=bool(turn.get("dry_run")),
                             timed_effects=state, **(hooks if per_call else {}))
        state = result.timed_effects
        out.append(result.to_json())
    return out


@pytest.mark.parametrize("path", VECTORS + REAL_VECTORS, ids=lambda p: getattr(p, "name", str(p)))
def test_per_call_hooks_match_constructor_hooks_on_every_vector(path):
    if path is None:                 # the st-real vectors' placeholder where the real data is absent
        need_shared("conformance/st-real")
    for case in iter_cases(str(path)):
        assert _case_runs(case, str(path), per_call=True) == _case_runs(case, str(path), per_call=False), \
            case["name"]


# -- a book made of macro keys -------------------------------------------------------------------
def _engine(**hooks) -> STEngine:
    return STEngine([BookSource(macro_book(), ("global",))], STSettings(scan_depth=3, recursive=True),
                    count_tokens=js_count_words, **hooks)


def _turns(engine: STEngine, chat: list[ChatMessage], seed: int, table: dict[str, str] | None, *,
           per_call: bool, cache: ChatScan | None = None) -> list[dict]:
    rng = random.Random(seed)
    hooks = {"random": rng.random, "post_process": tagged, **({"substitute": macros(table)} if table else {})}
    if not per_call:
        engine = _engine(**hooks)
    out = []
    for n in range(1, len(chat) + 1):
        r = engine.scan(chat[:n], max_context=4000, cache=cache, **(hooks if per_call else {}))
        out.append(r.to_json())
    return out


@pytest.mark.parametrize("table", [SERA, OTHER, None], ids=["sera", "other", "no-macros"])
def test_per_call_hooks_match_constructor_hooks_on_macro_keys(table):
    shared = _engine()
    for seed in range(6):
        chat = chat_of(12, seed)
        assert _turns(shared, chat, seed, table, per_call=True) == _turns(shared, chat, seed, table, per_call=False)


def test_the_macro_book_activates_differently_under_each_macro_table():
    # the differential above compares something: each table changes what activates
    chat = chat_of(12, 1)
    runs = [_turns(_engine(), chat, 1, table, per_call=True) for table in (SERA, OTHER, None)]
    assert runs[0] != runs[1] and runs[0] != runs[2] and runs[1] != runs[2]
    assert any("Seraphina keeps a lantern." in t["world_info_before"] for t in runs[0])


def test_alternating_macros_on_one_chat_cache_give_each_table_its_own_answer():
    engine, cache = _engine(), ChatScan()
    chat = chat_of(12, 4)
    tables = {"sera": SERA, "other": OTHER}
    mixed: dict[str, list[dict]] = {name: [] for name in tables}
    for n in range(1, len(chat) + 1):
        for name, table in tables.items():       # one chat cache, the macros changing every call
            mixed[name].append(engine.scan(chat[:n], max_context=4000, cache=cache, substitute=macros(table),
                                           random=lambda: 0.25, post_process=tagged).to_json())
    alone = {name: [_engine(substitute=macros(table), random=lambda: 0.25, post_process=tagged)
                    .scan(chat[:n], max_context=4000).to_json() for n in range(1, len(chat) + 1)]
             for name, table in tables.items()}
    assert mixed == alone
    assert alone["sera"] != alone["other"]


def test_threads_with_their_own_macros_and_seeds_share_one_engine():
    shared = _engine()
    jobs = [(seed, (SERA, OTHER, None)[seed % 3]) for seed in range(12)]
    serial = [_turns(_engine(), chat_of(10, seed), seed, table, per_call=True) for seed, table in jobs]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda job: _turns(shared, chat_of(10, job[0]), job[0], job[1], per_call=True),
                                 jobs))
    assert threaded == serial


def test_per_call_hooks_leave_the_engine_hooks_as_they_were():
    engine = _engine(substitute=macros(SERA))
    chat = chat_of(12, 2)
    before = [engine.scan(chat[:n], max_context=4000, random=lambda: 0.1).to_json() for n in range(1, 13)]
    engine.scan(chat, max_context=4000, substitute=macros(OTHER), random=lambda: 0.9, post_process=tagged)
    after = [engine.scan(chat[:n], max_context=4000, random=lambda: 0.1).to_json() for n in range(1, 13)]
    assert after == before


def test_a_copied_engine_shares_what_the_constructor_computed():
    engine = _engine(random=lambda: 0.3)
    engine.scan(chat_of(6, 0), max_context=4000, timed_effects={"sticky": {}, "cooldown": {}})
    clone = copy.copy(engine)
    assert clone.tables is engine.tables and clone._gates is engine._gates
    clone.substitute = macros(SERA)           # a hook set on the copy stays on the copy
    assert engine.substitute is None
    chat = chat_of(12, 3)
    assert clone.scan(chat, max_context=4000).to_json() == \
        engine.scan(chat, max_context=4000, substitute=macros(SERA)).to_json()


@pytest.mark.parametrize("hook", ["substitute", "random", "post_process"])
def test_a_hook_that_is_not_callable_is_a_settings_error_naming_it(hook):
    with pytest.raises(SettingsError, match=f"field '{hook}'.*must be callable"):
        _engine().scan(chat_of(3, 0), max_context=4000, **{hook: "not a function"})


@pytest.mark.parametrize("table", [SERA, OTHER], ids=["sera", "other"])
def test_macro_entries_are_walked_where_the_naive_view_finds_their_expanded_keys(table):
    # the naive reference view walks every entry and scans every text (no candidates, no
    # content-hit reuse), so it checks the narrowing of macro entries and the chunk parts
    rows = [{"key": [f"{{{{char}}}}'s {w}"], "content": f"{w} for {{{{user}}}}."} for w in ("keep", "gate", "tower")]
    rows += [{"key": ["Anon", "Tess"], "content": "{{char}}'s tower stands."},
             {"key": ["Seraphina gate", "Brannoc gate"], "content": "Near {{char}}'s keep."},
             {"key": ["rain"], "content": "The rain on {{char}}'s gate."},
             {"key": ["door"], "content": "{{char}} gate opens."}]       # a plain key only its expansion holds
    book = Lorebook(name="Narrow", entries=tuple(entry_from_fields({"uid": uid, "order": 50, **row}, source="narrow")
                                                 for uid, row in enumerate(rows)))
    make = functools.partial(STEngine, [BookSource(book, ("global",))], STSettings(scan_depth=2, recursive=True),
                             count_tokens=js_count_words, random=lambda: 0.5)
    fast, slow, cache = make(), make(_view=ReferenceScanView), ChatScan()
    rng = random.Random(9)
    words = ["rain", "Anon", "Tess", "Seraphina's keep", "Brannoc's gate", "door"]
    chat = [ChatMessage("U", " ".join(rng.choice(words) for _ in range(3))) for _ in range(14)]
    activated = 0
    for n in range(1, len(chat) + 1):
        got = fast.scan(chat[:n], max_context=4000, cache=cache, substitute=macros(table))
        want = slow.scan(chat[:n], max_context=4000, substitute=macros(table))
        assert got.to_json() == want.to_json(), n
        activated += len(got.activated)
    assert activated > len(chat)
