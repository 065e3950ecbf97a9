"""``lorescan serve`` as a platform runs it: settings, refusals at start, probes, logs, errors, metrics.

Every case starts the real command (``python -m lorescan.app.cli serve``, uvicorn on a free
loopback port); a refusal is the command exiting 2 with one line before it serves anything.
Servers are shared per module where the cases do not disturb each other.
"""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

if os.environ.get("LORESCAN_REQUIRE_SERVE") != "1":
    for _mod in ("msgspec", "starlette", "uvicorn", "multipart", "prometheus_client"):
        pytest.importorskip(_mod, reason="the serve extra is not installed (pip install '.[serve]')")

import lorescan  # noqa: E402
from lorescan.errors import SettingsError  # noqa: E402
from lorescan.serve.config import resolve_options  # noqa: E402
from lorescan.serve.store import BookStore  # noqa: E402
from lorescan.serve.testing import Client, ServerProcess  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saltmere.json"
TOKEN = "t0ken-that-must-never-be-logged"


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def log_lines(srv: ServerProcess) -> list[dict]:
    """The server's log as JSON objects (every line must be one)."""
    lines = [ln for ln in srv.log_text().splitlines() if ln.strip()]
    return [json.loads(ln) for ln in lines]


def logged(srv: ServerProcess, want, timeout: float = 10) -> list[dict]:
    """The log once ``want(lines)`` holds: a request's access line is written after its answer is sent."""
    deadline = time.monotonic() + timeout
    while True:
        lines = log_lines(srv)
        if want(lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def start_line(srv: ServerProcess) -> dict:
    return next(x for x in log_lines(srv) if x["message"].startswith("starting lorescan serve"))


def scan_request(book_id: str, **extra) -> dict:
    return {"books": [{"id": book_id}], "messages": [{"mes": "Who keeps the lighthouse?"}], "max_context": 8192,
            **extra}


# -- refusals at start --------------------------------------------------------------------------

def _serve(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LORESCAN_SERVE_")}
    return subprocess.run([sys.executable, "-m", "lorescan.app.cli", "serve", "--port", "1", *args],
                          capture_output=True, text=True, env={**clean, **(env or {})}, cwd=cwd, timeout=60)


REFUSALS = [
    ("workers-0", ["--workers", "0"], {}, "", "--workers: must be at least 1"),
    ("cache-0-mb", [], {"LORESCAN_SERVE_BOOK_CACHE_MB": "0"}, "", "LORESCAN_SERVE_BOOK_CACHE_MB: must be above 0"),
    ("chat-cache-0-mb", ["--chat-cache-mb", "0"], {}, "", "--chat-cache-mb: must be above 0"),
    ("time-limit-0", ["--time-limit", "0"], {}, "", "--time-limit: must be above 0"),
    ("time-limit-negative", ["--time-limit", "-3"], {}, "", "--time-limit: must be above 0 (got -3)"),
    ("max-body-negative", ["--max-body-mb", "-1"], {}, "", "--max-body-mb: must be above 0"),
    ("workers-not-a-number", [], {"LORESCAN_SERVE_WORKERS": "two"}, "",
     "LORESCAN_SERVE_WORKERS: must be a whole number (got 'two')"),
    ("unknown-variable", [], {"LORESCAN_SERVE_WORKER": "2"}, "", "LORESCAN_SERVE_WORKER: unknown variable"),
    ("token-file-missing", ["--token-file", "{tmp}/no-such-token"], {}, "", "cannot read the token file"),
    ("token-file-a-directory", ["--token-file", "{tmp}"], {}, "", "cannot read the token file"),
    ("token-file-empty", ["--token-file", "{tmp}/empty"], {}, "", "the token file is empty"),
    ("non-loopback-without-token", ["--host", "0.0.0.0"], {}, "",
     "'0.0.0.0' is not a loopback address and no token is set"),
    ("file-zero-workers", ["--config", "{tmp}/serve.toml"], {}, "workers = 0\n",
     "serve.toml, field 'workers': must be at least 1"),
    ("file-wrong-type", ["--config", "{tmp}/serve.toml"], {}, 'time_limit = "soon"\n',
     "serve.toml, field 'time_limit': must be a number"),
    ("file-unknown-key", ["--config", "{tmp}/serve.toml"], {}, "wrokers = 2\n",
     "serve.toml, field 'wrokers': unknown setting"),
    ("file-not-toml", [], {"LORESCAN_SERVE_CONFIG": "{tmp}/serve.toml"}, "workers = \n", "serve.toml: not TOML"),
    ("file-holds-the-token", ["--config", "{tmp}/serve.toml"], {}, 'token = "abc"\n', "the token is a secret"),
    ("file-missing", ["--config", "{tmp}/absent.toml"], {}, "", "cannot read the config file"),
]


@pytest.mark.parametrize("args, env, toml, expected", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_nonsense_is_refused_at_start_with_one_line_and_exit_2(tmp_path, args, env, toml, expected):
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "serve.toml").write_text(toml)
    fill = lambda s: s.replace("{tmp}", str(tmp_path))  # noqa: E731
    r = _serve([fill(a) for a in args], {k: fill(v) for k, v in env.items()})
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lorescan: "), r.stderr
    assert expected in lines[0]
    assert "Traceback" not in r.stderr and not r.stdout


def test_a_non_loopback_host_passes_the_checks_with_a_token_or_allow_anonymous(tmp_path):
    # checked without binding anything but loopback: the decision is resolve_options'
    with pytest.raises(SettingsError, match="not a loopback address"):
        resolve_options({"host": "192.0.2.1"}, {})
    assert resolve_options({"host": "192.0.2.1", "allow_anonymous": True}, {}).values["host"] == "192.0.2.1"
    assert resolve_options({"host": "0.0.0.0"}, {"LORESCAN_SERVE_TOKEN": "x"}).token_source == "env LORESCAN_SERVE_TOKEN"
    assert resolve_options({"host": "::1"}, {}).token_source is None
    token = tmp_path / "token"
    token.write_text("abc\n")
    assert resolve_options({"host": "0.0.0.0", "token_file": str(token)}, {}).token_source == f"token file {token}"


def test_switches_read_words_from_the_environment_and_no_flags_beat_the_file(tmp_path):
    cfg = tmp_path / "serve.toml"
    cfg.write_text("access_log = true\nallow_anonymous = true\n")
    for word, value in (("yes", True), ("off", False), ("1", True), ("FALSE", False)):
        got = resolve_options({}, {"LORESCAN_SERVE_ACCESS_LOG": word})
        assert got.values["access_log"] is value and got.sources["access_log"] == "env LORESCAN_SERVE_ACCESS_LOG"
    with pytest.raises(SettingsError, match="LORESCAN_SERVE_ACCESS_LOG: must be true or false"):
        resolve_options({}, {"LORESCAN_SERVE_ACCESS_LOG": "sometimes"})
    got = resolve_options({"config": str(cfg), "access_log": False}, {})      # --no-access-log
    assert got.values["access_log"] is False and got.sources["access_log"] == "flag"
    assert got.values["allow_anonymous"] is True and got.sources["allow_anonymous"] == f"file {cfg}"


def test_the_older_log_level_variable_still_works_below_the_new_one():
    assert resolve_options({}, {"LORESCAN_SERVE_LOG": "DEBUG"}).values["log_level"] == "debug"
    both = resolve_options({}, {"LORESCAN_SERVE_LOG": "debug", "LORESCAN_SERVE_LOG_LEVEL": "warning"})
    assert both.values["log_level"] == "warning" and both.sources["log_level"] == "env LORESCAN_SERVE_LOG_LEVEL"


# -- configuration: flag > environment > file > default ------------------------------------------

@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """A server configured through all three sources, with a token from the environment."""
    root = tmp_path_factory.mktemp("configured")
    cfg = root / "serve.toml"
    cfg.write_text("max_body_mb = 0.001      # only here: 1 KiB turns\n"
                   "max-upload-mb = 0.001    # the environment raises it\n"
                   "access_log = true\n"
                   "chat_cache_texts = 7     # the environment changes it, the flag wins\n")
    env = {"LORESCAN_SERVE_CONFIG": str(cfg), "LORESCAN_SERVE_MAX_UPLOAD_MB": "0.004",
           "LORESCAN_SERVE_CHAT_CACHE_TEXTS": "8", "LORESCAN_SERVE_TOKEN": TOKEN,
           "LORESCAN_SERVE_BOOK_CACHE_MB": "64"}
    with ServerProcess(str(root / "books"), args=["--chat-cache-texts", "9", "--book-cache-mb", "3"],
                       env=env) as srv:
        srv.config_path = cfg
        yield srv


@pytest.fixture(scope="module")
def cclient(configured):
    c = configured.client(token=TOKEN)
    yield c
    c.close()


def test_start_up_shows_each_value_and_where_it_came_from(configured):
    settings = start_line(configured)["settings"]
    assert settings["max_body_mb"] == {"value": 0.001, "from": f"file {configured.config_path}"}
    assert settings["max_upload_mb"] == {"value": 0.004, "from": "env LORESCAN_SERVE_MAX_UPLOAD_MB"}
    assert settings["chat_cache_texts"] == {"value": 9, "from": "flag"}
    assert settings["book_cache_mb"] == {"value": 3.0, "from": "flag"}
    assert settings["engines"] == {"value": 32, "from": "default"}
    assert settings["token"] == {"value": "set", "from": "env LORESCAN_SERVE_TOKEN"}


def test_the_token_is_never_logged(configured, cclient):
    cclient.request("GET", "/v1/books")
    assert TOKEN not in configured.log_text()


def test_a_file_value_applies_where_nothing_overrides_it(cclient):
    status, body = cclient.json("POST", "/v1/st/scan", scan_request("0" * 32, padding="x" * 2000))
    assert status == 413 and "limit of 1048 bytes" in body["error"]


def test_the_environment_overrides_the_file(cclient):
    data = EXAMPLE.read_bytes()
    assert 1048 < len(data) <= 4194       # above the file's limit, within the environment's
    status, info = cclient.json("POST", "/v1/books", data, headers={"Content-Type": "application/octet-stream"})
    assert status in (200, 201), info


def test_a_flag_overrides_the_environment(configured, cclient):
    # the book cache's bound is a gauge: 3 MB from the flag, not the environment's 64
    _, _, text = cclient.request("GET", "/metrics")
    assert metric(text.decode(), "lorescan_book_cache_capacity_bytes") == 3 * (1 << 20)


# -- request ids, JSON logs, JSON errors -----------------------------------------------------------

def test_every_log_line_of_a_request_carries_its_request_id(configured, cclient):
    status, headers, _ = cclient.request("POST", "/v1/books?name=Traced", EXAMPLE.read_bytes(),
                                         headers={"Content-Type": "application/octet-stream",
                                                  "X-Request-Id": "req-trace-42"})
    assert status == 201 and headers["x-request-id"] == "req-trace-42"
    ours = lambda lines: [x for x in lines if x.get("request_id") == "req-trace-42"]  # noqa: E731
    mine = ours(logged(configured, lambda lines: any(x["logger"] == "lorescan.serve.access" for x in ours(lines))))
    messages = [x["message"] for x in mine]
    assert any(m.startswith("compiled book 'Traced'") for m in messages), messages    # on the engine thread
    access = [x for x in mine if x["logger"] == "lorescan.serve.access"]
    assert len(access) == 1 and access[0]["status"] == 201 and access[0]["path"] == "/v1/books"
    assert all(x["pid"] == mine[0]["pid"] for x in mine)


def test_a_request_without_a_sane_id_gets_a_new_one(configured, cclient):
    ids = []
    for given in (None, "has spaces and ; semicolons", "x" * 200):
        headers = {"X-Request-Id": given} if given else {}
        _, got, _ = cclient.request("GET", "/v1/books", headers=headers)
        assert re.fullmatch(r"[0-9a-f]{32}", got["x-request-id"]), got["x-request-id"]
        ids.append(got["x-request-id"])
    assert len(set(ids)) == 3
    access = lambda lines: {x.get("request_id") for x in lines if x["logger"] == "lorescan.serve.access"}  # noqa: E731
    assert set(ids) <= access(logged(configured, lambda lines: set(ids) <= access(lines)))


def test_an_unknown_route_answers_404_in_json(cclient):
    status, headers, body = cclient.request("GET", "/v1/nothing-here")
    assert status == 404 and headers["content-type"] == "application/json"
    assert "no route GET /v1/nothing-here" in json.loads(body)["error"]


def test_a_wrong_method_answers_405_in_json_with_allow(cclient):
    status, headers, body = cclient.request("DELETE", "/v1/st/scan")
    assert status == 405 and headers["content-type"] == "application/json"
    assert headers["allow"] == "POST"
    assert json.loads(body)["error"] == "DELETE is not allowed on /v1/st/scan (allowed: POST)"


def test_readyz_needs_no_token_and_version_does(configured):
    anon = configured.client()
    try:
        assert anon.json("GET", "/readyz")[0] == 200
        assert anon.json("GET", "/version")[0] == 401
    finally:
        anon.close()


def test_version_names_the_package_the_kernels_and_the_python(cclient):
    status, body = cclient.json("GET", "/version")
    assert status == 200
    assert body["version"] == lorescan.__version__ and body["backend"] == lorescan.BACKEND
    assert body["python"] == platform.python_version()


# -- a plain server: metrics, readiness ------------------------------------------------------------

@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A server on a books directory holding one book stored beforehand (as by another replica)."""
    books = tmp_path_factory.mktemp("plain") / "books"
    info = BookStore(str(books)).put(EXAMPLE.read_bytes(), "saltmere.json")
    with ServerProcess(str(books)) as srv:
        srv.book_id = info["id"]
        yield srv


def test_book_cache_metrics_count_a_file_load_as_a_miss_and_a_second_engine_as_a_hit(plain):
    c = plain.client()
    try:
        assert c.json("POST", "/v1/st/scan", scan_request(plain.book_id))[0] == 200
        # other settings: another engine over the same compiled book, found in memory
        assert c.json("POST", "/v1/st/scan", scan_request(plain.book_id, settings={"scan_depth": 1}))[0] == 200
        _, _, raw = c.request("GET", "/metrics")
    finally:
        c.close()
    text = raw.decode()
    assert metric(text, "lorescan_book_cache_misses_total") == 1
    assert metric(text, "lorescan_book_file_loads_total") == 1
    assert metric(text, "lorescan_book_cache_hits_total") == 1
    assert metric(text, "lorescan_book_cache_hit_ratio") == 0.5
    assert metric(text, "lorescan_books_loaded") == 1
    assert "# HELP lorescan_book_cache_hits_total Compiled books found in the in-memory cache" in text


def test_process_metrics_are_reported_per_worker(plain):
    c = plain.client()
    try:
        _, headers, raw = c.request("GET", "/metrics")
    finally:
        c.close()
    text, pid = raw.decode(), headers["x-lorescan-worker"]
    assert metric(text, "process_resident_memory_bytes", pid=pid) > 1 << 20
    assert metric(text, "process_open_fds", pid=pid) >= 3
    assert "# TYPE process_cpu_seconds_total counter" in text


def _ready(c: Client) -> tuple[int, dict]:
    return c.json("GET", "/readyz")


def test_readyz_turns_unready_without_the_books_dir_and_ready_again(plain):
    c = plain.client()
    books = Path(plain.books_dir)
    saved = books.with_name("books-saved")
    try:
        status, body = _ready(c)
        assert status == 200 and body["status"] == "ready"
        books.rename(saved)
        status, body = _ready(c)
        assert status == 503 and "does not exist" in body["error"] and len(body["reasons"]) == 1
        books.write_text("not a directory")
        status, body = _ready(c)
        assert status == 503 and "is not a directory" in body["error"]
        books.unlink()
        saved.rename(books)
        assert _ready(c)[0] == 200
    finally:
        if saved.exists():
            if books.is_file():
                books.unlink()
            saved.rename(books)
        c.close()


def test_the_metrics_directory_is_the_servers_own_and_goes_with_it(tmp_path):
    with ServerProcess(str(tmp_path / "books")) as srv:
        path = Path(start_line(srv)["metrics_dir"])
        assert path.is_dir() and path.name.startswith("lorescan-metrics-")
        assert not str(path).startswith(str(tmp_path))
        assert any(path.iterdir())                      # the worker's value files
    deadline = time.monotonic() + 5
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not path.exists()
