"""STEngine with Vector Storage's world-info matching (docs/semantic.md#sem-engine)."""
from __future__ import annotations

import functools
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lorescan import BookSource, ChatMessage, STEngine, STSettings
from lorescan.errors import SettingsError
from lorescan.formats import book_from_entries
from lorescan.js.text import js_count_words
from lorescan.semantic.index import VectorSettings
from tests.support.fake_embedder import FakeEmbedder, need_model

ROOT = Path(__file__).resolve().parents[2]
WATER = "mira fears the lake and the deep river water"


def _book(*entries: dict):
    return book_from_entries("lore", [{"uid": i, "key": [], "content": "", **e} for i, e in enumerate(entries)])


def _engine(book, compat="improved", **vector):
    fake = vector.pop("embedder", None) or FakeEmbedder()
    eng = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=2), compat=compat,
                   count_tokens=js_count_words, random=functools.partial(float, 0.5),
                   semantic=VectorSettings(embedder=fake, **vector))
    return eng, fake


def _chat(*texts: str) -> list[ChatMessage]:
    return [ChatMessage("User", t) for t in texts]


def _uids(result) -> list[int]:
    return [e.uid for e in result.activated]


def test_a_vectorized_entry_fires_by_similarity_and_explain_gives_the_score_and_the_messages():
    eng, _ = _engine(_book({"content": WATER, "vectorized": True}, {"content": "the king's iron throne"}))
    result = eng.scan(_chat("hello", "she froze by the lake water"), max_context=4000)
    assert _uids(result) == [0]
    why = result.explain("lore", 0)
    assert why.reason == "semantic" and "similarity 0." in why.detail and "she froze by the lake water" in why.detail
    assert _uids(eng.scan(_chat("a market sold bread"), max_context=4000)) == []


def test_the_sillytavern_profile_ignores_it_and_loads_no_model():
    eng, fake = _engine(_book({"content": WATER, "vectorized": True}), compat="sillytavern")
    assert _uids(eng.scan(_chat("she froze by the lake water"), max_context=4000)) == []
    assert fake.calls == []


def test_only_vectorized_entries_are_candidates_unless_enabled_for_all():
    book = _book({"content": WATER}, {"content": WATER, "vectorized": True, "disable": True})
    eng, fake = _engine(book)
    assert _uids(eng.scan(_chat("the lake water"), max_context=4000)) == [] and fake.calls == []
    eng, _ = _engine(book, enabled_for_all=True)
    assert _uids(eng.scan(_chat("the lake water"), max_context=4000)) == [0]


def test_max_entries_keeps_the_best_scores_and_the_threshold_is_a_floor():
    book = _book({"content": "lake water", "vectorized": True},
                 {"content": "lake water river boat", "vectorized": True},
                 {"content": "lake sword crown throne gold", "vectorized": True})
    eng, _ = _engine(book, max_entries=1, score_threshold=0.1)
    assert _uids(eng.scan(_chat("lake water"), max_context=4000)) == [0]
    eng, _ = _engine(book, max_entries=5, score_threshold=0.1)
    assert sorted(_uids(eng.scan(_chat("lake water"), max_context=4000))) == [0, 1, 2]
    eng, _ = _engine(book, max_entries=5, score_threshold=0.99)
    assert _uids(eng.scan(_chat("lake water"), max_context=4000)) == [0]


def test_the_query_is_the_newest_query_messages_only():
    eng, _ = _engine(_book({"content": WATER, "vectorized": True}), query=1)
    assert _uids(eng.scan(_chat("the lake water", "a market sold bread"), max_context=4000)) == []
    eng, _ = _engine(_book({"content": WATER, "vectorized": True}), query=2)
    assert _uids(eng.scan(_chat("the lake water", "a market sold bread"), max_context=4000)) == [0]


def test_every_other_check_still_applies():
    book = _book({"content": WATER, "vectorized": True, "useProbability": True, "probability": 10},
                 {"content": WATER, "vectorized": True, "triggers": ["continue"]})
    eng, _ = _engine(book)
    result = eng.scan(_chat("the lake water"), max_context=4000)
    assert _uids(result) == []
    assert result.explain("lore", 0).reason == "probability"
    assert result.explain("lore", 1).reason == "trigger"


def test_a_message_is_embedded_once_across_turns():
    eng, fake = _engine(_book({"content": WATER, "vectorized": True}))
    for _ in range(3):
        eng.scan(_chat("she froze by the lake water"), max_context=4000)
    assert fake.calls.count(("she froze by the lake water",)) == 1


def test_the_engine_pickles_with_its_vector_settings():
    eng, _ = _engine(_book({"content": WATER, "vectorized": True}))
    again = pickle.loads(pickle.dumps(eng))
    assert _uids(again.scan(_chat("the lake water"), max_context=4000)) == [0]


def test_bad_vector_settings_are_located_errors():
    with pytest.raises(SettingsError, match="max_entries"):
        VectorSettings(max_entries=0)
    with pytest.raises(SettingsError, match="score_threshold"):
        VectorSettings(score_threshold=2)
    with pytest.raises(SettingsError, match="semantic"):
        STEngine([BookSource(_book({"content": "x"}), ("global",))], semantic={"query": 2})


_NO_MODEL = """
import sys
from lorescan import BookSource, ChatMessage, STEngine
from lorescan.formats import book_from_entries
from lorescan.semantic.index import VectorSettings
book = book_from_entries("b", [{"uid": 0, "key": ["lake"], "content": "water"}])
eng = STEngine([BookSource(book, ("global",))], compat="improved", semantic=VectorSettings())
assert [e.uid for e in eng.scan([ChatMessage("U", "the lake")], max_context=4000).activated] == [0]
print(sorted(m for m in ("wordllama", "safetensors", "tokenizers", "torch") if m in sys.modules))
"""


def test_a_book_without_vectorized_entries_never_imports_the_model():
    out = subprocess.run([sys.executable, "-c", _NO_MODEL], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_the_shipped_model_fires_the_fear_of_water_for_the_lake():
    need_model()
    book = _book({"content": "Mira is terrified of water. She nearly drowned in a river as a child.",
                  "vectorized": True, "key": ["aquaphobia"]},
                 {"content": "King Aldric rules Varn from the iron throne.", "vectorized": True})
    eng = STEngine([BookSource(book, ("global",))], compat="improved", semantic=VectorSettings(score_threshold=0.25))
    assert [e.uid for e in eng.scan(_chat("She froze at the edge of the lake."), max_context=4000).activated] == [0]


def test_entry_embeddings_round_trip_through_lsc_and_the_engine_uses_them(tmp_path):
    import numpy as np
    from lorescan.st.compiled import compile_book, load_compiled
    from lorescan.match.lsc import save_compiled
    from lorescan.semantic.store import embed_book
    book = _book({"content": WATER, "vectorized": True}, {"content": "the iron throne"},
                 {"content": "@@activate\nlake water boats", "vectorized": True})
    eng, _ = _engine(book)
    fake = FakeEmbedder()
    cb = embed_book(compile_book(book, eng.match_options), fake)
    save_compiled(cb, tmp_path / "b.lsc")
    loaded = load_compiled(tmp_path / "b.lsc")
    model, rows, matrix = loaded.embeddings
    assert model == fake.name and rows.tolist() == [0, 2] and matrix.dtype == np.float32
    assert np.array_equal(matrix, fake.embed([WATER, "lake water boats"]))
    assert np.array_equal(matrix, cb.embeddings[2])
    counting = FakeEmbedder()
    eng2 = STEngine([BookSource(loaded, ("global",))], STSettings(scan_depth=2), compat="improved",
                    count_tokens=js_count_words, semantic=VectorSettings(embedder=counting))
    assert counting.calls == []                      # the stored rows were used, nothing re-embedded
    assert 0 in _uids(eng2.scan(_chat("she froze by the lake water"), max_context=4000))
    other = FakeEmbedder(name="another model")
    STEngine([BookSource(loaded, ("global",))], compat="improved", semantic=VectorSettings(embedder=other))
    assert len(other.calls) == 1                     # another model: the contents are embedded again
    assert compile_book(book, eng.match_options).embeddings is None
