"""Decorator header of an entry's content, lorebook-slot mode (docs/slot-mode.md#slot-gates; CCv3/RisuAI rules).

A content may start with lines such as ``@@probability 50`` or ``@@role assistant``.
:func:`parse_decorators` reads that header into a :class:`Decorators` value and returns
the content that remains. Parsing:

1. the content is trimmed (JS whitespace) and split into lines, each line trimmed;
   ``@@@end`` is read as ``@@end``;
2. ``@@name a, b`` is a decorator (arguments split on commas, trimmed, empty ones
   dropped); a ``@@@name`` line is a *fallback*, considered only when the decorator just
   before it was rejected (unknown, not applicable here, or an invalid value), otherwise
   skipped; an accepted decorator clears the fallback flag, a rejected one sets it;
3. the first line not starting with ``@@`` ends the header: it and every later line,
   trimmed, are the content (empty when the content holds only decorators);
4. a repeated decorator keeps its first value, except the key lists
   (``@@additional_keys``, ``@@exclude_keys``, ``@@exclude_keys_all``), which accumulate.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

from ..js.text import JS_WHITESPACE, js_trim
from ..match.fuzzy import decorator_threshold

__all__ = ["Decorators", "DecoratorLine", "parse_decorators", "MESSAGE_ROLES", "MessageRole", "UI_PROMPTS",
           "NOT_APPLICABLE"]

MessageRole = Literal["system", "user", "assistant"]
"""The role of a message in slot mode (and of ``@@role``): not the roles a book plays in SillyTavern mode."""
MESSAGE_ROLES: tuple[MessageRole, ...] = ("system", "user", "assistant")
UI_PROMPTS = ("system_prompt", "post_history_instructions")
# CCv3 placement decorators: meaningless with a single slot, so rejected (fallback tried).
NOT_APPLICABLE = frozenset({"depth", "reverse_depth", "instruct_depth", "reverse_instruct_depth",
                            "position", "end", "instruct_scan_depth"})

# A plain decimal number, as a user types it ("50", "-3", "12.5", "1e3"); no hex, no NaN.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class DecoratorLine:
    """One header line as read: its name, arguments, whether it was a ``@@@`` fallback,
    and what became of it (``"accepted"``, ``"ignored"`` = valid but a repeat,
    ``"rejected: <why>"``, ``"skipped"`` = a fallback with nothing to fall back from)."""

    name: str
    args: tuple[str, ...]
    fallback: bool
    status: str


@dataclass(frozen=True, slots=True)
class Decorators:
    """The decorators of one entry (None / empty = absent). See docs/slot-mode.md#slot-gates for meanings."""

    probability: float | None = None
    scan_depth: int | None = None
    order: float | None = None
    priority: float | None = None
    role: str | None = None
    activate_only_after: int | None = None
    activate_only_every: int | None = None
    keep: bool = False
    dont_activate_after_match: bool = False
    is_greeting: bool = False
    greeting_index: int | None = None
    activate: bool = False
    dont_activate: bool = False
    additional_keys: tuple[tuple[str, ...], ...] = ()
    exclude_keys: tuple[str, ...] = ()
    exclude_keys_all: tuple[tuple[str, ...], ...] = ()
    ignore_on_max_context: bool = False
    disable_ui_prompt: str | None = None
    whole_words: bool | None = None          # @@match_full_word / @@match_partial_word
    recursive: bool | None = None            # @@recursive / @@unrecursive
    no_recursive_search: bool = False
    is_user_icon: str | None = None
    fuzzy: float | None = None               # @@fuzzy N (0.0: @@fuzzy off), docs/slot-mode.md#slot-fuzzy
    lines: tuple[DecoratorLine, ...] = field(default=(), compare=False)

    def names(self) -> tuple[str, ...]:
        """Names of the accepted decorators, in content order."""
        return tuple(line.name for line in self.lines if line.status == "accepted")


def _number(args: tuple[str, ...]) -> float | None:
    if len(args) != 1 or not _NUMBER.fullmatch(args[0]):
        return None
    value = float(args[0])
    return value if math.isfinite(value) else None


def _integer(args: tuple[str, ...]) -> int | None:
    value = _number(args)
    return None if value is None else int(value)      # truncates toward zero, as JS parseInt


# Each handler takes the arguments and returns the fields to set, or a rejection reason.
_Result = dict[str, Any] | str


def _numeric(field_name: str, *, lo: float | None = None, hi: float | None = None,
             integer: bool = False, minimum: int | None = None) -> Callable[[tuple[str, ...]], _Result]:
    def handle(args: tuple[str, ...]) -> _Result:
        value: float | None = _integer(args) if integer else _number(args)
        if value is None:
            return "expects one number"
        if minimum is not None and value < minimum:
            return f"expects a number >= {minimum}"
        if lo is not None:
            value = max(lo, value)
        if hi is not None:
            value = min(hi, value)
        return {field_name: int(value) if integer else float(value)}
    return handle


def _flag(field_name: str, value: Any = True) -> Callable[[tuple[str, ...]], _Result]:
    # Arguments after a flag decorator are ignored (RisuAI and CCv3 read only the name).
    return lambda args: {field_name: value}


def _role(args: tuple[str, ...]) -> _Result:
    if len(args) == 1 and args[0].lower() in MESSAGE_ROLES:
        return {"role": args[0].lower()}
    return "expects system, user or assistant"


def _is_greeting(args: tuple[str, ...]) -> _Result:
    if not args:
        return {"is_greeting": True}
    index = _integer(args)
    if index is None or index < 0:
        return "expects no value or a greeting index >= 0"
    return {"is_greeting": True, "greeting_index": index}


def _key_list(field_name: str, nested: bool) -> Callable[[tuple[str, ...]], _Result]:
    def handle(args: tuple[str, ...]) -> _Result:
        if not args:
            return "expects a list of keys"
        return {field_name: (args,) if nested else args}
    return handle


def _ui_prompt(args: tuple[str, ...]) -> _Result:
    if len(args) == 1 and args[0] in UI_PROMPTS:
        return {"disable_ui_prompt": args[0]}
    return "expects system_prompt or post_history_instructions"


def _fuzzy(args: tuple[str, ...]) -> _Result:
    value = decorator_threshold(args)
    return value if isinstance(value, str) else {"fuzzy": value}


def _handlers(user_icon: bool) -> dict[str, Callable[[tuple[str, ...]], _Result]]:
    table: dict[str, Callable[[tuple[str, ...]], _Result]] = {
        "probability": _numeric("probability", lo=0, hi=100),
        "scan_depth": _numeric("scan_depth", lo=0, hi=100, integer=True),
        "order": _numeric("order"),
        "priority": _numeric("priority"),
        "role": _role,
        "activate_only_after": _numeric("activate_only_after", integer=True),
        "activate_only_every": _numeric("activate_only_every", integer=True, minimum=1),
        "keep": _flag("keep"),
        "keep_activate_after_match": _flag("keep"),
        "dont_activate_after_match": _flag("dont_activate_after_match"),
        "is_greeting": _is_greeting,
        "activate": _flag("activate"),
        "dont_activate": _flag("dont_activate"),
        "additional_keys": _key_list("additional_keys", nested=True),
        "exclude_keys": _key_list("exclude_keys", nested=False),
        "exclude_keys_all": _key_list("exclude_keys_all", nested=True),
        "ignore_on_max_context": _flag("ignore_on_max_context"),
        "disable_ui_prompt": _ui_prompt,
        "match_full_word": _flag("whole_words", True),
        "match_partial_word": _flag("whole_words", False),
        "recursive": _flag("recursive", True),
        "unrecursive": _flag("recursive", False),
        "no_recursive_search": _flag("no_recursive_search"),
        "fuzzy": _fuzzy,
    }
    if user_icon:
        table["is_user_icon"] = lambda args: ({"is_user_icon": args[0]} if len(args) == 1
                                              else "expects one icon name")
    return table


_HANDLERS = {False: _handlers(False), True: _handlers(True)}
_ACCUMULATE = ("additional_keys", "exclude_keys", "exclude_keys_all")
_DEFAULTS = Decorators()


def _split_name(body: str) -> tuple[str, tuple[str, ...]]:
    for i, ch in enumerate(body):
        if ch in JS_WHITESPACE:
            name, rest = body[:i], body[i + 1:]
            break
    else:
        name, rest = body, ""
    args = tuple(a for a in (js_trim(p) for p in rest.split(",")) if a)
    return name, args


def parse_decorators(content: str, *, user_icon: bool = False) -> tuple[Decorators, str]:
    """Read the decorator header of ``content``; returns (decorators, remaining content).

    ``user_icon``: accept ``@@is_user_icon`` (only when the caller can say which user
    icon is active, CCv3); otherwise it is rejected like any unknown decorator.
    Never raises: an unusable line is rejected and recorded in ``Decorators.lines``.
    """
    text = js_trim(content)
    if not text.startswith("@@"):
        return _DEFAULTS, text
    handlers = _HANDLERS[bool(user_icon)]
    raw_lines = text.split("\n")
    values: dict[str, Any] = {}
    lines: list[DecoratorLine] = []
    fallback = False
    body_start = len(raw_lines)
    for n, raw in enumerate(raw_lines):
        line = js_trim(raw)
        if line == "@@@end":
            line = "@@end"
        if not line.startswith("@@"):
            body_start = n
            break
        is_fallback = line.startswith("@@@")
        name, args = _split_name(line[3:] if is_fallback else line[2:])
        if is_fallback and not fallback:
            lines.append(DecoratorLine(name, args, True, "skipped"))
            continue
        handler = handlers.get(name)
        if handler is None:
            outcome: _Result = ("not applicable to a single lorebook slot" if name in NOT_APPLICABLE
                                else "unknown decorator")
        else:
            outcome = handler(args)
        if isinstance(outcome, str):
            lines.append(DecoratorLine(name, args, is_fallback, f"rejected: {outcome}"))
            fallback = True
            continue
        fallback = False
        status = "accepted"
        if any(key in values and key not in _ACCUMULATE for key in outcome):
            status = "ignored"      # a repeat (or its opposite, e.g. @@unrecursive after @@recursive): first wins
        else:
            for key, value in outcome.items():
                values[key] = values.get(key, ()) + value if key in _ACCUMULATE else value
        lines.append(DecoratorLine(name, args, is_fallback, status))
    remaining = js_trim("\n".join(raw_lines[body_start:]))
    return replace(_DEFAULTS, lines=tuple(lines), **values), remaining
