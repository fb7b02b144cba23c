"""The "Training dynamics" page: the budget band, β(t), entropy, accuracy and the loss terms,
from history.json.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import json
import math

import pytest

from app.models import available_models
from budgetformer_core.shipped import CHECKPOINTS

from .apptest import (
    BF,
    all_markdown,
    chart,
    config,
    loss_terms_add_up,
    open_page,
    pick_model,
    requires_default_model,
    start,
)

pytestmark = requires_default_model


def test_training_dynamics_page(at):
    cfg = config()
    n_layers, n_heads = cfg["model"]["n_layers"], cfg["model"]["n_heads"]
    history = json.loads((CHECKPOINTS / BF / "history.json").read_text())
    open_page(at, "dynamics")
    assert at.title[0].value == "Training dynamics"

    budget = chart(at, "Budget s per layer during training")
    names = [t["name"] for t in budget["data"]]
    assert names == [
        f"target band [{cfg['train']['s_min']:g}, {cfg['train']['s_max']:g}]",
        *[f"layer {i} (val)" for i in range(n_layers)],
        *[f"layer {i} (train)" for i in range(n_layers)],
    ]
    band = budget["data"][0]
    assert set(band["y"]) == {cfg["train"]["s_min"], cfg["train"]["s_max"]}
    assert band["fill"] == "toself"
    val0 = budget["data"][1]
    assert val0["x"] == [h["epoch"] for h in history]
    assert val0["y"] == pytest.approx([h["val_mean_budget_per_layer"][0] for h in history])

    beta = chart(at, "Entropy weight β(t)")["data"][0]
    assert beta["y"] == pytest.approx([h["beta"] for h in history])
    entropy = chart(at, "Head entropy H(p)")
    ceiling = [t for t in entropy["data"] if t["name"] == f"maximum ln {n_heads}"][0]
    assert ceiling["y"][0] == pytest.approx(math.log(n_heads))
    accuracy = chart(at, "Accuracy")["data"]
    assert [t["name"] for t in accuracy] == ["training", "validation"]
    assert accuracy[1]["y"][-1] == pytest.approx(history[-1]["val_accuracy"])
    names = [t["name"] for t in chart(at, "Loss terms")["data"]]
    assert names[0] == "task: cross-entropy" and names[1].startswith("λ_b·hinge") and names[2].startswith("λ_c·s")
    assert "λ_e·β(t)·H(p)" in names[3] and names[-1].startswith("total loss")
    loss_terms_add_up(at, history)
    assert "loss_terms" not in history[-1]  # shipped before the terms were recorded: weighted by its own λ
    assert any("from the run's own training config" in str(c.value) for c in at.caption)
    story = " ".join(all_markdown(at))
    assert "exploration" in story and "exploitation" in story
    assert f"{len(history)} epochs" in story
    ceiling = math.log(n_heads)
    assert entropy["layout"]["yaxis"]["range"] == pytest.approx([0, 1.05 * ceiling])  # from 0 to ln H
    last = history[-1]["val_head_entropy"]
    assert f"{last / ceiling:.0%} of its maximum ln {n_heads}" in story
    assert ("close to uniform" in story) == (last >= 0.95 * ceiling)


@pytest.mark.parametrize("model", sorted({
    (config(m)["model"]["variant"], config(m)["train"].get("recipe"), bool(config(m)["train"].get("lambda_difficulty")),
     bool(config(m)["train"].get("lambda_balance"))): m for m in available_models()
}.values()))
def test_the_loss_terms_drawn_add_up_to_the_total(model):
    """One shipped model of each recipe (variant, recipe and which of λ_d, λ_u are on)."""
    at = start()
    open_page(at, "dynamics")
    pick_model(at, model)
    loss_terms_add_up(at, json.loads((CHECKPOINTS / model / "history.json").read_text()))
