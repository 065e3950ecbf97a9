"""``lorescan scan --settings x.toml`` without the standard library's ``tomllib`` (Python 3.10).

Python 3.10 has no ``tomllib``; there the package depends on ``tomli`` (pyproject.toml). The
case runs the command in a subprocess whose ``import tomllib`` fails as it does on 3.10, and
compares its output with the same command reading the file through ``tomllib``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ("import sys\n"
       "if sys.argv[1] == 'no-tomllib':\n"
       "    sys.modules['tomllib'] = None          # import tomllib raises ModuleNotFoundError, as on 3.10\n"
       "from lorescan.app.cli import main\n"
       "status = main(sys.argv[2:])\n"
       "print('tomli loaded:', 'tomli' in sys.modules, file=sys.stderr)\n"
       "raise SystemExit(status)\n")


def _scan(mode: str, settings: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, mode, "scan", "examples/saltmere.json", "--chat",
                           "examples/saltmere-chat.jsonl", "--settings", str(settings), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_a_toml_settings_file_is_read_with_tomli_where_tomllib_is_missing(tmp_path):
    pytest.importorskip("tomli", reason="tomli is the Python 3.10 dependency (pip install 'tomli>=2')")
    settings = tmp_path / "x.toml"
    settings.write_text("scan_depth = 1\nrecursive = false\n")
    with_tomli = _scan("no-tomllib", settings)
    assert with_tomli.returncode == 0, with_tomli.stderr
    assert "tomli loaded: True" in with_tomli.stderr and "Traceback" not in with_tomli.stderr
    with_stdlib = _scan("stdlib", settings)
    assert with_stdlib.returncode == 0, with_stdlib.stderr
    assert with_tomli.stdout == with_stdlib.stdout
    assert json.loads(with_tomli.stdout)["settings"]["scan_depth"] == {"value": 1, "from": f"--settings {settings}"}
