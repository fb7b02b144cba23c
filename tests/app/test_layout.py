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
