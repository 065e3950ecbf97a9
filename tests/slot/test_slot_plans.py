"""slot/plans.py: how each key reads in slot mode, and the plan the gates follow.

The ``/pattern/flags`` shape is read by ``js.regex.regex_key`` (one reading for every
engine); these tests hold it to SPEC 5.1 conditions 1-2 and 17.11, and to the slot keys of
docs/slot-mode.md#slot-keys.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan.model import Lorebook, SelectiveLogic, entry_from_fields
from lorescan.slot import SlotEngine
from lorescan.slot.plans import plan_keys, regex_kind
from tests.support.slot_helpers import cc_book


@pytest.mark.parametrize("key, kind", [
    ("/dra+gon/i", "regex"), ("/^\\x01dragon/", "regex"), ("/dragon/y", "regex"),     # SPEC 17.11
    ("/a/b/", "plain"),             # an unescaped inner slash (17.11)
    # the shape, but no ECMAScript regex: SillyTavern reads them as text (17.11: `/[/` matches
    # the literal `/[/`); in slot mode they never match (docs/slot-mode.md#slot-keys)
    ("/[/", "invalid"), ("/[/i", "invalid"), ("/(/", "invalid"), ("/a/gg", "invalid"),
    ("/x/v", "plain"), ("/x/d", "plain"),      # v and d are not flags here (5.1)
    ("/usr/bin", "plain"), ("a/b/", "plain"), ("//", "plain"), ("//i", "plain"),   # empty body
    ("/a\\/b/", "regex"), ("/a/ig/", "plain"),
    ("  /abc/i\n", "regex"),        # trimmed first (JS trim)
    ("lighthouse", "plain"),
])
def test_regex_kind_reads_the_spec_key_forms(key, kind):
    assert regex_kind(key) == kind


def _spec_shape(key: str) -> bool:
    """SPEC 5.1 conditions 1-2, read literally: the shortest non-empty body after which only
    ``/`` and flags from ``gimsuy`` remain, holding no slash at its start or unescaped."""
    if not key.startswith("/"):
        return False
    for end in range(2, len(key)):          # key[end] is the closing slash
        if key[end] == "/" and all(c in "gimsuy" for c in key[end + 1:]):
            body = key[1:end]
            return not any(c == "/" and (i == 0 or body[i - 1] != "\\") for i, c in enumerate(body))
    return False


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="/\\a[(gimsuyvd", max_size=9))
def test_a_key_is_plain_exactly_when_it_lacks_the_spec_shape(key):
    assert (regex_kind(key) == "plain") == (not _spec_shape(key))


@pytest.mark.parametrize("logic", list(SelectiveLogic))
def test_each_stored_selective_logic_reaches_the_plan_as_the_shared_enum(logic):
    engine = SlotEngine([cc_book("b", [{"keys": ["fox"], "secondary_keys": ["den"], "selective": True,
                                        "extensions": {"selectiveLogic": int(logic)}, "content": "x"}])],
                        count_tokens=len)
    plan, _spec = plan_keys(engine.pool[0], engine.regex_keys)
    assert plan.logic is logic and engine.pool[0].selective_logic is logic


def test_an_entry_without_selective_logic_combines_its_secondary_keys_with_and_any():
    entry = entry_from_fields({"uid": 0, "key": ["fox"], "keysecondary": ["den"], "selective": True,
                               "content": "x"})                 # no selectiveLogic field, no defaults filled
    engine = SlotEngine([Lorebook(name="b", entries=(entry,))], count_tokens=len)
    plan, _spec = plan_keys(engine.pool[0], engine.regex_keys)
    assert engine.pool[0].selective_logic is None and plan.logic is SelectiveLogic.AND_ANY


def test_the_selective_logic_of_every_engine_is_one_enum():
    from lorescan import st as st_mode
    from lorescan.formats import janitor_convert
    assert st_mode.SelectiveLogic is SelectiveLogic
    assert [SelectiveLogic(v).words for v in range(4)] == ["AND ANY", "NOT ALL", "NOT ANY", "AND ALL"]
    assert set(janitor_convert._LOGIC_ALIAS) == set(SelectiveLogic)
