"""precomputed/ is what its manifest says, within budget, and its checkpoints reproduce."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from budgetformer_core.analysis.infer import evaluate_split
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.shipped import dense_reference
from rebuild.jobs import plan
from rebuild.manifest import SLICE
from rebuild.measure import PRETRAINED_SWEEP, SWEEP_BUDGETS, TEXT_BASELINE, local_copy
from rebuild.recipes import RECIPES, SHIPPED, SHIPPED_PRETRAINED

from ..conftest import ROOT

pytestmark = pytest.mark.artifacts  # every test here checks what precompute shipped

OUT = ROOT / "precomputed"
MANIFEST = json.loads((OUT / "manifest.json").read_text())
SHARED = ROOT.parent / "shared" / "data"


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_file_is_listed_with_its_hash_and_size():
    on_disk = {p.relative_to(ROOT).as_posix() for p in OUT.rglob("*") if p.is_file()} - {"precomputed/manifest.json"}
    assert on_disk == set(MANIFEST["files"])
    for rel, entry in MANIFEST["files"].items():
        path = ROOT / rel
        assert path.stat().st_size == entry["bytes"], rel
        assert sha256(path) == entry["sha256"], rel


def test_total_size_is_within_100_mb():
    """100 MB as the project's contract counts it: 10⁸ bytes."""
    assert sum(e["bytes"] for e in MANIFEST["files"].values()) <= 100 * 10**6


def test_every_shipped_model_is_there_with_its_command():
    shipped = [job for job in plan(list(RECIPES)) if job.shipped]
    # the models on the pretrained encoder are listed once precomputed/ holds them; the rest always
    assert {j.key for j in shipped if j.name not in SHIPPED_PRETRAINED} <= set(MANIFEST["runs"])
    assert set(MANIFEST["runs"]) == {j.key for j in shipped if (ROOT / j.out / "config.json").is_file()}
    for key, run in MANIFEST["runs"].items():
        config = json.loads((ROOT / run["path"] / "config.json").read_text())
        assert run["command"] == config["command"], key
        assert run["command"].split()[:2] in (["budgetformer", "train"], ["budgetformer", "fit-budget"]), key
        assert key.split("-", 1)[1] in (*SHIPPED, *SHIPPED_PRETRAINED)


@pytest.mark.parametrize("key", sorted(MANIFEST["runs"]))
def test_checkpoint_reproduces_its_slice_accuracy(key):
    run = MANIFEST["runs"][key]
    ckpt = load_checkpoint(ROOT / run["path"])
    data = local_copy(ckpt.meta["dataset"])
    if data and not data.is_dir():
        pytest.skip(f"{data} is not here")
    split = load_dataset(ckpt.meta["dataset"], data, seed=run["split_seed"]).split("test")
    assert run["slice_rows"] == SLICE
    assert evaluate_split(ckpt, split.head(SLICE)).accuracy == pytest.approx(run["slice_accuracy"], abs=1e-9)


def test_nothing_is_a_copy_of_the_shared_data():
    if not SHARED.is_dir():
        pytest.skip("../shared/data is not here")
    shared = {sha256(p) for p in SHARED.rglob("*") if p.is_file()}
    assert not shared & {e["sha256"] for e in MANIFEST["files"].values()}


SWEEPS = pd.read_csv(OUT / "results" / "sweeps.csv", dtype={"budget": str})


def test_sweeps_cover_every_model_and_budget():
    for key in MANIFEST["runs"]:
        dataset, model = key.split("-", 1)
        rows = SWEEPS[(SWEEPS.dataset == dataset) & (SWEEPS.model == model)]
        assert "own" in set(rows.budget), key
        if model not in ("dense", "minilm-dense"):
            sweep = PRETRAINED_SWEEP if model in SHIPPED_PRETRAINED else SWEEP_BUDGETS
            assert sorted(rows.budget) == sorted(["own", *(f"{b:g}" for b in sweep)]), key
    assert SWEEPS[["accuracy", "macro_f1"]].notna().all().all()
    shipped = (SWEEPS.dataset + "-" + SWEEPS.model).isin(MANIFEST["runs"])
    timed = SWEEPS[shipped]  # a shipped model's checkpoint is always here to time
    assert timed[["latency_ms", "speedup_b1"]].notna().all().all()
    batched = timed.budget.isin(["own", "0.25", "0.5", "0.75", "1"])
    assert timed.speedup_b32[batched].notna().all()
    # a per-budget baseline (its run is not shipped) is timed in full, or not at all where its run
    # was not on the machine that timed its dataset
    baselines = SWEEPS[~shipped & (SWEEPS.model != TEXT_BASELINE)]
    columns = baselines[["latency_ms", "dense_latency_ms", "speedup_b1"]]
    assert (columns.notna().all(axis=1) | columns.isna().all(axis=1)).all()
    assert SWEEPS.machine.str.len().gt(0).all()


def test_bba_cost_is_monotone_in_the_budget():
    rows = SWEEPS[(SWEEPS.model == "bba") & (SWEEPS.budget != "own")].copy()
    rows["b"] = rows.budget.astype(float)
    for _, group in rows.sort_values("b").groupby("dataset"):
        assert group.heads_fraction.is_monotonic_increasing
        assert group.flops_ratio.is_monotonic_increasing
        assert group.attention_cost_estimated.is_monotonic_increasing


def point(dataset: str, model: str, budget: str) -> pd.Series:
    rows = SWEEPS[(SWEEPS.dataset == dataset) & (SWEEPS.model == model) & (SWEEPS.budget == budget)]
    assert len(rows) == 1, (dataset, model, budget)
    return rows.iloc[0]


def test_synthetic_bba_meets_the_bar():
    """One checkpoint: ≥ 99.7 % at attention cost ≤ 0.30, 100 % at ≤ 0.50; one head fails."""
    low, half = point("synthetic", "bba", "0.25"), point("synthetic", "bba", "0.5")
    assert low.heads_fraction <= 0.30 and low.accuracy >= 0.997
    assert half.heads_fraction <= 0.50 and half.accuracy == 1.0
    assert point("synthetic", "dense-1head", "own").accuracy < 0.9


def test_bbc_budgetformers_meet_the_bar():
    paper, adaptive = point("bbc", "budgetformer-paper", "own"), point("bbc", "budgetformer", "own")
    assert paper.accuracy >= 0.97 and paper.mean_s <= 0.5
    assert adaptive.accuracy >= 0.96 and adaptive.heads_fraction <= 0.35


def test_synthetic_var_allocation_follows_the_need():
    """One BudgetFormer ≥ 99 % with ρ(k, n) ≥ 0.9 and mean heads ≤ 1.15 × the mean need n; a fixed
    k on either side of its cost (no f_θ) below 90 %; a dense model with h < n heads at most 15 points above
    guessing the n − h slots it cannot read, on the inputs needing n."""
    from budgetformer_core.analysis.adaptivity import from_frames

    tables = OUT / "results" / "per_example"
    needed = np.array(load_dataset("synthetic_var").split("test").needed_heads)
    frame = pd.read_parquet(tables / "synthetic_var-budgetformer.parquet")
    figures = from_frames(frame, 8, pd.read_parquet(tables / "synthetic_var-dense.parquet"), needed)
    assert figures.accuracy >= 0.99 and figures.rho_k_needed >= 0.9
    assert figures.mean_heads_fraction * 8 <= 1.15 * needed.mean()
    # without f_θ, k = 2 (its own: the full model's mean s) and k = 3 (s = 0.4) bracket the full model's cost
    for budget, k in (("own", 2), ("0.25", 2), ("0.4", 3)):
        fixed = point("synthetic_var", "no-budget-net", budget)
        assert fixed.accuracy < 0.9 and fixed.heads_fraction * 8 == k, budget
    for h in (1, 2, 3):
        dense = point("synthetic_var", f"dense-{h}head", "own")
        for n in range(h + 1, 5):
            assert dense[f"acc_need{n}"] <= 2.0 ** (h - n) + 0.15, (h, n)
    assert point("synthetic_var", "dense", "own").accuracy >= 0.99


REPRODUCED = sorted(k for k in MANIFEST["runs"] if not RECIPES[k.split("-", 1)[0]].data)


@pytest.mark.parametrize("key", REPRODUCED)
def test_checkpoint_reproduces_its_per_example_table(key):
    """Over the whole test split: the same prediction, s, k and heads as the shipped table."""
    run = MANIFEST["runs"][key]
    ckpt = load_checkpoint(ROOT / run["path"])
    split = load_dataset(ckpt.meta["dataset"], None, seed=run["split_seed"]).split("test")
    table = pd.read_parquet(OUT / "results" / "per_example" / f"{key}.parquet")
    ev = evaluate_split(ckpt, split)
    assert len(table) == ev.n == len(split.texts)
    assert (table["prediction"].to_numpy() == ev.predictions).all(), key
    for layer in range(ckpt.config.n_layers):
        assert table[f"s{layer}"].to_numpy() == pytest.approx(ev.budgets[:, layer], abs=2e-6), key
        assert (table[f"k{layer}"].to_numpy() == ev.selected[:, layer].sum(-1)).all(), key
        heads = [" ".join(map(str, row.nonzero()[0])) for row in ev.selected[:, layer]]
        assert table[f"heads{layer}"].tolist() == heads, key


@pytest.mark.parametrize("dataset", ["bbc", "ag_news"])
def test_adaptive_budgetformer_follows_difficulty_and_the_paper_recipe_does_not(dataset):
    """From the shipped per-example tables, against the dense model's per-example loss."""
    from budgetformer_core.analysis.adaptivity import from_frames

    tables = OUT / "results" / "per_example"
    dense = pd.read_parquet(tables / f"{dense_reference(dataset, 'budgetformer', full=True)}.parquet")
    figures = {m: from_frames(pd.read_parquet(tables / f"{dataset}-{m}.parquet"), 8, dense)
               for m in ("budgetformer", "budgetformer-paper")}
    adaptive, paper = figures["budgetformer"], figures["budgetformer-paper"]
    assert adaptive.accuracy >= (dense.prediction == dense.label).mean() - 0.003  # dense − 0.3 points
    assert adaptive.rho_s_reference_loss >= 0.3 and adaptive.mean_heads_fraction <= 0.35
    assert all(layer.k_values_over_5pct >= 3 and layer.distinct_head_sets >= 8 for layer in adaptive.layers)
    assert adaptive.heads_ratio_hard_easy >= 1.3
    assert paper.rho_s_reference_loss < adaptive.rho_s_reference_loss - 0.2
    assert min(layer.k_values_over_5pct for layer in paper.layers) < 3


def test_the_minilm_budgetformer_follows_difficulty():
    """From the shipped per-example tables, against the MiniLM dense fine-tune's per-example loss:
    ρ(s, dense loss) ≥ 0.3, hard / easy ≥ 1.3, two values of k each taken by ≥ 5 % in every layer,
    ≤ 35 % of heads, ≥ 97.5 % accurate and within 0.5 points of dense."""
    from budgetformer_core.analysis.adaptivity import from_frames

    if "bbc-minilm-budgetformer" not in MANIFEST["runs"]:
        pytest.skip("the MiniLM models are not shipped here")
    tables = OUT / "results" / "per_example"
    dense = pd.read_parquet(tables / "bbc-minilm-dense.parquet")
    figures = from_frames(pd.read_parquet(tables / "bbc-minilm-budgetformer.parquet"), 12, dense)
    assert figures.accuracy >= 0.975 and figures.accuracy >= dense.correct.mean() - 0.005
    assert figures.mean_heads_fraction <= 0.35
    assert figures.rho_s_reference_loss >= 0.3 and figures.heads_ratio_hard_easy >= 1.3
    assert all(layer.k_values_over_5pct >= 2 for layer in figures.layers)
