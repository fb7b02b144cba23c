"""The models fine-tuned from a pretrained encoder are judged against that encoder's dense model:
the standing in the model picker, the reference of Easy vs hard, the sweep page's companions."""

from __future__ import annotations

import pandas as pd

from app.logic.results import backbone_of, own_point, same_backbone, specialist_rows, sweep_curve
from app.logic.standing import standing
from budgetformer_core.shipped import dense_reference


def cfg(variant: str, accuracy: float, dataset: str = "bbc") -> dict:
    return {"dataset": dataset, "model": {"variant": variant}, "test": {"accuracy": accuracy}}


def test_each_model_has_the_dense_model_of_its_own_encoder():
    assert dense_reference("bbc", "bbc-minilm-budgetformer", full=True) == "bbc-minilm-dense"
    assert dense_reference("ag_news", "ag_news-minilm-bba", full=True) == "ag_news-minilm-dense"
    assert dense_reference("bbc", "bbc-budgetformer", full=True) == "bbc-dense"
    assert dense_reference("bbc", "bbc-dense-1head", full=True) == "bbc-dense"
    assert dense_reference("bbc", "minilm-bba") == "minilm-dense"  # sweeps.csv's names
    assert backbone_of("minilm-bba") == "minilm-" and backbone_of("bba") == ""


def test_a_fine_tuned_dense_model_is_a_reference_not_a_smaller_dense_model():
    assert standing("bbc-minilm-dense", cfg("dense", 0.9695), 0.9695).kind == "reference"
    assert standing("bbc-dense-1head", cfg("dense", 0.6), 0.97).kind == "expected"
    assert standing("bbc-minilm-budgetformer", cfg("budgetformer", 0.9648), 0.9695).kind == "fine"
    flagged = standing("bbc-minilm-budgetformer", cfg("budgetformer", 0.90), 0.9695)
    assert flagged.kind == "flagged" and "97.0%" in flagged.note


def test_the_sweep_of_a_fine_tuned_model_meets_its_own_encoders_baselines():
    rows = pd.DataFrame({
        "model": ["dense", "bba", "bba", "static-0.5", "posthoc",
                  "minilm-dense", "minilm-bba", "minilm-bba", "minilm-static-0.5", "minilm-posthoc"],
        "budget": ["own", "own", "0.5", "0.5", "0.5", "own", "own", "0.5", "0.5", "0.5"],
        "accuracy": [0.89, 0.88, 0.87, 0.86, 0.85, 0.92, 0.91, 0.914, 0.913, 0.90],
    })  # fmt: skip
    rows["b"] = pd.to_numeric(rows["budget"].where(rows["budget"] != "own"), errors="coerce")
    mine = same_backbone(rows, "minilm-bba")
    assert own_point(mine, "dense")["accuracy"] == 0.92
    assert sweep_curve(mine, "bba")["accuracy"].tolist() == [0.914]
    assert specialist_rows(mine, "static-")["accuracy"].tolist() == [0.913]
    assert sweep_curve(mine, "posthoc")["accuracy"].tolist() == [0.90]
    scratch = same_backbone(rows, "bba")
    assert sorted(scratch["model"]) == ["bba", "bba", "dense", "posthoc", "static-0.5"]
    assert own_point(scratch, "dense")["accuracy"] == 0.89
