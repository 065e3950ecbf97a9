"""Running a replay: one code path (shards -> :class:`Replayer` -> rows), three back-ends.

- in process (``workers=1``);
- a local process pool (``workers=N``): each worker reads the shipped books once, in its
  initializer, and keeps its engine warm; tasks carry shards (file names or byte ranges),
  never books or chats;
- Ray (``ray=True`` or an address): the shards become a Ray dataset, a ``map_batches``
  actor pool keeps one warm :class:`Replayer` per actor (the books go once into the object
  store), and Ray writes the Parquet.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import signal
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from ..errors import LorebookError, SettingsError
from ..formats import load
from ..model import Lorebook
from .chats import Shard, iter_shards, read_shard
from .output import Columns, read_rows, schema, to_table
from .pairing import entry_name, pair_versions
from .turns import ReplayJob, Replayer, _ship, check_settings

__all__ = ["replay_batch", "RunInfo"]


@dataclass
class RunInfo:
    """What a replay did: counts, the back-end and the wall time."""

    chats: int = 0
    turns: int = 0
    rows: int = 0
    problems: int = 0
    seconds: float = 0.0
    backend: str = ""
    workers: int = 1

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Progress:
    """Chats and turns done, with a rate, on one rewritten stderr line."""

    def __init__(self, out: TextIO | None) -> None:
        self.out, self.t0, self.last = out, time.perf_counter(), 0.0
        self.chats = self.turns = 0

    def add(self, chats: int, turns: int) -> None:
        self.chats += chats
        self.turns += turns
        now = time.perf_counter()
        if self.out is not None and now - self.last >= 0.5:
            self.last = now
            self.show(now)

    def show(self, now: float | None = None, end: str = "\r") -> None:
        if self.out is None:
            return
        dt = max((now or time.perf_counter()) - self.t0, 1e-9)
        self.out.write(f"replay: {self.chats} chats, {self.turns} turns, {self.turns / dt:,.0f} turns/s{end}")
        self.out.flush()


def _counts(cols: Columns, variants: int) -> tuple[int, int, int]:
    """(chats, turns, problems) in a batch of rows (chats: good and bad ones)."""
    turns = sum(o == "turn" for o in cols.outcome) // variants
    chats = len(set(cols.chat_id))
    problems = sum(o == "problem" for o in cols.outcome)
    return chats, turns, problems


# -- the process pool ----------------------------------------------------------------------
_WORKER: Replayer | None = None


def _init_worker(job: ReplayJob) -> None:
    global _WORKER
    # Ctrl-C reaches the whole process group: the parent stops the run (cancelling what has
    # not started); a worker finishes its current part instead of printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = Replayer(job)


def _submit(pool: ProcessPoolExecutor, fn: Callable[..., Any], *args: Any) -> Any:
    """``pool.submit`` with SIGINT held back in this thread while it runs. A worker that submit
    starts inherits the signal mask, so a Ctrl-C that comes while the worker is still importing
    lorescan (before ``_init_worker`` ignores SIGINT) cannot end it in a traceback; the parent
    gets that Ctrl-C as soon as the mask is restored, so none is lost."""
    if not hasattr(signal, "pthread_sigmask"):          # Windows: no signal masks
        return pool.submit(fn, *args)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return pool.submit(fn, *args)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _work(shard: Shard, part: str) -> tuple[int, int, int, int]:
    assert _WORKER is not None
    cols = _WORKER.replay_items(list(read_shard(shard)))
    return _write_part(cols, part, 2 if _WORKER.compare else 1)


def _write_part(cols: Columns, part: str, variants: int) -> tuple[int, int, int, int]:
    import pyarrow.parquet as pq  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
    # Written beside its final name and renamed: a killed worker leaves a hidden temporary file
    # (the rows reader skips names starting with "."), never a truncated part.
    folder, name = os.path.split(part)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        pq.write_table(to_table(cols), tmp)
        os.replace(tmp, part)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    chats, turns, problems = _counts(cols, variants)
    return chats, turns, len(cols), problems


# -- Ray -------------------------------------------------------------------------------------
class _RayReplayer:
    """A Ray Data actor: one warm Replayer for its whole life."""

    def __init__(self, job: ReplayJob, books_ref: Any) -> None:
        import ray  # import-cost: Ray (the ray extra) loads only for a Ray run
        data = ray.get(books_ref) if isinstance(books_ref, ray.ObjectRef) else books_ref
        fd, path = tempfile.mkstemp(prefix="lorescan-replay-actor-", suffix=".pickle")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            self.replayer = Replayer(dataclasses.replace(job, book_file=path))
        finally:
            os.unlink(path)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
        cols = Columns()
        for text in batch["shard"].to_pylist():
            for item in read_shard(Shard.from_json(text)):
                self.replayer.replay(item, cols)
        if not len(cols):
            return pa.Table.from_pylist([], schema=schema())
        return to_table(cols)


def _run_ray(job: ReplayJob, shards: list[Shard], rows_dir: Path, workers: int, address: str | None) -> None:
    import ray  # import-cost: Ray (the ray extra) loads only for a Ray run
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, log_to_driver=False, include_dashboard=False)
    with open(job.book_file, "rb") as fh:
        books_ref = ray.put(fh.read())
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ds = ray.data.from_items([{"shard": s.to_json()} for s in shards], override_num_blocks=max(1, len(shards)))
    out = ds.map_batches(_RayReplayer, fn_constructor_args=(job, books_ref), batch_size=1,
                         batch_format="pyarrow",
                         compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1)
    out.write_parquet(str(rows_dir))


# -- the entry point -------------------------------------------------------------------------
def replay_batch(books: Sequence[Any], chats: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 mode: str = "sillytavern", settings: Mapping[str, Any] | None = None,
                 compare: Sequence[Any] | None = None, workers: int = 1, ray: bool = False,
                 ray_address: str | None = None, per_shard: int = 16,
                 progress: TextIO | None = None, roles: Sequence[str] = (), character: Any = None,
                 user: str | None = None, seed: int = 0) -> RunInfo:
    """Replay every chat under ``chats`` against ``books`` (paths or loaded ``Lorebook``s)
    and write the rows to the folder ``out`` (see :mod:`lorescan.replay.output`).

    ``compare``: a second version of the books; every turn runs against both. ``workers``:
    processes (1: in process) or, with ``ray``, Ray actors. ``progress``: a stream for the
    progress line (None: quiet). ``roles``: each book's role (default: all global);
    ``character`` (a :class:`~lorescan.st.Character`) and ``user``: for filters and name
    macros; ``seed``: the rolls follow :func:`lorescan.app.inputs.roll_seed`, as ``lorescan
    replay``'s do. Raises :class:`LorebookError` for unreadable books or settings, an ``out``
    that exists and is not an empty folder, or ``chats`` holding no chat; bad chats never raise.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise SettingsError(f"must be a positive integer, got {workers!r}", source="replay", field="workers")
    if isinstance(per_shard, bool) or not isinstance(per_shard, int) or per_shard < 1:
        raise SettingsError(f"must be a positive integer, got {per_shard!r}", source="replay", field="per_shard")
    read: Callable[[str], Lorebook] = load
    if mode == "janitor":         # a raw dynamicLore array is the script's even where it reads as an entry list
        from ..app.janitorscan import read_janitor_lorebook  # import-cost: janitor mode loads only when asked for
        read = read_janitor_lorebook
    loaded = [b if isinstance(b, Lorebook) else read(b) for b in books]
    if not loaded:
        raise SettingsError("at least one book is needed", source="replay", field="books")
    other = None if compare is None else [b if isinstance(b, Lorebook) else load(b) for b in compare]
    out_dir = Path(out)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise LorebookError("the output exists and is not an empty folder", source=str(out))
    if roles and len(roles) != len(loaded):
        raise SettingsError(f"{len(roles)} roles for {len(loaded)} books", source="replay", field="roles")
    shards = list(iter_shards(chats, per_shard))    # raises now for a missing CHATS; shards are small
    if not shards:
        raise LorebookError("no chats here (a folder is searched for .jsonl and .json chats; a file is read as "
                            "JSON lines, one chat per line)", source=str(chats))
    job = ReplayJob(mode, "", dict(settings or {}), tuple(roles), character, user, seed)   # checked before any work
    check_settings(mode, job.settings, loaded)
    out_dir.mkdir(parents=True, exist_ok=True)
    book_file = _ship(loaded, other, directory=str(out_dir))      # in the output, not TMPDIR
    info = RunInfo(workers=workers)
    t0 = time.perf_counter()
    try:
        job = dataclasses.replace(job, book_file=book_file)
        rows_dir = out_dir / "rows"
        rows_dir.mkdir(parents=True, exist_ok=True)
        bar = _Progress(progress)
        variants = 2 if other is not None else 1
        if ray or ray_address:
            info.backend = "ray"
            _run_ray(job, list(shards), rows_dir, workers, ray_address)
            table = read_rows(str(out_dir))
            outcome = table.column("outcome").to_pylist()
            info.rows = table.num_rows
            info.turns = outcome.count("turn") // variants
            info.problems = outcome.count("problem")
            info.chats = len(set(table.column("chat_id").to_pylist()))
            bar.add(info.chats, info.turns)
        elif workers == 1:
            info.backend = "in-process"
            replayer = Replayer(job)
            for i, shard in enumerate(shards):
                cols = replayer.replay_items(list(read_shard(shard)))
                c, t, r, p = _write_part(cols, str(rows_dir / f"part-{i:06d}.parquet"), variants)
                info.chats, info.turns, info.rows, info.problems = (info.chats + c, info.turns + t, info.rows + r,
                                                                    info.problems + p)
                bar.add(c, t)
        else:
            info.backend = "pool"
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(job,)) as pool:
                pending: set = set()
                try:
                    for i, shard in enumerate(shards):
                        pending.add(_submit(pool, _work, shard, str(rows_dir / f"part-{i:06d}.parquet")))
                        if len(pending) >= 2 * workers:            # stream: a bounded number in flight
                            done, pending = wait(pending, return_when=FIRST_COMPLETED)
                            for f in done:
                                _tally(info, bar, f.result())
                    for f in pending:
                        _tally(info, bar, f.result())
                except KeyboardInterrupt:
                    pool.shutdown(wait=True, cancel_futures=True)     # the running parts finish whole
                    raise
        info.seconds = time.perf_counter() - t0
        bar.show(end="\n")
        if not info.chats:
            raise LorebookError("no chats here: every file was skipped (a .json file that is not a chat, such as "
                                "a lorebook, is not one)", source=str(chats))
        names: dict[str, dict[str, str]] = {}
        for b in [*loaded, *(other or [])]:          # a compare-only entry keeps its own book and uid
            per = names.setdefault(b.name, {})
            for e in b.entries:
                per.setdefault(str(e.uid), entry_name(e))
        (out_dir / "run.json").write_text(json.dumps({
            "books": [b.name for b in loaded], "compare": None if other is None else [b.name for b in other],
            "entries": [[b.name, str(e.uid)] for b in loaded for e in b.entries], "names": names,
            "pairing": None if other is None else pair_versions(loaded, other).to_json(),
            "chats": str(chats), "mode": mode, "settings": dict(settings or {}), "roles": list(roles),
            "character": None if character is None else character.name, "user": user, "seed": seed,
            **info.to_json()}, indent=2))
        return info
    finally:
        os.unlink(book_file)


def _tally(info: RunInfo, bar: _Progress, result: tuple[int, int, int, int]) -> None:
    c, t, r, p = result
    info.chats += c
    info.turns += t
    info.rows += r
    info.problems += p
    bar.add(c, t)
