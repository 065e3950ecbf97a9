"""A book whose keys and contents are macros, and the hooks the per-call hook tests pass
(tests/st/test_st_hooks.py, tests/serve/test_serve.py)."""
from __future__ import annotations

import random
import re

from lorescan import ChatMessage
from lorescan.model import Lorebook, entry_from_fields

__all__ = ["macros", "tagged", "SERA", "OTHER", "macro_book", "chat_of"]


def macros(table: dict[str, str]):
    """A ``{{name}}`` macro hook (names case-insensitive; unknown macros stay as written)."""
    lowered = {k.lower(): v for k, v in table.items()}
    return lambda text: re.sub(r"\{\{(\w+)\}\}", lambda mt: lowered.get(mt.group(1).lower(), mt.group(0)), text)


def tagged(content: str, position, depth) -> str:
    return f"[{position}/{depth}] {content}"


SERA = {"char": "Seraphina", "user": "Anon"}
OTHER = {"char": "Brannoc", "user": "Tess"}


def macro_book() -> Lorebook:
    """Keys and contents made of macros: plain, secondary (AND ANY, NOT ANY), regex, probability,
    a weighted group, an @depth entry and an unknown macro."""
    rows = [
        {"key": ["{{char}}"], "content": "{{char}} keeps a lantern."},
        {"key": ["{{user}}'s sword"], "content": "The blade {{user}} carries."},
        {"key": ["lantern"], "keysecondary": ["{{char}}"], "selective": True, "selectiveLogic": 0,
         "content": "The lantern is {{char}}'s."},
        {"key": ["/{{user}}s? (?:smiles|waves)/i"], "content": "{{user}} is friendly."},
        {"key": ["harbor"], "keysecondary": ["{{user}}"], "selective": True, "selectiveLogic": 2,
         "content": "The harbor without {{user}}."},
        {"key": ["{{char}}"], "content": "A roll for {{char}}.", "useProbability": True, "probability": 50},
        {"key": ["{{user}}"], "content": "Group one for {{user}}.", "group": "g", "groupWeight": 30},
        {"key": ["{{user}}"], "content": "Group two for {{user}}.", "group": "g", "groupWeight": 70},
        {"key": ["blade"], "content": "Mentions {{char}} again.", "position": 4, "depth": 2},
        {"key": ["{{mood}}"], "content": "an unknown macro stays as written"},
    ]
    entries = [entry_from_fields({"uid": uid, "order": 100 - uid, **row}, source="hooks")
               for uid, row in enumerate(rows)]
    return Lorebook(name="Hooks", entries=tuple(entries))


def chat_of(n: int, seed: int) -> list[ChatMessage]:
    """``n`` messages naming both macro tables' people, some words of the macro book and a raw macro."""
    rng = random.Random(seed)
    words = ["Seraphina", "Anon", "Brannoc", "Tess", "lantern", "harbor", "Anon's sword", "Tess waves",
             "Anons smiles", "rain", "door", "{{mood}}"]
    return [ChatMessage("User" if i % 2 else "Bot", " ".join(rng.choice(words) for _ in range(4)))
            for i in range(n)]
