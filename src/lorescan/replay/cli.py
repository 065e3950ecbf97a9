"""``lorescan replay``, ``lorescan replay-batch`` and ``lorescan summarize``: arguments in,
text out."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from ..errors import LorebookError, SettingsError
from .summary import print_summary, summarize

__all__ = ["add_parsers", "add_replay_parser", "replay_batch_command", "replay_command", "summarize_command"]


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


def add_replay_parser(sub: Any, replay_fn: Callable[..., int]) -> None:
    """``lorescan replay BOOK... --chat CHAT [--report FILE]``: every argument of the
    command is declared here."""
    r = sub.add_parser("replay", help="replay one chat turn by turn; a per-turn summary and an HTML report",
                       description="Replay every turn of one chat against lorebooks (timed effects or slot "
                                   "state carried over), print a summary per turn and optionally write a "
                                   "self-contained HTML report.")
    r.add_argument("books", nargs="+", metavar="BOOK", help="lorebook files (any supported format)")
    r.add_argument("--chat", required=True, help="chat file: SillyTavern .jsonl, a JSON list of {name, mes} or "
                                                 "{role, content}, or {\"messages\": [...]}")
    r.add_argument("--report", metavar="FILE", help="write the HTML report here")
    r.add_argument("--compare", nargs="+", metavar="OTHER_BOOK",
                   help="another version of the books: the report gains a compare view")
    r.add_argument("--mode", choices=("sillytavern", "slot"), default="sillytavern",
                   help="engine profile (default: %(default)s)")
    r.add_argument("--seed", type=int, default=0, help="seed for every probability roll (default: %(default)s)")
    r.add_argument("--depth", type=int, default=None, help="SillyTavern scan depth (default 2)")
    r.add_argument("--max-context", type=int, default=None, help="context size for the budget (default 8192)")
    r.add_argument("--settings", help="JSON file: SillyTavern settings (conformance names) plus max_context "
                                      "and compat; --depth and --max-context override it")
    r.set_defaults(func=replay_fn)


def replay_command(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Run ``lorescan replay``: replay, write the report (before printing, so a closed pipe
    cannot cost it), then print one line per turn."""
    from ..formats import load  # import-cost: the command loads what it runs, not at CLI start
    from .progress import ProgressBar  # import-cost: as above
    from .single import load_chat, replay_chat, text_summary  # import-cost: as above
    settings = _settings(args.settings)
    if args.depth is not None:
        settings["scan_depth"] = args.depth
    if args.max_context is not None:
        settings["max_context"] = args.max_context
    if args.mode == "slot" and settings:
        raise SettingsError("slot mode takes no --depth, --max-context or --settings (books carry their own)",
                            source="replay", field=sorted(settings)[0])
    books = [load(path) for path in args.books]
    messages = load_chat(args.chat)
    bar = ProgressBar(err)
    try:
        replay = replay_chat(books, messages, mode=args.mode, settings=settings, seed=args.seed,
                             chat=Path(args.chat).name, on_turn=bar.update)
    finally:
        bar.close()
    other, to_base = None, None
    if args.compare:
        from .pairing import pair_versions  # import-cost: as above
        other_books = [load(path) for path in args.compare]
        other = replay_chat(other_books, messages, mode=args.mode, settings=settings, seed=args.seed,
                            chat=Path(args.chat).name)
        to_base = pair_versions(books, other_books).to_base
    if args.report:
        from .. import __version__  # import-cost: as above
        from .report import render_report  # import-cost: as above
        page = render_report(replay, version=__version__, compare=other, to_base=to_base).encode("utf-8")
        try:
            Path(args.report).write_bytes(page)
        except OSError as exc:
            raise LorebookError(f"cannot write the report: {exc.strerror or exc}", source=args.report) from exc
    for line in text_summary(replay):
        print(line, file=out)
    if other is not None:
        from .report import compare_turns  # import-cost: as above
        differ = compare_turns(replay, other, to_base)
        print(f"compare: {len(differ)} of {len(replay.turns)} turns fire differently"
              + (": turns " + ", ".join(str(d["turn"]) for d in differ[:20]) + (" ..." if len(differ) > 20 else "")
                 if differ else ""), file=out)
    if args.report:
        print(f"report: {args.report}", file=out)
    return 0


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
        raise LorebookError(f"needs {module}: pip install \".[{extra}]\" from a checkout (lorescan is not on a "
                            "public index yet)", source="replay-batch")


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
