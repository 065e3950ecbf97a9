"""The windows of a scan and the values a match view answers with (no matching here).

A :class:`Window` says which texts one entry sees in one pass; :class:`WindowTexts` holds a
scan's texts as plain data and cuts a window's :class:`WindowPart` list from them (for
explanations); :class:`EntryMatch` is one entry's key results. Split out of
:mod:`lorescan.match.view`, which re-exports every name here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..js.text import js_trim

SOURCE_NAMES = ("persona_description", "character_description", "character_personality",
                "character_depth_prompt", "scenario", "creator_notes")
MAX_SCAN_DEPTH = 1000
MARKER = "\x01"
JOINER = "\n\x01"


@dataclass(frozen=True, slots=True)
class Window:
    """Which texts one entry sees in one pass (docs/sillytavern-mode.md#st-scan-text).

    ``depth``: newest messages scanned (<= 0: the haystack is empty, nothing else is seen
    either); ``sources``: bit i set = SOURCE_NAMES[i] is appended; ``recursion``: how many
    recursion chunks (oldest first) are appended (0 in MIN_ACTIVATIONS passes).
    """

    depth: float
    sources: int = 0
    recursion: int = 0


@dataclass(frozen=True, slots=True)
class WindowPart:
    """One text of a window, in haystack order.

    ``kind``: ``message``, ``source``, ``inject`` or ``recursion``; ``index``: a message's
    place counting from the newest (0), a source's place in ``SOURCE_NAMES``, an inject's
    place, a recursion chunk's number (1 = the oldest); ``label``: the same in words
    (``message 0 (newest = 0)``, ``scenario``, ``inject 0``, ``recursion text 1``).
    """

    kind: str
    index: int
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class WindowTexts:
    """The texts a scan's windows are cut from: message segments (newest first), sources,
    injects and recursion chunks."""

    segments: tuple[str, ...]
    sources: tuple[str, ...]
    injects: tuple[str, ...]
    chunks: tuple[str, ...]

    def labelled_texts(self, window: Window) -> list[tuple[str, str]]:
        """The texts ``window`` covers, in haystack order, each with a label ("message 0
        (newest = 0)", "scenario", "inject 0", "recursion text 1", ...)."""
        return [(p.label, p.text) for p in self.parts(window)]

    def parts(self, window: Window) -> list[WindowPart]:
        """:meth:`labelled_texts` with each text's kind and place (for explanations)."""
        if window.depth <= 0:
            return []
        depth = min(int(window.depth), MAX_SCAN_DEPTH)
        segments = self.segments[:depth]
        out = [WindowPart("message", i, f"message {i} (newest = 0)", t) for i, t in enumerate(segments)] if segments \
            else [WindowPart("message", 0, "no message", "")]
        for i, text in enumerate(self.sources):
            if window.sources >> i & 1 and text:
                out.append(WindowPart("source", i, SOURCE_NAMES[i], text))
        out.extend(WindowPart("inject", i, f"inject {i}", t) for i, t in enumerate(self.injects))
        if window.recursion:
            out.extend(WindowPart("recursion", i + 1, f"recursion text {i + 1}", t)
                       for i, t in enumerate(self.chunks[:window.recursion]))
        return out


@dataclass(frozen=True, slots=True)
class EntryMatch:
    """Key results for one entry in one window.

    ``primary``: index in ``entry.key`` of the first primary key (list order) that matches,
    or None. ``secondary``: one bool per secondary key, in order (an empty key is False).
    ``timed_out``: regex keys (raw) whose evaluation was cut off by the scan's regex time
    budget (counted as no match this turn, never cached; see :meth:`ScanView.cut_off_report`).
    """

    primary: int | None
    secondary: tuple[bool, ...]
    timed_out: tuple[str, ...] = ()

def _segments_of(messages: Sequence[str]) -> list[str]:
    msgs = list(messages[:MAX_SCAN_DEPTH])
    last = max((i for i, m in enumerate(msgs) if m), default=-1)
    return [js_trim(m) if m else "" for m in msgs[:last + 1]]

