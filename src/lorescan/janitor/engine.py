"""``JanitorEngine``: the "ADVANCED LORE BOOK SYSTEM v12" JanitorAI script, run exactly
(docs/janitor-mode.md).

A run, as the script does it: read the window (the last ``WINDOW_DEPTH`` messages joined
with a space) and the message count; the direct pass (keyword hits and always-on entries,
gated by count, name block, text gates, tag gates against *no* tags, and a random roll);
the single front-to-back trigger pass (entries whose ``tag`` was emitted so far); priority
buckets 5..1 cut at ``APPLY_LIMIT``; the applied texts, each followed by its activated
``Shifts``; the post-shift pass (entries tagged by shifts, in book order, outside the
limit). The texts are written only at the end, so an exception leaves the initial ones.

The improved profile (``profile="improved"``) keeps Unicode letters, normalises terms as
text, and repeats the trigger pass to a fixed point; everything else is the script's.
"""
from __future__ import annotations

import math
import random as _random
from typing import Any, Callable, Iterable, Sequence

from ..errors import LorebookError
from ..js.coerce import is_js_number, js_get, js_length, js_number_to_string, js_parse_int, js_string
from ..js.coerce import utf16_sort_key
from ..model import js_truthy
from .entries import Entry, TermTable, read_book
from .normalise import IMPROVED, PROFILES, SCRIPT, normalise_improved, normalise_script
from .result import Decision, JanitorError, JanitorResult
from .scan import TermScanner

__all__ = ["JanitorEngine", "DEFAULT_APPLY_LIMIT", "DEFAULT_WINDOW_DEPTH", "NO_LIMIT"]

DEFAULT_APPLY_LIMIT = 6
DEFAULT_WINDOW_DEPTH = 5
NO_LIMIT = 99999
_NORM_CACHE_LIMIT = 8192
_NO_TAGS: frozenset[str] = frozenset()


def window_depth_of(value: Any) -> int:
    """``WINDOW_DEPTH`` from the knob: ``parseInt(value, 10)``, 5 on NaN, clamped to 1..20."""
    n = js_parse_int(value)
    if math.isnan(n):
        return DEFAULT_WINDOW_DEPTH
    return int(min(20.0, max(1.0, n)))


def apply_limit_of(value: Any) -> int | float:
    """The limit in force: the knob when it is a number >= 1, else no limit (99999)."""
    if is_js_number(value) and value >= 1:
        return value
    return NO_LIMIT


class _Throw(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name, self.message = name, message


def _random_source(random: Any) -> Callable[[], float]:
    if random is None:
        return _random.random
    if callable(random):
        return random
    values = iter(random)
    taken = 0

    def next_value() -> float:
        nonlocal taken
        try:
            v = next(values)
        except StopIteration:
            raise LorebookError(f"the random sequence ran out after {taken} value(s)", source="random") from None
        taken += 1
        return float(v)
    return next_value


class JanitorEngine:
    """The script engine for one book and one pair of knobs; ``run`` once per turn.

    Args:
        book: the raw ``dynamicLore`` value (normally a list of entry objects; anything
            else is read as the script reads it).
        apply_limit: the ``APPLY_LIMIT`` knob, any JSON value (default 6).
        window_depth: the ``WINDOW_DEPTH`` knob, any JSON value (default 5).
        profile: ``"script"`` (exact) or ``"improved"``.
    """

    def __init__(self, book: Any, *, apply_limit: Any = DEFAULT_APPLY_LIMIT,
                 window_depth: Any = DEFAULT_WINDOW_DEPTH, profile: str = SCRIPT) -> None:
        if profile not in PROFILES:
            raise LorebookError(f"unknown profile {profile!r} (expected one of {', '.join(PROFILES)})",
                                source="settings", field="profile")
        self.profile = profile
        self.book = book
        self.apply_limit = apply_limit_of(apply_limit)
        self.window_depth = window_depth_of(window_depth)
        self._norm = normalise_improved if profile == IMPROVED else normalise_script
        self.terms = TermTable(profile)
        self.entries: tuple[Entry, ...] = read_book(book, self.terms, self._norm)
        self.scanner = TermScanner(self.terms.terms, profile)
        self._norm_cache: dict[str, str] = {}

    @classmethod
    def from_book(cls, book: Any, *, profile: str = SCRIPT, **knobs: Any) -> "JanitorEngine":
        """An engine for a :class:`~lorescan.model.Lorebook` read from a JanitorAI script or its
        JSON (``book.format == "janitor"``): its ``dynamicLore`` value and knobs as read
        (``knobs``: ``apply_limit=`` / ``window_depth=`` overrides). For a book of another
        format, or one changed since reading, pass ``lorescan.formats.janitor.janitor_source(book)``'s
        ``entries`` and ``knobs()`` to the constructor instead."""
        doc = getattr(getattr(book, "origin", None), "document", None)
        if getattr(book, "format", None) != "janitor" or not isinstance(doc, dict) or "dynamicLore" not in doc:
            raise LorebookError("not a book read from a JanitorAI script (use formats.janitor.janitor_source)",
                                source=getattr(book, "source", "<memory>"))
        read = {arg: doc[name] for name, arg in (("APPLY_LIMIT", "apply_limit"), ("WINDOW_DEPTH", "window_depth"))
                if name in doc}
        return cls(doc["dynamicLore"], profile=profile, **{**read, **knobs})

    # -- the window ---------------------------------------------------------------------
    def normalise(self, text: str) -> str:
        """One message normalised (cached per distinct message)."""
        got = self._norm_cache.get(text)
        if got is None:
            if len(self._norm_cache) >= _NORM_CACHE_LIMIT:
                self._norm_cache.clear()
            got = self._norm_cache[text] = self._norm(text)
        return got

    def read_window(self, context: Any) -> tuple[list[str], Any]:
        """The window's messages (raw strings, oldest first) and the message count."""
        chat = js_get(context, "chat") if js_truthy(context) else None
        lm = js_get(chat, "last_messages") if js_truthy(chat) else None
        length = js_length(lm) if js_truthy(lm) else None
        if is_js_number(length):
            count: Any = length
            if length > 0:
                return self._window_items(lm, length), count
        else:
            count = 0
            mc = js_get(chat, "message_count") if js_truthy(chat) else None
            if is_js_number(mc):
                count = mc
        single = ""
        if js_truthy(chat):
            a, b = js_get(chat, "lastMessage"), js_get(chat, "last_message")
            single = (a if isinstance(a, str) else "") or (b if isinstance(b, str) else "")
        return ([single] if single else []), count

    def _window_items(self, lm: Any, length: float) -> list[str]:
        i: float = max(0, length - self.window_depth)
        out: list[str] = []
        while i < length:
            item = js_get(lm, i)
            msg = js_get(item, "message") if js_truthy(item) else None
            if isinstance(msg, str):
                out.append(msg)
            else:
                out.append("" if item is None else js_string(item))
            if i + 1 == i or len(out) > 4 * 20:
                raise LorebookError("last_messages.length is too large: the script would never finish",
                                    source="context", field="chat.last_messages.length")
            i += 1
        return out

    # -- one run ------------------------------------------------------------------------
    def run(self, context: Any, random: Callable[[], float] | Sequence[float] | None = None) -> JanitorResult:
        """One run of the script on ``context``; ``random`` replaces ``Math.random``."""
        return _Run(self, context, _random_source(random)).result()


class _Run:
    """The state of one run (the script's globals)."""

    def __init__(self, engine: JanitorEngine, context: Any, rand: Callable[[], float]) -> None:
        self.engine = engine
        self.rand = rand
        self.calls = 0
        self.log: list[str] = []
        self.decisions: list[Decision] = []
        self.trace: dict[str, Any] = {k: None for k in ("haystack", "message_count", "active_name",
                                                        "window_depth", "apply_limit", "selected")}
        self.trace.update(direct=[], triggered=[], post_shift=[], tags=[], post_shift_tags=[], log=self.log)
        self.context = context
        self.parts: tuple[str, ...] = ()

    # -- gates ---------------------------------------------------------------------------
    def _stop(self, e: Entry, tags: Iterable[str] | frozenset[str] | set[str]) -> tuple[str | None, dict]:
        """The first gate that stops ``e`` (``None``: it passes; the roll is drawn)."""
        if not (e.min_messages <= self.count <= e.max_messages):
            return "count", {"count": self.count, "min": e.min_messages, "max": e.max_messages}
        name = self.active_name
        if name and e.name_block:
            for n in e.name_block:
                if n == name or n in name or n.startswith(name + " "):
                    return "name_block", {"name": n}
        m = self.matched
        if e.any_of and not any(t in m for t in e.any_of):
            return "gate_any", {"terms": e.any_of}
        if e.all_of:
            missing = [t for t in e.all_of if t not in m]
            if missing:
                return "gate_all", {"terms": tuple(missing)}
        if e.none_of:
            present = [t for t in e.none_of if t in m]
            if present:
                return "gate_none", {"terms": (present[0],)}
        if e.not_all and all(t in m for t in e.not_all):
            return "gate_not_all", {"terms": e.not_all}
        if e.any_tags and not any(t in tags for t in e.any_tags):
            return "tags_any", {"tags": e.any_tags}
        if e.all_tags and not all(t in tags for t in e.all_tags):
            return "tags_all", {"tags": tuple(t for t in e.all_tags if t not in tags)}
        if e.none_tags and any(t in tags for t in e.none_tags):
            return "tags_none", {"tags": tuple(t for t in e.none_tags if t in tags)}
        if e.not_all_tags and all(t in tags for t in e.not_all_tags):
            return "tags_not_all", {"tags": e.not_all_tags}
        r = self.rand()
        self.calls += 1
        if r > e.probability:
            return "roll", {"roll": r, "probability": e.probability}
        return None, {"roll": r, "probability": e.probability}

    def _hit(self, e: Entry) -> int | None:
        """The first keyword that hits (its position), -1 for always-on, None for no hit."""
        if e.always_on:
            return -1
        m = self.matched
        for pos, t in enumerate(e.keywords):
            if t in m:
                return pos
        return None

    def _note(self, e: Entry, stage: str, outcome: str, detail: dict, shift: int | None = None) -> None:
        self.decisions.append(Decision(e.index if shift is None else self._parent, shift, stage, outcome, detail))

    # -- the script ----------------------------------------------------------------------
    def result(self) -> JanitorResult:
        engine = self.engine
        context = self.context
        initial = (None, None)
        character: Any = None
        if isinstance(context, (dict, list)):
            character = js_get(context, "character") if isinstance(context, dict) else None
            if not js_truthy(character):
                character = {}
            writable = isinstance(character, (dict, list))
            if writable:
                p = js_get(character, "personality")
                s = js_get(character, "scenario")
                initial = (p if isinstance(p, str) else "", s if isinstance(s, str) else "")
            try:
                out = self._script(context, character)
            except _Throw as exc:
                return self._finish(initial, JanitorError(exc.name, exc.message))
            if not writable:
                return self._finish((None, None), None)
            bufp, bufs = out
            return self._finish((initial[0] + bufp, initial[1] + bufs), None)
        what = "null" if context is None else "undefined"
        return self._finish(initial, JanitorError(
            "TypeError", f"Cannot read properties of {what} (reading 'character')" if context is None
            else "Cannot set properties of undefined (setting 'personality')"))

    def _finish(self, texts: tuple[str | None, str | None], error: JanitorError | None) -> JanitorResult:
        return JanitorResult(texts[0], texts[1], error, self.calls, self.trace, tuple(self.decisions),
                             self.parts, self.engine.profile)

    def _script(self, context: Any, character: Any) -> tuple[str, str]:
        engine = self.engine
        trace = self.trace
        trace["window_depth"] = engine.window_depth
        raw, self.count = engine.read_window(context)
        norms = [engine.normalise(m) for m in raw]
        self.parts = tuple(norms)
        trace["haystack"] = " " + " ".join(n for n in norms if n) + " "
        trace["message_count"] = self.count
        name = js_get(character, "name") if isinstance(character, (dict, list)) else None
        self.active_name = engine.normalise(name) if isinstance(name, str) else ""
        trace["active_name"] = self.active_name
        self.matched = engine.scanner.scan(norms)

        entries = engine.entries
        buckets: dict[int, list[int]] = {p: [] for p in (5, 4, 3, 2, 1)}
        picked = [False] * len(entries)
        tags: set[str] = set()

        def accept(e: Entry, stage: str, detail: dict) -> None:
            if not e.bucket_ok:
                self._note(e, stage, "bucket", {"priority": e.priority})
                raise _Throw("TypeError", "Cannot read properties of undefined (reading 'push')")
            buckets[int(e.priority)].append(e.index)
            picked[e.index] = True
            tags.update(e.triggers)
            self._note(e, stage, "accepted", detail)

        for e in entries:                                        # the direct pass
            pos = self._hit(e)
            if pos is None:
                self._note(e, "direct", "no_keyword", {})
                continue
            why, detail = self._stop(e, _NO_TAGS)
            detail["keyword"] = pos
            if why is not None:
                self._note(e, "direct", why, detail)
                self.log.append(f"filtered entry[{e.index}]")
                continue
            accept(e, "direct", detail)
            trace["direct"].append(e.index)
            self.log.append(f"hit entry[{e.index}] p={js_number_to_string(e.priority)}")

        self._trigger_pass(entries, picked, tags, accept)
        trace["tags"] = sorted(tags, key=utf16_sort_key)

        limit = engine.apply_limit
        trace["apply_limit"] = limit
        selected: list[int] = []
        for p in (5, 4, 3, 2, 1):
            for i in buckets[p]:
                if len(selected) < limit:
                    selected.append(i)
                else:
                    self._note(entries[i], "select", "apply_limit", {"limit": limit})
        trace["selected"] = selected
        if len(selected) == limit:
            self.log.append("APPLY_LIMIT reached")

        bufp: list[str] = []
        bufs: list[str] = []
        post_tags: set[str] = set()
        for i in selected:
            e = entries[i]
            self._note(e, "select", "applied", {})
            self._texts(e, bufp, bufs)
            self._parent = i
            for sh in e.shifts:
                pos = self._hit(sh)
                if pos is None:
                    self._note(sh, "shift", "no_keyword", {}, shift=sh.index)
                    continue
                post_tags.update(sh.triggers)
                why, detail = self._stop(sh, tags)
                detail["keyword"] = pos
                if why is not None:
                    self._note(sh, "shift", why, detail, shift=sh.index)
                    self.log.append("shift filtered")
                    continue
                self._note(sh, "shift", "applied", detail, shift=sh.index)
                self._texts(sh, bufp, bufs)
        trace["post_shift_tags"] = sorted(post_tags, key=utf16_sort_key)

        union = tags | post_tags
        for e in entries:                                        # the post-shift pass
            if picked[e.index] or e.tag is None or e.tag not in post_tags:
                continue
            why, detail = self._stop(e, union)
            if why is not None:
                self._note(e, "post_shift", why, detail)
                self.log.append(f"post-filter entry[{e.index}]")
                continue
            self._note(e, "post_shift", "applied", detail)
            self._texts(e, bufp, bufs)
            trace["post_shift"].append(e.index)
            self.log.append(f"post-shift triggered entry[{e.index}] p={js_number_to_string(e.priority)}")
        return "".join(bufp), "".join(bufs)

    def _trigger_pass(self, entries: Sequence[Entry], picked: list[bool], tags: set[str],
                      accept: Callable[[Entry, str, dict], None]) -> None:
        fixed_point = self.engine.profile == IMPROVED
        final: set[int] = set()
        while True:
            before = len(tags)
            for e in entries:
                if picked[e.index] or e.index in final:
                    continue
                if e.tag is None or e.tag not in tags:
                    continue
                why, detail = self._stop(e, tags)
                if why is not None:
                    self._note(e, "trigger", why, detail)
                    self.log.append(f"filtered triggered entry[{e.index}]")
                    if not why.startswith("tags_"):
                        final.add(e.index)
                    continue
                accept(e, "trigger", detail)
                self.trace["triggered"].append(e.index)
                self.log.append(f"triggered entry[{e.index}] p={js_number_to_string(e.priority)}")
            if not fixed_point or len(tags) == before:
                return

    @staticmethod
    def _texts(e: Entry, bufp: list[str], bufs: list[str]) -> None:
        if e.personality is not None:
            bufp.append("\n\n" + e.personality)
        if e.scenario is not None:
            bufs.append("\n\n" + e.scenario)
