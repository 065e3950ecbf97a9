"""BookStore: uploaded books, compiled once, kept on disk and in a bytes-bounded memory LRU.

A book's id is content-addressed: a hash of the uploaded bytes, the reading options and the
lorescan version, so the same upload gives the same id in every worker and after a restart,
and a new lorescan never reads a file an older one compiled. For each id the directory holds

    <id>.json                 what GET /v1/books/{id} answers (name, format, entries, losses)
    <id>.<rules><SUFFIX>      the CompiledBook for one set of match rules (MatchOptions)
    <id>.keys-<tag><SUFFIX>   a keys part alone: lorebook-slot mode's pool of this book, compiled
                              for one set of specs and rules (:meth:`BookStore.get_keys`)

The default rules (SillyTavern's, case-insensitive, substrings) are compiled at upload;
other rules are compiled on first use and stored beside it. Files are written to a temporary
name and renamed, so workers sharing the directory never read half a file.

The compiled-file format is two functions, :func:`write_compiled` and :func:`read_compiled`,
and :data:`SUFFIX`: the compact ``.lsc`` form (:func:`lorescan.save_compiled` /
:func:`lorescan.load_compiled`), which loads in milliseconds and never runs code from the
file.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ..st.compiled import CompiledBook, compile_book, load_compiled
from ..match.compile import CompiledKeys, compile_keys, load_keys
from ..match.keys import KeySpec
from ..match.lsc import save_compiled
from ..errors import FormatError, LorebookError
from ..formats import load
from ..formats.convert import convert
from ..formats._safety import parse_json
from ..formats.load import DEFAULT_LIMITS, Limits, detect_format
from ..formats.sillytavern import read_world
from ..limits import DEFAULT_LIMITS as BOOK_LIMITS, Limits as BookLimits
from ..model import Lorebook
from ..match.options import MatchOptions
from ..st.settings import Compat

__all__ = ["BookStore", "StoredBook", "BookNotFound", "DamagedBook", "SUFFIX", "FORMAT", "DEFAULT_RULES",
           "write_compiled", "read_compiled", "keys_tag"]

log = logging.getLogger("lorescan.serve")

FORMAT = "lsc"
SUFFIX = ".lsc"
DEFAULT_RULES: MatchOptions = Compat.sillytavern().match_options()


def write_compiled(compiled: CompiledBook, path: str) -> None:
    """Write ``compiled`` to ``path`` (the caller renames it into place)."""
    save_compiled(compiled, path)


def read_compiled(path: str, verify: bool = False) -> CompiledBook:
    """The CompiledBook stored at ``path`` (a private snapshot of the file; entries, plans and
    regexes are built when a scan first needs them, each section checked at its first read;
    ``verify``: every section now). Raises CompiledFormError (a LorebookError naming the file)
    for a damaged or foreign file."""
    return load_compiled(path, verify=verify)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("lorescan")
    except Exception:           # running from a source tree: the version in pyproject
        return "0.1.0"


_TAGS: dict[MatchOptions, str] = {}     # rules_tag by rules (a handful of combinations a worker sees)


def rules_tag(options: MatchOptions) -> str:
    """A short stable name for a set of match rules (part of a compiled file's name); computed once
    per set of rules (every book look-up names its rules)."""
    found = _TAGS.get(options)
    if found is None:
        found = _rules_tag(options)
        if len(_TAGS) < 64:
            _TAGS[options] = found
    return found


def _rules_tag(options: MatchOptions) -> str:
    rules = [options.case_sensitive, options.match_whole_words, options.word_chars, options.nospace_scripts,
             options.multiword, options.blank_keys]
    if options.expressions:          # key expressions compile extra keys (tags without them are unchanged)
        rules.append(True)
    text = json.dumps(rules)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def keys_tag(specs: Sequence[KeySpec], options: MatchOptions, limits: Any, name: str, source: str) -> str:
    """A digest of everything ``compile_keys`` reads (part of a stored keys file's name): equal
    tags mean equal compiled keys. (The book id already names the lorescan version.)"""
    h = hashlib.sha256()
    h.update(repr((options, limits, name, source, len(specs))).encode("utf-8", "surrogatepass"))
    for spec in specs:
        h.update(repr(spec).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:24]


class BookNotFound(KeyError):
    """No stored book has this id."""


class DamagedBook(Exception):
    """A stored book's file cannot be read back (truncated, changed or corrupted on disk).

    ``problem`` says what is wrong without naming the server's paths (it is shown to clients;
    the log names the file). Uploading the same book again rewrites its files."""

    def __init__(self, book_id: str, problem: str) -> None:
        super().__init__(f"the stored book {book_id!r} is damaged ({problem}); upload it again to repair it")
        self.book_id = book_id
        self.problem = problem


@dataclass(frozen=True, slots=True)
class StoredBook:
    """What the store knows about one book: its description (GET answer) and its Lorebook."""

    id: str
    info: dict[str, Any]


class BookStore:
    """Books uploaded to the service: ``put`` (compile once, store), ``get`` (compiled, for
    given match rules), ``info``, ``delete``.

    ``directory``: where compiled books live (shared by every worker; created if absent).
    ``cache_bytes``: bound of the in-memory LRU of compiled books, measured as the size of
    their stored files (a compiled book in memory is a small multiple of that).
    ``limits``: what an uploaded book may cost (:class:`lorescan.limits.Limits`).
    Safe to call from several threads.
    """

    def __init__(self, directory: str, *, cache_bytes: int = 512 * 1024 * 1024,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.cache_bytes = cache_bytes
        self.limits = limits
        # compiled books by (id, rules tag), and slot pools' compiled keys by (id, "keys-" + keys tag)
        self._lru: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        # the LRU's keys by book id (a look-up by book never walks the LRU: thousands of books)
        self._keys: dict[str, set[tuple[str, str]]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._version = _version()
        self.compiles = 0           # counters for /metrics
        self.file_loads = 0
        self.hits = 0               # in-memory LRU hits and misses (a miss reads a file or compiles)
        self.misses = 0
        self.on_change: Callable[[], None] | None = None
        # called (outside the lock) with the ids of books the LRU let go, so whatever else holds
        # them (the service's engines) can let go too: the cache bound is a bound on the worker
        self.on_evict: Callable[[set[str]], None] | None = None
        # when set, what the LRU lets go is appended here rather than freed on the spot, so its
        # owner frees it off a request's path (the service: after the answer is handed over)
        self.retired: list[Any] | None = None

    # -- paths ----------------------------------------------------------------------------
    def _meta_path(self, book_id: str) -> str:
        return os.path.join(self.directory, f"{book_id}.json")

    def _compiled_path(self, book_id: str, options: MatchOptions) -> str:
        return os.path.join(self.directory, f"{book_id}.{rules_tag(options)}{SUFFIX}")

    def _write_atomic(self, path: str, write: Callable[[str], None]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        os.close(fd)
        try:
            write(tmp)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    # -- the API --------------------------------------------------------------------------
    def book_id(self, data: bytes, *, name: str | None = None, fill_defaults: bool = True) -> str:
        """The content address of an upload: hash of the bytes, the reading options and the version."""
        h = hashlib.sha256()
        h.update(f"lorescan {self._version}\0{name!r}\0{fill_defaults}\0".encode())
        h.update(data)
        return h.hexdigest()[:32]

    def read(self, data: bytes, filename: str, *, name: str | None = None,
             fill_defaults: bool = True) -> Lorebook:
        """Read an upload as a Lorebook (any format ``lorescan.load`` reads).

        ``fill_defaults=False`` reads a SillyTavern world's entries as stored, as SillyTavern's
        engine sees them (the conformance vectors' reading); other formats ignore it.
        Raises LorebookError naming ``filename``.
        """
        source = filename or "<upload>"
        book: Lorebook | None = None
        if not fill_defaults and data[:1] in (b"{", b" ", b"\n", b"\r", b"\t", b"\xef"):
            try:
                doc = parse_json(data, source=source, limits=self.limits)
            except FormatError:
                doc = None
            if doc is not None and detect_format(doc) == "sillytavern":
                book = read_world(doc, source=source, name=name, fill_defaults=False)
        if book is None:
            book = load(data, source=source, limits=self.limits)
        max_entries = getattr(self.limits, "max_entries", BOOK_LIMITS.max_entries)
        if len(book.entries) > max_entries:
            raise FormatError(f"{len(book.entries)} entries, above the limit of {max_entries}", source=source)
        if name is not None and book.name != name:
            book = replace(book, name=name)
        return book

    def put(self, data: bytes, filename: str, *, name: str | None = None,
            fill_defaults: bool = True) -> dict[str, Any]:
        """Store an upload: read it, compile it with the default rules, write both files.

        Returns the book's description (``created`` is False when the same upload was
        already stored). Raises LorebookError for a bad book.
        """
        book_id = self.book_id(data, name=name, fill_defaults=fill_defaults)
        meta_path = self._meta_path(book_id)
        stored = self._intact(book_id)
        if stored is not None:
            return {**stored, "created": False}
        book = self.read(data, filename, name=name, fill_defaults=fill_defaults)
        compiled = self._compile(book, DEFAULT_RULES, token_counts=True)
        size = self._store_compiled(book_id, DEFAULT_RULES, compiled)
        info = {"id": book_id, "name": book.name, "format": book.format, "entries": len(book.entries),
                "bytes": len(data), "filename": filename, "losses": _losses(book)}
        body = json.dumps(info, ensure_ascii=False).encode()

        def write_meta(path: str) -> None:
            with open(path, "wb") as fh:
                fh.write(body)

        self._write_atomic(meta_path, write_meta)
        self._remember((book_id, rules_tag(DEFAULT_RULES)), compiled, size)
        return {**info, "created": True}

    def info(self, book_id: str) -> dict[str, Any]:
        """The description of a stored book; BookNotFound if there is none, DamagedBook if its
        file cannot be read as one."""
        path = self._meta_path(book_id)
        try:
            with open(path, "rb") as fh:
                info = json.loads(fh.read())
        except FileNotFoundError:
            raise BookNotFound(book_id) from None
        except (OSError, ValueError) as exc:        # ValueError: not UTF-8 or not JSON
            log.warning("cannot read the description %s: %s", path, exc)
            raise DamagedBook(book_id, "its description is unreadable") from None
        if not isinstance(info, dict) or info.get("id") != book_id:
            log.warning("the description %s is not this book's", path)
            raise DamagedBook(book_id, "its description is not this book's")
        return info

    def _intact(self, book_id: str) -> dict[str, Any] | None:
        """The description of ``book_id`` when both its files are stored and read back whole; None
        when either is missing or damaged (an upload of the book then writes both again)."""
        try:
            info = self.info(book_id)
            read_compiled(self._compiled_path(book_id, DEFAULT_RULES), verify=True)
        except (BookNotFound, DamagedBook, FileNotFoundError):
            return None
        except (LorebookError, OSError) as exc:
            log.warning("the stored book %s is damaged (%s): writing it again", book_id, exc)
            return None
        return info

    def exists(self, book_id: str) -> bool:
        return os.path.exists(self._meta_path(book_id))

    def ids(self) -> list[str]:
        """Every stored book id."""
        return sorted(f[:-5] for f in os.listdir(self.directory)
                      if f.endswith(".json") and not f.startswith("."))

    def get(self, book_id: str, options: MatchOptions = DEFAULT_RULES) -> CompiledBook:
        """The book compiled for ``options``: from memory, else from its stored file, else
        compiled now (from the stored default compilation) and stored. BookNotFound if the
        id is unknown (or was deleted by another worker)."""
        key = (book_id, rules_tag(options))
        found = self._cached(key)
        if found is not None:
            return found
        path = self._compiled_path(book_id, options)
        try:
            t0 = time.perf_counter()
            compiled = read_compiled(path)
            size = os.path.getsize(path)
            self.file_loads += 1
            # debug: a platform's every cold request loads a book (an info line each cost it ~60 us)
            log.debug("loaded compiled book %s from %s in %.1f ms (no compile)", book_id, path,
                     (time.perf_counter() - t0) * 1000)
        except (FileNotFoundError, LorebookError, OSError) as exc:
            missing = isinstance(exc, FileNotFoundError)
            if not missing:
                log.warning("cannot load the compiled book %s: %s", path, exc)
            if options == DEFAULT_RULES:
                if missing:
                    raise BookNotFound(book_id) from None
                problem = exc.problem if isinstance(exc, LorebookError) else (exc.strerror or type(exc).__name__)
                raise DamagedBook(book_id, f"its compiled file: {problem}") from None
            # other rules are compiled from the default compilation: a damaged file is rebuilt
            base = self.get(book_id, DEFAULT_RULES)
            compiled = self._compile(base.book, options)
            try:
                size = self._store_compiled(book_id, options, compiled)
            except OSError as err:          # a full disk: this scan goes on, the next one compiles again
                log.warning("cannot store the compiled book %s for other rules: %s", book_id, err)
                size = self._stored_size(book_id)
        self._remember(key, compiled, size)
        return compiled

    def get_keys(self, book_id: str, specs: Sequence[KeySpec], options: MatchOptions, *,
                 limits: BookLimits = BOOK_LIMITS, name: str = "keys", source: str = "<memory>") -> CompiledKeys:
        """``compile_keys(specs, options, ...)`` for key specs made from the stored book ``book_id``
        (lorebook-slot mode's pool): from memory, else from the keys-only file stored beside the
        book for exactly these specs, options and limits, else compiled now and stored. The file is
        named by a digest of all of them (:func:`keys_tag`), so other specs never read it, and it
        is a keys part alone (``match.compile.load_keys``): a cold slot request reads it instead of
        compiling the pool. BookNotFound if the id is unknown; a damaged file is compiled again."""
        tag = keys_tag(specs, options, limits, name, source)
        key = (book_id, "keys-" + tag)
        found = self._cached(key)
        if found is not None:
            return found
        path = os.path.join(self.directory, f"{book_id}.keys-{tag}{SUFFIX}")
        try:
            keys = load_keys(path, limits=limits)
            size = os.path.getsize(path)
            self.file_loads += 1
        except (FileNotFoundError, LorebookError, OSError) as exc:
            if not isinstance(exc, FileNotFoundError):
                log.warning("cannot load the compiled keys %s (compiling them again): %s", path, exc)
            t0 = time.perf_counter()
            keys = compile_keys(specs, options, limits=limits, name=name, source=source)
            self.compiles += 1
            log.info("compiled the keys of %d entries of book %s in %.1f ms", len(specs), book_id,
                     (time.perf_counter() - t0) * 1000)
            try:
                self._write_atomic(path, lambda p: save_compiled(keys, p))
                size = os.path.getsize(path)
            except OSError as err:          # a full disk: this request goes on, the next one compiles again
                log.warning("cannot store the compiled keys %s: %s", path, err)
                size = self._stored_size(book_id)
        self._remember(key, keys, size)
        return keys

    def delete(self, book_id: str) -> bool:
        """Remove a book and its compiled files; False if it was not stored."""
        existed = False
        prefix = book_id + "."
        for f in os.listdir(self.directory):
            if f.startswith(prefix):
                try:
                    os.unlink(os.path.join(self.directory, f))
                    existed = True
                except FileNotFoundError:
                    pass
        self._forget(book_id)
        return existed

    def stored_bytes(self, book_id: str) -> int:
        """The size of ``book_id``'s compiled file: from the LRU when it holds a compilation of it,
        else one ``stat`` (2**20 when it is not stored)."""
        with self._lock:
            keys = self._keys.get(book_id)
            if keys:
                return max(self._lru[k][1] for k in keys)
        return self._stored_size(book_id)

    def holds(self, book_id: str) -> bool:
        """Whether some compilation of ``book_id`` is in the in-memory LRU."""
        with self._lock:
            return book_id in self._keys

    @property
    def loaded(self) -> int:
        """Compiled books held in memory."""
        return len(self._lru)

    @property
    def nbytes(self) -> int:
        """Bytes (stored-file sizes) of the compiled books held in memory."""
        return self._bytes

    # -- internals -------------------------------------------------------------------------
    def _compile(self, book: Lorebook, options: MatchOptions, *, token_counts: bool = False) -> CompiledBook:
        t0 = time.perf_counter()
        # at upload, with the contents' token counts: an engine over the stored book counts no
        # unchanged content (other rules compile on a scan's path, without them)
        compiled = compile_book(book, options, token_counts=token_counts)
        self.compiles += 1
        log.info("compiled book %r (%d entries) in %.1f ms", book.name, len(book.entries),
                 (time.perf_counter() - t0) * 1000)
        return compiled

    def _stored_size(self, book_id: str) -> int:
        try:
            return os.path.getsize(self._compiled_path(book_id, DEFAULT_RULES))
        except OSError:
            return 1 << 20

    def _store_compiled(self, book_id: str, options: MatchOptions, compiled: CompiledBook) -> int:
        path = self._compiled_path(book_id, options)
        self._write_atomic(path, lambda p: write_compiled(compiled, p))
        return os.path.getsize(path)

    def _cached(self, key: tuple[str, str]) -> Any:
        """The LRU's value for ``key`` (a hit, moved to the end) or None (a miss, counted);
        BookNotFound when the book ``key[0]`` is not stored (deleted by another worker too)."""
        if not self.exists(key[0]):
            self._forget(key[0])
            raise BookNotFound(key[0])
        with self._lock:
            found = self._lru.get(key)
            if found is not None:
                self._lru.move_to_end(key)
                self.hits += 1
                return found[0]
            self.misses += 1
        return None

    def _remember(self, key: tuple[str, str], compiled: Any, size: int) -> None:
        evicted: set[str] = set()
        with self._lock:
            if key in self._lru:
                self._bytes -= self._lru.pop(key)[1]
            self._lru[key] = (compiled, size)
            self._keys.setdefault(key[0], set()).add(key)
            self._bytes += size
            while self._bytes > self.cache_bytes and len(self._lru) > 1:
                old_key, (value, old) = self._lru.popitem(last=False)
                self._bytes -= old
                self._drop_key(old_key)
                if old_key[0] not in self._keys:        # no other compilation of that book is left
                    evicted.add(old_key[0])
                if self.retired is not None and len(self.retired) < 64:
                    self.retired.append(value)
        if evicted and self.on_evict is not None:
            self.on_evict(evicted)
        if self.on_change is not None:
            self.on_change()

    def _drop_key(self, key: tuple[str, str]) -> None:
        keys = self._keys.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._keys[key[0]]

    def _forget(self, book_id: str) -> None:
        with self._lock:
            for key in self._keys.pop(book_id, ()):
                self._bytes -= self._lru.pop(key)[1]
        if self.on_change is not None:
            self.on_change()


def _losses(book: Lorebook) -> list[dict[str, Any]]:
    """What the SillyTavern engine model does not carry over from this book (its conversion
    report to a SillyTavern world): fields kept only as opaque data."""
    if book.format == "sillytavern":
        return []
    try:
        _, report = convert(book, "sillytavern")
    except LorebookError as exc:
        return [{"entry": None, "field": "*", "why": f"cannot be written as a SillyTavern world: {exc}"}]
    return [{"entry": x.entry if isinstance(x.entry, (int, str)) or x.entry is None else str(x.entry),
             "field": x.field, "why": x.why} for x in report.losses]
