"""The README's examples run as written."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PY_BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_readme_starts_with_the_two_setup_commands():
    first_block = re.search(r"```bash\n(.*?)```", README, re.S).group(1).strip().splitlines()
    assert first_block == [
        "pip install . && lorescan scan examples/saltmere.json --chat examples/saltmere-chat.jsonl",
        'pip install ".[test]" && python -m pytest',
    ]
    assert README.index("```bash") < README.index("lorescan is an exact")


def test_the_readme_has_python_examples():
    # Guards the parametrised test below, which would collect nothing if the blocks vanished.
    assert len(PY_BLOCKS) >= 2


@pytest.mark.parametrize("code", PY_BLOCKS, ids=[f"block{i}" for i in range(len(PY_BLOCKS))])
def test_a_python_example_in_the_readme_runs(code, capsys):
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(old)
    assert capsys.readouterr().out.strip(), "the example prints something"


def test_the_development_section_maps_every_subpackage_to_a_pipeline_step():
    section = README[README.index("## Development"):]
    steps = re.findall(r"^\d\. (.*)$", section, re.M)
    assert len(steps) == 4, steps
    named = set(re.findall(r"`(\w+)/`", "\n".join(steps)))
    packages = {p.parent.name for p in (ROOT / "src" / "lorescan").glob("*/__init__.py")}
    assert named == packages, f"missing: {sorted(packages - named)}, gone: {sorted(named - packages)}"
