"""``lorescan scan BOOK CHAT``: load files, run one SillyTavern-mode generation, print why."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any, TextIO

from ..errors import FormatError
from ..formats import load
from ..formats._safety import parse_json
from ..limits import DEFAULT_LIMITS
from ..st.settings import STSettings
from ..st import BookSource, ChatMessage, STEngine

__all__ = ["load_chat", "scan_files"]

_MAX_CHAT_BYTES = 256 * 1024 * 1024
_CHAT_LIMITS = replace(DEFAULT_LIMITS, max_file_bytes=_MAX_CHAT_BYTES)


def load_chat(path: str) -> list[ChatMessage]:
    """Messages of a chat file, oldest first: SillyTavern ``.jsonl`` (a metadata first line
    and ``is_system`` messages are skipped, as SillyTavern does not scan them) or a JSON
    list of ``{name, mes}`` objects."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_CHAT_BYTES + 1)
    except OSError as exc:
        raise FormatError(f"cannot read chat: {exc.strerror}", source=path) from exc
    if len(raw) > _MAX_CHAT_BYTES:
        raise FormatError(f"chat file is larger than {_MAX_CHAT_BYTES} bytes", source=path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"chat is not UTF-8: {exc}", source=path) from exc
    stripped = text.lstrip()
    items: Any
    if stripped.startswith("["):
        items = parse_json(text, source=path, limits=_CHAT_LIMITS)
    else:
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(parse_json(line, source=path, limits=_CHAT_LIMITS))
                except FormatError as exc:
                    raise FormatError(f"line {n}: {exc.problem}", source=path) from exc
    if not isinstance(items, list):
        raise FormatError(f"a chat must be a list of messages, got {type(items).__name__}", source=path)
    out: list[ChatMessage] = []
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise FormatError(f"a message must be an object, got {type(m).__name__}", source=path, entry=i)
        if "mes" not in m:
            if i == 0:
                continue          # the .jsonl metadata header
            raise FormatError("message has no 'mes' field", source=path, entry=i, field="mes")
        if m.get("is_system"):
            continue
        name, mes = m.get("name", ""), m["mes"]
        if not isinstance(name, str) or not isinstance(mes, str):
            raise FormatError("'name' and 'mes' must be strings", source=path, entry=i, field="mes")
        out.append(ChatMessage(name, mes, bool(m.get("is_user"))))
    return out


def scan_files(args: argparse.Namespace, *, out: TextIO) -> int:
    """Run the ``scan`` subcommand."""
    book = load(args.book)
    messages = load_chat(args.chat)
    settings = STSettings(scan_depth=2 if args.depth is None else args.depth, recursive=args.recursive,
                          match_whole_words=args.whole_words)
    engine = STEngine([BookSource(book, ("global",))], settings, compat=args.compat)
    result = engine.scan(messages, max_context=args.max_context)
    diags = result.diagnostics
    if args.json:
        data = result.to_json()
        data["diagnostics"] = [{"world": d.entry.world, "uid": d.entry.uid, "outcome": d.outcome,
                                "reason": d.reason, "detail": d.detail, "loop": d.loop, "key": d.key,
                                "where": d.where} for d in diags.values()]
        json.dump(data, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    names = {e.uid: (e.comment or (e.key[0] if e.key else "") or f"entry {e.uid}") for e in book.entries}
    print(f"{book.name}: {len(book.entries)} entries, {len(messages)} messages, scan depth "
          f"{settings.scan_depth}, budget {result.budget} tokens", file=out)
    print(f"\nActivated ({len(result.activated)}):", file=out)
    for eid in result.activated:
        d = diags[eid]
        where = f" in {d.where}" if d.where else ""
        print(f"  [{eid.uid}] {names.get(eid.uid, eid.uid)}: {d.detail}{where} (loop {d.loop})", file=out)
    if args.why:
        print("\nNot activated:", file=out)
        for d in diags.values():
            if d.outcome != "activated":
                print(f"  [{d.entry.uid}] {names.get(d.entry.uid, d.entry.uid)}: {d.reason}: {d.detail}", file=out)
    p = result.placement
    print("\nPrompt placement:", file=out)
    for label, text in (("before character", p.before), ("after character", p.after)):
        if text:
            print(f"  {label}:\n" + "\n".join("    " + line for line in text.split("\n")), file=out)
    for g in p.depth:
        print(f"  @depth {g.depth} (role {g.role}):", file=out)
        for c in g.entries:
            print(f"    {c}", file=out)
    if result.budget_overflowed:
        print("\nThe token budget was reached; lower-priority entries were left out.", file=out)
    return 0
