"""``lorescan serve``: the engine as an HTTP service (install with ``pip install "lorescan[serve]"``).

:mod:`.app` (the ASGI app and :func:`serve`), :mod:`.models` (request/response shapes),
:mod:`.store` (compiled books on disk and in memory), :mod:`.metrics`, :mod:`.auth`.
The API is documented in ``docs/service.md`` and served as OpenAPI at ``/openapi.json``.
"""
from .app import ServeConfig, build_app, create_app, openapi_document, serve
from .store import BookStore

__all__ = ["ServeConfig", "build_app", "create_app", "openapi_document", "serve", "BookStore"]
