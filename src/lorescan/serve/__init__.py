"""``lorescan serve``: the engine as an HTTP service (from a checkout: ``pip install ".[serve]"``).

:mod:`.app` (the ASGI app, put together from :mod:`.runtime` (a worker's state and engine thread), :mod:`.turns`
(the three modes' handlers), :mod:`.bookroutes` and :mod:`.answers` (error answers, the outer ASGI layer)),
:mod:`.run` (:func:`serve`: uvicorn and its workers), :mod:`.models` (request/response shapes),
:mod:`.store` (compiled books on disk and in memory), :mod:`.metrics`, :mod:`.auth`,
:mod:`.openapi` (the ``/openapi.json`` document), :mod:`.config` (settings from flags, environment and a TOML file), :mod:`.logs` (JSON logs,
request ids). The API is documented in ``docs/service.md`` and served as OpenAPI at ``/openapi.json``.
Names load on first use, so :mod:`.config` (standard library only) imports without the serve extra.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ServeConfig", "build_app", "create_app", "openapi_document", "serve", "BookStore"]

_HOME = {"ServeConfig": "runtime", "build_app": "app", "create_app": "run", "openapi_document": "openapi",
         "serve": "run", "BookStore": "store"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'lorescan.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
