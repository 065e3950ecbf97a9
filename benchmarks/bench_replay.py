"""replay-batch throughput (turns per second) on a 10k-entry book: 1 worker (in process),
a 2-worker process pool, and Ray with 2 actors; the scaling efficiency on this machine.

Every run is a whole replay: reading the chats, building each worker's engine from the
shipped book, the turn loop and the Parquet. The ratio asserted is the 2-worker pool
against the in-process run measured in the same session. Short mode (CI) replays a
1k-entry book over a few small chats and asserts only that the pool is not pathological.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SHORT, make_book, make_chat

pytest.importorskip("pyarrow", reason="replay needs pyarrow (pip install '.[replay]')")

from lorescan.replay import replay_batch  # noqa: E402

N_ENTRIES = 1_000 if SHORT else 10_000
N_CHATS, N_MESSAGES = (4, 12) if SHORT else (48, 50)
RUNS = 1 if SHORT else 3
SETTINGS = {"scan_depth": 4, "recursive": True, "match_whole_words": True, "max_context": 8192}
# The machine is shared: what two processes can gain depends on how busy it is right now.
# So the targets are fractions of the parallelism measured in the same session (a CPU-bound
# loop run once, then twice at the same time, in two warm processes): a quiet 2-core
# machine gives about 2, and there the pool target means >= 1.2x one worker.
POOL_SHARE = 0.5        # 2 workers vs 1, as a share of the measured parallelism. Each spawned worker
                        # pays ~2.5 CPU-s (imports, building the 10k-entry engine) against ~5.5 CPU-s
                        # for the whole in-process run, so a 1,200-turn run reaches only 0.58-0.82
                        # of the parallelism here; millions of turns would amortise it
RAY_SHARE = 0.15        # Ray with 2 actors vs 1 process: its fixed start-up per run (actors import
                        # lorescan and build the engine: 5-10 s here, reported as ray_fixed_s) and
                        # per-task cost dominate a 1,200-turn run (measured 0.36-0.38x one process),
                        # so this guards against breakage (e.g. actors serialised), not for speed
SHORT_FLOOR = 0.25      # short mode: setup dominates; only a broken pool fails this


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def measured_parallelism() -> float:
    """Median over 3 tries of 2 * (wall of one loop) / (wall of two loops at once)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    n = 3_000_000
    ratios = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_spin, [1000, 1000]))            # both processes started and warm
        for _ in range(3):
            t = time.perf_counter()
            pool.submit(_spin, n).result()
            one = time.perf_counter() - t
            t = time.perf_counter()
            list(pool.map(_spin, [n, n]))
            ratios.append(2 * one / (time.perf_counter() - t))
    return statistics.median(ratios)


@pytest.fixture(scope="module")
def workload():
    book = make_book(N_ENTRIES)
    root = Path(tempfile.mkdtemp(prefix="lorescan-bench-replay-"))
    with open(root / "chats.jsonl", "w", encoding="utf-8") as fh:
        for c in range(N_CHATS):
            msgs = make_chat(book, N_MESSAGES, seed=100 + c)
            fh.write(json.dumps({"id": f"chat-{c}", "messages": [
                {"role": "user" if i % 2 else "assistant", "content": m} for i, m in enumerate(msgs)]}) + "\n")
    yield book, root
    shutil.rmtree(root, ignore_errors=True)


def _replay(book, root: Path, **kw):
    out = Path(tempfile.mkdtemp(dir=root)) / "out"
    cpu = time.process_time()
    info = replay_batch([book], root / "chats.jsonl", out, settings=SETTINGS, per_shard=2, **kw)
    cpu = time.process_time() - cpu          # this process only: the in-process run's whole cost
    parquet = sum(p.stat().st_size for p in (out / "rows").iterdir())
    shutil.rmtree(out.parent)
    return info, parquet, cpu


def _paired(benchmark, baseline_run, run) -> tuple[float, dict, dict]:
    """Time ``run`` with pytest-benchmark, each round right after an untimed-by-the-benchmark
    ``baseline_run`` (timed here): the machine is shared, so only ratios of neighbouring
    runs mean much. Returns the median of the per-round ratios and the last results."""
    base_times: list[float] = []
    got: dict = {}
    base: dict = {}

    def setup():
        t = time.perf_counter()
        base.update(zip(("info", "bytes", "cpu"), baseline_run()))
        base_times.append(time.perf_counter() - t)

    def target():
        got.update(zip(("info", "bytes", "cpu"), run()))

    benchmark.pedantic(target, setup=setup, rounds=RUNS, iterations=1)
    return statistics.median(base_times), base, got


@pytest.mark.benchmark(group="replay")
def bench_replay_two_workers_vs_one(benchmark, workload):
    book, root = workload
    baseline, one, two = _paired(benchmark, lambda: _replay(book, root), lambda: _replay(book, root, workers=2))
    turns = one["info"].turns
    assert turns == two["info"].turns > 0
    if benchmark.disabled:
        return
    ratio = baseline / benchmark.stats.stats.median
    benchmark.extra_info.update(
        turns=turns, turns_per_s_1=round(turns / baseline, 1),
        turns_per_s_2=round(turns / benchmark.stats.stats.median, 1),
        speedup_2_vs_1=round(ratio, 2), scaling_efficiency_2=round(ratio / 2, 2),
        ms_per_turn_1=round(1000 * baseline / turns, 2), parquet_bytes_per_turn=round(one["bytes"] / turns, 1),
        cpus=os.cpu_count(), load_average_1min=round(os.getloadavg()[0], 1),
        cpu_ms_per_turn_1=round(1000 * one["cpu"] / turns, 2))
    if SHORT:
        assert ratio >= SHORT_FLOOR, f"2 workers are only {ratio:.2f}x one worker"
        return
    par = measured_parallelism()
    benchmark.extra_info.update(machine_parallelism=round(par, 2), pool_share_of_parallelism=round(ratio / par, 2))
    assert ratio >= POOL_SHARE * par, (f"2 workers are {ratio:.2f}x one worker, under {POOL_SHARE} of the "
                                       f"machine's measured parallelism {par:.2f}")


@pytest.mark.benchmark(group="replay")
def bench_replay_ray_two_actors_vs_one_worker(benchmark, workload):
    if SHORT:
        pytest.skip("full mode only: Ray's fixed start-up (~15 s here) swamps a short run; "
                    "tests/replay/test_replay_ray.py checks Ray's results")
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (pip install '.[ray]')")
    import ray
    book, root = workload
    t = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t
    try:
        tiny = root / "one-chat"
        tiny.mkdir(exist_ok=True)
        (tiny / "chats.jsonl").write_text((root / "chats.jsonl").read_text().splitlines()[0] + "\n")
        t = time.perf_counter()
        _replay(book, tiny, ray=True, workers=2)
        fixed = time.perf_counter() - t
        baseline, one, got = _paired(benchmark, lambda: _replay(book, root),
                                     lambda: _replay(book, root, ray=True, workers=2))
    finally:
        ray.shutdown()
    turns = one["info"].turns
    assert got["info"].turns == turns > 0
    if benchmark.disabled:
        return
    ratio = baseline / benchmark.stats.stats.median
    benchmark.extra_info.update(turns=turns, turns_per_s_1=round(turns / baseline, 1),
                                turns_per_s_ray=round(turns / benchmark.stats.stats.median, 1),
                                speedup_ray_vs_1=round(ratio, 2), ray_init_s=round(init_s, 1),
                                ray_fixed_s=round(fixed, 1),
                                load_average_1min=round(os.getloadavg()[0], 1))
    par = measured_parallelism()
    benchmark.extra_info.update(machine_parallelism=round(par, 2), ray_share_of_parallelism=round(ratio / par, 2))
    assert ratio >= RAY_SHARE * par, (f"Ray with 2 actors is {ratio:.2f}x one worker, under {RAY_SHARE} of the "
                                      f"machine's measured parallelism {par:.2f}")
