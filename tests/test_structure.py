"""The package's shape, checked: no import cycle, layers respected, modules and functions
of a readable size, and operations asked of the registry rather than compared by name.

Each check reads the source with ``ast``; ``test_the_checks_see_what_they_check`` feeds
them small made-up modules, so a check that could never fail would fail there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "xbackend"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# Functions that are data tables (one entry a line), exempt from the length limit.
DATA_TABLES: set[str] = set()
# Where operation names may be compared: the registry itself.
REGISTRY = {"xbackend.operations"}
# The layers of docs/architecture.md, bottom up: a module imports only from its own room
# or one listed before it (annotations and imports inside functions counted). A room is a
# package of xbackend, or a foundation module at its top; the front (the face, the pytest
# plugin, the command line) is last.
LAYERS = (
    # foundations: the package's top, nothing of xbackend's above them
    "xbackend.version",
    "xbackend.errors",
    "xbackend.safeio",
    "xbackend.resources",
    "xbackend.machine",
    "xbackend.operations",
    "xbackend.problems",
    # how a point is sampled and timed: no device, no run
    "xbackend.measuring",
    # kernel families are data: the manifests and sources
    "xbackend.families",
    # a variant becomes a product (a device's record, its launches), without a runtime
    "xbackend.launches",
    # the runtimes, the vendors' libraries, a device's ceilings
    "xbackend.backends",
    "xbackend.tuning",
    "xbackend.results",
    # running a plan: configurations, points, the sweep; then runs profiled, or spread
    "xbackend.sweep",
    "xbackend.profiling",
    "xbackend.cluster",
    # reading records: diff, floors, tables; then drawing them; then the report
    "xbackend.analysis",
    "xbackend.figures",
    "xbackend.report",
    "xbackend.grading",
    # the front
    "xbackend",
    "xbackend.pytest_plugin",
    "xbackend.conformance",
    "xbackend.cli",
    "xbackend.__main__",
)
# Inside a layer, a module that must stay below its neighbours.
ALSO_NOT = {
    # A wrong result's diagnosis is arithmetic on arrays: it knows no kernel, device or run.
    "xbackend.grading.diagnosis": ("xbackend.families", "xbackend.launches", "xbackend.grading"),
}
_OP_COMPARISON = re.compile(
    r"""(==|!=)\s*["'](mm|bmm|rmm)["']|["'](mm|bmm|rmm)["']\s*(==|!=)"""
    r"""|\bin\s*[(\[{]\s*["'](mm|bmm|rmm)["']"""
)


def _modules(root: Path = PACKAGE) -> dict[str, Path]:
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name, *path.relative_to(root).with_suffix("").parts)
        name = ".".join(parts).removesuffix(".__init__")
        modules[name] = path
    return modules


def _type_checking_imports(tree: ast.AST) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (no import at run time)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {sub.lineno for sub in ast.walk(node) if isinstance(sub, ast.ImportFrom)}
    return lines


def imports(modules: dict[str, Path], typing: bool = False) -> dict[str, set[str]]:
    """Which package modules each module imports at run time (anywhere: at the top, in a
    function); ``typing``: those it imports for its annotations only (under
    ``TYPE_CHECKING``) too."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set() if typing else _type_checking_imports(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.lineno not in skipped:
                base = node.module or ""
                if node.level:
                    package = name.split(".")
                    if path.name != "__init__.py":
                        package = package[:-1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join([*package, *filter(None, [node.module])])
                found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each once, found by a depth-first search from each module.

    A package's ``__init__`` re-exporting its modules is not counted: importing
    ``xbackend.x`` runs ``xbackend/__init__`` first whatever it imports.
    """
    packages = {name for name in graph if (PACKAGE.parent / name.replace(".", "/")).is_dir()}
    found: set[tuple[str, ...]] = set()

    def visit(start: str, node: str, path: list[str]) -> None:
        for target in graph[node] - packages:
            if target == start:
                rotation = path.index(min(path))
                found.add(tuple(path[rotation:] + path[:rotation]))
            elif target not in path and len(path) < 8:
                visit(start, target, [*path, target])

    for name in graph:
        if name not in packages:
            visit(name, name, [name])
    return [list(cycle) for cycle in sorted(found)]


def room(name: str) -> int:
    """The place in ``LAYERS`` of a module's room (-1: a module of no room, a loose one)."""
    places = [i for i, room in enumerate(LAYERS) if name == room or name.startswith(room + ".")]
    exact = [i for i in places if LAYERS[i] == name]
    if exact:
        return exact[0]
    rooms = [i for i in places if LAYERS[i] != "xbackend"]
    return max(rooms, default=-1)


def layer_breaches(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a room listed after the importer's, and of ``ALSO_NOT``'s."""
    breaches = []
    for name, targets in sorted(graph.items()):
        below = ALSO_NOT.get(name, ())
        for target in sorted(targets):
            if target == "xbackend" or (name.startswith(target + ".") and target in LAYERS):
                continue  # a package's own face, run first whatever it imports
            upward = room(target) > room(name)
            if upward or any(target == no or target.startswith(no + ".") for no in below):
                breaches.append(f"{name} imports {target}")
    return breaches


def loose_modules(modules: dict[str, Path]) -> list[str]:
    """Modules that no room of ``LAYERS`` holds."""
    return sorted(name for name in modules if room(name) < 0)


def long_functions(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                qualified = f"{name}.{node.name}"
                if length > MAX_FUNCTION_LINES and qualified not in DATA_TABLES:
                    found.append(f"{qualified}: {length} lines")
    return found


def op_comparisons(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        if name in REGISTRY:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _OP_COMPARISON.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_no_import_cycle():
    # A circle through an annotation is one too: the two modules cannot be read apart.
    assert cycles(imports(_modules(), typing=True)) == []


def test_no_lower_layer_imports_a_higher_one():
    # An annotation's import counts: a reader of the lower module must know the higher one.
    assert layer_breaches(imports(_modules(), typing=True)) == []


def test_every_module_has_a_room():
    assert loose_modules(_modules()) == []


def test_no_module_over_500_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_over_60_lines():
    assert long_functions(_modules()) == []


def test_operations_are_asked_not_compared_by_name():
    assert op_comparisons(_modules()) == []


def test_the_checks_see_what_they_check(tmp_path):
    root = tmp_path / "xbackend"
    (root / "backends").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "backends" / "__init__.py").write_text("")
    (root / "a.py").write_text("from xbackend import b\n")
    (root / "b.py").write_text("import xbackend.a\nif op == 'rmm':\n    pass\n")
    (root / "tuning.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (root / "backends" / "plugin.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from xbackend import a\n"
        f"from xbackend import tuning\n\ndef long():\n{body}"
    )
    modules = _modules(root)
    graph = imports(modules)
    assert cycles(graph) == [["xbackend.a", "xbackend.b"]]
    assert layer_breaches(graph) == ["xbackend.backends.plugin imports xbackend.tuning"]
    assert loose_modules(modules) == ["xbackend.a", "xbackend.b"]  # tuning is a room
    assert "xbackend.a" not in graph["xbackend.backends.plugin"]  # TYPE_CHECKING only
    (root / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import xbackend.c\n"
    )
    (root / "c.py").write_text("def f():\n    from xbackend import a\n")
    circle = imports(_modules(root), typing=True)
    assert ["xbackend.a", "xbackend.c"] in cycles(circle)  # in an annotation, in a function
    assert long_functions(modules) == [
        f"xbackend.backends.plugin.long: {MAX_FUNCTION_LINES + 1} lines"
    ]
    assert op_comparisons(modules) == ["xbackend.b:2: if op == 'rmm':"]


def test_every_package_ships():
    """Every folder of the package is listed in pyproject.toml's packages: a wheel built
    from it has every module (a missing one passes every test run from the checkout)."""
    import tomllib

    with open(PACKAGE.parent / "pyproject.toml", "rb") as file:
        listed = set(tomllib.load(file)["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("xbackend", *init.parent.relative_to(PACKAGE).parts))
        for init in PACKAGE.rglob("__init__.py")
    }
    assert found - listed == set()


# The tuned family's configuration is its geometry's business alone (launches/geometry.py):
# the backends, the tuner and the cache hand it parameters (names and ints), as the
# records keep them, and ask the geometry.
WARP_CONFIG_KNOWN_BY = {
    "xbackend/launches/warp.py",
    "xbackend/launches/block_tiles.py",
}


def test_warp_config_is_known_only_by_its_geometry():
    named = {
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\bWarpConfig\b", path.read_text())
    }
    assert named - WARP_CONFIG_KNOWN_BY == set()
    assert "xbackend/launches/block_tiles.py" in named  # the check sees the files it checks


def test_the_modules_page_lists_every_module():
    """docs/modules.md is the map's index: every module of the package is on it, and it
    names none that is gone."""
    page = (PACKAGE.parent / "docs" / "modules.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", page, re.MULTILINE))
    present = {str(path.relative_to(PACKAGE)) for path in _modules().values()}
    assert (present - listed, listed - present) == (set(), set())
