"""The ASGI app of ``lorescan serve``: Starlette routes over msgspec models.

:func:`build_app` puts a worker together: its state and engine thread (:mod:`.runtime`), the
three modes' turns (:mod:`.turns`), the book routes (:mod:`.bookroutes`), the error answers
and the outermost ASGI layer (:mod:`.answers`), and here the probes (``/healthz``, ``/readyz``,
``/version``, ``/metrics``, ``/openapi.json``) and the turn routes (read the body within its
limit, decode it, run the turn on the engine thread).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, AsyncIterator, Callable

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import models as m
from .answers import EXCEPTION_HANDLERS, Guard
from .bookroutes import book_routes, json_response
from .decoding import HTTPError, read_body, read_request
from .metrics import Metrics
from .openapi import openapi_document
from .ops import readiness_problems, version_info
from .runtime import CONFIG_ENV, TOKEN_CACHE_TEXTS, ServeConfig
from .turns import Runtime, substitute_hook

__all__ = ["ServeConfig", "build_app", "CONFIG_ENV", "openapi_document", "Runtime", "HTTPError",
           "TOKEN_CACHE_TEXTS", "Metrics"]

log = logging.getLogger("lorescan.serve")

_ST_DECODER = msgspec.json.Decoder(m.STScanRequest)
_SLOT_DECODER = msgspec.json.Decoder(m.SlotRunRequest)
_JANITOR_DECODER = msgspec.json.Decoder(m.JanitorRunRequest)
_substitute = substitute_hook       # the name benchmarks import


def build_app(config: ServeConfig) -> Starlette:
    """The Starlette app for ``config`` (one Runtime per worker process)."""
    rt = Runtime(config)
    max_body = int(config.max_body_mb * (1 << 20))
    openapi = msgspec.json.encode(openapi_document(token=rt.token is not None))
    version_bytes = msgspec.json.encode(version_info())

    async def healthz(request: Request) -> Response:
        return json_response(b'{"status":"ok"}')

    async def readyz(request: Request) -> Response:
        problems = readiness_problems(rt.store.directory, started=rt.ready)
        if problems:
            raise HTTPError(503, "not ready: " + "; ".join(problems), reasons=problems)
        return json_response(msgspec.json.encode({"status": "ready", "books_dir": rt.store.directory}))

    async def version(request: Request) -> Response:
        return json_response(version_bytes)

    async def metrics(request: Request) -> Response:
        rt.gauges()
        return Response(rt.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi_json(request: Request) -> Response:
        return json_response(openapi)

    async def turn(request: Request, decoder: msgspec.json.Decoder, handle: Callable[[Any], bytes]) -> Response:
        t0 = time.monotonic()
        raw = await read_body(request, max_body)
        req = read_request(decoder, raw)
        t1 = time.monotonic()
        timing: list[float] = []
        # a small turn runs on the event loop (serve.runtime's docstring); a JanitorAI book comes in the body
        inline = rt.inline_ok([b.id for b in getattr(req, "books", ())], len(raw))
        body = await rt.run(lambda: handle(req), config.time_limit, timing, inline=inline)
        response = json_response(body)
        # Server-Timing: where a turn's time went inside the worker (read, decode+validate,
        # wait for the engine thread, scan+encode there).
        response.headers["server-timing"] = (f"decode;dur={(t1 - t0) * 1000:.3f}, queue;dur={timing[0] * 1000:.3f}, "
                                             f"engine;dur={timing[1] * 1000:.3f}") if timing else ""
        return response

    async def st_scan(request: Request) -> Response:
        return await turn(request, _ST_DECODER, rt.st_scan)

    async def slot_run(request: Request) -> Response:
        return await turn(request, _SLOT_DECODER, rt.slot_run)

    async def janitor_run(request: Request) -> Response:
        return await turn(request, _JANITOR_DECODER, rt.janitor_run)

    routes = [              # the turns first: the router tries each route's pattern in order
        Route("/v1/st/scan", st_scan, methods=["POST"], name="st_scan"),
        Route("/v1/slot/run", slot_run, methods=["POST"], name="slot_run"),
        Route("/v1/janitor/run", janitor_run, methods=["POST"], name="janitor_run"),
        Route("/healthz", healthz, methods=["GET"], name="healthz"),
        Route("/readyz", readyz, methods=["GET"], name="readyz"),
        Route("/version", version, methods=["GET"], name="version"),
        Route("/metrics", metrics, methods=["GET"], name="metrics"),
        Route("/openapi.json", openapi_json, methods=["GET"], name="openapi"),
        *book_routes(rt),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def publish() -> None:      # other workers' /metrics read this worker's gauges
            while True:
                await asyncio.sleep(1.0)
                try:
                    rt.gauges()
                except Exception:  # noqa: BLE001 - a full disk must not stop the worker's numbers for good
                    log.exception("could not update this worker's metrics")

        await rt.run(lambda: None, 60.0)          # the engine thread runs: the worker is ready
        rt.ready = True
        task = asyncio.create_task(publish())
        try:
            yield
        finally:
            rt.ready = False
            task.cancel()
            rt.metrics.withdraw()
            rt.executor.shutdown(wait=False, cancel_futures=True)

    app = Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
                    lifespan=lifespan)
    app.state.runtime = rt
    return Guard(app, rt)  # type: ignore[return-value]
