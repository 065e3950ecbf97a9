"""The heavy workload of issue 8: a large book whose contents mention each other, and a long chat.

Deterministic (seeded), built from invented names so nothing matches by accident:

* **Book.** Entries come in clusters of :data:`CLUSTER` (19): a spine of 10 entries, each
  naming the next spine entry and one leaf of its own, so a mention of a cluster's root
  activates the whole cluster through 10 recursion loops. Every content also names its
  cluster's root again (already active, so it only adds text to scan) and is 30-55 words of
  prose, now and then with a Cyrillic or CJK clause. Keys: the full name ("Given Family"),
  often the given name alone, an epithet form or a place; given and family names are unique
  in the book and never an English word of the prose, so a key fires only where it is meant.
* **Regex keys** (:data:`REGEX_SHARE` of the entries, realistic shapes): alternations with
  ``\\b`` and the ``i`` flag (``/\\b(?:Bara|Kelo)(?:'s)? (?:room|house|quarters)\\b/i``),
  weyland's ``/Bara.?s (?:room|dorm)/``, inflected Cyrillic stems (``/горд[ьяеи]/i``),
  CJK variants (``/龍王|竜王/``) and invented creature names (``/\\b(?:grathwyrm|skelk)s?\\b/i``).
  Mentions of such an entry often use only the form its regex matches, so regex keys decide
  activations in the chat and in recursion.
* **Chat.** Messages of prose, each naming one to three entries: mostly a recurring cast of
  :data:`CAST` cluster roots (a chat keeps coming back to the same people, so even ten
  messages name most of them) and, one mention in fifty, any entry of the book.

The counts this gives (checked by the benchmarks, not assumed): about 150-250 entries
activated at depths 10 to 100, over about 11 loops.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from lorescan.model import Lorebook
from lorescan.formats.sillytavern import book_from_entries
from lorescan.st import ChatMessage

__all__ = ["CLUSTER", "CAST", "REGEX_SHARE", "HeavyBook", "heavy_book", "heavy_chat"]

SPINE = 10                       # spine entries per cluster: recursion loops after the first
CLUSTER = 2 * SPINE - 1          # the spine plus one leaf per spine entry but the last
CAST = 8                         # cluster roots the chat keeps naming
REGEX_SHARE = 0.02               # entries with a regex key (issue 8: at least 0.5%)

_SYLLABLES = tuple(c + v for c in ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kh", "l", "m", "n", "p",
                                   "r", "s", "sh", "t", "th", "v", "w", "z")
                   for v in ("a", "e", "i", "o", "u", "ae", "ei"))
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "nd", "rk")
_CYR_SYLLABLES = tuple(c + v for c in "бвгдзклмнпрстхш" for v in "аоу")
_CJK = "龍竜王城山川風雪月星花鳥森海鉄剣影光炎氷雷石玉金銀"
_EPITHETS = ("the Bold", "the Grey", "Ironhand", "the Younger", "of the Vale", "Stormborn", "the Quiet")
_PLACES = ("Gate", "Keep", "Harbor", "Spire", "Hollow", "Market", "Bridge", "Crossing", "Abbey", "Forge")
_WORDS = ("the a and of to in was she he it that with for on as at by from they we you but not all were when "
          "there her his one said what out up into them then some could time two more over only know back "
          "after little night door road light hand eyes river stone quiet cold old walked looked turned smiled "
          "waited before under behind again never almost rain wind fire table window letter voice shadow "
          "morning evening market bread coin sword cloak lantern").split()
_CYR_CLAUSES = ("в старом городе шёл дождь", "никто не ответил", "у ворот горел огонь", "ночь была тихой")
_CJK_CLAUSES = ("夜の城門は静かだった", "雨が降り続いた", "誰も答えなかった", "古い道を歩いた")
_ENGLISH = frozenset(_WORDS) | {"river", "never", "water", "rover", "hover", "lover", "fever", "sever"}


class _Names:
    """Unique invented names: no two entries share a given or family name, none is English."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set(_ENGLISH)

    def latin(self, syllables: tuple[int, int] = (2, 3)) -> str:
        while True:
            name = "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(*syllables)))
            name = (name + self.rng.choice(_CODAS)).capitalize()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name

    def cyrillic(self) -> str:
        while True:
            stem = "".join(self.rng.choice(_CYR_SYLLABLES) for _ in range(2)) + self.rng.choice("дкнрст")
            if stem not in self.used and not any(stem in clause for clause in _CYR_CLAUSES):
                self.used.add(stem)
                return stem

    def cjk(self) -> tuple[str, str, str]:
        while True:
            a, b, c = self.rng.sample(_CJK, 3)
            if a + b not in self.used and a + c not in self.used:
                self.used.update((a + b, a + c))
                return a, b, c


def _regex_key(kind: int, given: str, family: str, names: _Names) -> tuple[str, list[str]]:
    """One regex key of a realistic shape, and texts that mention the entry only through it."""
    rng = names.rng
    if kind == 0:
        return (rf"/\b(?:{given}|{family})(?:'s)? (?:room|house|quarters)\b/i",
                [f"{given.lower()}'s house", f"{family} quarters"])
    if kind == 1:                    # weyland's shape
        return rf"/{given}.?s (?:room|dorm)/", [f"{given}'s room", f"{given}s dorm"]
    if kind == 2:                    # an inflected Cyrillic stem
        stem = names.cyrillic()
        return f"/{stem}[ьяеи]/i", [f"{stem.capitalize()}я", f"{stem}е"]
    if kind == 3:                    # two CJK spellings of one name
        a, b, c = names.cjk()
        return f"/{a}{b}|{a}{c}/", [f"{a}{b}", f"{a}{c}"]
    beast, other = names.latin((2, 2)).lower(), names.latin((1, 2)).lower()
    return rf"/\b(?:{beast}|{other})s?\b/i", [f"{beast}s", f"{other}"]


def _prose(rng: random.Random, n: int) -> list[str]:
    words = [rng.choice(_WORDS) for _ in range(n)]
    roll = rng.random()
    if roll < 0.1:
        words.insert(rng.randrange(len(words) + 1), rng.choice(_CYR_CLAUSES) + ",")
    elif roll < 0.2:
        words.insert(rng.randrange(len(words) + 1), rng.choice(_CJK_CLAUSES) + "。")
    return words


@dataclass(frozen=True)
class HeavyBook:
    """The generated book: its entry fields (SillyTavern shape, for JSON), the book, and for
    each entry the texts that name it (the chat names entries with these)."""

    fields: list[dict[str, Any]]
    book: Lorebook
    mentions: list[list[str]]


def heavy_book(n_entries: int = 10_000, *, seed: int = 8, regex_share: float = REGEX_SHARE) -> HeavyBook:
    """A heavy book of ``n_entries`` entries (see the module docstring), named ``heavy-<n>``;
    ``regex_share``: the share of entries with a regex key (0: none, to profile the rest)."""
    rng = random.Random(seed)
    names = _Names(rng)
    keys: list[list[str]] = []
    mentions: list[list[str]] = []             # texts that name entry i
    for uid in range(n_entries):
        given, family = names.latin(), names.latin()
        full = f"{given} {family}"
        ks, ms = [full], [full]
        for extra in rng.sample(["given", "epithet", "place"], rng.randint(0, 3)):
            if extra == "given":
                ks.append(given)
                ms.append(given)
            elif extra == "epithet":
                ks.append(f"{given} {rng.choice(_EPITHETS)}")
                ms.append(ks[-1])
            else:
                ks.append(f"{family} {rng.choice(_PLACES)}")
                ms.append(ks[-1])
        if rng.random() < regex_share:
            key, forms = _regex_key(uid % 5, given, family, names)
            ks.append(key)
            ms = forms * 2 + ms         # mostly named the way only the regex finds
        keys.append(ks)
        mentions.append(ms)
    entries = []
    for uid in range(n_entries):
        c, pos = divmod(uid, CLUSTER)
        base = c * CLUSTER
        named = []
        if base + CLUSTER <= n_entries:
            if pos < SPINE - 1:              # spine entry pos: next spine entry and its own leaf
                named = [base + pos + 1, base + SPINE + pos]
            if pos:
                named.append(base)           # the cluster's root, already active when this fires
        words = _prose(rng, rng.randint(30, 55))
        for other in named:
            words.insert(rng.randrange(len(words) + 1), rng.choice(mentions[other]))
        entries.append({"uid": uid, "key": keys[uid], "comment": keys[uid][0],
                        "content": " ".join(words).capitalize() + ".", "order": 100 + uid % 50})
    return HeavyBook(entries, book_from_entries(f"heavy-{n_entries}", entries), mentions)


def heavy_chat(heavy: HeavyBook, n_messages: int = 1_100, *, seed: int = 9) -> list[ChatMessage]:
    """``n_messages`` messages, oldest first, naming the book's recurring cast (see above)."""
    rng = random.Random(seed)
    n_entries = len(heavy.fields)
    clusters = n_entries // CLUSTER
    cast = [c * CLUSTER for c in rng.sample(range(clusters), min(CAST, clusters))]
    weights = [(rank + 1) ** -0.5 for rank in range(len(cast))]
    out = []
    for i in range(n_messages):
        words = _prose(rng, rng.randint(20, 70))
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            if rng.random() < 0.98:
                uid = rng.choices(cast, weights)[0]
            else:
                uid = rng.randrange(n_entries)
            words.insert(rng.randrange(len(words) + 1), rng.choice(heavy.mentions[uid]))
        out.append(ChatMessage("Narrator" if i % 2 == 0 else "Rob", " ".join(words).capitalize() + "."))
    return out
