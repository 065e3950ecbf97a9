"""Every command in the README's and docs/service.md's shell blocks is run here, or listed in NOT_RUN
with the reason it is not.

A ```` ```bash ```` block's lines are commands (``&&`` joins several; a ``#`` comment ends one; an
indented comment-only line continues the previous one's comment). ``lorescan ...`` commands run as
written, through a ``lorescan`` on ``PATH`` that is this checkout's, in a scratch directory that
sees the checkout's ``examples/`` and ``tests/`` (so files the docs write, such as ``report.html``,
land there, and paths under ``/tmp/`` are moved under it, so a second run finds no file of the first);
each must end with the status its documentation gives.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "service.md"]

# pattern (matched at the start of a command) -> why it is not run by this test
NOT_RUN = {
    r"pip install ": "installs into the running environment; CI's install_and_test, install_sdist and "
                     "install_wheel_outside_tree steps run the install commands in fresh virtualenvs",
    r"pip wheel ": "builds the native kernels into a wheel (minutes); CI's build_sdist_and_wheel step does",
    r"python -m pytest": "the test suite itself (and `benchmarks`, CI's benchmarks steps)",
    r"lorescan serve ": "serves until stopped; tests/serve/test_serve.py and tests/serve/test_serve_ops.py start it on a "
                        "free loopback port",
}
# a command -> the exit status its documentation gives, where that is not 0
STATUS = {
    "lorescan lint examples/saltmere.json": 1,      # docs/lint.md#exit-status: the worst finding is a warning
}


def _commands(page: Path) -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            code = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not code:
                continue
            out.extend(part.strip() for part in code.split("&&"))
    return out


COMMANDS = list(dict.fromkeys((page.name, cmd) for page in PAGES for cmd in _commands(page)))   # in page order
RUN = [(name, cmd) for name, cmd in COMMANDS if not any(re.match(p, cmd) for p in NOT_RUN)]


def test_the_pages_have_commands_and_every_reason_not_to_run_one_is_used():
    assert len(COMMANDS) >= 10, COMMANDS
    for pattern in NOT_RUN:
        assert any(re.match(pattern, cmd) for _, cmd in COMMANDS), f"NOT_RUN entry {pattern!r} matches nothing"
    for cmd in STATUS:
        assert any(cmd == c for _, c in RUN), f"STATUS entry {cmd!r} is not a command that runs"


def test_every_command_is_run_here_or_has_a_reason_not_to_be():
    unexplained = [cmd for _, cmd in RUN if not cmd.startswith("lorescan ")]
    assert not unexplained, f"run these here or add them to NOT_RUN with the reason: {unexplained}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    work = tmp_path_factory.mktemp("doc-commands")
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name)
    (work / "tmp").mkdir()
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "lorescan"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m lorescan \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]), "NO_COLOR": "1"}
    return work, env


@pytest.mark.parametrize("page, cmd", RUN, ids=[f"{p}:{c[:60]}" for p, c in RUN])
def test_a_documented_command_runs_as_written(scratch, page, cmd):
    if cmd.startswith(("lorescan replay-batch", "lorescan summarize")):
        pytest.importorskip("pyarrow", reason="replay needs pyarrow (pip install '.[replay]')")
    work, env = scratch
    r = subprocess.run(["bash", "-c", cmd.replace("/tmp/", f"{work}/tmp/")], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == STATUS.get(cmd, 0), f"{page}: {cmd}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr
