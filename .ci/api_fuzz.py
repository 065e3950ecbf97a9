"""schemathesis against ``/openapi.json`` of a real ``lorescan serve`` on loopback, with and without a token.

Each run must pass every schemathesis check (no 5xx, every answer's status, content type and body
as the document declares, the token enforced where it is declared), generate at least
``--min-requests`` requests (the two runs at least ``--min-total``), and leave no internal error in
the server's log. A run is bounded in time (``--max-time``), not in requests: schemathesis goes on
generating until then, so the counts scale with the machine's speed. The two runs (each its own
server and schemathesis process) go at the same time unless ``--one-at-a-time``: CI's wall time is
one run's, and each run still has to reach ``--min-requests`` on its share of the machine. Usage (from
the repo root, lorescan and the fuzz extra installed): ``python .ci/api_fuzz.py [--examples N] [--seed S]``.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lorescan.serve.testing import ServerProcess

CONFIG = Path(__file__).resolve().parent / "schemathesis.toml"
TOKEN = "ci-fuzz-token"
_GENERATED = re.compile(r"(\d+) generated")


def fuzz(token: str | None, args: argparse.Namespace, workdir: str) -> int:
    """One schemathesis run; the number of requests it generated. Exits on any failure."""
    label = "with a token" if token else "without a token"
    env = {"LORESCAN_SERVE_TOKEN": token} if token else {}
    books = os.path.join(workdir, "books-token" if token else "books-open")
    with ServerProcess(books, env=env) as srv:
        cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run",
               f"{srv.url}/openapi.json", "--max-examples", str(args.examples),
               "--seed", str(args.seed), "--workers", str(args.workers), "--max-time", str(args.max_time),
               "--phases", args.phases, "--no-color"]
        if token:
            cmd += ["--header", f"Authorization: Bearer {token}"]
        t0 = time.monotonic()
        cwd = os.path.join(workdir, "run-token" if token else "run-open")   # its cache: out of the checkout,
        os.makedirs(cwd)                                                     # and not shared by the two runs
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        elapsed = time.monotonic() - t0
        log = srv.log_text()
    out = run.stdout + run.stderr
    found = _GENERATED.findall(out)
    generated = int(found[-1]) if found else 0
    report = [f"api_fuzz {label}: {generated} requests generated in {elapsed:.1f} s, schemathesis exit {run.returncode}"]
    report += ["    " + line.strip() for line in out.splitlines()        # each phase's time and outcome
               if re.match(r"^ \S+\s+(Examples|Coverage|Fuzzing|Stateful) \(in ", line)]
    print("\n".join(report), flush=True)      # one write: the other run may be printing too
    internal = [line for line in log.splitlines() if '"level": "error"' in line]
    if run.returncode != 0 or internal or generated < args.min_requests:
        print(out[-20000:])
        for line in internal[:5]:
            print("server:", line[:2000])
        why = (f"schemathesis failed (exit {run.returncode})" if run.returncode else
               f"{len(internal)} internal errors in the server log" if internal else
               f"only {generated} requests generated (want {args.min_requests})")
        sys.exit(f"api_fuzz {label}: {why}")
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=15, help="examples per operation and phase")
    parser.add_argument("--seed", type=int, default=20240601)
    # one schemathesis worker thread a run (the two runs still use both cores): with two, its threads'
    # concurrent ast.parse (hypothesis describing a filter's lambda) hits CPython 3.11.2's
    # "AST constructor recursion depth mismatch" SystemError (gh-106905, fixed in 3.11.5; Debian's
    # python3 is 3.11.2), which failed a run at random
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-time", type=int, default=60, help="seconds for one run")
    parser.add_argument("--min-requests", type=int, default=500, help="generated requests a run must reach")
    parser.add_argument("--min-total", type=int, default=1000, help="generated requests both runs must reach")
    parser.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    parser.add_argument("--one-at-a-time", action="store_true", help="the second run after the first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lorescan-fuzz-") as workdir:
        if args.one_at_a_time:
            total = sum(fuzz(token, args, workdir) for token in (TOKEN, None))
        else:
            # a run that fails exits (SystemExit) in its thread; result() raises it here, after both ended
            with ThreadPoolExecutor(max_workers=2) as pool:
                runs = [pool.submit(fuzz, token, args, workdir) for token in (TOKEN, None)]
            total = sum(run.result() for run in runs)
    if total < args.min_total:
        sys.exit(f"api_fuzz: only {total} requests generated in all (want {args.min_total})")
    print(f"api_fuzz: {total} requests in all, no failures")


if __name__ == "__main__":
    main()
