"""Running the service: :func:`serve` (uvicorn, its workers, logging, the metrics directory) and
:func:`create_app`, the factory each uvicorn worker calls."""
from __future__ import annotations

import logging
import logging.config
import os
import signal
import sys
from typing import Any

from .app import CONFIG_ENV, ServeConfig, build_app
from .auth import read_token
from .config import is_loopback
from .logs import logging_config
from .metrics import multiprocess_dir, remove_multiprocess_dir
from .protocol import BoundedHttpProtocol, configure

__all__ = ["serve", "create_app"]

log = logging.getLogger("lorescan.serve")


def create_app() -> Any:
    """Factory for uvicorn workers: the config comes from ``LORESCAN_SERVE_WORKER_CONFIG``."""
    config = ServeConfig.from_env()
    if not logging.getLogger("lorescan.serve").handlers:      # run by uvicorn directly, not by `serve`
        logging.config.dictConfig(logging_config(config.log_level, config.log_format))
    configure(config.header_timeout, config.body_timeout)     # this worker's connections
    return build_app(config)


def serve(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
          settings: dict[str, Any] | None = None) -> None:
    """Run the service under uvicorn (blocks). ``settings`` (name -> value and source, no secret)
    is logged at start-up."""
    import uvicorn  # import-cost: the serve extra loads only when serving
    token = read_token(config.token_file)         # a bad token file fails here, not in every worker
    os.makedirs(config.books_dir, exist_ok=True)
    os.environ[CONFIG_ENV] = config.to_env()
    log_config = logging_config(config.log_level, config.log_format)
    logging.config.dictConfig(log_config)
    metrics_dir = multiprocess_dir()              # before any worker imports prometheus_client
    log.info("starting lorescan serve on %s:%d with %d worker(s)", host, port, workers,
             extra={"settings": settings or {}, "metrics_dir": metrics_dir})
    if token is None and not is_loopback(host):    # only with --allow-anonymous (the checks refuse it otherwise)
        log.warning("serving %s without a token: anyone who can reach it can upload, delete and scan books", host)
    # uvloop and httptools are the serve extra's fast event loop and HTTP parser (named here so
    # a missing one fails loudly instead of uvicorn falling back to the slow pure-Python ones):
    # the protocol is uvicorn's http="httptools" one with read timeouts (serve/protocol.py).
    loop = "uvloop" if sys.platform != "win32" else "asyncio"
    # uvicorn ends by raising the signal that stopped it again, to the handler found before it ran:
    # this one turns SIGTERM into SystemExit, so the metrics directory is removed below
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        uvicorn.run("lorescan.serve.run:create_app", factory=True, host=host, port=port,
                    workers=workers if workers > 1 else None, log_level=config.log_level, log_config=log_config,
                    access_log=False, loop=loop, http=BoundedHttpProtocol)
    finally:
        remove_multiprocess_dir(metrics_dir)
