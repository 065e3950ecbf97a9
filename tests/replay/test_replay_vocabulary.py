"""One vocabulary for scan, explain, replay and replay-batch: the same settings, book sources,
character and seed give the same activations, turn by turn, numbered the same way
(docs/sillytavern-mode.md#cli-seed, #cli-turns)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="replay needs pyarrow (pip install 'lorescan[replay]')")

from lorescan import Character, STEngine, STSettings, load, read_chat
from lorescan.app.cli import main
from lorescan.model import Lorebook, entry_from_fields
from lorescan.replay import replay_batch
from lorescan.replay.output import read_rows
from lorescan.replay.single import load_chat, replay_chat

from conftest import need_shared

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BOOK = EXAMPLES / "saltmere.json"
CHAT = EXAMPLES / "saltmere-chat.jsonl"


def lorescan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lorescan", *args], capture_output=True, text=True)


def documented_seed(seed: int, chat: str, turn: int) -> int:
    """docs/sillytavern-mode.md#cli-seed, written out again from the page."""
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{chat}\x00{turn}".encode()).digest()[:8], "big")


def with_rolls(book: Lorebook) -> Lorebook:
    """The book with every third entry at a 50% probability (the corpus books have none)."""
    entries = tuple(entry_from_fields({**e.fields, "probability": 50, "useProbability": True}, source=book.name)
                    if i % 3 == 0 else e for i, e in enumerate(book.entries))
    return dataclasses.replace(book, entries=entries)


def batch_turns(out: Path) -> dict[int, tuple[int, frozenset, frozenset]]:
    """turn -> (messages scanned, fired, cut) from replay-batch's rows of one chat."""
    table = read_rows(str(out))
    turns: dict[int, tuple[int, set, set]] = {}
    cols = ("turn", "messages", "book", "entry", "outcome")
    for turn, messages, book, entry, outcome in zip(*(table.column(c).to_pylist() for c in cols)):
        if outcome == "problem":
            raise AssertionError(f"problem row: {book} {entry}")
        _, fired, cut = turns.setdefault(turn, (messages, set(), set()))
        if outcome == "fired":
            fired.add((book, entry))
        elif outcome == "cut":
            cut.add((book, entry))
    return {t: (m, frozenset(f), frozenset(c)) for t, (m, f, c) in turns.items()}


def single_turns(replay) -> dict[int, tuple[int, frozenset, frozenset]]:
    ids = [(e.book, e.id) for e in replay.entries]
    return {t.number: (t.messages, frozenset(ids[i] for i in t.fired), frozenset(ids[i] for i in t.cut))
            for t in replay.turns}


@pytest.fixture(scope="module")
def corpus_case(tmp_path_factory):
    """Two corpus books with inclusion groups (rolls added) and the first 40 messages of a
    corpus chat, saved under the chat's own name."""
    books = [with_rolls(load(str(need_shared(f"corpus/books/{n}.json"))))
             for n in ("en-weyland-251", "zh-xiaohui-theater-random")]
    source = need_shared("corpus/chats/en-dmc-group-2024-05-01.jsonl")
    folder = tmp_path_factory.mktemp("chats")
    lines = source.read_text(encoding="utf-8").splitlines()[:41]          # the metadata line and 40 messages
    (folder / source.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return books, folder, source.name


@pytest.mark.parametrize("seed", [0, 7])
def test_replay_and_replay_batch_activate_the_same_entries_turn_by_turn(tmp_path, corpus_case, seed):
    books, folder, name = corpus_case
    settings = {"scan_depth": 4, "recursive": True, "max_context": 8192}
    roles = ["global", "character"]
    character = Character("Dante", avatar="Dante.png", tags=("demon",))
    single = replay_chat(books, load_chat(str(folder / name)), settings=settings, seed=seed, chat=name,
                         roles=roles, character=character)
    replay_batch(books, folder, tmp_path / "out", settings=settings, roles=roles, character=character, seed=seed)
    mine, theirs = single_turns(single), batch_turns(tmp_path / "out")
    assert mine == theirs
    assert sorted(mine) == list(range(1, len(single.turns) + 1)) and len(mine) > 10
    decided = [x for t in single.turns for x in t.explained]
    assert any(x.reason == "group" for x in decided), "inclusion groups took part"
    assert any(x.reason == "probability" for x in decided), "probability rolls took part"


def test_the_seed_changes_the_rolls(tmp_path, corpus_case):
    books, folder, name = corpus_case
    runs = [single_turns(replay_chat(books, load_chat(str(folder / name)), seed=s, chat=name)) for s in (0, 1)]
    assert runs[0] != runs[1]


def test_a_chat_file_is_rolled_by_its_name_wherever_it_lies(tmp_path, corpus_case):
    books, folder, name = corpus_case
    (tmp_path / "deeper" / "still").mkdir(parents=True)
    shutil.copy(folder / name, tmp_path / "deeper" / "still" / name)
    replay_batch(books, folder, tmp_path / "a", seed=3)
    replay_batch(books, tmp_path / "deeper", tmp_path / "b", seed=3)
    assert batch_turns(tmp_path / "a") == batch_turns(tmp_path / "b")


def test_scan_rolls_by_the_documented_rule():
    data = json.loads(lorescan("explain", str(BOOK), "--chat", str(CHAT), "--seed", "5", "--json").stdout)
    chat = read_chat(str(CHAT))
    rng = random.Random(documented_seed(5, CHAT.name, len(chat.messages)))
    engine = STEngine([load(str(BOOK))], STSettings(), random=rng.random)
    result = engine.scan(chat.messages, max_context=8192, character=Character(
        chat.character_name, avatar=f"{chat.character_name}.png"))
    assert data["result"]["activated"] == result.to_json()["activated"]
    assert any(d["reason"] == "group" for d in data["entries"]), "a roll decided something"


def _filtered_book(tmp_path: Path) -> Path:
    entries = {"0": {"uid": 0, "key": ["lighthouse"], "content": "Only for Mira.", "comment": "mira only",
                     "characterFilter": {"names": ["Mira"], "tags": [], "isExclude": False}},
               "1": {"uid": 1, "key": ["lighthouse"], "content": "For the sailors.", "comment": "sailors",
                     "characterFilter": {"names": [], "tags": ["sailor"], "isExclude": False}},
               "2": {"uid": 2, "key": ["{{user}}"], "content": "The user.", "comment": "user"}}
    path = tmp_path / "filtered.json"
    path.write_text(json.dumps({"name": "Filtered", "entries": entries}))
    return path


def _fired_per_turn(stdout: str) -> list[tuple[int, int, int]]:
    return [(int(t), int(m), int(f)) for t, m, f in
            re.findall(r"^turn (\d+) \((\d+) messages?, [^)]*\): (\d+) fired", stdout, re.M)]


def test_replay_takes_scans_vocabulary_and_replay_batch_agrees(tmp_path, capsys):
    book = _filtered_book(tmp_path)
    settings = tmp_path / "s.toml"
    settings.write_text("scan_depth = 3\nmax_context = 4000\n")
    chats = tmp_path / "chats"
    chats.mkdir()
    shutil.copy(CHAT, chats / CHAT.name)
    common = ["--settings", str(settings), "--character", "Mira", "--tag", "sailor", "--user", "Rowan",
              "--seed", "4"]
    r = lorescan("replay", f"character:{book}", str(BOOK), "--chat", str(CHAT), *common)
    assert r.returncode == 0, r.stderr
    single = _fired_per_turn(r.stdout)
    assert [t for t, _, _ in single] == list(range(1, len(single) + 1)) and single
    assert "mira only" in r.stdout and "sailors" in r.stdout and "user" in r.stdout
    none = lorescan("replay", f"character:{book}", "--chat", str(CHAT), "--settings", str(settings))
    assert "mira only" not in none.stdout and "sailors" not in none.stdout
    assert main(["replay-batch", "--books", f"character:{book}", str(BOOK), "--chats", str(chats),
                 "--out", str(tmp_path / "out"), "--no-progress", *common]) == 0
    capsys.readouterr()
    rows = batch_turns(tmp_path / "out")
    assert [(t, m, len(f)) for t, (m, f, _) in sorted(rows.items())] == single
    assert {("Filtered", "0"), ("Filtered", "1"), ("Filtered", "2")} <= set().union(*(f for _, f, _ in rows.values()))
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["roles"] == ["character", "global"] and run["seed"] == 4 and run["settings"]["scan_depth"] == 3


def test_replay_batch_reads_json_chats_and_skips_books_beside_them(tmp_path, capsys):
    chats = tmp_path / "chats"
    chats.mkdir()
    messages = [{"name": m.name, "mes": m.text, "is_user": m.is_user} for m in read_chat(str(CHAT)).messages]
    (chats / "one.json").write_text(json.dumps(messages))
    (chats / "two.json").write_text(json.dumps({"messages": messages}))
    shutil.copy(BOOK, chats / "a-book.json")
    assert main(["replay-batch", "--books", str(BOOK), "--chats", str(chats), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith("2 chats, ")
    table = read_rows(str(tmp_path / "o"))
    assert set(table.column("chat_id").to_pylist()) == {"one.json", "two.json"}


def test_replay_batch_with_no_chats_fails(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["replay-batch", "--books", str(BOOK), "--chats", str(tmp_path / "empty"),
                 "--out", str(tmp_path / "o1"), "--no-progress"]) == 2
    assert "no chats here" in capsys.readouterr().err
    (tmp_path / "books").mkdir()
    shutil.copy(BOOK, tmp_path / "books" / "saltmere.json")
    assert main(["replay-batch", "--books", str(BOOK), "--chats", str(tmp_path / "books"),
                 "--out", str(tmp_path / "o2"), "--no-progress"]) == 2
    assert "no chats here" in capsys.readouterr().err


def test_replay_and_batch_number_turns_alike_on_the_example(tmp_path, capsys):
    chats = tmp_path / "chats"
    chats.mkdir()
    shutil.copy(CHAT, chats / CHAT.name)
    r = lorescan("replay", str(BOOK), "--chat", str(CHAT))
    assert main(["replay-batch", "--books", str(BOOK), "--chats", str(chats), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 0
    capsys.readouterr()
    rows = batch_turns(tmp_path / "o")
    assert [(t, m, len(f)) for t, (m, f, _) in sorted(rows.items())] == _fired_per_turn(r.stdout)
