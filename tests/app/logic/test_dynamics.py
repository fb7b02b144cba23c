"""The Training dynamics page's logic (app/logic/dynamics.py), without Streamlit: history.json
as a frame, the story told of it (a BBA model's its own), and the loss terms drawn, as the
run's history records them or derived from its own training config."""

from __future__ import annotations

import pytest

from app.logic import dynamics
from app.logic.dynamics import bba_dynamics_story
from budgetformer_core.config import ModelConfig

HISTORY = [
    {"epoch": 1, "loss": 1.0, "task_loss": 1.1, "budget_loss": 0.01, "entropy": 2.0, "beta": -0.5,
     "train_accuracy": 0.5, "val_accuracy": 0.6, "val_mean_budget": 0.5, "val_head_entropy": 2.07,
     "train_mean_budget_per_layer": [0.5, 0.5], "val_mean_budget_per_layer": [0.5, 0.5]},
    {"epoch": 2, "loss": 0.1, "task_loss": 0.1, "budget_loss": 0.0, "entropy": 1.5, "beta": 0.5,
     "train_accuracy": 0.9, "val_accuracy": 0.9, "val_mean_budget": 0.3, "val_head_entropy": 1.6,
     "train_mean_budget_per_layer": [0.4, 0.2], "val_mean_budget_per_layer": [0.4, 0.2]},
]  # fmt: skip


def test_history_frame_and_story():
    f = dynamics.history_frame(HISTORY)
    assert f["epoch"].tolist() == [1, 2] and dynamics.history_layers(f) == 2
    assert f["val_s1"].tolist() == [0.5, 0.2] and f["lr"].isna().all()  # missing key: NaN
    story = dynamics.dynamics_story(f, 8, 0.1, 0.45)
    assert "exploration" in story and "exploitation" in story
    assert "turned positive in epoch 2" in story and "from 2.07 to 1.60" in story
    assert "inside the band [0.1, 0.45]" in story
    assert dynamics.history_frame([]).empty and dynamics.history_layers(dynamics.history_frame([])) == 0
    assert "no training history" in dynamics.dynamics_story(dynamics.history_frame([]), 8, None, None)


def test_bba_dynamics_story():
    frame = dynamics.history_frame([
        {"epoch": 1, "val_accuracy": 0.5, "val_mean_heads_fraction": 0.5},
        {"epoch": 2, "val_accuracy": 0.9, "val_mean_heads_fraction": 0.5},
    ])  # fmt: skip
    story = bba_dynamics_story(frame, {"budget_min": 0.1, "structural_from": 0.7}, ModelConfig(method="bba"))
    assert "drawn uniformly in [0.1, 1]" in story and "first 70%" in story
    assert "soft gate" in story and "hard-gate adaptation" in story and "50.0% to 90.0%" in story
    assert "β" not in story and "band" not in story
    fixed = bba_dynamics_story(frame, {"train_budget": 0.25}, ModelConfig(method="bba"))
    assert "fixed budget b = 0.25" in fixed


ADAPTIVE = {"recipe": "adaptive", "lambda_budget": 10.0, "lambda_entropy": 0.01, "lambda_cost": 2.0,
            "lambda_difficulty": 5.0, "lambda_balance": 0.0}
"""A run's recorded training config, its weights far from the defaults."""


def test_loss_terms_as_the_history_records_them():
    recorded = [{**h, "loss_terms": {"task": h["task_loss"], "budget": 0.3, "entropy_term": -0.2, "cost": 0.1}}
                for h in HISTORY]
    got = dynamics.loss_terms(recorded, dynamics.history_frame(recorded), ADAPTIVE, task_only=False)
    assert got.source == "history" and "as the run recorded" in got.note
    assert got.terms == {"task: cross-entropy": [1.1, 0.1], "λ_b·hinge (λ_b = 10)": [0.3, 0.3],
                         "λ_c·s (λ_c = 2)": [0.1, 0.1], "λ_e·β(t)·H(p)": [-0.2, -0.2]}  # the chart's order
    # a run whose history records only some epochs (resumed from an older state): derived throughout
    mixed = [recorded[0], HISTORY[1]]
    assert dynamics.loss_terms(mixed, dynamics.history_frame(mixed), ADAPTIVE, False).source == "config"


def test_loss_terms_of_an_older_history_come_from_its_own_config():
    """Weighted by the run's recorded λ (not the defaults); the terms the history does not hold
    apart are the total minus the others, named after each of them; they add up to the total."""
    old = [{**h, "cost": 0.25} for h in HISTORY]
    frame = dynamics.history_frame(old)
    got = dynamics.loss_terms(old, frame, ADAPTIVE, task_only=False)
    assert got.source == "config" and "from the run's own training config" in got.note
    assert list(got.terms) == ["task: cross-entropy", "λ_b·hinge (λ_b = 10)", "λ_c·s (λ_c = 2)",
                               "λ_e·β(t)·H(p) + λ_d·(s − target)² (not recorded apart: the total minus the others)"]
    assert got.terms["λ_b·hinge (λ_b = 10)"] == pytest.approx([0.1, 0.0])
    assert got.terms["λ_c·s (λ_c = 2)"] == pytest.approx([0.5, 0.5])
    assert [sum(v[e] for v in got.terms.values()) for e in range(2)] == pytest.approx([1.0, 0.1])
    paper = dynamics.loss_terms(old, frame, {**ADAPTIVE, "recipe": "paper"}, task_only=False)
    assert list(paper.terms) == ["task: cross-entropy", "λ_b·hinge (λ_b = 10)", "λ_e·β(t)·H(p)"]  # no λ_c·s
    dense = dynamics.loss_terms(old, frame, {}, task_only=True)  # the task loss alone, whatever is recorded
    assert dense.source == "history" and list(dense.terms) == ["task: cross-entropy", "not recorded apart (the "
                                                                "total minus the others)"]


def test_loss_terms_say_so_when_the_config_records_no_weights():
    for train_cfg in ({}, {k: v for k, v in ADAPTIVE.items() if k != "lambda_cost"}, {**ADAPTIVE, "recipe": None},
                      {**ADAPTIVE, "lambda_budget": "ten"}):
        got = dynamics.loss_terms(HISTORY, dynamics.history_frame(HISTORY), train_cfg, task_only=False)
        assert got.source == "unrecorded" and "does not record the weights" in got.note
        assert list(got.terms) == ["task: cross-entropy", dynamics.REST]  # the rest of the total, not split
        assert got.terms[dynamics.REST] == pytest.approx([-0.1, 0.0])
    assert dynamics.loss_terms([], dynamics.history_frame([]), {}, False).terms == {}
