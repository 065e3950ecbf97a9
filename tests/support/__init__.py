"""Helpers shared by the tests and the benchmarks (importable as ``tests.support``).

pyproject's ``[tool.pytest.ini_options] pythonpath = ["."]`` puts the repository root on
the path, so ``from tests.support.reference_matcher import ReferenceScanView`` works from
``tests/`` and ``benchmarks/`` alike, with no ``sys.path`` edits.
"""
