"""Measure the candidate embedders on the labelled set: ``python -m lorescan.semantic.eval``.

For every (entry, message, should-fire) pair of ``tests/data/semantic_pairs.json`` a
candidate scores the message against the entry's content; its threshold is the one that
gives the best F1 over all three languages together (one threshold per model, as a
platform would set it), and precision and recall are reported per language at it. The
keyword-only baseline runs each message alone through :class:`~lorescan.st.STEngine` in the
improved profile with the entry's keys (scan depth 1, no recursion). Latency is the mean
wall time of embedding one message (cold cache), over every message of the set.
Prints the Markdown table of docs/semantic.md.
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .embed import Embedder, WordLlamaEmbedder, embed_entries, scores

__all__ = ["keyword_fires", "load_pairs", "main", "measure"]

LANGS = ("en", "ru", "zh")
_DEFAULT_SET = Path(__file__).resolve().parents[3] / "tests" / "data" / "semantic_pairs.json"


def load_pairs(path: Path = _DEFAULT_SET) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def keyword_fires(doc: dict[str, Any]) -> list[bool]:
    """Whether each pair's entry fires from its keys alone (improved profile)."""
    from ..formats import book_from_entries  # import-cost: the engine, only for the baseline
    from ..st import BookSource, ChatMessage, STEngine, STSettings  # import-cost: the engine, only for the baseline
    entries = doc["entries"]
    uid = {e["id"]: i for i, e in enumerate(entries)}
    book = book_from_entries("pairs", [{"uid": i, "key": e["keys"], "content": e["content"], "comment": e["id"]}
                                       for i, e in enumerate(entries)])
    engine = STEngine([BookSource(book, ("global",))], STSettings(scan_depth=1, recursive=False, budget_cap=0),
                      compat="improved")
    out = []
    for pair in doc["pairs"]:
        result = engine.scan([ChatMessage("User", pair["message"])], max_context=100000)
        out.append(any(a.uid == uid[pair["entry"]] for a in result.activated))
    return out


def _pr(pred: Sequence[bool], gold: Sequence[bool]) -> tuple[float, float]:
    tp = sum(p and g for p, g in zip(pred, gold))
    fp = sum(p and not g for p, g in zip(pred, gold))
    fn = sum(g and not p for p, g in zip(pred, gold))
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def _f1(pred: Sequence[bool], gold: Sequence[bool]) -> float:
    p, r = _pr(pred, gold)
    return 2 * p * r / (p + r) if p + r else 0.0


def measure(embedder: Embedder, doc: dict[str, Any]) -> tuple[list[float], float]:
    """Each pair's score, and the mean milliseconds to embed one message."""
    ids = [e["id"] for e in doc["entries"]]
    matrix = embed_entries(embedder, [e["content"] for e in doc["entries"]])
    messages = [p["message"] for p in doc["pairs"]]
    start = time.perf_counter()
    rows = [embedder.embed([m])[0] for m in messages]
    per_message_ms = (time.perf_counter() - start) * 1000 / len(messages)
    out = [float(scores(row, matrix[ids.index(p["entry"]):ids.index(p["entry"]) + 1])[0])
           for row, p in zip(rows, doc["pairs"])]
    return out, per_message_ms


def best_threshold(values: Sequence[float], gold: Sequence[bool]) -> float:
    return max(sorted(set(values)), key=lambda t: (_f1([v >= t for v in values], gold), -t))


def _row(name: str, pred: list[bool], doc: dict[str, Any], threshold: str, latency: str) -> str:
    langs = {e["id"]: e["lang"] for e in doc["entries"]}
    cells = []
    for lang in (*LANGS, None):
        pick = [i for i, p in enumerate(doc["pairs"]) if lang is None or langs[p["entry"]] == lang]
        p, r = _pr([pred[i] for i in pick], [doc["pairs"][i]["fire"] for i in pick])
        cells.append(f"{p:.2f} / {r:.2f}")
    return f"| {name} | {threshold} | {latency} | " + " | ".join(cells) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lorescan.semantic.eval", description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=Path, default=_DEFAULT_SET)
    args = parser.parse_args(argv)
    doc = load_pairs(args.pairs)
    gold = [p["fire"] for p in doc["pairs"]]
    candidates: list[tuple[str, Callable[[], Embedder]]] = [
        (f"wordllama l2-supercat, {dim} dims", functools.partial(WordLlamaEmbedder, dim=dim)) for dim in (256, 128, 64)]
    print(f"{len(doc['pairs'])} pairs ({sum(gold)} should fire), {len(doc['entries'])} entries\n")
    print("| model | threshold | ms / message | en P / R | ru P / R | zh P / R | all P / R |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(_row("keywords only (improved profile)", keyword_fires(doc), doc, "-", "-"))
    measured: list[tuple[str, list[float]]] = []
    for name, make in candidates:
        values, ms = measure(make(), doc)
        t = best_threshold(values, gold)
        print(_row(name, [v >= t for v in values], doc, f"{t:.3f}", f"{ms:.3f}"))
        measured.append((name, values))
    print("\nAt each language's own best threshold (what a per-language setting would give):\n")
    print("| model | en t: P / R | ru t: P / R | zh t: P / R |")
    print("| --- | --- | --- | --- |")
    langs = {e["id"]: e["lang"] for e in doc["entries"]}
    for name, values in measured:
        cells = []
        for lang in LANGS:
            pick = [i for i, p in enumerate(doc["pairs"]) if langs[p["entry"]] == lang]
            v, g = [values[i] for i in pick], [gold[i] for i in pick]
            t = best_threshold(v, g)
            p, r = _pr([x >= t for x in v], g)
            cells.append(f"{t:.3f}: {p:.2f} / {r:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
