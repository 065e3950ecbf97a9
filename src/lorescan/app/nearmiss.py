"""Near-misses: why an entry that did not fire *almost* did, for ``lorescan explain``.

Computed after the scan from the result's diagnostic, the entry and the chat, without
touching the engine: a key that occurs beyond the scan depth (in which message), only inside
a longer word (whole words on), only with another case (case-sensitive on); for a failed
secondary logic, which secondary keys matched. The window here is the chat messages only (a
recursion text or a global scan source the entry saw is not searched again), so a near-miss
is a hint about the chat, never a second opinion on the engine's decision.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ..js.regex import RegexTimeout, tool_regex
from ..js.text import js_lower, js_trim
from ..match.spans import find_plain_key
from ..match.view import MAX_SCAN_DEPTH, match_plain_key
from ..match.options import MatchOptions
from ..model import Entry
from ..st import Diagnostic, STSettings
from .chats import ChatFile

__all__ = ["NearMiss", "ChatTexts", "near_misses", "plain_keys_of", "plural", "show_key"]

_LOGIC = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}
_REGEX_TIMEOUT = 0.25


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 message``, ``2 messages``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def show_key(key: str) -> str:
    """A key as a person wrote it: a regex key as ``/…/flags`` untouched, a plain key in
    double quotes, with line breaks and tabs shown as ``\\n``/``\\t``."""
    if tool_regex(js_trim(key)) is not None:
        return key.replace("\n", "\\n")
    return '"' + key.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class NearMiss:
    """One near-miss. ``kind``: ``beyond_depth``, ``inside_word``, ``case`` or
    ``secondary``; ``key``: the key as stored; ``message``: the chat message (1-based, the
    file's numbering) where the key was found, if any; ``found``: the text found there (the
    longer word, the other case); ``text``: the sentence."""

    kind: str
    key: str
    message: int | None
    found: str | None
    text: str

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "key": self.key, "message": self.message, "found": self.found,
                "text": self.text}


def _word_at(text: str, start: int, end: int) -> str:
    def is_word(ch: str) -> bool:
        return ch.isalnum() or ch == "_"
    while start > 0 and is_word(text[start - 1]):
        start -= 1
    while end < len(text) and is_word(text[end]):
        end += 1
    return text[start:end]


def _find(text: str, key: str, case_sensitive: bool, options: MatchOptions) -> tuple[int, int] | None:
    # the span in ``text`` itself, also where lowercasing changes lengths (the matched spans' finder)
    return find_plain_key(text, key, case_sensitive=case_sensitive, whole_words=False, options=options)


class ChatTexts:
    """The chat's scanned texts, newest first, as the engine saw them: the newest
    ``MAX_SCAN_DEPTH`` only, as no scan depth reaches further."""

    def __init__(self, chat: ChatFile, include_names: bool) -> None:
        msgs = chat.messages[::-1][:MAX_SCAN_DEPTH]
        self.texts = [f"{m.name}: {m.text}" if include_names else m.text for m in msgs]
        self.lower = [js_lower(t) for t in self.texts]
        self.numbers = list(chat.numbers[::-1][:MAX_SCAN_DEPTH])
        self.lower_all = "\x01".join(self.lower)
        self._asked: set[str] = set()
        self._present: set[str] = set()

    def prepare(self, lowered_keys: Iterable[str]) -> None:
        """Find which of these (lowered) keys occur anywhere in the chat in one pass (an
        Aho-Corasick automaton), so each entry's check is a set lookup, not a search."""
        import ahocorasick  # import-cost: loads only when an explanation looks for near-misses
        todo = {k for k in lowered_keys if k and k not in self._asked}
        if not todo:
            return
        automaton = ahocorasick.Automaton()
        for k in todo:
            automaton.add_word(k, k)
        automaton.make_automaton()
        self._present.update(k for _, k in automaton.iter(self.lower_all))
        self._asked |= todo

    def may_contain(self, lowered_key: str) -> bool:
        if lowered_key in self._asked:
            return lowered_key in self._present
        return lowered_key in self.lower_all

    def newest(self, test: Callable[[str], bool], start: int = 0, stop: int | None = None,
               lowered_key: str | None = None) -> int | None:
        """The newest message in ``[start, stop)`` (0 = the newest) that passes ``test``;
        with ``lowered_key``, only messages whose lowered text contains it are tested."""
        lower = self.lower
        for i in range(start, len(self.texts) if stop is None else min(stop, len(self.texts))):
            if lowered_key is not None and lowered_key not in lower[i]:
                continue
            if test(self.texts[i]):
                return i
        return None


def plain_keys_of(entry: Entry, substitute: Callable[[str], str] | None = None) -> list[str]:
    """The lowered plain primary keys of ``entry`` (for :meth:`ChatTexts.prepare`)."""
    out = []
    for raw in entry.key:
        key = js_trim(substitute(raw) if substitute else raw)
        if key and tool_regex(key) is None:
            out.append(js_lower(key))
    return out


def near_misses(entry: Entry, diagnostic: Diagnostic, view: ChatTexts, settings: STSettings,
                options: MatchOptions, substitute: Callable[[str], str] | None = None) -> list[NearMiss]:
    """The near-misses of one entry that did not fire (empty for other outcomes). ``view``:
    ``ChatTexts(chat, settings.include_names)``, built once for all entries."""
    if diagnostic.outcome == "activated" or diagnostic.reason not in ("no_key_match", "secondary_keys"):
        return []
    d = entry.scan_depth if entry.scan_depth is not None else settings.scan_depth
    depth = MAX_SCAN_DEPTH if isinstance(d, float) and math.isinf(d) and d > 0 else max(0, min(int(d), MAX_SCAN_DEPTH))
    cs = entry.case_sensitive if entry.case_sensitive is not None else settings.case_sensitive
    ww = entry.match_whole_words if entry.match_whole_words is not None else settings.match_whole_words
    sub = substitute or (lambda s: s)
    if diagnostic.reason == "secondary_keys":
        return _secondary(entry, view, depth, cs, ww, options, sub)
    out: list[NearMiss] = []
    for raw in entry.key:
        key = js_trim(sub(raw))
        if not key:
            continue
        miss = _primary(raw, key, view, depth, cs, ww, options)
        if miss is not None:
            out.append(miss)
    return out


def _where(view: ChatTexts, i: int, depth: int) -> str:
    n = view.numbers[i]
    if i < depth:
        return f"message {n}"
    return f"message {n}, {plural(i - depth + 1, 'message')} beyond the scan depth of {depth}"


def _primary(raw: str, key: str, view: ChatTexts, depth: int, cs: bool, ww: bool,
             options: MatchOptions) -> NearMiss | None:
    shown = show_key(raw)
    rx = tool_regex(key)         # None also for an invalid regex: it reads as text (the lint reports it)
    if rx is not None:

        def found_rx(text: str) -> bool:
            try:
                return rx.search(text, timeout=_REGEX_TIMEOUT) is not None
            except RegexTimeout:
                return False
        i = view.newest(found_rx, depth)
        if i is None:
            return None
        return NearMiss("beyond_depth", raw, view.numbers[i], None,
                        f"key {shown} occurs in {_where(view, i, depth)}")
    kl = js_lower(key)
    if not view.may_contain(kl):
        return None

    def exact(text: str) -> bool:
        return match_plain_key(text, key, case_sensitive=cs, whole_words=ww, options=options)
    i = view.newest(exact, depth, lowered_key=kl)
    if i is not None:
        return NearMiss("beyond_depth", raw, view.numbers[i], None, f"key {shown} occurs in {_where(view, i, depth)}")
    if ww:
        def loose(text: str) -> bool:
            return match_plain_key(text, key, case_sensitive=cs, whole_words=False, options=options)
        i = view.newest(loose, lowered_key=kl)
        if i is not None:
            span = _find(view.texts[i], key, cs, options)
            word = _word_at(view.texts[i], *span) if span else None
            inside = f' ("{word}")' if word else ""
            return NearMiss("inside_word", raw, view.numbers[i], word,
                            f"key {shown} occurs only inside a longer word{inside} in {_where(view, i, depth)}; "
                            "whole words are on")
    if cs:
        def other_case(text: str) -> bool:
            return match_plain_key(text, key, case_sensitive=False, whole_words=ww, options=options)
        i = view.newest(other_case, lowered_key=kl)
        if i is not None:
            span = _find(view.texts[i], key, False, options)
            seen = view.texts[i][span[0]:span[1]] if span else None
            as_ = f' as "{seen}"' if seen else ""
            return NearMiss("case", raw, view.numbers[i], seen,
                            f"key {shown} occurs only with a different case{as_} in {_where(view, i, depth)}; "
                            "the entry is case-sensitive")
    return None


def _secondary(entry: Entry, view: ChatTexts, depth: int, cs: bool, ww: bool, options: MatchOptions,
               sub: Callable[[str], str]) -> list[NearMiss]:
    logic = entry.selective_logic if entry.selective_logic is not None else 0
    matched: list[str] = []
    missing: list[str] = []
    for raw in entry.keysecondary:
        key = js_trim(sub(raw))
        hit = False
        if key:
            rx = tool_regex(key)
            if rx is not None:
                try:
                    hit = view.newest(lambda t: rx.search(t, timeout=_REGEX_TIMEOUT) is not None, 0, depth) is not None
                except Exception:
                    hit = False
            else:
                hit = view.newest(lambda t: match_plain_key(t, key, case_sensitive=cs, whole_words=ww,
                                                            options=options), 0, depth) is not None
        (matched if hit else missing).append(show_key(raw))
    parts = []
    if matched:
        parts.append(f"matched in the scanned messages: {', '.join(matched)}")
    if missing:
        parts.append(f"not found there: {', '.join(missing)}")
    text = f"secondary logic {_LOGIC.get(logic, logic)}: " + "; ".join(parts)
    return [NearMiss("secondary", ", ".join(entry.keysecondary), None, None, text)]

