"""The shipped results keep their promises: speed against one named dense baseline, and the
models a user is shown first learn their task.

Read from precomputed/results (sweeps.csv and the per-example tables); nothing is timed or
trained here.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from budgetformer_core.shipped import dense_reference

from .conftest import ROOT

pytestmark = pytest.mark.artifacts

RESULTS = ROOT / "precomputed" / "results"
SWEEPS = pd.read_csv(RESULTS / "sweeps.csv", dtype={"budget": str})
TABLES = RESULTS / "per_example"
MANIFEST = ROOT / "precomputed" / "manifest.json"

FULL_BUDGET_SLOWDOWN = 1.3
"""At b = 1 every head runs: BudgetFormer and bba may then take at most this much the dense
model's latency (their budgeting networks' cost)."""
DENSE_POINTS = 3.0
"""A dataset's default, budgetformer and bba models are within this many points of its dense model."""


def row(dataset: str, model: str, budget: str) -> pd.Series:
    rows = SWEEPS[(SWEEPS.dataset == dataset) & (SWEEPS.model == model) & (SWEEPS.budget == budget)]
    assert len(rows) == 1, (dataset, model, budget)
    return rows.iloc[0]


@pytest.mark.parametrize("dataset", sorted(SWEEPS[SWEEPS.model == "dense"].dataset.unique()))  # trained from scratch
def test_budgeted_models_at_full_budget_are_close_to_dense_latency(dataset):
    for model in ("budgetformer", "bba"):
        full = row(dataset, model, "1")
        assert full.dense_model == "dense"
        assert full.latency_ms <= FULL_BUDGET_SLOWDOWN * full.dense_latency_ms, (
            f"{dataset}-{model} at b = 1: {full.latency_ms:.3f} ms, "
            f"{full.latency_ms / full.dense_latency_ms:.2f}× dense ({full.dense_latency_ms:.3f} ms)")


def test_every_speedup_is_the_dense_models_latency_over_the_rows():
    timed = SWEEPS[SWEEPS.latency_ms.notna()]
    shipped = SWEEPS[(SWEEPS.dataset + "-" + SWEEPS.model).isin(json.loads(MANIFEST.read_text())["runs"])]
    assert shipped.latency_ms.notna().all(), "every row of a shipped model is timed"
    assert (timed.dense_model == [dense_reference(d, m) for d, m in zip(timed.dataset, timed.model)]).all()
    for column, dense, latency in (("speedup_b1", "dense_latency_ms", "latency_ms"),
                                   ("speedup_b32", "dense_latency_b32_ms", "latency_b32_ms")):
        rows = timed[timed[latency].notna()]
        assert rows[column].to_numpy() == pytest.approx((rows[dense] / rows[latency]).to_numpy(), rel=1e-5), column
    # the dense reference's latency is its own row's, from the same rounds
    own = SWEEPS[SWEEPS.budget == "own"].set_index(["dataset", "model"])
    for (dataset, reference), rows in timed.groupby(["dataset", "dense_model"]):
        dense = own.loc[(dataset, reference)]
        assert (rows.dense_latency_ms == dense.latency_ms).all(), (dataset, reference)
        batched = rows[rows.dense_latency_b32_ms.notna()]
        assert (batched.dense_latency_b32_ms == dense.latency_b32_ms).all(), (dataset, reference)
    assert timed.speedup_b32[timed.budget.isin(["own", "0.25", "0.5", "0.75", "1"])].notna().all()


def accuracy(key: str) -> float:
    table = pd.read_parquet(TABLES / f"{key}.parquet", columns=["label", "prediction"])
    return float((table.prediction == table.label).mean()) * 100


DATASETS = sorted(p.stem.removesuffix("-dense") for p in TABLES.glob("*-dense.parquet") if "minilm" not in p.stem)


@pytest.mark.parametrize("dataset", DATASETS)
def test_default_budgetformer_and_bba_learn_the_task(dataset):
    """The model a dataset opens on (the app picks ``<dataset>-budgetformer``), its budgetformer
    and bba models, and those on the pretrained encoder (against ``minilm-dense``), each within
    3 points of the dense model's test accuracy, from the per-example tables."""
    default = "budgetformer"  # app.components.model_picker: a dataset picked anew opens on it
    models = {default, "budgetformer", "bba", "minilm-budgetformer", "minilm-bba"}
    checked = []
    for model in sorted(models):
        if not (TABLES / f"{dataset}-{model}.parquet").is_file():
            assert model.startswith("minilm-"), f"{dataset}-{model} has no per-example table"
            continue
        reference = f"{dataset}-{dense_reference(dataset, model)}"
        gap = accuracy(reference) - accuracy(f"{dataset}-{model}")
        assert gap <= DENSE_POINTS, f"{dataset}-{model} is {gap:.1f} points below {reference}"
        checked.append(model)
    assert {"budgetformer", "bba"} <= set(checked)
