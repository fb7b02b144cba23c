"""How a model's test accuracy stands against its dense model (app/logic/standing.py), as the
model picker marks it: fine, flagged, built to lose, or the reference (a dense model fine-tuned
from a pretrained encoder is its family's reference, not a smaller dense model)."""

from __future__ import annotations

from app.logic.standing import standing


def cfg(variant: str, accuracy: float, dataset: str = "bbc") -> dict:
    return {"dataset": dataset, "model": {"variant": variant}, "test": {"accuracy": accuracy}}


def test_a_fine_tuned_dense_model_is_a_reference_not_a_smaller_dense_model():
    assert standing("bbc-minilm-dense", cfg("dense", 0.9695), 0.9695).kind == "reference"
    assert standing("bbc-dense-1head", cfg("dense", 0.6), 0.97).kind == "expected"
    assert standing("bbc-minilm-budgetformer", cfg("budgetformer", 0.9648), 0.9695).kind == "fine"
    flagged = standing("bbc-minilm-budgetformer", cfg("budgetformer", 0.90), 0.9695)
    assert flagged.kind == "flagged" and "97.0%" in flagged.note


def test_standing_against_dense():
    from app.logic.standing import standing

    def cfg(variant="budgetformer", accuracy=0.9, **model):
        return {"dataset": "d", "model": {"variant": variant, **model}, "test": {"accuracy": accuracy}}

    assert standing("d-budgetformer", cfg(accuracy=0.971), 1.0).kind == "fine"  # 2.9 points below
    flagged = standing("d-budgetformer-paper", cfg(accuracy=0.93), 1.0)
    assert flagged.kind == "flagged" and "93.0% against dense 100.0%" in flagged.note and "⚑" in flagged.mark
    assert standing("d-bba", cfg("bba", 0.5), 1.0).kind == "flagged"
    assert standing("d-no-budget-net", cfg(accuracy=0.5, use_budget_net=False), 1.0).kind == "expected"
    assert standing("d-no-head-scorer", cfg(accuracy=0.5, head_choice="uniform"), 1.0).kind == "expected"
    assert standing("d-dense", cfg("dense", 1.0), 1.0).kind == "reference"
    small = standing("d-dense-small", cfg("dense", 0.6), 1.0)
    assert small.kind == "expected" and "smaller dense" in small.note
    assert standing("d-budgetformer", cfg(accuracy=0.1), None).kind == "fine"  # no dense to judge by
    assert standing("x", {}, 1.0).kind == "fine"  # an unreadable config: nothing to say
