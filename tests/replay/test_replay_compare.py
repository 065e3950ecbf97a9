"""replay-batch --compare pairs entries by identity, (book name, uid), never by file name; when
the uids changed it pairs by content and says so; summarize shows entry names in numeric order."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="replay needs pyarrow (pip install 'lorescan[replay]')")

from lorescan import load
from lorescan.model import Lorebook, entry_from_fields
from lorescan.replay import replay_batch, summarize
from lorescan.replay.pairing import pair_versions, uid_order
from lorescan.replay.summary import print_summary

from tests.support.replay_data import SETTINGS, make_book, synthetic_chats, write_folder


def _write(path: Path, book: Lorebook, *, shift: int = 0) -> Path:
    """``book`` as a SillyTavern world file without a name field (the file names the book),
    every uid moved by ``shift``."""
    entries = {}
    for e in book.entries:
        fields = dict(e.fields)
        fields["uid"] = e.uid + shift
        entries[str(e.uid + shift)] = fields
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    return path


def _edited(book: Lorebook) -> Lorebook:
    """The edit: entry 0 removed, entry 7's content extended, entry 102 added."""
    entries = []
    for e in book.entries:
        if e.uid == 0:
            continue
        fields = dict(e.fields)
        if e.uid == 7:
            fields["content"] += " The bells ring at dusk."
        entries.append(entry_from_fields(fields, uid=e.uid))
    entries.append(entry_from_fields({"uid": 102, "key": ["harbor"], "comment": "added", "content": "New quay."},
                                     uid=102))
    return Lorebook(name=book.name, entries=tuple(entries))


def _renumbered(book: Lorebook, shift: int) -> Lorebook:
    return Lorebook(name=book.name, entries=tuple(entry_from_fields({**dict(e.fields), "uid": e.uid + shift},
                                                                    uid=e.uid + shift) for e in book.entries))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The same edit compared three ways: saved under the original file name, saved as
    ``weyland-v2.json``, and saved as ``weyland-v2.json`` with every uid renumbered."""
    tmp = tmp_path_factory.mktemp("compare")
    chats = write_folder(tmp / "chats", synthetic_chats(30, seed=5))
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    base = _write(tmp / "a" / "weyland.json", make_book())
    same_name = _write(tmp / "b" / "weyland.json", _edited(make_book()))
    renamed = _write(tmp / "weyland-v2.json", _edited(make_book()))
    renumbered = _write(tmp / "weyland-v3.json", _edited(make_book()), shift=1000)
    out = {}
    for label, other in (("same_name", same_name), ("renamed", renamed), ("renumbered", renumbered)):
        replay_batch([str(base)], chats, tmp / label, settings=SETTINGS, compare=[str(other)])
        out[label] = summarize(str(tmp / label))
    return out


def test_a_renamed_copy_gives_the_true_count_of_changed_turns(runs: dict[str, dict]) -> None:
    true = runs["same_name"]["compare"]
    assert 0 < true["changed_turns"] < runs["same_name"]["turns"]
    for label in ("renamed", "renumbered"):
        got = runs[label]["compare"]
        assert got["changed_turns"] == true["changed_turns"], label
        # an entry new in the compare version keeps its own uid (1102 where the uids moved by 1000)
        own = (lambda u: str(int(u) - 1000) if int(u) >= 1000 else u) if label == "renumbered" else str
        assert [(own(r["entry"]), r["only_base"], r["only_compare"]) for r in got["responsible"]] == \
            [(r["entry"], r["only_base"], r["only_compare"]) for r in true["responsible"]], label


def test_the_summary_says_how_entries_were_paired(runs: dict[str, dict]) -> None:
    n = len(_edited(make_book()).entries)
    same = runs["same_name"]["compare"]["pairing"]["books"][0]
    assert (same["books_by"], same["by_uid"], same["by_content"]) == ("name", n - 1, 0)
    assert same["only_base"] == ["0"] and same["only_compare"] == ["102"]
    renamed = runs["renamed"]["compare"]["pairing"]["books"][0]
    assert (renamed["base"], renamed["compare"], renamed["books_by"]) == ("weyland", "weyland-v2", "position")
    assert (renamed["by_uid"], renamed["by_content"]) == (n - 1, 0)
    renumbered = runs["renumbered"]["compare"]["pairing"]["books"][0]
    assert (renumbered["by_uid"], renumbered["by_content"]) == (0, n - 1)
    assert renumbered["only_base"] == ["0"] and renumbered["only_compare"] == ["1102"]
    added = next(r for r in runs["renumbered"]["compare"]["responsible"] if r["entry"] == "1102")
    assert (added["book"], added["name"]) == ("weyland-v3", "added")     # named from the compare version
    text = io.StringIO()
    print_summary(runs["renumbered"], text)
    assert f"entries of 'weyland' with 'weyland-v3' (by position): 0 by uid, {n - 1} by content (their uids " \
           "changed); 1 only in base, 1 only in compare" in text.getvalue()


def test_the_summary_shows_names_in_numeric_uid_order(runs: dict[str, dict]) -> None:
    s = runs["same_name"]
    names = {str(e.uid): e.comment for e in make_book().entries}
    for r in s["entries"]:
        assert r["name"] == names[r["entry"]]
    never = [r["entry"] for r in s["never_fired"]]
    assert never == sorted(never, key=lambda u: int(u))
    ties = {}
    for r in s["entries"]:
        ties.setdefault(r["fired"], []).append(int(r["entry"]))
    assert all(v == sorted(v) for v in ties.values())           # equal counts: numeric order, not "10" < "2"
    text = io.StringIO()
    print_summary(s, text)
    assert "never (#101)" in text.getvalue()


def test_pairing_by_content_needs_similar_entries() -> None:
    book = make_book()
    other = Lorebook(name="x", entries=(entry_from_fields({"uid": 9000, "key": ["zzz"], "content": "Unrelated."},
                                                          uid=9000),))
    p = pair_versions([book], [other])
    assert p.to_base == {} and p.books[0]["only_compare"] == ["9000"]
    moved = pair_versions([book], [_renumbered(book, 7)])
    assert moved.to_base[("Replay", "107")] == ("Replay", "100") and moved.by[("Replay", "107")] == "content"
    assert uid_order("10") > uid_order("2") and uid_order("a") > uid_order("99")


def test_loaded_book_names_come_from_file_names(tmp_path: Path) -> None:
    # the premise of the renamed case: the same content saved under another name is another book by name
    a, b = _write(tmp_path / "weyland.json", make_book()), _write(tmp_path / "weyland-v2.json", make_book())
    assert (load(str(a)).name, load(str(b)).name) == ("weyland", "weyland-v2")
