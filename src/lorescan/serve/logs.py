"""The service's logs: one JSON object per line (or plain text), each carrying its request's id.

The request id is taken from the ``X-Request-Id`` header when it is a sane token (at most 128
characters of ``A-Z a-z 0-9 . _ : -``), else made (32 hex digits). It is echoed in the answer's
``X-Request-Id`` and set in :data:`REQUEST_ID` for the request's life, so every line logged while
the request runs (the engine thread included: jobs run in a copy of the request's context) names it.
Standard library only.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import uuid
from contextvars import ContextVar
from typing import Any, Mapping

__all__ = ["REQUEST_ID", "JSONFormatter", "TextFormatter", "logging_config", "request_id_from", "request_id_of",
           "log_access", "ACCESS_LOGGER"]

REQUEST_ID: ContextVar[str | None] = ContextVar("lorescan_request_id", default=None)
ACCESS_LOGGER = "lorescan.serve.access"
_access = logging.getLogger(ACCESS_LOGGER)
_SANE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
# attributes every LogRecord has; anything else on a record came in through ``extra=`` and is logged
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName",
                                                                   "color_message"}   # uvicorn's


class _RequestIds:
    """New request ids: 32 hex digits, a random half drawn once per process and a counter (a
    ``uuid4`` per request cost a ``getrandom`` call each, 25 us on a loaded machine); unique within
    a worker, and between workers as long as their random halves differ (64 bits). A forked
    child draws a half of its own."""

    __slots__ = ("prefix", "count")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = uuid.uuid4().hex[:16]
        self.count = 0

    def new(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count & 0xFFFFFFFFFFFFFFFF:016x}"


_NEW_ID = _RequestIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_NEW_ID.reset)


def request_id_from(header: bytes | None) -> str:
    """The request id for an ``X-Request-Id`` header value (None: absent): the value if sane, else a new one."""
    if header is not None:
        try:
            text = header.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        if _SANE_ID.fullmatch(text):
            return text
    return _NEW_ID.new()


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JSONFormatter(logging.Formatter):
    """A record as one JSON object: ``ts``, ``level``, ``logger``, ``message``, ``pid``,
    ``request_id`` (when in a request), the record's ``extra`` fields and ``exc`` (a traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage(),
            "pid": os.getpid()}
        rid = REQUEST_ID.get()
        if rid is not None:
            out["request_id"] = rid
        out.update(_fields(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """A record as one line of text, the request id in brackets."""

    def format(self, record: logging.LogRecord) -> str:
        rid = REQUEST_ID.get()
        extra = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = (f"{record.levelname}: {record.name}: {record.getMessage()}" + (f" [{rid}]" if rid else "")
                + (f" {extra}" if extra else ""))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def logging_config(level: str = "info", fmt: str = "json") -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for the service's and uvicorn's loggers (uvicorn's
    ``log_config``: every worker process applies it). uvicorn's own access log stays off: the
    service writes its own, with the request id (``--access-log``)."""
    formatter = {"()": f"{__name__}.{'JSONFormatter' if fmt == 'json' else 'TextFormatter'}"}
    handler = {"class": "logging.StreamHandler", "formatter": "lorescan", "stream": "ext://sys.stderr"}
    upper = level.upper()
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"lorescan": formatter},
        "handlers": {"lorescan": handler},
        "loggers": {
            "lorescan.serve": {"handlers": ["lorescan"], "level": upper, "propagate": False},
            ACCESS_LOGGER: {"level": "INFO"},          # on or off by --access-log, not by the level
            "uvicorn": {"handlers": ["lorescan"], "level": upper, "propagate": False},
            "uvicorn.error": {"level": upper},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def request_id_of(scope: Mapping[str, Any]) -> str:
    """The request id of an ASGI request (its ``X-Request-Id`` header if sane, else a new one)."""
    for k, v in scope["headers"]:
        if k == b"x-request-id":
            return request_id_from(v)
    return request_id_from(None)


def log_access(scope: Mapping[str, Any], route: str, status: int, seconds: float) -> None:
    """One access-log line for a request answered with ``status`` after ``seconds``."""
    client = scope.get("client")
    _access.info("%s %s %d", scope.get("method"), scope.get("path"), status,
                 extra={"method": scope.get("method"), "path": scope.get("path"), "route": route, "status": status,
                        "duration_ms": round(seconds * 1000, 3), "client": f"{client[0]}:{client[1]}" if client else None})
