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

import heapq
import math
import random as _random
from typing import AbstractSet, Any, Callable, Sequence

from ..errors import LorebookError
from ..js.coerce import is_js_number, js_get, js_length, js_parse_int, js_string
from ..js.coerce import js_sorted
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
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise LorebookError(f"random value {taken} is not a number: {v!r:.40}", source="random",
                                field=f"[{taken}]")
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
        # the fast path visits only entries a matched keyword or an emitted tag can reach
        self.always_on = tuple(e.index for e in self.entries if e.always_on)
        by_term: dict[int, list[int]] = {}
        by_tag: dict[str, list[int]] = {}
        for e in self.entries:
            for t in set(e.keywords):
                by_term.setdefault(t, []).append(e.index)
            if e.tag is not None:
                by_tag.setdefault(e.tag, []).append(e.index)
        self.by_term = {t: tuple(v) for t, v in by_term.items()}
        self.by_tag = {t: tuple(v) for t, v in by_tag.items()}

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

    def read_window(self, context: Any) -> tuple[list[str], Any, bool]:
        """The window's messages (raw strings, oldest first), the message count, and whether
        they came from ``last_messages`` (else from ``lastMessage`` / ``last_message``)."""
        if type(context) is dict:                 # the usual shape, read without the general rules
            chat = context.get("chat")
            lm = chat.get("last_messages") if type(chat) is dict else None
            if type(lm) is list and lm:
                return self._window_items(lm, len(lm)), len(lm), True
        chat = js_get(context, "chat") if js_truthy(context) else None
        lm = js_get(chat, "last_messages") if js_truthy(chat) else None
        length: Any = js_length(lm) if js_truthy(lm) else None
        count: Any = 0
        if is_js_number(length):
            count = length
            if length > 0:
                return self._window_items(lm, float(length)), count, True
        else:
            mc = js_get(chat, "message_count") if js_truthy(chat) else None
            if is_js_number(mc):
                count = mc
        single = ""
        if js_truthy(chat):
            a, b = js_get(chat, "lastMessage"), js_get(chat, "last_message")
            single = (a if isinstance(a, str) else "") or (b if isinstance(b, str) else "")
        return ([single] if single else []), count, False

    def _window_items(self, lm: Any, length: float) -> list[str]:
        out: list[str] = []
        if isinstance(lm, list):
            for item in lm[max(0, len(lm) - self.window_depth):]:
                msg = item.get("message") if isinstance(item, dict) else None
                if isinstance(msg, str):
                    out.append(msg)
                else:
                    msg = js_get(item, "message") if js_truthy(item) else None
                    out.append(msg if isinstance(msg, str) else "" if item is None else js_string(item))
            return out
        i: float = max(0, length - self.window_depth)
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
        """One run of the script on ``context``; ``random`` replaces ``Math.random`` (a
        zero-argument callable, or a sequence of the values to return in order)."""
        return _Run(self, context, _random_source(random)).result()

    def explain(self, context: Any, index: int | None = None,
                random: Callable[[], float] | Sequence[float] | None = None) -> str:
        """Run once and explain every entry (or only entry ``index``): see ``JanitorResult.explain``."""
        return self.run(context, random=random).explain(index)


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
        self.window_start = 0
        self.tags: set[str] = set()
        self.count: Any = 0
        self.active_name = ""
        self.matched: set[int] = set()
        self._parent = -1

    # -- gates ---------------------------------------------------------------------------
    def _stop(self, e: Entry, tags: AbstractSet[str]) -> tuple[str | None, dict]:
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
        context = self.context
        initial: tuple[str | None, str | None] = (None, None)
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
                self.trace["tags"] = js_sorted(self.tags)
                return self._finish(initial, JanitorError(exc.name, exc.message))
            if not writable:
                return self._finish((None, None), None)
            bufp, bufs = out
            return self._finish(((initial[0] or "") + bufp, (initial[1] or "") + bufs), None)
        what = "null" if context is None else "undefined"
        return self._finish(initial, JanitorError(
            "TypeError", f"Cannot read properties of {what} (reading 'character')" if context is None
            else "Cannot set properties of undefined (setting 'personality')"))

    def _finish(self, texts: tuple[str | None, str | None], error: JanitorError | None) -> JanitorResult:
        return JanitorResult(texts[0], texts[1], error, self.calls, self.trace, tuple(self.decisions),
                             self.parts, self.engine.profile, self.window_start, self.engine)

    def _script(self, context: Any, character: Any) -> tuple[str, str]:
        engine = self.engine
        trace = self.trace
        trace["window_depth"] = engine.window_depth
        raw, self.count, from_array = engine.read_window(context)
        self.window_start = max(0, math.ceil(self.count - len(raw))) if from_array else -1
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
        self.tags = tags                  # the trace shows the tags emitted so far if the script throws

        def accept(e: Entry, stage: str, detail: dict) -> None:
            if not e.bucket_ok:
                self._note(e, stage, "bucket", {**detail, "priority": e.priority})
                raise _Throw("TypeError", "Cannot read properties of undefined (reading 'push')")
            buckets[int(e.priority)].append(e.index)
            picked[e.index] = True
            tags.update(e.triggers)
            self._note(e, stage, "accepted", detail)

        candidates = set(engine.always_on)
        by_term = engine.by_term
        for t in self.matched:
            candidates.update(by_term.get(t, ()))
        for i in sorted(candidates):                              # the direct pass
            e = entries[i]
            pos = self._hit(e)
            if pos is None:                                       # only reached through a term
                continue
            why, detail = self._stop(e, _NO_TAGS)
            detail["keyword"] = pos
            if why is not None:
                self._note(e, "direct", why, detail)
                self.log.append(f"filtered entry[{i}]")
                continue
            accept(e, "direct", detail)
            trace["direct"].append(i)
            self.log.append(f"hit entry[{i}] p={e.p_text}")

        self._trigger_pass(entries, picked, tags, accept)
        trace["tags"] = js_sorted(tags)

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
        trace["post_shift_tags"] = js_sorted(post_tags)

        union = tags | post_tags
        post = sorted({i for t in post_tags for i in engine.by_tag.get(t, ())})
        for i in post:                                           # the post-shift pass
            e = entries[i]
            if picked[i]:
                continue
            why, detail = self._stop(e, union)
            if why is not None:
                self._note(e, "post_shift", why, detail)
                self.log.append(f"post-filter entry[{e.index}]")
                continue
            self._note(e, "post_shift", "applied", detail)
            self._texts(e, bufp, bufs)
            trace["post_shift"].append(e.index)
            self.log.append(f"post-shift triggered entry[{e.index}] p={e.p_text}")
        return "".join(bufp), "".join(bufs)

    def _trigger_pass(self, entries: Sequence[Entry], picked: list[bool], tags: set[str],
                      accept: Callable[[Entry, str, dict], None]) -> None:
        """The script's single front-to-back pass over entries whose tag was emitted: an
        entry sees the tags of the direct pass and of the entries accepted before it.

        The improved profile repeats the pass while it adds tags. A later pass evaluates an
        entry whose tag became active only then, and one that a positive tag gate
        (``andAnyTags`` / ``andAllTags``) stopped, once one of that gate's tags is new;
        any other stop is final (the text, the count and the roll do not change)."""
        by_tag = self.engine.by_tag
        fixed_point = self.engine.profile == IMPROVED
        final: set[int] = set()
        waiting: dict[int, frozenset[str]] = {}
        new_tags: set[str] = set(tags)
        while True:
            before = set(tags)
            heap = sorted({i for t in tags for i in by_tag.get(t, ())
                           if not picked[i] and i not in final and (i not in waiting or waiting[i] & new_tags)})
            seen: set[int] = set()
            while heap:
                i = heapq.heappop(heap)
                if i in seen:
                    continue
                seen.add(i)
                e = entries[i]
                why, detail = self._stop(e, tags)
                if why is not None:
                    self._note(e, "trigger", why, detail)
                    self.log.append(f"filtered triggered entry[{i}]")
                    if why in ("tags_any", "tags_all"):
                        waiting[i] = frozenset(e.any_tags + e.all_tags)
                    else:
                        final.add(i)
                    continue
                waiting.pop(i, None)
                new = [t for t in e.triggers if t not in tags]
                accept(e, "trigger", detail)
                self.trace["triggered"].append(i)
                self.log.append(f"triggered entry[{i}] p={e.p_text}")
                for t in new:                          # later entries only: the pass runs forward
                    for j in by_tag.get(t, ()):
                        if j > i and not picked[j] and j not in seen and j not in final and j not in waiting:
                            heapq.heappush(heap, j)
            new_tags = tags - before
            if not fixed_point or not new_tags:
                return

    @staticmethod
    def _texts(e: Entry, bufp: list[str], bufs: list[str]) -> None:
        if e.personality is not None:
            bufp.append("\n\n" + e.personality)
        if e.scenario is not None:
            bufs.append("\n\n" + e.scenario)
