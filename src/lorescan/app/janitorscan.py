"""``lorescan scan --mode janitor`` and ``lorescan explain --mode janitor``: one run of the
JanitorAI script engine (docs/janitor-mode.md) over a chat.

The book is any JanitorAI book :func:`lorescan.formats.load` reads (a ``.js`` script declaring
``dynamicLore``, its JSON, or a raw entry array), run as
:func:`lorescan.formats.janitor.janitor_source` gives it, with the script's ``APPLY_LIMIT`` and
``WINDOW_DEPTH`` as defaults (``--apply-limit`` / ``--window-depth`` override). The chat is read
as for the other modes and handed to the script as ``chat.last_messages`` (``is_bot`` set for the
character's messages) with its ``message_count``; ``--character`` (or the chat's metadata) is
``character.name``; ``--compat improved`` selects the improved profile; ``Math.random`` reads
``random.Random(roll_seed(--seed, chat name, messages))`` (:func:`lorescan.app.inputs.roll_seed`),
so a scan is ``replay``'s turn over the same messages.
"""
from __future__ import annotations

import argparse
import json
import random
from typing import Any, TextIO

from ..errors import FormatError, SettingsError
from ..formats._safety import parse_json
from ..formats.janitor import JanitorSource, is_janitor_script, janitor_source, read_janitor_json
from ..formats.load import load
from ..limits import DEFAULT_LIMITS
from ..model import Lorebook
from ..janitor import JanitorEngine, JanitorResult
from ..janitor.engine import DEFAULT_APPLY_LIMIT, DEFAULT_WINDOW_DEPTH
from .chats import read_chat
from .inputs import chat_key, roll_seed
from .render import Style, one_line

__all__ = ["janitor_scan_command", "janitor_explain_command", "knob_value", "read_janitor_book",
           "read_janitor_lorebook", "janitor_settings"]


def knob_value(text: str | None, default: Any) -> Any:
    """A knob from the command line: JSON when it parses (``6``, ``2.5``, ``null``), else the string."""
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_janitor_book(path: str) -> JanitorSource:
    """The ``dynamicLore`` value and declared knobs of :func:`read_janitor_lorebook`'s book."""
    return janitor_source(read_janitor_lorebook(path))


def read_janitor_lorebook(path: str) -> Lorebook:
    """A JanitorAI book file (``book.format == "janitor"``): a script, its JSON
    (``{"dynamicLore": [...], ...}``), or a raw entry array (read as JanitorAI's even where its
    entries would also pass for a generic entry list). A ``global:`` (or other source) prefix
    is dropped."""
    if path.split(":", 1)[0] in ("global", "character", "persona", "chat"):
        path = path.split(":", 1)[1]
    try:
        with open(path, "rb") as fh:
            raw = fh.read(DEFAULT_LIMITS.max_file_bytes + 1)
    except OSError as exc:
        raise FormatError(f"cannot read the book: {exc.strerror or exc}", source=path) from exc
    if is_janitor_script(raw):
        return load(path)
    doc = parse_json(raw, source=path)
    if isinstance(doc, list) or (isinstance(doc, dict) and "dynamicLore" in doc):
        return read_janitor_json(doc, source=path)
    raise FormatError("a JanitorAI book here is a script declaring dynamicLore, its JSON, or a JSON array of "
                      f"entries (the script's dynamicLore value), not a JSON {type(doc).__name__} without "
                      "dynamicLore", source=path)


def janitor_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``replay``'s and ``replay-batch``'s janitor settings from the flags given (the knobs as
    JSON values, ``compat``); a knob not given is the book's, else the script's default."""
    settings = {k: knob_value(getattr(args, k, None), None) for k in ("apply_limit", "window_depth")
                if getattr(args, k, None) is not None}
    if getattr(args, "compat", None) == "improved":
        settings["compat"] = "improved"
    return settings


def _run(args: argparse.Namespace) -> tuple[JanitorEngine, JanitorResult, str]:
    books = list(getattr(args, "books", None) or [])
    if len(books) != 1:
        raise SettingsError(f"janitor mode runs exactly one book, got {len(books)}", source="command line",
                            field="books")
    path = books[0].split(":", 1)[1] if books[0].split(":", 1)[0] in ("global", "character", "persona", "chat") \
        else books[0]
    if not args.chat:
        raise SettingsError("no chat: give one with --chat CHAT", source="command line", field="--chat")
    chat = read_chat(args.chat)
    source = read_janitor_book(path)
    knobs = {"apply_limit": DEFAULT_APPLY_LIMIT, "window_depth": DEFAULT_WINDOW_DEPTH, **source.knobs()}
    engine = JanitorEngine(source.entries,
                           apply_limit=knob_value(getattr(args, "apply_limit", None), knobs["apply_limit"]),
                           window_depth=knob_value(getattr(args, "window_depth", None), knobs["window_depth"]),
                           profile="improved" if args.compat == "improved" else "script")
    name = args.character if args.character is not None else chat.character_name
    character: dict[str, Any] = {"personality": "", "scenario": ""}
    if name is not None:
        character["name"] = name
    context = {"character": character,
               "chat": {"last_messages": [{"is_bot": not m.is_user, "message": m.text} for m in chat.messages],
                        "message_count": len(chat.messages)}}
    # the rolls of every mode (inputs.roll_seed): the generation after the chat's messages
    rolls = random.Random(roll_seed(args.seed, chat_key(args.chat), len(chat.messages)))
    result = engine.run(context, random=rolls.random)
    return engine, result, path


def _header(engine: JanitorEngine, result: JanitorResult, path: str, out: TextIO, style: Style) -> None:
    t = result.trace
    print(style(f"JanitorAI script ({engine.profile} profile): {path}", "bold"), file=out)
    print(f"  {len(engine.entries)} entries; window depth {t['window_depth']}, APPLY_LIMIT "
          f"{'none' if t['apply_limit'] == 99999 else t['apply_limit']}, message count {t['message_count']}, "
          f"{result.random_calls} random values read", file=out)
    if result.error is not None:
        print(style(f"  the script threw {result.error.name}: {result.error.message}; it writes nothing", "red"),
              file=out)


def janitor_scan_command(args: argparse.Namespace, *, out: TextIO) -> int:
    """What the script applies, in output order, and the texts it appends."""
    engine, result, path = _run(args)
    if args.json:
        data = {"mode": "janitor", "profile": engine.profile, "book": path, "result": result.to_json()}
        json.dump(data, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    style = Style.for_stream(out, args.color)
    _header(engine, result, path, out, style)
    explained = {x.index: x for x in result.explanations()}
    applied = [*(result.trace["selected"] or ()), *result.trace["post_shift"]]
    print(style(f"\nApplied ({len(applied)}):", "bold"), file=out)
    for i in applied:
        print(f"  {style(f'entry[{i}]', 'green')}: {one_line(explained[i].text.split(': ', 1)[-1], 200)}", file=out)
    if args.why:
        print(style("\nNot applied:", "bold"), file=out)
        for i, x in explained.items():
            if i not in applied:
                print(f"  {one_line(x.text, 240)}", file=out)
    for label, text in (("personality", result.personality), ("scenario", result.scenario)):
        if text:
            print(style(f"\n{label}:", "bold"), file=out)
            print("\n".join("  " + line for line in text.split("\n")), file=out)
    return 0


def janitor_explain_command(args: argparse.Namespace, *, out: TextIO) -> int:
    """Every entry (or ``--entry INDEX``): why it applied or not, and its shifts."""
    engine, result, path = _run(args)
    index = None
    if args.entry is not None:
        try:
            index = int(args.entry)
        except ValueError:
            raise SettingsError(f"in janitor mode an entry is its index in the book, not {args.entry!r}",
                                source="command line", field="--entry") from None
        if not 0 <= index < len(engine.entries):
            raise SettingsError(f"no entry {index} in a book of {len(engine.entries)} entries",
                                source="command line", field="--entry")
    if args.json:
        rows = [{"index": x.index, "status": x.status, "stage": x.stage, "reason": x.reason, "text": x.text,
                 "shifts": [{"shift": s.shift, "applied": s.applied, "reason": s.reason, "text": s.text}
                            for s in x.shifts]} for x in result.explanations(index)]
        json.dump({"mode": "janitor", "book": path, "entries": rows,
                   "error": None if result.error is None else result.error.to_json()}, out, ensure_ascii=False,
                  indent=2)
        out.write("\n")
        return 0
    style = Style.for_stream(out, args.color)
    _header(engine, result, path, out, style)
    print(file=out)
    print(result.explain(index), file=out)
    return 0
