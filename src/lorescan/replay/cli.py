"""``lorescan replay-batch`` and ``lorescan summarize``: arguments in, text out."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from ..errors import LorebookError, SettingsError
from .summary import print_summary, summarize

__all__ = ["add_parsers", "replay_batch_command", "summarize_command"]


def add_parsers(sub: Any, replay_fn: Callable[..., int], summarize_fn: Callable[..., int]) -> None:
    r = sub.add_parser("replay-batch", help="replay many chats against lorebooks, turn by turn, to Parquet")
    r.add_argument("--books", nargs="+", required=True, metavar="BOOK", help="lorebook files (any format)")
    r.add_argument("--chats", required=True, help="a folder of SillyTavern .jsonl chats or one JSON-lines file "
                                                  "with a chat per line")
    r.add_argument("--out", required=True, help="result folder (created; must not exist or be empty)")
    r.add_argument("--mode", choices=("sillytavern", "slot"), default="sillytavern")
    r.add_argument("--settings", help="JSON file: SillyTavern settings (conformance names) plus max_context "
                                      "and compat")
    where = r.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, help="local processes (default 1: in process)")
    where.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="run on Ray (no address: start a local Ray runtime)")
    r.add_argument("--ray-workers", type=int, default=None, help="Ray actors (default: 2)")
    r.add_argument("--compare", nargs="+", metavar="OTHER_BOOK", help="a second version of the books")
    r.add_argument("--summary", action="store_true", help="print the summary when done (and write summary.json)")
    r.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    r.set_defaults(func=replay_fn)
    s = sub.add_parser("summarize", help="summarize a replay-batch result")
    s.add_argument("results", help="the result folder of replay-batch")
    s.add_argument("--json", metavar="FILE", help="write the summary as JSON here (default RESULTS/summary.json)")
    s.add_argument("--top", type=int, default=20, help="entries shown in the table")
    s.set_defaults(func=summarize_fn)


def _settings(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read: {exc.strerror}", source=path) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"not JSON: {exc}", source=path) from exc
    if not isinstance(data, dict):
        raise SettingsError("settings must be a JSON object", source=path)
    return data


def _need(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise LorebookError(f"needs {module}: pip install 'lorescan[{extra}]'", source="replay-batch")


def replay_batch_command(args: argparse.Namespace, *, out: TextIO) -> int:
    from .run import replay_batch  # import-cost: the engines load when the command runs, not for --help
    _need("pyarrow", "replay")
    use_ray = args.ray is not None
    if use_ray:
        _need("ray", "ray")
    info = replay_batch(args.books, args.chats, args.out, mode=args.mode, settings=_settings(args.settings),
                        compare=args.compare, ray=use_ray, ray_address=args.ray or None,
                        workers=(args.ray_workers or 2) if use_ray else args.workers,
                        progress=None if args.no_progress else sys.stderr)
    print(f"{info.chats} chats, {info.turns} turns, {info.rows} rows, {info.problems} problems in "
          f"{info.seconds:.1f} s ({info.backend}, workers: {info.workers}) -> {args.out}", file=out)
    if args.summary:
        _summary(args.out, None, 20, out)
    return 0


def _summary(results: str, json_path: str | None, top: int, out: TextIO) -> None:
    summary = summarize(results)
    target = Path(json_path) if json_path else Path(results) / "summary.json"
    target.write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    print_summary(summary, out, top=top)
    print(f"\nJSON: {target}", file=out)


def summarize_command(args: argparse.Namespace, *, out: TextIO) -> int:
    _need("pyarrow", "replay")
    _summary(args.results, args.json, args.top, out)
    return 0
