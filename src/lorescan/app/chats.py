"""One chat file for the ``scan`` and ``explain`` commands.

Accepted shapes: a SillyTavern ``.jsonl`` chat (the metadata first line is optional), a JSON
list of messages, or a JSON object ``{"messages": [...]}``. A message is SillyTavern's
``{name, mes, is_user, is_system}`` or a chat-completion ``{role, content}``; the per-message
reading is :mod:`lorescan.replay.chats`' (one reader for both commands). System messages
are kept in the numbering (``message 3`` is the third message of the file) but not scanned,
as SillyTavern does not scan them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import FormatError, LorebookError
from ..formats._safety import parse_json
from ..limits import DEFAULT_LIMITS
from ..replay.chats import MAX_CHAT_BYTES, Message, _message
from ..st import ChatMessage

__all__ = ["ChatFile", "read_chat"]

_CHAT_LIMITS = replace(DEFAULT_LIMITS, max_file_bytes=MAX_CHAT_BYTES)


@dataclass(frozen=True, slots=True)
class ChatFile:
    """A chat as the commands use it. ``messages``: the scanned messages, oldest first;
    ``numbers``: for each of them, its 1-based place among the file's messages (system
    messages count, the metadata line does not); ``total``: messages in the file;
    ``user_name`` / ``character_name``: from the ``.jsonl`` metadata line, when present;
    ``roles``: ``user``/``assistant`` per scanned message (slot mode)."""

    path: str
    messages: tuple[ChatMessage, ...]
    numbers: tuple[int, ...]
    total: int
    roles: tuple[str, ...]
    user_name: str | None = None
    character_name: str | None = None


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CHAT_BYTES + 1)
    except OSError as exc:
        raise FormatError(f"cannot read the chat: {exc.strerror or exc}", source=path) from exc
    if len(raw) > MAX_CHAT_BYTES:
        raise FormatError(f"the chat file is larger than {MAX_CHAT_BYTES} bytes", source=path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"the chat is not UTF-8 (byte {exc.start})", source=path) from exc


def read_chat(path: str, *, hint: bool = True) -> ChatFile:
    """Read the chat file ``path`` as ``lorescan scan --chat`` does.

    Accepted: a SillyTavern ``.jsonl`` chat (with or without its metadata line), a JSON list
    of messages, or ``{"messages": [...]}``; a message is ``{name, mes, is_user, is_system}``
    or ``{role, content}``. System messages count in :attr:`ChatFile.numbers` but are not in
    :attr:`ChatFile.messages` (SillyTavern does not scan them).

    Args:
        path: the file.
        hint: when the file is not a chat but reads as a lorebook, say so in the error.

    Returns:
        A :class:`ChatFile`; its ``messages`` go straight to ``STEngine.scan``.

    Raises:
        FormatError: naming the file and the message (``message 3``, or ``line 4`` of a
            ``.jsonl`` file) for anything else.
    """
    try:
        return _read_chat(path)
    except FormatError as exc:
        entries = _book_entries(path) if hint else None
        if entries is None:
            raise
        raise FormatError(f"this looks like a lorebook ({entries} entr{'ies' if entries != 1 else 'y'}), not a "
                          f"chat: give lorebooks as BOOK and the chat with --chat (the chat reader said: "
                          f"{exc.problem})", source=path) from exc


def _book_entries(path: str) -> int | None:
    """How many entries ``path`` holds if it reads as a lorebook, else None."""
    from ..formats import load  # import-cost: the book readers load only to explain a failed chat
    try:
        return len(load(path).entries)
    except LorebookError:
        return None


def _read_chat(path: str) -> ChatFile:
    text = _read_text(path)
    stripped = text.lstrip()
    meta: dict[str, Any] = {}
    items: list[tuple[str, Any]] = []          # (where, raw message)
    doc: Any = None
    if stripped.startswith("[") or stripped.startswith("{"):
        try:
            doc = parse_json(text, source=path, limits=_CHAT_LIMITS)
        except FormatError:
            if stripped.startswith("["):
                raise
            doc = None                          # several JSON lines: a .jsonl chat
        if isinstance(doc, dict) and "messages" not in doc:
            doc = None                          # one line: a .jsonl chat of one line
    if doc is not None:
        if isinstance(doc, dict):
            doc = doc["messages"]
            if not isinstance(doc, list):
                raise FormatError(f"'messages' must be a list, got {type(doc).__name__}", source=path,
                                  field="messages")
        if not isinstance(doc, list):
            raise FormatError(f"a chat must be a list of messages, got {type(doc).__name__}", source=path)
        items = [(f"message {i}", m) for i, m in enumerate(doc, 1)]
    elif not stripped:
        raise FormatError("the chat file is empty", source=path)
    else:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        for k, (n, line) in enumerate(lines):
            try:
                obj = parse_json(line, source=path, limits=_CHAT_LIMITS)
            except FormatError as exc:
                raise FormatError(f"line {n}: {exc.problem}", source=path) from exc
            if k == 0 and isinstance(obj, dict) and not ({"mes", "role", "content", "name"} & obj.keys()):
                meta = obj                     # the metadata line of a SillyTavern chat
                continue
            items.append((f"message {len(items) + 1} (line {n})", obj))
    messages: list[ChatMessage] = []
    numbers: list[int] = []
    roles: list[str] = []
    for number, (where, raw) in enumerate(items, 1):
        try:
            m: Message = _message(raw, where)
        except ValueError as exc:
            raise FormatError(str(exc), source=path) from exc
        if m.is_system:
            continue
        messages.append(ChatMessage(m.name, m.text, m.is_user))
        numbers.append(number)
        roles.append("user" if m.is_user else "assistant")
    if not items:
        raise FormatError("the chat has no messages (expected SillyTavern .jsonl, a JSON list of messages, "
                          'or {"messages": [...]})', source=path)
    user = meta.get("user_name")
    char = meta.get("character_name")
    return ChatFile(path, tuple(messages), tuple(numbers), len(items), tuple(roles),
                    user if isinstance(user, str) and user else None,
                    char if isinstance(char, str) and char else None)
