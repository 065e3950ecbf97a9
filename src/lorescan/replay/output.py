"""The replay's output: rows in a fixed schema, written as Parquet (pyarrow, imported lazily).

One row per (chat, turn, variant, entry) that fired or was cut by the budget, one ``turn``
row per (chat, turn, variant), and one ``problem`` row per chat (or part of one) the reader
could not use. Columns:

========  =======  ================================================================
chat_id   string   the chat: its file (folder of ``.jsonl``) or its record's ``id``
source    string   the file it came from, relative to CHATS
turn      int32    the turn: the n-th generation of the chat, from 1 (-1 on ``problem`` rows)
variant   string   ``base`` or, with ``--compare``, ``compare`` ("" on problem rows)
book      string   the entry's book ("" on turn / problem rows)
entry     string   the entry's uid
outcome   string   ``fired``, ``cut`` (budget), ``turn`` or ``problem``
reason    string   fired: why (``key``, ``constant``, ``sticky``…); cut: ``budget``;
                   turn: what differs from the other version (``activated``, ``text``,
                   ``activated,text`` or ""); problem: its code
loop      int16    the loop (slot mode: pass) the decision fell in; null if none
tokens    int32    the entry's content tokens; turn rows: tokens of all fired entries
position  string   where the entry goes (``before``, ``at_depth:4``…; slot: role:slot)
changed   bool     turn rows with ``--compare``: the versions differ; otherwise null
detail    string   problem rows: what is wrong; "" elsewhere
messages  int32    the chat's non-system messages this turn scanned (-1 on problem rows)
========  =======  ================================================================

Turns are numbered as ``lorescan replay`` and its report number them (docs/sillytavern-mode.md#cli-turns).

A result is a folder: ``rows/part-*.parquet`` (read it whole with
``pyarrow.dataset.dataset(folder / "rows")``) and ``run.json`` (what was run).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import LorebookError

__all__ = ["Columns", "COLUMNS", "schema", "to_table", "read_rows"]

COLUMNS = ("chat_id", "source", "turn", "variant", "book", "entry", "outcome", "reason", "loop", "tokens",
           "position", "changed", "detail", "messages")


def schema() -> Any:
    """The fixed pyarrow schema of the rows."""
    import pyarrow as pa  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
    s, i16, i32 = pa.string(), pa.int16(), pa.int32()
    return pa.schema([("chat_id", s), ("source", s), ("turn", i32), ("variant", s), ("book", s), ("entry", s),
                      ("outcome", s), ("reason", s), ("loop", i16), ("tokens", i32), ("position", s),
                      ("changed", pa.bool_()), ("detail", s), ("messages", i32)])


class Columns:
    """Rows gathered column by column (cheap to append, cheap to turn into a table)."""

    __slots__ = COLUMNS
    chat_id: list[str]
    source: list[str]
    turn: list[int]
    variant: list[str]
    book: list[str]
    entry: list[str]
    outcome: list[str]
    reason: list[str]
    loop: list[int | None]
    tokens: list[int | None]
    position: list[str]
    changed: list[bool | None]
    detail: list[str]
    messages: list[int]

    def __init__(self) -> None:
        for c in COLUMNS:
            setattr(self, c, [])

    def __len__(self) -> int:
        return len(self.chat_id)

    def add(self, chat_id: str, source: str, turn: int, variant: str, book: str, entry: str, outcome: str,
            reason: str, loop: int | None, tokens: int | None, position: str, changed: bool | None,
            detail: str, messages: int = -1) -> None:
        self.chat_id.append(chat_id)
        self.source.append(source)
        self.turn.append(turn)
        self.variant.append(variant)
        self.book.append(book)
        self.entry.append(entry)
        self.outcome.append(outcome)
        self.reason.append(reason)
        self.loop.append(loop)
        self.tokens.append(tokens)
        self.position.append(position)
        self.changed.append(changed)
        self.detail.append(detail)
        self.messages.append(messages)

    def truncate(self, n: int) -> None:
        for c in COLUMNS:
            del getattr(self, c)[n:]

    def to_dict(self) -> dict[str, list]:
        return {c: getattr(self, c) for c in COLUMNS}


def to_table(cols: Columns | dict[str, list]) -> Any:
    import pyarrow as pa  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
    data = cols.to_dict() if isinstance(cols, Columns) else cols
    return pa.Table.from_pydict(data, schema=schema())


def read_rows(results: str) -> Any:
    """All rows of a result folder as one pyarrow table."""
    import pyarrow.dataset as ds  # import-cost: pyarrow is the replay extra's, loaded when rows are written or read
    rows = Path(results) / "rows"
    if not rows.is_dir():
        raise LorebookError("not a replay result (no rows/ folder)", source=str(results))
    return ds.dataset(str(rows), format="parquet", schema=schema()).to_table()
