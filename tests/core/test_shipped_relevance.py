"""Each shipped model's relevance p on its test split ships beside its per-example table
(``precomputed/results/per_example/<model>.relevance.npz``, written by the rebuild's evaluation):
listed in the manifest, one row per row of the table, a softmax over each layer's heads, the
heads each input ran the ones p ranks highest, and the model's own p again when it is run now."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from app.logic.atlas import read_relevance
from budgetformer_core.analysis.infer import evaluate_split
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.shipped import MANIFEST, checkpoint_dir, per_example_path, relative, relevance_path

from ..conftest import ROOT

pytestmark = pytest.mark.artifacts

RUNS = json.loads(MANIFEST.read_text())["runs"] if MANIFEST.is_file() else {}
FLOAT16 = 2e-3
"""How far apart two relevances stored as float16 (about three digits) may be and still be a tie."""


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_shipped_model_ships_its_relevance_beside_its_table(name):
    path = relevance_path(name)
    files = json.loads(MANIFEST.read_text())["files"]
    assert relative(path).as_posix() in files, f"{path.name} is not in the manifest"
    p = read_relevance(path)
    table = pd.read_parquet(per_example_path(name))
    model = json.loads((checkpoint_dir(name) / "config.json").read_text())["model"]
    assert p.shape == (len(table), model["n_layers"], model["n_heads"])
    assert np.allclose(p.sum(-1), 1.0, atol=1e-2), "p is a softmax over each layer's heads"
    if model.get("head_choice", "learned") != "learned" or model.get("method") == "dense":
        return  # heads not chosen by p: the first k (no g_φ), or all of them
    for layer in range(model["n_layers"]):
        ran = np.zeros(p.shape[::2], dtype=bool)  # (N, H)
        for row, cell in enumerate(table[f"heads{layer}"].astype(str)):
            ran[row, [int(h) for h in cell.split()]] = True
        lowest_ran = np.where(ran, p[:, layer], np.inf).min(1)
        highest_idle = np.where(ran, -np.inf, p[:, layer]).max(1)
        ok = lowest_ran >= highest_idle - FLOAT16
        assert ok.mean() >= 0.999, f"layer {layer}: {int((~ok).sum())} inputs ran heads p does not rank highest"


@pytest.mark.parametrize("name", [n for n in ("bbc-budgetformer", "bbc-bba") if n in RUNS])
def test_the_shipped_relevance_is_the_models_own(name):
    run = RUNS[name]
    ckpt = load_checkpoint(ROOT / run["path"])
    split = load_dataset(ckpt.meta["dataset"], None, seed=run["split_seed"]).split("test")
    live = evaluate_split(ckpt, split).relevance
    np.testing.assert_allclose(read_relevance(relevance_path(name)), live, atol=FLOAT16)
