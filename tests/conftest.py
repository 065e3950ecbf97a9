"""Shared fixtures: the native kernel (its twin is imported by the parity tests), the real-data sets.

The synthetic SillyTavern vectors live in the repository (``tests/conformance/st``). The
real-data sets (``corpus/`` and ``conformance/st-real``: other people's books and chats)
stay outside it, at ``$LORESCAN_SHARED`` (default: ``shared`` beside the checkout). Tests
that need them call :func:`need_shared` first thing in the test body, and parametrize over
a real-data folder with :func:`shared_files` / :func:`or_absent`. Where the folder is absent
they skip, all with one reason reported at one place (a skip raised in a fixture would be
listed once per test); with ``LORESCAN_REQUIRE_SHARED=1`` a missing folder or file fails.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from hypothesis import settings

from lorescan.match import _kernels

# Hypothesis profiles (HYPOTHESIS_PROFILE; the default "dev" is hypothesis's defaults, every count
# as its decorator says). "ci" (CI's run on the native kernels) and "twin" (its run on the pure-Python
# twins) spend the examples where they earn them: the exactness and differential properties (the
# modules in THOROUGH_MODULES, below: engine against reference, kernel against twin, cached against
# recomputed, counts against recounting) run the count their decorator gives, 1,000 for one without;
# every other property (robustness fuzzing, invariants) at most EXAMPLES_CAP[profile]. The "twin"
# run caps the thorough ones too: the twins are held to the native kernels example for example by
# the kernel-vs-twin parity tests, which run in the native run at their full count, and the native
# engines to their references at full count there, so the twin run's own full counts added minutes
# of CI and no new reach. No deadline in either (a shared runner is slow).
settings.register_profile("dev")
settings.register_profile("ci", max_examples=1000, deadline=None)
settings.register_profile("twin", max_examples=1000, deadline=None)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(HYPOTHESIS_PROFILE)
EXAMPLES_CAP = {"ci": 200, "twin": 100}

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
CONFORMANCE_ST = TESTS_DIR / "conformance" / "st"
SHARED = Path(os.environ.get("LORESCAN_SHARED") or ROOT.parent / "shared").resolve()
REQUIRE_SHARED = os.environ.get("LORESCAN_REQUIRE_SHARED") == "1"


def need_shared(relative: str = "") -> Path:
    """``$LORESCAN_SHARED/<relative>``; skip (one reason) or, when required, fail if it is missing."""
    path = SHARED / relative
    if path.exists():
        return path
    if REQUIRE_SHARED:
        pytest.fail(f"{path} is missing, and LORESCAN_REQUIRE_SHARED=1 makes the real-data sets required",
                    pytrace=False)
    if not SHARED.is_dir():
        pytest.skip(f"real-data sets not found at {SHARED} (set LORESCAN_SHARED to the folder holding "
                    "corpus/ and conformance/st-real/)")
    pytest.skip(f"{path} is missing from the real-data sets")


def shared_files(folder: str, pattern: str = "*") -> list:
    """Files ``folder/pattern`` under the real-data folder, sorted, to parametrize a test with."""
    return or_absent(sorted(p for p in (SHARED / folder).glob(pattern) if p.is_file()))


def or_absent(paths: list[Path]) -> list:
    """``paths``, or one placeholder parameter (``None``) where the real data is absent.

    The test is then collected and skipped when it calls ``need_shared(...)`` first (an
    empty parameter set would skip with pytest's own reason, once per test).
    """
    return list(paths) or [pytest.param(None, id="absent")]


def built(name: str) -> ModuleType:
    """The native kernel ``lorescan.<name>``: skip where not built; fail where CI required it."""
    try:
        return importlib.import_module(f"lorescan.{name}")
    except ModuleNotFoundError:
        if os.environ.get("LORESCAN_REQUIRE_NATIVE") == "1":
            raise
        pytest.skip(f"lorescan.{name} is not built here")


@pytest.fixture(scope="session")
def native_hits() -> ModuleType:
    """The built ``_hits_c`` (the parity tests compare it with ``_hits_py``)."""
    return built("_hits_c")


@pytest.fixture(scope="session", params=["twin", "native"])
def hits(request) -> ModuleType:
    """Every behaviour test that takes ``hits`` runs on both the twin and the native kernel."""
    if request.param == "twin":
        return importlib.import_module("lorescan.match._hits_py")
    return built("_hits_c")


# -- the pure-Python twins' run ---------------------------------------------------------------
# CI runs the whole suite on the native kernels, then again with LORESCAN_PURE_PYTHON=1 only the
# test modules that reach a kernel (``lorescan.match._kernels.hits``: the hit sets and window unions of
# every scan), each of their tests marked ``twin`` here (``-m twin``); the others never call a
# kernel, so running them on the twins would prove nothing new. This is the one list: every test
# module is in exactly one of TWIN_MODULES and NOT_ON_TWINS (tests/test_twin_selection.py checks
# it), and a test of a module in NOT_ON_TWINS that calls a kernel in this process fails (the
# audit below), so a kernel-touching test cannot stay out of the twin run unnoticed. Paths are
# relative to tests/.
TWIN_MODULES = frozenset({
    "parity/test_hits_parity.py", "test_kernels_table.py",
    "test_adversarial.py",
    "test_compile.py", "test_hitcache.py", "test_fuzzy.py", "test_keyspec.py", "test_lsc.py", "test_matching.py",
    "test_model.py", "test_regex_keys.py", "test_regex_prefilter.py", "test_spans.py",
    "test_conformance.py", "test_scan_diagnostics.py", "test_scan_differential.py", "test_scan_engine.py",
    "test_scan_examples.py", "test_scan_explain.py", "test_st_api.py", "test_st_hooks.py", "test_st_sharing.py",
    "test_st_cold.py", "test_st_stages.py", "test_st_walk.py", "test_state_fuzz.py", "test_tokens.py",
    "test_slot_bulk.py", "test_slot_engine.py", "test_slot_examples.py", "test_slot_properties.py",
    "test_slot_revised.py", "test_slot_spans.py",
    "test_janitor_conformance.py", "test_janitor_engine.py", "test_janitor_explain.py",
    "test_janitor_fastpath.py", "test_janitor_improved.py", "test_formats_janitor_convert.py",
    "test_lint.py", "test_replay.py", "test_replay_compare.py", "test_replay_janitor.py",
    "test_replay_vocabulary.py", "test_report.py", "test_report_browser.py", "test_readme.py",
    "test_serve.py", "test_serve_ops.py", "test_semantic_engine.py", "test_semantic_slot.py",
    "test_twin_selection.py", "test_compilecmd.py", "test_chat_prefix.py", "test_cli.py",
    "test_slot_plans.py", "test_serve_bounds.py",
    "test_stable_placement.py", "test_expr.py", "test_expr_engine.py", "test_expr_formats.py",
    "test_determinism.py", "test_serve_chaos.py", "test_replay_ray.py",   # their own CI steps (-m contention, -m chaos, -m ray)
})
# Why each of these needs no twin run; none calls a kernel in the test process (the audit checks
# that on every run), and what their subprocesses (the CLI, a server) scan with, the engines, the
# twin modules test in process.
NOT_ON_TWINS = {
    "test_imports.py": "import rules, read from the source",
    "test_public_api.py": "the names the package offers",
    "test_entry_checks.py": "an entry's field checks (no scan)",
    "test_json_depth.py": "JSON nesting checks (no scan)",
    "test_jsregex_parse_once.py": "the regex parse against the old module (no scan)",
    "test_packaging.py": "metadata, dependencies and installs",
    "test_docs.py": "the docs' text",
    "test_doc_commands.py": "documented commands, as subprocesses, scanning what the engine tests scan",
    "test_formats_corpus.py": "reading and converting files (no scan)",
    "test_formats_fuzz.py": "reading mutated files (no scan)",
    "test_formats_janitor.py": "reading Janitor files (no scan)",
    "test_formats_mapping.py": "field mapping between formats (no scan)",
    "test_formats_registry.py": "the format registry (no scan)",
    "test_js_coerce.py": "JavaScript coercions (no scan)",
    "test_js_types.py": "the OpenAPI document's types (no scan)",
    "test_jsregex.py": "the regex translation (no scan)",
    "test_sthash.py": "the hash SillyTavern uses (no scan)",
    "test_slot_decorators.py": "parsing decorators (no scan)",
    "test_toml_settings.py": "settings files (no scan)",
    "test_convert_cli.py": "the convert command, as a subprocess",
    "test_janitor_cli.py": "the janitor commands' arguments and output (the janitor scan calls no kernel)",
    "test_lint_cli.py": "the lint command, as a subprocess",
    "test_serve_janitor.py": "the HTTP service's janitor routes, over HTTP",
    "test_serve_openapi.py": "the OpenAPI document and the served routes, over HTTP",
    "test_serve_replicas.py": "replicas sharing a books folder, over HTTP",
    "test_semantic.py": "embeddings (its own CI step; it compares both backends' scores itself)",
}


# The exactness and differential properties (see the profiles at the top): every property of these
# modules compares two ways of computing the same answer, so each example can find a wrong answer.
THOROUGH_MODULES = frozenset({
    "parity/test_hits_parity.py",       # the native kernel against its twin
    "test_matching.py", "test_regex_prefilter.py", "test_regex_keys.py", "test_spans.py",  # vs reference
    "test_scan_differential.py", "test_st_walk.py",                     # the ST engine vs its reference
    "test_slot_bulk.py", "test_janitor_fastpath.py", "test_janitor_improved.py",  # slot, janitor vs theirs
    "test_tokens.py", "test_sthash.py",                       # counts and hashes against recomputing
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    cap = EXAMPLES_CAP.get(HYPOTHESIS_PROFILE)
    for item in items:
        module = _module_of(item)
        if module in TWIN_MODULES:
            item.add_marker(pytest.mark.twin)
        if module in THOROUGH_MODULES:
            item.add_marker(pytest.mark.thorough)
        if cap is not None and (module not in THOROUGH_MODULES or HYPOTHESIS_PROFILE == "twin"):
            _cap_examples(item, cap)


def _cap_examples(item: pytest.Item, cap: int) -> None:
    """At most ``cap`` examples for the hypothesis test ``item`` (a no-op for other tests)."""
    test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if not getattr(test, "is_hypothesis_test", False):
        return
    # where @settings/@given keep the test's settings (hypothesis reads it when the test runs);
    # a hypothesis that moved it fails here rather than run every property uncapped
    current = test._hypothesis_internal_use_settings
    if current.max_examples > cap:
        test._hypothesis_internal_use_settings = settings(current, max_examples=cap)


def _module_of(item: pytest.Item) -> str:
    return Path(item.path).resolve().relative_to(TESTS_DIR).as_posix()


class _KernelAudit:
    """Stands in for ``lorescan.match._kernels.hits`` and notes that a kernel was reached (every caller
    looks the kernel up there at call time: ``_kernels.hits.<function>``)."""

    def __init__(self, kernel: ModuleType) -> None:
        self.kernel = kernel
        self.reached = False

    def __getattr__(self, name: str) -> object:
        self.reached = True
        return getattr(self.kernel, name)


KERNEL_AUDIT = _KernelAudit(_kernels.hits)
_kernels.hits = KERNEL_AUDIT      # type: ignore[assignment]


@pytest.fixture(scope="session")
def twin_selection() -> SimpleNamespace:
    """The lists and the audit above, for tests/test_twin_selection.py."""
    return SimpleNamespace(twins=TWIN_MODULES, excluded=NOT_ON_TWINS, thorough=THOROUGH_MODULES,
                           audit=KERNEL_AUDIT, cap_examples=_cap_examples)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    KERNEL_AUDIT.reached = False     # before the test's fixtures, module- and session-scoped included


@pytest.fixture(autouse=True)
def _kernels_reached_only_by_twin_modules(request):
    yield
    module = _module_of(request.node)
    if KERNEL_AUDIT.reached and module not in TWIN_MODULES:
        pytest.fail(f"{module} reached a native kernel (lorescan.match._kernels.hits) but is not in TWIN_MODULES "
                    "(tests/conftest.py), so CI's pure-Python run would skip it: move it there", pytrace=False)
