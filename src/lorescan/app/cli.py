"""The ``lorescan`` command: arguments in, text out (no logic of its own)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Sequence

from ..errors import LorebookError
from .argtypes import count, finish_subparsers, positive_float, positive_int

__all__ = ["main"]


def _cmd_conformance(args: argparse.Namespace) -> int:
    from .conformance import run_files  # import-cost: a command loads only what it runs
    passed, failed = run_files(args.files, out=sys.stdout, verbose=args.verbose, show_loops=args.loops)
    return 1 if failed or not passed else 0


def _cmd_convert(argv: Sequence[str]) -> int:
    from ..formats.convert import main_convert  # import-cost: a command loads only what it runs
    return main_convert(list(argv))


def _cmd_replay_batch(args: argparse.Namespace) -> int:
    from ..replay.cli import replay_batch_command  # import-cost: loaded with the parsers already
    return replay_batch_command(args, out=sys.stdout)


def _cmd_replay(args: argparse.Namespace) -> int:
    from ..replay.cli import replay_command  # import-cost: loaded with the parsers already
    return replay_command(args, out=sys.stdout, err=sys.stderr)


def _cmd_summarize(args: argparse.Namespace) -> int:
    from ..replay.cli import summarize_command  # import-cost: loaded with the parsers already
    return summarize_command(args, out=sys.stdout)


def _cmd_compile(args: argparse.Namespace) -> int:
    from .compilecmd import compile_command  # import-cost: a command loads only what it runs
    return compile_command(args)


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lorescan", description="Exact, fast lorebook (World Info) engine.")
    p.add_argument("--version", action="version", version=_version_line())
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("conformance", help="run SillyTavern or JanitorAI conformance vector files",
                       description="Run SillyTavern World Info or JanitorAI script conformance vector files through "
                                   "the engine and report every turn that differs from the expected result. Exit "
                                   "status: 0 all passed, 1 a turn failed (or no turn ran), 2 an unreadable file.")
    c.add_argument("files", nargs="+", help="vector files (sillytavern-world-info-conformance or "
                                            "janitor-lorebook-conformance JSON)")
    c.add_argument("-v", "--verbose", action="store_true", help="also list passing turns")
    c.add_argument("--loops", action="store_true", help="show differences in the informative 'loops' field")
    c.set_defaults(func=_cmd_conformance)
    sub.add_parser("convert", help="convert a lorebook between formats (lorescan convert -h)", add_help=False)
    _add_compile_parser(sub)
    _add_scan_parsers(sub)
    _add_serve_parser(sub)
    from ..lint.command import add_parser as add_lint_parser  # import-cost: lint's checks load only for lint
    add_lint_parser(sub)
    # the replay package (its turns, slot mode, numpy) loads with its parsers; pyarrow and Ray when run
    from ..replay.cli import add_parsers, add_replay_parser  # import-cost: as above
    add_parsers(sub, _cmd_replay_batch, _cmd_summarize)
    add_replay_parser(sub, _cmd_replay)
    finish_subparsers(sub)
    return p


def _add_compile_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    k = sub.add_parser("compile", help="compile lorebooks to the compact .lsc form (lorescan.load_compiled)",
                       description="Compile a lorebook once to the compact .lsc form: every command that takes "
                                   "a book (scan, explain, replay, replay-batch, lint) and lorescan.load_compiled "
                                   "read it without compiling again, when the engine uses the same --compat, "
                                   "--case-sensitive and --whole-words. Several books, or folders of books, "
                                   "compile into the folder -o names (BOOK.json to BOOK.lsc; a folder's books "
                                   "under their path in it); a bad book is reported (file and reason, one line) "
                                   "and skipped, and the exit status is then 1.")
    k.add_argument("book", nargs="+", help="lorebook files (any supported format) or folders of them")
    k.add_argument("-o", "--output", required=True,
                   help="the .lsc file to write (one book), or the folder to write into (several books, a "
                        "folder, or a path ending in /)")
    k.add_argument("--jobs", type=count, default=None, metavar="N",
                   help="processes compiling a catalogue (default 1; 0: one per CPU)")
    k.add_argument("--force", action="store_true", help="replace outputs that exist")
    k.add_argument("--compat", choices=("sillytavern", "improved"), default="sillytavern",
                   help="matching rules the engine will use (must match STEngine's compat)")
    k.add_argument("--case-sensitive", action="store_true", help="the engine's case_sensitive setting")
    k.add_argument("--whole-words", action="store_true", help="the engine's match_whole_words setting")
    k.set_defaults(func=_cmd_compile)


def _compile_parser() -> argparse.ArgumentParser:
    """The parser of ``lorescan compile`` alone: the other commands' parsers import their
    modules (replay, slot, numpy), which a compile does not need (most of a one-book run)."""
    p = argparse.ArgumentParser(prog="lorescan", description="Exact, fast lorebook (World Info) engine.")
    sub = p.add_subparsers(dest="command", required=True)
    _add_compile_parser(sub)
    finish_subparsers(sub)
    return p


def _add_serve_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..serve.config import add_serve_arguments  # import-cost: the serve parser's module loads with it
    v = sub.add_parser("serve", help='run the engine as an HTTP service (needs the serve extra: pip install ".[serve]")',
                       description="Serve SillyTavern-mode, slot-mode and JanitorAI scans, explanations and book "
                                   "uploads over HTTP (docs/service.md). Every setting is also a LORESCAN_SERVE_* "
                                   "variable and a key of the --config TOML file; precedence: flag > environment > "
                                   "file > default.")
    add_serve_arguments(v)
    v.set_defaults(func=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..serve.config import resolve_options  # import-cost: the serve command's checks load when it runs
    opts = resolve_options(vars(args), os.environ)       # a bad setting: SettingsError, one line, exit 2
    try:
        from ..serve.app import ServeConfig  # import-cost: a command loads only what it runs
        from ..serve.run import serve  # import-cost: as above
        # found, not imported: the workers import it once PROMETHEUS_MULTIPROC_DIR is set
        if importlib.util.find_spec("prometheus_client") is None:
            raise ModuleNotFoundError(name="prometheus_client")
    except ImportError as exc:
        print(f"lorescan serve: {exc.name or exc} is missing; from a checkout: pip install \".[serve]\" "
              "(lorescan is not on a public package index yet)", file=sys.stderr)
        return 2
    v = opts.values
    config = ServeConfig(books_dir=v["books_dir"], book_cache_mb=v["book_cache_mb"],
                         chat_cache_chats=v["chat_cache_chats"], chat_cache_texts=v["chat_cache_texts"],
                         chat_cache_mb=v["chat_cache_mb"], max_body_mb=v["max_body_mb"],
                         max_inflight_mb=v["max_inflight_mb"],
                         max_upload_mb=v["max_upload_mb"], time_limit=v["time_limit"],
                         upload_time_limit=v["upload_time_limit"], header_timeout=v["header_timeout"],
                         body_timeout=v["body_timeout"], token_file=v["token_file"],
                         engines=v["engines"], access_log=v["access_log"], log_level=v["log_level"],
                         log_format=v["log_format"])
    serve(config, host=v["host"], port=v["port"], workers=v["workers"], settings=opts.describe())
    return 0


def _version_line() -> str:
    from .. import BACKEND, __version__  # import-cost: the kernels load for --version only
    return f"lorescan {__version__} ({BACKEND} kernels)"


def _cmd_scan(args: argparse.Namespace) -> int:
    from .scanfile import scan_command  # import-cost: a command loads only what it runs
    return scan_command(args, out=sys.stdout)


def _cmd_explain(args: argparse.Namespace) -> int:
    from .scanfile import explain_command  # import-cost: a command loads only what it runs
    return explain_command(args, out=sys.stdout)


def _add_scan_parsers(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from .inputs import add_input_arguments  # import-cost: the scan parsers' module loads with them
    s = sub.add_parser("scan", help="scan a chat with lorebooks and print what fires and why",
                       description="Run one generation over the chat and print which entries fire, why, and "
                                   "where they land in the prompt.")
    add_input_arguments(s)
    s.add_argument("--json", action="store_true", help="print the full result as JSON")
    s.add_argument("--why", action="store_true", help="also list every entry that did not fire")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour (auto: on a terminal, unless NO_COLOR is set)")
    s.set_defaults(func=_cmd_scan)
    e = sub.add_parser("explain", help="why each entry fired or not, with near-misses",
                       description="Run one generation over the chat and explain every entry (or --entry): "
                                   "why it fired, or why not, with near-misses (a key beyond the scan depth, "
                                   "inside a longer word, in another case; failed secondary logic).")
    add_input_arguments(e)
    e.add_argument("--entry", metavar="NAME_OR_UID", help="only this entry (uid, BOOK.uid or name)")
    e.add_argument("--json", action="store_true", help="print the explanations as JSON")
    e.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour (auto: on a terminal, unless NO_COLOR is set)")
    e.set_defaults(func=_cmd_explain)


def _closed_pipe() -> int:
    """Output piped into ``head`` and the like was closed early: not an error. Point stdout at
    /dev/null so the interpreter's final flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):    # stdout has no file descriptor (captured): nothing to redirect
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lorescan`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["convert"]:
        try:
            return _cmd_convert(argv[1:])
        except LorebookError as exc:
            print(f"lorescan: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return _closed_pipe()
    parser = _compile_parser() if argv[:1] == ["compile"] else _build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:      # reported against the subcommand's usage, not the top level's list of commands
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        status = args.func(args)
        sys.stdout.flush()        # a reader that has gone shows here, not at interpreter exit (status 120)
        return status
    except LorebookError as exc:
        print(f"lorescan: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _closed_pipe()
    except (RecursionError, MemoryError, OverflowError, ValueError, TypeError) as exc:
        # A bug, or an input no check caught: still one located line, never a traceback
        # (LORESCAN_DEBUG=1 shows it).
        if os.environ.get("LORESCAN_DEBUG") == "1":
            raise
        named = getattr(args, "files", None) or getattr(args, "books", None) or [getattr(args, "book", "")]
        files = ", ".join([*named, *([args.chat] if getattr(args, "chat", None) else [])])
        print(f"lorescan: {files}: internal error: {type(exc).__name__}: {str(exc)[:300]} "
              "(please report it; LORESCAN_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
