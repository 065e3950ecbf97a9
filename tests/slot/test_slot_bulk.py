"""The bulk ``SlotEngine.run`` (issue 8) against the per-entry loop it replaced.

``tests.support.slot_reference.ReferenceSlotEngine`` keeps the old request loop verbatim; on
generated pools (every gate, scan depth 0 and mixed depths, ``@@no_recursive_search``,
decorator key lists, regex and invalid ``/…/`` keys, the three ``regex_keys`` readings,
system messages, several books) both must give exactly the same slot, log, notes and state,
turn after turn with a shared ``ChatScan``.
"""
from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tests.support.slot_helpers import cc_book

from lorescan.match.cache import ChatScan
from lorescan.slot import SlotEngine, SlotResult
from lorescan.slot.pool import BookSettings, SlotBook
from lorescan.tokens import count_words
from tests.support.slot_reference import ReferenceSlotEngine

WORDS = ["anna", "bar", "dock", "fog", "moon", "wolf", "Огонь", "港口"]
KEYS = WORDS + ["/fo+g/i", "/^moon$/", "/bad(/", "/an{1,2}a|wol/u", "{{user}}", " ", "/dock/"]
HEADERS = ["@@probability 50", "@@probability 0", "@@keep", "@@dont_activate_after_match", "@@activate",
           "@@dont_activate", "@@ignore_on_max_context", "@@role user", "@@unrecursive", "@@recursive",
           "@@activate_only_every 2", "@@activate_only_after 3", "@@is_greeting", "@@scan_depth 0",
           "@@scan_depth 1", "@@scan_depth 3", "@@no_recursive_search", "@@additional_keys fog, moon",
           "@@exclude_keys wolf", "@@exclude_keys_all anna, bar", "@@match_full_word", "@@match_partial_word",
           "@@order 7", "@@priority 9", "@@disable_ui_prompt system_prompt"]


@st.composite
def pools(draw, max_size: int = 10):
    out = []
    for i in range(draw(st.integers(1, max_size))):
        header = draw(st.lists(st.sampled_from(HEADERS), max_size=3, unique=True))
        body = " ".join(draw(st.lists(st.sampled_from(WORDS + ["lore"] * 4), min_size=0, max_size=8)))
        e = {"id": i, "content": "\n".join(header + [body]), "insertion_order": draw(st.integers(0, 3)),
             "priority": draw(st.integers(0, 3)), "extensions": {}}
        if draw(st.integers(0, 5)) == 0:
            e["constant"] = True
        if draw(st.integers(0, 7)) == 0:
            e["enabled"] = False
        e["keys"] = draw(st.lists(st.sampled_from(KEYS), max_size=3))
        if draw(st.booleans()):
            e["selective"] = True
            e["secondary_keys"] = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2))
            logic = draw(st.sampled_from([None, 0, 1, 2, 3]))
            if logic is not None:
                e["extensions"]["selectiveLogic"] = logic
        use_regex = draw(st.sampled_from([None, True, False]))
        if use_regex is not None:
            e["use_regex"] = use_regex
        if draw(st.booleans()):
            e["extensions"]["match_whole_words"] = True
        out.append(e)
    return out


def _roles(items):
    out, n = [], 0
    for is_system, text in items:
        if is_system:
            out.append(("system", text))
        else:
            out.append(("assistant" if n % 2 == 0 else "user", text))
            n += 1
    return out


texts = st.lists(st.sampled_from(WORDS + ["hello", "the end", "港口的灯", "fooog"]), min_size=1,
                 max_size=4).map(" ".join)
chats = st.lists(st.tuples(st.integers(0, 3).map(lambda n: n == 0), texts), min_size=0, max_size=7).map(_roles)


def comparable(result: SlotResult):
    return (result.messages, tuple(r.to_dict() for r in result.log), result.state, result.notes, result.budget,
            result.tokens_used, result.passes, result.disabled_ui_prompts, result.budget_book,
            result.regex_cutoffs)


def both(books, **kw) -> tuple[SlotEngine, SlotEngine]:
    count = kw.pop("count_tokens", lambda text: 8 * count_words(text))
    return (SlotEngine(books, count_tokens=count, **kw), ReferenceSlotEngine(books, count_tokens=count, **kw))


@settings(max_examples=400, deadline=None)
@given(first=pools(), second=pools(max_size=4), depths=st.tuples(st.integers(0, 4), st.integers(0, 4)),
       recursive=st.tuples(st.booleans(), st.booleans()), mode=st.sampled_from(["form", "strict", "auto"]),
       chat=chats, turn=st.integers(0, 9), state_turn=st.integers(0, 6), substitute=st.booleans())
def test_bulk_run_equals_the_per_entry_loop(first, second, depths, recursive, mode, chat, turn, state_turn,
                                           substitute):
    books = [SlotBook(cc_book(f"b{n}", pool), settings=BookSettings(scan_depth=d, token_budget=120 + 40 * n,
                                                                    recursive_scanning=rec))
             for n, (pool, d, rec) in enumerate(zip((first, second), depths, recursive))]
    hook = (lambda text: text.replace("{{user}}", "anna")) if substitute else None
    fast, slow = both(books, regex_keys=mode, substitute=hook)
    state = {"first_matched": {"b0": {str(i): state_turn for i in range(0, len(first), 2)}}}
    a = fast.run(chat, turn_id=turn, state=state)
    b = slow.run(chat, turn_id=turn, state=state)
    assert comparable(a) == comparable(b)


def test_bulk_run_equals_the_per_entry_loop_turn_after_turn_on_a_larger_book():
    """300 entries that name each other (recursion), a 40-message chat with system notes, a
    shared ChatScan per engine, the state carried from turn to turn."""
    rng = random.Random(8)
    names = [f"{rng.choice(['ka', 'lo', 'mi', 'ru'])}{rng.choice(['th', 'nd', 'r'])}{i}" for i in range(300)]
    pool = []
    for i, name in enumerate(names):
        header = rng.sample(HEADERS, rng.choice([0, 0, 0, 1, 2]))
        mentions = " ".join(rng.sample(names, 2)) if rng.random() < 0.3 else "quiet"
        pool.append({"id": i, "keys": [name] + ([f"/{name[:2]}x?{name[2:]}/i"] if i % 17 == 0 else []),
                     "content": "\n".join(header + [f"{name} knows {mentions}."]),
                     "insertion_order": rng.randint(0, 9), "priority": rng.randint(0, 9)})
    book = SlotBook(cc_book("big", pool), settings=BookSettings(scan_depth=6, token_budget=4000))
    fast, slow = both([book])
    fast_cache, slow_cache = ChatScan(), ChatScan()
    chat: list[tuple[str, str]] = []
    fast_state = slow_state = None
    details = set()
    for t in range(40):
        role = "system" if t % 9 == 4 else ("user" if t % 2 else "assistant")
        chat.append((role, " ".join(rng.sample(names, 2) + ["walks", "by"])))
        a = fast.run(chat, turn_id=f"c:{t}", state=fast_state, cache=fast_cache)
        b = slow.run(chat, turn_id=f"c:{t}", state=slow_state, cache=slow_cache)
        assert comparable(a) == comparable(b), f"turn {t}"
        fast_state, slow_state = a.state, b.state
        details.update(r.detail for r in a.log)
    # the workload reaches the paths the rewrite changed: recursion, system-message explanations
    assert any(r.outcome == "inserted" for r in a.log) and any(r.pass_number == 2 for r in a.log)
    assert {"system_message_only", "recursion_only"} <= details


@settings(max_examples=200, deadline=None)
@given(pool=pools(), mode=st.sampled_from(["form", "strict", "auto"]))
def test_the_pools_key_specs_compile_to_the_tables_its_st_shaped_entries_did(pool, mode):
    """The engine hands match/ its own key specs (no SillyTavern entries). Without literal keys
    (``use_regex: false`` under ``strict``, which SillyTavern entries cannot express) they must
    compile to the tables the SillyTavern-shaped entries it used to derive compiled to (keys in
    the order the plans' slots index), so every match is unchanged."""
    from lorescan.formats.sillytavern import book_from_entries
    from lorescan.st.compiled import compile_book
    from lorescan.slot.plans import plan_keys
    engine = SlotEngine([cc_book("b", pool)], count_tokens=len, regex_keys=mode)
    derived = []
    for e in engine.pool:
        _plan, spec = plan_keys(e, engine.regex_keys)
        assume(not spec.literal)
        derived.append({"uid": e.pool_index, "key": list(spec.primary), "keysecondary": list(spec.secondary),
                        "content": e.content, "comment": e.name, "selective": True,
                        "caseSensitive": e.case_sensitive, "matchWholeWords": e.whole_words})
    old = compile_book(book_from_entries("lorebook slot pool", derived), engine.match_options).keys
    new = engine.compiled
    assert len(new) == len(new.plans) == len(engine.pool)
    for name in ("specs", "plans", "plans_sub", "vid_entries", "content_hits"):
        assert list(getattr(new, name)) == list(getattr(old, name)), name
    for name in ("always", "always_sub", "macro_keys", "chunk_union_exact", "regex_lits", "regex_hazards",
                 "regex_line_local"):
        assert getattr(new, name) == getattr(old, name), name
    assert [(rx.source, rx.flags) for rx in new.regexes] == [(rx.source, rx.flags) for rx in old.regexes]


def test_a_fresh_engine_shared_by_threads_gives_the_serial_results():
    """The idle log records and the compiled plans are built on first use; threads racing
    for them on a fresh engine must see the same results as a serial loop."""
    from concurrent.futures import ThreadPoolExecutor
    rng = random.Random(3)
    words = [f"w{i}" for i in range(120)]
    pool = [{"id": i, "keys": [w], "content": f"{w} meets {rng.choice(words)}", "insertion_order": i % 7}
            for i, w in enumerate(words)]
    chats = [[("user", " ".join(rng.sample(words, 3)))] for _ in range(16)]

    def engine() -> SlotEngine:
        return SlotEngine([SlotBook(cc_book("t", pool), settings=BookSettings(token_budget=2000))],
                          count_tokens=count_words)
    serial_engine = engine()
    serial = [comparable(serial_engine.run(c, turn_id=n)) for n, c in enumerate(chats)]
    shared = engine()
    threaded = list(ThreadPoolExecutor(8).map(lambda n: comparable(shared.run(chats[n], turn_id=n)),
                                              range(len(chats))))
    assert threaded == serial
    assert any(r.outcome == "inserted" and r.pass_number == 2 for r in shared.run(chats[0], turn_id=0).log)
