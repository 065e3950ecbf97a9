"""``lorescan replay --mode janitor`` and ``replay-batch --mode janitor``: one run of the JanitorAI
script per turn over a chat built from the realistic books' conformance turns. The turns whose
context is the chat so far are checked against the vectors' expected selection; replay and
replay-batch must agree turn by turn; the report carries the engine's explanations."""
from __future__ import annotations

import json
import random
import re
import types

import pytest

from conftest import TESTS_DIR
from lorescan.app.cli import main
from lorescan.app.inputs import roll_seed
from lorescan.janitor import JanitorEngine

pytest.importorskip("pyarrow")
from lorescan.replay.output import read_rows  # noqa: E402

BOOKS = TESTS_DIR / "conformance" / "janitor" / "books.json"


def _chats():
    """(case, chat messages, character name, settings) for every realistic book whose turns
    share one chat (each turn's window a prefix of the longest) and one set of knobs."""
    out = []
    for case in json.loads(BOOKS.read_text())["cases"]:
        if not isinstance(case["book"], list):
            continue
        turns = [t for t in case["turns"] if isinstance((t["context"].get("chat") or {}).get("last_messages"), list)]
        if not turns:
            continue
        chat = max((t["context"]["chat"]["last_messages"] for t in turns), key=len)
        name = (turns[0]["context"].get("character") or {}).get("name")
        knobs = {json.dumps(t["settings"], sort_keys=True) for t in turns}
        if (not isinstance(name, str) or not name or len(knobs) != 1
                or not all(isinstance(m, dict) and isinstance(m.get("message"), str) and m["message"].strip()
                           and isinstance(m.get("is_bot"), bool) for m in chat)):
            continue
        out.append((case, chat, name, turns[0]["settings"]))
    return out


CHATS = _chats()


def _write(tmp_path, case, chat, name):
    book = tmp_path / "book.json"
    book.write_text(json.dumps(case["book"]))
    folder = tmp_path / "chats"
    folder.mkdir()
    path = folder / "chat.json"
    path.write_text(json.dumps([{"name": name if m["is_bot"] else "User", "is_user": not m["is_bot"], "mes": m["message"]}
                                for m in chat]))
    return str(book), str(path), str(folder)


def _flags(settings):
    return [x for k, v in settings.items() for x in (f"--{k.replace('_', '-')}", json.dumps(v))]


def _replay_lines(capsys, book, chat, settings, *more):
    assert main(["replay", "--mode", "janitor", book, "--chat", chat, *_flags(settings), *more]) == 0
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("turn ")]


def _batch_fired(tmp_path, book, folder, settings, capsys):
    out = tmp_path / "out"
    assert main(["replay-batch", "--mode", "janitor", "--books", book, "--chats", folder, "--out", str(out),
                 "--no-progress", *_flags(settings)]) == 0
    capsys.readouterr()
    t = read_rows(str(out)).to_pydict()
    fired: dict[int, list[int]] = {}
    for turn, outcome, entry in zip(t["turn"], t["outcome"], t["entry"]):
        if outcome == "turn":
            fired.setdefault(turn, [])
        elif outcome == "fired":
            fired.setdefault(turn, []).append(int(entry))
    return fired


def test_there_are_realistic_chats():
    assert len(CHATS) >= 3 and any(s for *_, s in CHATS)


def _vector_turns(case, name):
    """The case's turns whose context is the chat so far as replay builds it, by message count (the
    character's personality and scenario, which replay leaves empty, are what the script appends to,
    not what it selects by)."""
    return {len(t["context"]["chat"]["last_messages"]): t for t in case["turns"]
            if t["context"]["chat"].get("message_count") == len(t["context"]["chat"]["last_messages"])
            and set(t["context"]["character"]) <= {"name", "personality", "scenario"}
            and t["context"]["character"].get("name") == name and not t["expected"]["error"]}


class _VectorRandom:
    """``random.Random`` for the replay module: a vector turn's seed reads the vector's values."""

    def __init__(self, values):
        self.values = values

    def __call__(self, seed):
        if seed not in self.values:
            return random.Random(seed)
        it = iter(self.values[seed])
        return type("R", (), {"random": staticmethod(lambda: next(it))})()


@pytest.mark.parametrize("case, chat, name, settings", CHATS, ids=[c["name"] for c, *_ in CHATS])
def test_replay_turns_are_the_vectors_runs_and_replay_batch_agrees(tmp_path, capsys, monkeypatch, case, chat,
                                                                   name, settings):
    import lorescan.replay.janitor as jm
    from lorescan.formats.janitor import read_janitor_json
    from lorescan.replay.chats import Message
    from lorescan.replay.single import replay_chat
    book, chat_file, folder = _write(tmp_path, case, chat, name)
    messages = [Message(name if m["is_bot"] else "User", m["message"], not m["is_bot"], False) for m in chat]
    vectors = _vector_turns(case, name)
    # a turn whose context is a vector turn's, reading the vector's random values, gives its selection
    with monkeypatch.context() as m:
        m.setattr(jm, "random", types.SimpleNamespace(
            Random=_VectorRandom({roll_seed(0, "chat.json", n): t["random"] for n, t in vectors.items()})))
        fed = replay_chat([read_janitor_json(case["book"], source=book)], messages, mode="janitor",
                          settings=settings, chat="chat.json")
    for t in fed.turns:
        want = vectors.get(t.messages)
        if want is not None:
            assert list(t.fired) == [*(want["expected"]["trace"]["selected"] or ()),
                                     *want["expected"]["trace"]["post_shift"]], (case["name"], t.number)
    # replay-batch and replay, from the same files and seed, fire the same entries turn by turn
    replay = replay_chat([read_janitor_json(case["book"], source=book)], messages, mode="janitor",
                         settings=settings, chat="chat.json")
    assert replay.turns
    assert _batch_fired(tmp_path, book, folder, settings, capsys) == {t.number: list(t.fired) for t in replay.turns}
    lines = _replay_lines(capsys, book, chat_file, settings)
    assert len(lines) == len(replay.turns)
    for line, t in zip(lines, replay.turns):
        assert line.split(": ", 1)[1].startswith(f"{len(t.fired)} fired"), line


def test_many_replay_turns_are_checked_against_the_vectors():
    from lorescan.replay.turns import turn_points
    from lorescan.replay.chats import Message
    checked = 0
    for case, chat, name, _ in CHATS:
        points = turn_points([Message("", m["message"], not m["is_bot"], False) for m in chat])
        checked += len(set(points) & set(_vector_turns(case, name)))
    assert checked >= 10


def test_each_turn_is_one_seeded_run_and_the_report_explains_it(tmp_path, capsys):
    case, chat, name, settings = CHATS[0]
    book, chat_file, _ = _write(tmp_path, case, chat, name)
    report = tmp_path / "r.html"
    lines = _replay_lines(capsys, book, chat_file, settings, "--seed", "7", "--report", str(report))
    engine = JanitorEngine(case["book"], **settings)
    html = report.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="replay-data">(.*?)</script>', html,
                                re.S).group(1))
    assert data["cut_by"] == "APPLY_LIMIT" and "JanitorAI script" in html and "budget-h" not in html
    strings = set(data["strings"])
    bot = [i for i, m in enumerate(chat) if i > 0 and m["is_bot"]] + ([len(chat)] if not chat[-1]["is_bot"] else [])
    assert len(lines) == len(bot)
    for n, t in enumerate(bot, 1):
        ctx = {"character": {"name": name, "personality": "", "scenario": ""},
               "chat": {"last_messages": [{"is_bot": m["is_bot"], "message": m["message"]} for m in chat[:t]],
                        "message_count": t}}
        res = engine.run(ctx, random=random.Random(roll_seed(7, "chat.json", t)).random)
        applied = [*(res.trace["selected"] or ()), *res.trace["post_shift"]]
        assert lines[n - 1].split(": ", 1)[1].startswith(f"{len(applied)} fired"), (n, lines[n - 1])
        for x in res.explanations():
            assert x.text in strings, (n, x.text)       # why each entry applied or not, as the engine says


def test_janitor_replay_refuses_two_books_and_bad_settings(tmp_path, capsys):
    case, chat, name, _ = CHATS[0]
    book, chat_file, folder = _write(tmp_path, case, chat, name)
    assert main(["replay", "--mode", "janitor", book, book, "--chat", chat_file]) == 2
    assert "exactly one book" in capsys.readouterr().err
    assert main(["replay", "--mode", "janitor", book, "--chat", chat_file, "--compare", book]) == 2
    assert "--compare" in capsys.readouterr().err
    from lorescan.errors import SettingsError
    from lorescan.replay.run import replay_batch
    with pytest.raises(SettingsError, match="max_context"):
        replay_batch([book], folder, tmp_path / "o", mode="janitor", settings={"max_context": 10})


def test_scan_is_replays_turn_over_the_same_messages(tmp_path, capsys):
    # the rolls follow roll_seed in both: a scan of the chat so far is the replay's turn there
    from lorescan.formats.janitor import read_janitor_json
    from lorescan.replay.chats import Message
    from lorescan.replay.single import replay_chat
    case, chat, name, settings = CHATS[0]
    messages = [Message(name if m["is_bot"] else "User", m["message"], not m["is_bot"], False) for m in chat]
    replay = replay_chat([read_janitor_json(case["book"])], messages, mode="janitor", settings=settings, seed=3,
                         chat="chat.json")
    book, _, _ = _write(tmp_path, case, chat, name)
    rolled = 0
    for t in replay.turns:
        part = tmp_path / f"upto{t.messages}"
        part.mkdir()
        (part / "chat.json").write_text(json.dumps([{"name": name if m["is_bot"] else "User", "is_user": not m["is_bot"],
                                                     "mes": m["message"]} for m in chat[:t.messages]]))
        assert main(["scan", "--mode", "janitor", book, "--chat", str(part / "chat.json"), "--character", name,
                     "--seed", "3", "--json", *_flags(settings)]) == 0
        got = json.loads(capsys.readouterr().out)["result"]
        assert [*(got["trace"]["selected"] or ()), *got["trace"]["post_shift"]] == list(t.fired), t.number
        rolled += got["random_calls"] > 0
    assert rolled >= 3


def test_a_script_book_on_a_worker_pool_keeps_its_knobs_and_the_rows(tmp_path):
    from lorescan.app.janitorscan import read_janitor_lorebook
    from lorescan.replay.run import replay_batch
    case, chat, name, _ = CHATS[0]
    script = tmp_path / "book.js"
    script.write_text(f"const APPLY_LIMIT = 2;\nvar dynamicLore = {json.dumps(case['book'])};\n")
    folder = tmp_path / "chats"
    folder.mkdir()
    for k in range(3):
        (folder / f"c{k}.json").write_text(json.dumps([{"name": name if m["is_bot"] else "User",
                                                         "is_user": not m["is_bot"], "mes": m["message"]}
                                                        for m in chat[:len(chat) - 2 * k]]))
    book = read_janitor_lorebook(str(script))
    replay_batch([str(script)], folder, tmp_path / "a", mode="janitor", seed=5)     # a path, read as janitor
    replay_batch([book], folder, tmp_path / "b", mode="janitor", seed=5, workers=2, per_shard=1)
    rows = [sorted(zip(*read_rows(str(tmp_path / v)).to_pydict().values()), key=repr) for v in "ab"]
    assert rows[0] == rows[1]
    t = read_rows(str(tmp_path / "a")).to_pydict()
    per_turn: dict = {}
    for chat_id, turn, outcome in zip(t["chat_id"], t["turn"], t["outcome"]):
        if outcome == "fired":
            per_turn[chat_id, turn] = per_turn.get((chat_id, turn), 0) + 1
    assert max(per_turn.values()) == 2 and "cut" in t["outcome"]     # the script's APPLY_LIMIT applies


def test_replay_batch_reads_a_raw_array_path_as_the_scripts(tmp_path, capsys):
    from lorescan.replay.run import replay_batch
    case, chat, name, settings = CHATS[0]
    book, _, folder = _write(tmp_path, case, chat, name)
    replay_batch([book], folder, tmp_path / "api", mode="janitor", settings=settings)
    t = read_rows(str(tmp_path / "api")).to_pydict()
    fired: dict[int, list[int]] = {}
    for turn, outcome, entry in zip(t["turn"], t["outcome"], t["entry"]):
        if outcome in ("turn", "fired"):
            fired.setdefault(turn, [])
        if outcome == "fired":
            fired[turn].append(int(entry))
    assert fired == _batch_fired(tmp_path, book, folder, settings, capsys)
