"""Plain entries walked before their records are built (issue 20): an entry whose compiled flags
say only its primary keys decide it (``FLAG_PLAIN``, ``FLAG_PLAIN_NOT_IN_RECURSION``) is walked
as a :class:`~lorescan.st.tables.PlainRef`; its record is built only when a key of it matches,
or when the turn touches it (sticky, cooldown). Every answer, diagnostics included, is the
one a walk that builds every candidate gives."""
from __future__ import annotations

import random

import pytest

import lorescan.st.tables as tables_module
from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.match.lsc import save_compiled
from lorescan.model import Lorebook, entry_from_fields
from lorescan.st.compiled import FLAG_PLAIN, FLAG_PLAIN_NOT_IN_RECURSION, compile_book, load_compiled
from lorescan.st.settings import Compat

OPTIONS = Compat.of("sillytavern").match_options(case_sensitive=False, match_whole_words=True)
SETTINGS = STSettings(scan_depth=2, recursive=True, budget_percent=50, match_whole_words=True)

# (extra fields, the plain flag the entry must get): every condition that makes an entry not plain
CASES = [
    ({"cooldown": 3}, FLAG_PLAIN),                    # timed, but plain while the turn does not touch it
    ({"excludeRecursion": True}, FLAG_PLAIN_NOT_IN_RECURSION),
    ({"constant": True}, 0),
    ({"disable": True}, 0),
    ({"content": "@@activate\nforced in"}, 0),
    ({"content": "@@dont_activate\nkept out"}, 0),
    ({"triggers": ["normal"]}, 0),
    ({"characterFilter": {"names": ["Mara"], "tags": [], "isExclude": False}}, 0),
    ({"delay": 3}, 0),
    ({"delayUntilRecursion": True}, 0),
    ({"key": []}, 0),
    ({"selective": True, "keysecondary": ["harbour"], "selectiveLogic": 0}, 0),
    ({"scanDepth": 5}, 0),
    ({"matchPersonaDescription": True}, 0),
]


def _book() -> Lorebook:
    entries = []
    for uid, (extra, _) in enumerate(CASES):
        fields = {"uid": uid, "key": [f"word{uid}"], "content": f"about word{uid + 1}", "order": 100 - uid, **extra}
        entries.append(entry_from_fields(fields, uid=uid))
    # entries no message names: candidates only through the automaton's substring hits
    for uid in range(len(CASES), len(CASES) + 6):
        timed = {"sticky": 4} if uid == len(CASES) + 2 else {}
        entries.append(entry_from_fields({"uid": uid, "key": [f"lamp{uid}"], "content": f"lamp{uid} text",
                                          "order": 10, **timed}, uid=uid))
    return Lorebook(name="plain-book", entries=tuple(entries))


def _chat(book: Lorebook) -> list[ChatMessage]:
    # lampN (N > len(CASES)) only at depth 4: a candidate (an entry of scanDepth 5 widens the
    # candidates' window) that its own window (depth 2) does not reach
    n = len(CASES)
    return [ChatMessage("Anon", "Good evening."),
            ChatMessage("Mara", " ".join(f"lamp{uid}" for uid in range(n + 1, n + 6))),
            ChatMessage("Anon", "Evening."),
            ChatMessage("Anon", "We talk about word0 and word1 by the harbour."),
            ChatMessage("Mara", f"lamp{n} and word13")]


def _scan(compiled, book, state=None) -> tuple[STEngine, set, dict]:
    """The engine, the uids whose records the scan built, and the answer (with diagnostics: an
    explanation builds every entry)."""
    engine = STEngine([BookSource(compiled, ("character",))], SETTINGS)
    r = engine.scan(_chat(book), max_context=2000, random=random.Random(3).random, timed_effects=state)
    entries = engine.tables.entries
    built = {entries._compiled[0].uids[entries._order_index[g]] for g, info in enumerate(entries._items)
             if info is not None}
    return engine, built, r.to_json(diagnostics=True)


@pytest.fixture
def loaded(tmp_path):
    book = _book()
    path = tmp_path / "plain.lsc"
    save_compiled(compile_book(book, OPTIONS, token_counts=True), path)
    return book, path


def test_the_compiled_flags_name_the_plain_entries():
    compiled = compile_book(_book(), OPTIONS)
    for uid, (extra, want) in enumerate(CASES):
        got = int(compiled.entry_flags[uid]) & (FLAG_PLAIN | FLAG_PLAIN_NOT_IN_RECURSION)
        assert got == want, (uid, extra)


def test_a_plain_entry_no_key_matches_is_never_built(loaded):
    book, path = loaded
    _, built, got = _scan(load_compiled(path), book)
    n = len(CASES)
    reasons = {d["uid"]: d["reason"] for d in got["diagnostics"]}
    # substring hits only (the word rule refuses them): walked, noted, not built
    for uid in range(n + 1, n + 6):
        assert reasons[uid] == "no_key_match"
        assert uid not in built
    assert int(load_compiled(path).entry_flags[n + 2]) & FLAG_PLAIN
    assert reasons[n] == "key" and n in built          # its key matched: built
    assert reasons[0] == "key" and 0 in built
    assert 13 in built                                  # not plain (match persona description): built to be gated


def test_answers_match_a_walk_that_builds_every_candidate(loaded, monkeypatch):
    book, path = loaded
    engine = STEngine([BookSource(book, ("character",))], SETTINGS)
    h = engine.tables.by_key[f"{book.name}.0"].hash
    states = [None, {"sticky": {}, "cooldown": {f"{book.name}.0": {"hash": h, "start": 1, "end": 99,
                                                                  "protected": False}}},
              {"sticky": {f"{book.name}.16": {"hash": engine.tables.by_key[f"{book.name}.16"].hash, "start": 1,
                                              "end": 99, "protected": False}}, "cooldown": {}}]
    lazy = [_scan(load_compiled(path), book, s)[2] for s in states]
    monkeypatch.setattr(tables_module.EntryTable, "walkable", lambda self, positions, lazy=True: self.many(positions))
    eager = [_scan(load_compiled(path), book, s)[2] for s in states]
    assert lazy == eager
    assert lazy[0] != lazy[1] and lazy[0] != lazy[2]        # the timed states changed the turn
    reasons = {d["uid"]: d["reason"] for d in lazy[1]["diagnostics"]}
    assert reasons[0] == "cooldown"
    assert {d["uid"]: d["reason"] for d in lazy[2]["diagnostics"]}[16] == "sticky"
