"""The command line users expect: shipped models by name, `budgetformer models`, help on every
option, `--version`."""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil

import pytest

from budgetformer_core import __version__
from budgetformer_core.cli import main
from budgetformer_core.cli.parser import build_parser
from budgetformer_core.shipped import PRECOMPUTED, resolve_checkpoint, shipped_models

from ..conftest import ROOT

MANIFEST = PRECOMPUTED / "manifest.json"
needs_shipped = pytest.mark.skipif(not MANIFEST.is_file(), reason="no precomputed/manifest.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@needs_shipped
def test_a_shipped_model_opens_by_name_from_any_folder(capsys, tmp_path, monkeypatch):
    text = "Shares rose after record profits"
    by_path = run(capsys, "predict", "--checkpoint", str(PRECOMPUTED / "checkpoints" / "bbc-budgetformer"), "--json",
                  text)
    monkeypatch.chdir(tmp_path)  # nothing called bbc-budgetformer here
    by_name = run(capsys, "predict", "--checkpoint", "bbc-budgetformer", "--json", text)
    assert by_name[0] == by_path[0] == 0
    assert json.loads(by_name[1]) == json.loads(by_path[1])
    assert json.loads(by_name[1])["label"] in {"business", "entertainment", "politics", "sports", "tech"}


@needs_shipped
def test_an_existing_folder_wins_over_a_shipped_name(capsys, tmp_path, monkeypatch, tiny_checkpoint):
    shutil.copytree(tiny_checkpoint, tmp_path / "bbc-budgetformer")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "predict", "--checkpoint", "bbc-budgetformer", "--json", "w1 m0 a")
    assert code == 0
    assert json.loads(out)["label"] not in {"business", "entertainment", "politics", "sports", "tech"}
    assert resolve_checkpoint("bbc-budgetformer") == "bbc-budgetformer"


@needs_shipped
def test_a_name_that_is_neither_gives_one_line_listing_the_names(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["predict", "--checkpoint", "bbc-budgetformr", "hi"],
                 ["eval", "--checkpoint", "../bbc-budgetformer", "--json"],
                 ["adaptivity", "--checkpoint", "bbc-budgetformer", "--reference", "nope"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert "is not a directory nor a shipped model" in err
        assert all(name in err for name in shipped_models())


@needs_shipped
def test_models_lists_every_shipped_model_with_its_figures(capsys):
    runs = json.loads(MANIFEST.read_text())["runs"]
    with (PRECOMPUTED / "results" / "sweeps.csv").open(newline="") as f:
        own = {f"{r['dataset']}-{r['model']}": r for r in csv.DictReader(f) if r["budget"] == "own"}
    code, out, _ = run(capsys, "models", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == sorted(runs)
    for r in rows:
        assert r["accuracy"] == pytest.approx(runs[r["name"]]["test_accuracy"])
        assert r["heads_run"] == pytest.approx(float(own[r["name"]]["heads_fraction"]))
        assert r["dataset"] == own[r["name"]]["dataset"] and r["method"].startswith(own[r["name"]]["variant"])
    by_name = {r["name"]: r for r in rows}
    assert by_name["bbc-dense"]["heads_run"] == 1.0 and by_name["bbc-dense"]["method"] == "dense"
    assert by_name["bbc-no-budget-net"]["method"] == "budgetformer (no f_θ)"

    code, out, _ = run(capsys, "models")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["name", "dataset", "method", "accuracy", "heads", "run"]
    assert len(lines) == len(runs) + 1
    bbc = next(line for line in lines if line.startswith("bbc-budgetformer "))
    assert bbc.split()[1] == "bbc" and f"{runs['bbc-budgetformer']['test_accuracy']:.1%}" in bbc


def _parsers(parser: argparse.ArgumentParser, name: str = "budgetformer"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_has_a_help_line_without_source_markup():
    parsers = list(_parsers(build_parser()))
    assert {"budgetformer models", "budgetformer train", "budgetformer eval"} <= {n for n, _ in parsers}
    for name, parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help, f"{name} {'/'.join(action.option_strings) or action.dest} has no help line"
        text = parser.format_help()
        for markup in ("``", "SPEC", "README", "§", ":func:", ":class:"):
            assert markup not in text, f"{name} --help shows {markup!r}"


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"budgetformer {__version__}"
    assert re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1] == __version__
