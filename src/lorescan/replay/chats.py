"""Reading chats for a replay, streaming: a folder of SillyTavern ``.jsonl`` (and ``.json``) chats or one
JSON-lines file with a chat per line.

The unit of work is a :class:`ChatItem`: where a chat comes from plus, for a JSON-lines file
of chats, the raw line. Parsing happens where the chat is replayed (in a worker, a Ray actor
or in process), so the reader only lists files or reads lines and never holds more than a
batch. A chat that cannot be parsed becomes a :class:`Problem`, never an exception: one bad
chat must not stop the run or cost other chats their rows.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from ..errors import LorebookError

__all__ = ["ChatItem", "Chat", "Problem", "Message", "Shard", "iter_items", "iter_shards", "read_shard",
           "parse_item", "MAX_CHAT_BYTES"]

MAX_CHAT_BYTES = 256 * 1024 * 1024
# The chat files of a folder: SillyTavern's .jsonl chats and .json chats (a list of messages
# or {"messages": [...]}, as ``lorescan scan --chat`` reads them).
CHAT_SUFFIXES = (".jsonl", ".json")
# Fields a record of a JSON-lines file of chats may have; anything else is reported.
CHAT_FIELDS = frozenset({"id", "chat_id", "messages", "metadata", "character", "user"})


class Message(NamedTuple):
    name: str
    text: str
    is_user: bool
    is_system: bool


@dataclass(frozen=True, slots=True)
class ChatItem:
    """One chat to replay: ``source`` names the file (relative to the CHATS argument);
    ``line`` is the 1-based line of a JSON-lines file of chats (0 for a whole ``.jsonl``
    chat file, which the replayer reads from ``path``); ``raw`` that line's text."""

    source: str
    path: str
    line: int = 0
    raw: str | None = None


@dataclass(frozen=True, slots=True)
class Chat:
    chat_id: str
    source: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """A chat (or part of one) the replay could not use. ``code``: ``malformed_line``,
    ``bad_message``, ``unknown_field``, ``empty_chat`` or ``unreadable``. ``fatal``: the chat
    was not replayed (an unknown field is reported but the chat still replays)."""

    source: str
    chat_id: str
    code: str
    detail: str
    fatal: bool = True


@dataclass(frozen=True, slots=True)
class Shard:
    """A batch of work that names chats without holding them: some files of a folder
    (``files``: paths relative to ``root``), or the byte range ``[start, end)`` of a
    JSON-lines file of chats whose first line is line ``first_line``. Small and plain, so it
    travels to a worker or a Ray actor for nothing; the worker reads the chats itself."""

    root: str
    files: tuple[str, ...] = ()
    start: int = 0
    end: int = 0
    first_line: int = 1

    def to_json(self) -> str:
        return json.dumps([self.root, list(self.files), self.start, self.end, self.first_line])

    @classmethod
    def from_json(cls, text: str) -> "Shard":
        root, files, start, end, first = json.loads(text)
        return cls(root, tuple(files), start, end, first)


def iter_shards(chats: str | os.PathLike[str], per_shard: int = 16) -> Iterator[Shard]:
    """Cut ``chats`` into shards of about ``per_shard`` chats, lazily (a JSON-lines file is
    read once, for line offsets only). Raises :class:`LorebookError` when ``chats`` does
    not exist."""
    root = Path(chats)
    if not root.is_dir() and not root.is_file():
        raise LorebookError("no such chat file or folder", source=str(chats))
    return _shards(root, per_shard)


def _shards(root: Path, per_shard: int) -> Iterator[Shard]:
    if root.is_dir():
        batch: list[str] = []
        for path in sorted(p for p in root.rglob("*") if p.suffix.lower() in CHAT_SUFFIXES and p.is_file()):
            batch.append(path.relative_to(root).as_posix())
            if len(batch) >= per_shard:
                yield Shard(str(root), tuple(batch))
                batch = []
        if batch:
            yield Shard(str(root), tuple(batch))
        return
    start = pos = 0
    first = line_no = 1
    in_shard = 0
    with open(root, "rb") as fh:
        for line in fh:
            pos += len(line)
            line_no += 1
            if line.strip():
                in_shard += 1
            if in_shard >= per_shard:
                yield Shard(str(root), (), start, pos, first)
                start, first, in_shard = pos, line_no, 0
    if pos > start:
        yield Shard(str(root), (), start, pos, first)


def read_shard(shard: Shard) -> Iterator[ChatItem]:
    """The chat items of a shard."""
    root = Path(shard.root)
    if shard.files:
        for rel in shard.files:
            yield ChatItem(rel, str(root / rel))
        return
    with open(root, "rb") as fh:
        fh.seek(shard.start)
        data = fh.read(shard.end - shard.start)
    if shard.start == 0 and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for n, raw in enumerate(data.split(b"\n"), shard.first_line):
        if raw.strip():
            yield ChatItem(root.name, str(root), n, raw.decode("utf-8", errors="surrogateescape"))


def iter_items(chats: str | os.PathLike[str]) -> Iterator[ChatItem]:
    """Every chat item under ``chats``, lazily (see :func:`iter_shards`)."""
    for shard in iter_shards(chats):
        yield from read_shard(shard)


def parse_item(item: ChatItem) -> tuple[Chat | None, list[Problem]]:
    """The chat of ``item``, or None with the problems that made it unusable."""
    if item.raw is None:
        return _parse_st_file(item)
    return _parse_record(item)


def _fallback_id(item: ChatItem) -> str:
    # Content-derived so every back-end (including Ray, which reads lines without numbers)
    # names the chat alike.
    digest = hashlib.sha1((item.raw or "").strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{item.source}#{digest}"


def _message(m: Any, where: str) -> Message:
    if not isinstance(m, dict):
        raise ValueError(f"{where}: a message must be an object, got {type(m).__name__}")
    if "mes" in m or "name" in m:                       # SillyTavern shape
        name, text = m.get("name", ""), m.get("mes")
        is_user = m.get("is_user", False)
        role = "user" if is_user else "assistant"
    elif "content" in m or "role" in m:                 # chat-completion shape
        given, text = m.get("role"), m.get("content")
        if given not in ("user", "assistant", "system"):
            raise ValueError(f"{where}, field 'role': must be user, assistant or system, got {given!r}")
        role = str(given)
        name = m.get("name", role)
        is_user = role == "user"
    else:
        raise ValueError(f"{where}: a message needs 'mes' (SillyTavern) or 'role' and 'content'")
    if not isinstance(text, str):
        raise ValueError(f"{where}, field {'mes' if 'mes' in m or 'name' in m else 'content'!r}: "
                         f"must be a string, got {type(text).__name__}")
    if not isinstance(name, str):
        raise ValueError(f"{where}, field 'name': must be a string, got {type(name).__name__}")
    is_system = bool(m.get("is_system")) or role == "system"
    return Message(name, text, bool(is_user), is_system)


def _parse_st_file(item: ChatItem) -> tuple[Chat | None, list[Problem]]:
    chat_id = item.source
    try:
        with open(item.path, "rb") as fh:
            data = fh.read(MAX_CHAT_BYTES + 1)
    except OSError as exc:
        return None, [Problem(item.source, chat_id, "unreadable", f"cannot read: {exc.strerror}")]
    if len(data) > MAX_CHAT_BYTES:
        return None, [Problem(item.source, chat_id, "unreadable", f"larger than {MAX_CHAT_BYTES} bytes")]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [Problem(item.source, chat_id, "unreadable", f"not UTF-8: {exc}")]
    messages: list[Message] = []
    whole = _whole_json(text) if item.path.lower().endswith(".json") else None
    if whole is NOT_A_CHAT:
        return None, []                                  # a book or other JSON beside the chats: not a chat
    if whole is not None:
        for i, m in enumerate(whole, 1):
            try:
                messages.append(_message(m, f"message {i}"))
            except ValueError as exc:
                return None, [Problem(item.source, chat_id, "bad_message", str(exc))]
        if not any(not m.is_system for m in messages):
            return None, [Problem(item.source, chat_id, "empty_chat", "no messages to replay")]
        return Chat(chat_id, item.source, tuple(messages)), []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            return None, [Problem(item.source, chat_id, "malformed_line", f"line {n}: not JSON: {exc}")]
        if n == 1 and isinstance(obj, dict) and "mes" not in obj:
            continue                                     # the metadata header
        try:
            messages.append(_message(obj, f"line {n}"))
        except ValueError as exc:
            return None, [Problem(item.source, chat_id, "bad_message", str(exc))]
    if not any(not m.is_system for m in messages):
        return None, [Problem(item.source, chat_id, "empty_chat", "no messages to replay")]
    return Chat(chat_id, item.source, tuple(messages)), []


NOT_A_CHAT: Any = object()


def _whole_json(text: str) -> Any:
    """The messages of a ``.json`` chat (a list, or ``{"messages": [...]}``); :data:`NOT_A_CHAT`
    for one JSON object of another shape (a lorebook kept beside the chats: skipped, not a
    chat); None when the text is not one JSON document (then it is read as JSON lines)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(doc, dict):
        return doc["messages"] if isinstance(doc.get("messages"), list) else NOT_A_CHAT
    return doc if isinstance(doc, list) else None


def _parse_record(item: ChatItem) -> tuple[Chat | None, list[Problem]]:
    try:
        (item.raw or "").encode("utf-8")
    except UnicodeEncodeError as exc:
        return None, [Problem(item.source, _fallback_id(item), "malformed_line",
                              f"line {item.line}: not UTF-8 at character {exc.start}")]
    try:
        obj = json.loads(item.raw or "")
    except json.JSONDecodeError as exc:
        return None, [Problem(item.source, _fallback_id(item), "malformed_line",
                              f"line {item.line}: not JSON: {exc}")]
    if isinstance(obj, list):
        obj = {"messages": obj}
    if not isinstance(obj, dict):
        return None, [Problem(item.source, _fallback_id(item), "malformed_line",
                              f"line {item.line}: a chat must be an object or a list of messages")]
    raw_id = obj.get("id", obj.get("chat_id"))
    chat_id = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else _fallback_id(item)
    problems = [Problem(item.source, chat_id, "unknown_field",
                        f"line {item.line}, field {k!r}: not a chat field (ignored)", fatal=False)
                for k in obj if k not in CHAT_FIELDS]
    msgs = obj.get("messages")
    if not isinstance(msgs, list):
        return None, problems + [Problem(item.source, chat_id, "bad_message",
                                         f"line {item.line}, field 'messages': must be a list")]
    messages: list[Message] = []
    for i, m in enumerate(msgs):
        try:
            messages.append(_message(m, f"line {item.line}, message {i}"))
        except ValueError as exc:
            return None, problems + [Problem(item.source, chat_id, "bad_message", str(exc))]
    if not any(not m.is_system for m in messages):
        return None, problems + [Problem(item.source, chat_id, "empty_chat", f"line {item.line}: no messages")]
    return Chat(chat_id, item.source, tuple(messages)), problems
