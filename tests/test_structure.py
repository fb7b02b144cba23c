"""The rooms hold: the engine and the app import each other's modules without a circle, the engine
never imports the app or streamlit, and the engine is a few named packages with little loose at
its top, whose packages do not import each other in a circle either.

Every import counts, wherever it stands (inside functions and ``TYPE_CHECKING`` blocks too):
each names a module the reader needs in order to follow the importer.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE, APP = "budgetformer_core", "app"
MIN_ENGINE_PACKAGES = 4
MAX_ENGINE_TOP_MODULES = 8
"""Modules loose at the engine's top (``budgetformer_core/*.py``, ``__init__.py`` included)."""


def module_name(path: Path) -> str:
    """``budgetformer_core/train/loop.py`` → ``budgetformer_core.train.loop``; a package's
    ``__init__.py`` is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(*folders: str) -> dict[str, Path]:
    """Module name → file, for every .py under ``folders``."""
    return {module_name(p): p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))}


def imported(source: str, name: str, is_package: bool, modules: Collection[str] = ()) -> set[str]:
    """Every module name ``source`` (the text of module ``name``) imports, relative imports
    resolved: ``from m import x`` names ``m.x`` when that is one of ``modules``, else ``m``."""
    package = name if is_package else name.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            origin = node.module or ""
            if node.level:  # one dot: this package; each further dot: one package up
                parts = package.split(".")
                origin = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names.update(f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of ``modules`` it imports."""
    return {
        name: {n for n in imported(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", modules)
               if n in modules} - {name}
        for name, path in modules.items()
    }


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of ``graph`` as the nodes along it, the first repeated at the end
    (``[a, b, a]``); None when it has none."""
    state: dict[str, str] = {}  # "open" while on the path, "done" once every node it reaches is
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (circle := visit(nxt)):
                return circle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (circle := visit(node)):
            return circle
    return None


def room(module: str) -> str:
    """The engine's room of ``module``: its sub-package (``budgetformer_core.train``), or the
    module itself when it is loose at the top."""
    parts = module.split(".")
    package = ".".join(parts[:2])
    return package if (ROOT / Path(*parts[:2])).is_dir() else module


# --------------------------------------------------------------------------- the checks' own checks

def test_find_circle_finds_a_circle_and_only_one_that_is_there():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert find_circle(graph) == ["a", "b", "c", "a"]
    graph["c"] = {"d"}
    assert find_circle(graph) is None
    assert find_circle({"x": {"x"}}) == ["x", "x"]
    assert find_circle({"p": {"q"}, "q": {"r"}, "r": {"q"}}) == ["q", "r", "q"]  # reached, not started, from p


def test_imports_are_resolved_wherever_they_stand():
    source = (
        "from . import distributed\nfrom .build import warm_start\nfrom ..io import data\n"
        "import numpy\nif TYPE_CHECKING:\n    from ..model.encoder import BudgetFormer\n"
        "def f():\n    from ..analysis.infer import evaluate\n"
    )
    engine = sources(ENGINE)
    found = imported(source, "budgetformer_core.train.loop", False, engine)
    assert found == {"budgetformer_core.train.distributed", "budgetformer_core.train.build",
                     "budgetformer_core.io.data", "numpy", "budgetformer_core.model.encoder",
                     "budgetformer_core.analysis.infer"}
    assert imported("from . import data\n", "budgetformer_core.io", True) == {"budgetformer_core.io"}
    assert imported("from .. import config\n", "budgetformer_core.io.hub", False, engine) == {
        "budgetformer_core.config"}
    graph = import_graph(engine)
    assert {"budgetformer_core.train.build", "budgetformer_core.train.distributed"} <= graph[
        "budgetformer_core.train.loop"]
    assert room("budgetformer_core.train.loop") == "budgetformer_core.train"
    assert room("budgetformer_core.cli") == "budgetformer_core.cli"


# --------------------------------------------------------------------------- the rooms

def test_the_import_graph_has_no_circle():
    graph = import_graph(sources(ENGINE, APP))
    assert len(graph) > 50 and sum(map(len, graph.values())) > len(graph)  # it did read the imports
    circle = find_circle(graph)
    assert circle is None, "modules that import each other in a circle: " + " → ".join(circle)


def test_the_engine_never_imports_the_app_or_streamlit():
    wrong = {}
    for name, path in sources(ENGINE).items():
        found = imported(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        if bad := sorted(n for n in found if n.split(".")[0] in (APP, "streamlit")):
            wrong[name] = bad
    assert not wrong, f"engine modules that import the app or streamlit: {wrong}"


def test_the_engine_is_a_few_named_packages_with_little_loose_at_its_top():
    top = ROOT / ENGINE
    packages = sorted(p.name for p in top.iterdir() if (p / "__init__.py").is_file())
    loose = sorted(p.name for p in top.glob("*.py"))
    assert len(packages) >= MIN_ENGINE_PACKAGES, f"the engine's sub-packages: {packages}"
    assert len(loose) <= MAX_ENGINE_TOP_MODULES, f"{len(loose)} modules loose at the engine's top: {loose}"


def test_the_engines_packages_import_each_other_without_a_circle():
    rooms: dict[str, set[str]] = {}
    for module, imports in import_graph(sources(ENGINE)).items():
        rooms.setdefault(room(module), set()).update(room(m) for m in imports)
    rooms = {r: targets - {r} for r, targets in rooms.items()}
    assert sum(map(len, rooms.values())) >= len(rooms)  # the rooms do import each other
    circle = find_circle(rooms)
    assert circle is None, "engine packages that import each other in a circle: " + " → ".join(circle)
