"""``lorescan lint`` end to end, through the real command line: exit statuses, the three
output formats, bad arguments, unreadable files, a closed pipe, and the whole corpus."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import need_shared

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lint"


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "lorescan", "lint", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300, **kw)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr


def test_exit_status_follows_the_worst_finding() -> None:
    for name, status in (("clean", 0), ("ls102", 0), ("ls103", 1), ("ls101", 3)):
        proc = run(str(DATA / f"{name}.json"))
        no_traceback(proc)
        assert proc.returncode == status, (name, proc.stdout, proc.stderr)
    both = run(str(DATA / "ls103.json"), str(DATA / "ls101.json"))
    assert both.returncode == 3


def test_text_output() -> None:
    proc = run("tests/data/lint/ls103.json")
    assert proc.stdout == (
        "tests/data/lint/ls103.json: entry 1 (Entry 1) key[0]: LS103 warning: the key ' Velmora ' has whitespace "
        "at its ends; the scan trims it and matches 'Velmora' (spaces do not make a key a whole word)\n"
        "    suggestion: write 'Velmora', and turn on whole words for this entry\n"
        "tests/data/lint/ls103.json: 1 finding (0 errors, 1 warning, 0 info)\n")
    assert run("tests/data/lint/clean.json").stdout == "tests/data/lint/clean.json: no findings\n"


def test_json_and_github_output() -> None:
    proc = run("--json", "tests/data/lint/ls301.json")
    doc = json.loads(proc.stdout)
    assert doc["exit_status"] == proc.returncode == 1
    assert [(f["code"], f["entry"], f["field"], f["name"]) for f in doc["books"][0]["findings"]] == [
        ("LS301", 1, "content", "Entry 1")]
    gh = run("--format", "github", "tests/data/lint/ls405.json")
    assert gh.returncode == 3
    assert gh.stdout.startswith("::error file=tests/data/lint/ls405.json,title=LS405 probability 0%3A the entry "
                                "never fires::entry 1 (Entry 1) probability: useProbability is on")
    assert gh.stdout.count("\n") == 1


def test_select_and_ignore_flags() -> None:
    proc = run("--select", "ls203", "--json", "tests/data/lint/ls203.json")
    assert [f["code"] for f in json.loads(proc.stdout)["books"][0]["findings"]] == ["LS203"]
    proc = run("--ignore", "LS2", "tests/data/lint/ls203.json")
    assert proc.returncode == 0 and proc.stdout.endswith("no findings\n")


def test_settings_flags() -> None:
    assert run("--whole-words", "tests/data/lint/ls701.json").returncode == 0
    assert run("--no-recursive", "tests/data/lint/ls301.json").returncode == 0
    assert run("--max-context", "20000", "tests/data/lint/ls501.json").returncode == 0
    assert run("--max-context", "20000", "--budget-cap", "1000", "tests/data/lint/ls501.json").returncode == 3


def test_bad_arguments() -> None:
    for args, needle in (((), "the following arguments are required: BOOK"),
                         (("--format", "xml", "x.json"), "invalid choice: 'xml'"),
                         (("--max-context", "-5", "x.json"), "must not be negative"),
                         (("--budget-percent", "150", "x.json"), "between 0 and 100"),
                         (("--select", "XY1", "tests/data/lint/clean.json"), "no lint code starts with 'XY1'")):
        proc = run(*args)
        no_traceback(proc)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert proc.stdout == ""


def test_unreadable_books(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json", encoding="utf-8")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path in (missing, garbage, folder):
        proc = run(str(path))
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"lorescan lint: {path}"), proc.stderr
    # the readable books are still linted and reported; the status says some input was bad
    proc = run(str(missing), "tests/data/lint/ls101.json")
    assert proc.returncode == 2 and "LS101" in proc.stdout and str(missing) in proc.stderr


def test_closed_pipe() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    books = ["tests/data/lint/ls701.json"] * 400          # far more output than a pipe buffer holds
    proc = subprocess.Popen([sys.executable, "-m", "lorescan", "lint", *books], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()                                    # the reader goes away, like `| head -1`
    err = proc.stderr.read().decode()
    status = proc.wait(timeout=300)
    assert first.startswith(b"tests/data/lint/ls701.json: entry 0")
    assert err == "", err
    assert status == 1                                     # the findings' status, not a crash


def test_every_corpus_book() -> None:
    books = sorted(str(p) for p in need_shared("corpus/books").glob("*.json"))
    proc = run("--json", *books)
    no_traceback(proc)
    doc = json.loads(proc.stdout)
    assert proc.returncode == doc["exit_status"] and proc.returncode in (0, 1, 3)
    assert [b["source"] for b in doc["books"]] == books


def test_the_readme_example_is_the_real_output() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### lorescan lint"):]
    command = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    assert command.startswith("lorescan lint ")
    proc = run(*command.split()[2:])
    assert proc.stdout == shown and proc.returncode == 1
