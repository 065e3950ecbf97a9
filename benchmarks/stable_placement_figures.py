"""The figures of docs/improved-profile.md#cache-stable: over the corpus chats replayed with three
corpus books (improved profile), the mean share of the placement text unchanged from the previous
turn, without and with ``stable_placement``.

    LORESCAN_SHARED=/work/shared PYTHONPATH=src python benchmarks/stable_placement_figures.py

Each chat is replayed as ``lorescan replay`` replays it (its first ``--max-messages`` messages);
the share of a turn is :attr:`lorescan.replay.single.TurnRecord.stable_share`, averaged over every
turn but each chat's first. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lorescan import load
from lorescan.replay.single import load_chat, replay_chat

BOOKS = ("en-weyland-251.json", "en-chub-world-of-arcanthea.json", "en-monster-hunter-387.json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-messages", type=int, default=200, help="messages of each chat replayed")
    p.add_argument("--mode", choices=("sillytavern", "slot"), default="sillytavern")
    args = p.parse_args(argv)
    shared = os.environ.get("LORESCAN_SHARED")
    if not shared:
        print("set LORESCAN_SHARED to the folder holding corpus/", file=sys.stderr)
        return 2
    corpus = Path(shared) / "corpus"
    chats = sorted((corpus / "chats").glob("*.jsonl"))
    settings = {"compat": "improved"} if args.mode == "sillytavern" else {}
    print("| book | chats | turns | mean share unchanged, option off | option on |")
    print("|---|---|---|---|---|")
    for name in BOOKS:
        book = load(str(corpus / "books" / name))
        shares = []
        for path in chats:
            messages = load_chat(str(path))[:args.max_messages]
            replay = replay_chat([book], messages, mode=args.mode, settings=settings, chat=path.name)
            shares += [t.stable_share for t in replay.turns if t.stable_share is not None]
        off = sum(a for a, _ in shares) / len(shares)
        on = sum(b for _, b in shares) / len(shares)
        print(f"| {name} | {len(chats)} | {len(shares)} | {off:.3f} | {on:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
