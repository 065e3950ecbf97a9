"""A straightforward per-entry JanitorAI script engine: the oracle for lorescan.janitor's
fast path and the baseline of benchmarks/bench_janitor.py.

It does what the script does, turn by turn: normalise the joined window with three regex
substitutions, then, for every entry, test every keyword and gate term with a regular
expression over the whole haystack. Nothing is indexed or cached but the compiled regular
expressions (one per distinct pattern), so as a baseline it pays for the matching, not for
recompiling. Value coercions come from ``lorescan.js.coerce`` and the two field
parsers of ``lorescan.janitor.entries``; the matching, the window and the passes are
written again here, independently of the engine.
"""
from __future__ import annotations

import functools
import math
import re
from typing import Any, Callable

from lorescan.janitor.entries import parse_probability, read_priority
from lorescan.janitor.engine import apply_limit_of, window_depth_of
from lorescan.js.coerce import is_js_number, js_get, js_length, js_number_to_string, js_string, js_to_number
from lorescan.js.coerce import utf16_sort_key
from lorescan.js.text import JS_WHITESPACE, js_lower, js_trim
from lorescan.model import js_truthy

_WS = "".join(f"\\u{ord(c):04x}" for c in sorted(JS_WHITESPACE))
_MISSING = object()


def normalise(s: str) -> str:
    s = re.sub(f"[^a-z0-9_{_WS}-]", " ", js_lower(s))
    s = re.sub(r"[-_]+", " ", s)
    return js_trim(re.sub(f"[{_WS}]+", " ", s))


def has_term(hay: str, term: Any) -> bool:
    t = js_trim(js_lower("" if term is None else js_string(term)))
    if not t:
        return False
    if t.endswith("*"):
        pattern = f"(?:^|[{_WS}])" + re.escape(t[:-1]) + f"[a-z]*?(?=[{_WS}]|$)"
    else:
        pattern = f"(?:^|[{_WS}])" + re.escape(t) + f"(?=[{_WS}]|$)"
    return _regex(pattern).search(hay) is not None


@functools.lru_cache(maxsize=None)
def _regex(pattern: str) -> "re.Pattern[str]":
    # re's own cache holds only 512 patterns: a 300-entry book would recompile every turn
    return re.compile(pattern)


def _arr(x: Any) -> list:
    return x if isinstance(x, list) else [] if x is None else [x]


def _finite(e: dict, key: str, default: float) -> float:
    if key not in e:
        return default
    n = js_to_number(e[key])
    return n if math.isfinite(n) else default


def run_reference(book: Any, context: dict, random: Callable[[], float], *, apply_limit: Any = 6,
                  window_depth: Any = 5) -> dict[str, Any]:
    """One run; returns the vectors' ``expected`` shape for a context that is an object."""
    depth = window_depth_of(window_depth)
    limit = apply_limit_of(apply_limit)
    calls = 0
    ch = context.get("character")
    ch = ch if js_truthy(ch) else {}
    p0 = ch.get("personality") if isinstance(ch, dict) else None
    s0 = ch.get("scenario") if isinstance(ch, dict) else None
    p0, s0 = (p0 if isinstance(p0, str) else ""), (s0 if isinstance(s0, str) else "")
    chat = context.get("chat")
    lm = js_get(chat, "last_messages") if js_truthy(chat) else None
    n = js_length(lm) if js_truthy(lm) else None
    if is_js_number(n) and n > 0:
        segs, i = [], max(0, n - depth)
        while i < n:
            item = js_get(lm, i)
            msg = js_get(item, "message") if js_truthy(item) else None
            segs.append(msg if isinstance(msg, str) else "" if item is None else js_string(item))
            i += 1
        joined = " ".join(segs)
    else:
        a = js_get(chat, "lastMessage") if js_truthy(chat) else None
        b = js_get(chat, "last_message") if js_truthy(chat) else None
        joined = (a if isinstance(a, str) else "") or (b if isinstance(b, str) else "")
    if is_js_number(n):
        count = n
    else:
        mc = js_get(chat, "message_count") if js_truthy(chat) else None
        count = mc if is_js_number(mc) else 0
    hay = " " + normalise(joined) + " "
    name = ch.get("name") if isinstance(ch, dict) else None
    active = normalise(name) if isinstance(name, str) else ""
    lore = [e if isinstance(e, dict) else {} for e in (book if isinstance(book, list) else [])]

    def keywords(e: dict) -> list:
        return e["keywords"] if isinstance(e.get("keywords"), list) else []

    def always_on(e: dict) -> bool:
        return not keywords(e) and not js_truthy(e.get("tag")) and e.get("minMessages") is None \
            and e.get("maxMessages") is None

    def passes(e: dict, tags: set[str]) -> bool:
        nonlocal calls
        if not (_finite(e, "minMessages", -math.inf) <= count <= _finite(e, "maxMessages", math.inf)):
            return False
        if active:
            for raw in (e["nameBlock"] if isinstance(e.get("nameBlock"), list) else []):
                nb = normalise("" if raw is None else js_string(raw))
                if nb and (nb == active or nb in active or nb.startswith(active + " ")):
                    return False
        r = e.get("requires") if js_truthy(e.get("requires")) else {}
        blk = e["block"] if isinstance(e.get("block"), list) else (
            e["Block"] if isinstance(e.get("Block"), list) else [])
        any_ = _arr(e.get("requireAny")) + _arr(e.get("andAny")) + _arr(js_get(r, "any"))
        all_ = _arr(e.get("requireAll")) + _arr(e.get("andAll")) + _arr(js_get(r, "all"))
        none = _arr(e.get("requireNone")) + _arr(e.get("notAny")) + _arr(js_get(r, "none")) + blk
        nall = _arr(e.get("notAll"))
        if any_ and not any(has_term(hay, w) for w in any_):
            return False
        if all_ and not all(has_term(hay, w) for w in all_):
            return False
        if none and any(has_term(hay, w) for w in none):
            return False
        if nall and all(has_term(hay, w) for w in nall):
            return False
        has = lambda t: js_string(t) in tags  # noqa: E731
        for key, ok in (("andAnyTags", any), ("andAllTags", all)):
            gate = _arr(e.get(key))
            if gate and not ok(map(has, gate)):
                return False
        for key, bad in (("notAnyTags", any), ("notAllTags", all)):
            gate = _arr(e.get(key))
            if gate and bad(map(has, gate)):
                return False
        calls += 1
        return not random() > parse_probability(e.get("probability"))

    def hit(e: dict) -> bool:
        return always_on(e) or any(has_term(hay, k) for k in keywords(e))

    def prio(e: dict):
        return read_priority(e["priority"]) if "priority" in e else read_priority()

    buckets: dict[Any, list[int]] = {p: [] for p in (1, 2, 3, 4, 5)}
    picked = [False] * len(lore)
    tags: set[str] = set()
    log: list[str] = []
    direct: list[int] = []
    triggered: list[int] = []
    for i, e in enumerate(lore):
        if not hit(e):
            continue
        if not passes(e, set()):
            log.append(f"filtered entry[{i}]")
            continue
        buckets[prio(e)].append(i)                # a fractional priority: KeyError (the script throws)
        picked[i] = True
        tags.update(js_string(t) for t in (e["triggers"] if isinstance(e.get("triggers"), list) else []))
        direct.append(i)
        log.append(f"hit entry[{i}] p={js_number_to_string(prio(e))}")
    for i, e in enumerate(lore):
        if picked[i] or not js_truthy(e.get("tag")) or js_string(e["tag"]) not in tags:
            continue
        if not passes(e, tags):
            log.append(f"filtered triggered entry[{i}]")
            continue
        buckets[prio(e)].append(i)
        picked[i] = True
        tags.update(js_string(t) for t in (e["triggers"] if isinstance(e.get("triggers"), list) else []))
        triggered.append(i)
        log.append(f"triggered entry[{i}] p={js_number_to_string(prio(e))}")
    selected: list[int] = []
    for p in (5, 4, 3, 2, 1):
        for i in buckets[p]:
            if len(selected) < limit:
                selected.append(i)
    if len(selected) == limit:
        log.append("APPLY_LIMIT reached")
    bp = bs = ""
    post_tags: set[str] = set()
    for i in selected:
        e = lore[i]
        bp += "\n\n" + js_string(e["personality"]) if js_truthy(e.get("personality")) else ""
        bs += "\n\n" + js_string(e["scenario"]) if js_truthy(e.get("scenario")) else ""
        shifts = e.get("Shifts") if isinstance(e.get("Shifts"), list) else []
        for sh in shifts:
            sh = sh if isinstance(sh, dict) else {}
            if not hit(sh):
                continue
            post_tags.update(js_string(t) for t in (sh["triggers"] if isinstance(sh.get("triggers"), list) else []))
            if not passes(sh, tags):
                log.append("shift filtered")
                continue
            bp += "\n\n" + js_string(sh["personality"]) if js_truthy(sh.get("personality")) else ""
            bs += "\n\n" + js_string(sh["scenario"]) if js_truthy(sh.get("scenario")) else ""
    post: list[int] = []
    for i, e in enumerate(lore):
        if picked[i] or not js_truthy(e.get("tag")) or js_string(e["tag"]) not in post_tags:
            continue
        if not passes(e, tags | post_tags):
            log.append(f"post-filter entry[{i}]")
            continue
        bp += "\n\n" + js_string(e["personality"]) if js_truthy(e.get("personality")) else ""
        bs += "\n\n" + js_string(e["scenario"]) if js_truthy(e.get("scenario")) else ""
        post.append(i)
        log.append(f"post-shift triggered entry[{i}] p={js_number_to_string(prio(e))}")
    return {"personality": p0 + bp, "scenario": s0 + bs, "error": None, "random_calls": calls,
            "trace": {"haystack": hay, "message_count": count, "active_name": active, "window_depth": depth,
                      "apply_limit": limit, "direct": direct, "triggered": triggered, "selected": selected,
                      "post_shift": post, "tags": sorted(tags, key=utf16_sort_key),
                      "post_shift_tags": sorted(post_tags, key=utf16_sort_key), "log": log}}
