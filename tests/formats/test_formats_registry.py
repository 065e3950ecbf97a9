"""The formats registry: one reader per detected JSON format, one name set for all formats."""
from __future__ import annotations

import ast
import inspect
from typing import get_args

from lorescan.formats import TARGETS, FormatName, detect_format, load, load_data
from lorescan.formats.registry import BYTE_READERS, JSON_READERS, JSON_WRITERS, byte_reader


def _detectable() -> set[str]:
    # every string detect_format can return, read from its source
    def values(node: ast.AST | None) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            return values(node.body) | values(node.orelse)
        raise AssertionError(f"detect_format returns something other than a name: {ast.unparse(node)}")
    tree = ast.parse(inspect.getsource(detect_format))
    return set().union(*(values(n.value) for n in ast.walk(tree) if isinstance(n, ast.Return)))


def test_every_detected_json_format_has_a_reader():
    assert _detectable() - {"unknown"} == set(JSON_READERS)


def test_format_name_covers_every_format_read_or_written():
    names = set(get_args(FormatName))
    assert set(JSON_READERS) | set(JSON_WRITERS) <= names
    assert names == set(TARGETS), "every format lorescan reads can also be written"


def test_binary_containers_are_recognised_by_their_own_test():
    from lorescan.formats.charx import read_charx
    from lorescan.formats.png import make_png, read_png
    assert byte_reader(make_png()) is read_png
    assert byte_reader(b"PK\x03\x04rest") is read_charx
    assert byte_reader(b'{"entries": {}}') is None
    from lorescan.formats.janitor import read_script
    assert byte_reader(b"var dynamicLore = [];") is read_script
    assert byte_reader(b'["var dynamicLore = []"]') is None      # JSON is never read as a script
    assert len(BYTE_READERS) == 3


def test_a_json_book_reads_through_the_registry():
    book = load_data({"entries": {"0": {"uid": 0, "key": ["fog"], "content": "Fog rolls in."}}}, source="t.json")
    assert book.format == "sillytavern" and list(book.entries[0].key) == ["fog"]
    assert load(b'[{"keys": ["fog"], "content": "x"}]').format == "entry_list"
