"""``lorescan compile``: one book to one ``.lsc`` file, or a catalogue (files and folders) into a folder.

A catalogue is compiled on ``--jobs`` processes. Each worker pays the import of the readers and
the compiler once (they are imported before the pool forks, so a forked worker pays nothing) and
then compiles its share of the books; the per-book work is reading, compiling and encoding. A
bad book is one line on stderr (the file and the reason) and is skipped; the exit status is 1
when any book was skipped, 130 when Ctrl-C stopped the run. Every ``.lsc`` is written under a
temporary name in the output folder and renamed into place (``save_compiled``), so a stopped
run leaves whole files only.

Ctrl-C on a pool is a request, never an exception inside the pool: the handler (installed
before the pool forks) only sets a flag, the parent sees it within :data:`_POLL` seconds, says
so on stderr (``stopping: ...``), sets an event the workers check before each book, and lets
the pool finish the way it finishes a whole run (``close``, ``join``). The books in hand are
finished and renamed into place; the rest are left out. Workers ignore SIGINT (a terminal's
Ctrl-C reaches the whole process group). An earlier design raised ``KeyboardInterrupt`` in the
parent and had ``Pool.terminate`` SIGTERM the workers; under load a worker could miss that
signal while waiting for its next task on the lock ``terminate`` holds, and the parent's
``join`` then waited for ever.
"""
from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, TextIO

from ..errors import LorebookError

__all__ = ["BOOK_SUFFIXES", "Job", "compile_command", "plan_jobs"]

BOOK_SUFFIXES = (".json", ".png", ".charx", ".lorebook")   # what a folder's walk takes (files named: any)
_CHUNK = 8          # books handed to a worker at a time: few round trips, an even end
_POLL = 0.05        # seconds between the parent's looks at the Ctrl-C flag while it waits for results
_LEFT_OUT = "\0left out"   # a worker's answer for a book not started because the run was stopped


@dataclass(frozen=True, slots=True)
class Job:
    """One book to compile: where it is read from and where its ``.lsc`` goes."""

    source: str
    target: str


def _walk(folder: str, skip: str) -> Iterator[str]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _same_path(os.path.join(root, d), skip))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(BOOK_SUFFIXES):
                yield os.path.join(root, name)


def _same_path(a: str, b: str) -> bool:
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _target_name(path: str) -> str:
    return os.path.splitext(path)[0] + ".lsc"


def plan_jobs(inputs: list[str], out_dir: str) -> tuple[list[Job], list[tuple[str, str]]]:
    """The books named by ``inputs`` (files, and folders walked for :data:`BOOK_SUFFIXES`, the
    output folder left out) and their targets in ``out_dir``: a file's ``<stem>.lsc``, a folder's
    books under their path inside the folder. Returns the jobs and the problems (source, reason)
    of inputs that cannot be compiled: missing, or a second book with the same target."""
    jobs: list[Job] = []
    problems: list[tuple[str, str]] = []
    taken: dict[str, str] = {}

    def add(source: str, relative: str) -> None:
        target = os.path.join(out_dir, _target_name(relative))
        key = os.path.normcase(os.path.abspath(target))
        if key in taken:
            problems.append((source, f"skipped: {taken[key]} is compiled to the same {target}"))
            return
        taken[key] = source
        jobs.append(Job(source, target))

    for item in inputs:
        if os.path.isdir(item):
            for path in _walk(item, out_dir):
                add(path, os.path.relpath(path, item))
        elif os.path.exists(item):
            add(item, os.path.basename(item))
        else:
            problems.append((item, "no such file or folder"))
    return jobs, problems


# -- the worker side ---------------------------------------------------------------------------

_options: Any = None
_force = False
_stop: Any = None     # a pool worker's stop event (set by the parent on Ctrl-C); None in-process


def _init_worker(options: Any, force: bool) -> None:
    global _options, _force
    _options, _force = options, force
    _import_compiler()


def _init_pool_worker(options: Any, force: bool, stop: Any) -> None:
    """A pool worker: Ctrl-C goes to the parent only (it stops the run through ``stop``), and a
    ``terminate`` (SIGTERM: only when the parent itself fails) unwinds the book in hand, so
    ``save_compiled`` removes its temporary file before the exit."""
    global _stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_term)
    _stop = stop
    _init_worker(options, force)


def _exit_on_term(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _import_compiler() -> None:
    from ..st.compiled import compile_book  # noqa: F401 # import-cost: once per process, before any book
    from ..match.lsc import save_compiled  # noqa: F401 # import-cost: as above
    from .inputs import load_book  # noqa: F401 # import-cost: as above


def compile_one(job: Job, options: Any, force: bool) -> str | None:
    """Compile one book to its target; why it failed (one line, after the file's name), or None."""
    from ..st.compiled import compile_book  # import-cost: imported by _import_compiler already
    from ..match.lsc import save_compiled  # import-cost: as above
    from .inputs import load_book  # import-cost: as above
    try:
        if not force and os.path.exists(job.target):
            return f"{job.target} exists; give --force to replace it"
        book, _ = load_book(job.source)
        compiled = compile_book(book, options)
        try:
            os.makedirs(os.path.dirname(job.target) or ".", exist_ok=True)
            save_compiled(compiled, job.target)
        except OSError as exc:
            return f"cannot write {job.target}: {exc.strerror or exc}"
    except LorebookError as exc:
        where = str(exc)
        return where[len(job.source) + 2:] if where.startswith(f"{job.source}: ") or \
            where.startswith(f"{job.source}, ") else where
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    except (RecursionError, MemoryError, OverflowError, ValueError, TypeError) as exc:
        return f"internal error: {type(exc).__name__}: {str(exc)[:200]} (please report it)"
    return None


def _run_job(job: Job) -> tuple[Job, str | None]:
    if _stop is not None and _stop.is_set():
        return job, _LEFT_OUT
    return job, compile_one(job, _options, _force)


def _run_chunk(chunk: list[Job]) -> list[tuple[Job, str | None]]:
    return [_run_job(job) for job in chunk]


# -- the command -------------------------------------------------------------------------------

class _Progress:
    """A one-line bar on a terminal; nothing otherwise (problems are printed either way)."""

    def __init__(self, total: int, err: TextIO) -> None:
        self.total, self.err, self.done, self.failed = total, err, 0, 0
        self.tty = bool(getattr(err, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"
        self.t0 = time.monotonic()
        self._shown = 0.0

    def problem(self, source: str, reason: str) -> None:
        self.failed += 1
        self._clear()
        print(f"lorescan compile: {source}: {reason}", file=self.err)
        self._draw(force=True)

    def step(self) -> None:
        self.done += 1
        self._draw()

    def stopping(self) -> None:
        """Ctrl-C seen: said at once (the books in hand still finish)."""
        self._clear()
        print("lorescan compile: stopping: the books in hand are finished, the others left out",
              file=self.err)
        self.err.flush()
        self._draw(force=True)

    def _clear(self) -> None:
        if self.tty:
            self.err.write("\r\x1b[K")

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.tty or (not force and now - self._shown < 0.1 and self.done < self.total):
            return
        self._shown = now
        width = 30
        filled = width * self.done // max(1, self.total)
        rate = self.done / max(1e-9, now - self.t0)
        failed = f", {self.failed} skipped" if self.failed else ""
        self.err.write(f"\r\x1b[K[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} books"
                       f"{failed} ({rate:.0f}/s)")
        self.err.flush()

    def finish(self, out_dir: str, *, interrupted: bool = False) -> None:
        self._clear()
        elapsed = time.monotonic() - self.t0
        ok = self.done - self.failed
        print(f"lorescan compile: {'interrupted: ' if interrupted else ''}{ok} of {self.total} books compiled "
              f"into {out_dir} in {elapsed:.1f} s" + (f"; {self.failed} skipped" if self.failed else ""),
              file=self.err)


def _jobs_count(value: int | None) -> int:
    if value is None:
        return 1
    return (os.cpu_count() or 1) if value == 0 else value


def catalogue_command(args: argparse.Namespace, options: Any, *, err: TextIO | None = None) -> int:
    """Compile every book ``args.book`` names into the folder ``args.output``."""
    out_dir = args.output
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise LorebookError(f"cannot create the output folder: {exc.strerror or exc}", source=out_dir) from exc
    jobs, problems = plan_jobs(list(args.book), out_dir)
    progress = _Progress(len(jobs) + len(problems), err or sys.stderr)
    for source, reason in problems:
        progress.problem(source, reason)
        progress.step()
    n_jobs = min(_jobs_count(args.jobs), max(1, len(jobs)))
    try:
        _import_compiler()            # before the fork: workers inherit the imported modules
        if n_jobs == 1:
            _init_worker(options, args.force)
            _consume(map(_run_job, jobs), progress)     # Ctrl-C: KeyboardInterrupt, the book's temp removed
            interrupted = False
        else:
            interrupted = _run_pool(jobs, n_jobs, options, args.force, progress)
    except KeyboardInterrupt:     # in-process: save_compiled removed the temporary file in hand
        interrupted = True
    if interrupted and progress.done < progress.total:
        progress.finish(out_dir, interrupted=True)
        return 130
    progress.finish(out_dir)
    return 1 if progress.failed else 0


class _Interrupt:
    """SIGINT as a flag (set by the handler, read by the parent's loop); installed for the pool's
    whole life, from before the fork to after the last worker is joined. A SIGINT that was
    ignored when the command started (a background job) stays ignored."""

    def __init__(self) -> None:
        self.seen = False
        self._old: Any = None
        self._installed = False

    def __enter__(self) -> "_Interrupt":
        if threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGINT)
            if old is not signal.SIG_IGN:
                self._old = signal.signal(signal.SIGINT, self._handle)
                self._installed = True
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.seen = True

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._old)


def _run_pool(jobs: list[Job], n_jobs: int, options: Any, force: bool, progress: _Progress) -> bool:
    """The books on ``n_jobs`` forked workers; whether Ctrl-C stopped the run."""
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    stop = ctx.Event()
    # The parent's objects out of the collector's reach while the workers fork: a worker's
    # collections would otherwise walk (and so copy, page by page) everything it inherited.
    frozen = ctx.get_start_method() == "fork"
    if frozen:
        gc.freeze()
    with _Interrupt() as interrupt:
        try:
            pool = ctx.Pool(n_jobs, initializer=_init_pool_worker, initargs=(options, force, stop))
        finally:
            if frozen:
                gc.unfreeze()
        try:
            # chunks by hand: imap_unordered's own chunking returns a plain generator (no timeout)
            chunks = [jobs[i:i + _CHUNK] for i in range(0, len(jobs), _CHUNK)]
            results = pool.imap_unordered(_run_chunk, chunks)
            stopping = False
            while True:
                if interrupt.seen and not stopping:
                    stopping = True
                    stop.set()          # workers leave out the books they have not started
                    progress.stopping()
                try:
                    answers = results.next(timeout=_POLL)
                except multiprocessing.TimeoutError:
                    continue
                except StopIteration:
                    break
                _consume((a for a in answers if a[1] != _LEFT_OUT), progress)
            pool.close()
            pool.join()                 # every task answered: the workers are leaving on the sentinel
        finally:
            pool.terminate()            # a no-op after join; on an error, stops the workers
    return stopping


def _consume(results: Iterator[tuple[Job, str | None]], progress: _Progress) -> None:
    for job, reason in results:
        if reason is not None:
            progress.problem(job.source, reason)
        progress.step()


def is_catalogue(args: argparse.Namespace) -> bool:
    """Whether the arguments ask for a folder out: several inputs, a folder in, or ``-o`` an
    existing folder or ending in a path separator."""
    out = args.output
    return (len(args.book) > 1 or any(os.path.isdir(b) for b in args.book) or os.path.isdir(out)
            or out.endswith((os.sep, "/")))


def compile_command(args: argparse.Namespace, *, err: TextIO | None = None) -> int:
    """``lorescan compile``: the single-book form (``BOOK -o BOOK.lsc``) or a catalogue."""
    from ..st.settings import Compat  # import-cost: a command loads only what it runs
    options = Compat.of(args.compat).match_options(case_sensitive=args.case_sensitive,
                                                   match_whole_words=args.whole_words)
    if is_catalogue(args):
        return catalogue_command(args, options, err=err)
    from ..st.compiled import compile_book  # import-cost: a command loads only what it runs
    from ..match.lsc import save_compiled  # import-cost: as above
    from .inputs import load_book  # import-cost: as above
    if os.path.exists(args.output) and not args.force:
        raise LorebookError("the output exists; give --force to replace it", source=args.output)
    book, _ = load_book(args.book[0])
    compiled = compile_book(book, options)
    try:
        save_compiled(compiled, args.output)
    except OSError as exc:
        raise LorebookError(f"cannot write: {exc.strerror or exc}", source=args.output) from exc
    return 0
