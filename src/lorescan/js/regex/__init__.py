"""SillyTavern regex keys as ECMAScript regexes, evaluated by the ``regex`` module (docs/sillytavern-mode.md#st-regex-keys, 13.1).

A JS pattern is parsed once (:mod:`.parser`, following the ECMAScript 2024 grammar without the
``v`` flag, Annex B included for non-``u`` patterns) into a tree (:mod:`.tree`). Everything
else reads that tree: the translation (:mod:`.translate`) re-emits it as a ``regex`` (V0)
pattern that uses no flag-dependent construct of its own: every character class,
``.``, ``\\w``, ``\\s``, ``\\b``, ``^`` and ``$`` is spelt out as an explicit code-point set or
lookaround, and case-insensitivity is compiled into the sets (JS Canonicalize; with ``i`` and a
backreference the text is also mapped through Canonicalize, so backreferences compare canonical
characters as JS does), so the result does not depend on ``regex``'s ideas of "word", "space" or
"case". Backreferences to groups that have not participated match "" as in JS: every group starts
captured empty and is reset to empty at each iteration of an enclosing quantifier (RepeatMatcher).

Engines. :meth:`JSRegex.search` runs a translation on RE2 (``google-re2``, linear time) when
:mod:`lorescan.js.regex.linear` can re-emit it exactly (no lookaround, backreference or property
escape), else on ``regex``; :meth:`JSRegex.cost` is what an evaluation may cost, computed
from the pattern and the text alone, so budgets built on it do not depend on machine load.

Text model. JS strings are UTF-16. Without ``u`` the pattern and the text are both converted to
UTF-16 code units before matching (an astral character becomes two surrogate ``str`` characters),
so ``.``, classes and quantifiers see the same units JS sees: ``/^.$/`` does not match ``"😀"``,
``/^..$/`` does, ``/[😀]/`` matches either half. With ``u`` both are sequences of code points, and
a surrogate pair written in the text as two ``str`` characters is joined first.

Known approximations (everything else is intended to be exact and is checked against V8 in
``tests/data/jsregex/v8_cases.json``):

* ``v`` is rejected with JSRegexError (V8 accepts it; SillyTavern keys never carry it).
* Unicode data comes from Python's ``unicodedata`` (case mappings) and the ``regex`` module
  (``\\p{...}``), whose Unicode versions may differ from V8's ICU for recently added characters.
  ``u``-mode simple case folding is derived from ``str.casefold``/``str.lower`` (CaseFolding
  status C and S); S entries whose target is not ``lower()`` (U+1FD3, U+1FE3, U+FB05) are missed.
* ``\\p{Changes_When_NFKC_Casefolded}`` is computed from ``unicodedata`` NFKC + casefold.
* Script names in ``\\p{Script=...}``/``\\p{scx=...}`` are checked for JS's exact spelling by shape
  (``Latin``, ``Latn``, ``Old_Italic``, ``SignWriting``), then looked up by ``regex``.
* Captures made inside a lookbehind are taken left-to-right (JS matches lookbehinds right-to-left);
  this is only observable through a backreference to such a group.
* V8 quirk not reproduced: with ``u``, V8 also tries a match starting between the two halves of
  a surrogate pair, where ``\\B`` holds; so ``/\\B/u`` is true on ``"1😀K"`` in V8 (no code-point
  position qualifies, as the spec says) and false here. Only empty-matching starts are affected.
* An empty-matching quantified group with captures used by backreferences, such as
  ``/(?:(\\2)(?=(\\w)))+/``, can exhaust ``regex``'s memory; ``search`` raises RegexTimeout.
* Quantifier bounds above 10,000,000 are clamped (a larger min) or unbounded (a larger max):
  ``regex`` hangs compiling bigger counts. Only texts that long, or empty-matching atoms, differ.

Layout: :mod:`.chars` (character data, code-point sets), :mod:`.tree`, :mod:`.parser`,
:mod:`.translate`, :mod:`.literals` (the required-literal prefilter and the leading-literal
search plan), :mod:`.checks` (expansion count, catastrophic shapes), :mod:`.compiled`
(:class:`JSRegex`, :class:`JSText`, compiling keys). :mod:`.linear` (the RE2 plan and the cost bound).

Turning a key into a regex, two public ways (both share one parse, one translation and one
prefilter): an engine calls :func:`regex_key` (a ``/pattern/flags`` key under the book's
limits, uncached; None for a plain key; ``invalid="raise"`` to learn why a key in that form is
not a regex); a tool, an explanation, a test or a benchmark calls :func:`tool_regex` (memoised,
no limits; None for a plain or invalid key). ``compile_js_regex``, ``compile_regex_key``,
``split_regex_key`` and ``parse_regex_key`` are deprecated aliases that warn; the building
blocks behind the two (``_compile_regex_key``, ``_compile_js_regex``: ``new RegExp(pattern,
flags)`` for a split pattern; ``_split_regex_key``: the key's shape alone) are private, reached
by ``match.regexscope``, ``limits``, the lint and the translator's tests.
"""
from __future__ import annotations

import regex  # noqa: F401  (tests patch ``lorescan.js.regex.regex.compile``: the module every compile uses)

from .chars import REGEX_MAX_EXPANSION, compute_case_classes
from .compiled import JSRegex, JSText, regex_key, tool_regex
from .compiled import compile_js_regex, compile_regex_key, parse_regex_key, split_regex_key  # noqa: F401  (deprecated)
from .literals import leading_literals, required_literals
from .tree import JSRegexError, RegexTimeout, RegexTooComplex

# Private names that tests, tools and benchmarks reach here (the module path they always used).
from .chars import _case_classes, _charset_emission  # noqa: E402,F401,I001
from .compiled import _compile_js_regex, _compile_regex_key, _compile_translated, _split_regex_key  # noqa: E402,F401
from .literals import _literal_char  # noqa: E402,F401
# Every memo of the package, here too: benchmarks/bench_heavy.clear_regex_caches (and
# profile_heavy) empty them all through this namespace to measure a cold worker.
from .chars import _canon_table, _closed, _cwkcf_ranges, _sorted_cased  # noqa: E402,F401
from .linear import plan_of  # noqa: E402,F401
from .literals import _facts  # noqa: E402,F401
from .parser import parse  # noqa: E402,F401

__all__ = ["JSRegexError", "RegexTimeout", "RegexTooComplex", "JSRegex", "JSText", "regex_key", "tool_regex",
           "required_literals", "leading_literals",
           "REGEX_MAX_EXPANSION", "compute_case_classes"]
