"""Regenerates :mod:`lorescan.js._casetables` from this Python's Unicode data:
``python -m lorescan.js._casetables_gen`` rewrites that file (its tables and version; the rest
of it is kept). Never imported at run time: the tables it writes are data, read by
``js.regex`` without this module (so the regex code and its tables import no circle).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from lorescan.js.regex import compute_case_classes

TABLES = Path(__file__).with_name("_casetables.py")
WIDTH = 117          # the longest line written, quotes included


def render(source: str) -> str:
    """``source`` (the tables module's text) with its version and tables computed anew."""
    head, rest = source.split("UNIDATA_VERSION = ", 1)
    out = [head + f'UNIDATA_VERSION = "{unicodedata.unidata_version}"']
    for name, mode in (("LEGACY", False), ("UNICODE", True)):
        out.append(f"{name} = (")
        line = '    "'
        for cls in compute_case_classes(mode):
            item = ",".join(f"{cp:x}" for cp in cls) + " "
            if len(line) + len(item) > WIDTH:
                out.append(line + '"')
                line = '    "'
            line += item
        out.append(line + '"')
        out.append(")")
    return "\n".join(out) + "\n\n\ndef classes(" + rest.split("\n\n\ndef classes(", 1)[1]


if __name__ == "__main__":
    TABLES.write_text(render(TABLES.read_text("utf-8")), "utf-8")
