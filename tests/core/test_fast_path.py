"""Inference's allocation and structural execution reproduce what the shipped models recorded:
each input's prediction, and per layer the heads it ran and how many, on the first inputs of the
test split (the rebuild's per-example table). Traces hand over what the execution does not read
as deferred values; here every one of them is read (the table's columns) and must agree."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from budgetformer_core.analysis.infer import evaluate
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode
from budgetformer_core.shipped import MANIFEST, per_example_path

from ..conftest import ROOT

pytestmark = pytest.mark.artifacts

RUNS = json.loads(MANIFEST.read_text())["runs"] if MANIFEST.is_file() else {}
ROWS = 96
"""Inputs compared per model: enough to cover many head sets, few enough to keep the test quick."""


@pytest.mark.parametrize("name", [n for n in ("bbc-budgetformer", "bbc-bba", "bbc-budgetformer-paper") if n in RUNS])
def test_the_structural_path_reproduces_the_shipped_table(name):
    run = RUNS[name]
    ckpt = load_checkpoint(ROOT / run["path"])
    split = load_dataset(ckpt.meta["dataset"], None, seed=run["split_seed"]).split("test")
    ids, _ = encode(ckpt.tokenizer, split.texts[:ROWS], ckpt.model.cfg.max_len)
    frame = evaluate(ckpt.model, ids, split.labels[:ROWS]).to_frame([len(x) for x in ids])
    table = pd.read_parquet(per_example_path(name)).iloc[:ROWS]
    columns = ["prediction"] + [c for c in table.columns if c[:1] in "kh" and c.lstrip("kheads").isdigit()]
    for column in columns:
        assert frame[column].astype(str).tolist() == table[column].astype(str).tolist(), column
    for layer in range(ckpt.model.cfg.n_layers):
        assert frame[f"s{layer}"].to_numpy() == pytest.approx(table[f"s{layer}"].to_numpy(), abs=1e-3)
