"""How a ``lorescan serve`` worker answers what went wrong: the Starlette exception handlers
(:class:`~.decoding.HTTPError` as its JSON body, routing 404/405, anything else a JSON 500) and
:class:`Guard`, the outermost ASGI layer (auth, the worker's body budget (:mod:`.bodies`), the error
net, request metrics, access log).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Awaitable, Callable, MutableMapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from .auth import check_header
from .bodies import RETRY_AFTER, over_budget
from .decoding import HTTPError
from .logs import REQUEST_ID, log_access, request_id_of
from .ops import routing_error_text
from .runtime import WorkerState

__all__ = ["Guard", "EXCEPTION_HANDLERS"]

log = logging.getLogger("lorescan.serve")
_SERIES_KEPT = 512          # (route, method, status) series whose metric objects a worker keeps at hand


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)


async def routing_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)    # Starlette's 404 (no route) and 405 (wrong method)
    text = routing_error_text(request.method, request.url.path, exc.status_code, exc.headers, exc.detail)
    return JSONResponse({"error": text}, status_code=exc.status_code, headers=exc.headers)


async def internal_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, ClientDisconnect):       # gone (or closed past its read timeout): nobody to answer
        return Response(status_code=400)
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": f"internal error ({type(exc).__name__}); the worker is unaffected"},
                        status_code=500)


EXCEPTION_HANDLERS = {HTTPError: http_error, StarletteHTTPException: routing_error, Exception: internal_error}


class Guard:
    """Outermost ASGI layer: auth, error bodies, the 'nothing crashes a worker' net, metrics."""

    _ROUTES = {"/healthz": "healthz", "/readyz": "readyz", "/version": "version", "/metrics": "metrics",
               "/openapi.json": "openapi",
               "/v1/books": "books", "/v1/st/scan": "st_scan", "/v1/slot/run": "slot_run",
               "/v1/janitor/run": "janitor_run"}

    def __init__(self, app: Starlette, rt: WorkerState) -> None:
        self.app = app
        self.rt = rt
        self.state = app.state
        self.pid = str(os.getpid()).encode()
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}    # metric series by route, method, status
        config = rt.config
        self.max_body = int(config.max_body_mb * (1 << 20))
        self.max_upload = int(config.max_upload_mb * (1 << 20)) + 65536      # a multipart upload's framing

    def _route(self, path: str) -> str:
        found = self._ROUTES.get(path)
        if found is not None:
            return found
        return "book" if path.startswith("/v1/books/") else "other"

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[MutableMapping[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        route = self._route(scope["path"])
        status = {"code": 500, "sent": False}
        rid = request_id_of(scope)
        rid_token = REQUEST_ID.set(rid)

        async def send_wrapped(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["sent"] = True
                message["headers"] = [*message.get("headers", ()), (b"x-lorescan-worker", self.pid),
                                      (b"x-request-id", rid.encode()),
                                      (b"server-timing", b"app;dur=%.3f" % ((time.perf_counter() - t0) * 1000))]
            await send(message)

        budget = self.rt.bodies
        held = 0            # bytes of this request's body taken from the worker's budget
        got = 0             # bytes of its body received so far

        async def receive_counted() -> Any:
            nonlocal held, got
            message = await receive()
            if message["type"] == "http.request":
                got += len(message.get("body", b""))
                if got > held:                  # beyond what it declared (or a chunked body)
                    if not budget.take(got - held):
                        raise HTTPError(503, over_budget(budget), retry_after=RETRY_AFTER)
                    held = got
            return message

        try:
            token = self.rt.token
            auth = declared = None
            for k, v in scope["headers"]:
                if k == b"authorization":
                    auth = v
                elif k == b"content-length":
                    declared = v
            if token is not None and route not in ("healthz", "readyz") and not check_header(auth, token):
                raise HTTPError(401, "missing or wrong bearer token (Authorization: Bearer <token>)")
            if declared is not None and declared.isdigit():
                n = int(declared)
                # a body above its route's limit is refused (413) without being read: it takes nothing
                if 0 < n <= (self.max_upload if route == "books" else self.max_body):
                    if not budget.take(n):
                        raise HTTPError(503, over_budget(budget), retry_after=RETRY_AFTER)
                    held = n
            await self.app(scope, receive_counted, send_wrapped)
        except HTTPError as exc:
            if not status["sent"]:
                await JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)(scope, receive, send_wrapped)
        except ClientDisconnect:
            log.info("%s %s: the client left before its request was read", scope.get("method"), scope.get("path"))
        except Exception as exc:  # noqa: BLE001 - the worker must answer and live on
            if not status["sent"]:
                log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
                await JSONResponse({"error": f"internal error ({type(exc).__name__}); the worker is unaffected"},
                                   status_code=500)(scope, receive, send_wrapped)
        finally:
            method = scope.get("method", "")
            code = status["code"]
            series = self._series.get((route, method, code))
            if series is None:
                mt = self.rt.metrics
                series = (mt.child("lorescan_requests_total", route=route, method=method, status=str(code)),
                          mt.child("lorescan_request_seconds", route=route))
                if len(self._series) < _SERIES_KEPT:       # methods are the client's: keep a bounded few
                    self._series[(route, method, code)] = series
            elapsed = time.perf_counter() - t0
            series[0].inc()
            series[1].observe(elapsed)
            if self.rt.config.access_log:
                log_access(scope, route, status["code"], elapsed)
            budget.give(held)
            REQUEST_ID.reset(rid_token)
