"""The HTTP protocol of ``lorescan serve``'s workers: uvicorn's httptools protocol with read timeouts.

uvicorn closes a keep-alive connection that stays idle, but a client that sends part of a
request and then stalls (a header a byte at a time, a body that never ends) keeps its socket,
and the body read so far, for as long as it likes: 50 such sockets all stayed open for 30 s.
:class:`BoundedHttpProtocol` gives every request two deadlines:

- ``header_timeout``: from the connection's start (or the end of its previous response) to the
  end of the request's headers;
- ``body_timeout``: from the end of the headers to the end of the body.

Past either the connection is closed: the request's handler sees the client gone and drops
what it had read. The deadlines are set per worker process by :func:`configure` (the app
factory calls it from the worker's config).

It also writes each response in one send: uvicorn writes a response's status line and headers
when the app starts the response and its body when the app sends it, two ``send`` calls a
request, and on loopback or a fast network each costs the worker ~30-70 us of CPU (the kernel
hands the segment to the receiver within the call). :class:`_OneSend` holds what is written
during one turn of the event loop and sends it together at the end of that turn (before any
close), so the order of the bytes and of the connection's events is unchanged.
"""
from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["BoundedHttpProtocol", "configure"]


class _OneSend:
    """The connection's transport, its writes of one event-loop turn joined into one send."""

    __slots__ = ("_transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers or body are late."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._read_deadline = self.loop.call_later(seconds, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection from %s: its request was not read in time", self.client)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = _OneSend(transport, self.loop)  # type: ignore[assignment]
        self._arm(self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_timeout)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)          # a request read already starts now
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._arm(self.header_timeout)       # the next request on this connection


def configure(header_timeout: float, body_timeout: float) -> None:
    """Set this worker process's read deadlines (seconds)."""
    BoundedHttpProtocol.header_timeout = header_timeout
    BoundedHttpProtocol.body_timeout = body_timeout
