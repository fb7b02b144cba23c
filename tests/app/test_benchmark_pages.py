"""The seeds' benchmarks in the app: their models are listed, SNLI's opens Explore with two boxes
(premise and hypothesis) and every page renders on it, without its texts on this machine (the
pages that need them say so, from the shipped per-example tables where those serve)."""

from __future__ import annotations

import pytest

from app.models import available_models, dataset_of
from budgetformer_core.analysis.infer import analyze
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.shipped import checkpoint_dir

from .apptest import VIEWS, all_markdown, metric, open_page, run, start

SNLI = "snli-minilm-budgetformer"
pytestmark = pytest.mark.skipif(SNLI not in available_models(), reason="the benchmarks are not shipped")


def test_the_benchmarks_models_are_listed_by_dataset():
    for ds in ("dbpedia", "sst2", "snli"):
        for method in ("dense", "bba", "budgetformer"):
            assert f"{ds}-minilm-{method}" in available_models()
            assert dataset_of(f"{ds}-minilm-{method}") == ds  # the name the models' names and results use


def test_snli_opens_explore_with_two_boxes_and_every_page_renders():
    at = start(SNLI)
    first, second = at.text_area(key="text"), at.text_area(key="text_pair")
    assert (first.label, second.label) == ("premise (first text)", "hypothesis (second text)")
    pair = ("A man plays a guitar on stage.", "A man is playing music.")
    first.input(pair[0])
    second.input(pair[1])
    run(at)
    [expected] = analyze(load_checkpoint(checkpoint_dir(SNLI)), [pair])
    assert metric(at, "Prediction") == expected.label
    assert metric(at, "Heads run") == " / ".join(map(str, expected.k))
    assert any("marked ²" in m for m in all_markdown(at))  # the hypothesis's tokens are marked
    for view in VIEWS:
        if view.stem != "explore":
            open_page(at, view.stem)  # no exception on any page
