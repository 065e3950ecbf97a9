"""``lorescan serve``'s settings: one table, read from flags, ``LORESCAN_SERVE_*`` and a TOML file.

Every setting in :data:`OPTIONS` is a flag (``--books-dir``), an environment variable
(``LORESCAN_SERVE_BOOKS_DIR``) and a key of the config file (``books_dir`` or ``books-dir``,
named by ``--config FILE`` or ``LORESCAN_SERVE_CONFIG``). Precedence: flag > environment > file >
default. :func:`resolve_options` reads all three, checks every value and refuses nonsense with a
:class:`~lorescan.errors.SettingsError` naming where the value came from (the command prints it as
one line and exits 2). Standard library only: the checks run before the serve extra is imported.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import SettingsError
from .auth import TOKEN_ENV, read_token

__all__ = ["Option", "OPTIONS", "ResolvedOptions", "add_serve_arguments", "resolve_options", "CONFIG_FILE_ENV",
           "ENV_PREFIX", "is_loopback"]

ENV_PREFIX = "LORESCAN_SERVE_"
CONFIG_FILE_ENV = "LORESCAN_SERVE_CONFIG"
WORKER_CONFIG_ENV = "LORESCAN_SERVE_WORKER_CONFIG"   # serve -> its workers (app.CONFIG_ENV), never set by hand
LEGACY_LOG_ENV = "LORESCAN_SERVE_LOG"          # the log level, as it was named before LORESCAN_SERVE_LOG_LEVEL
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be at least {low:g} (got {v:g})"


def _positive(v: float) -> str | None:
    return None if v > 0 else f"must be above 0 (got {v:g})"


def _between(low: float, high: float, unit: str = "") -> Callable[[Any], str | None]:
    """A value a setting can work with: ``low`` to ``high`` (a time limit of a nanosecond answers
    every request 503; a body limit below a kilobyte refuses every request)."""
    def check(v: float) -> str | None:
        if v <= 0:
            return _positive(v)
        return None if low <= v <= high else f"must be {low:g} to {high:g}{unit} (got {v:g})"
    return check


def _between_or_zero(low: float, high: float) -> Callable[[Any], str | None]:
    """0 (the setting's derived default) or ``low`` to ``high``."""
    inner = _between(low, high)
    return lambda v: None if v == 0 else (f"must be 0 (the default) or above (got {v:g})" if v < 0 else inner(v))


def _port(v: int) -> str | None:
    return None if 1 <= v <= 65535 else f"must be a TCP port, 1 to 65535 (got {v})"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)} (got {v!r})"


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its name (``books_dir``), type, default, help text and check (None = fine)."""

    name: str
    kind: type
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("host", str, "127.0.0.1", "address to listen on; not a loopback one needs a token or --allow-anonymous"),
    Option("port", int, 8000, "TCP port", _port),
    Option("workers", int, 1, "worker processes", _at_least(1)),
    Option("books_dir", str, "lorescan-books", "where compiled books are stored (shared by workers and replicas)"),
    Option("book_cache_mb", float, 512.0, "in-memory compiled books per worker (MB)", _positive),
    Option("chat_cache_chats", int, 1000, "chats whose hit cache a worker keeps", _at_least(1)),
    Option("chat_cache_texts", int, 256, "texts one chat's hit cache keeps", _at_least(1)),
    Option("chat_cache_mb", float, 256.0, "bytes of those hit caches per worker (MB)", _positive),
    Option("max_body_mb", float, 16.0, "largest scan request body (MB)", _between(0.001, 1024)),
    Option("max_upload_mb", float, 64.0, "largest book upload (MB)", _between(0.001, 64)),
    Option("max_inflight_mb", float, 0.0, "request-body bytes one worker's requests hold at once, all together (MB; "
           "503 with Retry-After past it); 0: max(max_upload_mb, 8 x max_body_mb)", _between_or_zero(0.001, 65536)),
    Option("time_limit", float, 10.0, "seconds per scan request (503 past it)", _between(1e-6, 86400)),
    Option("upload_time_limit", float, 120.0, "seconds per book upload (503 past it)", _between(1e-6, 86400)),
    Option("header_timeout", float, 10.0, "seconds a client may take to send a request's headers (then closed)",
           _between(0.01, 3600)),
    Option("body_timeout", float, 60.0, "seconds a client may take to send a request's body (then closed)",
           _between(0.01, 3600)),
    Option("engines", int, 32, "engines (book and settings combinations) kept per worker", _at_least(1)),
    Option("token_file", str, None, f"bearer token file (default: ${TOKEN_ENV}; neither: no auth)"),
    Option("allow_anonymous", bool, False, "allow a non-loopback --host without a token"),
    Option("access_log", bool, False, "log one JSON line per request"),
    Option("log_level", str, "info", "log level", _one_of(*LOG_LEVELS)),
    Option("log_format", str, "json", "log lines as JSON objects or as text", _one_of("json", "text")),
)
_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True, slots=True)
class ResolvedOptions:
    """Every setting's value and where it came from (``flag``, ``env NAME``, ``file PATH``, ``default``).

    ``token_source`` says where the bearer token comes from (None: no auth); the token itself is
    never kept here.
    """

    values: dict[str, Any]
    sources: dict[str, str]
    config_file: str | None = None
    token_source: str | None = None

    def describe(self) -> dict[str, dict[str, Any]]:
        """The settings for the start-up log: ``{name: {"value": ..., "from": ...}}`` (no secret)."""
        out = {name: {"value": self.values[name], "from": self.sources[name]} for name in self.values}
        out["token"] = {"value": "set" if self.token_source else "none", "from": self.token_source or "-"}
        return out


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` flags: ``--config`` and one per :data:`OPTIONS` entry (default None = not given)."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help=f"TOML file of these settings (default: ${CONFIG_FILE_ENV}); "
                             "precedence: flag > LORESCAN_SERVE_* > file > default")
    for o in OPTIONS:
        text = f"{o.help} (${o.env}; default {o.default})"
        if o.kind is bool:
            parser.add_argument(o.flag, dest=o.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(o.flag, dest=o.name, metavar=o.name.split("_")[-1].upper(), default=None, help=text)


def _convert(o: Option, raw: Any, source: str, field_name: str | None = None) -> Any:
    """``raw`` (a flag's or variable's text, or a TOML value) as ``o.kind``; SettingsError if it is not one."""
    def bad(problem: str) -> SettingsError:
        return SettingsError(problem, source=source, field=field_name)

    if field_name is None and not isinstance(raw, str):      # a --flag/--no-flag switch
        return raw
    if field_name is None:        # a flag's or variable's text
        text = raw.strip()
        if o.kind is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise bad(f"must be true or false (got {raw!r})")
        if o.kind is int:
            try:
                return int(text)
            except ValueError:
                raise bad(f"must be a whole number (got {raw!r})") from None
        if o.kind is float:
            try:
                value = float(text)
            except ValueError:
                raise bad(f"must be a number (got {raw!r})") from None
            if value != value or value in (float("inf"), float("-inf")):
                raise bad(f"must be a finite number (got {raw!r})")
            return value
        return raw
    # a TOML value: its type must be the setting's
    if o.kind is bool:
        if not isinstance(raw, bool):
            raise bad(f"must be true or false (got {raw!r})")
        return raw
    if o.kind is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise bad(f"must be a whole number (got {raw!r})")
        return raw
    if o.kind is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise bad(f"must be a number (got {raw!r})")
        return float(raw)
    if not isinstance(raw, str):
        raise bad(f"must be a string (got {raw!r})")
    return raw


def _read_file(path: str) -> dict[str, Any]:
    try:
        import tomllib  # import-cost: TOML is read only for a TOML file (on 3.10 this is not the stdlib)
    except ModuleNotFoundError:     # Python 3.10: tomli is a dependency there (pyproject.toml)
        import tomli as tomllib  # type: ignore[no-redef]  # import-cost: the 3.10 fallback of the stdlib tomllib
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError as exc:
        raise SettingsError(f"cannot read the config file: {exc.strerror or exc}", source=path) from exc
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise SettingsError("the config file is not UTF-8", source=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"not TOML: {exc}", source=path) from None
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name == "token":
            raise SettingsError("the token is a secret: put it in a file and name that with token_file "
                                f"(or set ${TOKEN_ENV})", source=path, field=key)
        if name not in _BY_NAME:
            raise SettingsError(f"unknown setting; known: {', '.join(sorted(_BY_NAME))}", source=path, field=key)
        out[name] = _convert(_BY_NAME[name], value, path, key)
    return out


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False            # a host name: it may resolve to anything


def resolve_options(flags: Mapping[str, Any], environ: Mapping[str, str]) -> ResolvedOptions:
    """Every setting from ``flags`` (argparse values, None = not given), ``environ`` and the config file.

    Raises SettingsError (naming the flag, variable or file and field) for a value of the wrong
    type or out of range, an unknown ``LORESCAN_SERVE_*`` variable or file key, an unreadable config or token file, and a non-loopback host with no
    token unless ``allow_anonymous``.
    """
    known = {o.env for o in OPTIONS} | {CONFIG_FILE_ENV, LEGACY_LOG_ENV, TOKEN_ENV, WORKER_CONFIG_ENV}
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and name not in known:      # a typo would be silently ignored
            raise SettingsError(f"unknown variable; the settings are {', '.join(sorted(o.env for o in OPTIONS))}, "
                                f"and {CONFIG_FILE_ENV}, {TOKEN_ENV}", source=name)
    config_file = flags.get("config") or environ.get(CONFIG_FILE_ENV) or None
    from_file = _read_file(config_file) if config_file else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    wheres: dict[str, str] = {}
    for o in OPTIONS:
        env_name = o.env
        if o.name == "log_level" and env_name not in environ and LEGACY_LOG_ENV in environ:
            env_name = LEGACY_LOG_ENV
        if flags.get(o.name) is not None:
            value, source = _convert(o, flags[o.name], o.flag), "flag"
            where = o.flag
        elif environ.get(env_name, "").strip():
            value, source = _convert(o, environ[env_name], env_name), f"env {env_name}"
            where = env_name
        elif o.name in from_file:
            value, source = from_file[o.name], f"file {config_file}"
            where = f"{config_file}, field {o.name!r}"
        else:
            value, source, where = o.default, "default", o.flag
        if isinstance(value, str) and o.name == "log_level":
            value = value.lower()
        if value is not None and o.check is not None:
            problem = o.check(value)
            if problem is not None:
                raise SettingsError(problem, source=where)
        values[o.name], sources[o.name], wheres[o.name] = value, source, where
    inflight = values["max_inflight_mb"]
    largest = max(values["max_body_mb"], values["max_upload_mb"])
    if inflight and inflight < largest:     # the largest request allowed could never be read
        raise SettingsError(f"must be 0 (the default) or at least the largest request a worker takes, "
                            f"max(--max-body-mb, --max-upload-mb) = {largest:g} (got {inflight:g})",
                            source=wheres["max_inflight_mb"])
    token_source = None
    if values["token_file"]:
        try:
            read_token(values["token_file"])
        except SettingsError as exc:
            raise SettingsError(exc.problem, source=f"{values['token_file']} (the token file, from "
                                                    f"{wheres['token_file']})") from None
        token_source = f"token file {values['token_file']}"
    elif environ.get(TOKEN_ENV, "").strip():
        token_source = f"env {TOKEN_ENV}"
    if not token_source and not values["allow_anonymous"] and not is_loopback(values["host"]):
        raise SettingsError(f"{values['host']!r} is not a loopback address and no token is set: anyone who can "
                            f"reach it could use the service. Set --token-file or ${TOKEN_ENV}, or pass "
                            "--allow-anonymous", source=wheres["host"])
    return ResolvedOptions(values, sources, config_file, token_source)
