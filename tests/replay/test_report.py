"""``lorescan replay BOOK... --chat CHAT [--report FILE]``: the one-chat replay, its text
summary, the HTML report's content and safety, determinism, and the command line end to
end (bad arguments, unreadable files, closed pipes). The report in a browser:
tests/replay/test_report_browser.py."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.report_data import XSS_NAME, write_inputs

from lorescan import load
from lorescan.errors import FormatError, LorebookError, SettingsError
from lorescan.replay.progress import ProgressBar
from lorescan.replay.report import MAX_TIMELINE_ROWS, render_report, timeline_rows
from lorescan.replay.single import ChatReplay, EntryInfo, Explained, TurnRecord, load_chat, replay_chat, text_summary
from lorescan.replay.turns import turn_points

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_BOOK, EXAMPLE_CHAT = ROOT / "examples" / "saltmere.json", ROOT / "examples" / "saltmere-chat.jsonl"


def lorescan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lorescan", *args], capture_output=True, text=True, timeout=300,
                          env=None if env is None else {**os.environ, **env})


@pytest.fixture()
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    return write_inputs(tmp_path, 12)


# -- the replay ------------------------------------------------------------------------------
def test_replay_walks_every_turn_with_state_carried_over() -> None:
    book = load(str(EXAMPLE_BOOK))
    messages = load_chat(str(EXAMPLE_CHAT))
    rep = replay_chat([book], messages)
    assert [t.messages for t in rep.turns] == turn_points([m for m in messages if not m.is_system])
    assert len(rep.entries) == len(book.entries)
    for t in rep.turns:
        assert len(t.explained) == len(rep.entries)                  # every entry explained on every turn
        assert [x.entry for x in t.explained] == list(range(len(rep.entries)))
        assert {x.entry for x in t.explained if x.outcome == "fired"} == set(t.fired)
        assert all(x.detail for x in t.explained)


def test_sticky_state_is_carried_between_turns(tmp_path: Path) -> None:
    data = {"name": "S", "entries": {
        "0": {"uid": 0, "key": ["beacon"], "comment": "Sticky", "content": "Lit.", "sticky": 4, "position": 0},
        "1": {"uid": 1, "key": ["beacon"], "comment": "Plain", "content": "Seen.", "position": 0}}}
    (tmp_path / "b.json").write_text(json.dumps(data), encoding="utf-8")
    chat = [{"name": "N", "mes": "Hello."}, {"name": "U", "is_user": True, "mes": "The beacon!"}]
    chat += [{"name": "N", "mes": "Quiet."}, {"name": "U", "is_user": True, "mes": "Quiet."}] * 4
    (tmp_path / "c.json").write_text(json.dumps(chat), encoding="utf-8")
    rep = replay_chat([load(str(tmp_path / "b.json"))], load_chat(str(tmp_path / "c.json")), settings={"scan_depth": 1})
    fired = [{rep.entries[i].name for i in t.fired} for t in rep.turns]
    assert fired[0] == {"Sticky", "Plain"}
    assert fired[1] == {"Sticky"}               # key gone, still stuck: the state came from turn 1
    assert all(f == set() for f in fired[2:])  # sticky 4 counts messages: over by the third turn
    reasons = {x.reason for x in rep.turns[1].explained if rep.entries[x.entry].name == "Sticky"}
    assert reasons == {"sticky"}


def test_seed_decides_the_rolls_and_nothing_else(inputs: tuple[Path, Path]) -> None:
    book, chat = load(str(inputs[0])), load_chat(str(inputs[1]))
    storm = next(i for i, e in enumerate(replay_chat([book], chat).entries) if e.name == "Storm")

    def storms(seed: int) -> list[int]:
        return [t.number for t in replay_chat([book], chat, seed=seed).turns if storm in t.fired]

    assert storms(1) == storms(1)
    assert len({tuple(storms(s)) for s in range(6)}) > 1                 # the 50% entry rolls differently


@pytest.mark.parametrize("mode", ["sillytavern", "slot"])
def test_text_summary_has_a_line_per_turn(mode: str) -> None:
    rep = replay_chat([load(str(EXAMPLE_BOOK))], load_chat(str(EXAMPLE_CHAT)), mode=mode)
    lines = text_summary(rep)
    assert len(lines) == len(rep.turns) + 1
    for line, t in zip(lines, rep.turns):
        assert line.startswith(f"turn {t.number} ({t.messages} messages, last by Rowan): {len(t.fired)} fired, "
                               f"{t.tokens}/{t.budget} tokens")
        for i in t.fired:
            assert rep.entries[i].name in line
    assert lines[-1].endswith(f"(mode {mode}, seed 0)")


def test_text_summary_keeps_names_on_one_line(inputs: tuple[Path, Path]) -> None:
    rep = replay_chat([load(str(inputs[0]))], load_chat(str(inputs[1])))
    rep = ChatReplay(rep.mode, rep.seed, rep.chat, rep.books,
                     tuple(EntryInfo(e.book, e.id, "two\nlines\x1b[31m") for e in rep.entries), rep.turns)
    lines = text_summary(rep)
    assert all("\n" not in line and "\x1b" not in line for line in lines)
    assert "two lines [31m" in lines[0]


# -- reading chats ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ["jsonl", "jsonl-no-meta", "list-st", "list-roles", "messages-object"])
def test_chat_shapes(tmp_path: Path, shape: str) -> None:
    st = [{"name": "N", "is_user": False, "mes": "Hi."}, {"name": "U", "is_user": True, "mes": "Hello."}]
    roles = [{"role": "assistant", "content": "Hi."}, {"role": "system", "content": "x"},
             {"role": "user", "content": "Hello."}]
    text = {"jsonl": "\n".join(json.dumps(x) for x in [{"user_name": "U"}, *st]),
            "jsonl-no-meta": "\n".join(json.dumps(x) for x in st),
            "list-st": json.dumps(st), "list-roles": json.dumps(roles),
            "messages-object": json.dumps({"messages": roles})}[shape]
    path = tmp_path / "chat"
    path.write_text(text, encoding="utf-8")
    msgs = [m for m in load_chat(str(path)) if not m.is_system]
    assert [(m.text, m.is_user) for m in msgs] == [("Hi.", False), ("Hello.", True)]


@pytest.mark.parametrize("text, words", [
    ("", "the chat file is empty"),
    ('{"user_name": "U"}', "no messages"),
    ('{"messages": 3}', "'messages' must be a list"),
    ('[{"role": "wizard", "content": "x"}]', "message 1, field 'role'"),
    ('[{"name": "N", "mes": 5}]', "must be a string"),
    ('[1, 2]', "message 1: a message must be an object"),
    ('{"mes": "a"}\nnot json', "line 2: not valid JSON"),
    ('"just a string"', "message 1 (line 1): a message must be an object"),
])
def test_bad_chats_are_located_errors(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as err:
        load_chat(str(path))
    assert str(path) in str(err.value) and words in str(err.value)


# -- the report ------------------------------------------------------------------------------
def _report(inputs: tuple[Path, Path], **kw) -> str:
    return render_report(replay_chat([load(str(inputs[0]))], load_chat(str(inputs[1])), **kw))


def test_report_is_self_contained_and_pins_its_script(inputs: tuple[Path, Path]) -> None:
    page = _report(inputs)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "@import" not in page and "url(" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert csp.startswith("default-src 'none'")
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    for body, directive in ((scripts[0], "script-src"), (styles[0], "style-src")):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in csp


def test_report_escapes_book_and_chat_strings(inputs: tuple[Path, Path]) -> None:
    page = _report(inputs)
    assert "<img" not in page and "<b>" not in page and "<script>alert" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "&lt;/script&gt;&lt;img src=x onerror=" in page              # the name, escaped in markup
    data = re.search(r'<script type="application/json" id="replay-data">(.*?)</script>', page, re.S).group(1)
    parsed = json.loads(data)
    assert [XSS_NAME in e for e in parsed["entries"]].count(True) == 1  # and intact in the page data
    assert "Report <Book>" in {e[0] for e in parsed["entries"]}


def test_report_lists_most_least_and_never_used(inputs: tuple[Path, Path]) -> None:
    rep = replay_chat([load(str(inputs[0]))], load_chat(str(inputs[1])))
    page = render_report(rep)
    used = {i: sum(i in t.fired for t in rep.turns) for i in range(len(rep.entries))}
    never = [rep.entries[i].name for i, n in used.items() if n == 0]
    assert sorted(never) == ["Never\nfires", "Tower"]                   # Tower is only ever cut
    table = re.search(r'<table id="never-fired">(.*?)</table>', page, re.S).group(1)
    assert table.count("<tr>") == 1 + len(never) and "Never\nfires" in table and "Tower" in table
    most = re.search(r'<table id="most-used">(.*?)</table>', page, re.S).group(1)
    first_row = most.split("<tbody>")[1].split("</tr>")[0]
    assert "Always" in first_row and f'<td class="num">{len(rep.turns)}</td>' in first_row


def test_timeline_keeps_the_most_used_entries_past_the_cap() -> None:
    n = MAX_TIMELINE_ROWS + 50
    entries = tuple(EntryInfo("B", str(i), f"e{i}") for i in range(n))
    # entry i fires on turns 1..(i % 7 + 1); entries with i >= 100 also on turn 8
    turns = []
    for t in range(1, 9):
        fired = tuple(i for i in range(n) if (t <= i % 7 + 1) or (t == 8 and i >= 100))
        turns.append(TurnRecord(t, 2 * t, "U", "x", fired, (), 0, 100,
                                tuple(Explained(i, "fired" if i in fired else "not", "key", "d") for i in range(n))))
    rep = ChatReplay("sillytavern", 0, "c", ("B",), entries, tuple(turns))
    rows, hidden = timeline_rows(rep)
    assert len(rows) == MAX_TIMELINE_ROWS and hidden == 50
    count = {i: sum(i in t.fired for t in turns) for i in range(n)}
    assert min(count[i] for i in rows) >= max(count[i] for i in range(n) if i not in rows)
    page = render_report(rep)
    assert page.count('class="row-label"') == MAX_TIMELINE_ROWS
    assert "50 more entries fired but are not drawn" in page


def test_report_with_no_turns_still_renders(tmp_path: Path) -> None:
    chat = tmp_path / "c.json"
    chat.write_text(json.dumps([{"name": "N", "mes": "Only the greeting."}]), encoding="utf-8")
    rep = replay_chat([load(str(EXAMPLE_BOOK))], load_chat(str(chat)))
    assert rep.turns == ()
    page = render_report(rep)
    assert 'data-turns="0"' in page and "no turns" in page and "no entry fired on any turn" in page


# -- the command line ------------------------------------------------------------------------
def test_cli_same_seed_gives_identical_bytes(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    outs = []
    for n, env in enumerate(({}, {}, {"LORESCAN_PURE_PYTHON": "1"})):
        report = tmp_path / f"r{n}.html"
        proc = lorescan("replay", str(inputs[0]), "--chat", str(inputs[1]), "--seed", "7", "--report", str(report),
                        env=env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        outs.append((report.read_bytes(), proc.stdout.replace(str(report), "R")))
    assert outs[0] == outs[1] == outs[2]                               # and the same on the Python twins
    other = tmp_path / "other.html"
    assert lorescan("replay", str(inputs[0]), "--chat", str(inputs[1]), "--seed", "8", "--report",
                    str(other)).returncode == 0
    assert b"Seed: 8." in other.read_bytes()


def test_cli_slot_mode_and_several_books(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    report = tmp_path / "slot.html"
    proc = lorescan("replay", str(inputs[0]), str(EXAMPLE_BOOK), "--chat", str(inputs[1]), "--mode", "slot",
                    "--report", str(report))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 12 + 3 and lines[-1] == f"report: {report}"
    assert lines[-2].startswith("placement text unchanged from the previous turn: ")
    page = report.read_text(encoding="utf-8")
    assert 'id="cache-stability"' in page
    assert "Mode: lorebook slot" in page and "Saltmere" in page and "Report &lt;Book&gt;" in page


def test_cli_settings_reach_the_engine(tmp_path: Path) -> None:
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps({"scan_depth": 1, "max_context": 1000}), encoding="utf-8")
    a = lorescan("replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--settings", str(settings))
    b = lorescan("replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--max-context", "1000", "--depth", "1")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert "/250 tokens" in a.stdout                                  # 25% of 1000


@pytest.mark.parametrize("args, words", [
    (["replay", "nope.json", "--chat", str(EXAMPLE_CHAT)], "nope.json"),
    (["replay", str(EXAMPLE_BOOK), "--chat", "nope.jsonl"], "nope.jsonl: cannot read the chat"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_BOOK)], "saltmere.json"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--mode", "slot", "--depth", "3"],
     "do not apply in slot mode"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--depth", "-1"], "--depth: must be 0 or more"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--report", "/nonexistent/dir/r.html"],
     "/nonexistent/dir/r.html: cannot write the report"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--seed", "x"], "invalid int value"),
    (["replay", str(EXAMPLE_BOOK)], "--chat"),
    (["replay", str(EXAMPLE_BOOK), "--chat", str(EXAMPLE_CHAT), "--mode", "kobold"], "invalid choice"),
])
def test_cli_bad_input_is_one_clear_line(args: list[str], words: str) -> None:
    proc = lorescan(*args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_cli_closed_pipe_is_quiet_and_the_report_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "long"
    folder.mkdir()
    book, chat = write_inputs(folder, 400)
    report = tmp_path / "r.html"
    proc = subprocess.Popen([sys.executable, "-m", "lorescan", "replay", str(book), "--chat", str(chat),
                             "--report", str(report)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"turn 1 ")
    proc.stdout.close()                                                # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert report.stat().st_size > 0


# -- the progress bar ------------------------------------------------------------------------
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_and_erases_itself() -> None:
    out = _Tty()
    bar = ProgressBar(out, min_total=10, interval=0)
    for done in range(1, 21):
        bar.update(done, 20)
    text = out.getvalue()
    assert "replay [" + "#" * 15 + "-" * 15 + "] 10/20 turns" in text
    assert text.rstrip(" \r").endswith("] 20/20 turns")
    bar.close()
    assert out.getvalue().endswith("\r" + " " * len("replay [" + "#" * 30 + "] 20/20 turns") + "\r")


def test_progress_bar_is_silent_off_a_terminal_and_on_short_chats() -> None:
    pipe = io.StringIO()
    bar = ProgressBar(pipe, min_total=1, interval=0)
    bar.update(1, 5)
    bar.close()
    short = _Tty()
    bar = ProgressBar(short, min_total=50, interval=0)
    bar.update(1, 5)
    bar.close()
    assert pipe.getvalue() == short.getvalue() == ""


def test_progress_bar_on_a_real_terminal(tmp_path: Path) -> None:
    pty = pytest.importorskip("pty")
    book, chat = write_inputs(tmp_path, 120)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "lorescan", "replay", str(book), "--chat", str(chat)],
                              stdout=subprocess.PIPE, stderr=slave, timeout=300)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert b"] 120/120 turns" in seen                                  # the last step is always drawn
    # 120 turns, the totals and the placement-stability line
    assert proc.stdout.count(b"\n") == 122 and b"replay [" not in proc.stdout


def test_replay_chat_rejects_bad_arguments() -> None:
    book = load(str(EXAMPLE_BOOK))
    msgs = load_chat(str(EXAMPLE_CHAT))
    with pytest.raises(LorebookError, match="mode"):
        replay_chat([book], msgs, mode="kobold")
    with pytest.raises(SettingsError, match="slot mode takes no settings"):
        replay_chat([book], msgs, mode="slot", settings={"scan_depth": 2})
    with pytest.raises(LorebookError, match="seed"):
        replay_chat([book], msgs, seed="1")  # type: ignore[arg-type]

