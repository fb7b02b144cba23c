"""The documentation: a short README for users, the pages under docs/, a results page that is
what scripts/results_page.py writes, a performance page whose live check is what
scripts/performance_page.py writes, and no run history anywhere a user reads."""

from __future__ import annotations

import importlib.util
import re

import pytest

from .conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"

HISTORY = re.compile(
    r"this round|measured again|on a faster day|notes for the next|next person|issue #|\bissues? \d+"
    r"|SPEC §|README[,:] \"|\(README\b|tried and dropped|tried on the way|shipped before|\(in progress\)",
    re.IGNORECASE,
)
"""Run history and citations of sources a user does not have: neither belongs in what users read."""


def user_facing_files():
    yield README
    yield from sorted(DOCS.glob("*.md"))
    for package in ("budgetformer_core", "app", "scripts"):
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_run_history_in_readme_docs_engine_or_app():
    found = [f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r}"
             for path in user_facing_files()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if (m := HISTORY.search(line))]
    assert not found, "history phrases:\n" + "\n".join(found)


def test_the_phrase_list_catches_what_it_should():
    for line in ("Run history of this round", "issue #13's bars", "issue 16 brings", "SPEC §6 asks",
                 "(README, \"Allocation that adapts\")", "Measured again later"):
        assert HISTORY.search(line), line
    for line in ("the issue of cost", "a test split of 426 issues", "SPECIAL_TOKENS", "tissue 3"):
        assert not HISTORY.search(line), line


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert text.index("make run") < text.index("##") and text.index("make test") < text.index("##")
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert {"method.md", "results.md", "performance.md", "cli.md", "pretrained.md", "reproduce.md"} <= set(pages)
    for source in (README, *DOCS.glob("*.md")):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", source.read_text(encoding="utf-8")):
            if not re.match(r"[a-z]+://", target):
                assert (source.parent / target).exists(), f"{source.name} links to {target}, which is not there"


def load_script(name: str):
    """scripts/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (ROOT / "precomputed" / "results" / "sweeps.csv").is_file(), reason="no shipped results")
def test_the_results_page_is_what_the_script_writes():
    results_page = load_script("results_page")
    assert (DOCS / "results.md").read_text(encoding="utf-8") == results_page.render(), (
        "docs/results.md is out of date: run python scripts/results_page.py")
    assert (DOCS / "pretrained.md").read_text(encoding="utf-8") == results_page.render_pretrained(), (
        "docs/pretrained.md's results are out of date: run python scripts/results_page.py")
    assert README.read_text(encoding="utf-8") == results_page.render_readme(), (
        "README.md's results table is out of date: run python scripts/results_page.py")


@pytest.mark.skipif(not (ROOT / "precomputed" / "results" / "sweeps.csv").is_file(), reason="no shipped results")
def test_the_readme_table_starts_with_the_model_the_app_opens_on():
    """The first row of README's results table is the app's default model, its BudgetFormer figures
    its config.json's (what the sidebar shows), and every shipped row's bba figures sweeps.csv's."""
    import json

    from app.models import DEFAULT_MODEL
    from budgetformer_core.shipped import checkpoint_dir

    table = README.read_text(encoding="utf-8").split(results_page_marker())[1]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    header, first = [c.strip() for c in rows[0].strip("|").split("|")], rows[1]  # the rule is no "| " row
    assert f"`{DEFAULT_MODEL}`" in first, first
    cells = dict(zip(header, [c.strip() for c in first.strip("|").split("|")], strict=True))
    test = json.loads((checkpoint_dir(DEFAULT_MODEL) / "config.json").read_text())["test"]
    assert cells["BudgetFormer"] == f"{test['accuracy'] * 100:.1f} %"
    assert cells["heads run"] == f"{test['mean_heads_fraction'] * 100:.1f} %"


def results_page_marker() -> str:
    """Where README's generated results table begins."""
    return load_script("results_page").README_BEGIN


@pytest.mark.artifacts
def test_the_live_latency_check_in_the_docs_is_current_and_agrees():
    """docs/performance.md shows the last ``budgetformer latency-check`` of bbc and AG News, made on
    today's sweeps.csv, every live batch-1 speed-up within 25 % of the shipped one."""
    import json

    import pandas as pd

    page = load_script("performance_page")
    assert (DOCS / "performance.md").read_text(encoding="utf-8") == page.render(), (
        "docs/performance.md is out of date: run python scripts/performance_page.py")
    check = json.loads(page.CHECK.read_text(encoding="utf-8"))
    rows = pd.DataFrame(check["rows"])
    assert {"bbc", "ag_news"} <= set(rows.dataset)
    sweeps = pd.read_csv(ROOT / "precomputed" / "results" / "sweeps.csv", dtype={"budget": str})
    shipped = rows.merge(sweeps, on=["dataset", "model", "budget"], suffixes=("", "_now"))
    assert len(shipped) == len(rows), "the check's rows are rows of sweeps.csv"
    for column in ("latency_ms", "speedup_b1"):  # a re-time asks for a new check
        assert shipped[column].to_numpy() == pytest.approx(shipped[f"{column}_now"].to_numpy()), column
    assert ((rows.ratio - 1).abs() <= check["tolerance"]).all() and rows.agrees.all()
