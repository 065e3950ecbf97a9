"""What every ``lorescan`` subcommand's parser shares: number types that refuse absurd values
at the flag (``--max-context 0``, a negative depth), and help that shows each default.

Standard library only: the parser is built on every run, ``--help`` included.
"""
from __future__ import annotations

import argparse
import math
from typing import Any, Callable

__all__ = ["HelpFormatter", "RawHelpFormatter", "count", "positive_int", "positive_float", "non_negative_float",
           "finish_subparsers"]


def _number(text: str, kind: Callable[[str], Any], word: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {word}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def count(text: str) -> int:
    """A whole number, 0 or more (depths, counts, caps where 0 means none)."""
    value = _number(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number, 1 or more (a context size, workers, a port)."""
    value = _number(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (sizes in MB, seconds)."""
    value = _number(text, float, "a number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, 0 or more."""
    value = _number(text, float, "a number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Adds ``(default: X)`` to an option's help unless the help already says its default,
    or there is none to show (no value, a switch that is off, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default is argparse.SUPPRESS
                or default == [] or default == "" or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
            return text
        return super()._get_help_string(action)


class RawHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """:class:`HelpFormatter` keeping the description and epilog as written (lint's code table)."""


def finish_subparsers(sub: Any) -> None:
    """Every subcommand's parser: defaults shown in ``--help``, and each parser remembered on
    its namespace (``_parser``) so an error found after parsing is reported against the
    subcommand's usage, not the top level's."""
    for parser in sub.choices.values():
        raw = parser.formatter_class is argparse.RawDescriptionHelpFormatter
        parser.formatter_class = RawHelpFormatter if raw else HelpFormatter
        parser.set_defaults(_parser=parser)
