"""Chats and a book for the replay tests, plus an independent by-hand replay to check against.

The book exercises what carries state or chance from turn to turn: sticky and cooldown
entries, probability rolls, an inclusion group, recursion, and a budget small enough that
entries get cut. Chats: synthetic ones (seeded) and slices of the shared corpus chats.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from lorescan import ChatMessage, STEngine
from lorescan.tokens import TiktokenCounter
from lorescan.model import Lorebook, entry_from_fields
from lorescan.st import POSITION_NAMES

SHARED = Path(os.environ.get("LORESCAN_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CORPUS_CHATS = SHARED / "corpus" / "chats"

SETTINGS = {"scan_depth": 4, "recursive": True, "budget_percent": 10, "max_context": 2000}
WORDS = ("sword lantern river market bread harbor storm tower letter candle forest wolf ship crown "
         "rain night fire door 剑 灯 雨 夜 code bug function").split()
FILLER = "the a and of to in was she he it that with for on as at by from they we you but not".split()


def make_book(name: str = "Replay", *, variant: int = 0) -> Lorebook:
    """About 40 entries keyed on WORDS. ``variant`` 1 changes a few entries (for --compare)."""
    rng = random.Random(7)
    entries = []
    for uid, word in enumerate(WORDS):
        others = rng.sample(WORDS, 2)
        fields: dict[str, Any] = {
            "uid": uid, "key": [word], "comment": word,
            "content": f"About the {word}: " + " ".join(rng.choice(FILLER) for _ in range(rng.randint(15, 45)))
                       + f" near the {others[0]}.",
            "order": rng.randint(1, 200), "position": rng.choice((0, 1, 4)), "depth": rng.randint(0, 4),
        }
        if uid % 5 == 1:
            fields.update(useProbability=True, probability=50)
        if uid % 7 == 2:
            fields["sticky"] = 3          # outlives the two messages between turns
        if uid % 7 == 3:
            fields["cooldown"] = 3
        if uid % 9 == 4:
            fields.update(group="weather", groupWeight=rng.randint(10, 90))
        entries.append(entry_from_fields(fields, uid=uid))
    entries.append(entry_from_fields({"uid": 100, "key": [], "constant": True, "comment": "always",
                                      "content": "The world is old and tired."}, uid=100))
    entries.append(entry_from_fields({"uid": 101, "key": ["unobtainium"], "comment": "never",
                                      "content": "Never mentioned."}, uid=101))
    if variant == 1:
        entries = [e for e in entries if e.uid not in (0, 3)]
        entries.append(entry_from_fields({"uid": 102, "key": ["the"], "content": "Everywhere.",
                                          "comment": "everywhere"}, uid=102))
    return Lorebook(name=name, entries=tuple(entries))


def synthetic_chats(n: int, *, seed: int = 11) -> dict[str, list[dict[str, Any]]]:
    """``n`` chats in SillyTavern's message shape, 3-30 messages each, some with system notes."""
    rng = random.Random(seed)
    chats = {}
    for c in range(n):
        msgs: list[dict[str, Any]] = []
        for i in range(rng.randint(3, 30)):
            words = [rng.choice(FILLER) for _ in range(rng.randint(5, 25))]
            for _ in range(rng.choice((0, 1, 1, 2))):
                words.insert(rng.randrange(len(words) + 1), rng.choice(WORDS))
            user = i % 2 == 1
            msgs.append({"name": "User" if user else "Narrator", "is_user": user, "mes": " ".join(words),
                         "send_date": "2025-01-01", "extra": {}})
            if rng.random() < 0.05:
                msgs.append({"name": "System", "is_user": False, "is_system": True, "mes": "a note about the sword"})
        chats[f"syn-{c:04d}"] = msgs
    return chats


def corpus_chats(size: int = 40) -> dict[str, list[dict[str, Any]]]:
    """Slices of ``size`` messages of every corpus chat (empty when the corpus is absent)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not CORPUS_CHATS.is_dir():
        return out
    for path in sorted(CORPUS_CHATS.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
        msgs = [m for m in lines if isinstance(m, dict) and "mes" in m]
        for k in range(0, min(len(msgs), 20 * size), size):
            out[f"{path.stem}-{k // size:03d}"] = msgs[k:k + size]
    return out


def write_folder(root: Path, chats: dict[str, list[dict[str, Any]]]) -> Path:
    """Each chat as a SillyTavern ``.jsonl`` file (a metadata line, then the messages)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, msgs in chats.items():
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"user_name": "User", "character_name": "Narrator", "chat_metadata": {}}) + "\n")
            for m in msgs:
                fh.write(json.dumps(m, ensure_ascii=False) + "\n")
    return root


def write_lines(path: Path, chats: dict[str, list[dict[str, Any]]]) -> Path:
    """One JSON-lines file, a chat per line (``id`` and ``messages``)."""
    with open(path, "w", encoding="utf-8") as fh:
        for name, msgs in chats.items():
            fh.write(json.dumps({"id": name, "messages": msgs}, ensure_ascii=False) + "\n")
    return path


def by_hand(book: Lorebook, chats: dict[str, list[dict[str, Any]]], chat_ids: dict[str, str],
            settings: dict[str, Any] = SETTINGS) -> set[tuple]:
    """Rows of a replay computed directly with ``STEngine.scan``, turn by turn, in the
    rows' column order (chat_id, turn, variant, book, entry, outcome, reason, loop, tokens,
    position, messages): turns numbered 1, 2, …, rolls seeded by the documented rule. ``chat_ids``: chat name -> the id the replay gives it."""
    rng = random.Random()
    st = {k: v for k, v in settings.items() if k != "max_context"}
    engine = STEngine([(book, ("global",))], st, random=rng.random)
    count = TiktokenCounter()
    entries = {e.uid: e for e in book.entries}
    rows = set()
    for name, raw in chats.items():
        cid = chat_ids[name]
        msgs = [ChatMessage(m["name"], m["mes"], m["is_user"]) for m in raw if not m.get("is_system")]
        turns = [i for i in range(1, len(msgs)) if not msgs[i].is_user]
        if msgs and msgs[-1].is_user:
            turns.append(len(msgs))
        state = None
        key = os.path.basename(cid)           # docs/sillytavern-mode.md#cli-seed: the file's name, or the id
        for n, t in enumerate(turns, 1):
            rng.seed(int.from_bytes(hashlib.sha256(f"0\x00{key}\x00{t}".encode()).digest()[:8], "big"))
            res = engine.scan(msgs[:t], max_context=settings["max_context"], timed_effects=state)
            state = res.timed_effects
            total = 0
            for eid, d in res.diagnostics.items():
                if d.outcome == "activated" or d.reason == "budget":
                    e = entries[eid.uid]
                    pos = POSITION_NAMES[e.position] + (f":{e.depth}" if e.position == 4 else "")
                    fired = d.outcome == "activated"
                    tokens = count(e.content)
                    total += tokens if fired else 0
                    rows.add((cid, n, "base", eid.world, str(eid.uid), "fired" if fired else "cut", d.reason, d.loop,
                              tokens, pos, t))
            rows.add((cid, n, "base", "", "", "turn", "", None, total, "", t))
    return rows


def row_set(table, columns=("chat_id", "turn", "variant", "book", "entry", "outcome", "reason", "loop", "tokens",
                            "position", "messages")) -> set[tuple]:
    """The rows of a result table as a set of tuples (order aside)."""
    cols = [table.column(c).to_pylist() for c in columns]
    return set(zip(*cols))


def row_list(table) -> list[tuple]:
    """Every column of every row, sorted: equal lists mean identical contents, order aside."""
    cols = [table.column(c).to_pylist() for c in table.column_names]
    return sorted(zip(*cols), key=repr)
