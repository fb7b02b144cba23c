"""The scripts under scripts/ import only names the project still has (their imports inside
functions too, which running ``--help`` does not reach)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("app", "budgetformer_core", "rebuild")


def imported_names(source: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from <project module> import name`` anywhere in the source."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT
            for alias in node.names]


def test_every_scripts_project_import_resolves():
    missing = []
    for path in sorted((ROOT / "scripts").glob("*.py")):
        for module, name in imported_names(path.read_text(encoding="utf-8")):
            owner = importlib.import_module(module)
            if not hasattr(owner, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path.name}: from {module} import {name}")
    assert not missing, missing


def test_the_check_sees_a_name_inside_a_function():
    source = "def main():\n    from app.state import no_such_name\n"
    assert imported_names(source) == [("app.state", "no_such_name")]
