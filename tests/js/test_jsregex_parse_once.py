"""The one-parse ``lorescan.js.regex`` package against the module it replaced.

The old module (``src/lorescan/js/regex.py`` and ``js/linear.py`` at :data:`OLD_COMMIT`, the
last commit before the package) is read from git history and run in a subprocess; for every
regex key of the corpus books, of the conformance vectors and of the V8 fixture, the new code
must give the same translation, line-locality, hazard, expansion count, required and leading
literals, RE2 plan (its RE2 pattern or the reason it has none, and the cost bound), and the same verdict (valid, or JSRegexError). Nothing here is a golden
file: both sides are computed in the run. Skips visibly where git or that commit is absent.
"""
from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lorescan.js.regex import JSRegexError, RegexTooComplex, leading_literals, required_literals
from lorescan.js.regex import _compile_js_regex as compile_js_regex   # new RegExp(pattern, flags), memoised
from lorescan.js.regex import _split_regex_key                       # a key's shape alone
from lorescan.js.regex import linear
from lorescan.js.regex.compiled import _translation
from lorescan.js.regex.parser import parse
from tests.conftest import CONFORMANCE_ST, ROOT, SHARED, need_shared

OLD_COMMIT = "8f162c573b4290392cf8e7029563194ec3a013a0"
_OLD_FILES = ("__init__.py", "regex.py", "linear.py", "_casetables.py")

# Run by the old module: reads [[pattern, flags], ...] on stdin, writes one fact list per pair.
_OLD_RUNNER = r"""
import json, sys
sys.setrecursionlimit(10000)
from oldjs import regex as R, linear as L
out = []
for pattern, flags in json.load(sys.stdin):
    try:
        translated, line_local, hazard, units = R._translation(pattern, flags, None)
    except R.JSRegexError:
        out.append(["invalid"])
        continue
    plan = L.Plan(translated[0], "u" in flags, "y" in flags)
    try:
        re2 = L._Emitter("u" in flags).emit(L._Parser(translated[0]).parse())
    except L._NotLinear as exc:
        re2 = str(exc)
    out.append([list(translated), line_local, hazard, units, R.required_literals(pattern, flags),
                R.leading_literals(pattern, flags),
                [plan.reason, plan.program, plan.leaves, plan.nodes, plan.unbounded, re2]])
json.dump(out, sys.stdout)
"""


def _regex_keys_in(value, found: set[tuple[str, str]]) -> None:
    if isinstance(value, str):
        split = _split_regex_key(value)
        if split is not None:
            found.add(split)
    elif isinstance(value, dict):
        for v in value.values():
            _regex_keys_in(v, found)
    elif isinstance(value, list):
        for v in value:
            _regex_keys_in(v, found)


def _keys_of(files) -> list[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in files:
        _regex_keys_in(json.loads(Path(path).read_text("utf-8")), found)
    return sorted(found)


def _v8_pairs() -> list[tuple[str, str]]:
    data = json.loads((ROOT / "tests" / "data" / "jsregex" / "v8_cases.json").read_text("utf-8"))
    pairs = {(c["pattern"], c["flags"]) for c in data["cases"] if "v" not in c["flags"]}
    pairs |= {tuple(c["parsed"]) for c in data["keys"] if c["parsed"]}
    return sorted(pairs)


def _old_facts(pairs: list[tuple[str, str]], tmp: Path) -> list:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the old module cannot be read from history")
    probe = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{OLD_COMMIT}^{{commit}}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"commit {OLD_COMMIT[:12]} (the old js/regex.py) is not in this checkout's history")
    package = tmp / "oldjs"
    package.mkdir()
    for name in _OLD_FILES:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:src/lorescan/js/{name}"],
                              capture_output=True, check=True).stdout
        (package / name).write_bytes(text)
    run = subprocess.run([sys.executable, "-c", _OLD_RUNNER], input=json.dumps(pairs), capture_output=True,
                         text=True, cwd=tmp, env={"PYTHONPATH": str(tmp), "PATH": ""}, check=True)
    return json.loads(run.stdout)


_PAIR = re.compile(r"\(\?:(\\x\{(?:4b|53)\})\|(\\x\{(?:6b|73)\})\)")


def _pairs_respelt(old: list, new: list) -> bool:
    """The one intended change: inside an alternation an S/s or K/k pair is spelt for RE2 as two
    literals, which RE2 does not widen to U+017F / U+212A as it widened the old class spelling
    (V8 does not match them): the RE2 pattern differs only there, its program is no larger."""
    if len(old) != 7 or len(new) != 7 or old[:6] != new[:6] or not isinstance(new[6][5], str):
        return False
    o, n = old[6], new[6]
    respelt = _PAIR.sub(lambda m: f"[{m[1]}{m[2]}]", n[5])
    return respelt != n[5] and respelt == o[5] and n[1] <= o[1] and n[0] == o[0] and n[2:5] == o[2:5]


def _new_facts(pattern: str, flags: str) -> list:
    try:
        translated, line_local, hazard, units = _translation(pattern, flags, None)
    except JSRegexError:
        return ["invalid"]
    plan = linear.Plan(parse(pattern, flags))
    try:
        re2 = linear._Emitter("u" in flags).emit(linear._Lowering(parse(pattern, flags)).top())
    except linear._NotLinear as exc:
        re2 = str(exc)
    facts = [list(translated), line_local, hazard, units, required_literals(pattern, flags),
             leading_literals(pattern, flags),
             [plan.reason, plan.program, plan.leaves, plan.nodes, plan.unbounded, re2]]
    return json.loads(json.dumps(facts))             # tuples as lists, as the old side's JSON has them


# Where the old literal scan and JS disagreed: it read an escape as its longest reading, so the
# characters JS reads after a short Annex B escape were lost to it (or, for \c1, half kept).
# The tree reads them as JS does, so their required literals are now found (the V8 soundness
# test of the prefilter covers these cases): (pattern, flags) -> (required, leading) now.
_ANNEX_B_ESCAPES = {
    ("\\0123", ""): (["3"], None),       # \012 (octal: U+000A), then "3"
    ("\\08", ""): (["8"], None),         # \0, then "8"
    ("\\400", ""): (["0"], None),        # \40 (octal: " ", at most 0o377), then "0"
    ("\\c", ""): (["c"], None),          # "\\" then "c": no control letter
    ("\\c1", ""): (["c1"], None),        # "\\" then "c1"
    ("\\k<n>", ""): (["<n>"], None),     # no group names: "k<n>"
    ("\\p{Lu}", "i"): (["{lu}"], None),  # without u: "p{Lu}"
    ("\\p{L}", ""): (["{L}"], None),     # without u: "p{L}"
    ("\\u004", ""): (["004"], None),     # not four hex digits: "u004"
    ("\\x4", ""): (["4"], None),         # not two hex digits: "x4"
}


def _differences(pairs: list[tuple[str, str]], tmp: Path) -> list:
    old = _old_facts(pairs, tmp)
    assert len(old) == len(pairs)
    out = []
    for (pattern, flags), o in zip(pairs, old):
        n = _new_facts(pattern, flags)
        if n == o or _pairs_respelt(o, n):
            continue
        if (pattern, flags) in _ANNEX_B_ESCAPES and o[4] in (None, ["1"]) and n[:4] + n[6:] == o[:4] + o[6:] \
                and (n[4], n[5]) == _ANNEX_B_ESCAPES[pattern, flags]:
            continue
        out.append((pattern, flags, o, n))
    return out


def test_every_regex_key_of_the_corpus_books_is_read_as_before(tmp_path):
    need_shared("corpus/books")
    pairs = _keys_of(sorted((SHARED / "corpus").rglob("*.json")))
    assert len(pairs) >= 100                         # the corpus has a few hundred regex keys
    assert _differences(pairs, tmp_path) == []


def test_every_regex_key_of_the_conformance_vectors_is_read_as_before(tmp_path):
    files = sorted(CONFORMANCE_ST.rglob("*.json"))
    if (SHARED / "conformance").is_dir():
        files += sorted((SHARED / "conformance").rglob("*.json"))
    pairs = _keys_of(files)
    assert pairs
    assert _differences(pairs, tmp_path) == []


def test_every_v8_fixture_pattern_is_read_as_before(tmp_path):
    pairs = _v8_pairs()
    assert len(pairs) >= 400
    assert _differences(pairs, tmp_path) == []


def test_the_tree_nesting_limit_counts_what_the_old_scanner_counted():
    # the parser keeps no recursion, so any depth parses, and the depth is its fact
    deep = "(" * 300 + "a" + ")" * 300
    with pytest.raises(RegexTooComplex, match="nested 300 deep, more than the limit max_regex_nesting=64"):
        _translation(deep, "", None, 64)
    assert compile_js_regex("[(](?:(a)|\\()", "").search("(a")      # class and escaped parens do not nest
    with pytest.raises(RegexTooComplex, match="nested 2 deep"):
        _translation("[(](?:(a)|\\()", "", None, 1)


_PIECES = list("ab()[]|*+?{}12,^$.-") + [
    "\\", "(?:", "(?=", "(?!", "(?<=", "(?<!", "(?<n>", "\\k<n>", "\\b", "\\B", "\\d", "\\w", "\\s", "\\1", "\\2",
    "\\u0041", "\\x41", "\\c", "\\0", "{2}", "{1,3}", "{2,}", "\\p{L}", "[^a]", "[a-c]", "\\n", "é", "K", "😀", "ſ"]
_SHORT_ESCAPE = re.compile(r"\\[ckpPxu0-9]")     # an escape Annex B may read shorter than the old scan did


def test_random_patterns_are_read_as_before(tmp_path):
    # syntax soup (mostly invalid, a quarter valid): the verdict and every fact agree, except
    # required literals found after a short Annex B escape (see _ANNEX_B_ESCAPES)
    rng = random.Random(19)
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < 2000:
        pattern = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 10)))
        pairs.add((pattern, rng.choice(["", "i", "u", "iu", "m", "s", "y", "im"])))
    ordered = sorted(pairs)
    old = _old_facts(ordered, tmp_path)
    assert sum(o != ["invalid"] for o in old) >= 300
    differ = []
    for (pattern, flags), o in zip(ordered, old):
        n = _new_facts(pattern, flags)
        if n == o or _pairs_respelt(o, n) or (len(n) == len(o) and n[:4] + n[5:] == o[:4] + o[5:] and "u" not in flags
                      and _SHORT_ESCAPE.search(pattern)):
            continue
        differ.append((pattern, flags, o, n))
    assert differ == []


def test_every_memo_of_the_package_is_reachable_from_its_namespace():
    # benchmarks empty every cache found in vars(lorescan.js.regex) to measure a cold worker
    import importlib
    import pkgutil

    import lorescan.js.regex as package
    reachable = {id(v) for v in vars(package).values() if callable(getattr(v, "cache_clear", None))}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        memos = [name for name, v in vars(module).items() if callable(getattr(v, "cache_clear", None))
                 and getattr(v, "__module__", None) == module.__name__]
        assert all(id(getattr(module, name)) in reachable for name in memos), (module.__name__, memos)
