"""Compiled JS regex keys: :class:`JSRegex` (run on RE2 or ``regex``), :class:`JSText`, and the
functions that turn a key into one (see the package doc for which to use)."""
from __future__ import annotations

import bisect
import functools
import itertools
import re
import time
from typing import Literal

import regex

from .chars import REGEX_MAX_EXPANSION, _SURROGATE_PAIR, _canon_table, _join_surrogates, _split_astral
from .checks import expansion, hazard
from .linear import Plan, linear_text, plan_of
from .literals import leading_literals
from .parser import parse
from .translate import emit
from .tree import JSRegexError, RegexTimeout, RegexTooComplex

__all__ = ["JSRegex", "JSText", "regex_key", "tool_regex"]

_FOLDS_TO_ASCII = regex.compile("[\\u0130\\u0131\\u017f\\u212a]")

_Compiled = tuple[regex.Pattern, "dict[int, int] | None", "regex.Pattern | None"]
_UNSET: object = object()        # JSRegex._lead before its first search


_Translated = tuple[str, bool, "str | None"]     # (regex text, canonicalise texts?, fast variant or None)


def _translation(pattern: str, flags: str, max_expansion: int | None = REGEX_MAX_EXPANSION,
                 max_nesting: int | None = None) -> tuple[_Translated, bool, str | None, int]:
    """((the ``regex`` pattern text, whether texts must be canonicalised, the fast variant for
    texts without the characters of ``_FOLDS_TO_ASCII`` or None), whether the regex is
    line-local (see :attr:`JSRegex.line_local`), its catastrophic shape or None, the terms it
    builds). All from one parse. RegexTooComplex past ``max_nesting`` (group depth) or
    ``max_expansion`` terms (None: no limit), before anything is emitted. Nothing is compiled."""
    parsed = parse(pattern, flags)
    if max_nesting is not None and parsed.depth > max_nesting:
        raise RegexTooComplex(f"groups are nested {parsed.depth} deep, more than the limit "
                              f"max_regex_nesting={max_nesting}")
    units = expansion(parsed)
    if max_expansion is not None and units > max_expansion:
        exc = RegexTooComplex(f"counted repeats expand the pattern to {units:,} terms, more than the "
                              f"limit max_regex_expansion={max_expansion:,}")
        exc.expansion = units
        raise exc
    text, em = emit(parsed)
    canonical = parsed.backrefs and "i" in flags
    fast_text = None
    if "i" in flags and "u" not in flags and not canonical:
        fast_text, _ = emit(parsed, True)
        if fast_text == text:
            fast_text = None
    line_local = not (em.newline or em.text_anchor or "y" in flags)
    return (text, canonical, fast_text), line_local, hazard(parsed, em.overlap), units


def _compile_texts(pattern: str, flags: str, translated: _Translated) -> _Compiled:
    """(the compiled pattern, the Canonicalize table to apply to texts or None, the compiled
    fast variant or None) of a :func:`_translation`."""
    text, canonical, fast_text = translated
    table = _canon_table("u" in flags) if canonical else None
    try:
        compiled = regex.compile(text, regex.V0)
        fast = regex.compile(fast_text, regex.V0) if fast_text is not None else None
    except regex.error as exc:  # a translator bug, not a user error: say so loudly
        raise RuntimeError(f"lorescan.js.regex produced an invalid regex for /{pattern}/{flags}: {exc}") from exc
    return compiled, table, fast


def _compile_translated(pattern: str, flags: str, max_expansion: int | None = REGEX_MAX_EXPANSION
                        ) -> tuple[_Compiled, bool, str | None, int]:
    """:func:`_translation`, compiled: (the :func:`_compile_texts` triple, line-local, hazard, terms)."""
    translated, line_local, hazard, units = _translation(pattern, flags, max_expansion)
    return _compile_texts(pattern, flags, translated), line_local, hazard, units


class JSRegex:
    """A compiled JS regex. Immutable and thread-safe; pickles as (source, flags).

    ``source``/``flags`` are the JS pattern and flags (a key's, as :func:`regex_key` splits it).
    ``line_local``: no match can consume U+000A (no class, escape, ``.`` under ``s`` or
    literal that accepts it, lookarounds included), the pattern has no whole-input anchor
    (``^``/``$`` without ``m``) and no ``y``. Then a match in a text never reaches past the
    text's lines, and its assertions see a line break and the input edge alike, so on a
    SillyTavern haystack the regex can be tested text by text (see ``lorescan.match.regexscope``).
    ``hazard``: a classic catastrophic-backtracking shape found in the pattern, or None.
    ``expansion``: the terms the compiled pattern holds, counted repeats multiplied out (0 when
    not known: a regex unpickled and not compiled by :func:`regex_key`).
    """

    __slots__ = ("source", "flags", "line_local", "hazard", "expansion", "_compiled", "_translated", "_sticky",
                 "_unicode", "_hash", "_lead", "_plan")
    # slot types (set once, via object.__setattr__, in __init__; _compiled also on first search)
    source: str
    flags: str
    line_local: bool
    hazard: str | None
    expansion: int
    _compiled: _Compiled | None
    _translated: _Translated | None   # compiled on the first search (regex.compile costs ~0.5 ms a pattern)
    _sticky: bool
    _hash: int
    _unicode: bool
    _lead: object                 # tuple[str, ...] | None once known; _UNSET before
    _plan: Plan | None            # how it runs and what it costs (js.regex.linear), with _compiled

    def __init__(self, source: str, flags: str, compiled: _Compiled | None = None, line_local: bool = False,
                 hazard: str | None = None, expansion: int = 0, translated: _Translated | None = None) -> None:
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "flags", flags)
        object.__setattr__(self, "line_local", line_local)
        object.__setattr__(self, "hazard", hazard)
        object.__setattr__(self, "expansion", expansion)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_translated", translated)
        object.__setattr__(self, "_sticky", "y" in flags)
        object.__setattr__(self, "_unicode", "u" in flags)
        object.__setattr__(self, "_hash", hash((source, flags)))
        object.__setattr__(self, "_lead", _UNSET)
        object.__setattr__(self, "_plan", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("JSRegex is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("JSRegex is immutable")

    def __reduce__(self):
        # recompiled lazily on first search (the facts travel, so no translation is needed)
        return (JSRegex, (self.source, self.flags, None, self.line_local, self.hazard, self.expansion))

    def __repr__(self) -> str:
        return f"JSRegex(/{self.source}/{self.flags})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JSRegex) and (self.source, self.flags) == (other.source, other.flags)

    def __hash__(self) -> int:
        return self._hash

    def _ready(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile()
        return compiled

    @property
    def plan(self) -> Plan:
        """How this regex runs (RE2 or backtracking) and what an evaluation costs (:mod:`lorescan.js.regex.linear`)."""
        self._ready()
        return self._plan                               # type: ignore[return-value]

    def cost(self, text: str | JSText) -> float:
        """The nominal seconds :meth:`search` may take on ``text``: a pure function of the
        pattern and the text (inf: the regex backtracks with no polynomial bound)."""
        self._ready()
        plan = self._plan
        assert plan is not None
        if not isinstance(text, JSText):
            text = JSText(text)
        if plan.re2 is not None:
            data = text.linear(self._unicode)
            if data is not None:
                return plan.linear_cost(len(data))
        return plan.backtrack_cost(len(text.points() if self._unicode else text.units()))

    def search(self, text: str | JSText, *, timeout: float | None = 0.25, per_call: bool = False) -> bool:
        """True iff ``RegExp.prototype.test(text)`` is true for a fresh regex object.

        ``g`` has no effect; ``y`` anchors the match at index 0. A regex RE2 can run exactly
        runs there, in linear time (``timeout`` is not needed); any other on ``regex``, where
        ``timeout`` is in seconds of wall-clock time (None: no limit) and RegexTimeout is
        raised past it. ``per_call``: ``timeout`` bounds each call into ``regex`` (one per
        candidate start), so no Python clock is read (``RegexBudget``'s backstop). ``text``
        may be a :class:`JSText`, prepared once for many regexes.
        """
        compiled = self._ready()
        if not isinstance(text, JSText):
            text = JSText(text)
        re2 = self._plan.re2                            # type: ignore[union-attr]
        if re2 is not None:
            data = text.linear(self._unicode)
            if data is not None:
                return (re2.match(data) if self._sticky else re2.search(data)) is not None
        return self._backtrack(compiled, text, timeout, per_call)

    def _backtrack(self, compiled: _Compiled, text: JSText, timeout: float | None, per_call: bool = False) -> bool:
        """:meth:`search` on ``regex`` (the translation's own engine)."""
        lead = self._lead
        if lead is _UNSET:                              # computed once, like the translation
            lead = leading_literals(self.source, self.flags)
            object.__setattr__(self, "_lead", lead)
        pattern, canon_table, fast = compiled
        if fast is not None and not text.folds():
            pattern = fast
        seen = text.text
        if lead is not None and "i" in self.flags:
            seen = text.lower()
        prepared = text.points() if self._unicode else text.units()
        if canon_table is not None:
            # i + backreference: JS compares Canonicalize(ch) everywhere, so match the
            # canonicalised text (sets are case-closed, so they accept the canonical chars).
            prepared = prepared.translate(canon_table)
        try:
            if self._sticky:
                return pattern.match(prepared, timeout=timeout) is not None
            if lead is not None and len(seen) == len(prepared) == len(text.text):
                # Every match begins with a leading literal, and positions line up (no
                # character changed length in lowercasing or in the UTF-16/code-point form):
                # try the regex at those positions only.
                return _match_at_literals(pattern, prepared, seen, lead, timeout, per_call)  # type: ignore[arg-type]
            return pattern.search(prepared, timeout=timeout) is not None
        except TimeoutError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} exceeded {timeout}s") from exc
        except MemoryError as exc:
            # regex can loop without bound on an empty-matching quantified group whose captures
            # change every iteration (backreference bookkeeping): treat it as not completing.
            raise RegexTimeout(f"regex /{self.source}/{self.flags} ran out of memory") from exc


    def _compile(self) -> _Compiled:
        """Compile on the first search (idempotent, race-safe)."""
        translated = self._translated
        if translated is not None:                  # translated when the key was compiled
            compiled = _compile_texts(self.source, self.flags, translated)
        else:                                       # unpickled: translate again
            compiled = _compile_translated(self.source, self.flags, max(self.expansion, REGEX_MAX_EXPANSION))[0]
        object.__setattr__(self, "_plan", plan_of(self.source, self.flags))
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_translated", None)
        return compiled

    def find(self, text: str, *, timeout: float | None = 0.25) -> tuple[int, int] | None:
        """The span of the match ``RegExp.prototype.exec(text)`` finds for a fresh regex object
        (the leftmost one), as indexes into ``text`` (a Python str: code points), or None.

        For explanations: :meth:`search` answers whether; this says where, at a higher cost.
        A match that starts or ends inside a UTF-16 surrogate pair (a pattern without ``u``
        can match half of an astral character) is widened to the whole character. Raises
        RegexTimeout like :meth:`search`.
        """
        pattern, canon_table, fast = self._ready()
        jtext = JSText(text)
        if fast is not None and not jtext.folds():
            pattern = fast
        prepared = jtext.points() if self._unicode else jtext.units()
        if canon_table is not None:
            prepared = prepared.translate(canon_table)
        try:
            m = pattern.match(prepared, timeout=timeout) if self._sticky else pattern.search(prepared, timeout=timeout)
        except TimeoutError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} exceeded {timeout}s") from exc
        except MemoryError as exc:
            raise RegexTimeout(f"regex /{self.source}/{self.flags} ran out of memory") from exc
        if m is None:
            return None
        start, end = m.span()
        if len(prepared) == len(text):
            return start, end
        at = _prepared_offsets(text, self._unicode)
        last = bisect.bisect_left(at, end)
        while last < len(text) and at[last + 1] == at[last]:     # a low surrogate joined to the one before
            last += 1
        return bisect.bisect_right(at, start) - 1, last


def _prepared_offsets(text: str, unicode_mode: bool) -> list[int]:
    """Where each character of ``text`` (and its end) lands in the text a pattern matches:
    code units without ``u`` (an astral character takes two), code points with it (a
    surrogate pair written as two characters takes one)."""
    widths = [1] * len(text)
    if unicode_mode:
        for m in _SURROGATE_PAIR.finditer(text):
            widths[m.start() + 1] = 0
    else:
        for i, ch in enumerate(text):
            if ord(ch) > 0xFFFF:
                widths[i] = 2
    return [0, *itertools.accumulate(widths)]


class JSText:
    """One text prepared for many :meth:`JSRegex.search` calls: its UTF-16 and code-point
    forms and its case-folding check are computed once, on first use."""

    __slots__ = ("text", "_units", "_points", "_folds", "_lower", "_linear")

    def __init__(self, text: str) -> None:
        self.text = text
        self._units: str | None = None
        self._points: str | None = None
        self._folds: bool | None = None
        self._lower: str | None = None
        self._linear: dict[bool, bytes | None] | None = None

    def linear(self, unicode_mode: bool) -> bytes | None:
        """The bytes RE2 searches (see :func:`lorescan.js.regex.linear.linear_text`), or None."""
        if self._linear is None:
            self._linear = {}
        try:
            return self._linear[unicode_mode]
        except KeyError:
            data = linear_text(self.points() if unicode_mode else self.units(), unicode_mode)
            self._linear[unicode_mode] = data
            return data

    def units(self) -> str:
        if self._units is None:
            self._units = _split_astral(self.text)
        return self._units

    def points(self) -> str:
        if self._points is None:
            self._points = _join_surrogates(self.text)
        return self._points

    def folds(self) -> bool:
        if self._folds is None:
            self._folds = _FOLDS_TO_ASCII.search(self.text) is not None
        return self._folds

    def lower(self) -> str:
        """``str.lower`` of the text (JS toLowerCase), where case-insensitive literals are looked for."""
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower


def _match_at_literals(pattern: regex.Pattern, text: str, seen: str, lead: tuple[str, ...],
                       timeout: float | None, per_call: bool = False) -> bool:
    """Whether ``pattern`` matches ``text`` at a position where ``seen`` (the text as the
    literals are written: itself, or lowercased, of the same length) has a leading literal.
    ``timeout`` bounds the whole search, or each ``match`` call when ``per_call``."""
    starts: set[int] = set()
    for lit in lead:
        at = seen.find(lit)
        while at != -1:
            starts.add(at)
            at = seen.find(lit, at + 1)
    if not starts:
        return False
    deadline = None if timeout is None or per_call else time.monotonic() + timeout
    for at in sorted(starts):
        left = timeout if deadline is None else max(deadline - time.monotonic(), 1e-6)
        if pattern.match(text, at, timeout=left) is not None:
            return True
    return False


def regex_key(key: str, *, max_length: int | None = None, max_nesting: int | None = None,
              max_expansion: int | None = REGEX_MAX_EXPANSION, invalid: Literal["plain", "raise"] = "plain"
              ) -> JSRegex | None:
    """**The engines' way** to turn a key into a regex: the compiled :class:`JSRegex` of a
    SillyTavern ``/pattern/flags`` key, under the book's limits, uncached (a compiled book holds
    its own); None for a plain key (docs/sillytavern-mode.md#st-regex-keys).

    Args:
        key: the key as the entry holds it (already trimmed and macro-substituted).
        max_length: refuse a pattern longer than this many characters before parsing it.
        max_nesting: refuse a pattern with groups nested deeper, once parsed (the parser is not
            recursive) and before it is translated (translation is recursive in the nesting).
        max_expansion: refuse a pattern whose counted repeats multiply out to more terms than
            this, before translating it (None: no limit): ``regex`` builds one copy of an atom
            per repetition of its minimum count, so ``a{10000000}`` alone takes 4 s and 2.6 GB.
        invalid: what a key in ``/pattern/flags`` form whose pattern JS would refuse gives:
            ``"plain"`` None, as SillyTavern reads it (as text); ``"raise"`` JSRegexError with
            JS's reason (the lint reports it; slot mode tells it from a plain key).

    Raises:
        RegexTooComplex: past ``max_length``, ``max_nesting`` or ``max_expansion``; such a key is
            a regex to SillyTavern, so it is refused rather than read as text.
        JSRegexError: ``invalid="raise"`` and the pattern is not a valid JS regex (or has the
            ``v`` flag).

    The pattern is parsed, checked and translated now; ``regex`` compiles the translation on
    the first search, so a key that is never searched (its required literals never occur)
    never pays that (~0.5 ms a pattern, more than the translation). :func:`tool_regex` is the
    same for tools, memoised and without limits.
    """
    split = _split_regex_key(key)
    if split is None:
        return None
    try:
        return _compile_regex_key(split[0], split[1], max_length=max_length, max_nesting=max_nesting,
                                  max_expansion=max_expansion)
    except JSRegexError:
        if invalid == "raise":
            raise
        return None


def tool_regex(key: str) -> JSRegex | None:
    """**The tools' way** to turn a key into a regex: the :class:`JSRegex` of a ``/pattern/flags``
    key, memoised and without limits, or None for a plain key and for a key whose pattern JS
    would refuse (as SillyTavern reads both: as text). For explanations, near-miss reports,
    span locators, tests and benchmarks, on keys an engine has accepted; engines call
    :func:`regex_key`, which applies the book's limits and keeps no process-wide memo.
    """
    split = _split_regex_key(key)
    if split is None:
        return None
    try:
        return _compile_js_regex(*split)
    except (JSRegexError, RegexTooComplex):
        return None


@functools.lru_cache(maxsize=1024)
def _compile_js_regex(pattern: str, flags: str) -> JSRegex:
    """``new RegExp(pattern, flags)`` without limits, memoised (:func:`tool_regex`'s compile; the
    translator's tests call it on the V8 fixture's patterns)."""
    return _compile_regex_key(pattern, flags, max_expansion=None)


def _compile_regex_key(pattern: str, flags: str, *, max_length: int | None = None,
                       max_nesting: int | None = None, max_expansion: int | None = REGEX_MAX_EXPANSION) -> JSRegex:
    """``new RegExp(pattern, flags)`` for a key already split, uncached, under the limits of
    :func:`regex_key` (which calls it; ``match.regexscope.regex_hazard`` and the translator's
    tests hold split patterns). Raises JSRegexError wherever JS would throw a SyntaxError, and
    for the ``v`` flag; RegexTooComplex past a limit."""
    if max_length is not None and len(pattern) > max_length:
        raise RegexTooComplex(f"the pattern has {len(pattern):,} characters, more than the limit "
                              f"max_regex_length={max_length:,}")
    try:
        translated, line_local, hazard_, units = _translation(pattern, flags, max_expansion, max_nesting)
    except RecursionError:          # nesting allowed by raised limits but deeper than the stack
        raise RegexTooComplex(f"groups are nested {parse(pattern, flags).depth} deep, too deep to "
                              "translate here") from None
    return JSRegex(pattern, flags, None, line_local, hazard_, units, translated)


_KEY_SHAPE = re.compile(r"/([\s\S]+?)/([gimsuy]*)\Z")


def _split_regex_key(key: str) -> tuple[str, str] | None:
    """(pattern, flags) of a key shaped like a SillyTavern regex key, without compiling it (for a
    caller that needs only the shape: ``limits.check_entry_size`` must not compile a pattern past
    the limit; the lint's duplicate check skips regex keys).

    The body is the shortest non-empty ``P`` with ``key == '/' + P + '/' + F`` and ``F`` drawn
    from ``gimsuy``; ``P`` must have no ``/`` that is at its start or not preceded by ``\\``;
    the pattern returned is ``P`` with its first ``\\/`` replaced by ``/`` (ST quirk).
    """
    m = _KEY_SHAPE.match(key)
    if m is None:
        return None
    body, flags = m.group(1), m.group(2)
    for k, ch in enumerate(body):
        if ch == "/" and (k == 0 or body[k - 1] != "\\"):
            return None
    return body.replace("\\/", "/", 1), flags


# -- the earlier public spellings: thin aliases that warn (each use warns, as the moved top-level names do)

def _deprecated(old: str, new: str) -> None:
    import warnings
    warnings.warn(f"lorescan.js.regex.{old} is deprecated: {new}", DeprecationWarning, stacklevel=3)


def compile_js_regex(pattern: str, flags: str) -> JSRegex:
    """Deprecated: call :func:`tool_regex` with the key (memoised, no limits)."""
    _deprecated("compile_js_regex", "call tool_regex(key) with the key")
    return _compile_js_regex(pattern, flags)


def compile_regex_key(pattern: str, flags: str, *, max_length: int | None = None,
                      max_nesting: int | None = None, max_expansion: int | None = REGEX_MAX_EXPANSION) -> JSRegex:
    """Deprecated: call :func:`regex_key` with the key (the same limits; ``invalid="raise"``)."""
    _deprecated("compile_regex_key", "call regex_key(key, ..., invalid='raise') with the key")
    return _compile_regex_key(pattern, flags, max_length=max_length, max_nesting=max_nesting,
                              max_expansion=max_expansion)


def split_regex_key(key: str) -> tuple[str, str] | None:
    """Deprecated: :func:`regex_key` (or :func:`tool_regex`) gives the regex, whose ``source``
    and ``flags`` are the split."""
    _deprecated("split_regex_key", "regex_key(key) / tool_regex(key) give the regex (its .source and .flags)")
    return _split_regex_key(key)


def parse_regex_key(key: str) -> tuple[str, str] | None:
    """Deprecated: ``tool_regex(key)`` is the regex itself (None where this gave None)."""
    _deprecated("parse_regex_key", "tool_regex(key) is the regex (None for a plain or invalid key)")
    rx = tool_regex(key)
    return None if rx is None else (rx.source, rx.flags)
