"""The delta form of ``POST /v1/st/scan`` (docs/service.md#chat-delta): a platform that keeps the
chat sends the messages after a prefix the worker already holds, and the prefix's digest.

Each worker holds the last chat it was sent under each ``chat_id`` (a :class:`ChatPrefixes`
LRU, bounded in chats and in estimated bytes). A request with ``prefix: {count, digest}``
stands for the held chat's first ``count`` messages followed by its ``messages``; when the
worker holds no chat under that id, or holds fewer messages, or its first ``count`` messages
have another digest, the answer is 409 with ``code: "prefix_unknown"`` and the client resends
the whole chat. A delta is used only when the digests are equal, so a stale, reordered or
edited history is never scanned in place of the one the client means.

The digest is a hash chain over the messages, so each side extends it by the new messages
only and any SHA-256 (hashlib, WebCrypto) computes it::

    d_0     = SHA-256(b"lorescan chat v1")
    d_(i+1) = SHA-256(d_i || u32le(len16(name)) || utf16le(name)
                          || u32le(len16(mes)) || utf16le(mes) || (0x01 if is_user else 0x00))

``len16`` counts UTF-16 code units (a JavaScript string's ``length``) and ``utf16le`` keeps
lone surrogates as they are, so the encoding is one-to-one on JavaScript strings as on Python's.
The digest of the first ``n`` messages is ``d_n`` in lowercase hex (64 characters).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Iterable, Protocol, TypeVar

import msgspec

from .decoding import HTTPError

__all__ = ["CHAIN_SEED", "PREFIX_UNKNOWN", "ChatPrefixes", "PrefixUnknown", "chat_digest", "next_digest"]

PREFIX_UNKNOWN = "prefix_unknown"     # the 409 answer's ``code``
_R = TypeVar("_R")

CHAIN_SEED = hashlib.sha256(b"lorescan chat v1").digest()
_MESSAGE_OVERHEAD = 160       # estimated bytes of a held message beyond its text: struct, strings, digest


class _Message(Protocol):
    name: str
    mes: str
    is_user: bool


def next_digest(previous: bytes, name: str, mes: str, is_user: bool) -> bytes:
    """The chain's next link: ``previous`` extended by one message (the module docstring)."""
    n = name.encode("utf-16-le", "surrogatepass")
    t = mes.encode("utf-16-le", "surrogatepass")
    return hashlib.sha256(b"".join((previous, (len(n) // 2).to_bytes(4, "little"), n,
                                    (len(t) // 2).to_bytes(4, "little"), t,
                                    b"\x01" if is_user else b"\x00"))).digest()


def chat_digest(messages: Iterable[_Message]) -> str:
    """The digest (hex) of these messages, as a ``prefix.digest`` names them."""
    d = CHAIN_SEED
    for x in messages:
        d = next_digest(d, x.name, x.mes, x.is_user)
    return d.hex()


class PrefixUnknown(Exception):
    """The worker does not hold the prefix a delta request names; the text says which part failed."""


def _size(messages: Iterable[Any]) -> int:
    return sum(len(x.mes) + len(x.name) + _MESSAGE_OVERHEAD for x in messages)


class _Held:
    """One chat as last sent: its messages and the chain's links, extended on demand."""

    __slots__ = ("messages", "links", "nbytes")

    def __init__(self, messages: list[Any], links: list[bytes] | None = None, nbytes: int | None = None) -> None:
        self.messages = messages
        self.links = links or [CHAIN_SEED]      # links[i] = d_i, computed up to where a delta asked
        self.nbytes = _size(messages) if nbytes is None else nbytes

    def link(self, count: int) -> bytes:
        links, messages = self.links, self.messages
        while len(links) <= count:
            x = messages[len(links) - 1]
            links.append(next_digest(links[-1], x.name, x.mes, x.is_user))
        return links[count]


class ChatPrefixes:
    """The chats a worker holds for delta requests, by ``chat_id``: an LRU of at most
    ``max_chats`` chats and about ``max_bytes`` of their text (a chat larger than that alone is
    not held: its deltas are answered 409 and it is sent whole)."""

    def __init__(self, max_chats: int, max_bytes: int) -> None:
        self.max_chats = max(1, max_chats)
        self.max_bytes = max(1, max_bytes)
        self._lru: OrderedDict[str, _Held] = OrderedDict()
        self._bytes = 0

    def hold(self, chat_id: str, messages: list[Any]) -> None:
        """Hold ``messages`` as the whole chat ``chat_id`` (what a full request sent)."""
        self._put(chat_id, _Held(list(messages)))

    def resolve(self, chat_id: str, count: int, digest: str, new: list[Any]) -> list[Any]:
        """The whole chat a delta stands for (the held chat's first ``count`` messages, then
        ``new``), which the worker then holds; :class:`PrefixUnknown` when it does not hold them."""
        held = self._lru.get(chat_id)
        if held is None:
            raise PrefixUnknown(f"this worker holds no chat {chat_id!r} (never sent here, dropped, or the "
                                "worker restarted)")
        if len(held.messages) < count:
            raise PrefixUnknown(f"this worker holds {len(held.messages)} messages of chat {chat_id!r}, "
                                f"not {count}")
        if held.link(count).hex() != digest:
            raise PrefixUnknown(f"the first {count} messages this worker holds of chat {chat_id!r} have "
                                "another digest (the history was edited, reordered or sent elsewhere)")
        if count == len(held.messages):     # the steady turn: the held chat grows in place (no copies)
            added = _size(new)
            held.messages.extend(new)
            held.nbytes += added
            self._bytes += added
            if held.nbytes > self.max_bytes:        # grown past the bound alone: no longer held
                del self._lru[chat_id]
                self._bytes -= held.nbytes
            else:
                self._lru.move_to_end(chat_id)
                self._trim()
            return held.messages
        kept = held.messages[:count]
        nbytes = held.nbytes - _size(held.messages[count:]) + _size(new)
        whole = kept + list(new)
        # the links of the kept prefix stay valid; the new messages' are computed when a delta needs them
        self._put(chat_id, _Held(whole, held.links[:count + 1], nbytes))
        return whole

    def _put(self, chat_id: str, held: _Held) -> None:
        old = self._lru.pop(chat_id, None)
        if old is not None:
            self._bytes -= old.nbytes
        if held.nbytes > self.max_bytes:
            return
        self._lru[chat_id] = held
        self._bytes += held.nbytes
        self._trim()

    def _trim(self) -> None:
        """Drop the oldest chats past the bounds."""
        while self._lru and (len(self._lru) > self.max_chats or self._bytes > self.max_bytes):
            _, dropped = self._lru.popitem(last=False)
            self._bytes -= dropped.nbytes

    def whole_request(self, req: _R) -> _R:
        """The request with the whole chat in ``messages`` (a delta resolved; a full request with
        a ``chat_id`` held for the next delta); 409 ``prefix_unknown`` for a prefix not held,
        422 at ``$.prefix`` for a prefix without a ``chat_id``."""
        prefix, chat_id = getattr(req, "prefix"), getattr(req, "chat_id")
        if prefix is None:
            if chat_id is not None:
                self.hold(chat_id, getattr(req, "messages"))
            return req
        if chat_id is None:
            raise HTTPError(422, "a prefix names a chat the worker holds: it needs the chat_id", path="$.prefix")
        try:
            whole = self.resolve(chat_id, prefix.count, prefix.digest, getattr(req, "messages"))
        except PrefixUnknown as exc:
            raise HTTPError(409, f"{exc}; send the whole chat (no prefix)", code=PREFIX_UNKNOWN) from None
        return msgspec.structs.replace(req, messages=whole, prefix=None)  # type: ignore[type-var]

    @property
    def nbytes(self) -> int:
        """Estimated bytes held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, chat_id: object) -> bool:
        return chat_id in self._lru
