"""The public top level stays small: about 30 names a new user needs, the rest in subpackages.

Names the top level used to export still resolve, each with a DeprecationWarning that names
the subpackage to import it from.
"""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import lorescan

MAX_PUBLIC_NAMES = 35        # issue 19: "about 30"


def test_the_top_level_exports_at_most_35_names():
    assert len(lorescan.__all__) <= MAX_PUBLIC_NAMES, sorted(lorescan.__all__)
    assert len(set(lorescan.__all__)) == len(lorescan.__all__)


def test_every_public_name_resolves_without_a_move_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in lorescan.__all__:
            assert getattr(lorescan, name) is not None, name
    assert not [w for w in caught if "moved" in str(w.message)]


def test_every_public_name_but_the_version_comes_from_the_subpackage_it_names():
    # the same object as the module the lazy table points at, so there is one meaning per name
    for name, module in lorescan._LAZY.items():
        assert getattr(importlib.import_module(module, "lorescan"), name) is getattr(lorescan, name), name


@pytest.mark.parametrize("name", sorted(lorescan._MOVED))
def test_a_name_moved_off_the_top_level_still_resolves_and_says_where_it_lives(name):
    home = lorescan._MOVED[name]
    assert name not in lorescan.__all__
    with pytest.warns(DeprecationWarning, match=f"import it from {home}"):
        value = getattr(lorescan, name)
    assert value is getattr(importlib.import_module(home), name)
    assert name in importlib.import_module(home).__all__      # public where it lives now


def test_from_import_of_a_moved_name_warns_too():
    code = ("import warnings\nwarnings.filterwarnings('error', 'lorescan', DeprecationWarning)\n"
            "try:\n    from lorescan import TiktokenCounter\nexcept DeprecationWarning as exc:\n    print(exc)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "lorescan.tokens" in r.stdout


def test_an_unknown_name_is_an_attribute_error_not_a_deprecation():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AttributeError, match="no_such_name"):
            lorescan.no_such_name        # noqa: B018
    assert not caught
