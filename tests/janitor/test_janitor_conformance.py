"""Every public JanitorAI script conformance vector passes (tests/conformance/janitor/README.md).

The vectors were produced by running the "ADVANCED LORE BOOK SYSTEM v12" script under Node;
each of the 405 turns must give the same texts, error name, random count and full trace.
The janitor engine reads no native kernel, but the command is also run with
``LORESCAN_PURE_PYTHON=1`` so both backends are covered end to end.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TESTS_DIR
from lorescan.app.conformance import iter_janitor_cases, run_files, run_janitor_case
from lorescan.errors import FormatError

JANITOR = TESTS_DIR / "conformance" / "janitor"
FILES = sorted(JANITOR.glob("*.json"))
GROUPS = {"window", "normalize", "keywords", "gates", "count", "nameblock", "tags", "priority",
          "probability", "shifts", "fields", "mixed", "books"}


def test_the_public_vectors_are_in_the_repository():
    assert {p.stem for p in FILES} == GROUPS
    turns = sum(len(c["turns"]) for p in FILES for c in json.loads(p.read_text())["cases"])
    assert turns == 405


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_turn_of_a_janitor_vector_file_passes(path):
    failures = []
    for case in iter_janitor_cases(str(path)):
        outcome = run_janitor_case(case, source=str(path))
        failures += [f"{outcome.name} turn {t.index}\n" + "\n".join(t.diffs) for t in outcome.turns if not t.ok]
    assert not failures, "\n".join(failures[:5])


def _command(files: list[str], pure: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LORESCAN_PURE_PYTHON"}
    env["PYTHONPATH"] = str(ROOT / "src")
    if pure:
        env["LORESCAN_PURE_PYTHON"] = "1"
    return subprocess.run([sys.executable, "-m", "lorescan.app.cli", "conformance", *files],
                          capture_output=True, text=True, env=env)


@pytest.mark.parametrize("pure", [False, True], ids=["default-backend", "pure-python"])
def test_the_command_passes_all_405_turns_mixed_with_st_files(pure):
    st_file = TESTS_DIR / "conformance" / "st" / "keys.json"
    st_turns = sum(len(c["turns"]) for c in json.loads(st_file.read_text())["cases"])
    r = _command([str(p) for p in FILES] + [str(st_file)], pure)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == f"{405 + st_turns} passed, 0 failed"


def test_a_wrong_expectation_is_a_failed_turn_with_a_readable_diff(tmp_path):
    data = json.loads((JANITOR / "priority.json").read_text())
    case = next(c for c in data["cases"] if c["name"] == "priority/fraction-throws")
    other = json.loads(json.dumps(case))
    other["name"] = "changed"
    other["turns"][0]["expected"]["error"] = None          # the script throws here
    other["turns"][0]["expected"]["trace"]["direct"] = [1]
    data["cases"] = [case, other]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    out = io.StringIO()
    assert run_files([str(bad)], out=out) == (1, 1)
    text = out.getvalue()
    assert "FAIL bad.json changed turn 0" in text and "error:" in text and "trace.direct" in text
    assert text.rstrip().endswith("1 passed, 1 failed")


def test_a_malformed_janitor_file_is_a_located_error(tmp_path):
    data = json.loads((JANITOR / "count.json").read_text())
    data["cases"][2]["turns"][0]["random"] = ["0.5"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(FormatError) as err:
        list(iter_janitor_cases(str(bad)))
    assert err.value.entry == "case 2" and err.value.field == "turns[0].random"
