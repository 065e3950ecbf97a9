"""A cold engine over a loaded book (issue 20): what the compiled form stores (timed entries'
fingerprints, the contents' token counts) is read instead of computed, building an engine builds
no entry record beyond the always-walked ones, and every answer is the one an engine that
computes everything gives."""
from __future__ import annotations

import random

import pytest

import lorescan.st.budget as budget_module
import lorescan.st.lsc as lsc_module
import lorescan.st.tables as tables_module
from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.match.lsc import save_compiled
from lorescan.model import Lorebook, entry_from_fields
from lorescan.st.compiled import FLAG_TIMED, compile_book, load_compiled, restore_compiled
from lorescan.st.settings import Compat
from lorescan.tokens import TiktokenCounter, count_text, shared_counter, storable_count, stored_text_count

# Contents of every shape count_text treats apart: plain ASCII, leading whitespace (a join needs
# its shape), non-ASCII, a character this process may not vouch for (U+0378, unassigned), a lone
# surrogate (never stored), decorator lines (left to the engine), a macro (substituted: counted).
CONTENTS = [
    "Mara keeps the lighthouse at Saltmere; she trusts no one who comes by sea.",
    "  \n  The old harbour floods at every spring tide.",
    "Der Leuchtturm steht seit 1820 — älter als das Dorf, sagt man. 灯台守のマラ。",
    "An odd glyph \u0378 sits in the ledger beside the lighthouse keeper's name.",
    "A broken letter \ud800 from the lighthouse archive.",
    "@@activate\nThe bell of the lighthouse rings at dusk.",
    "{{char}} remembers the lighthouse storm; {{user}} does not.",
    "",
    "Saltmere's fishermen speak of the lighthouse keeper as of weather.",
]
STICKY_UID = 1


def _book(name: str = "cold-book") -> Lorebook:
    entries = []
    for uid, content in enumerate(CONTENTS * 3):
        fields = {"uid": uid, "key": ["lighthouse", f"tag{uid}"], "content": content, "order": 100 - uid}
        if uid == STICKY_UID:
            fields["sticky"] = 5
        elif uid % 7 == 3:
            fields["cooldown"] = 2
        if uid == 4:
            fields["constant"] = True
        entries.append(entry_from_fields(fields, uid=uid))
    return Lorebook(name=name, entries=tuple(entries))


def _chat() -> list[ChatMessage]:
    return [ChatMessage("Anon", "We sail to Saltmere tonight."),
            ChatMessage("Seraphina", "Ask about the lighthouse when we land.")] * 3


OPTIONS = Compat.of("sillytavern").match_options(case_sensitive=False, match_whole_words=False)
SETTINGS = STSettings(scan_depth=4, recursive=True, budget_percent=25)


def _macros(text: str) -> str:
    return text.replace("{{char}}", "Seraphina").replace("{{user}}", "Anon")


def _loaded(tmp_path, book: Lorebook, token_counts: bool):
    path = tmp_path / f"{book.name}-{int(token_counts)}.lsc"
    save_compiled(compile_book(book, OPTIONS, token_counts=token_counts), path)
    return load_compiled(path)


def _run(compiled, state=None, max_context: int = 600, **kw) -> dict:
    engine = STEngine([BookSource(compiled, ("character",))], SETTINGS, **kw)
    r = engine.scan(_chat(), max_context=max_context, substitute=_macros, random=random.Random(7).random,
                    timed_effects=state)
    return r.to_json(diagnostics=True)


def _sticky_state(book: Lorebook) -> dict:
    engine = STEngine([BookSource(book, ("character",))], SETTINGS)
    h = engine.tables.by_key[f"{book.name}.{STICKY_UID}"].hash
    return {"sticky": {f"{book.name}.{STICKY_UID}": {"hash": h, "start": 1, "end": 99, "protected": False}},
            "cooldown": {}}


def _counted(monkeypatch) -> list[str]:
    seen: list[str] = []

    def counting(counter, text, *, limit=None):
        seen.append(text)
        return count_text(counter, text, limit=limit)
    monkeypatch.setattr(budget_module, "count_text", counting)
    return seen


@pytest.mark.parametrize("max_context", [60, 600, 100_000])      # overflow early, late, never
def test_stored_counts_give_the_answers_counting_gives(tmp_path, monkeypatch, max_context):
    book = _book()
    state = _sticky_state(book)
    plain = _run(_loaded(tmp_path, book, False), state, max_context)
    seen = _counted(monkeypatch)
    stored = _run(_loaded(tmp_path, book, True), state, max_context)
    assert stored == plain
    assert plain["activated"], "the turn activates nothing: the comparison shows nothing"
    # what is still counted: substituted, decorated, surrogate and empty contents only
    assert all("Seraphina" in t or "Anon" in t or "\ud800" in t or t.startswith("The bell") or t == "\n"
               for t in seen), seen


def test_a_turn_counts_nothing_a_book_stored(tmp_path, monkeypatch):
    book = Lorebook(name="plain", entries=tuple(
        entry_from_fields({"uid": i, "key": ["lighthouse"], "content": CONTENTS[i % 4] * (i + 1)}, uid=i)
        for i in range(8)))
    seen = _counted(monkeypatch)
    out = _run(_loaded(tmp_path, book, True), max_context=100_000)
    assert len(out["activated"]) == 8 and seen == []


@pytest.mark.parametrize("counter", ["len", "words", "encoding"])
def test_other_counters_count_for_themselves(tmp_path, monkeypatch, counter):
    from lorescan.tokens import count_words
    book = _book()
    count = {"len": len, "words": count_words,
             "encoding": TiktokenCounter(shared_counter().encoding)}[counter]
    plain = _run(_loaded(tmp_path, book, False), count_tokens=count)
    seen = _counted(monkeypatch)
    stored = _run(_loaded(tmp_path, book, True), count_tokens=count)
    assert stored == plain
    assert len(seen) >= len(plain["activated"]) - 1      # each admitted content counted (at most one empty)


def test_unsure_bits_are_decided_again_under_other_unicode_tables(tmp_path, monkeypatch):
    book = _book()
    plain = _run(_loaded(tmp_path, book, False))
    monkeypatch.setattr(tables_module, "unicode_tables", lambda: "other tables")
    compiled = _loaded(tmp_path, book, True)
    assert tables_module._counts_apply(compiled, shared_counter()) == 1
    assert _run(compiled) == plain


@pytest.mark.parametrize("text", [c + "\n" for c in CONTENTS if c and "\ud800" not in c] + ["x", " x", "\n\n"])
def test_a_stored_count_is_the_textcount_count_text_gives(text):
    tik = shared_counter()
    want = count_text(tik, text)
    for same_tables in (True, False):
        got = stored_text_count(tik, text, storable_count(tik, text), same_tables)
        assert got is not None
        assert (got.total, got.exact, got.first, got.last, got.hard, got.clean, got.unsure) == \
               (want.total, want.exact, want.first, want.last, want.hard, want.clean, want.unsure)
        if not want.unsure:
            assert got.shape(tik) == want.shape(tik)


def test_surrogates_and_long_texts_are_not_stored():
    tik = shared_counter()
    assert storable_count(tik, "a \ud800 b") == -1
    assert storable_count(tik, "word " * 20_000) == -1
    assert storable_count(len, "anything") == -1
    assert stored_text_count(tik, "x", -1) is None


def test_token_counts_survive_the_compact_form(tmp_path):
    compiled = compile_book(_book(), OPTIONS, token_counts=True)
    again = restore_compiled(compiled.to_lsc())
    assert again.unit_tokens[:2] == compiled.unit_tokens[:2]
    assert again.unit_tokens[2].tolist() == compiled.unit_tokens[2].tolist()
    assert compile_book(_book(), OPTIONS).unit_tokens is None
    assert restore_compiled(compile_book(_book(), OPTIONS).to_lsc()).unit_tokens is None


def test_building_an_engine_builds_only_the_always_walked_entries(tmp_path):
    book = _book()
    compiled = _loaded(tmp_path, book, True)
    engine = STEngine([BookSource(compiled, ("character",))], SETTINGS)
    entries = engine.tables.entries
    built = [i for i, info in enumerate(entries._items) if info is not None]
    assert sorted(built) == sorted(s.gpos for s in engine.tables.always)
    assert int((compiled.entry_flags & FLAG_TIMED != 0).sum()) >= 3      # timed entries were left unbuilt
    assert len(built) < len(entries)


@pytest.mark.parametrize("kind", ["sticky", "cooldown", "unknown"])
def test_timed_records_find_their_entries_from_the_stored_fingerprints(tmp_path, kind):
    book = _book()
    reference = STEngine([BookSource(book, ("character",))], SETTINGS)
    uid = STICKY_UID if kind == "sticky" else 3
    h = reference.tables.by_key[f"{book.name}.{uid}"].hash if kind != "unknown" else 12345
    state = {"sticky": {}, "cooldown": {}}
    state["cooldown" if kind == "cooldown" else "sticky"][f"{book.name}.{uid}"] = {
        "hash": h, "start": 1, "end": 99, "protected": False}
    want = reference.scan(_chat(), max_context=600, substitute=_macros, random=random.Random(7).random,
                          timed_effects=state).to_json(diagnostics=True)
    got = _run(_loaded(tmp_path, book, True), state)
    assert got == want
    reason = {d["uid"]: d["reason"] for d in got["diagnostics"]}[uid]
    assert reason == {"sticky": "sticky", "cooldown": "cooldown", "unknown": "key"}[kind]


@pytest.mark.parametrize("cooldown", [5, 2.5, None])
def test_evaluating_a_timed_record_reads_the_entry_without_building_it(tmp_path, monkeypatch, cooldown):
    # an entry on cooldown that no key of the chat wakes: evaluation reads its record's sticky and
    # cooldown and builds nothing (a float is left to the entry's own build, with the same answer)
    fields = {"uid": 9, "key": ["nowhere-in-the-chat"], "content": "Asleep.", "sticky": 3 if cooldown is None else None,
              "cooldown": cooldown}
    book = Lorebook(name="timed", entries=(entry_from_fields(fields, uid=9),))
    reference = STEngine([BookSource(book, ("character",))], SETTINGS)
    info = reference.tables.entries[0]
    state = {"sticky": {}, "cooldown": {"timed.9": {"hash": info.hash, "start": 1, "end": 99, "protected": False}}}
    built: list[int] = []
    build = lsc_module._EntryRecords.entry
    monkeypatch.setattr(lsc_module._EntryRecords, "entry", lambda self, i: built.append(i) or build(self, i))
    compiled = _loaded(tmp_path, book, True)
    engine = STEngine([BookSource(compiled, ("character",))], SETTINGS)
    got = engine.tables.by_hash.get(info.hash, False)
    assert (got.key, got.sticky, got.cooldown) == ("timed.9", fields["sticky"], cooldown)
    assert built == ([0] if type(cooldown) is float else []), built
    built.clear()
    r = engine.scan(_chat(), max_context=600, random=random.Random(7).random, timed_effects=state)
    assert built == ([0] if type(cooldown) is float else []), built
    want = reference.scan(_chat(), max_context=600, random=random.Random(7).random, timed_effects=state)
    assert r.to_json(diagnostics=True) == want.to_json(diagnostics=True)
    assert r.timed_effects == want.timed_effects
