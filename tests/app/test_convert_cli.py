"""``lorescan convert`` through the real command line: target choice, refused writes, pipes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lorescan.formats import load

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "examples" / "saltmere.json"


def convert(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lorescan", "convert", *args], capture_output=True, text=True, **kw)


def assert_clean_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_the_target_follows_the_extension(tmp_path):
    out = tmp_path / "card.png"
    r = convert(str(BOOK), str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert load(out).format == "png"
    assert r.stdout.splitlines()[0].startswith("sillytavern -> png: ")


def test_a_json_output_without_to_is_an_error_not_the_input_format(tmp_path):
    png = tmp_path / "card.png"
    assert convert(str(BOOK), str(png)).returncode == 0
    out = tmp_path / "out.json"
    r = convert(str(png), str(out))
    assert_clean_error(r, "out.json", "--to")
    assert not out.exists()
    r = convert(str(png), str(out), "--to", "st")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["entries"], "a SillyTavern world, not PNG bytes"


def test_the_input_is_never_overwritten(tmp_path):
    src = tmp_path / "book.json"
    src.write_bytes(BOOK.read_bytes())
    for spelling in (str(src), str(tmp_path / "." / "book.json")):
        r = convert(str(src), spelling, "--to", "st", "--force")
        assert_clean_error(r, "the output is the input")
    assert src.read_bytes() == BOOK.read_bytes()


def test_an_existing_output_needs_force(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("keep me")
    r = convert(str(BOOK), str(out), "--to", "ccv3")
    assert_clean_error(r, "exists", "--force")
    assert out.read_text() == "keep me"
    r = convert(str(BOOK), str(out), "--to", "ccv3", "--force")
    assert r.returncode == 0, r.stderr
    assert load(out).format == "ccv3"


@pytest.mark.parametrize("args, words", [
    (["missing.json", "x.json", "--to", "st"], ["missing.json"]),
    (["--to", "nonsense", "a", "b"], ["invalid choice"]),
    ([], ["usage"]),
])
def test_bad_arguments_are_one_clear_message(tmp_path, args, words):
    r = convert(*args, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr


def test_an_unreadable_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = convert(str(bad), str(tmp_path / "o.json"), "--to", "st")
    assert_clean_error(r, "bad.json")


def test_a_closed_pipe_ends_quietly(tmp_path):
    book = {"entries": {str(i): {"uid": i, "key": [f"k{i}"], "addMemo": True, "group": f"g{i}", "depth": 7}
                        for i in range(3000)}}
    src = tmp_path / "big.json"
    src.write_text(json.dumps(book))
    proc = subprocess.Popen([sys.executable, "-m", "lorescan", "convert", str(src), str(tmp_path / "o.json"),
                             "--to", "agnai", "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()                       # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait() == 0, err
    assert first.startswith(b"sillytavern -> agnai: ")
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_the_report_summarises_first_and_verbose_lists_every_entry(tmp_path):
    book = {"entries": {str(i): {"uid": i, "key": ["k"], "addMemo": True} for i in range(20)}}
    src = tmp_path / "b.json"
    src.write_text(json.dumps(book))
    r = convert(str(src), str(tmp_path / "o.json"), "--to", "agnai")
    assert r.stdout.splitlines() == [
        "sillytavern -> agnai: 20 values in 1 field not carried over (20 entries)",
        "  addMemo: agnai has no field for it [20 entries: 0, 1, 2, 3, 4, 5, 6, 7, and 12 more]"]
    r = convert(str(src), str(tmp_path / "o2.json"), "--to", "agnai", "-v")
    assert len(r.stdout.splitlines()) == 21
