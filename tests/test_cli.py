"""The lorescan command: scan, conformance and errors as a user sees them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run(*args):
    return subprocess.run([sys.executable, "-m", "lorescan.app.cli", *args], capture_output=True, text=True)


def test_scan_of_the_bundled_example_lists_what_fires_and_why():
    r = run("scan", str(EXAMPLES / "saltmere.json"), str(EXAMPLES / "saltmere-chat.jsonl"))
    assert r.returncode == 0, r.stderr
    assert "[1] Lighthouse: primary key 'lighthouse' matched in message 0" in r.stdout
    assert "[0] Setting: constant entry" in r.stdout


def test_scan_json_output_carries_the_result_and_a_diagnostic_per_entry():
    r = run("scan", str(EXAMPLES / "saltmere.json"), str(EXAMPLES / "saltmere-chat.jsonl"),
            "--json", "--depth", "4", "--recursive")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    book = json.loads((EXAMPLES / "saltmere.json").read_text())
    assert len(data["diagnostics"]) == len(book["entries"])
    activated = {(a["world"], a["uid"]) for a in data["activated"]}
    for d in data["diagnostics"]:
        assert (d["outcome"] == "activated") == ((d["world"], d["uid"]) in activated)
    assert (("Saltmere", 3) in activated), "the Tollman fires through two recursion steps"


def test_a_malformed_chat_is_an_error_naming_the_file_and_message(tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"user_name": "x"}\n{"name": "A", "mes": "hi"}\n{"name": "B"}\n')
    r = run("scan", str(EXAMPLES / "saltmere.json"), str(chat))
    assert r.returncode == 2
    assert str(chat) in r.stderr and "entry 2" in r.stderr and "'mes'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_malformed_book_is_an_error_naming_the_entry_and_field(tmp_path):
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": "dragon", "content": "x"}}}))
    r = run("scan", str(book), str(EXAMPLES / "saltmere-chat.jsonl"))
    assert r.returncode == 2
    assert str(book) in r.stderr and "'key'" in r.stderr
    assert "Traceback" not in r.stderr
