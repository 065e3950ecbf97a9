"""A book and chats for the replay-report tests (tests/test_report*.py).

The book has an entry whose name is an HTML/script injection, a constant entry, a
probability entry (so the seed matters), an entry too large for the budget (so entries
get cut), and one that never fires.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

XSS_NAME = '</script><img src=x onerror="document.title=\'pwned\'"><b>Lantern & co</b>'
WORDS = ("sword lantern river market bread harbor storm tower letter candle").split()


def book_json() -> dict:
    entries = {}
    for uid, word in enumerate(WORDS):
        entries[str(uid)] = {"uid": uid, "key": [word], "keysecondary": [], "comment": word.title(),
                             "content": f"About the {word}.", "order": 100 - uid, "position": 0,
                             "constant": False, "disable": False, "selective": True, "selectiveLogic": 0}
    entries["1"]["comment"] = XSS_NAME
    entries["1"]["content"] = "<script>alert('content')</script> a lantern"
    entries["6"].update(useProbability=True, probability=50)                   # storm: a roll per turn
    entries["7"]["content"] = "The tower is tall. " * 700                       # tower: larger than the budget
    entries["7"]["order"] = 1
    n = len(WORDS)
    entries[str(n)] = {"uid": n, "key": [], "comment": "Always", "content": "The world is old.",
                       "constant": True, "order": 200, "position": 0}
    entries[str(n + 1)] = {"uid": n + 1, "key": ["unobtainium"], "comment": "Never\nfires",
                           "content": "Never mentioned.", "order": 5, "position": 0}
    return {"name": "Report <Book>", "entries": entries}


def chat_lines(turns: int, *, seed: int = 5) -> list[dict]:
    """A SillyTavern chat (metadata line first) with ``turns`` generations: a greeting,
    then user/character pairs mentioning a few of WORDS each; the last message is the
    user's (one more turn: the reply to come)."""
    rng = random.Random(seed)
    lines: list[dict] = [{"user_name": "Robin", "character_name": "Narrator"},
                         {"name": "Narrator", "is_user": False, "mes": "Welcome to the <harbour>."}]
    for t in range(turns):
        said = " and ".join(rng.sample(WORDS, 2))
        lines.append({"name": "Robin", "is_user": True, "mes": f"I look for the {said}."})
        if t < turns - 1:
            lines.append({"name": "Narrator", "is_user": False, "mes": f"You find nothing <b>yet</b>, {t}."})
    return lines


def write_inputs(folder: Path, turns: int = 12) -> tuple[Path, Path]:
    book = folder / "book.json"
    chat = folder / "chat.jsonl"
    book.write_text(json.dumps(book_json()), encoding="utf-8")
    chat.write_text("\n".join(json.dumps(x) for x in chat_lines(turns)) + "\n", encoding="utf-8")
    return book, chat
