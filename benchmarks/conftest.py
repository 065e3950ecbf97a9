"""Synthetic books and chats for the matcher benchmarks (deterministic, built once per session).

Books: n entries with 1-4 keys each (full name, given name, epithet, place), drawn from
invented syllable names; about one entry in 500 has a regex key; contents are prose that
mentions two or three other entries. Chats: 1,000 messages of prose in which a recurring
cast of entries is mentioned (Zipf-like: a chat keeps coming back to the same people),
with the occasional mention of anyone from the book.
"""
from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path
from typing import Callable

import pytest

from lorescan.model import Entry, Lorebook, entry_from_fields

SHORT = os.environ.get("LORESCAN_BENCH_SHORT") == "1"
ROOT = Path(__file__).resolve().parents[1]
# Real-data sets (other people's books and chats) stay outside the repository.
SHARED = Path(os.environ.get("LORESCAN_SHARED") or ROOT.parent / "shared").resolve()


def need_shared(relative: str = "") -> Path:
    """``$LORESCAN_SHARED/<relative>``: skip when absent; fail when LORESCAN_REQUIRE_SHARED=1."""
    path = SHARED / relative
    if path.exists():
        return path
    if os.environ.get("LORESCAN_REQUIRE_SHARED") == "1":
        pytest.fail(f"{path} is missing, and LORESCAN_REQUIRE_SHARED=1 makes the real-data sets required",
                    pytrace=False)
    pytest.skip(f"real-data sets not found at {path} (set LORESCAN_SHARED to the folder holding corpus/)")

SYLLABLES = tuple(c + v for c in ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kh", "l", "m", "n", "p", "r",
                                   "s", "sh", "t", "th", "v", "w", "z") for v in ("a", "e", "i", "o", "u", "ae", "ei"))
CODAS = ("", "", "", "n", "r", "l", "s", "th", "nd", "rk")
EPITHETS = ("the Bold", "the Grey", "Ironhand", "the Younger", "of the Vale", "Stormborn", "the Quiet", "Ashwalker")
PLACES = ("Gate", "Keep", "Harbor", "Spire", "Hollow", "Market", "Bridge", "Crossing", "Abbey", "Forge", "Tower")
WORDS = ("the a and of to in was she he it that with for on as at by from they we you but not all were when there "
         "her his one said what out up into them then some could time two more over only know back after little "
         "night door road light hand eyes river stone quiet cold old walked looked turned smiled waited before "
         "under behind again never almost rain wind fire table window letter voice shadow morning evening market "
         "bread coin sword cloak lantern").split()


def _name(rng: random.Random) -> str:
    return ("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) + rng.choice(CODAS)).capitalize()


def _prose(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


def make_book(n_entries: int, *, seed: int = 1) -> Lorebook:
    """A synthetic book of ``n_entries`` entries (see the module docstring)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    keysets: list[list[str]] = []
    while len(keysets) < n_entries:
        given, family = _name(rng), _name(rng)
        full = f"{given} {family}"
        if full.lower() in seen:
            continue
        seen.add(full.lower())
        keys = [full]
        for extra in rng.sample(["given", "epithet", "place"], rng.randint(0, 3)):
            if extra == "given" and given.lower() not in seen:
                seen.add(given.lower())
                keys.append(given)
            elif extra == "epithet":
                keys.append(f"{given} {rng.choice(EPITHETS)}")
            elif extra == "place":
                keys.append(f"{family} {rng.choice(PLACES)}")
        if rng.random() < 0.002:
            keys.append(f"/{given}.?s (room|house)/i")
        keysets.append(keys)
    entries: list[Entry] = []
    for uid, keys in enumerate(keysets):
        words = _prose(rng, rng.randint(25, 60))
        for _ in range(rng.randint(2, 3)):
            other = keysets[rng.randrange(n_entries)]
            words.insert(rng.randrange(len(words) + 1), rng.choice(other[:2]))
        fields = {"uid": uid, "key": keys, "content": " ".join(words).capitalize() + ".",
                  "comment": keys[0]}
        entries.append(entry_from_fields(fields, uid=uid))
    return Lorebook(name=f"synthetic-{n_entries}", entries=tuple(entries))


def make_chat(book: Lorebook, n_messages: int = 1000, *, seed: int = 2) -> list[str]:
    """``n_messages`` scanned message strings ("Name: text"), oldest first."""
    rng = random.Random(seed)
    cast = rng.sample(range(len(book.entries)), min(20, len(book.entries)))
    weights = [1 / (rank + 1) for rank in range(len(cast))]
    out = []
    for i in range(n_messages):
        words = _prose(rng, rng.randint(20, 80))
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            if rng.random() < 0.95:
                entry = book.entries[rng.choices(cast, weights)[0]]
            else:
                entry = book.entries[rng.randrange(len(book.entries))]
            words.insert(rng.randrange(len(words) + 1), rng.choice(entry.key[:2]))
        speaker = "Rob" if i % 2 else "Narrator"
        out.append(f"{speaker}: " + " ".join(words).capitalize() + ".")
    return out


_BOOKS: dict[int, Lorebook] = {}


@pytest.fixture(scope="session")
def synthetic_book() -> Callable[[int], Lorebook]:
    """``synthetic_book(n)``: the session's synthetic book of ``n`` entries."""
    def get(n: int) -> Lorebook:
        if n not in _BOOKS:
            _BOOKS[n] = make_book(n)
        return _BOOKS[n]
    return get


@pytest.fixture(scope="session")
def synthetic_chat(synthetic_book) -> Callable[[int], list[str]]:
    """``synthetic_chat(n)``: a 1,000-message chat over the synthetic book of ``n`` entries."""
    chats: dict[int, list[str]] = {}

    def get(n: int) -> list[str]:
        if n not in chats:
            chats[n] = make_chat(synthetic_book(n))
        return chats[n]
    return get


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls of ``fn`` (the same-run baseline of a ratio)."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)
