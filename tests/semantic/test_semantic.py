"""lorescan.semantic: deterministic scores, the message cache, model loading, the labelled set."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lorescan.errors import SettingsError
from lorescan.semantic import (SCORE_DECIMALS, Embedder, MessageEmbeddings, default_embedder, embed_entries,
                               scores)
from lorescan.semantic import embed as embed_mod
from tests.support.fake_embedder import FakeEmbedder, need_model

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tests" / "data" / "semantic_pairs.json"

_floats = st.floats(-1.0, 1.0, allow_nan=False, width=32)


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows.astype(np.float64), axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32)


@given(q=arrays(np.float32, 8, elements=_floats), m=arrays(np.float32, (5, 8), elements=_floats))
def test_a_score_is_the_exact_dot_product_rounded_to_six_decimals(q, m):
    q, m = _unit(q), _unit(m)
    got = scores(q, m)
    for i in range(m.shape[0]):
        exact = math.fsum(float(a) * float(b) for a, b in zip(q, m[i]))
        assert abs(got[i] - round(exact, SCORE_DECIMALS)) <= 10 ** -SCORE_DECIMALS
        assert got[i] == round(got[i], SCORE_DECIMALS)


@given(q=arrays(np.float32, 16, elements=_floats), m=arrays(np.float32, (6, 16), elements=_floats),
       perm=st.permutations(range(6)))
def test_an_entry_score_does_not_depend_on_the_other_entries_or_their_order(q, m, perm):
    q, m = _unit(q), _unit(m)
    whole = scores(q, m)
    assert scores(q, m[list(perm)]).tolist() == whole[list(perm)].tolist()
    assert [scores(q, m[i:i + 1])[0] for i in range(6)] == whole.tolist()


def test_no_entries_score_nothing():
    assert scores(np.ones(4, np.float32) / 2, np.zeros((0, 4), np.float32)).shape == (0,)


def test_the_fake_embedder_is_an_embedder():
    assert isinstance(FakeEmbedder(), Embedder)


def test_the_message_cache_embeds_each_text_once_per_model_and_forgets_the_oldest():
    fake, other = FakeEmbedder(), FakeEmbedder(name="other")
    cache = MessageEmbeddings(max_texts=2)
    a = cache.get(fake, "the lake")
    assert cache.get(fake, "the lake") is a and fake.calls == [("the lake",)]
    cache.get(other, "the lake")                         # another model: its own row
    assert other.calls == [("the lake",)] and cache.misses == 2
    cache.get(fake, "a sword")                           # evicts (fake, "the lake"), the least recently used
    cache.get(fake, "the lake")
    assert fake.calls == [("the lake",), ("a sword",), ("the lake",)] and len(cache) == 2
    assert not a.flags.writeable


def test_an_embedder_of_the_wrong_shape_is_a_clear_error():
    class Bad(FakeEmbedder):
        def embed(self, texts):
            return super().embed(texts)[:, :3]
    with pytest.raises(SettingsError, match="returned shape"):
        embed_entries(Bad(), ["x"])
    with pytest.raises(SettingsError, match="max_texts"):
        MessageEmbeddings(max_texts=0)


def test_a_missing_model_package_says_which_extra_to_install(monkeypatch):
    monkeypatch.setattr(embed_mod.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SettingsError, match=r"lorescan\[semantic\]"):
        embed_mod.WordLlamaEmbedder()


def test_the_labelled_set_covers_three_languages_with_positives_and_hard_negatives():
    doc = json.loads(PAIRS.read_text(encoding="utf-8"))
    langs = {e["id"]: e["lang"] for e in doc["entries"]}
    assert len(doc["pairs"]) >= 100 and set(langs.values()) == {"en", "ru", "zh"}
    for entry in doc["entries"]:
        mine = [p for p in doc["pairs"] if p["entry"] == entry["id"]]
        kinds = {(p["kind"], p["fire"]) for p in mine}
        assert {("paraphrase", True), ("hard-negative", False), ("negative", False)} <= kinds, entry["id"]
        for p in mine:      # a paraphrase carries no key (a whole word; any substring in Chinese)
            if p["kind"] == "paraphrase":
                text = p["message"].lower()
                assert not any(k.lower() in text if entry["lang"] == "zh" else
                               re.search(rf"(?<!\w){re.escape(k.lower())}(?!\w)", text)
                               for k in entry["keys"]), p["message"]


def test_the_shipped_model_loads_once_and_ranks_the_lake_above_the_sword():
    need_model()
    model = default_embedder()
    assert default_embedder() is model and model.dim == 256
    entry = embed_entries(model, ["Mira is terrified of water since she nearly drowned as a child."])
    lake, sword = (MessageEmbeddings().get(model, t) for t in
                   ("She froze at the edge of the lake.", "The blacksmith sold him a sword."))
    assert scores(lake, entry)[0] > scores(sword, entry)[0]
    assert np.allclose(np.linalg.norm(entry.astype(np.float64), axis=1), 1.0, atol=1e-6)


_SCORE_SCRIPT = """
import json
from lorescan.semantic import MessageEmbeddings, default_embedder, embed_entries, scores
doc = json.load(open({path!r}, encoding="utf-8"))
m = default_embedder()
matrix = embed_entries(m, [e["content"] for e in doc["entries"]])
cache = MessageEmbeddings()
print(json.dumps([scores(cache.get(m, p["message"]), matrix).tolist() for p in doc["pairs"][::7]]))
"""


def test_scores_are_identical_across_processes_and_backends():
    need_model()
    runs = []
    for pure in ("0", "1"):
        env = {**os.environ, "LORESCAN_PURE_PYTHON": pure, "PYTHONPATH": str(ROOT / "src")}
        out = subprocess.run([sys.executable, "-c", _SCORE_SCRIPT.format(path=str(PAIRS))], env=env,
                             capture_output=True, text=True, check=True)
        runs.append(out.stdout)
    assert runs[0] == runs[1] and json.loads(runs[0])
