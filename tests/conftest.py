"""Shared fixtures: the native kernel (its twin is imported by the parity tests), the real-data sets.

Layout: a test module lives in ``tests/<package>/``, the subpackage of ``src/lorescan/`` it mainly
exercises (``tests/match/``: the matcher, its kernel and twin; ``tests/st/``, ``tests/slot/``,
``tests/janitor/``: the engines; ``tests/js/``, ``tests/formats/``, ``tests/lint/``, ``tests/replay/``,
``tests/serve/``, ``tests/app/`` (the ``lorescan`` command), ``tests/semantic/``, ``tests/tokens/``),
judged by what the test calls, not by its name (a test of ``lorescan serve`` run from the command line
is in ``serve/``). Tests of the top-level modules (``model``, ``errors``, ``limits``, ...) and the
cross-cutting ones stay here in ``tests/``: the SillyTavern conformance run, the hostile-input and
determinism runs, the docs, README, packaging, public names, import rules and this file's twin
lists. Helpers shared by several modules are in ``tests/support/`` (imported as ``tests.support.X``,
also by ``benchmarks/``). The folders have no ``__init__.py``: pytest imports each test module by its
basename, so basenames stay unique across the tree (tests/test_twin_selection.py checks both rules).

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
    "match/test_hits_parity.py", "match/test_kernels_table.py",
    "test_adversarial.py",
    "match/test_compile.py", "match/test_hitcache.py", "match/test_fuzzy.py", "match/test_keyspec.py", "match/test_lsc.py", "match/test_matching.py",
    "test_model.py", "match/test_regex_keys.py", "match/test_regex_prefilter.py", "match/test_spans.py",
    "test_conformance.py", "st/test_scan_diagnostics.py", "st/test_scan_differential.py", "st/test_scan_engine.py",
    "st/test_scan_examples.py", "app/test_scan_explain.py", "st/test_st_api.py", "st/test_st_hooks.py", "st/test_st_sharing.py",
    "st/test_st_cold.py", "st/test_st_plain_walk.py", "st/test_st_stages.py", "st/test_st_walk.py", "st/test_st_memo.py", "test_state_fuzz.py", "tokens/test_tokens.py",
    "slot/test_slot_bulk.py", "slot/test_slot_engine.py", "slot/test_slot_examples.py", "slot/test_slot_properties.py",
    "slot/test_slot_revised.py", "slot/test_slot_spans.py",
    "janitor/test_janitor_conformance.py", "janitor/test_janitor_engine.py", "janitor/test_janitor_explain.py",
    "janitor/test_janitor_fastpath.py", "janitor/test_janitor_improved.py", "formats/test_formats_janitor_convert.py",
    "lint/test_lint.py", "replay/test_replay.py", "replay/test_replay_compare.py", "replay/test_replay_janitor.py",
    "replay/test_replay_vocabulary.py", "replay/test_report.py", "replay/test_report_browser.py", "test_readme.py",
    "serve/test_serve.py", "serve/test_serve_ops.py", "semantic/test_semantic_engine.py", "semantic/test_semantic_slot.py",
    "test_twin_selection.py", "app/test_compilecmd.py", "serve/test_chat_prefix.py", "app/test_cli.py",
    "slot/test_slot_plans.py", "serve/test_serve_bounds.py", "serve/test_serve_inline.py",
    "st/test_stable_placement.py", "match/test_expr.py", "match/test_expr_engine.py", "formats/test_expr_formats.py",
    "test_determinism.py", "serve/test_serve_chaos.py", "replay/test_replay_ray.py",   # their own CI steps (-m contention, -m chaos, -m ray)
})
# Why each of these needs no twin run; none calls a kernel in the test process (the audit checks
# that on every run), and what their subprocesses (the CLI, a server) scan with, the engines, the
# twin modules test in process.
NOT_ON_TWINS = {
    "test_imports.py": "import rules, read from the source",
    "test_public_api.py": "the names the package offers",
    "test_entry_checks.py": "an entry's field checks (no scan)",
    "formats/test_json_depth.py": "JSON nesting checks (no scan)",
    "js/test_jsregex_parse_once.py": "the regex parse against the old module (no scan)",
    "test_packaging.py": "metadata, dependencies and installs",
    "test_docs.py": "the docs' text",
    "test_doc_commands.py": "documented commands, as subprocesses, scanning what the engine tests scan",
    "formats/test_formats_corpus.py": "reading and converting files (no scan)",
    "formats/test_formats_fuzz.py": "reading mutated files (no scan)",
    "formats/test_formats_janitor.py": "reading Janitor files (no scan)",
    "formats/test_formats_mapping.py": "field mapping between formats (no scan)",
    "formats/test_formats_registry.py": "the format registry (no scan)",
    "js/test_js_coerce.py": "JavaScript coercions (no scan)",
    "js/test_js_types.py": "the OpenAPI document's types (no scan)",
    "js/test_jsregex.py": "the regex translation (no scan)",
    "js/test_sthash.py": "the hash SillyTavern uses (no scan)",
    "slot/test_slot_decorators.py": "parsing decorators (no scan)",
    "app/test_toml_settings.py": "settings files (no scan)",
    "app/test_convert_cli.py": "the convert command, as a subprocess",
    "app/test_janitor_cli.py": "the janitor commands' arguments and output (the janitor scan calls no kernel)",
    "lint/test_lint_cli.py": "the lint command, as a subprocess",
    "serve/test_serve_janitor.py": "the HTTP service's janitor routes, over HTTP",
    "serve/test_serve_openapi.py": "the OpenAPI document and the served routes, over HTTP",
    "serve/test_serve_replicas.py": "replicas sharing a books folder, over HTTP",
    "st/test_lsc_records.py": "the compiled form's entry records (no scan)",
    "semantic/test_semantic.py": "embeddings (its own CI step; it compares both backends' scores itself)",
}


# The exactness and differential properties (see the profiles at the top): every property of these
# modules compares two ways of computing the same answer, so each example can find a wrong answer.
THOROUGH_MODULES = frozenset({
    "match/test_hits_parity.py",       # the native kernel against its twin
    "match/test_matching.py", "match/test_regex_prefilter.py", "match/test_regex_keys.py", "match/test_spans.py",  # vs reference
    "st/test_scan_differential.py", "st/test_st_walk.py", "st/test_st_memo.py",   # the ST engine vs its reference
    "slot/test_slot_bulk.py", "janitor/test_janitor_fastpath.py", "janitor/test_janitor_improved.py",  # slot, janitor vs theirs
    "tokens/test_tokens.py", "js/test_sthash.py",                       # counts and hashes against recomputing
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
