"""Start a real ``lorescan serve`` on a free loopback port, for tests and benchmarks.

The server runs in a subprocess (uvicorn, as in production), listens on 127.0.0.1 only,
and is ready when ``/healthz`` answers. Its log goes to a file the caller can read.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

__all__ = ["ServerProcess", "free_port", "Client"]

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Client:
    """A minimal keep-alive HTTP/1.1 client for one server (stdlib only)."""

    def __init__(self, port: int, *, token: str | None = None, timeout: float = 60) -> None:
        self.port = port
        self.token = token
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | str | Any = None, *,
                headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one request; a dict/list body is sent as JSON."""
        hdrs = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        if self.token is not None:
            hdrs.setdefault("Authorization", f"Bearer {self.token}")
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=hdrs)
                resp = self._conn.getresponse()
                data = resp.read()
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest):
                self.close()            # the server closed an idle keep-alive connection: reconnect once
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, _, data = self.request(method, path, body, **kw)
        return status, (json.loads(data) if data else None)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class ServerProcess:
    """``lorescan serve`` in a subprocess on a free loopback port; a context manager."""

    def __init__(self, books_dir: str, *, workers: int = 1, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, log_path: str | None = None,
                 startup_timeout: float = 60) -> None:
        self.books_dir = books_dir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log_path = log_path or os.path.join(books_dir, f"server-{self.port}.log")
        os.makedirs(books_dir, exist_ok=True)
        cmd = [sys.executable, "-m", "lorescan.app.cli", "serve", "--host", HOST, "--port", str(self.port),
               "--workers", str(workers), "--books-dir", books_dir, *args]
        full_env = {**os.environ, **(env or {})}
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=full_env,
                                     start_new_session=True)
        self._wait_ready(startup_timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lorescan serve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=1)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"lorescan serve did not answer /healthz within {timeout} s:\n{self.log_text()}")

    def client(self, **kw: Any) -> Client:
        return Client(self.port, **kw)

    def log_text(self) -> str:
        self._log.flush()
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def worker_pids(self) -> list[int]:
        """The worker processes (uvicorn's spawned children; the server's own process when it
        runs a single worker), for RSS readings."""
        children = []
        try:
            out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
            children = [int(p) for p in out.split()]
        except OSError:
            pass
        workers = []
        for pid in children:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"spawn_main" in fh.read():
                        workers.append(pid)
            except OSError:
                continue
        return workers or [self.proc.pid]

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0
