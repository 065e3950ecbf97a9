"""The book routes of ``lorescan serve``: ``POST``/``GET /v1/books`` (upload, list) and
``GET``/``DELETE /v1/books/{id}`` (describe, delete), over the worker's :class:`~.store.BookStore`.

An upload is read within ``--max-upload-mb`` (a raw body or one multipart file field), then
read, compiled and stored on the engine thread within ``--upload-time-limit``.
"""
from __future__ import annotations

import re
from typing import Any, Awaitable, Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import LorebookError
from .decoding import HTTPError, read_body
from .runtime import WorkerState, storage_error
from .store import BookNotFound, DamagedBook

__all__ = ["book_routes", "json_response", "one_route"]

_JSON = "application/json"
_BOOK_ID = re.compile(r"[0-9a-f]{32}")


def json_response(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=_JSON)


def one_route(path: str, name: str, **by_method: Callable[[Request], Awaitable[Response]]) -> Route:
    """One route for every method of ``path``, so a 405's ``Allow`` lists them all (two routes on
    one path would each answer with their own methods only)."""
    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await by_method[method](request)

    return Route(path, dispatch, methods=list(by_method), name=name)


def book_routes(rt: WorkerState) -> list[Route]:
    """The two book routes (``books`` and ``book``) of a worker."""
    config = rt.config
    max_upload = int(config.max_upload_mb * (1 << 20))

    async def books_post(request: Request) -> Response:
        q = request.query_params
        name = q.get("name") or None
        fill = q.get("fill_defaults", "true").lower()
        if fill not in ("true", "false", "1", "0"):
            raise HTTPError(422, "fill_defaults must be true or false", path="query.fill_defaults")
        filename = q.get("filename") or ""
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("multipart/form-data"):
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_upload + 65536:
                raise HTTPError(413, f"the upload is {int(declared)} bytes, above the limit of {max_upload} bytes")
            async with request.form(max_files=1, max_fields=10, max_part_size=max_upload) as form:
                upload = form.get("file")
                if upload is None or isinstance(upload, str):
                    raise HTTPError(422, "a multipart upload needs the book in a file field named 'file'",
                                    path="form.file")
                data = await upload.read(max_upload + 1)
                filename = filename or upload.filename or ""
                form_name = form.get("name")
                if name is None and isinstance(form_name, str):
                    name = form_name or None
        else:
            data = await read_body(request, max_upload)
        if len(data) > max_upload:
            raise HTTPError(413, f"the upload is above the limit of {max_upload} bytes")
        if not data:
            raise HTTPError(400, "the upload is empty")
        fill_defaults = fill in ("true", "1")

        def put() -> dict[str, Any]:
            try:
                return rt.store.put(data, filename or "<upload>", name=name, fill_defaults=fill_defaults)
            except LorebookError as exc:
                entry = exc.entry if isinstance(exc.entry, (int, str)) and not isinstance(exc.entry, bool) else None
                raise HTTPError(400, str(exc), source=exc.source, entry=entry, field=exc.field) from None
            except OSError as exc:          # the books directory: its disk, not the book
                raise storage_error(exc) from None

        info = await rt.run(put, config.upload_time_limit)
        return json_response(msgspec.json.encode(info), 201 if info["created"] else 200)

    def _book_id(request: Request) -> str:
        book_id = request.path_params["book_id"]
        if not _BOOK_ID.fullmatch(book_id):
            raise HTTPError(422, "a book id is 32 lowercase hex digits", path="path.book_id")
        return book_id

    async def book_get(request: Request) -> Response:
        book_id = _book_id(request)
        try:
            return json_response(msgspec.json.encode(rt.store.info(book_id)))
        except BookNotFound:
            raise HTTPError(404, f"no book with id {book_id!r}") from None
        except DamagedBook as exc:
            raise HTTPError(409, str(exc)) from None

    async def book_delete(request: Request) -> Response:
        book_id = _book_id(request)
        if not await rt.run(lambda: rt.delete_book(book_id), config.time_limit):
            raise HTTPError(404, f"no book with id {book_id!r}")
        return Response(status_code=204)

    async def books_list(request: Request) -> Response:
        infos, unreadable = [], []
        for book_id in rt.store.ids():
            try:
                infos.append(rt.store.info(book_id))
            except BookNotFound:
                continue
            except DamagedBook:         # listed apart: one bad file must not hide every book
                unreadable.append(book_id)
        return json_response(msgspec.json.encode({"books": infos, "unreadable": unreadable}))

    return [one_route("/v1/books", "books", POST=books_post, GET=books_list),
            one_route("/v1/books/{book_id}", "book", GET=book_get, DELETE=book_delete)]
