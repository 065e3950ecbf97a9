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
from types import ModuleType

import pytest
from hypothesis import settings

# HYPOTHESIS_PROFILE=ci (CI): 1,000 examples per property that does not set its own count,
# no deadline (a shared runner is slow); the default "dev" profile is hypothesis's defaults.
settings.register_profile("dev")
settings.register_profile("ci", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

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
