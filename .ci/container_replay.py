"""Replay conformance vectors through a running ``lorescan serve`` (the container CI builds): every turn's
answer must carry the vector's expected fields. Usage: ``python .ci/container_replay.py URL TOKEN VECTOR...``."""
from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode

from lorescan.app.conformance import CONTRACT_FIELDS, iter_cases


def call(url: str, token: str, method: str, path: str, body: bytes | None = None,
         ctype: str = "application/json") -> tuple[int, dict]:
    req = urllib.request.Request(url + path, data=body, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_ready(url: str, token: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = call(url, token, "GET", "/readyz")
            if status == 200:
                return body
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"container_replay: {url}/readyz not ready within {timeout} s")
        time.sleep(0.5)


def scan_request(case: dict, ids: list[str], turn: dict, state: object) -> dict:
    an = case.get("authors_note")
    injects = [an["content"]] if an is not None and an.get("scan") else []
    injects += [i["content"] for i in case.get("injections", []) if i.get("scan")]
    req = {"books": [{"id": i, "roles": b["roles"]} for i, b in zip(ids, case["books"])],
           "settings": case.get("settings") or {}, "messages": turn["messages"], "max_context": case["max_context"],
           "compat": "sillytavern", "tokenizer": "words", "random": float(case.get("rng_constant", 0.5)),
           "global_scan_data": case.get("global_scan_data"), "injects": injects,
           "authors_note": an["content"] if an is not None else None, "trigger": turn.get("trigger", "normal"),
           "dry_run": bool(turn.get("dry_run")), "timed_effects": state}
    ch = case.get("character")
    if ch is not None:
        req["character"] = {"name": ch.get("name", ""), "avatar": ch.get("avatar", ""),
                            "tags": [str(t) for t in ch["tags"]] if isinstance(ch.get("tags"), list) else None}
    return req


def _sorted(v: object) -> object:
    return {k: _sorted(v[k]) for k in sorted(v)} if isinstance(v, dict) else v


def main(url: str, token: str, vectors: list[str]) -> None:
    print("ready:", wait_ready(url, token))
    turns = 0
    for path in vectors:
        for case in iter_cases(path):
            ids = []
            for b in case["books"]:
                query = urlencode({"name": b["name"], "fill_defaults": "false", "filename": "book.json"})
                status, info = call(url, token, "POST", f"/v1/books?{query}", json.dumps(b["data"]).encode())
                assert status in (200, 201), (case["name"], status, info)
                ids.append(info["id"])
            state = None
            for ti, turn in enumerate(case["turns"]):
                status, got = call(url, token, "POST", "/v1/st/scan",
                                   json.dumps(scan_request(case, ids, turn, state)).encode())
                assert status == 200, (case["name"], ti, got)
                for f in CONTRACT_FIELDS:
                    g, w = got[f], turn["expected"].get(f)
                    if f in ("outlets", "timed_effects"):
                        g, w = _sorted(g), _sorted(w)
                    assert g == w, (path, case["name"], ti, f, g, w)
                state = got["timed_effects"]
                turns += 1
    assert turns, "no turns replayed"
    print(f"container_replay: {turns} turns from {len(vectors)} vector files match their expected results")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
