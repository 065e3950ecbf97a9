"""The whole SillyTavern-mode engine on the compiled matcher equals the engine on the naive
reference matcher (which walks every entry with no candidate narrowing), for random books,
settings and multi-turn chats."""
from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from lorescan import ChatScan
from lorescan.formats import book_from_entries
from lorescan.st import BookSource, ChatMessage, STEngine, STSettings
from lorescan.js.text import js_count_words
from tests.support.reference_matcher import ReferenceScanView

WORDS = ["wolf", "Wolf", "moon", "river", "tower", "red", "red fox", "fox", "ash", "wolves", "  ", "огонь", "東京"]
KEYS = WORDS + ["/wo+lf/i", "/^\\x01moon/", "/[/", "{{char}}"]


@st.composite
def entries(draw):
    n = draw(st.integers(1, 7))
    out = []
    for uid in range(n):
        e = {
            "uid": uid,
            "key": draw(st.lists(st.sampled_from(KEYS), max_size=3)),
            "keysecondary": draw(st.lists(st.sampled_from(WORDS), max_size=2)),
            "selective": draw(st.booleans()),
            "selectiveLogic": draw(st.integers(0, 3)),
            "content": " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=4))),
            "constant": draw(st.booleans()) and draw(st.booleans()),
            "disable": draw(st.integers(0, 9)) == 0,
            "order": draw(st.sampled_from([10, 50, 100, 100])),
            "position": draw(st.integers(0, 7)),
            "outletName": draw(st.sampled_from(["", "o"])),
            "group": draw(st.sampled_from(["", "", "g", "h", "g,h", "10"])),
            "groupOverride": draw(st.booleans()) and draw(st.booleans()),
            "groupWeight": draw(st.sampled_from([100, 100, 1, 0])),
            "useGroupScoring": draw(st.sampled_from([None, None, True, False])),
            "useProbability": draw(st.booleans()),
            "probability": draw(st.sampled_from([100, 100, 50, 0])),
            "sticky": draw(st.sampled_from([None, None, 0, 1, 2])),
            "cooldown": draw(st.sampled_from([None, None, 1, 2])),
            "delay": draw(st.sampled_from([None, None, 2])),
            "delayUntilRecursion": draw(st.sampled_from([0, 0, 0, True, 2])),
            "excludeRecursion": draw(st.booleans()) and draw(st.booleans()),
            "preventRecursion": draw(st.booleans()) and draw(st.booleans()),
            "ignoreBudget": draw(st.booleans()) and draw(st.booleans()),
            "scanDepth": draw(st.sampled_from([None, None, None, 0, 1, 3])),
            "caseSensitive": draw(st.sampled_from([None, None, True, False])),
            "matchWholeWords": draw(st.sampled_from([None, None, True, False])),
            "matchScenario": draw(st.booleans()),
        }
        if draw(st.integers(0, 6)) == 0:
            e["content"] = "@@activate\n" + e["content"]
        out.append(e)
    return out


st_settings = st.fixed_dictionaries({
    "scan_depth": st.integers(0, 4),
    "budget_percent": st.sampled_from([1, 5, 25, 100]),
    "min_activations": st.sampled_from([0, 0, 1, 3]),
    "max_recursion_steps": st.sampled_from([0, 0, 1, 2]),
    "recursive": st.booleans(),
    "case_sensitive": st.booleans(),
    "match_whole_words": st.booleans(),
    "use_group_scoring": st.booleans(),
    "include_names": st.booleans(),
})
chats = st.lists(st.lists(st.sampled_from(WORDS + ["x", "the", "Moon!"]), max_size=5).map(" ".join),
                 min_size=1, max_size=5)


@given(entries(), st_settings, chats, st.floats(0, 0.999), st.sampled_from(["sillytavern", "improved"]))
@settings(max_examples=1000, deadline=None)
def test_compiled_and_reference_engines_agree_turn_by_turn(ents, cfg, chat, rng, compat):
    book = book_from_entries("Lore", ents)
    make = functools.partial(STEngine, [BookSource(book, ("global",))], STSettings(**cfg), compat=compat,
                             count_tokens=js_count_words, random=functools.partial(float, rng),
                             substitute=lambda t: t.replace("{{char}}", "wolf"))
    fast, slow = make(), make(_view=ReferenceScanView)
    cache = ChatScan()
    state_f = state_s = None
    for n in range(1, len(chat) + 1):
        msgs = [ChatMessage("User" if i % 2 else "Moon", t) for i, t in enumerate(chat[:n])]
        kw = dict(max_context=200, global_scan_data={"scenario": "a red tower"}, injects=["river ash"])
        got = fast.scan(msgs, timed_effects=state_f, cache=cache, **kw)
        want = slow.scan(msgs, timed_effects=state_s, **kw)
        assert got.to_json() == want.to_json()
        state_f, state_s = got.timed_effects, want.timed_effects


def test_compiled_and_reference_engines_agree_on_real_books_and_chats():
    import json

    from conftest import need_shared
    from lorescan import load
    corpus = need_shared("corpus")
    chat = []
    for line in (corpus / "chats" / "en-rpg-narrator.jsonl").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        if "mes" in m and not m.get("is_system"):
            chat.append(ChatMessage(m.get("name", ""), m["mes"]))
    checked = 0
    for name in ("en-weyland-251.json", "en-monster-hunter-387.json", "en-chub-world-of-arcanthea.json"):
        book = load(str(corpus / "books" / name))
        for compat in ("sillytavern", "improved"):
            cfg = STSettings(scan_depth=8, recursive=True, match_whole_words=compat == "improved",
                             budget_cap=4000, use_group_scoring=True)
            make = functools.partial(STEngine, [BookSource(book, ("global",))], cfg, compat=compat,
                                     count_tokens=js_count_words, random=functools.partial(float, 0.4))
            # the reference's memos: each turn's view asks every key in several windows and passes
            fast, slow = make(), make(_view=functools.partial(ReferenceScanView, memoize=True))
            cache = ChatScan()
            state_f = state_s = None
            for n in range(20, 60, 4):
                got = fast.scan(chat[:n], max_context=16000, timed_effects=state_f, cache=cache)
                want = slow.scan(chat[:n], max_context=16000, timed_effects=state_s)
                assert got.to_json() == want.to_json(), (name, compat, n)
                state_f, state_s = got.timed_effects, want.timed_effects
                checked += bool(got.activated)
    assert checked > 10
