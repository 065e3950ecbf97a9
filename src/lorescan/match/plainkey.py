"""One plain key on one string: docs/sillytavern-mode.md#st-plain-keys, word boundaries included.

The match view uses it only for special plain keys (those the automaton cannot decide, see
:mod:`lorescan.match.keys`); span explanations use its boundary rules. Split out of
:mod:`lorescan.match.view`, which re-exports :func:`match_plain_key`.
"""
from __future__ import annotations

from .options import MatchOptions
from ..js.text import has_js_whitespace, is_ascii_word_char, is_nospace_char, is_unicode_word_char, js_lower

def _is_word(ch: str, options: MatchOptions) -> bool:
    return is_ascii_word_char(ch) if options.word_chars == "ascii" else is_unicode_word_char(ch)


def _boundary_ok(outer: str, inner: str, options: MatchOptions) -> bool:
    if not _is_word(outer, options):
        return True
    return options.word_chars == "unicode" and options.nospace_scripts and (
        is_nospace_char(outer) or is_nospace_char(inner))


def _empty_key_matches(text: str, options: MatchOptions) -> bool:
    def blocks(ch: str) -> bool:       # a character that is no boundary on its side
        return _is_word(ch, options) and not (options.word_chars == "unicode" and options.nospace_scripts
                                              and is_nospace_char(ch))
    n = len(text)
    if n == 0 or not blocks(text[0]) or not blocks(text[-1]):
        return True
    return any(not blocks(text[i - 1]) and not blocks(text[i]) for i in range(1, n))


def match_plain_key(haystack: str, key: str, *, case_sensitive: bool, whole_words: bool,
                    options: MatchOptions) -> bool:
    """docs/sillytavern-mode.md#st-plain-keys (and docs/improved-profile.md under improved options) for one plain key on one string."""
    if not case_sensitive:
        haystack, key = js_lower(haystack), js_lower(key)
    if not whole_words:
        return key in haystack
    if has_js_whitespace(key) and options.multiword == "substring":
        return key in haystack
    if key == "":
        # ST's pattern (?:^|\W)(?:$|\W) with nothing between: some position has a boundary
        # on both sides (a SillyTavern haystack always does: it starts with U+0001).
        return _empty_key_matches(haystack, options)
    n, k = len(haystack), len(key)
    start = haystack.find(key)
    while start != -1:
        end = start + k
        before_ok = start == 0 or _boundary_ok(haystack[start - 1], key[0], options)
        after_ok = end == n or _boundary_ok(haystack[end], key[-1], options)
        if before_ok and after_ok:
            return True
        start = haystack.find(key, start + 1)
    return False
