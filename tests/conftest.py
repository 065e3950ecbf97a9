"""Shared fixtures: native kernels and their pure-Python twins, corpus paths."""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

from lorescan import _hits_py, _wordscan_py

# HYPOTHESIS_PROFILE=ci (CI): 1,000 examples per property that does not set its own count,
# no deadline (a shared runner is slow); the default "dev" profile is hypothesis's defaults.
settings.register_profile("dev")
settings.register_profile("ci", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

TESTS_DIR = Path(__file__).resolve().parent
SHARED = TESTS_DIR.parent.parent / "shared"
CORPUS = SHARED / "corpus"


def built(name: str) -> ModuleType:
    """The native kernel ``lorescan.<name>``: skip where not built; fail where CI required it."""
    try:
        return importlib.import_module(f"lorescan.{name}")
    except ModuleNotFoundError:
        if os.environ.get("LORESCAN_REQUIRE_NATIVE") == "1":
            raise
        pytest.skip(f"lorescan.{name} is not built here")


@pytest.fixture(scope="session", params=["twin", "native"])
def wordscan(request) -> ModuleType:
    """Every behaviour test that takes ``wordscan`` runs on both the twin and the native kernel."""
    return _wordscan_py if request.param == "twin" else built("_wordscan_c")


@pytest.fixture(scope="session", params=["twin", "native"])
def hits(request) -> ModuleType:
    """Every behaviour test that takes ``hits`` runs on both the twin and the native kernel."""
    return _hits_py if request.param == "twin" else built("_hits_c")


@pytest.fixture(scope="session")
def native_wordscan() -> ModuleType:
    return built("_wordscan_c")


@pytest.fixture(scope="session")
def native_hits() -> ModuleType:
    return built("_hits_c")


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"no shared corpus at {CORPUS}")
    return CORPUS
