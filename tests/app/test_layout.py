"""The app's modules keep to their side: no build orchestration, no timer or thread pinning of their own
(and the engine imports no build orchestration either)."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"


def imported_modules(tree: ast.AST) -> set[str]:
    """Every module an AST imports, with ``from X import y`` counted as both X and X.y."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def app_modules() -> dict[str, ast.AST]:
    files = sorted(APP.rglob("*.py"))
    assert files, "no app modules found"
    return {f.relative_to(APP).as_posix(): ast.parse(f.read_text(encoding="utf-8")) for f in files}


REBUILD = "rebuild"
"""The package that rebuilds precomputed/ (recipes and orchestration): neither the app nor the engine uses it."""


def imports_the_rebuild(tree: ast.AST) -> bool:
    return any(m == REBUILD or m.startswith(f"{REBUILD}.") for m in imported_modules(tree))


def test_no_app_module_imports_the_rebuild_orchestrator():
    offenders = [name for name, tree in app_modules().items() if imports_the_rebuild(tree)]
    assert offenders == []


def test_no_engine_module_imports_the_rebuild_orchestrator():
    engine = APP.parent / "budgetformer_core"
    offenders = [p.name for p in sorted(engine.rglob("*.py")) if imports_the_rebuild(ast.parse(p.read_text("utf-8")))]
    assert offenders == []


def test_the_app_pins_no_threads_itself():
    # one timer and one thread pin, the engine's (budgetformer_core.measure.timing)
    calls = {
        name
        for name, tree in app_modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "set_num_threads"
    }
    assert calls == set()


def test_the_check_sees_an_import_of_the_rebuild():
    for source in ("from rebuild import recipes\n", "import rebuild.jobs as j\n",
                   "from rebuild.measure import retime\n", "import rebuild\n"):
        assert imports_the_rebuild(ast.parse(source)), source
    assert not imports_the_rebuild(ast.parse("from budgetformer_core import latency\nimport rebuilder\n"))


def test_pages_have_no_stray_strings():
    """Streamlit draws a bare string statement on the page ("magic"): a page file may hold its
    module docstring and nothing else of the kind."""
    for path in sorted((APP / "views").glob("*.py")):
        tree = ast.parse(path.read_text())
        strays = [node.lineno for node in tree.body  # module level: function docstrings are not drawn
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str) and node is not tree.body[0]]
        assert not strays, f"{path.name}: a bare string at line(s) {strays} would be drawn on the page"
