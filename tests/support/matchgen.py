"""Hypothesis strategies and the differential check shared by the matching tests."""
from __future__ import annotations

from typing import Callable, Sequence

from hypothesis import strategies as st

from lorescan.st.compiled import compile_book
from lorescan.match.cache import ChatScan
from lorescan.match.view import Window
from tests.support import book_view
from lorescan.model import Lorebook, entry_from_fields
from lorescan.match import MatchOptions
from tests.support.reference_matcher import ReferenceScanView

# Characters chosen for the traps of SPEC 5.2, 13.2 and 16: case mapping that changes length
# (İ), context-dependent lowercase (Σ), ASCII vs Unicode word characters, marks, no-space
# scripts, JS-only whitespace, the U+0001 marker, astral characters.
ATOMS = [
    "a", "b", "A", "B", "ab", "cat", "Cat", "CAT", " ", "  ", "\n", "\t", "\u00a0", "\u3000", "_", "-", "!",
    ".", "+", "1", "Σ", "σ", "ς", "ΑΣ", "ας", "İ", "i", "I", "ı", "i\u0307", "к", "К", "огонь", "ОГОНЬ", "東",
    "京", "都", "ก", "ข", "한", "é", "e\u0301", "\u0301", "😀", "\U00020000", "\x01", "{{char}}", "{{user}}",
    "Alice", "/", "ß", "SS", "\u212a", "k", "ǅ", "\u200d", "\u0085", "\x1c", "red dragon", "c++", ":",
]

texts = st.lists(st.sampled_from(ATOMS), max_size=8).map("".join)

KEY_ATOMS = ATOMS + ["", " ", "  ", "/a+/i", "/^\\x01a/", "/[/", "/a/b/", "/b$/m", "/(?<=a)b/", "/\\bcat\\b/",
                     "/.*/", "/x*/", "/[^]/s", "a\n", "\n", " cat ", "{{char}}", "{{ user }}", "/ca?t/i", "/CAT/i",
                     "/cat/", "/k/iu", "/s/iu", "/ab|cd/", "/a b+c/", "/A!/i", "/i/i", "/1{2}/", "/(ab)+b/"]
keys = st.one_of(st.sampled_from(KEY_ATOMS), st.lists(st.sampled_from(ATOMS), min_size=1, max_size=3).map("".join))
tri = st.sampled_from([None, True, False])


@st.composite
def entry_fields(draw, uid: int) -> dict:
    return {
        "uid": uid,
        "key": draw(st.lists(keys, max_size=4)),
        "keysecondary": draw(st.lists(keys, max_size=3)),
        "content": draw(texts),
        "caseSensitive": draw(tri),
        "matchWholeWords": draw(tri),
    }


@st.composite
def books(draw, max_entries: int = 6) -> Lorebook:
    n = draw(st.integers(1, max_entries))
    entries = tuple(entry_from_fields(draw(entry_fields(i)), uid=i) for i in range(n))
    return Lorebook(name="t", entries=entries)


options = st.builds(MatchOptions, case_sensitive=st.booleans(), match_whole_words=st.booleans(),
                    word_chars=st.sampled_from(["ascii", "unicode"]), nospace_scripts=st.booleans(),
                    multiword=st.sampled_from(["substring", "bounded"]),
                    blank_keys=st.sampled_from(["match_all", "ignore"]))

windows = st.builds(Window, depth=st.sampled_from([-1, 0, 0.5, 1, 2, 3, 7, 1000]),
                    sources=st.integers(0, 63), recursion=st.integers(0, 3))


def substitute_char(text: str) -> str:
    return text.replace("{{char}}", "Alice").replace("{{user}}", "").replace("{{ user }}", " cat ")


def check_agreement(book: Lorebook, opts: MatchOptions, messages: Sequence[str], sources: Sequence[str],
                    injects: Sequence[str], chunks: Sequence[tuple[str, Sequence[int] | None]],
                    wins: Sequence[Window], *, substitute: Callable[[str], str] | None, joined: bool,
                    cache: ChatScan | None = None, compiled=None) -> None:
    """The compiled ScanView agrees with the reference on every entry, window and key."""
    compiled = compiled if compiled is not None else compile_book(book, opts)
    view = book_view(compiled, messages, sources, injects, cache=cache, substitute=substitute, joined=joined,
                    regex_timeout=None)
    ref = ReferenceScanView(compiled, messages, sources, injects, substitute=substitute, joined=joined,
                            regex_timeout=None)
    for text, owners in chunks:
        parts = None
        if owners is not None and substitute is not None:
            # the chunk as the engine makes it: the contents substituted, each named (a claim
            # the view checks; a wrong one falls back to a scan)
            parts = [substitute(compiled.entries[j].content) for j in owners]
            if text == "\n".join(compiled.entries[j].content for j in owners):
                text = "\n".join(parts)
        view.add_recursion_chunk(text, entries=owners, parts=parts)
        ref.add_recursion_chunk(text)
    for w in wins:
        assert view.texts(w) == ref.texts(w)
        assert view.haystack(w) == ref.haystack(w)
        for i in range(len(compiled.entries)):
            got, want = view.match_entry(i, w), ref.match_entry(i, w)
            assert got == want, (i, w, compiled.entries[i].key, compiled.entries[i].keysecondary)
            assert view.score_entry(i, w) == ref.score_entry(i, w), (i, w, compiled.entries[i].key)
    # candidates(): a superset of every entry whose primary key matches within the bounds
    max_depth = max((w.depth for w in wins), default=0)
    max_rec = max((w.recursion for w in wins), default=0)
    cands = view.candidates(max_depth, max_rec)
    assert cands is not None and list(cands) == sorted(set(cands))
    for w in wins:
        for i in range(len(compiled.entries)):
            if ref.match_entry(i, w).primary is not None:
                assert i in cands, (i, w)
