"""The compiled ScanView agrees exactly with the naive reference (SPEC 4, 5, 16.1-16.4)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SHARED, need_shared, or_absent
from lorescan.st.compiled import compile_book
from lorescan.formats import load
from lorescan.match.cache import ChatScan
from lorescan.match.view import Window, match_plain_key
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields
from lorescan.match import MatchOptions
from tests.support.matchgen import books, check_agreement, options, substitute_char, texts, windows
from tests.support.reference_matcher import ReferenceScanView

MANY = settings(max_examples=1000, deadline=None)


def test_backend_says_native_exactly_when_the_built_hit_kernel_is_in_use():
    # in fresh interpreters: BACKEND is decided once, at the first import of the kernels
    import importlib.util
    import subprocess
    import sys
    built = importlib.util.find_spec("lorescan._hits_c") is not None
    code = "import lorescan, lorescan.match._kernels as k; print(lorescan.BACKEND, k.hits.__name__)"
    for forced, want in ((False, "native" if built else "python"), (True, "python")):
        env = {k: v for k, v in os.environ.items() if k != "LORESCAN_PURE_PYTHON"}
        if forced:
            env["LORESCAN_PURE_PYTHON"] = "1"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [want, "lorescan._hits_c" if want == "native" else "lorescan.match._hits_py"]
    if os.environ.get("LORESCAN_REQUIRE_NATIVE") == "1":
        assert built


@st.composite
def scans(draw):
    book = draw(books())
    n = len(book.entries)
    messages = draw(st.lists(st.one_of(texts, st.just("")), max_size=5))
    sources = draw(st.lists(texts, min_size=6, max_size=6))
    injects = draw(st.lists(texts, max_size=2))
    chunks = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            parts = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
            text = "\n".join(book.entries[j].content for j in parts)
            if draw(st.booleans()):
                text = text + draw(texts)     # the claim is wrong: must fall back to a scan
            chunks.append((text, parts))
        else:
            chunks.append((draw(texts), None))
    wins = draw(st.lists(windows, min_size=1, max_size=4))
    return book, messages, sources, injects, chunks, wins


@MANY
@given(scan=scans(), opts=options, joined=st.booleans())
def test_compiled_view_agrees_with_reference(scan, opts, joined):
    book, messages, sources, injects, chunks, wins = scan
    check_agreement(book, opts, messages, sources, injects, chunks, wins, substitute=None, joined=joined)


@MANY
@given(scan=scans(), opts=options, joined=st.booleans())
def test_compiled_view_agrees_with_reference_under_substitution(scan, opts, joined):
    book, messages, sources, injects, chunks, wins = scan
    check_agreement(book, opts, messages, sources, injects, chunks, wins, substitute=substitute_char,
                    joined=joined)


@MANY
@given(scan=scans(), opts=options)
def test_shared_cache_gives_the_same_results_across_turns(scan, opts):
    book, messages, sources, injects, chunks, wins = scan
    compiled = compile_book(book, opts)
    cache = ChatScan(max_texts=3)           # tiny: evictions happen mid-scan
    for turn in range(len(messages) + 1):   # the chat grows one message per turn
        check_agreement(book, opts, messages[len(messages) - turn:], sources, injects, chunks, wins,
                        substitute=None, joined=True, cache=cache, compiled=compiled)


def _book(*entries: dict) -> Lorebook:
    return Lorebook(name="t", entries=tuple(entry_from_fields(dict(e, uid=i), uid=i) for i, e in enumerate(entries)))


def _match(book: Lorebook, messages, window=Window(2), opts=MatchOptions(), **kw):
    view = book_view(compile_book(book, opts), messages, **kw)
    return [view.match_entry(i, window) for i in range(len(book.entries))]


def test_multiword_key_spanning_the_content_join_is_found_in_the_chunk():
    book = _book({"key": ["x"], "content": "red"}, {"key": ["y"], "content": "dragon"},
                 {"key": ["red\ndragon"], "content": ""})
    view = book_view(compile_book(book), ["nothing"])
    view.add_recursion_chunk("red\ndragon", entries=[0, 1])
    assert view.match_entry(2, Window(1, recursion=1)).primary == 0
    assert view.match_entry(2, Window(1, recursion=0)).primary is None


def test_content_union_is_used_when_the_chunk_is_a_join_of_contents():
    book = _book({"key": ["x"], "content": "the red"}, {"key": ["red dragon"], "content": "dragon"})
    compiled = compile_book(book, MatchOptions(match_whole_words=True))
    assert compiled.keys.chunk_union_exact
    view = book_view(compiled, ["nothing"])
    view.add_recursion_chunk("the red\ndragon", entries=[0, 1])
    assert view.match_entry(1, Window(1, recursion=1)).primary is None


def test_whole_word_examples_of_spec_17_1():
    cases = [("огонь", "Дай огонька", True, False), ("огонь", "Огонь!", True, True), ("king", "not to my liking", False, False),
             ("cat", "caté", True, False), ("東京", "東京都", True, True), ("東京", "東京Tower", False, True),
             ("red dragon", "shred dragons", True, False), ("c++", "I love c++!", True, True), ("c++", "c++x", False, False)]
    for key, message, st_fires, improved_fires in cases:
        book = _book({"key": [key]})
        st_result = _match(book, [message], opts=MatchOptions.sillytavern(match_whole_words=True))[0]
        imp_result = _match(book, [message], opts=MatchOptions.improved(match_whole_words=True))[0]
        assert (st_result.primary == 0) is st_fires, (key, message)
        assert (imp_result.primary == 0) is improved_fires, (key, message)


def test_whitespace_only_key_matches_everything_in_sillytavern_mode_even_at_depth_zero():
    book = _book({"key": ["   "]})
    assert _match(book, ["x"], window=Window(0))[0].primary == 0
    assert _match(book, ["x"], window=Window(0), opts=MatchOptions.improved())[0].primary is None


def test_regex_keys_see_the_joined_haystack():
    book = _book({"key": ["/\\x01Bob:/"]}, {"key": ["/^dragon/"]}, {"key": ["/a\\n\\x01b/"]})
    res = _match(book, ["Bob: a", "b"])
    assert [r.primary for r in res] == [0, None, 0]
    res = _match(book, ["Bob: a", "b"], joined=False)
    assert [r.primary for r in res] == [None, None, None]


def test_macro_keys_use_the_substituted_text():
    book = _book({"key": ["{{char}}"]}, {"key": ["{{user}}"], "keysecondary": ["{{char}}", "zzz"]})
    subst = {"{{char}}": "Alice", "{{user}}": "Bob"}.get
    res = _match(book, ["Bob met alice"], substitute=lambda k: subst(k, k))
    assert res[0].primary == 0 and res[1] == res[1].__class__(0, (True, False))
    res = _match(book, ["{{char}}"], substitute=None)
    assert res[0].primary == 0


def test_candidates_skip_entries_that_cannot_match():
    book = _book({"key": ["alpha"]}, {"key": ["beta"]}, {"key": ["/gam+a/"]}, {"key": []}, {"key": ["{{char}}"]})
    view = book_view(compile_book(book), ["alpha here", "", "old beta", "gam"])
    assert list(view.candidates(1, 0)) == [0]
    assert list(view.candidates(3, 0)) == [0, 1]
    assert list(view.candidates(4, 0)) == [0, 1, 2]      # the regex's literal "ga" occurs
    view = book_view(compile_book(book), ["alpha here"], substitute=lambda k: k)
    assert list(view.candidates(1, 0)) == [0]               # a macro key is a candidate where its expansion occurs
    view = book_view(compile_book(book), ["alpha and Seraphina"], substitute=lambda k: k.replace("{{char}}", "Seraphina"))
    assert list(view.candidates(1, 0)) == [0, 4]
    view = book_view(compile_book(book), ["alpha here"], substitute=lambda k: k.replace("{{char}}", "/sera/i"))
    assert list(view.candidates(1, 0)) == [0, 4]            # one that expands to a regex is always walked


def test_timed_out_regex_key_is_reported_and_counts_as_no_match():
    book = _book({"key": ["/(a|aa)+(?=$)/", "b"]})
    view = book_view(compile_book(book), ["a" * 40 + "!"], regex_timeout=0.01)
    ref = ReferenceScanView(compile_book(book), ["a" * 40 + "!"], regex_timeout=0.01)
    got = view.match_entry(0, Window(1))
    assert got.timed_out == ("/(a|aa)+(?=$)/",) and got.primary is None
    assert got == ref.match_entry(0, Window(1))


# -- the corpus ---------------------------------------------------------------------------

CORPUS = SHARED / "corpus"         # real data outside the repository (need_shared in conftest.py)


def _chat_messages(path: Path) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            msg = json.loads(line)
            if "mes" not in msg:
                continue         # the metadata line
            out.append(f"{msg.get('name', '')}: {msg.get('mes') or ''}")
    return out


def _corpus_books() -> list[Path]:
    return sorted((CORPUS / "books").glob("*.json"))


def test_the_corpus_is_present():
    need_shared("corpus")
    assert len(_corpus_books()) >= 30 and len(list((CORPUS / "chats").glob("*.jsonl"))) >= 5


@pytest.fixture(scope="module")
def corpus_chats():
    chats = {}
    for path in sorted((CORPUS / "chats").glob("*.jsonl")):
        msgs = _chat_messages(path)
        # a few turns of each chat, newest first: early, middle and latest
        turns = sorted({min(len(msgs), k) for k in (3, len(msgs) // 2, len(msgs))})
        chats[path.name] = [list(reversed(msgs[:t])) for t in turns if t]
    return chats


@pytest.mark.parametrize("book_path", or_absent(_corpus_books()), ids=lambda p: p.name)
def test_corpus_books_match_exactly_like_the_reference(book_path, corpus_chats):
    need_shared("corpus/chats")
    book = load(str(book_path))     # every corpus book loads, whatever its shape
    subst = lambda k: k.replace("{{char}}", "Seraphina").replace("{{user}}", "Rob")  # noqa: E731
    for opts in (MatchOptions.sillytavern(), MatchOptions.improved(match_whole_words=True)):
        compiled = compile_book(book, opts)
        cache = ChatScan()
        chunk = "\n".join(e.content for e in compiled.entries[:3])
        for chat in corpus_chats.values():
            for messages in chat:
                # one reference per turn: its memos of key results (kept after substitution) are
                # shared by both macro hooks
                turn_ref = ReferenceScanView(compiled, messages, ("persona", "", "", "", "", ""), ["inject"],
                                             memoize=True)
                turn_ref.add_recursion_chunk(chunk)
                for substitute in (None, subst):
                    view = book_view(compiled, messages, ("persona", "", "", "", "", ""), ["inject"], cache=cache,
                                    substitute=substitute)
                    ref = turn_ref.sharing(substitute=substitute)
                    view.add_recursion_chunk(chunk, entries=range(min(3, len(compiled.entries))))
                    cands = set(view.candidates(25, 1))
                    for w in (Window(2), Window(25, 1, 1), Window(0)):
                        for i in range(len(compiled.entries)):
                            want = ref.match_entry(i, w)
                            assert view.match_entry(i, w) == want, (book_path.name, i, w)
                            assert view.key_hits(i, w) == ref.key_hits(i, w), (book_path.name, i, w)
                            if want.primary is not None:
                                assert i in cands
                        # scoring is only ever asked for a few entries; check the first ones
                        for i in range(min(20, len(compiled.entries))):
                            assert view.score_entry(i, w) == ref.score_entry(i, w)


def test_the_empty_key_under_whole_words_needs_a_boundary_on_both_sides_of_one_position():
    # SillyTavern's (?:^|\W)(?:$|\W) with an empty key between: "a-a" has no such position,
    # "a--a" and "-a" do. (Its own haystacks always start with U+0001, so it always matches there.)
    for opts in (MatchOptions.sillytavern(match_whole_words=True), MatchOptions.improved(match_whole_words=True)):
        assert not match_plain_key("a-a", "", case_sensitive=True, whole_words=True, options=opts)
        assert match_plain_key("a--a", "", case_sensitive=True, whole_words=True, options=opts)
        assert match_plain_key("-a", "", case_sensitive=True, whole_words=True, options=opts)
        assert match_plain_key("", "", case_sensitive=True, whole_words=True, options=opts)
        assert match_plain_key("\x01abc", "", case_sensitive=True, whole_words=True, options=opts)
