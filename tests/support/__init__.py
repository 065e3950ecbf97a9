"""Helpers shared by the tests and the benchmarks (importable as ``tests.support``).

pyproject's ``[tool.pytest.ini_options] pythonpath = ["."]`` puts the repository root on
the path, so ``from tests.support.reference_matcher import ReferenceScanView`` works from
``tests/`` and ``benchmarks/`` alike, with no ``sys.path`` edits.
"""


def book_view(compiled, *args, **kw):
    """A ScanView over a compiled SillyTavern book as its engine makes one: the book's keys,
    and its entries' contents to check recursion chunks against."""
    from lorescan.match.view import ScanView     # not at import: some tests pick the backend first
    return ScanView(compiled.keys, *args, content_of=compiled.content_of, uid_of=compiled.uids.__getitem__, **kw)
