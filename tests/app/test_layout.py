"""The app's modules keep to their side: no build orchestration, no timer or thread pinning of their own."""

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


def test_no_app_module_imports_the_precompute_orchestrator():
    offenders = [
        name
        for name, tree in app_modules().items()
        if any(m == "budgetformer_core.precompute" or m.startswith("budgetformer_core.precompute.")
               for m in imported_modules(tree))
    ]
    assert offenders == []


def test_the_app_pins_no_threads_itself():
    # one timer and one thread pin, the engine's (budgetformer_core.timing)
    calls = {
        name
        for name, tree in app_modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "set_num_threads"
    }
    assert calls == set()


def test_the_check_sees_an_import_of_precompute():
    tree = ast.parse("from budgetformer_core import precompute\nimport budgetformer_core.precompute as p\n")
    assert "budgetformer_core.precompute" in imported_modules(tree)


def test_pages_have_no_stray_strings():
    """Streamlit draws a bare string statement on the page ("magic"): a page file may hold its
    module docstring and nothing else of the kind."""
    for path in sorted((APP / "views").glob("*.py")):
        tree = ast.parse(path.read_text())
        strays = [node.lineno for node in tree.body  # module level: function docstrings are not drawn
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str) and node is not tree.body[0]]
        assert not strays, f"{path.name}: a bare string at line(s) {strays} would be drawn on the page"
