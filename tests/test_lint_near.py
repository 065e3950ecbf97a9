"""LS602's segment index (lorescan.lint.book._similar_pairs) finds exactly the pairs, with the
same scores, as the all-pairs search it replaced (tests/support/near_reference.py): on every
corpus book's keys, on random key sets and on adversarial ones (keys one edit apart, one
letter repeated, long keys)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from rapidfuzz import fuzz, process

from lorescan import load
from lorescan.lint import LintOptions, lint_book
from lorescan.lint.book import NEAR_MIN_LENGTH, _plain_primary, _similar_pairs
from lorescan.model import Lorebook, entry_from_fields
from tests.support.near_reference import similar_pairs_all

from conftest import need_shared, shared_files


def _both(keys: list[str]) -> tuple[list, list]:
    return sorted(_similar_pairs(keys, process, fuzz.ratio)), sorted(similar_pairs_all(keys, process, fuzz.ratio))


def _book_keys(book: Lorebook, case_sensitive: bool) -> list[str]:
    owners = dict.fromkeys(key for key, _, _ in _plain_primary(book.entries, case_sensitive))
    return [k for k in owners if len(k) >= NEAR_MIN_LENGTH]


@pytest.mark.parametrize("path", shared_files("corpus/books", "*.json"))
@pytest.mark.parametrize("case_sensitive", [False, True])
def test_corpus_books_give_the_same_pairs_as_the_all_pairs_search(path, case_sensitive):
    need_shared("corpus/books")
    keys = _book_keys(load(path), case_sensitive)
    new, old = _both(keys)
    assert new == old


def test_corpus_books_have_pairs_to_compare():
    # the corpus comparison above is not vacuous: some books have near-duplicate keys
    need_shared("corpus/books")
    books = shared_files("corpus/books", "*.json")
    assert sum(bool(_both(_book_keys(load(p), False))[1]) for p in books) >= 3


_random_keys = st.lists(st.text(alphabet="abcdeé ", min_size=5, max_size=24), min_size=2, max_size=60, unique=True)


@hsettings(max_examples=200, deadline=None)
@given(_random_keys)
def test_random_keys_give_the_same_pairs(keys):
    new, old = _both(keys)
    assert new == old


@st.composite
def _near_identical(draw):
    # one stem and many variants a few insertions, deletions or substitutions away from it (or
    # from each other): most pairs are close to the threshold, on both sides
    stem = draw(st.text(alphabet="abc", min_size=5, max_size=40))
    out = {stem}
    for _ in range(draw(st.integers(1, 60))):
        base = list(draw(st.sampled_from(sorted(out))))
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from("ids"))
            at = draw(st.integers(0, len(base)))
            ch = draw(st.sampled_from("abcx"))
            if op == "i":
                base.insert(at, ch)
            elif base and at < len(base):
                if op == "d":
                    del base[at]
                else:
                    base[at] = ch
        if len(base) >= NEAR_MIN_LENGTH:
            out.add("".join(base))
    return sorted(out)


@hsettings(max_examples=200, deadline=None)
@given(_near_identical())
def test_near_identical_keys_give_the_same_pairs(keys):
    new, old = _both(keys)
    assert new == old


def test_adversarial_shapes_give_the_same_pairs():
    rng = random.Random(602)
    shapes = [
        ["a" * n for n in range(5, 120)],                                    # one letter repeated
        ["ab" * n + "c" for n in range(2, 60)],
        ["".join(rng.choice("ab") for _ in range(rng.randint(5, 30))) for _ in range(400)],
        ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(150, 256))) for _ in range(60)],
    ]
    long_stem = "".join(rng.choice("abcdefghij") for _ in range(200))
    shapes.append([long_stem[:i] + "xy" + long_stem[i + rng.randint(0, 30):] for i in range(0, 200, 3)])
    for n, keys in enumerate(shapes):
        new, old = _both(sorted(set(keys)))
        assert new == old
        assert new or n == 3                               # each shape but the random long one has pairs


def test_the_cap_and_the_count_of_the_rest_still_hold_for_many_near_duplicates():
    # 60 entries whose keys are one letter apart: 1,770 near-duplicate pairs, of which the
    # capped report lists 5 and counts the rest, exactly as the uncapped report has them
    keys = [f"dragonking{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(60)]
    book = Lorebook(name="near", entries=tuple(entry_from_fields({"uid": i, "key": [k], "content": "c"}, uid=i)
                                               for i, k in enumerate(keys)))
    full = [f for f in lint_book(book, LintOptions(select=("LS602",), max_findings_per_code=0))]
    capped = lint_book(book, LintOptions(select=("LS602",), max_findings_per_code=5))
    assert len(full) > 100
    assert capped[:5] == full[:5] and len(capped) == 6
    assert capped[5].entry is None and capped[5].message.startswith(f"{len(full) - 5:,} more LS602 findings")
