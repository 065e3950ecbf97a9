"""replay-batch: the turn loop against STEngine by hand, back-ends against each other, bad
chats, --compare, slot mode, the summary and the CLI. (Ray: tests/replay/test_replay_ray.py.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="replay needs pyarrow (pip install '.[replay]')")

from lorescan.app.cli import main
from lorescan.errors import LorebookError, SettingsError
from lorescan.replay import replay_batch, summarize
from lorescan.replay.chats import ChatItem, iter_items, parse_item
from lorescan.replay.output import read_rows
from lorescan.replay.turns import turn_points

from conftest import need_shared
from tests.support.replay_data import (CORPUS_CHATS, SETTINGS, by_hand, corpus_chats, make_book, row_list, row_set,
                         synthetic_chats, write_folder, write_lines)


@pytest.fixture(scope="module")
def book():
    return make_book()


@pytest.fixture(scope="module")
def chats():
    """A few hundred chats: synthetic ones and slices of the corpus chats."""
    out = synthetic_chats(220)
    out.update(corpus_chats())
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory, chats):
    return write_folder(tmp_path_factory.mktemp("chats"), chats)


@pytest.fixture(scope="module")
def in_process(tmp_path_factory, book, folder):
    out = tmp_path_factory.mktemp("r") / "in-process"
    info = replay_batch([book], folder, out, settings=SETTINGS)
    return info, read_rows(str(out)), out


def test_corpus_chats_are_part_of_the_replay(chats):
    need_shared("corpus/chats")
    assert sum(1 for name in chats if not name.startswith("syn-")) >= 40


def test_in_process_equals_stengine_scan_by_hand(book, chats, in_process):
    info, table, _ = in_process
    expected = by_hand(book, chats, {name: f"{name}.jsonl" for name in chats})
    got = row_set(table)
    assert got == expected
    assert info.turns == sum(1 for r in expected if r[5] == "turn") and info.problems == 0
    outcomes = table.column("outcome").to_pylist()
    # The book is built so every kind of row occurs (else the comparison proves little).
    assert {"fired", "cut", "turn"} <= set(outcomes)
    reasons = set(table.column("reason").to_pylist())
    assert {"key", "constant", "sticky"} <= reasons
    assert info.chats == len(chats) >= 220


def test_two_worker_pool_gives_the_same_parquet(tmp_path, book, folder, in_process):
    _, table, _ = in_process
    info = replay_batch([book], folder, tmp_path / "pool", settings=SETTINGS, workers=2, per_shard=7)
    assert info.backend == "pool"
    assert row_list(read_rows(str(tmp_path / "pool"))) == row_list(table)


def test_a_replay_is_repeatable_and_shard_size_does_not_matter(tmp_path, book, folder, in_process):
    _, table, _ = in_process
    replay_batch([book], folder, tmp_path / "again", settings=SETTINGS, per_shard=1000)
    assert row_list(read_rows(str(tmp_path / "again"))) == row_list(table)


def test_probability_rolls_differ_between_chats_and_turns(in_process):
    # A seed per (chat, turn): the 50% entries fire in some turns and not in others.
    _, table, _ = in_process
    prob = [r for r in row_set(table, ("entry", "outcome")) if r[0] in {"1", "6", "11", "16"}]
    assert ("1", "fired") in prob or ("6", "fired") in prob
    fired_1 = sum(1 for e, o in zip(table.column("entry").to_pylist(), table.column("outcome").to_pylist())
                  if e == "1" and o == "fired")
    assert 0 < fired_1


def test_lines_file_equals_folder(tmp_path, book):
    # The same chats under the same ids (a folder names a chat by its file) give the same rows.
    chats = synthetic_chats(30, seed=5)
    write_lines(tmp_path / "chats.jsonl", {f"{name}.jsonl": msgs for name, msgs in chats.items()})
    write_folder(tmp_path / "folder", chats)
    replay_batch([book], tmp_path / "chats.jsonl", tmp_path / "a", settings=SETTINGS, per_shard=4)
    replay_batch([book], tmp_path / "folder", tmp_path / "b", settings=SETTINGS)
    a = row_set(read_rows(str(tmp_path / "a")))
    assert a == row_set(read_rows(str(tmp_path / "b"))) and len(a) > 100


def test_turn_points_are_the_character_replies_and_the_pending_one():
    from lorescan.replay.chats import Message
    m = lambda user: Message("x", "t", user, False)   # noqa: E731
    assert turn_points([m(False), m(True), m(False), m(True), m(False)]) == [2, 4]
    assert turn_points([m(False), m(True)]) == [2]
    assert turn_points([m(True), m(False), m(False)]) == [1, 2]
    assert turn_points([m(False)]) == []


BAD_LINES = [
    '{"id": "ok-1", "messages": [{"role": "user", "content": "the sword"}, {"role": "assistant", "content": "hi"}]}',
    '{"id": "broken", "messages": [',
    '{"id": "unknown", "messages": [{"role": "user", "content": "the sword"}], "colour": "red"}',
    '{"id": "empty", "messages": []}',
    '{"id": "badmsg", "messages": [{"role": "user", "content": 5}]}',
    '{"id": "badrole", "messages": [{"role": "wizard", "content": "x"}]}',
    '"just a string"',
    '{"id": "ok-2", "messages": [{"role": "user", "content": "the lantern"}, {"role": "assistant", "content": "x"}]}',
]


def test_bad_chats_are_counted_per_file_and_cost_no_other_rows(tmp_path, book):
    good = synthetic_chats(12, seed=3)
    folder = write_folder(tmp_path / "chats", good)
    (folder / "broken.jsonl").write_text('{"user_name": "u"}\n{"name": "A", "mes": "the sword"\n')
    (folder / "empty.jsonl").write_text('{"user_name": "u"}\n')
    (folder / "nomes.jsonl").write_text('{"user_name": "u"}\n{"name": "A", "mes": ["not", "text"]}\n')
    (folder / "latin1.jsonl").write_bytes(b'{"name": "A", "mes": "caf\xe9"}\n')
    replay_batch([book], folder, tmp_path / "out", settings=SETTINGS, per_shard=3)
    table = read_rows(str(tmp_path / "out"))
    problems = {(s, r) for s, r, o in zip(table.column("source").to_pylist(), table.column("reason").to_pylist(),
                                          table.column("outcome").to_pylist()) if o == "problem"}
    assert problems == {("broken.jsonl", "malformed_line"), ("empty.jsonl", "empty_chat"),
                        ("nomes.jsonl", "bad_message"), ("latin1.jsonl", "unreadable")}
    clean = write_folder(tmp_path / "clean", good)
    replay_batch([book], clean, tmp_path / "clean-out", settings=SETTINGS)
    good_rows = {r for r in row_set(table) if r[5] != "problem"}
    assert good_rows == row_set(read_rows(str(tmp_path / "clean-out")))

    lines = tmp_path / "chats.jsonl"
    lines.write_text("\n".join(BAD_LINES) + "\n")
    replay_batch([book], lines, tmp_path / "lines-out", settings=SETTINGS, workers=2, per_shard=2)
    summary = summarize(str(tmp_path / "lines-out"))
    assert summary["problems_by_file"] == {"chats.jsonl": {"malformed_line": 2, "unknown_field": 1,
                                                           "empty_chat": 1, "bad_message": 2}}
    replayed = {c for c, o in zip(*(read_rows(str(tmp_path / "lines-out")).column(k).to_pylist()
                                    for k in ("chat_id", "outcome"))) if o == "turn"}
    assert replayed == {"ok-1", "ok-2", "unknown"}   # an unknown field is reported, the chat still replays


def test_problem_rows_name_the_line_and_field(tmp_path):
    item = ChatItem("chats.jsonl", "chats.jsonl", 5, '{"id": "x", "messages": [{"role": "user", "content": 5}]}')
    chat, problems = parse_item(item)
    assert chat is None and "line 5, message 0, field 'content'" in problems[0].detail


def test_compare_marks_changed_turns_and_the_entries_responsible(tmp_path, book):
    chats = synthetic_chats(40, seed=9)
    folder = write_folder(tmp_path / "chats", chats)
    replay_batch([book], folder, tmp_path / "out", settings=SETTINGS, compare=[make_book(variant=1)])
    table = read_rows(str(tmp_path / "out"))
    alone = replay_batch([book], folder, tmp_path / "alone", settings=SETTINGS)
    # The base side is a plain replay (turn rows aside: they say what differs).
    plain = lambda rows: {r[:6] + r[7:] if r[5] == "turn" else r for r in rows}    # noqa: E731
    base = plain(r for r in row_set(table) if r[2] == "base")
    assert base == plain(row_set(read_rows(str(tmp_path / "alone"))))
    assert alone.turns > 0
    summary = summarize(str(tmp_path / "out"))
    cmp = summary["compare"]
    assert 0 < cmp["changed_turns"] <= summary["turns"]
    responsible = {r["entry"] for r in cmp["responsible"]}
    assert "102" in responsible and "0" in responsible          # added everywhere / removed
    # Unchanged turns really have the same fired set in both versions.
    fired: dict = {}
    for c, t, v, e, o in zip(*(table.column(k).to_pylist() for k in ("chat_id", "turn", "variant", "entry",
                                                                     "outcome"))):
        if o == "fired":
            fired.setdefault((c, t, v), set()).add(e)
    for c, t, v, o, ch in zip(*(table.column(k).to_pylist() for k in ("chat_id", "turn", "variant", "outcome",
                                                                      "changed"))):
        if o == "turn" and v == "compare" and not ch:
            assert fired.get((c, t, "base"), set()) == fired.get((c, t, "compare"), set())


def test_slot_mode_replays_with_state_and_is_the_same_on_a_pool(tmp_path, book):
    chats = synthetic_chats(30, seed=4)
    folder = write_folder(tmp_path / "chats", chats)
    a = replay_batch([book], folder, tmp_path / "a", mode="slot")
    replay_batch([book], folder, tmp_path / "b", mode="slot", workers=2, per_shard=4)
    ta, tb = read_rows(str(tmp_path / "a")), read_rows(str(tmp_path / "b"))
    assert row_list(ta) == row_list(tb) and a.turns > 0
    assert "fired" in ta.column("outcome").to_pylist()


def test_summary_rates_and_never_fired(in_process):
    info, table, out = in_process
    s = summarize(str(out))
    assert s["turns"] == info.turns
    by = {(e["book"], e["entry"]): e for e in s["entries"]}
    const = by[("Replay", "100")]
    fired_const = sum(1 for e, o in zip(table.column("entry").to_pylist(), table.column("outcome").to_pylist())
                      if e == "100" and o == "fired")
    assert const["fire_rate"] == round(fired_const / info.turns, 6)
    assert {"book": "Replay", "entry": "101", "name": "never"} in s["never_fired"]
    assert any(e["cut_rate"] > 0 for e in s["entries"])


def test_bad_arguments_raise_located_errors(tmp_path, book):
    with pytest.raises(LorebookError, match="no such chat"):
        replay_batch([book], tmp_path / "missing", tmp_path / "o1")
    assert not (tmp_path / "o1").exists()
    with pytest.raises(SettingsError, match="unknown setting"):
        replay_batch([book], write_folder(tmp_path / "c", synthetic_chats(1)), tmp_path / "o2",
                     settings={"scan_dept": 3})
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(LorebookError, match="not an empty folder"):
        replay_batch([book], tmp_path / "c", tmp_path / "full")


def test_cli_replay_batch_and_summarize(tmp_path, capsys):
    chats = write_lines(tmp_path / "chats.jsonl", synthetic_chats(10, seed=2))
    book_file = tmp_path / "book.json"
    book_file.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["sword"], "content": "A blade."}}}))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"scan_depth": 3}))
    assert main(["replay-batch", "--books", str(book_file), "--chats", str(chats), "--out", str(tmp_path / "r"),
                 "--settings", str(settings), "--workers", "2", "--summary", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "10 chats" in text and "fire rate" in text
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["chats"] == 10
    assert main(["summarize", str(tmp_path / "r"), "--json", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["turns"] > 0
    assert main(["summarize", str(tmp_path / "nothing")]) == 2
    assert "no rows/ folder" in capsys.readouterr().err


def test_iter_items_streams_without_reading_chats(tmp_path):
    folder = write_folder(tmp_path / "c", synthetic_chats(3))
    items = iter_items(folder)
    first = next(items)
    assert first.raw is None and first.source == "syn-0000.jsonl"


def test_rows_come_from_the_scans_decisions_without_explaining_every_entry(book):
    # The fast path (see turns._decisions): if a change to scan.py moves the records, this
    # fails instead of the replay silently explaining all entries every turn.
    from lorescan import ChatMessage, STEngine
    from lorescan.replay.turns import _decisions
    engine = STEngine([(book, ("global",))], {k: v for k, v in SETTINGS.items() if k != "max_context"})
    msgs = [ChatMessage("A", " ".join(["the sword and the lantern by the river storm tower"] * 3), True)]
    res = engine.scan(msgs, max_context=600)
    fast = _decisions(res)
    assert not hasattr(res, "_diagnostics")           # the full explanation was not computed (its slot is empty)
    full = res.diagnostics
    assert res.activated and res.budget_overflowed
    assert {e: (fast[e].reason, fast[e].loop) for e in res.activated} == \
           {e: (full[e].reason, full[e].loop) for e in res.activated}
    assert {e for e, d in fast.items() if d.outcome == "not_activated" and d.reason == "budget"} == \
           {e for e, d in full.items() if d.reason == "budget"}


def test_the_readme_replay_example_runs(tmp_path, capsys):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("lorescan replay-batch "))
    argv = line.split()[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "out")
    root = Path(__file__).resolve().parents[2]
    argv = [str(root / a) if a.startswith("examples/") else a for a in argv]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 chats" in text and "Saltmere" in text and "Never fired" in text
