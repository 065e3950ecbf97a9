"""SlotEngine with Vector Storage's matching (docs/semantic.md#sem-engine)."""
from __future__ import annotations

from tests.support.slot_helpers import chat, engine, inserted_ids, st_book

from lorescan.semantic.index import VectorSettings
from tests.support.fake_embedder import FakeEmbedder

WATER = "mira fears the lake and the deep river water"


def _book():
    return st_book("lore", [{"key": ["aquaphobia"], "content": WATER, "vectorized": True},
                            {"key": ["throne"], "content": "the iron throne of varn"},
                            {"key": [], "content": "lake water boats", "vectorized": True, "disable": True}])


def test_a_vectorized_entry_is_inserted_by_meaning_and_the_log_says_so():
    fake = FakeEmbedder()
    eng = engine(_book(), semantic=VectorSettings(embedder=fake))
    result = eng.run(chat("hello", "she froze by the lake water"), turn_id="t")
    assert inserted_ids(result) == [0]
    record = next(r for r in result.log if r.id == 0)
    assert record.matched_by == "semantic" and "similarity" in record.reason and "lake water" in record.reason
    assert inserted_ids(eng.run(chat("hello", "a market sold bread"), turn_id="t")) == []
    assert inserted_ids(eng.run(chat("hello", "a market sold bread by the throne"), turn_id="t")) == [1]


def test_without_the_option_or_without_candidates_nothing_is_embedded():
    assert inserted_ids(engine(_book()).run(chat("hello", "she froze by the lake water"), turn_id="t")) == []
    fake = FakeEmbedder()
    eng = engine(st_book("b", [{"key": ["lake"], "content": WATER}]), semantic=VectorSettings(embedder=fake))
    assert inserted_ids(eng.run(chat("hello", "the lake"), turn_id="t")) == [0] and fake.calls == []


def test_the_query_is_the_newest_messages_and_system_messages_are_not_in_it():
    fake = FakeEmbedder()
    eng = engine(_book(), semantic=VectorSettings(embedder=fake, query=1))
    msgs = [("assistant", "hello"), ("user", "the lake water"), ("system", "a market sold bread")]
    assert inserted_ids(eng.run(msgs, turn_id="t")) == [0]
    assert inserted_ids(eng.run(msgs + [("user", "a market sold bread")], turn_id="t")) == []
