"""CI's pure-Python run covers every test module that reaches a kernel (tests/conftest.py).

The twins' run (``LORESCAN_PURE_PYTHON=1 pytest -m twin``) runs only TWIN_MODULES; these tests
keep that list whole (every module is classified, and the audit that fails a kernel call from an
unlisted module sees every call the package makes) and check the example cap of the CI profiles.
"""
from __future__ import annotations

import ast
import warnings
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.model import Lorebook, entry_from_fields

TESTS_DIR = Path(__file__).resolve().parent
SRC = TESTS_DIR.parent / "src" / "lorescan"


def test_every_test_module_is_in_the_twin_run_or_excluded_with_a_reason(twin_selection):
    twins, excluded = twin_selection.twins, set(twin_selection.excluded)
    modules = {p.relative_to(TESTS_DIR).as_posix() for p in TESTS_DIR.rglob("test_*.py")}
    assert not twins & excluded, f"listed both ways: {sorted(twins & excluded)}"
    assert modules - twins - excluded == set(), (
        f"test modules in neither TWIN_MODULES nor NOT_ON_TWINS (tests/conftest.py): {sorted(modules - twins - excluded)}")
    assert (twins | excluded) - modules == set(), f"listed but absent: {sorted((twins | excluded) - modules)}"
    assert all(reason.strip() for reason in twin_selection.excluded.values())
    assert twin_selection.thorough <= modules, f"absent: {sorted(twin_selection.thorough - modules)}"


def test_the_tests_of_a_twin_module_carry_the_twin_marker(request):
    assert request.node.get_closest_marker("twin") is not None
    assert request.node.get_closest_marker("thorough") is None


def test_the_audit_sees_the_kernel_a_scan_reaches(twin_selection):
    audit = twin_selection.audit
    audit.reached = False
    book = Lorebook(name="b", entries=(entry_from_fields({"uid": 0, "key": ["lantern"], "content": "A lamp."}, uid=0),))
    engine = STEngine([BookSource(book, ("global",))], STSettings())
    result = engine.scan([ChatMessage("Rob", "the lantern is lit", is_user=True)], max_context=8192)
    assert result.activated
    assert audit.reached


def test_the_package_looks_the_kernel_up_at_call_time_only():
    # The audit replaces lorescan.match._kernels.hits; a module that bound the kernel itself at import
    # (``from .._kernels import hits``, or importing _hits_c / _hits_py) would call it unseen.
    bound = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name in ("_kernels.py", "_hits_py.py"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # a module's own escape-sequence warnings are not this test's
            tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                module = node.module or ""
                if (module.endswith("_kernels") and names - {"BACKEND"}) or "_hits_c" in module \
                        or "_hits_py" in module or names & {"_hits_c", "_hits_py"}:
                    bound.append(f"{path.relative_to(SRC)}:{node.lineno}")
            elif isinstance(node, ast.Import) and any("_hits_" in a.name for a in node.names):
                bound.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not bound, f"the kernel bound at import (the audit cannot see its calls): {bound}"


def test_the_example_cap_bounds_a_property_that_asks_for_more(twin_selection):
    seen = []

    @settings(max_examples=1000, deadline=None, database=None)
    @given(st.integers())
    def prop(n):
        seen.append(n)
    twin_selection.cap_examples(SimpleNamespace(obj=prop), 30)
    prop()
    assert 0 < len(seen) <= 30
    seen.clear()
    twin_selection.cap_examples(SimpleNamespace(obj=prop), 500)      # a cap never raises a count
    prop()
    assert len(seen) <= 30


def test_the_test_tree_mirrors_the_package_with_unique_basenames():
    # The layout rule of tests/conftest.py's docstring: a folder of test modules is named after a
    # subpackage of src/lorescan/ and has no __init__.py, so pytest imports each module by its
    # basename, and no two test modules may share one.
    modules = sorted(p.relative_to(TESTS_DIR) for p in TESTS_DIR.rglob("test_*.py"))
    names = [p.name for p in modules]
    assert len(set(names)) == len(names), f"sharing a basename: {sorted({n for n in names if names.count(n) > 1})}"
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.parts[0] for p in modules if len(p.parts) > 1}
    assert folders <= packages, f"test folders named after no subpackage of src/lorescan: {sorted(folders - packages)}"
    assert not [f for f in folders if (TESTS_DIR / f / "__init__.py").exists()]
