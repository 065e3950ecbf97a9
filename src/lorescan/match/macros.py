"""Macro keys under a substitution hook: what each ``{{...}}`` key of a book became, and which
entries the expanded keys can wake.

A key containing ``{{`` is known only once a scan's ``substitute`` expands it
(docs/sillytavern-mode.md#st-plain-keys), so the compiled book cannot list its entry under an
automaton variant. :func:`resolve_macros` does that per expansion instead: the plain
expansions become variants of one small side matcher, and :class:`MacroState` maps the
variants (the book's own and the side matcher's) to the entries whose primary keys hold them.
A scan then walks such an entry only where one of its keys occurs, as it does an entry without
macros. The state is a pure function of the book and the expanded texts, so it is kept in the
caller's :class:`~lorescan.match.cache.ChatScan` and a chat pays for its macros once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence, TypeAlias, cast

from ..errors import LorebookError
from ..macros import expand_within
from .cache import ChatScan
from .compile import SKIP, VariantSpec, classify_key, side_matcher
from .keys import MacroKey, PlainKey, RegexKey
from ..js.regex import RegexTooComplex
from ..js.text import js_trim

if TYPE_CHECKING:
    from .compile import CompiledKeys, KeyMatcher

__all__ = ["MacroState", "MacroRef", "resolve_macros"]

MacroRef: TypeAlias = "int | RegexKey | PlainKey"
"""What a macro key became: a side variant id, ``SKIP``, or a special key."""


class MacroState:
    """The book's macro keys under one set of expansions (read-only once built).

    ``matcher``: the side matcher of the plain expansions; ``refs``: macro key -> a side
    variant id, ``SKIP`` (never matches) or a special key (regex, or a plain key the automaton
    cannot take); ``walked``: entries of ``always_sub`` walked whatever the hits (a primary key
    that is special after expansion); ``by_vid`` / ``by_side``: book / side variant id -> the
    other ``always_sub`` entries with a primary key of that variant.
    """

    __slots__ = ("matcher", "refs", "walked", "by_vid", "by_side", "_vids", "_sides", "_contents")

    def __init__(self, matcher: "KeyMatcher", refs: dict[MacroKey, MacroRef], walked: tuple[int, ...],
                 by_vid: dict[int, tuple[int, ...]], by_side: dict[int, tuple[int, ...]]) -> None:
        self.matcher, self.refs, self.walked, self.by_vid, self.by_side = matcher, refs, walked, by_vid, by_side
        self._vids, self._sides = frozenset(by_vid), frozenset(by_side)
        self._contents: dict[int, frozenset[int]] = {}

    def content_hits(self, index: int, content: str) -> frozenset[int]:
        """The side matcher's hits in entry ``index``'s own ``content`` (a recursion chunk's
        unchanged part), found once. A pure value written whole: threads may race on it."""
        found = self._contents.get(index)
        if found is None:
            found = self._contents[index] = self.matcher.scan(content)
        return found

    def woken(self, hits: frozenset[int], side_hits: frozenset[int]) -> set[int]:
        """The non-walked macro entries a key of which is among these book and side hits."""
        found: set[int] = set()
        for vid in self._vids.intersection(hits):
            found.update(self.by_vid[vid])
        for vid in self._sides.intersection(side_hits):
            found.update(self.by_side[vid])
        return found


TooLong: TypeAlias = "Callable[[str, str], LorebookError]"
"""(raw key, what is wrong) -> the error naming the entry that holds the key."""


def _resolve_ref(macro: MacroKey, expanded: str, compiled: "CompiledKeys", cache: ChatScan,
                 specs: dict[VariantSpec, int], max_key_length: int, too_long: TooLong) -> MacroRef:
    raw, cs, ww, options = macro.raw, macro.case_sensitive, macro.whole_words, compiled.options
    if not expanded:
        return SKIP
    key = js_trim(expanded)
    if key == "" and options.blank_keys == "ignore":
        return SKIP
    spec: VariantSpec | RegexKey | PlainKey
    try:
        if key.startswith("/") and not macro.literal:   # maybe a regex: translate once per ChatScan
            spec = cache.side_matcher(                  # type: ignore[assignment]
                ("classify", key, cs, ww, raw, options), lambda: classify_key(key, cs, ww, options, raw))
        else:
            spec = classify_key(key, cs, ww, options, raw, literal=macro.literal)
    except RegexTooComplex:
        return SKIP                      # a macro made a regex past the limits: never matches
    if type(spec) is not RegexKey and len(key) > max_key_length:
        raise too_long(raw, f"has {len(key):,} characters")
    if type(spec) is RegexKey or type(spec) is PlainKey:
        return spec                      # type: ignore[return-value]
    return specs.setdefault(spec, len(specs))          # type: ignore[arg-type]


def _build(compiled: "CompiledKeys", expanded: Sequence[str], cache: ChatScan, max_key_length: int,
           too_long: TooLong) -> MacroState:
    refs: dict[MacroKey, MacroRef] = {}
    specs: dict[VariantSpec, int] = {}
    for macro, text in zip(compiled.macro_keys, expanded):
        refs[macro] = _resolve_ref(macro, text, compiled, cache, specs, max_key_length, too_long)
    spec_list = tuple(specs)
    model = compiled.matcher.model
    matcher = cast("KeyMatcher", cache.side_matcher((compiled.matcher.token, spec_list),
                                                    lambda: side_matcher(spec_list, model)))
    walked: list[int] = []
    by_vid: dict[int, list[int]] = {}
    by_side: dict[int, list[int]] = {}
    plans = compiled.plans_sub
    for i in compiled.always_sub:
        vids: list[int] = []
        sides: list[int] = []
        special = False
        for _, ref in plans[i].primary:
            if type(ref) is MacroKey:
                ref = refs[ref]
                if type(ref) is int:
                    if ref >= 0:
                        sides.append(ref)
                    continue
            if type(ref) is int:
                vids.append(ref)
            elif type(ref) is RegexKey and ref.lit != SKIP:     # it can only match where a literal occurs
                lit = ref.lit
                vids.extend((lit,) if isinstance(lit, int) else lit)
            else:
                special = True
                break
        if special:
            walked.append(i)
            continue
        for vid in vids:
            if vid >= 0:                  # SKIP: a literal that never matches here
                by_vid.setdefault(vid, []).append(i)
        for vid in sides:
            by_side.setdefault(vid, []).append(i)
    return MacroState(matcher, refs, tuple(walked), {v: tuple(es) for v, es in by_vid.items()},
                      {v: tuple(es) for v, es in by_side.items()})


def resolve_macros(compiled: "CompiledKeys", substitute: Callable[[str], str], cache: ChatScan, *, room: int,
                   max_key_length: int, too_long: TooLong) -> MacroState:
    """The book's macro keys expanded by ``substitute`` (called on each, every scan: a hook may
    expand differently from turn to turn), resolved once per chat cache and expansion.

    Sizes are checked after substitution, before anything reaches an automaton: an expansion
    longer than ``room`` is never built (:func:`lorescan.macros.expand_within`), and a plain key
    longer than ``max_key_length`` after trimming is refused; both raise ``too_long(raw, what)``
    (a 600,000-character ``{{char}}`` crashed the automaton's free)."""
    expanded = []
    for m in compiled.macro_keys:
        text = expand_within(substitute, m.raw, room)
        if text is None:
            raise too_long(m.raw, "is too long")
        expanded.append(text)
    key = tuple(expanded)
    return cache.side_matcher(("macros", compiled.matcher.token, key),      # type: ignore[return-value]
                              lambda: _build(compiled, key, cache, max_key_length, too_long))
