"""``lorescan replay``, ``lorescan replay-batch`` and ``lorescan summarize``: arguments in,
text out."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from ..app.argtypes import positive_int
from ..app.inputs import BOOKS_HELP, add_input_arguments, add_setting_arguments
from ..errors import LorebookError, SettingsError
from .summary import print_summary, summarize

__all__ = ["add_parsers", "add_replay_parser", "replay_batch_command", "replay_command", "summarize_command"]


def add_parsers(sub: Any, replay_fn: Callable[..., int], summarize_fn: Callable[..., int]) -> None:
    r = sub.add_parser("replay-batch", help="replay many chats against lorebooks, turn by turn, to Parquet",
                       description="Replay every chat of a folder (SillyTavern .jsonl and JSON chats) or of one "
                                   "JSON-lines file of chats against lorebooks, turn by turn, and write one row "
                                   "per entry that fired or was cut, per turn, as Parquet. The settings, book "
                                   "sources, character and seed are scan's and replay's: the same chat and seed "
                                   "give replay's activations.")
    r.add_argument("--books", nargs="+", required=True, metavar="BOOK", help=BOOKS_HELP)
    r.add_argument("--chats", required=True, help="a folder of SillyTavern .jsonl (or JSON) chats, or one "
                                                  "JSON-lines file with a chat per line")
    r.add_argument("--out", required=True, help="result folder (created; must not exist or be empty)")
    where = r.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=1, help="local processes (1: in process)")
    where.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="run on Ray (no address: start a local Ray runtime)")
    r.add_argument("--ray-workers", type=positive_int, default=None, help="Ray actors (default: 2)")
    r.add_argument("--compare", nargs="+", metavar="OTHER_BOOK", help="a second version of the books")
    r.add_argument("--summary", action="store_true", help="print the summary when done (and write summary.json)")
    r.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_setting_arguments(r)
    r.set_defaults(func=replay_fn)
    s = sub.add_parser("summarize", help="summarize a replay-batch result",
                       description="Summarize a replay-batch result folder: how often each entry fired or was "
                                   "cut by the budget and, for a --compare run, what changed between the "
                                   "versions. Writes the summary as JSON too.")
    s.add_argument("results", help="the result folder of replay-batch")
    s.add_argument("--json", metavar="FILE", help="write the summary as JSON here (default RESULTS/summary.json)")
    s.add_argument("--top", type=positive_int, default=20, help="entries shown in the table")
    s.set_defaults(func=summarize_fn)


def add_replay_parser(sub: Any, replay_fn: Callable[..., int]) -> None:
    """``lorescan replay BOOK... --chat CHAT [--report FILE]``: scan's arguments (books with
    their sources, the chat, character and user, settings, seed) plus the report."""
    r = sub.add_parser("replay", help="replay one chat turn by turn; a per-turn summary and an HTML report",
                       description="Replay every turn of one chat against lorebooks (timed effects or slot "
                                   "state carried over), print a summary per turn and optionally write a "
                                   "self-contained HTML report. Takes scan's settings, book sources, "
                                   "character and seed; replay-batch gives the same activations.")
    add_input_arguments(r)
    r.add_argument("--report", metavar="FILE", help="write the HTML report here")
    r.add_argument("--compare", nargs="+", metavar="OTHER_BOOK",
                   help="another version of the books: the report gains a compare view")
    r.set_defaults(func=replay_fn)


def replay_command(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Run ``lorescan replay``: replay, write the report (before printing, so a closed pipe
    cannot cost it), then print one line per turn."""
    from ..app.inputs import chat_key, read_inputs  # import-cost: the command loads what it runs, not at CLI start
    from .chats import Message  # import-cost: as above
    from .progress import ProgressBar  # import-cost: as above
    from .single import replay_chat, stability_line, text_summary  # import-cost: as above
    if args.mode == "janitor":
        return _replay_janitor(args, out=out, err=err)
    inputs = read_inputs(args)
    chat = inputs.chat
    assert chat is not None
    if not chat.messages:
        raise LorebookError("the chat has no messages to replay", source=chat.path)
    messages = [Message(m.name, m.text, m.is_user, False) for m in chat.messages]
    bar = ProgressBar(err)
    try:
        replay = replay_chat([b.book for b in inputs.books], messages, mode=inputs.mode,
                             settings=inputs.replay_settings(), seed=inputs.seed, chat=chat_key(chat.path),
                             on_turn=bar.update, roles=[b.role for b in inputs.books],
                             character=inputs.character, substitute=inputs.substitute(), numbers=chat.numbers)
    finally:
        bar.close()
    other, to_base = None, None
    if args.compare:
        from ..app.inputs import load_book  # import-cost: as above
        from .pairing import pair_versions  # import-cost: as above
        books = [b.book for b in inputs.books]
        other_books = [load_book(path)[0] for path in args.compare]
        other = replay_chat(other_books, messages, mode=inputs.mode, settings=inputs.replay_settings(),
                            seed=inputs.seed, chat=chat_key(chat.path), roles=[b.role for b in inputs.books],
                            character=inputs.character, substitute=inputs.substitute(), numbers=chat.numbers)
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
    if stability_line(replay) is not None:
        print(stability_line(replay), file=out)
    if other is not None:
        from .report import compare_turns  # import-cost: as above
        differ = compare_turns(replay, other, to_base)
        print(f"compare: {len(differ)} of {len(replay.turns)} turns fire differently"
              + (": turns " + ", ".join(str(d["turn"]) for d in differ[:20]) + (" ..." if len(differ) > 20 else "")
                 if differ else ""), file=out)
    if args.report:
        print(f"report: {args.report}", file=out)
    return 0


def _janitor_books(args: argparse.Namespace, paths: list[str]) -> list[Any]:
    from ..app.janitorscan import read_janitor_lorebook  # import-cost: janitor mode loads only when asked for
    if len(paths) != 1:
        raise SettingsError(f"janitor mode runs exactly one book, got {len(paths)}", source="command line",
                            field="books")
    if args.compare:
        raise SettingsError("janitor mode does not compare book versions yet", source="command line",
                            field="--compare")
    return [read_janitor_lorebook(paths[0])]


def _replay_janitor(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``lorescan replay --mode janitor``: one run of the script per turn (:mod:`.janitor`)."""
    from ..app.chats import read_chat  # import-cost: as in replay_command
    from ..app.inputs import chat_key  # import-cost: as above
    from ..app.janitorscan import janitor_settings  # import-cost: as above
    from ..st import Character  # import-cost: as above
    from .chats import Message  # import-cost: as above
    from .progress import ProgressBar  # import-cost: as above
    from .single import replay_chat, stability_line, text_summary  # import-cost: as above
    paths = list(args.books)
    if args.chat is None:
        if len(paths) < 2:
            raise SettingsError("no chat: give one with --chat CHAT", source="command line", field="--chat")
        args.chat = paths.pop()
    books = _janitor_books(args, paths)
    chat = read_chat(args.chat)
    if not chat.messages:
        raise LorebookError("the chat has no messages to replay", source=chat.path)
    messages = [Message(m.name, m.text, m.is_user, False) for m in chat.messages]
    name = args.character if args.character is not None else chat.character_name
    bar = ProgressBar(err)
    try:
        replay = replay_chat(books, messages, mode="janitor", settings=janitor_settings(args), seed=args.seed,
                             chat=chat_key(chat.path), on_turn=bar.update,
                             character=Character(name) if name is not None else None)
    finally:
        bar.close()
    if args.report:
        from .. import __version__  # import-cost: as above
        from .report import render_report  # import-cost: as above
        page = render_report(replay, version=__version__).encode("utf-8")
        try:
            Path(args.report).write_bytes(page)
        except OSError as exc:
            raise LorebookError(f"cannot write the report: {exc.strerror or exc}", source=args.report) from exc
    for line in text_summary(replay):
        print(line, file=out)
    if args.report:
        print(f"report: {args.report}", file=out)
    return 0


def _need(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise LorebookError(f"needs {module}: pip install \".[{extra}]\" from a checkout (lorescan is not on a "
                            "public index yet)", source="replay-batch")


def replay_batch_command(args: argparse.Namespace, *, out: TextIO) -> int:
    from ..app.inputs import load_book, read_inputs  # import-cost: the engines load when the command runs
    from .run import replay_batch  # import-cost: the engines load when the command runs, not for --help
    _need("pyarrow", "replay")
    use_ray = args.ray is not None
    if use_ray:
        _need("ray", "ray")
    try:
        if args.mode == "janitor":
            from ..app.janitorscan import janitor_settings  # import-cost: janitor mode loads only when asked for
            from ..st import Character  # import-cost: as above
            info = replay_batch(_janitor_books(args, list(args.books)), args.chats, args.out, mode="janitor",
                                settings=janitor_settings(args), ray=use_ray, ray_address=args.ray or None,
                                workers=(args.ray_workers or 2) if use_ray else args.workers,
                                progress=None if args.no_progress else sys.stderr,
                                character=Character(args.character) if args.character is not None else None,
                                seed=args.seed)
        else:
            inputs = read_inputs(args, chat=False)
            compare = (None if args.compare is None
                       else [load_book(p, chat_flag="--chats")[0] for p in args.compare])
            info = replay_batch([b.book for b in inputs.books], args.chats, args.out, mode=inputs.mode,
                                settings=inputs.replay_settings(), compare=compare, ray=use_ray,
                                ray_address=args.ray or None,
                                workers=(args.ray_workers or 2) if use_ray else args.workers,
                                progress=None if args.no_progress else sys.stderr,
                                roles=[b.role for b in inputs.books], character=inputs.character, user=inputs.user,
                                seed=inputs.seed)
    except KeyboardInterrupt:
        print(f"\nlorescan: replay-batch interrupted: {args.out} holds the whole parts written so far and no "
              f"run.json (an unfinished result, which summarize refuses); run again into a new folder",
              file=sys.stderr)
        return 130
    return _batch_done(args, info, out)


def _batch_done(args: argparse.Namespace, info: Any, out: TextIO) -> int:
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
