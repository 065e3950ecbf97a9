"""SillyTavern's decorator lines (docs/sillytavern-mode.md#st-decorators): ``@@activate`` and ``@@dont_activate``."""
from __future__ import annotations

__all__ = ["parse_st_decorators", "ST_DECORATORS"]

ST_DECORATORS = ("@@activate", "@@dont_activate")


def parse_st_decorators(content: str, *, strict_lines: bool = False) -> tuple[tuple[str, ...], str]:
    """Split SillyTavern decorator lines off ``content``: ``(recorded lines, content)``.

    Only content starting with ``@@`` has decorators. Leading ``@@`` lines are decorators;
    the first other line starts the content. ``@@@`` lines are skipped unless they follow
    an unknown decorator (then recorded with one ``@`` removed). If every line is a
    decorator the content is returned unchanged (a SillyTavern quirk) unless
    ``strict_lines`` (docs/improved-profile.md#decorators), which also trims trailing whitespace
    of recorded lines and returns an empty content.
    """
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    recorded: list[str] = []
    fallback = False
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            return tuple(recorded), "\n".join(lines[i:])
        if line.startswith("@@@"):
            if not fallback:
                continue
            line = line[1:]
        if line.startswith(ST_DECORATORS):
            recorded.append(line.rstrip() if strict_lines else line)
            fallback = False
        else:
            fallback = True
    return tuple(recorded), ("" if strict_lines else content)
