"""The LorebookError family: bad input, located by file, entry and field."""
from __future__ import annotations

__all__ = ["LorebookError", "FormatError", "SettingsError", "RegexKeyError", "ScanDeadlineExceeded"]


class LorebookError(ValueError):
    """Bad input, located: which file, which entry, which field, what is wrong.

    The message reads ``"<source>, entry <entry>, field <field>: <problem>"``.

    Args:
        problem: what is wrong, in words.
        source: the file (or ``"<memory>"``, ``"settings"``, ``"messages"``, ...).
        entry: the entry's uid or index, if one entry is at fault.
        field: the field (``"key[3]"`` for one item of a list), if one field is at fault.
    """

    def __init__(self, problem: str, *, source: str = "<memory>", entry: object = None,
                 field: str | None = None) -> None:
        self.problem, self.source, self.entry, self.field = problem, source, entry, field
        where = source + (f", entry {entry!r}" if entry is not None else "") + (
            f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # keep pickling (worker processes) working with keyword-only args
        return (_rebuild, (type(self), self.problem, self.source, self.entry, self.field))


def _rebuild(cls, problem, source, entry, field):
    return cls(problem, source=source, entry=entry, field=field)


class FormatError(LorebookError):
    """A file that is not a lorebook of any format we read, or a malformed one."""


class SettingsError(LorebookError):
    """A setting out of range or of the wrong type."""


class RegexKeyError(LorebookError):
    """A regex key that cannot be used (only raised where a format requires valid regexes)."""


class ScanDeadlineExceeded(TimeoutError):
    """A scan ran past the deadline its caller gave (``deadline=``, a ``time.monotonic()``
    value). Not a LorebookError: the input is not at fault, the caller's time is up. A deadline
    only ever turns an answer into this error, never into a different answer."""
