"""Checks on single keys: plain keys that cannot match as meant (LS1xx), regex keys (LS2xx),
keys hidden inside common words (LS7xx).

Everything here follows SillyTavern's reading of a key (docs/sillytavern-mode.md#st-regex-keys
and #st-plain-keys): a key is trimmed (JS trim) after macro substitution; an empty key is
skipped; a blank one becomes ``""`` and matches everything; whole words mean "a character
outside ``A-Z a-z 0-9 _`` (or the text's edge) on both sides", so every non-ASCII letter is a
boundary; a key holding whitespace is a substring test even with whole words on.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Generator, Iterator

from ..js.regex import JSRegex, JSRegexError, RegexTooComplex, regex_key
from ..js.text import has_js_whitespace, is_ascii_word_char, js_trim
from ..limits import DEFAULT_LIMITS
from ..match.expr import ExprError, atoms_of, is_expression, parse_expression, true_without_keys
from ..match.regexscope import RegexBudget
from ..model import Entry
from ..js.stdecorators import parse_st_decorators

__all__ = ["KeyContext", "check_keys", "probe_regex", "ST_MACROS", "NO_REGEX_FORMATS", "NO_MACRO_FORMATS"]

# Formats whose own platform has no regex keys: a /.../ key there is matched as text.
NO_REGEX_FORMATS = {"kobold": "KoboldAI", "agnai": "Agnai", "entry_list": "KoboldAI Lite"}
# Formats whose own platform does not substitute macros in keys.
NO_MACRO_FORMATS = {"kobold": "KoboldAI", "agnai": "Agnai", "entry_list": "KoboldAI Lite",
                    "novelai": "NovelAI", "novelai_story": "NovelAI"}
# SillyTavern's macro names (the part before "::" or ":"), lowercase. A name not listed stays
# in the key as typed, so the key only matches text that contains the braces themselves.
ST_MACROS = frozenset("""
char user group groupnotmuted charifnotgroup notchar persona description personality scenario
mesexamples mesexamplesraw charprompt charinstruction charjailbreak chardepthprompt creatornotes
charversion version model lastmessage lastmessageid lastusermessage lastcharmessage firstincludedmessageid
currentswipeid lastswipeid input original newline trim noop time date weekday isotime isodate
datetimeformat idle_duration idleduration time_utc timediff random pick roll reverse banned
setvar getvar addvar incvar decvar setglobalvar getglobalvar addglobalvar incglobalvar decglobalvar
maxprompt maxcontext maxresponse systemprompt defaultsystemprompt instructsystemprompt
instructstoryprompt instructsystemprefix instructsystemsuffix instructinput instructoutput
instructuserprefix instructusersuffix instructassistantprefix instructassistantsuffix
instructfirstoutputprefix instructlastoutputprefix instructseparator instructstop summary
authorsnote charauthorsnote defaultauthorsnote outlet hasextension
""".split())
_MACRO = re.compile(r"\{\{\s*([^{}:\s]*)")
# "/body/" plus at most three letters: what a regex key with a slip looks like ("/role, /stop"
# is a list of commands, not a regex with flags "stop").
_LOOKS_REGEX = re.compile(r"/(.+)/([A-Za-z]{0,3})\Z", re.S)
NOT_PROBED = "not probed"      # KeyContext.probe once the book's probe budget is spent
_PROBE_END = "\u2603"          # a character no probe pattern is likely to accept, to force backtracking


class KeyContext:
    """What the key checks need to know about the book and the lint options."""

    def __init__(self, source: str, fmt: str, case_sensitive: bool, whole_words: bool,
                 regex_probe_ms: float, regex_probe_total_ms: float = float("inf")) -> None:
        self.source = source
        self.format = fmt
        self.case_sensitive = case_sensitive
        self.whole_words = whole_words
        self.regex_probe_ms = regex_probe_ms
        self.regex_probe_total_ms = regex_probe_total_ms
        self.probe_left_ms = regex_probe_total_ms      # nominal ms the book's probes may still cost
        self.regex_as_text: str | None = None     # who reads this entry's regex keys as text (LS204)
        self._probed: dict[tuple[str, str], tuple[float, int] | None | str] = {}

    def probe(self, rx: JSRegex) -> tuple[float, int] | None | str:
        """:func:`probe_regex` of ``rx`` (once per pattern), or ``NOT_PROBED`` once what is left
        of the book's probe budget is less than one key's (``regex_probe_ms``)."""
        key = (rx.source, rx.flags)
        if key not in self._probed:
            if self.probe_left_ms < self.regex_probe_ms:
                self._probed[key] = NOT_PROBED
            else:
                cut, spent = _probe(rx, self.regex_probe_ms)
                self.probe_left_ms -= spent
                self._probed[key] = cut
        return self._probed[key]


# (code, field, message, suggestion)
Raw = tuple[str, str, str, str]


def check_keys(entry: Entry, ctx: KeyContext) -> Iterator[Raw]:
    """The LS1xx/LS2xx findings of one entry's primary and secondary keys."""
    ww = entry.match_whole_words if entry.match_whole_words is not None else ctx.whole_words
    ctx.regex_as_text = NO_REGEX_FORMATS.get(ctx.format)
    if ctx.regex_as_text is None and entry.card_fields.get("use_regex") is False:
        ctx.regex_as_text = "this card entry says use_regex: false, so a strict Character Card reader"
    usable = 0
    for name, keys in (("key", entry.key), ("keysecondary", entry.keysecondary)):
        for i, raw in enumerate(keys):
            field = f"{name}[{i}]"
            if is_expression(raw):
                yield from _check_expression(raw, field, name == "key", ww, ctx)
            else:
                yield from _check_key(raw, field, ww, ctx)
            if name == "key" and raw:        # a blank key is usable: it matches everything (LS101)
                usable += 1
    if not usable and not entry.constant and not entry.disable and not _activates_itself(entry) \
            and not entry.fields.get("vectorized"):
        what = "no primary key" if not entry.key else "only empty primary keys"
        yield ("LS107", "key", f"the entry has {what} and is not constant, so no scan can activate it",
               "add a key, or make the entry constant")


def _check_expression(raw: str, field: str, primary: bool, ww: bool, ctx: KeyContext) -> Iterator[Raw]:
    # docs/improved-profile.md#key-expressions: the expression's own checks, then each atom's as a key
    try:
        tree = parse_expression(raw)
    except ExprError as exc:
        yield ("LS110", field, f"{_s(raw)} is not a well-formed key expression: {exc}; the improved profile "
               "and slot mode refuse the book (SillyTavern reads it as a plain key that never matches)",
               "fix the expression (docs/improved-profile.md#key-expressions)")
        return
    if primary and true_without_keys(tree):
        yield ("LS111", field, f"the primary key expression {_s(raw)} is true when none of its keys matches, so "
               "it would fire on every scan; the improved profile and slot mode refuse the book",
               "AND the NOT part with a key, or move it to a secondary key")
    for atom in atoms_of(tree):
        if not atom.key.startswith("/") or not atom.literal:
            yield from _check_key(atom.key, field, ww, ctx)


def _activates_itself(entry: Entry) -> bool:
    return entry.content.startswith("@@") and "@@activate" in parse_st_decorators(entry.content)[0]


def _check_key(raw: str, field: str, ww: bool, ctx: KeyContext) -> Iterator[Raw]:
    if raw == "":
        yield ("LS102", field, "an empty key is skipped by the scan", "remove it")
        return
    key = js_trim(raw)
    if key == "":
        effect = ("so the entry fires on every message" if field.startswith("key[")
                  else "so the secondary condition is decided by this key alone (AND_ANY always holds, "
                       "NOT_ANY never does)")
        yield ("LS101", field, f"the key {_s(raw)} is only whitespace: SillyTavern trims it to an empty key, "
               f"which matches every text, {effect}",
               "remove the key (or make the entry constant if that is the intent)")
        return
    if key != raw:
        intent = " (spaces do not make a key a whole word)" if raw.strip(" ") == key else ""
        yield ("LS103", field, f"the key {_s(raw)} has whitespace at its ends; the scan trims it and matches "
               f"{_s(key)}{intent}", f"write {_s(key)}" + (", and turn on whole words for this entry" if intent else ""))
    if "{{" in key:
        yield from _check_macros(key, field, ctx)
    if key.startswith("/"):
        done = yield from _check_regex(key, field, ctx)
        if done:
            return
    if ww:
        yield from _check_whole_word(key, field)


def _check_macros(key: str, field: str, ctx: KeyContext) -> Iterator[Raw]:
    platform = NO_MACRO_FORMATS.get(ctx.format)
    if platform is not None:
        yield ("LS106", field, f"{platform} does not substitute macros in keys: {_s(key)} only matches text "
               "that contains the braces", "write the name itself instead of the macro")
        return
    unknown = sorted({m.group(1) for m in _MACRO.finditer(key)
                      if m.group(1) and not m.group(1).startswith("//") and m.group(1).lower() not in ST_MACROS})
    if unknown:
        names = ", ".join("{{" + u + "}}" for u in unknown)
        yield ("LS106", field, f"{names} is not a SillyTavern macro, so it stays in the key as typed and "
               f"{_s(key)} only matches text that contains the braces",
               "fix the macro name (e.g. {{char}}, {{user}}) or write the text itself")


def _check_regex(key: str, field: str, ctx: KeyContext) -> Generator[Raw, None, bool]:
    """Regex checks; returns True when the key is a regex (no plain-key checks then)."""
    try:
        rx = regex_key(key, max_length=DEFAULT_LIMITS.max_regex_length, max_nesting=DEFAULT_LIMITS.max_regex_nesting,
                       max_expansion=DEFAULT_LIMITS.max_regex_expansion, invalid="raise")
    except JSRegexError as exc:
        yield ("LS201", field, f"{_s(key)} is not a valid JavaScript regex ({exc}), so it is matched as plain text",
               "fix the pattern; test it in a browser console with new RegExp(pattern, flags)")
        return False
    except RegexTooComplex as exc:
        yield ("LS205", field, f"{_s(key)} is refused by lorescan: {exc}", "simplify the pattern")
        return True
    if rx is None:
        m = _LOOKS_REGEX.match(key)
        if m is not None and key != "/" and len(key) > 2:
            bad = "".join(sorted(set(m.group(2)) - set("gimsuy")))
            why = (f"the flags {bad!r} are not JavaScript regex flags" if bad
                   else "its pattern holds an unescaped '/'")
            yield ("LS201", field, f"{_s(key)} looks like a regex key, but {why}, so it is matched as plain text",
                   "fix the flags (g i m s u y) or escape '/' as '\\/'")
        return False
    if ctx.regex_as_text is not None:
        reader = ctx.regex_as_text
        if reader in NO_REGEX_FORMATS.values():
            reader = f"{reader} has no regex keys and"
        yield ("LS204", field, f"{_s(key)} is a regex to SillyTavern (and to lorescan by default), but {reader} matches it as "
               "plain text", "write plain keys if the book is used there, or set use_regex where it applies")
    if rx.hazard is not None:
        yield ("LS202", field, f"{_s(key)} can backtrack catastrophically: {rx.hazard}",
               "remove the nested or overlapping repetition (e.g. (a+)+ -> a+)")
    cut = ctx.probe(rx)
    if cut == NOT_PROBED:
        if rx.plan.re2 is None:      # linear-time keys are never cut off by a scan: nothing to say
            yield ("LS203", field, f"{_s(key)} needs backtracking ({rx.plan.reason}) and was not probed: the book's "
                   f"regex keys spent the lint's probe budget (regex_probe_total_ms="
                   f"{ctx.regex_probe_total_ms:,.0f}) before it, so a scan may cut it off and count it as not matching",
                   "rewrite the pattern without lookarounds or backreferences (then it runs in linear time), "
                   "or lint with a larger regex_probe_total_ms")
    elif cut is not None:
        assert not isinstance(cut, str)
        ms, length = cut
        plan = rx.plan
        if plan.nodes is None:
            why = (f"needs backtracking ({plan.reason}) with no bound on its work ({plan.unbounded}): lorescan "
                   "never runs it, and every scan that tests it cuts it off and counts it as not matching")
        else:
            why = (f"needs backtracking ({plan.reason}); its cost bound on a {length:,}-character probe text is "
                   f"{ms:,.0f} ms, more than one evaluation may take: in a scan such texts cut it off and it "
                   "counts as not matching")
        yield ("LS203", field, f"{_s(key)} {why}",
               "rewrite the pattern without lookarounds or backreferences (then it runs in linear time), "
               "or without nested or overlapping repetition")
    return True


def _check_whole_word(key: str, field: str) -> Iterator[Raw]:
    if has_js_whitespace(key):
        yield ("LS108", field, f"{_s(key)} holds a space, so SillyTavern matches it as a substring even with "
               f"whole words on (it matches inside longer words at its ends)",
               "use a regex key with \\b at the ends if the ends must be whole words")
        return
    first, last = key[0], key[-1]
    if _is_letter(first) and not is_ascii_word_char(first) or _is_letter(last) and not is_ascii_word_char(last):
        example = key + key[-1] if _is_letter(last) and not is_ascii_word_char(last) else key[0] + key
        yield ("LS105", field, f"whole words cannot bound {_s(key)}: SillyTavern's word characters are only "
               f"A-Z a-z 0-9 _, so every other letter counts as a boundary and {_s(key)} also matches inside "
               f"longer words (e.g. in {example!r})",
               "accept substring matching, or use lorescan's improved profile (Unicode word characters)")
        return
    for end, ch in (("starts", first), ("ends", last)):
        if not is_ascii_word_char(ch) and not _is_letter(ch):
            where = f"x{key}" if end == "starts" else f"{key}x"
            yield ("LS104", field, f"{_s(key)} {end} with {ch!r}: with whole words on, that character must itself "
                   f"touch a non-word character, so {_s(key)} does not match in {where!r}",
                   "remove the punctuation from the key, or turn whole words off for this entry")
            return


def _is_letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def probe_regex(rx: JSRegex, budget_ms: float) -> tuple[float, int] | None:
    """Run ``rx`` on texts made to make it backtrack, under a budget of ``budget_ms``
    (``RegexBudget``: each evaluation's nominal cost, a function of the pattern and the text
    only, so the answer is the same on any machine). Returns (nominal ms, probe length) of the
    first probe that was cut off, or None when all ran. A regex RE2 runs is never cut off here
    unless a probe's linear cost is over the budget."""
    return _probe(rx, budget_ms)[0]


def _probe(rx: JSRegex, budget_ms: float) -> tuple[tuple[float, int] | None, float]:
    # probe_regex's answer and the nominal ms its evaluations cost (at most budget_ms)
    budget = RegexBudget(seconds=budget_ms / 1000, per_eval=budget_ms / 2000)
    found: tuple[float, int] | None = None
    for text in _probe_texts(rx.source):
        if budget.search(rx, "\x01" + text) is None:
            found = budget.cut.get(f"/{rx.source}/{rx.flags}", budget_ms), len(text)
            break
        if budget.left <= 0:
            break
    return found, (budget.seconds - budget.left) * 1000


def _probe_texts(pattern: str) -> Iterator[str]:
    # Repetitions of the characters the pattern is about, each ended by a character it will
    # not accept: (a+)+$ backtracks exponentially on 'aaaa…☃', polynomial shapes on long runs.
    chars = [c for c in dict.fromkeys(pattern) if c.isalnum() and c.isascii()][:6]
    for esc, c in (("\\w", "a"), ("\\d", "0"), ("\\s", " "), (".", "a")):
        if esc in pattern and c not in chars:
            chars.append(c)
    chars += [c for c in ("a", " ") if c not in chars]
    for n in (24, 3000):
        for c in chars:
            yield c * n + _PROBE_END
        if len(chars) > 1:
            yield (chars[0] + chars[1]) * (n // 2) + _PROBE_END
            yield (chars[0] * 3 + " ") * (n // 4) + _PROBE_END


def _s(key: str, width: int = 80) -> str:
    """A key as shown in a message: its repr, shortened in the middle past ``width``."""
    text = repr(key)
    return text if len(text) <= width else text[:width // 2 - 1] + "…" + text[-(width // 2 - 1):]
