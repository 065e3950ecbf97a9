"""Random JanitorAI books for the property tests (fast path vs oracle, improved vs script)."""
from __future__ import annotations

import random

from lorescan.js.coerce import js_string
from lorescan.model import js_truthy

WORDS = ["dark", "dar", "darkness", "ma", "mage", "mages", "12", "a1", "dark12", "the", "x"]
SUFFIXES = ["", "*", " mage", " *"]


def has_backward_chain(book: list) -> bool:
    """Whether an entry's tag, or a tag its tag gates name, is emitted only by later entries
    (the script's single trigger pass never sees those; the improved profile does). Values
    are compared as the script compares them, as JS strings."""
    def arr(v):
        return v if isinstance(v, list) else [] if v is None else [v]

    entries = [e if isinstance(e, dict) else {} for e in book]
    for i, e in enumerate(entries):
        wanted = {js_string(e["tag"])} if js_truthy(e.get("tag")) else set()
        for key in ("andAnyTags", "andAllTags", "notAnyTags", "notAllTags"):
            wanted |= {js_string(t) for t in arr(e.get(key))}
        later = {js_string(t) for f in entries[i + 1:]
                 for t in (f["triggers"] if isinstance(f.get("triggers"), list) else [])}
        if wanted & later:
            return True
    return False


def random_book(draw_rng: random.Random, n: int, *, words: list[str] = WORDS, suffixes=SUFFIXES) -> list:
    tags = ["t0", "t1", "t2", 7, "7"]
    book = []
    for _ in range(n):
        e: dict = {}
        r = draw_rng.random
        if r() < 0.8:
            e["keywords"] = [draw_rng.choice(words) + draw_rng.choice(suffixes)
                             for _ in range(draw_rng.randint(1, 3))]
        for key in ("requireAny", "requireAll", "requireNone", "notAll", "block"):
            if r() < 0.15:
                e[key] = [draw_rng.choice(words) for _ in range(draw_rng.randint(1, 2))]
        if r() < 0.1:
            e["requires"] = {"any": [draw_rng.choice(words)]}
        if r() < 0.3:
            e["tag"] = draw_rng.choice(tags)
        if r() < 0.3:
            e["triggers"] = draw_rng.sample(tags, draw_rng.randint(1, 2))
        for key in ("andAnyTags", "notAnyTags", "andAllTags", "notAllTags"):
            if r() < 0.08:
                e[key] = [draw_rng.choice(tags)]
        if r() < 0.5:
            e["priority"] = draw_rng.choice([1, 2, 3, 4, 5, "4", None, 9, -1])
        if r() < 0.3:
            e["probability"] = draw_rng.choice([0, 0.5, 1, "50%", "0.3", "junk"])
        if r() < 0.15:
            e["minMessages"] = draw_rng.randint(0, 4)
        if r() < 0.1:
            e["maxMessages"] = draw_rng.choice([2, 6, None])
        if r() < 0.1:
            e["nameBlock"] = [draw_rng.choice(["Mira", "mi", "Mira Vale", "x"])]
        if r() < 0.2:
            e["Shifts"] = [{"keywords": [draw_rng.choice(words)], "personality": "shift",
                            "triggers": [draw_rng.choice(tags)]} for _ in range(draw_rng.randint(1, 2))]
        e["personality"] = f"P{len(book)}"
        if r() < 0.3:
            e["scenario"] = f"S{len(book)}"
        book.append(e)
    return book


