"""The twins' import-time character table agrees with textrules, code point by code point."""
from __future__ import annotations

from lorescan.match import _wordchars


def test_the_bulk_built_table_classifies_every_bmp_code_point_like_textrules():
    table = _wordchars.CHAR_TABLE
    assert len(table) == 0x10000
    wrong = [cp for cp in range(0x10000) if table[cp] != _wordchars._classify(chr(cp))]
    assert not wrong, [hex(cp) for cp in wrong[:10]]


def test_the_table_marks_the_characters_the_rules_single_out():
    cls = _wordchars.char_class
    w = _wordchars
    assert cls(ord("a")) == w.ASCII_WORD | w.UNICODE_WORD
    assert cls(ord("-")) == 0
    assert cls(0x200D) == w.UNICODE_WORD                      # ZWJ: a word character, not ASCII
    assert cls(ord("火")) == w.UNICODE_WORD | w.NOSPACE
    assert cls(ord("ก")) == w.UNICODE_WORD | w.NOSPACE       # Thai
    assert cls(0x3000) & w.UNICODE_WORD == 0                   # ideographic space
    assert cls(0x20000) == w.UNICODE_WORD | w.NOSPACE         # astral: classified on demand
