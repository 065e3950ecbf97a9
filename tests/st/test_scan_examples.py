"""SPEC section 17's worked examples, in the SillyTavern profile and the improved one."""
from __future__ import annotations

import functools

import pytest

from lorescan.formats import book_from_entries
from lorescan.st import BookSource, ChatMessage, Compat, STEngine, STSettings
from lorescan.js.text import js_count_words


def engine(entries, *, compat="sillytavern", rng=0.5, count=js_count_words, **settings):
    settings.setdefault("include_names", False)
    book = book_from_entries("Lore", [dict({"uid": i + 1}, **e) for i, e in enumerate(entries)])
    return STEngine([BookSource(book, ("global",))], STSettings(**settings), compat=compat,
                    count_tokens=count, random=functools.partial(float, rng))


def fired(eng, *newest_first, **kw):
    kw.setdefault("max_context", 100_000)
    msgs = [ChatMessage("U", t) for t in reversed(newest_first)]
    return [a.uid for a in eng.scan(msgs, **kw).activated]


WHOLE_WORDS = [  # key, message, SillyTavern, improved (SPEC 17.1)
    ("огонь", "Дай огонька", True, False),
    ("огонь", "Огонь!", True, True),
    ("king", "not to my liking", False, False),
    ("cat", "caté", True, False),
    ("東京", "東京都", True, True),
    ("東京", "東京Tower", False, True),
    ("red dragon", "shred dragons", True, False),
    ("c++", "I love c++!", True, True),
    ("c++", "c++x", False, False),
]


@pytest.mark.parametrize("key,text,st,improved", WHOLE_WORDS)
def test_whole_word_matching_in_both_profiles(key, text, st, improved):
    for compat, want in (("sillytavern", st), ("improved", improved)):
        e = engine([{"key": [key], "content": "x"}], compat=compat, match_whole_words=True)
        assert (fired(e, text) == [1]) == want, compat


def test_text_order_and_outlets():  # 17.2
    e = engine([{"key": [], "constant": True, "content": "A", "order": 100},
                {"key": [], "constant": True, "content": "B", "order": 100},
                {"key": [], "constant": True, "content": "C", "order": 50},
                {"key": [], "constant": True, "content": "D", "order": 200, "position": 7, "outletName": "o"},
                {"key": [], "constant": True, "content": "E", "order": 10, "position": 7, "outletName": "o"}])
    r = e.scan([ChatMessage("U", "hi")], max_context=1000)
    assert [a.uid for a in r.activated] == [4, 1, 2, 3, 5]
    assert r.world_info_before == "C\nB\nA"
    assert r.placement.outlets == {"o": ["D", "E"]}


@pytest.mark.parametrize("contents,want", [
    ([("12345678", 100, False), ("12345", 90, False), ("", 80, False)], [1]),
    ([("123456789", 100, False)], []),
    ([("aaaa", 100, False), ("bbbbbbbbbb", 90, False), ("cc", 80, True), ("d", 70, False)], [1, 3]),
    ([("aaaaaaa", 100, True), ("bb", 90, False)], [1]),
])
def test_budget_arithmetic_with_a_character_tokenizer(contents, want):  # 17.3
    e = engine([{"key": [], "constant": True, "content": c, "order": o, "ignoreBudget": ib}
                for c, o, ib in contents], count=len, budget_percent=10)
    assert fired(e, "x", max_context=100) == want


def test_budget_rounding_is_half_up():
    assert engine([], budget_percent=25).scan([], max_context=1002).budget == 251
    assert engine([], budget_percent=1).scan([], max_context=40).budget == 1


def test_recursion_examples():  # 17.4
    base = [{"key": ["bessie"], "content": "Bessie is friends with Rufus."},
            {"key": ["rufus"], "content": "Rufus is a dog."}]
    assert fired(engine(base), "I saw Bessie") == [1]
    assert fired(engine(base, recursive=True), "I saw Bessie") == [1, 2]
    assert fired(engine(base, recursive=True, max_recursion_steps=1), "I saw Bessie") == [1]
    prevent = [dict(base[0], preventRecursion=True), base[1]]
    assert fired(engine(prevent, recursive=True), "I saw Bessie") == [1]
    exclude = [base[0], dict(base[1], excludeRecursion=True)]
    assert fired(engine(exclude, recursive=True), "I saw Bessie") == [1]


def test_delay_until_recursion_levels():  # 17.5
    castle = {"key": ["castle"], "content": "c1"}
    moat = {"key": ["moat"], "content": "c2", "delayUntilRecursion": True}
    tower = {"key": ["tower"], "content": "c3", "delayUntilRecursion": 2}
    assert fired(engine([castle, moat], recursive=True), "castle moat") == [1, 2]
    assert fired(engine([castle, moat]), "castle moat") == [1]
    assert fired(engine([castle, moat], recursive=True), "moat") == []
    assert fired(engine([castle, moat, tower]), "castle moat tower") == [1, 2, 3]
    assert fired(engine([castle, moat, tower], recursive=True), "moat tower") == [2, 3]
    chain = [{"key": ["a"], "content": "b"}, {"key": ["b"], "content": "c", "delayUntilRecursion": 2},
             {"key": ["c"], "content": "d", "delayUntilRecursion": 1}]
    assert fired(engine(chain, recursive=True), "a") == [1, 2, 3]


def test_timed_effects_timeline():  # 17.6
    e = engine([{"key": ["dragon"], "content": "x", "sticky": 3, "cooldown": 2, "delay": 2}])
    state = None
    active = []
    for length in range(1, 11):
        msgs = [ChatMessage("U", "dragon")] * length
        r = e.scan(msgs, max_context=1000, timed_effects=state)
        state = r.timed_effects
        active.append(bool(r.activated))
    assert active == [False, True, True, True, False, False, True, True, True, False]


def test_groups_weighted_override_and_multi_group_removal():  # 17.7
    members = [{"key": ["k"], "content": c, "group": "g", "groupWeight": w} for c, w in
               (("1", 100), ("2", 100), ("3", 200))]
    for rng, want in ((0.24, 1), (0.26, 2), (0.50, 2), (0.51, 3)):
        assert fired(engine(members, rng=rng), "k") == [want]
    over = [{"key": ["k"], "content": "A", "group": "g", "order": 10},
            {"key": ["k"], "content": "B", "group": "g", "order": 5, "groupOverride": True},
            {"key": ["k"], "content": "C", "group": "g", "order": 50, "groupOverride": True}]
    assert fired(engine(over), "k") == [3]
    multi = [{"key": ["k"], "content": "1", "group": "g1,g2"},
             {"key": ["k"], "content": "2", "group": "g1", "groupOverride": True},
             {"key": ["k"], "content": "3", "group": "g2", "groupOverride": True},
             {"key": ["k"], "content": "4"}]
    assert sorted(fired(engine(multi), "k")) == [2, 3]
    assert sorted(fired(engine(multi, compat="improved"), "k")) == [2, 3, 4]


def test_group_already_activated_in_both_profiles():  # 17.7
    ents = [{"key": ["x"], "content": "y", "group": "g,h"},
            {"key": ["y"], "content": "2", "group": "g"}, {"key": ["y"], "content": "3", "group": "g"}]
    st = fired(engine(ents, recursive=True), "x")
    assert st[0] == 1 and len(st) == 2          # SillyTavern: a roll between 2 and 3
    assert fired(engine(ents, recursive=True, compat="improved"), "x") == [1]


def test_group_scoring():  # 17.7
    ents = [{"key": ["song", "sing", "black cat"], "content": "1", "group": "g"},
            {"key": ["song", "sing", "ghosts"], "content": "2", "group": "g"}]
    assert fired(engine(ents, use_group_scoring=True), "sing me a song about ghosts") == [2]


def test_min_activations():  # 17.8
    msgs = ("new", "mid", "mid2", "old thing", "older thing")
    ents = [{"key": ["old"], "content": "1"}, {"key": ["older"], "content": "2"}]
    assert fired(engine(ents), *msgs) == []
    assert fired(engine(ents, min_activations=1), *msgs) == [1]
    assert sorted(fired(engine(ents, min_activations=2), *msgs)) == [1, 2]
    assert fired(engine(ents, min_activations=2, min_activations_depth_max=3), *msgs) == [1]


def test_prevent_recursion_budget_accounting_in_both_profiles():  # 17.9
    ents = [{"key": ["x"], "content": "aaaaaaaa", "preventRecursion": True},
            {"key": ["x"], "content": "y"}, {"key": ["y"], "content": "cccccc"}]
    kw = dict(count=len, recursive=True, budget_percent=12)
    assert fired(engine(ents, **kw), "x", max_context=100) == [1, 2, 3]
    improved = Compat(budget_accounting="all_admitted")
    assert fired(engine(ents, compat=improved, **kw), "x", max_context=100) == [1, 2]


@pytest.mark.parametrize("content,fires,text", [
    ("@@activate", True, "@@activate"),
    ("@@activate\nhello", True, "hello"),
    ("@@activate foo\nbar", False, None),
    ("@@xyz\n@@@activate\nfb", True, "fb"),
    ("@@@activate\nno", False, None),
])
def test_decorators_sillytavern(content, fires, text):  # 17.10
    r = engine([{"key": [], "content": content}]).scan([ChatMessage("U", "k")], max_context=1000)
    assert bool(r.activated) == fires
    if fires:
        assert r.world_info_before == text


def test_decorators_strict_lines():  # 16.6
    strict = Compat(decorators="strict_lines")
    r = engine([{"key": [], "content": "@@activate"}], compat=strict).scan([ChatMessage("U", "k")],
                                                                         max_context=1000)
    assert [a.uid for a in r.activated] == [1] and r.world_info_before == ""
    r = engine([{"key": [], "content": "@@activate \r\nx"}], compat=strict).scan([ChatMessage("U", "k")],
                                                                               max_context=1000)
    assert r.world_info_before == "x"


def test_constant_with_dont_activate_never_fires():
    assert fired(engine([{"key": [], "constant": True, "content": "@@dont_activate\nzz"}]), "k") == []


def test_whitespace_only_keys():  # 5.2.3 and 16.4
    e = [{"key": ["   "], "content": "x"}]
    assert fired(engine(e), "anything") == [1]
    assert fired(engine(e, scan_depth=0), "anything") == [1]
    assert fired(engine(e, compat="improved"), "anything") == []


@pytest.mark.parametrize("key,name,text,want", [
    ("/\\x01Bob:/", "Bob", "hi", True), ("/^dragon/", None, "dragon", False),
    ("/^\\x01dragon/", None, "dragon", True), ("/dragon/y", None, "dragon", False),
    ("/dra+gon/i", None, "DRAAGON", True), ("/dra+gon/", None, "DRAAGON", False),
    ("/a/b/", None, "x /a/b/ y", True), ("/[/", None, "x /[/ y", True),
])
def test_regex_keys(key, name, text, want):  # 17.11 ("Bob: hi" with names included, else without)
    e = engine([{"key": [key], "content": "x"}], include_names=name is not None)
    r = e.scan([ChatMessage(name or "U", text)], max_context=1000)
    assert bool(r.activated) == want


def test_authors_note_assembly():  # 17.12
    ents = [{"key": [], "constant": True, "content": "T1", "position": 2, "order": 5},
            {"key": [], "constant": True, "content": "T2", "position": 2, "order": 1},
            {"key": [], "constant": True, "content": "B1", "position": 3}]
    r = engine(ents).scan([ChatMessage("U", "x")], max_context=1000, authors_note="AN TEXT")
    assert r.placement.authors_note == "T2\nT1\nAN TEXT\nB1"
    only_b = engine([ents[2]]).scan([ChatMessage("U", "x")], max_context=1000, authors_note="")
    assert only_b.placement.authors_note == "\nB1"
    only_t = engine([ents[0]]).scan([ChatMessage("U", "x")], max_context=1000, authors_note="")
    assert only_t.placement.authors_note == "T1\n"
    none = engine(ents).scan([ChatMessage("U", "x")], max_context=1000)
    assert none.placement.authors_note is None


def test_forced_entries_activate_and_sort_before_other_new_entries():
    e = engine([{"key": ["k"], "content": "A", "order": 100}, {"key": ["zz"], "content": "B", "order": 10}])
    r = e.scan([ChatMessage("U", "k")], max_context=1000, forced=[("Lore", 2)])
    assert [a.uid for a in r.activated] == [2, 1]
    assert r.explain("Lore", 2).reason == "forced"


def test_post_process_sees_position_and_the_default_depth():
    seen = []

    def post(content, position, depth):
        seen.append((content, position, depth))
        return content.upper()
    book = book_from_entries("Lore", [{"uid": 1, "key": [], "constant": True, "content": "a", "position": 4,
                                       "depth": None}, {"uid": 2, "key": [], "constant": True, "content": "b"}])
    r = STEngine([BookSource(book, ("global",))], post_process=post, count_tokens=js_count_words).scan(
        [ChatMessage("U", "x")], max_context=1000)
    assert sorted(seen) == [("a", 4, 4), ("b", 0, None)]
    assert r.world_info_before == "B" and r.placement.depth[0].entries == ["A"]


def test_a_fractional_scan_depth_below_one_scans_no_message_but_still_the_injects():
    # SillyTavern checks depth <= 0 before slicing: 0.5 slices no message, yet is not "empty".
    e = engine([{"key": ["note"], "content": "x", "scanDepth": 0.5},
                {"key": ["hello"], "content": "y", "scanDepth": 0.5}])
    r = e.scan([ChatMessage("U", "hello")], max_context=1000, injects=["a note"])
    assert [a.uid for a in r.activated] == [1]
    e0 = engine([{"key": ["note"], "content": "x", "scanDepth": 0}])
    assert e0.scan([ChatMessage("U", "hello")], max_context=1000, injects=["a note"]).activated == []
