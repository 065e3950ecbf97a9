"""Resource limits for untrusted books, chats and state: one value, safe defaults, per-call overrides.

A platform runs lorescan on books uploaded by strangers and on chat text anyone can type.
Every limit below bounds the time or memory one input can cost. ``load`` and both engines take
``limits=`` (default :data:`DEFAULT_LIMITS`); a book over a limit raises a ``LorebookError``
that names the limit and the value. Raise a limit with ``dataclasses.replace``::

    from dataclasses import replace
    from lorescan import DEFAULT_LIMITS, load
    book = load("huge.json", limits=replace(DEFAULT_LIMITS, max_entries=500_000))
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Container, Iterable, Sequence

from .errors import LorebookError, RegexKeyError, SettingsError

if TYPE_CHECKING:
    from .model import Lorebook

__all__ = ["Limits", "DEFAULT_LIMITS", "check_book", "check_entry", "check_total_key_length"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one input may cost.

    Files: ``max_file_bytes`` (the whole input), ``max_inflated_bytes`` (one decompressed PNG
    text chunk or zip member), ``max_total_inflated_bytes`` (all decompressed data of one
    file), ``max_zip_members`` / ``max_zip_total_bytes`` (a CHARX's central directory),
    ``max_json_depth`` (nesting of arrays and objects), ``max_json_containers`` (arrays and
    objects in one JSON text: ``[{},{},...]`` costs ~70 bytes per 3 bytes of input before any
    entry is read), ``max_png_chunks``.

    Books: ``max_entries`` per book, ``max_key_length`` (characters of one key, plain or regex),
    ``max_total_key_length`` (characters of all of a book's keys together: each costs ~50 bytes
    of trie and tables once compiled, so a 64 MB file of keys alone would take ~2.5 GB and half a
    minute; the default is 2.3x the 100k-entry benchmark book's 3.5 million),
    ``max_regex_length`` (characters of one regex key's pattern), ``max_regex_nesting`` (group
    nesting depth of one regex key), ``max_regex_expansion`` (terms the regex engine builds for
    all of a book's regex keys together once counted repeats are multiplied out: ``regex``
    copies an atom once per repetition of its minimum count, about 0.4 us and 260 bytes each,
    so one ``/a{10000000}/`` took 4 s and 2.6 GB; the default bounds a book's regexes to about
    0.4 s and 260 MB; weyland's 128 regex keys hold 1,642),
    ``max_content_length`` (characters of one entry's content).
    Why keys are short: every plain key is a path in one Aho-Corasick trie, and pyahocorasick
    (2.3) frees that trie recursively (about 16 bytes of C stack per character of the longest
    key: a 700,000-character key crashes the 8 MiB main thread, 65,000 a 1 MiB thread, 1,580 a
    32 KiB one, Python's smallest) and, at every scanned character, walks the whole failure
    chain of its state and reports every key ending there. A self-overlapping key (``aaa...a``)
    costs its length per character (a 100,000-character key against a 1 MB message took 136 s),
    and keys that are suffixes of one another (``a``, ``aa``, ``aaa``, ...) cost one hit each.
    Both are at most ``max_key_length`` per character: 256 keeps the trie safe in any thread
    stack and a scan within about 256 steps per character. The longest key in the shared
    corpus has 54 characters. ``max_fuzzy_comparisons``: word-to-key comparisons compiling a
    book's contents against its fuzzy keys may take (distinct words of the contents times the
    fuzzy keys of a possible length, match/fuzzy.py; about 0.05 us each here, so the default is
    some 10 s). Natural text repeats its words; a book of random strings does not: 10,000 fuzzy
    entries of 30 random words each need well over a billion. ``fuzzy_comparisons_per_scan``:
    the same comparisons for the texts of one scan or slot run (about 1 s; a text that would
    pass it is matched by its fuzzy keys' exact variants only, and the result says so).

    Macros: ``max_macros`` (names in one macro table: a request's ``macros``, the CLI's names)
    and ``max_macro_chars`` (characters of its names and values together; an 11 MB table cost
    9.3 s and 1 GB). A key or content is held to ``max_key_length`` / ``max_content_length``
    again after its macros are expanded, before anything is built from it (``lorescan.macros``).

    Scans: ``max_recursion_text`` (characters of recursion text one scan may build; past it the
    recursion stops and the result says so), ``regex_time_per_scan`` (seconds of regex
    evaluation one scan or slot run may spend in all, counted as each evaluation's nominal
    cost, a function of the pattern and the text, never by a clock: see
    ``lorescan.match.regexscope``; a key cut off is reported, never read as "no match"),
    ``key_hits_per_text`` and ``key_hits_per_char`` (automaton hits one scanned text may give:
    the larger of the first and the second times its length; keys that are suffixes of one
    another give one hit per key per character, 256 keys over a 1 MB message 256 million and a
    minute of CPU; past the budget the text is not enumerated further and the result says so,
    see ``lorescan.match.scanwork``. The most any corpus book gives on any corpus chat message
    or entry content is 19,140 hits (a 152,707-character content) and 0.18 hits per character:
    every such text is at least 112 times under its budget).

    Raises:
        SettingsError: a limit that is not a positive integer (a positive finite number for
            the time limits).
    """

    max_file_bytes: int = 64 * MiB
    max_inflated_bytes: int = 32 * MiB
    max_total_inflated_bytes: int = 64 * MiB
    max_zip_members: int = 10_000
    max_zip_total_bytes: int = 512 * MiB
    max_json_depth: int = 256
    max_json_containers: int = 2_000_000
    max_png_chunks: int = 100_000
    max_entries: int = 100_000
    max_key_length: int = 256
    max_total_key_length: int = 8_000_000
    max_regex_length: int = 1_000
    max_regex_nesting: int = 64
    max_regex_expansion: int = 1_000_000     # js.regex.REGEX_MAX_EXPANSION (the default when no limit is given)
    max_content_length: int = 2_000_000
    max_recursion_text: int = 16 * MiB
    regex_time_per_scan: float = 2.0
    max_fuzzy_comparisons: int = 200_000_000
    max_macros: int = 1_000
    max_macro_chars: int = 1 * MiB
    fuzzy_comparisons_per_scan: int = 20_000_000
    key_hits_per_text: int = 65_536
    key_hits_per_char: int = 16

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "float":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
                    and math.isfinite(value)
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
            if not ok:
                raise SettingsError(f"must be a positive {'finite number' if f.type == 'float' else 'integer'}, "
                                    f"got {value!r:.40}", source="Limits", field=f.name)


DEFAULT_LIMITS = Limits()


def check_book(book: "Lorebook", limits: Limits = DEFAULT_LIMITS, *, source: str | None = None) -> None:
    """Check a book against ``limits`` (entries per book, key and regex length, content length).

    ``load`` calls it on every book it reads; ``compile_book`` and both engines call it on
    every book they are given, so a book built in memory is held to the same bounds.

    Args:
        book: the book.
        limits: the bounds.
        source: names the book in errors (default: ``book.source``).

    Raises:
        RegexKeyError: a regex key's pattern over ``max_regex_length``.
        LorebookError: any other limit exceeded, naming the limit, the value, the entry and
            the field.
    """
    src = source or book.source
    n = len(book.entries)
    if n > limits.max_entries:
        raise LorebookError(f"the book has {n} entries, above the limit max_entries={limits.max_entries}",
                            source=src, field="entries")
    total = 0
    for e in book.entries:
        total += check_entry(limits, src, e.uid, e.content, (("key", e.key), ("keysecondary", e.keysecondary)))
        check_total_key_length(limits, total, src, e.uid)


def check_total_key_length(limits: Limits, total: int, source: str, uid: object) -> None:
    """LorebookError when ``total``, the key characters of a book's entries up to ``uid``, is
    over ``max_total_key_length``."""
    if total > limits.max_total_key_length:
        raise LorebookError(f"the book's keys reach {total:,} characters by this entry, above the limit "
                            f"max_total_key_length={limits.max_total_key_length:,}", source=source, entry=uid,
                            field="key")


def check_entry(limits: Limits, source: str, uid: object, content: str,
                key_lists: Iterable[tuple[str, Sequence[str]]], literal: Container[str] = ()) -> int:
    """One entry's content and keys against ``limits`` (what :func:`check_book` checks per entry;
    key specs from another engine are checked with it too).

    Args:
        limits: the bounds.
        source: names the book in errors.
        uid: names the entry.
        content: its content.
        key_lists: ``(field name, keys)`` per key list (``("key", ...)``, ``("keysecondary", ...)``).
        literal: keys that are plain text even in ``/pattern/flags`` form.

    Returns:
        The characters of the entry's keys (for ``max_total_key_length``).

    Raises:
        RegexKeyError: a regex key's pattern over ``max_regex_length``.
        LorebookError: the content or a plain key over its limit.
    """
    chars = 0
    max_key, max_re, max_content = limits.max_key_length, limits.max_regex_length, limits.max_content_length
    if len(content) > max_content:
        raise LorebookError(f"the content has {len(content)} characters, above the limit "
                            f"max_content_length={max_content}", source=source, entry=uid, field="content")
    for name, keys in key_lists:
        for i, k in enumerate(keys):
            chars += len(k)
            # Cheap test first: only a key longer than a limit is parsed as a regex.
            if len(k) <= max_key and (len(k) <= max_re + 2 or not k.startswith("/")):
                continue
            from .js.regex import _split_regex_key  # import-cost: the `regex` package loads only for a key past a limit
            # The key's shape is enough here (compiling a huge pattern is what the limit prevents)
            parsed = _split_regex_key(k) if k.startswith("/") and k not in literal else None
            if parsed is None:
                if len(k) > max_key:
                    raise LorebookError(f"the key has {len(k)} characters, above the limit "
                                        f"max_key_length={max_key}", source=source, entry=uid,
                                        field=f"{name}[{i}]")
            elif len(parsed[0]) > max_re:
                raise RegexKeyError(f"the regex key's pattern has {len(parsed[0])} characters, above the "
                                    f"limit max_regex_length={max_re}", source=source, entry=uid,
                                    field=f"{name}[{i}]")
    return chars
