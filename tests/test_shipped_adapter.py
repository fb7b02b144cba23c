"""The shipped budgets fitted on a frozen model, ``bbc-minilm-frozen-budgetformer``, keep their promises:
an adapter of ``bbc-minilm-dense`` (its sha256) that opens by name, as accurate as its base within a
point while running at most half of the heads, its budgets following the base's per-example loss
over the test split and within every class. Read from the shipped files; nothing is trained or
re-evaluated here but the load."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from budgetformer_core.analysis.infer import spearman
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.shipped import checkpoint_dir, per_example_path, resolve_checkpoint

pytestmark = pytest.mark.artifacts

NAME, BASE = "bbc-minilm-frozen-budgetformer", "bbc-minilm-dense"
MB = 2**20


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    if not checkpoint_dir(NAME).is_dir():
        pytest.skip(f"{NAME} is not shipped here")
    return pd.read_parquet(per_example_path(NAME)), pd.read_parquet(per_example_path(BASE))


def test_it_is_a_small_adapter_of_the_shipped_dense_model_and_opens_by_name(tables):
    folder = checkpoint_dir(NAME)
    config = json.loads((folder / "config.json").read_text())
    base = config["adapter"]["base"]
    assert base["name"] == BASE and (folder / base["path"]).resolve() == checkpoint_dir(BASE).resolve()
    assert base["sha256"] == file_sha256(checkpoint_dir(BASE) / "model.safetensors")
    assert sum(p.stat().st_size for p in folder.iterdir()) < 5 * MB
    assert config["command"].startswith(f"budgetformer fit-budget --checkpoint precomputed/checkpoints/{BASE}")
    ckpt = load_checkpoint(resolve_checkpoint(NAME))
    assert ckpt.config.method == "budgetformer" and (ckpt.config.n_layers, ckpt.config.n_heads) == (6, 12)


def test_it_is_within_a_point_of_its_base_on_at_most_half_of_the_heads(tables):
    fitted, dense = tables
    test = json.loads((checkpoint_dir(NAME) / "config.json").read_text())["test"]
    dense_accuracy = json.loads((checkpoint_dir(BASE) / "config.json").read_text())["test"]["accuracy"]
    assert test["accuracy"] == pytest.approx(fitted.correct.mean()) and len(fitted) == test["n"] == len(dense)
    assert test["accuracy"] >= dense_accuracy - 0.01
    assert test["mean_heads_fraction"] <= 0.5


def test_its_budgets_follow_the_bases_loss_overall_and_within_every_class(tables):
    fitted, dense = tables
    assert np.array_equal(fitted.label, dense.label)
    assert spearman(fitted.mean_s, dense.loss) >= 0.3
    for label, rows in fitted.groupby("label"):
        assert spearman(rows.mean_s, dense.loss[rows.index]) >= 0.1, label
