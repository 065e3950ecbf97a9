"""Worked examples of SPEC 17.13-17.15 and the seed's own examples (issue 4), as assertions."""
from __future__ import annotations

from tests.support.slot_helpers import cc_book, chat, contents, engine, inserted_ids, outcomes, st_book

from lorescan.slot import roll_percent


def first_turn_id(book: str, entry_id, wanted, prefix: str = "chat") -> str:
    """The first turn id of the form "<prefix>-<n>" whose roll satisfies ``wanted``."""
    return next(t for t in (f"{prefix}-{n}" for n in range(1000)) if wanted(roll_percent(t, book, entry_id)))


# -- 17.13 priority vs order ---------------------------------------------------------------

def test_17_13_priority_decides_survival_and_order_decides_placement():
    def e(uid, tokens, priority, order, role):
        return {"uid": uid, "constant": True, "content": "x" * tokens, "priority": priority,
                "order": order, "role": role}
    book_a = st_book("A", [e(1, 50, 10, 5, 0), e(2, 40, 5, 20, 0)], token_budget=100)
    book_b = st_book("B", [e(3, 20, 1, 30, 0), e(4, 30, 7, 1, 1)], token_budget=60)
    result = engine(book_a, book_b, count_tokens=len).run(chat("hi"), turn_id="t")
    assert result.budget == 100
    assert outcomes(result) == {1: "inserted", 2: "dropped_budget", 3: "dropped_budget", 4: "inserted"}
    assert [(m.role, len(m.content)) for m in result.messages] == [("system", 50), ("user", 30)]
    log = {r.id: r for r in result.log}
    assert "longest prefix" in log[3].reason       # E3 would fit, but comes after the cut
    assert result.tokens_used == 80


# -- 17.14 decorators and state --------------------------------------------------------------

LIGHTHOUSE = "@@probability 50\n@@role assistant\n@@keep\nThe lighthouse keeper waves."


def lighthouse_book(content: str = LIGHTHOUSE):
    return st_book("coast", [{"uid": 1, "key": ["lighthouse"], "content": content}])


def turn(n: int, keyword: bool) -> list[tuple[str, str]]:
    texts = [f"message {i}" for i in range(n)]
    if keyword:
        texts[-1] = "Look, a lighthouse!"
    return chat(*texts)


def test_17_14_keyword_roll_and_keep_across_turns():
    eng = engine(lighthouse_book())
    t3 = first_turn_id("coast", 1, lambda u: u < 50)
    r3 = eng.run(turn(3, keyword=True), turn_id=t3)
    assert [(m.role, m.content) for m in r3.messages] == [("assistant", "The lighthouse keeper waves.")]
    assert r3.log[0].roll < 50
    assert r3.state["first_matched_turn"] == {"coast": {"1": 3}}
    # Turn 4 without the keyword: @@keep matches, and turn 4's own roll decides.
    t4_pass = first_turn_id("coast", 1, lambda u: u < 50, prefix="turn4")
    t4_fail = first_turn_id("coast", 1, lambda u: u >= 50, prefix="turn4")
    r4 = eng.run(turn(4, keyword=False), turn_id=t4_pass, state=r3.state)
    assert r4.log[0].matched_by == "keep" and r4.log[0].outcome == "inserted"
    r4b = eng.run(turn(4, keyword=False), turn_id=t4_fail, state=r3.state)
    assert r4b.log[0].matched_by == "keep" and r4b.log[0].outcome == "probability_failed"


def test_17_14_regenerating_the_turn_gives_the_same_roll_and_does_not_count_it_as_earlier():
    eng = engine(lighthouse_book())
    t3 = first_turn_id("coast", 1, lambda u: u < 50)
    r3 = eng.run(turn(3, keyword=True), turn_id=t3)
    again = eng.run(turn(3, keyword=True), turn_id=t3, state=r3.state)
    assert again.log[0].roll == r3.log[0].roll and again.messages == r3.messages
    # The regenerated reply no longer mentions the keyword: turn 3 is not "earlier" than itself.
    swipe = eng.run(turn(3, keyword=False), turn_id=t3, state=r3.state)
    assert swipe.log[0].outcome == "not_matched"


def test_17_14_dont_activate_after_match_never_fires_again():
    content = LIGHTHOUSE.replace("@@keep", "@@dont_activate_after_match")
    eng = engine(lighthouse_book(content))
    t3 = first_turn_id("coast", 1, lambda u: u < 50)
    r3 = eng.run(turn(3, keyword=True), turn_id=t3)
    assert r3.log[0].outcome == "inserted"
    for n in (4, 5, 9):
        later = eng.run(turn(n, keyword=True), turn_id=f"later-{n}", state=r3.state)
        assert later.log[0].outcome == "blocked:dont_activate_after_match"


# -- 17.15 recursion passes -------------------------------------------------------------------

def test_17_15_three_passes_then_stop():
    book = st_book("harbour", [
        {"key": ["anna"], "content": "Anna works at the Blue Bar."},
        {"key": ["blue bar"], "content": "The Blue Bar is by the docks."},
        {"key": ["docks"], "content": "The docks flood at night."},
        {"key": ["night"], "content": "At night the fog rises."},
    ])
    result = engine(book).run(chat("I met Anna"), turn_id="t")
    assert [(r.id, r.outcome, r.pass_number) for r in result.log] == [
        (0, "inserted", 1), (1, "inserted", 2), (2, "inserted", 3), (3, "not_matched", None)]
    assert result.passes == 3


# -- the seed's examples (issue 4) -----------------------------------------------------------

def test_whole_words_keeps_ogon_out_of_ogonka():
    book = cc_book("fire", [{"id": 1, "keys": ["огонь"], "content": "fire lore",
                             "extensions": {"match_whole_words": True}}])
    eng = engine(book)
    assert eng.run(chat("Дай огонька"), turn_id="t").messages == ()
    assert contents(eng.run(chat("Огонь!"), turn_id="t")) == ["fire lore"]


def test_without_whole_words_ogon_matches_inside_ogonka():
    book = cc_book("fire", [{"id": 1, "keys": ["огонь"], "content": "fire lore"}])
    assert contents(engine(book).run(chat("Дай огонька"), turn_id="t")) == ["fire lore"]


def test_a_constant_entry_skips_matching():
    book = st_book("b", [{"constant": True, "key": ["never-said"], "content": "always"},
                         {"constant": True, "content": "no keys at all"}])
    result = engine(book).run(chat("hello"), turn_id="t")
    assert contents(result) == ["always", "no keys at all"]
    assert {r.matched_by for r in result.log} == {"constant"}


def test_a_disabled_entry_never_fires():
    book = cc_book("b", [{"id": 1, "keys": ["dragon"], "content": "x", "enabled": False, "constant": True},
                         {"id": 2, "keys": ["dragon"], "content": "@@activate\ny", "enabled": False}])
    result = engine(book).run(chat("a dragon"), turn_id="t")
    assert outcomes(result) == {1: "disabled", 2: "disabled"} and result.messages == ()


def test_selective_needs_primary_and_secondary():
    book = cc_book("b", [{"id": 1, "keys": ["sword"], "secondary_keys": ["fire", "ice"], "selective": True,
                          "content": "elemental sword"}])
    eng = engine(book)
    assert eng.run(chat("a sword"), turn_id="t").messages == ()
    assert eng.run(chat("fire and ice"), turn_id="t").messages == ()
    assert contents(eng.run(chat("an ice sword"), turn_id="t")) == ["elemental sword"]


def test_two_books_with_budgets_500_and_2000_give_2000():
    a = cc_book("a", [], token_budget=500)
    b = cc_book("b", [], token_budget=2000)
    assert engine(a, b).budget == 2000
    assert engine(b, a).run(chat("x"), turn_id="t").budget == 2000


def test_lower_priority_drops_first():
    entries = [{"id": i, "constant": True, "content": "w " * 40, "priority": p, "insertion_order": 100}
               for i, p in enumerate([3, 9, 1, 5])]
    book = cc_book("b", entries, token_budget=100)        # room for two of the four
    result = engine(book).run(chat("x"), turn_id="t")
    assert outcomes(result) == {0: "dropped_budget", 1: "inserted", 2: "dropped_budget", 3: "inserted"}


def test_larger_order_is_placed_earlier_and_ties_break_by_priority_then_id():
    entries = [
        {"id": 1, "constant": True, "content": "low order", "insertion_order": 1, "priority": 50},
        {"id": 2, "constant": True, "content": "tie, low priority", "insertion_order": 10, "priority": 1},
        {"id": 3, "constant": True, "content": "tie, high priority, id 3", "insertion_order": 10, "priority": 7},
        {"id": 4, "constant": True, "content": "tie, high priority, id 4", "insertion_order": 10, "priority": 7},
        {"id": 5, "constant": True, "content": "high order", "insertion_order": 99, "priority": 0},
    ]
    result = engine(cc_book("b", entries)).run(chat("x"), turn_id="t")
    assert contents(result) == ["high order", "tie, high priority, id 3", "tie, high priority, id 4",
                                "tie, low priority", "low order"]
    assert inserted_ids(result) == [1, 2, 3, 4, 5]
