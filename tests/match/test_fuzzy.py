"""Typo-tolerant keys (match/fuzzy.py, docs/improved-profile.md#fuzzy-keys, docs/slot-mode.md#slot-fuzzy)."""
from __future__ import annotations

import pickle
import random
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from rapidfuzz import fuzz

from lorescan import BookSource, ChatMessage, STEngine, STSettings, SlotEngine
from lorescan.match import _kernels
from lorescan.errors import LorebookError
from lorescan.limits import DEFAULT_LIMITS
from lorescan.match import fuzzy as fuzzy_mod
from lorescan.match.cache import ChatScan
from lorescan.st.compiled import compile_book
from lorescan.match.fuzzy import FuzzyIndex, key_words
from lorescan.formats import book_from_entries
from lorescan.match import MatchOptions
from lorescan.model import Lorebook
from lorescan.slot.decorators import parse_decorators

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(autouse=True)
def backend(hits, monkeypatch):
    """Every test here runs with the pure-Python and the native hit kernel under the matcher."""
    monkeypatch.setattr(_kernels, "hits", hits)
    return hits


def entry(uid, keys, content=None, fuzzy=None, **more):
    e = {"uid": uid, "key": list(keys), "content": content if content is not None else f"E{uid}", **more}
    if fuzzy is not None:
        e["extensions"] = {"lorescan_fuzzy": fuzzy}
    return e


def fired(entries, text, *, compat="improved", book_fuzzy=None, **settings):
    """The contents the SillyTavern-mode engine inserts for one user message ``text``."""
    book = book_from_entries("fz", entries)
    if book_fuzzy is not None:
        book = Lorebook(name=book.name, entries=book.entries, fields={"extensions": {"lorescan_fuzzy": book_fuzzy}},
                        source="fz.json")
    engine = STEngine([BookSource(book, ("global",))],
                      STSettings(scan_depth=4, include_names=False, **settings), compat=compat)
    result = engine.scan([ChatMessage("u", text, is_user=True)], max_context=100_000)
    return set(result.world_info_before.split("\n")) - {""}


# -- matching and thresholds ------------------------------------------------------------------

def test_hermione_matches_hermoine_at_85():
    assert fuzz.ratio("hermione", "hermoine") == 87.5
    assert fired([entry(0, ["Hermione"], fuzzy=85)], "Where is Hermoine?") == {"E0"}


def test_threshold_exactly_at_matches_and_just_below_does_not():
    text = "Where is Hermoine?"
    assert fired([entry(0, ["Hermione"], fuzzy=87.5)], text) == {"E0"}
    assert fired([entry(0, ["Hermione"], fuzzy=87.51)], text) == set()
    # a one-letter substitution in a 10-letter word: 1 - 2/20 = 90
    assert fuzz.ratio("lighthouse", "lighthoose") == 90
    assert fired([entry(0, ["lighthouse"], fuzzy=90)], "the lighthoose") == {"E0"}
    assert fired([entry(0, ["lighthouse"], fuzzy=90.01)], "the lighthoose") == set()


def test_exact_match_still_fires_and_unrelated_words_do_not():
    assert fired([entry(0, ["Hermione"], fuzzy=85)], "Hermione is here") == {"E0"}
    assert fired([entry(0, ["Hermione"], fuzzy=85)], "Harry and Ron") == set()


def test_an_exact_entry_with_the_same_key_stays_exact():
    entries = [entry(0, ["Hermione"], fuzzy=85), entry(1, ["Hermione"])]
    assert fired(entries, "Hermoine") == {"E0"}
    assert fired(entries, "Hermione") == {"E0", "E1"}


def test_book_default_and_entry_override():
    entries = [entry(0, ["Hermione"]), entry(1, ["Hermione"], fuzzy=False), entry(2, ["Hermione"], fuzzy=95)]
    assert fired(entries, "Hermoine", book_fuzzy=85) == {"E0"}
    assert fired(entries, "Hermione", book_fuzzy=85) == {"E0", "E1", "E2"}


def test_st_decorator_line_in_the_improved_profile():
    e = entry(0, ["Hermione"], content="@@fuzzy 85\nHG")
    assert fired([e], "Hermoine") == {"HG"}
    off = entry(1, ["Hermione"], content="@@fuzzy off\nOFF")
    assert fired([off], "Hermoine", book_fuzzy=85) == set()


def test_secondary_keys_are_fuzzy_too():
    e = entry(0, ["Hermione"], fuzzy=85, keysecondary=["library"], selective=True, selectiveLogic=0)
    assert fired([e], "Hermoine in the libary") == {"E0"}
    assert fired([e], "Hermoine in the hall") == set()


def test_regex_and_wordless_keys_are_never_fuzzy():
    assert fired([entry(0, ["/Hermione/i"], fuzzy=50)], "Hermoine") == set()
    assert fired([entry(0, ["/Hermione/i"], fuzzy=50)], "hermione") == {"E0"}
    book = book_from_entries("fz", [entry(0, ["?!"], fuzzy=50)])
    cb = compile_book(book, MatchOptions.improved())
    assert cb.keys.matcher.fuzzy is None          # no word to compare: the key is exact only


# -- case and whole words ---------------------------------------------------------------------

def test_case_insensitive_compares_lowercased_words():
    assert fired([entry(0, ["Hermione"], fuzzy=85)], "HERMOINE!") == {"E0"}


def test_case_sensitive_compares_words_as_written():
    e = entry(0, ["Hermione"], fuzzy=85, caseSensitive=True)
    assert fuzz.ratio("Hermione", "hermoine") < 85
    assert fired([e], "hermoine") == set()
    assert fired([e], "Hermoine") == {"E0"}


def test_fuzzy_compares_whole_words_only():
    # "Hermoines" as a whole word is too far from "Hermione"; no part of it is tried
    assert fuzz.ratio("hermione", "hermoines") < 85
    assert fired([entry(0, ["Hermione"], fuzzy=85)], "the Hermoinesque style") == set()
    # the exact match keeps the entry's own whole-word setting (substring here)
    assert fired([entry(0, ["Hermione"], fuzzy=85, matchWholeWords=False)], "Hermionesque") == {"E0"}
    assert fired([entry(0, ["Hermione"], fuzzy=85, matchWholeWords=True)], "Hermionesque") == set()
    assert fired([entry(0, ["Hermione"], fuzzy=85, matchWholeWords=True)], "a Hermoine.") == {"E0"}


# -- multi-word keys --------------------------------------------------------------------------

def test_multi_word_key_compares_runs_of_as_many_words():
    e = entry(0, ["Hermione Granger"], fuzzy=85)
    assert fired([e], "I saw Hermoine Grangr today") == {"E0"}
    assert fired([e], "I saw Hermoine, Granger today") == {"E0"}     # words joined by one space
    assert fired([e], "I saw Hermoine today") == set()
    assert fired([e], "Hermoine\nGranger") == set()                  # a run never spans a line break


def test_single_word_key_does_not_match_two_words():
    assert fired([entry(0, ["Hermione"], fuzzy=80)], "Her mione") == set()


# -- Unicode ----------------------------------------------------------------------------------

def test_cyrillic():
    e = entry(0, ["Гермиона"], fuzzy=85)
    assert fired([e], "Где Гермоина?") == {"E0"}
    assert fired([e], "ГДЕ ГЕРМОИНА?") == {"E0"}
    assert fired([e], "Где Рон?") == set()


def test_accented_letters():
    assert fuzz.ratio("amélie", "amelie") == pytest.approx(83.333, abs=0.01)
    assert fired([entry(0, ["Amélie"], fuzzy=80)], "Amelie waves") == {"E0"}
    assert fired([entry(0, ["Amélie"], fuzzy=85)], "Amelie waves") == set()
    assert fired([entry(0, ["Zoë Ålund"], fuzzy=80)], "ZOË ÅLUNDH") == {"E0"}


# -- profiles ---------------------------------------------------------------------------------

def test_sillytavern_profile_ignores_the_field_and_the_decorator():
    entries = [entry(0, ["Hermione"], fuzzy=85), entry(1, ["Hermione"], content="@@fuzzy 85\nHG")]
    assert fired(entries, "Hermoine", compat="sillytavern") == set()
    assert fired(entries, "Hermoine", compat="sillytavern", book_fuzzy=85) == set()
    assert fired(entries, "Hermione", compat="sillytavern") == {"E0", "HG"}
    book = book_from_entries("fz", entries)
    exact = compile_book(book, MatchOptions.sillytavern())
    assert exact.keys.matcher.fuzzy is None and len(exact.keys.matcher._table_bytes) == 5
    assert "~" not in "".join(spec[0] for spec in exact.keys.specs)


def test_bad_thresholds_name_the_source_entry_and_field():
    for bad in (0, 101, "85", True, float("nan")):
        book = book_from_entries("fz", [entry(7, ["Hermione"], fuzzy=bad)], source="bad.json")
        with pytest.raises(LorebookError) as info:
            compile_book(book, MatchOptions.improved())
        assert (info.value.source, info.value.entry, info.value.field) == ("bad.json", 7,
                                                                           "extensions.lorescan_fuzzy")
    book = Lorebook(name="b", entries=(), fields={"extensions": {"lorescan_fuzzy": -3}}, source="b.json")
    with pytest.raises(LorebookError, match=r"b\.json, field 'extensions\.lorescan_fuzzy'"):
        compile_book(book, MatchOptions.improved())


# -- slot mode --------------------------------------------------------------------------------

def slot_contents(entries, text, book_fuzzy=None):
    book = book_from_entries("fz", entries)
    if book_fuzzy is not None:
        book = Lorebook(name="fz", entries=book.entries, fields={"extensions": {"lorescan_fuzzy": book_fuzzy}})
    result = SlotEngine([book]).run([("user", text)], turn_id="t")
    return {m.content for m in result.messages}


def test_slot_decorator_field_and_book_default():
    assert slot_contents([entry(0, ["Hermione"], content="@@fuzzy 85\nHG")], "Hermoine?") == {"HG"}
    assert slot_contents([entry(0, ["Hermione"], content="HG")], "Hermoine?") == set()
    assert slot_contents([entry(0, ["Hermione"], content="HG", fuzzy=85)], "Hermoine?") == {"HG"}
    assert slot_contents([entry(0, ["Hermione"], content="HG")], "Hermoine?", book_fuzzy=85) == {"HG"}
    # the decorator wins over the entry's field, which wins over the book's default
    assert slot_contents([entry(0, ["Hermione"], content="@@fuzzy off\nHG", fuzzy=85)], "Hermoine?") == set()
    assert slot_contents([entry(0, ["Hermione"], content="HG", fuzzy=False)], "Hermoine?", book_fuzzy=85) == set()
    assert slot_contents([entry(0, ["Hermione"], content="@@fuzzy 95\nHG")], "Hermoine?", book_fuzzy=85) == set()


def test_slot_decorator_parsing():
    d, rest = parse_decorators("@@fuzzy 85\n@@fuzzy 70\nbody")
    assert d.fuzzy == 85.0 and rest == "body" and [ln.status for ln in d.lines] == ["accepted", "ignored"]
    d, _ = parse_decorators("@@fuzzy off\nbody")
    assert d.fuzzy == 0.0
    for bad in ("@@fuzzy", "@@fuzzy 0", "@@fuzzy 101", "@@fuzzy high", "@@fuzzy 80, 90"):
        d, _ = parse_decorators(bad + "\nbody")
        assert d.fuzzy is None
        assert d.lines[0].status == "rejected: expects a threshold from 50 to 100, or off"
    d, _ = parse_decorators("@@fuzzy nope\n@@@fuzzy 80\nbody")      # the fallback is taken
    assert d.fuzzy == 80.0


# -- caching, recursion, compiled form ----------------------------------------------------------

def test_a_turn_compares_only_the_new_message(monkeypatch):
    seen: list[str] = []
    original = FuzzyIndex.hits_many

    def spy(self, texts, exacts, memo=None, work=None):
        seen.extend(texts)
        return original(self, texts, exacts, memo, work)
    monkeypatch.setattr(FuzzyIndex, "hits_many", spy)
    book = book_from_entries("fz", [entry(0, ["Hermione"], fuzzy=85)])
    engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=10, include_names=False),
                      compat="improved")
    assert seen == ["E0"]            # the contents, once, at compile time (recursion chunks)
    seen.clear()
    cache = ChatScan()
    chat = [ChatMessage("u", "hello there", is_user=True), ChatMessage("c", "good morning")]
    engine.scan(chat, max_context=100_000, cache=cache)
    assert set(seen) == {"hello there", "good morning"}
    seen.clear()
    chat.append(ChatMessage("u", "where is Hermoine", is_user=True))
    result = engine.scan(chat, max_context=100_000, cache=cache)
    assert seen == ["where is Hermoine"]
    assert result.world_info_before == "E0"


def test_recursion_chunks_carry_fuzzy_hits_from_contents():
    entries = [entry(0, ["lighthouse"], content="The keeper mentions Hermoine."),
               entry(1, ["Hermione"], fuzzy=85, content="HG")]
    assert fired(entries, "the lighthouse", recursive=True) == {"The keeper mentions Hermoine.", "HG"}
    assert fired(entries, "the lighthouse", recursive=False) == {"The keeper mentions Hermoine."}
    cb = compile_book(book_from_entries("fz", entries), MatchOptions.improved())
    fvid = cb.keys.matcher.fuzzy.keys[0][0]
    assert fvid in cb.keys.content_hits[0]
    assert cb.keys.chunk_union_exact


def test_compiled_form_keeps_fuzzy_keys(tmp_path):
    from lorescan import load_compiled, save_compiled
    book = book_from_entries("fz", [entry(0, ["Hermione"], fuzzy=85), entry(1, ["Hermione"])])
    cb = compile_book(book, MatchOptions.improved())
    for again in (pickle.loads(pickle.dumps(cb)), None):
        if again is None:
            save_compiled(cb, tmp_path / "b.lsc")
            again = load_compiled(tmp_path / "b.lsc")
        assert again.keys.matcher.fuzzy.keys == cb.keys.matcher.fuzzy.keys
        assert again.keys.matcher.scan("Hermoine") == cb.keys.matcher.scan("Hermoine") == {cb.keys.matcher.fuzzy.keys[0][0]}


def test_books_without_fuzzy_keys_never_load_rapidfuzz():
    code = textwrap.dedent("""
        import sys
        from lorescan import BookSource, ChatMessage, STEngine, STSettings, SlotEngine
        from lorescan.formats import book_from_entries
        book = book_from_entries("b", [{"uid": 0, "key": ["Hermione"], "content": "HG"}])
        st = STEngine([BookSource(book, ("global",))], STSettings(), compat="improved")
        assert st.scan([ChatMessage("u", "Hermione", is_user=True)], max_context=8192).world_info_before == "HG"
        slot = SlotEngine([book])
        assert [m.content for m in slot.run([("user", "Hermione")], turn_id=1).messages] == ["HG"]
        assert st.compiled[0].keys.matcher.fuzzy is None and slot.compiled.matcher.fuzzy is None
        assert "rapidfuzz" not in sys.modules, "a book without fuzzy keys imported rapidfuzz"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# -- the index against a brute-force oracle ------------------------------------------------------

def brute_force(keys, text):
    """Every (n-word, case) comparison spelled out, no prefilter."""
    found = set()
    for fvid, _evid, key, cs, threshold in keys:
        words = key_words(key if cs else key.lower())
        n = len(words)
        for line in text.split("\n"):
            tw = key_words(line if cs else line.lower())
            for i in range(len(tw) - n + 1):
                if fuzz.ratio(" ".join(words), " ".join(tw[i:i + n])) >= threshold:
                    found.add(fvid)
    return found


def test_index_agrees_with_brute_force():
    rng = random.Random(11)
    alphabet = "aeiorstnlhmgкиаÉé"

    def word():
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
    for _ in range(150):
        keys = []
        for fvid in range(rng.randint(1, 12)):
            key = " ".join(word() for _ in range(rng.choice((1, 1, 2, 3))))
            keys.append((fvid, 1000 + fvid, key, rng.random() < 0.3, rng.choice((50, 66.5, 75, 80, 85, 90, 100))))
        text = "\n".join(" ".join(word() for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(1, 3)))
        index = FuzzyIndex(keys)
        assert set(index.hits(text, frozenset())) == brute_force(keys, text), (keys, text)
        assert set(index.hits(text, frozenset({1003}))) >= ({3} if len(keys) > 3 else set())


def test_batched_hits_agree_with_brute_force_per_text():
    # hits_many (what compiling a book uses, with one memo over all contents) gives each text
    # exactly its own hits: shared words are compared once, but never leak into another text
    rng = random.Random(12)
    alphabet = "aeiorstnlhmg"

    def word():
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7)))
    for _ in range(60):
        keys = [(fvid, 1000 + fvid, " ".join(word() for _ in range(rng.choice((1, 1, 2)))), rng.random() < 0.3,
                 rng.choice((60, 75, 85))) for fvid in range(rng.randint(1, 10))]
        texts = ["\n".join(" ".join(word() for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 3)))
                 for _ in range(rng.randint(1, 8))]
        index = FuzzyIndex(keys)
        memo: dict = {}
        half = len(texts) // 2
        got = index.hits_many(texts[:half], [frozenset()] * half, memo) + \
            index.hits_many(texts[half:], [frozenset()] * (len(texts) - half), memo)
        assert [set(h) for h in got] == [brute_force(keys, t) for t in texts], (keys, texts)


def test_a_book_whose_fuzzy_contents_cost_too_much_is_refused_before_the_work():
    # 40 entries of 20 distinct random words: about 40 * 20 * 40 comparisons. Under a limit of
    # 5,000 both engines refuse the book with the field named, instead of grinding through it.
    rng = random.Random(3)

    def word():
        return "".join(rng.choice("abcdefghij") for _ in range(6))
    entries = [entry(i, [word()], " ".join(word() for _ in range(20)), fuzzy=80) for i in range(40)]
    book = book_from_entries("costly", entries, source="costly.json")
    tight = replace(DEFAULT_LIMITS, max_fuzzy_comparisons=5_000)
    for build in (lambda: STEngine([BookSource(book, ("global",))], compat="improved", limits=tight),
                  lambda: SlotEngine([book], limits=tight)):
        with pytest.raises(LorebookError, match="max_fuzzy_comparisons") as info:
            build()
        assert info.value.source == "costly.json" and info.value.field == "extensions.lorescan_fuzzy"
    STEngine([BookSource(book, ("global",))], compat="improved")       # the default limit lets it through


def test_card_book_default_and_entry_field(tmp_path):
    import json
    from lorescan import load
    book = {"name": "bk", "extensions": {"lorescan_fuzzy": 85}, "entries": [
        {"id": 0, "keys": ["Hermione"], "content": "HG", "extensions": {}, "enabled": True, "insertion_order": 100,
         "use_regex": False},
        {"id": 1, "keys": ["Ronald"], "content": "RW", "extensions": {"lorescan_fuzzy": False}, "enabled": True,
         "insertion_order": 100, "use_regex": False}]}
    data = {"name": "X", "description": "", "personality": "", "scenario": "", "first_mes": "", "mes_example": "",
            "creator_notes": "", "system_prompt": "", "post_history_instructions": "", "alternate_greetings": [],
            "tags": [], "creator": "", "character_version": "", "extensions": {}, "group_only_greetings": [],
            "character_book": book}
    path = tmp_path / "card.json"
    path.write_text(json.dumps({"spec": "chara_card_v3", "spec_version": "3.0", "data": data}), encoding="utf-8")
    loaded = load(path)
    result = SlotEngine([loaded]).run([("user", "Hermoine and Ronlad")], turn_id=1)
    assert [m.content for m in result.messages] == ["HG"]
    engine = STEngine([BookSource(loaded, ("global",))], STSettings(include_names=False), compat="improved")
    assert engine.scan([ChatMessage("u", "Hermoine and Ronlad", is_user=True)],
                       max_context=8192).world_info_after == "HG"      # a card entry's default position


def test_a_scan_past_its_fuzzy_comparison_budget_is_cut_reported_and_not_cached():
    # A tight per-scan budget: the message's words against 40 fuzzy keys of a reachable
    # length cost more than 50 comparisons, so the typo is not found and the result says so;
    # the next scan with the default budget over the same cache finds it (the cut hit set
    # was not cached as the text's answer). An exact mention still matches under the cut.
    keys = ["Hermione"] + [f"zz{i:02d}word" for i in range(39)]
    book = book_from_entries("cut", [entry(i, [k], f"C{i}", fuzzy=80) for i, k in enumerate(keys)])
    tight_limits = replace(DEFAULT_LIMITS, fuzzy_comparisons_per_scan=50)
    text = "Hermoine came with " + " ".join(f"word{i}" for i in range(10))
    st_tight = STEngine([BookSource(book, ("global",))], STSettings(include_names=False), compat="improved",
                        limits=tight_limits)
    st_wide = STEngine([BookSource(book, ("global",))], STSettings(include_names=False), compat="improved")
    cache = ChatScan()
    chat = [ChatMessage("u", text, is_user=True)]
    cut = st_tight.scan(chat, max_context=8192, cache=cache)
    assert len(cut.fuzzy_cutoffs) == 1 and "limits.fuzzy_comparisons_per_scan" in cut.fuzzy_cutoffs[0]
    assert cut.activated == []
    full = st_wide.scan(chat, max_context=8192, cache=cache)
    assert full.fuzzy_cutoffs == () and [e.uid for e in full.activated] == [0]
    exact = st_tight.scan([ChatMessage("u", "Hermione", is_user=True)], max_context=8192)
    assert [e.uid for e in exact.activated] == [0]

    slot_tight, slot_wide = SlotEngine([book], limits=tight_limits), SlotEngine([book])
    cache = ChatScan()
    cut_run = slot_tight.run([("user", text)], turn_id=1, cache=cache)
    assert len(cut_run.fuzzy_cutoffs) == 1 and [m.content for m in cut_run.messages] == []
    full_run = slot_wide.run([("user", text)], turn_id=1, cache=cache)
    assert full_run.fuzzy_cutoffs == () and [m.content for m in full_run.messages] == ["C0"]
