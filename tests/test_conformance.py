"""Every public SillyTavern conformance vector passes (tests/conformance/README.md gives the format).

The synthetic vectors (``tests/conformance/st``) are in the repository; the real-data ones
(``conformance/st-real`` of the shared folder) are reached through ``need_shared``.
"""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFORMANCE_ST, need_shared, shared_files
from lorescan.app.conformance import iter_cases, run_case, run_files

ST_FILES = sorted(CONFORMANCE_ST.glob("*.json"))
REAL = "conformance/st-real"
REAL_FILES = shared_files(REAL, "*.json")


def test_the_public_vectors_are_in_the_repository():
    names = {p.stem for p in ST_FILES}
    assert names >= {"keys", "scan", "activation", "recursion", "budget", "positions", "groups", "timed",
                     "books", "mixed", "st_quirks"}, names


def test_the_real_data_vectors_are_present():
    assert len(list(need_shared(REAL).glob("*.json"))) >= 20


def _failures(path: Path) -> list[str]:
    out = []
    for case in iter_cases(str(path)):
        outcome = run_case(case, source=str(path))
        if outcome.error:
            out.append(f"{outcome.name}: {outcome.error}")
        for t in outcome.turns:
            if not t.ok:
                out.append(f"{outcome.name} turn {t.index}\n" + "\n".join(t.diffs))
    return out


@pytest.mark.parametrize("path", ST_FILES, ids=lambda p: p.stem)
def test_every_turn_of_a_public_st_vector_file_passes(path):
    failures = _failures(path)
    assert not failures, "\n".join(failures[:5])


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.stem)
def test_every_turn_of_a_real_data_vector_file_passes(path):
    need_shared(REAL)
    failures = _failures(path)
    assert not failures, "\n".join(failures[:5])


def test_the_runner_reports_a_wrong_expectation_as_a_failed_turn(tmp_path):
    import json
    data = json.loads((CONFORMANCE_ST / "keys.json").read_text())
    case = data["cases"][0]
    case["turns"][0]["expected"]["world_info_before"] = "something else"
    data["cases"] = [case]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    out = io.StringIO()
    passed, failed = run_files([str(bad)], out=out)
    assert (passed, failed) == (0, 1)
    text = out.getvalue()
    assert "world_info_before" in text and "something else" in text
    assert text.rstrip().endswith("0 passed, 1 failed")


def test_the_command_prints_the_summary_line_and_exits_nonzero_on_failure(tmp_path):
    import json
    data = json.loads((CONFORMANCE_ST / "keys.json").read_text())
    data["cases"] = data["cases"][:3]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(data))
    ok = subprocess.run([sys.executable, "-m", "lorescan.app.cli", "conformance", str(good)],
                        capture_output=True, text=True)
    turns = sum(len(c["turns"]) for c in data["cases"])
    assert ok.returncode == 0
    assert ok.stdout.strip().splitlines()[-1] == f"{turns} passed, 0 failed"
    data["cases"][0]["turns"][0]["expected"]["activated"] = [{"world": "x", "uid": 1}]
    good.write_text(json.dumps(data))
    bad = subprocess.run([sys.executable, "-m", "lorescan.app.cli", "conformance", str(good)],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stdout.strip().splitlines()[-1] == f"{turns - 1} passed, 1 failed"
