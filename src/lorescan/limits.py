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

from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT_LIMITS"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one input may cost.

    Files: ``max_file_bytes`` (the whole input), ``max_inflated_bytes`` (one decompressed PNG
    text chunk or zip member), ``max_total_inflated_bytes`` (all decompressed data of one
    file), ``max_zip_members`` / ``max_zip_total_bytes`` (a CHARX's central directory),
    ``max_json_depth`` (nesting of arrays and objects), ``max_png_chunks``.

    Books: ``max_entries`` per book, ``max_key_length`` (characters of one key, plain or regex),
    ``max_regex_length`` (characters of one regex key's pattern), ``max_regex_nesting`` (group
    nesting depth of one regex key), ``max_content_length`` (characters of one entry's content).

    Scans: ``max_recursion_text`` (characters of recursion text one scan may build; past it the
    recursion stops and the result says so), ``regex_time_per_scan`` (seconds of regex
    evaluation one scan or slot run may spend in all; a key cut off is reported, never read
    as "no match").
    """

    max_file_bytes: int = 64 * MiB
    max_inflated_bytes: int = 32 * MiB
    max_total_inflated_bytes: int = 64 * MiB
    max_zip_members: int = 10_000
    max_zip_total_bytes: int = 512 * MiB
    max_json_depth: int = 256
    max_png_chunks: int = 100_000
    max_entries: int = 200_000
    max_key_length: int = 10_000
    max_regex_length: int = 10_000
    max_regex_nesting: int = 64
    max_content_length: int = 2_000_000
    max_recursion_text: int = 16 * MiB
    regex_time_per_scan: float = 2.0


DEFAULT_LIMITS = Limits()
