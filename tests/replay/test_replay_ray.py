"""replay-batch on a local Ray runtime (``ray.init(num_cpus=2)``) gives the same Parquet
contents as in process and as STEngine.scan by hand. Marked ``ray``: CI runs it as its own
step (``LORESCAN_REQUIRE_RAY=1 python -m pytest -m ray tests/replay/test_replay_ray.py``), where a
missing Ray is a failure, not a skip."""
from __future__ import annotations

import importlib.util
import os

import pytest

from tests.support.replay_data import SETTINGS, by_hand, corpus_chats, make_book, row_list, row_set, synthetic_chats, write_folder

pytestmark = pytest.mark.ray

@pytest.fixture(scope="module")
def ray_runtime():
    # Checked here, not at import: the default run deselects these tests (-m 'not ray'), and a
    # deselected module must not report a skip.
    if os.environ.get("LORESCAN_REQUIRE_RAY") != "1":
        for mod, extra in (("pyarrow", "replay"), ("ray", "ray")):
            if importlib.util.find_spec(mod) is None:
                pytest.skip(f"{mod} is not installed (pip install '.[{extra}]')")
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_equals_in_process_pool_and_by_hand(tmp_path, ray_runtime):
    from lorescan.replay import replay_batch
    from lorescan.replay.output import read_rows
    book = make_book()
    chats = synthetic_chats(220)
    chats.update(corpus_chats())
    folder = write_folder(tmp_path / "chats", chats)
    (folder / "broken.jsonl").write_text('{"user_name": "u"}\n{"name": "A", "mes": \n')
    ray_info = replay_batch([book], folder, tmp_path / "ray", settings=SETTINGS, ray=True, workers=2, per_shard=16)
    assert ray_info.backend == "ray"
    replay_batch([book], folder, tmp_path / "local", settings=SETTINGS)
    replay_batch([book], folder, tmp_path / "pool", settings=SETTINGS, workers=2, per_shard=16)
    ray_rows = row_list(read_rows(str(tmp_path / "ray")))
    assert ray_rows == row_list(read_rows(str(tmp_path / "local")))
    assert ray_rows == row_list(read_rows(str(tmp_path / "pool")))
    good = {r for r in row_set(read_rows(str(tmp_path / "ray"))) if r[5] != "problem"}
    assert good == by_hand(book, chats, {name: f"{name}.jsonl" for name in chats})
    assert ray_info.problems == 1 and ray_info.chats == len(chats) + 1


def test_ray_compare_and_slot_mode_match_in_process(tmp_path, ray_runtime):
    from lorescan.replay import replay_batch
    from lorescan.replay.output import read_rows
    folder = write_folder(tmp_path / "chats", synthetic_chats(40, seed=8))
    other = make_book(variant=1)
    for mode, settings in (("sillytavern", SETTINGS), ("slot", {})):
        replay_batch([make_book()], folder, tmp_path / f"ray-{mode}", mode=mode, settings=settings, compare=[other],
                     ray=True, workers=2, per_shard=5)
        replay_batch([make_book()], folder, tmp_path / f"local-{mode}", mode=mode, settings=settings,
                     compare=[other])
        got = row_list(read_rows(str(tmp_path / f"ray-{mode}")))
        assert got and got == row_list(read_rows(str(tmp_path / f"local-{mode}")))
