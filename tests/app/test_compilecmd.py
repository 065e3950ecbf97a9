"""``lorescan compile`` of a catalogue: files and folders in, a folder of ``.lsc`` out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lorescan import ChatMessage, STEngine, STSettings, load, load_compiled
from lorescan.app.cli import main
from lorescan.app.compilecmd import plan_jobs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BOOK = EXAMPLES / "saltmere.json"
PERSONA = EXAMPLES / "rowan-persona.json"


def _book(path: Path, name: str, keys: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name, "entries": {
        str(i): {"uid": i, "key": [k], "content": f"about {k}", "order": 100 - i}
        for i, k in enumerate(keys)}}), encoding="utf-8")
    return path


def _fired(book, text: str) -> list:
    result = STEngine([book], STSettings()).scan([ChatMessage("u", text, True)], max_context=8192)
    return sorted((a.world, a.uid) for a in result.activated)


def _catalogue(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    _book(src / "a.json", "a", ["lighthouse", "fog"])
    _book(src / "deep" / "b.json", "b", ["harbor"])
    (src / "notes.txt").write_text("not a book", encoding="utf-8")      # not a book suffix: not walked
    return src


def test_a_folder_and_files_compile_into_a_folder_that_scans_like_the_books(tmp_path, capsys):
    src = _catalogue(tmp_path)
    out = tmp_path / "out"
    assert main(["compile", str(src), str(BOOK), str(PERSONA), "-o", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["a.lsc", "deep/b.lsc", "rowan-persona.lsc", "saltmere.lsc"]
    for lsc, original in ((out / "a.lsc", src / "a.json"), (out / "deep" / "b.lsc", src / "deep" / "b.json"),
                          (out / "saltmere.lsc", BOOK)):
        for text in ("the lighthouse in fog", "at the harbor", "Who keeps the lighthouse? Mara at Saltmere"):
            assert _fired(load_compiled(lsc), text) == _fired(load(original), text)
    assert "4 of 4 books compiled" in capsys.readouterr().err


def test_a_bad_book_is_one_located_line_and_the_others_are_written(tmp_path, capsys):
    src = _catalogue(tmp_path)
    (src / "bad.json").write_text(json.dumps({"entries": {"0": {"uid": 0, "key": [3], "content": "x"}}}),
                                  encoding="utf-8")
    (src / "broken.json").write_text("{not json", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["compile", str(src), str(tmp_path / "missing.json"), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "compiled into" not in line]
    assert sorted(lines) == sorted([
        f"lorescan compile: {src / 'bad.json'}: entry 0, field 'key[0]': expected a string, got int 3",
        *[line for line in lines if line.startswith(f"lorescan compile: {src / 'broken.json'}: ")],
        f"lorescan compile: {tmp_path / 'missing.json'}: no such file or folder"]), err
    assert any(line.startswith(f"lorescan compile: {src / 'broken.json'}: ") for line in lines), err
    assert "Traceback" not in err
    assert "2 of 5 books compiled" in err and "3 skipped" in err
    assert sorted(p.name for p in out.rglob("*")) == ["a.lsc", "b.lsc", "deep"]


def test_outputs_that_exist_are_kept_without_force_and_replaced_with_it(tmp_path, capsys):
    src = _catalogue(tmp_path)
    out = tmp_path / "out"
    assert main(["compile", str(src), "-o", str(out)]) == 0
    (out / "a.lsc").write_bytes(b"old")
    assert main(["compile", str(src), "-o", str(out)]) == 1
    assert (out / "a.lsc").read_bytes() == b"old"
    assert "a.lsc exists; give --force to replace it" in capsys.readouterr().err
    assert main(["compile", str(src), "-o", str(out), "--force"]) == 0
    assert _fired(load_compiled(out / "a.lsc"), "fog") == [("a", 1)]


def test_a_failed_write_leaves_no_temporary_file_behind(tmp_path, capsys):
    src = _catalogue(tmp_path)
    out = tmp_path / "out"
    (out / "a.lsc").mkdir(parents=True)           # the rename onto a folder fails
    assert main(["compile", str(src), "-o", str(out), "--force"]) == 1
    assert f"{src / 'a.json'}: cannot write {out / 'a.lsc'}" in capsys.readouterr().err
    assert sorted(p.name for p in out.rglob("*")) == ["a.lsc", "b.lsc", "deep"]
    assert (out / "a.lsc").is_dir() and not any((out / "a.lsc").iterdir())


def test_two_books_with_one_target_compile_the_first_and_report_the_second(tmp_path):
    one = _book(tmp_path / "x" / "same.json", "one", ["k"])
    two = _book(tmp_path / "y" / "same.json", "two", ["k"])
    jobs, problems = plan_jobs([str(one), str(two)], str(tmp_path / "out"))
    assert [(j.source, j.target) for j in jobs] == [(str(one), str(tmp_path / "out" / "same.lsc"))]
    assert problems == [(str(two), f"skipped: {one} is compiled to the same {tmp_path / 'out' / 'same.lsc'}")]


def test_the_one_book_form_still_writes_the_file_named(tmp_path):
    target = tmp_path / "saltmere.lsc"
    assert main(["compile", str(BOOK), "-o", str(target)]) == 0
    assert target.is_file()
    assert _fired(load_compiled(target), "the lighthouse") == _fired(load(BOOK), "the lighthouse")


def test_two_jobs_write_the_books_one_job_writes_and_show_no_bar_off_a_terminal(tmp_path):
    src = tmp_path / "in"
    for i in range(12):
        _book(src / f"card-{i}.json", f"card-{i}", [f"key{i}", "shared", f"other{i}"])
    _book(src / "bad.json", "bad", [])
    (src / "bad.json").write_text('{"entries": {"0": {"uid": 0, "key": ["k"], "content": 5}}}', encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))
    runs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        r = subprocess.run([sys.executable, "-m", "lorescan", "compile", str(src), "-o", str(out), "--jobs", jobs],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 1, r.stderr
        assert "\r" not in r.stderr and "#" not in r.stderr          # no progress bar: stderr is a pipe
        assert [line for line in r.stderr.splitlines() if "bad.json" in line] == \
            [f"lorescan compile: {src / 'bad.json'}: entry 0, field 'content': expected str, got int 5"], r.stderr
        runs[jobs] = {p.name: load_compiled(p) for p in out.iterdir()}
    assert sorted(runs["1"]) == sorted(runs["2"]) == sorted(f"card-{i}.lsc" for i in range(12))
    for name, one in runs["1"].items():       # every file has its own identity token: compare what it holds
        two, i = runs["2"][name], name[5:-4]
        assert [dict(e.fields) for e in one.book.entries] == [dict(e.fields) for e in two.book.entries]
        assert _fired(one, f"key{i} and shared") == _fired(two, f"key{i} and shared") == \
            [(f"card-{i}", 0), (f"card-{i}", 1)]


@pytest.mark.parametrize("argv", [["compile", "a.json", "b.json", "-o", "out.lsc", "--jobs", "-1"]])
def test_a_negative_job_count_is_refused_at_the_flag(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "--jobs" in capsys.readouterr().err


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))


def test_a_terminal_gets_a_progress_bar_and_the_problems_on_lines_of_their_own(tmp_path):
    pty = pytest.importorskip("pty")
    src = _catalogue(tmp_path)
    (src / "bad.json").write_text("{not json", encoding="utf-8")
    leader, follower = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "lorescan", "compile", str(src), "-o", str(tmp_path / "out")],
                           stdout=subprocess.DEVNULL, stderr=follower, env=dict(_env(), TERM="xterm"), timeout=300)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:             # the terminal's other end is closed: everything is read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    err = b"".join(chunks).decode()
    assert r.returncode == 1
    assert "\r\x1b[K[" in err and "3/3 books" in err, repr(err)
    assert f"\r\x1b[Klorescan compile: {src / 'bad.json'}: " in err, repr(err)
    last = err.replace("\r\x1b[K", "\n").strip().splitlines()[-1]
    assert last.startswith(f"lorescan compile: 2 of 3 books compiled into {tmp_path / 'out'} in "), repr(err)
    assert last.endswith("; 1 skipped"), repr(err)


# The command as a shell's foreground job runs it (SIGINT at its default, whatever the test runner
# inherited: a background job's SIGINT is ignored), with one book held in its worker until the
# test creates HOLD_RELEASE: the run cannot end before the Ctrl-C, whatever the machine's load.
_HELD_RUN = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from lorescan.app import compilecmd
from lorescan.app.cli import main
real = compilecmd.compile_one
def held(job, options, force):
    if os.path.basename(job.source) == "a-held.json":
        open(os.environ["HOLD_MARK"], "w").close()          # a pool worker has the held book in hand
        while not os.path.exists(os.environ["HOLD_RELEASE"]):
            time.sleep(0.01)
    return real(job, options, force)
compilecmd.compile_one = held
sys.exit(main())
"""


def _read_until(proc: subprocess.Popen, text: bytes, deadline: float) -> bytes:
    """stderr up to a line holding ``text`` (the deadline is only a guard against a hang)."""
    import select
    seen = b""
    while text not in seen:
        assert time.monotonic() < deadline, seen
        ready, _, _ = select.select([proc.stderr], [], [], 1.0)
        if ready:
            chunk = os.read(proc.stderr.fileno(), 65536)
            assert chunk, seen                     # the command ended without saying it
            seen += chunk
    return seen


def test_an_interrupted_catalogue_leaves_whole_files_only(tmp_path):
    import signal
    src = tmp_path / "in"
    keys = [f"name{i} place{i} thing{i}" for i in range(300)]
    for i in range(24):
        _book(src / f"card-{i}.json", f"card-{i}", keys[i:] + keys[:i])
    _book(src / "a-held.json", "held", keys)       # first in the walk: the first chunk, 7 books behind it
    out, mark, release = tmp_path / "out", tmp_path / "held", tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", _HELD_RUN, "compile", str(src), "-o", str(out), "--jobs", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env=dict(_env(), HOLD_MARK=str(mark), HOLD_RELEASE=str(release)))
    deadline = time.monotonic() + 300              # hang guards only: every step waits for an event
    try:
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)         # Ctrl-C: the whole process group, workers too
        err = _read_until(proc, b"lorescan compile: stopping: ", deadline)
        release.touch()                            # the held book may finish now: it was in hand
        _, rest = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        err = (err + rest).decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    written = sorted(p.name for p in out.glob("*.lsc"))
    assert "a-held.lsc" in written and len(written) <= 25 - 7, err      # the held book's chunk: left out
    assert f"lorescan compile: interrupted: {len(written)} of 25 books compiled into {out} in " in err, err
    assert [p.name for p in out.iterdir() if not p.name.endswith(".lsc")] == []     # no temporary file
    for lsc in out.glob("*.lsc"):
        assert len(load_compiled(lsc).book.entries) == 300


def test_an_output_folder_inside_the_input_folder_is_not_read_as_books(tmp_path, capsys):
    src = _catalogue(tmp_path)
    out = src / "compiled"
    for _ in range(2):
        assert main(["compile", str(src), "-o", str(out), "--force"]) == 0
        assert "2 of 2 books compiled" in capsys.readouterr().err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.lsc")) == ["a.lsc", "deep/b.lsc"]


def test_one_book_with_jobs_still_writes_the_file_named(tmp_path):
    target = tmp_path / "one.lsc"
    assert main(["compile", str(BOOK), "-o", str(target), "--jobs", "2"]) == 0
    assert target.is_file()
