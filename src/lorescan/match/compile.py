"""Key specs -> CompiledKeys: everything a scan needs, built once and never changed.

The input is engine-neutral: one :class:`~lorescan.match.keys.KeySpec` per entry (primary and
secondary keys, case and whole-word options, content, fuzzy threshold). :func:`compile_keys`
compiles specs; lorebook-slot mode builds them from its pool, and SillyTavern mode's
``lorescan.st.compiled.compile_book`` from a book's entries (its ``CompiledBook`` *has* a
``CompiledKeys``, beside the per-entry columns its engine precomputes).
Every plain key of every entry becomes a *key variant*: (matched text, case-sensitive?,
needs word boundaries?), with the entry's overrides resolved against the MatchOptions. All
variants of a book live in ONE pyahocorasick automaton whose words are the distinct matched
texts (pattern ids); per pattern id, four tables give the variant id (vid) for each pass and
class: case-sensitive variants are matched on the raw text, case-insensitive ones on its
JS lowercase (docs/sillytavern-mode.md#st-plain-keys, 13.2); whole-word variants are filtered by the word kernel.

Keys that cannot be decided per text are *special* and are evaluated on the
assembled haystack by ScanView: regex keys, keys holding U+0001, empty keys (a
whitespace-only key after trimming), raw keys ending in "\\n" (score path only: they can
span the "\\n" of the joiner), and macro keys (``{{``) when a substitution hook is given.

Entry contents are static: their hit sets are computed here, so a recursion chunk built
from contents costs a union, not a rescan (see ``CompiledKeys.chunk_union_exact``).
"""
from __future__ import annotations

import functools
import gc
import hashlib
import itertools
import os
import uuid
import weakref
from array import array
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import ahocorasick
import numpy as np

from . import _kernels
from ._wordchars import MODEL_ASCII, MODEL_NOSPACE, MODEL_UNICODE
from ..errors import LorebookError, RegexKeyError
from ..js.regex import JSRegex, RegexTooComplex, regex_key, required_literals
from ..limits import DEFAULT_LIMITS, Limits, check_entry, check_total_key_length
from .columns import TableBuilder, lazy_tables
from .lsc import CompiledTypes, decode_keys, encode_keys, read_compiled_file
from .keys import KeyRef, KeySpec, MacroKey, PlainKey, RegexKey
from .expr import expand_spec
from .options import MatchOptions
from .fuzzy import FuzzyIndex, FuzzyTooCostly, FuzzyWork, key_words
from .scanwork import ScanWork
from ..js.text import has_js_whitespace, js_lower, js_trim

__all__ = ["CompiledKeys", "KeyMatcher", "EntryPlan", "compile_keys", "build_keys", "word_model",
           "classify_key", "build_matcher", "load_keys", "restore_keys"]

EMPTY: frozenset[int] = frozenset()
SKIP = -1          # a key that never matches in this path (empty before trimming, ignored blank)

# A key that cannot be decided per text is a special key (match/keys.py: RegexKey, PlainKey,
# MacroKey), evaluated on the haystack/texts by ScanView; a plan refers to any key by a KeyRef.
VariantSpec = tuple[str, bool, bool]     # (matched text, case-sensitive, bounded)


def word_model(options: MatchOptions) -> int:
    """The word-model code of the kernels for these options (docs/sillytavern-mode.md#st-plain-keys, 16.1, 16.2)."""
    if options.word_chars == "ascii":
        return MODEL_ASCII
    return MODEL_NOSPACE if options.nospace_scripts else MODEL_UNICODE


def required_literal_vids(rx: JSRegex, vid: Callable[[VariantSpec], int]) -> int | tuple[int, ...]:
    """The prefilter of a regex key as variant ids: SKIP (none), one vid, or a tuple of vids
    (every match contains at least one of their literals; see ``js.regex.required_literals``).
    ``vid(spec)`` gives (adding if new) the vid of an unbounded variant."""
    lits = required_literals(rx.source, rx.flags)
    if lits is None:
        return SKIP
    cs = "i" not in rx.flags              # under i the literals are lowercase: the lowercase pass
    vids = tuple(vid((lit, cs, False)) for lit in lits)
    return vids[0] if len(vids) == 1 else vids


def literal_absent(lit: int | tuple[int, ...], hits: frozenset[int]) -> bool:
    """True when a regex key's prefilter (``regex_lits[rid]``) rules out a text or window
    with these hits: the regex cannot match there."""
    if type(lit) is int:
        return lit >= 0 and lit not in hits
    return hits.isdisjoint(lit)        # type: ignore[arg-type]


def classify_key(text: str, cs: bool, ww: bool, options: MatchOptions, raw: str,
                 limits: Limits = DEFAULT_LIMITS, *, literal: bool = False,
                 max_expansion: int | None = None) -> VariantSpec | RegexKey | PlainKey:
    """A prepared key: its variant spec (a plain tuple) if it can be matched per text, else its
    special key (``RegexKey(rx, -1, SKIP, raw)`` for a regex key, else a ``PlainKey``).
    ``literal``: plain text even in ``/pattern/flags`` form. Raises RegexTooComplex for a regex
    key past ``limits.max_regex_length`` / ``limits.max_regex_nesting``, or expanding to more
    terms than ``max_expansion`` (default ``limits.max_regex_expansion``)."""
    rx = (regex_key(text, max_length=limits.max_regex_length, max_nesting=limits.max_regex_nesting,
                    max_expansion=limits.max_regex_expansion if max_expansion is None else max_expansion)
          if text.startswith("/") and not literal else None)     # a regex key has the shape /pattern/flags
    if rx is not None:
        return RegexKey(rx, -1, SKIP, raw)
    if text == "" or "\x01" in text or text.endswith("\n"):
        return PlainKey(text, cs, ww, raw)
    mt = text if cs else js_lower(text)
    bounded = ww and not (options.multiword == "substring" and has_js_whitespace(mt))
    return (mt, cs, bounded)



class KeyMatcher:
    """One automaton over a set of key variants; ``scan(text)`` gives the vids in ``text``.

    Immutable after construction and safe to share between threads (the automaton is only
    iterated). ``token`` identifies it in caller-owned hit caches.
    """

    __slots__ = ("token", "automaton", "tables", "model", "scan_raw", "scan_lower", "n_variants",
                 "has_newline", "_table_bytes", "_hits", "_shared", "fuzzy")

    def __init__(self, token: str, automaton: Any, table_bytes: tuple[bytes, ...], model: int,
                 n_variants: int, has_newline: bool) -> None:
        self.token = token
        self.automaton = automaton
        self._table_bytes = table_bytes
        self.tables = tuple(memoryview(b).cast("i") for b in table_bytes[:5])
        self.model = model
        self.n_variants = n_variants
        self.has_newline = has_newline
        # a vid column finds something when any of its values is not SKIP (-1: all four bytes 0xFF)
        has = [bool(b.strip(b"\xff")) if type(b) is bytes
               else bool(len(b)) and int(np.frombuffer(b, dtype=np.intc).max()) >= 0 for b in table_bytes[:5]]
        # A sixth table, when present, is the FuzzyIndex of the book's fuzzy keys (match/fuzzy.py).
        self.fuzzy: Any = None
        if len(table_bytes) > 5:
            self.fuzzy = FuzzyIndex.from_bytes(table_bytes[5])
        self.scan_raw = has[1] or has[2]
        self.scan_lower = has[3] or has[4]
        self._hits = _kernels.hits
        self._shared: _SharedAutomaton | None = None

    def __reduce__(self):
        return (KeyMatcher, (self.token, self.automaton, self._table_bytes, self.model, self.n_variants,
                             self.has_newline))

    def scan(self, text: str, work: FuzzyWork | None = None) -> frozenset[int]:
        """The set of vids occurring in ``text``. ``work``: the scan's fuzzy comparisons
        (past its limit the fuzzy keys match exactly only and ``work.cut`` counts the text);
        a :class:`~lorescan.match.scanwork.ScanWork` also bounds the key hits of the text
        (past its budget ``work.key_cut`` counts it) and carries the scan's deadline."""
        if self.automaton is None or not text:
            return EMPTY
        hits = self._exact(text, work)
        if self.fuzzy is not None:
            found = self.fuzzy.hits(text, hits, work)
            if found:
                return hits.union(found)
        return hits

    def _exact(self, text: str, work: FuzzyWork | None) -> frozenset[int]:
        # The automaton's vids; a scan's ScanWork bounds the hits per text (counted in work.key_cut).
        if not isinstance(work, ScanWork):
            return self._hits.text_hits(text, self.automaton, self.tables, self.model, self.scan_raw, self.scan_lower)
        hits, cut = self._hits.bounded_text_hits(text, self.automaton, self.tables, self.model, self.scan_raw,
                                                 self.scan_lower, work.hit_budget(text), work.deadline)
        if cut:
            work.key_cut += 1
            if work.first_cut is None:
                work.first_cut = text
        return hits

    def scan_many(self, texts: Iterable[str], work: FuzzyWork | None = None) -> Iterator[frozenset[int]]:
        """``scan(t)`` for each of ``texts``, in order, with the fuzzy keys' comparisons shared:
        each distinct word of all the texts is compared with the fuzzy keys once (match/fuzzy.py).
        ``work`` bounds those comparisons (:class:`~lorescan.match.fuzzy.FuzzyTooCostly` past it)."""
        if self.fuzzy is None or self.automaton is None:
            yield from (self.scan(t, work) for t in texts)
            return
        memo: dict[tuple[int, str], tuple[int, ...]] = {}
        it = iter(texts)
        while batch := [t or "" for t in itertools.islice(it, _SCAN_BATCH)]:
            exact = [self._exact(t, work) if t else EMPTY for t in batch]
            found = self.fuzzy.hits_many(batch, exact, memo, work)
            yield from (h.union(f) if f else h for h, f in zip(exact, found))


_SCAN_BATCH = 2_000      # texts per fuzzy batch in scan_many (bounds the per-text word sets held at once)


# Side matchers (a book's macro keys as one substitution expanded them) by (specs, model): a
# card's {{char}} keys expand to the same names in every chat of the card, and a cold engine
# over it would build the same small automaton again for each. A KeyMatcher is immutable and
# its hits a pure function of it and the text, so one is shared by every chat cache and thread.
@functools.lru_cache(maxsize=256)
def side_matcher(specs: tuple[VariantSpec, ...], model: int) -> KeyMatcher:
    """``build_matcher(specs, model)``, kept process-wide for the last 256 spec lists."""
    return build_matcher(specs, model)


def build_matcher(specs: Sequence[VariantSpec], model: int, token: str | None = None) -> KeyMatcher:
    """A KeyMatcher whose vid i is ``specs[i]`` (specs must be distinct)."""
    first_vids, table_bytes, has_newline = _matcher_tables(specs)
    words = [specs[v][0] for v in first_vids]
    return _matcher(lambda: iter(words), len(words), table_bytes, model, len(specs), has_newline, token)


def _matcher_tables(specs: Sequence[VariantSpec], skip: frozenset[int] = EMPTY
                    ) -> tuple[list[int], tuple[bytes, ...], bool]:
    # Pattern ids number the distinct matched texts in first-seen order; per pattern id, the
    # first vid with that text (to get the word back), its length and four vid columns.
    # ``skip``: vids the automaton does not find (fuzzy keys, see match/fuzzy.py).
    pids: dict[str, int] = {}
    first_vids: list[int] = []
    for vid, (mt, _cs, _b) in enumerate(specs):
        if vid in skip:
            continue
        if mt not in pids:
            pids[mt] = len(pids)
            first_vids.append(vid)
    n = len(pids)
    lengths = [0] * n
    cols = [[SKIP] * n for _ in range(4)]      # raw_free, raw_bound, low_free, low_bound
    for vid, (mt, cs, bounded) in enumerate(specs):
        if vid in skip:
            continue
        pid = pids[mt]
        lengths[pid] = len(mt)
        cols[(0 if cs else 2) + (1 if bounded else 0)][pid] = vid
    table_bytes = tuple(array("i", c).tobytes() for c in [lengths] + cols)
    return first_vids, table_bytes, any("\n" in mt for mt in pids)


def _matcher(words: Any, n_words: int, table_bytes: tuple[bytes, ...], model: int, n_variants: int,
             has_newline: bool, token: str | None) -> KeyMatcher:
    shared = _shared_automaton(words) if n_words else None
    matcher = KeyMatcher(token or uuid.uuid4().hex, shared.automaton if shared else None, table_bytes, model,
                         n_variants, has_newline)
    matcher._shared = shared
    return matcher


class _SharedAutomaton:
    # Keeps an automaton in _AUTOMATA while a matcher uses it (automata take no weak references).
    __slots__ = ("automaton", "__weakref__")

    def __init__(self, automaton: Any) -> None:
        self.automaton = automaton


_AUTOMATA: "weakref.WeakValueDictionary[bytes, _SharedAutomaton]" = weakref.WeakValueDictionary()


def _shared_automaton(words: Any) -> _SharedAutomaton:
    """The automaton mapping the i-th word of ``words()`` to ``i``, shared by every live
    matcher over the same word list (an STEngine's and a SlotEngine's book usually have the
    same key texts, and the automaton is most of a compiled book's memory). It is never
    changed after ``make_automaton``, so sharing it across threads is safe."""
    digest = hashlib.blake2b(digest_size=20)
    count = 0
    for word in words():
        digest.update(word.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
        count += 1
    digest.update(count.to_bytes(8, "little"))
    key = digest.digest()
    found = _AUTOMATA.get(key)
    if found is not None:
        return found
    automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
    for pid, word in enumerate(words()):
        automaton.add_word(word, pid)
    automaton.make_automaton()
    shared = _AUTOMATA[key] = _SharedAutomaton(automaton)
    return shared


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """How to decide one entry's keys: per key an int (vid, or SKIP) or a special key (match/keys.py).

    ``primary``: (key index, ref) for the activation path (substituted, trimmed keys);
    ``secondary``: one ref per secondary key; ``score_*``: raw keys (docs/sillytavern-mode.md#st-groups). ``simple`` /
    ``score_simple``: every ref is an int, so the window's hit set alone decides.
    """

    primary: tuple[tuple[int, KeyRef], ...]
    secondary: tuple[KeyRef, ...]
    simple: bool
    score_primary: tuple[KeyRef, ...]
    score_secondary: tuple[KeyRef, ...]
    score_simple: bool


class CompiledKeys:
    """All a scan needs to match one set of key specs. Immutable: share it across threads and processes.

    Entry ``i`` of every table is ``specs[i]`` of :func:`compile_keys` (for a SillyTavern book,
    its entry ``i``). ``matcher``: the automaton and vid tables; ``plans`` / ``plans_sub``: per
    entry, without and with a substitution hook; ``vid_entries[v]``: entries with primary
    variant ``v``; ``always`` / ``always_sub``: entries whose primary keys need evaluation
    whatever the hits (special keys); ``content_hits[i]``: vids in entry ``i``'s content;
    ``chunk_union_exact``: no variant contains "\\n", so a "\\n"-join of contents hits exactly
    the union of their hits; ``macro_keys``: the distinct :class:`MacroKey` values of the plans.
    ``regexes[rid]``: the compiled regex keys (distinct); ``regex_lits[rid]``: the vid of a
    literal every match contains, a tuple of vids of literals one of which every match
    contains, or SKIP (see :func:`literal_absent`); ``regex_line_local``: the rids of the line-local
    regexes (tested text by text on a joined haystack, see regexscope); ``regex_hazards``: (entry index, key, shape) for
    regex keys with a catastrophic-backtracking shape (advisory: they still run, under the
    scan's regex time budget). ``name`` names the keys (a book's name).

    Compiled keys hold tuples; keys loaded from the compact form (pickle, the keys section of
    an ``.lsc`` file) hold lazy sequences over numpy columns that build a plan or hit set the
    first time it is asked for (``lorescan.match.lsc``).
    """

    __slots__ = ("name", "options", "matcher", "specs", "plans", "plans_sub", "vid_entries", "always",
                 "always_sub", "content_hits", "chunk_union_exact", "macro_keys", "regexes", "regex_lits",
                 "regex_hazards", "regex_line_local", "_columns")
    # attribute types (each set once, in __init__, through object.__setattr__)
    name: str
    options: MatchOptions
    matcher: KeyMatcher
    specs: Sequence[VariantSpec]
    plans: Sequence[EntryPlan]
    plans_sub: Sequence[EntryPlan]
    vid_entries: Sequence[tuple[int, ...]]
    always: tuple[int, ...]
    always_sub: tuple[int, ...]
    content_hits: Sequence[frozenset[int]]
    chunk_union_exact: bool
    macro_keys: tuple[MacroKey, ...]
    regexes: tuple[JSRegex, ...]
    regex_lits: tuple[int | tuple[int, ...], ...]
    regex_hazards: tuple[tuple[int, str, str], ...]
    regex_line_local: tuple[int, ...]
    _columns: Any

    def __init__(self, *, name: str, options: MatchOptions, matcher: KeyMatcher, specs: Sequence[VariantSpec],
                 plans: Sequence[EntryPlan], plans_sub: Sequence[EntryPlan],
                 vid_entries: Sequence[tuple[int, ...]], always: tuple[int, ...], always_sub: tuple[int, ...],
                 content_hits: Sequence[frozenset[int]], chunk_union_exact: bool,
                 macro_keys: tuple[MacroKey, ...], regexes: tuple[JSRegex, ...] = (),
                 regex_lits: tuple[int | tuple[int, ...], ...] = (),
                 regex_hazards: tuple[tuple[int, str, str], ...] = (), regex_line_local: tuple[int, ...] = (),
                 columns: Any = None) -> None:
        values = dict(name=name, options=options, matcher=matcher, specs=specs, plans=plans,
                      plans_sub=plans_sub, vid_entries=vid_entries, always=always, always_sub=always_sub,
                      content_hits=content_hits, chunk_union_exact=chunk_union_exact, macro_keys=macro_keys,
                      regexes=regexes, regex_lits=regex_lits, regex_hazards=regex_hazards,
                      regex_line_local=regex_line_local, _columns=columns)
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def __len__(self) -> int:
        """The number of entries (key specs) compiled."""
        return len(self.plans)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def to_lsc(self) -> bytes:
        """The compact form (what pickling and a keys-only ``.lsc`` file hold)."""
        return encode_keys(self)

    def __reduce__(self):
        return (restore_keys, (encode_keys(self),))


TYPES = CompiledTypes(CompiledKeys, KeyMatcher, EntryPlan)


def restore_keys(data: Any, source: str = "<pickled compiled keys>") -> CompiledKeys:
    """CompiledKeys from compact-form bytes: a keys-only form, or the keys section of a
    compiled book (what unpickling calls).

    Raises:
        CompiledFormError: the data is truncated, not a compiled form, from another format
            version, or corrupted.
    """
    return decode_keys(data, TYPES, source)


def load_keys(path: str | os.PathLike[str], *, limits: Limits = DEFAULT_LIMITS) -> CompiledKeys:
    """The CompiledKeys in an ``.lsc`` file: a keys-only file, or the keys section of a
    compiled book's file (read into private memory, see ``lsc.read_compiled_file``); ``limits``:
    what the file's statements about its regexes are held to.

    Raises:
        CompiledFormError: naming the file, for a file that is truncated, not a compiled
            form, from another format or lorescan version, or corrupted.
        OSError: the file cannot be opened.
    """
    data, source = read_compiled_file(path)
    return decode_keys(data, TYPES, source, limits)


class _Builder:
    def __init__(self, options: MatchOptions, limits: Limits) -> None:
        self.options = options
        self.limits = limits
        self.vids: dict[VariantSpec, int] = {}
        self.rids: dict[JSRegex, int] = {}
        self.regex_lits: list[int | tuple[int, ...]] = []
        self.parsed: dict[str, JSRegex] = {}      # regex key text -> regex (books repeat them)
        self.plain: dict[tuple[str, bool, bool], int] = {}   # (key text, cs, ww) -> vid of a plain key
        self.literal_plain: dict[tuple[str, bool, bool], int] = {}   # the same for literal keys (KeySpec.literal)
        self.fuzzy: list[tuple[int, int, str, bool, float]] = []   # FuzzyKey rows (match/fuzzy.py)
        self.spec_of: list[Any] = []             # vid -> its spec (fuzzy vids: a 5-tuple)
        self.expansion = 0                       # terms of the book's distinct regexes (Limits.max_regex_expansion)

    def vid(self, spec: VariantSpec) -> int:
        vid = self.vids.get(spec)
        if vid is None:
            vid = self.vids[spec] = len(self.vids)
            self.spec_of.append(spec)
        return vid

    def fuzzy_ref(self, ref: KeyRef, threshold: float) -> KeyRef:
        # A plain key of a fuzzy entry gets a vid of its own, keyed apart from every
        # VariantSpec (a 5-tuple), hit when its exact vid is or a word is similar enough.
        if type(ref) is not int or ref == SKIP:
            return ref                            # regex, macro and other special keys stay exact
        mt, cs, bounded = self.spec_of[ref]
        spec = ("~fuzzy", ref, threshold, cs, bounded)
        known = self.vids.get(spec)               # type: ignore[arg-type]
        if known is not None:
            return known
        if not key_words(mt):
            return ref                            # no word to compare
        fvid = self.vid(spec)                     # type: ignore[arg-type]
        self.fuzzy.append((fvid, ref, mt, cs, threshold))
        return fvid

    def ref(self, text: str, cs: bool, ww: bool, raw: str, literal: bool = False) -> KeyRef:
        plain = self.literal_plain if literal else self.plain
        known = plain.get((text, cs, ww))
        if known is not None:                    # a plain key seen before (each key is planned twice)
            return known
        rx = self.parsed.get(text) if text.startswith("/") and not literal else None
        if rx is None:
            left = self.limits.max_regex_expansion - self.expansion   # the book's regexes share one allowance
            try:
                spec = classify_key(text, cs, ww, self.options, raw, self.limits, literal=literal,
                                    max_expansion=left)
            except RegexTooComplex as exc:
                if exc.expansion is not None and self.expansion:
                    raise RegexTooComplex(
                        f"counted repeats expand the pattern to {exc.expansion:,} terms; with the "
                        f"{self.expansion:,} of the book's other regex keys that is more than the limit "
                        f"max_regex_expansion={self.limits.max_regex_expansion:,}") from None
                raise
            if type(spec) is PlainKey:
                return spec
            if type(spec) is not RegexKey:
                vid = plain[(text, cs, ww)] = self.vid(spec)     # type: ignore[arg-type]
                return vid
            rx = self.parsed[text] = spec.rx
            self.expansion += rx.expansion
        rid = self.rids.get(rx)
        if rid is None:
            rid = self.rids[rx] = len(self.rids)
            self.regex_lits.append(required_literal_vids(rx, self.vid))
        return RegexKey(rx, rid, self.regex_lits[rid], raw)

    def activation_ref(self, raw: str, cs: bool, ww: bool, substitute: bool, literal: bool = False) -> KeyRef:
        # docs/sillytavern-mode.md#st-plain-keys: substitute (if {{), skip if empty, trim; blank -> "" (match_all) or skipped.
        if substitute and "{{" in raw:
            return MacroKey(raw, cs, ww, literal)
        if not raw:
            return SKIP
        key = js_trim(raw)
        if key == "" and self.options.blank_keys == "ignore":
            return SKIP
        return self.ref(key, cs, ww, raw, literal)


def _plan(builder: _Builder, spec: KeySpec, substitute: bool, source: str, fuzzy: float | None = None
          ) -> EntryPlan:
    o = builder.options
    cs = spec.case_sensitive if spec.case_sensitive is not None else o.case_sensitive
    ww = spec.whole_words if spec.whole_words is not None else o.match_whole_words

    literal = spec.literal

    def refs(field: str, keys: Sequence[str], activation: bool) -> list[KeyRef]:
        out: list[KeyRef] = []
        i = 0
        try:
            if not literal:
                for i, k in enumerate(keys):
                    out.append(builder.activation_ref(k, cs, ww, substitute) if activation
                               else builder.ref(k, cs, ww, k))
            else:
                for i, k in enumerate(keys):
                    lit = k in literal
                    out.append(builder.activation_ref(k, cs, ww, substitute, lit) if activation
                               else builder.ref(k, cs, ww, k, lit))
        except RegexTooComplex as exc:
            raise RegexKeyError(f"regex key refused: {exc}", source=source, entry=spec.uid,
                                field=f"{field}[{i}]") from None
        if fuzzy:                                # literal keys stay exact
            out = [r if literal and k in literal else builder.fuzzy_ref(r, fuzzy) for k, r in zip(keys, out)]
        return out
    primary = tuple((i, r) for i, r in enumerate(refs("key", spec.primary, True)) if r != SKIP)
    secondary = tuple(refs("keysecondary", spec.secondary, True))
    score_p = tuple(refs("key", spec.primary, False))
    score_s = tuple(refs("keysecondary", spec.secondary, False))
    simple = all(type(r) is int for _, r in primary) and all(type(r) is int for r in secondary)
    score_simple = all(type(r) is int for r in score_p + score_s)
    return EntryPlan(primary, secondary, simple, score_p, score_s, score_simple)


def compile_keys(specs: Sequence[KeySpec], options: MatchOptions = MatchOptions(), *,
                 limits: Limits = DEFAULT_LIMITS, name: str = "keys", source: str = "<memory>") -> CompiledKeys:
    """Compile engine-neutral key specs: one automaton, plans, content hits, compiled regex keys.

    Args:
        specs: one :class:`~lorescan.match.keys.KeySpec` per entry; entry ``i`` of every
            table (plans, content hits, ``ScanView.match_entry(i, ...)``) is ``specs[i]``.
        options: the matching rules.
        limits: ``max_entries``, ``max_content_length``, ``max_key_length``,
            ``max_regex_length`` and ``max_regex_nesting`` apply, as for a book.
        name: the compiled keys' name.
        source: names the specs in errors.

    Returns:
        The immutable :class:`CompiledKeys`, to share between engines and threads.

    Raises:
        RegexKeyError: a regex key past the regex limits (naming ``KeySpec.uid`` and the field).
        LorebookError: specs over another of ``limits``.
    """
    specs = tuple(specs)
    _check_specs(specs, limits, source)
    return build_keys(specs, lambda: (sp.content for sp in specs), options, limits, name=name, source=source)


def build_keys(key_specs: Iterable[KeySpec], contents: Callable[[], Iterable[str]], options: MatchOptions,
               limits: Limits, *, name: str, source: str) -> CompiledKeys:
    """:func:`compile_keys` for specs checked against ``limits`` already (``lorescan.st.compiled``
    checks a whole book): ``key_specs`` in entry order, walked once; ``contents()``: their
    contents in the same order, walked once the matcher is built (so a caller need not hold
    every spec at once)."""
    # Compiling allocates ~10 small objects per key and none of them form cycles; the cyclic
    # collector would re-walk the growing heap many times (a third of the time at 100k entries).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return CompiledKeys(name=name, options=options, **_compile_tables(key_specs, contents, options, limits, source))
    finally:
        if was_enabled:
            gc.enable()


def _check_specs(specs: Sequence[KeySpec], limits: Limits, source: str) -> None:
    # limits.check_book's rules over key specs (a pool of several books is checked as one).
    if len(specs) > limits.max_entries:
        raise LorebookError(f"the book has {len(specs)} entries, above the limit max_entries={limits.max_entries}",
                            source=source, field="entries")
    total = 0
    for sp in specs:
        total += check_entry(limits, source, sp.uid, sp.content, (("key", sp.primary), ("keysecondary", sp.secondary)),
                             sp.literal)
        check_total_key_length(limits, total, source, sp.uid)


def _compile_tables(key_specs: Iterable[KeySpec], contents: Callable[[], Iterable[str]], options: MatchOptions,
                    limits: Limits, source: str) -> dict[str, Any]:
    """The match core: matcher, plans, content hits, regexes (CompiledKeys keywords). ``key_specs``: in entry order; ``contents()``: their contents, in the same
    order (walked once the matcher is built)."""
    builder = _Builder(options, limits)
    # The tables go straight into numpy columns (lorescan.match.lsc) as each entry is planned: a
    # plan or hit set is built again when a scan first asks for it, and pickling writes the
    # columns as they are.
    tables = TableBuilder()
    macro: dict[MacroKey, None] = {}
    vid_rows, vid_cols = array("i"), array("i")      # (vid, entry) per primary key, in entry order
    always: list[int] = []
    always_sub: list[int] = []
    hazards: list[tuple[int, str, str]] = []
    unicode = options.word_chars == "unicode"     # fuzzy keys need the Unicode word rule (match/fuzzy.py)
    if options.expressions:                       # an expression key's atoms join the entry's keys (match/expr.py)
        key_specs = (expand_spec(sp, source) for sp in key_specs)
    uids: list[Any] = []                          # to name an entry whose content is refused below
    for i, spec in enumerate(key_specs):
        uids.append(spec.uid)
        fuzzy = spec.fuzzy if unicode else None
        plan = _plan(builder, spec, False, source, fuzzy)
        sub = plan
        for ref in [r for _, r in plan.primary] + list(plan.secondary):
            if type(ref) is RegexKey and ref.rx.hazard is not None:
                hazards.append((i, ref.raw, ref.rx.hazard))
        if any("{{" in k for k in spec.primary + spec.secondary):
            sub = _plan(builder, spec, True, source, fuzzy)
            for ref in [r for _, r in sub.primary] + list(sub.secondary):
                if type(ref) is MacroKey:
                    macro[ref] = None
        tables.add_plans(plan, sub)
        special = False
        for _, ref in plan.primary:
            vids: int | tuple[int, ...]
            if type(ref) is int:
                vids = ref
            elif type(ref) is RegexKey and ref.lit != SKIP:
                vids = ref.lit            # the regex can only match where one of its literals occurs
            else:
                special = True
                continue
            for vid in ((vids,) if type(vids) is int else vids):     # type: ignore[union-attr]
                if vid >= 0:                  # SKIP: a key that never matches here
                    vid_rows.append(vid)
                    vid_cols.append(i)
        if special:
            always.append(i)
        if special or any(type(ref) is not int and not (type(ref) is RegexKey and ref.lit != SKIP)
                          for _, ref in sub.primary):
            always_sub.append(i)
    fuzzy_keys = builder.fuzzy
    # a fuzzy vid's spec, for the tables only: "~85:hermione" (the automaton skips it)
    specs = tuple(s if len(s) == 3 else (f"~{s[2]:g}:{builder.spec_of[s[1]][0]}", s[3], s[4])
                  for s in builder.vids)
    regexes = tuple(builder.rids)
    regex_lits = tuple(builder.regex_lits)
    del builder
    n_specs = len(specs)
    first_vids, table_bytes, has_newline = _matcher_tables(specs, frozenset(k[0] for k in fuzzy_keys))
    if fuzzy_keys:
        table_bytes += (FuzzyIndex(fuzzy_keys).to_bytes(),)
    spec_text, spec_offsets = tables.add_specs(specs)
    # The planning left many small objects behind; free them before the automaton allocates
    # its nodes, so the nodes fill their place instead of new memory.
    del specs

    def words() -> Any:
        for v in first_vids:
            yield spec_text[spec_offsets[v]:spec_offsets[v + 1]].tobytes().decode("utf-8", "surrogatepass")
    matcher = _matcher(words, len(first_vids), table_bytes, word_model(options), n_specs, has_newline, None)
    # Contents are held to a scanned text's key-hit budget: recursion needs their whole hit sets,
    # so a content past it (suffix keys over "aaaa...", a minute of CPU per 2 MB) is refused.
    work = ScanWork(limits, fuzzy_limit=limits.max_fuzzy_comparisons)
    try:
        for i, (text, hits) in enumerate(zip(contents(), matcher.scan_many(contents(), work))):
            if work.key_cut and text is work.first_cut:
                raise LorebookError(f"the content gives more key occurrences than a scanned text may "
                                    f"({work.describe_budget()}): the keys overlap each other too much",
                                    source=source, entry=uids[i] if i < len(uids) else None, field="content")
            tables.add_hits(hits)
    except FuzzyTooCostly as exc:
        raise LorebookError(
            f"matching the contents against the book's {len(fuzzy_keys):,} fuzzy keys needs over {exc.needed:,} "
            f"word-to-key comparisons (limits.max_fuzzy_comparisons is {exc.limit:,}): turn fuzzy matching off "
            f"for most entries, or raise the limit", source=source, field="extensions.lorescan_fuzzy") from None
    cols, specials = tables.finish(None, vid_pairs=(vid_rows, vid_cols))
    del vid_rows, vid_cols
    lazy_specs, lazy_plans, lazy_sub, lazy_vids, lazy_hits = lazy_tables(cols, specials, EntryPlan)
    return dict(
        matcher=matcher, specs=lazy_specs,
        plans=lazy_plans, plans_sub=lazy_sub, vid_entries=lazy_vids, always=tuple(always),
        always_sub=tuple(always_sub), content_hits=lazy_hits, chunk_union_exact=not matcher.has_newline,
        macro_keys=tuple(macro), columns=(cols, specials),
        regexes=regexes, regex_lits=regex_lits, regex_hazards=tuple(hazards),
        regex_line_local=tuple(rid for rid, rx in enumerate(regexes) if rx.line_local))
