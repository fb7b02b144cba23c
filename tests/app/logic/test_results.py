"""The precomputed results of the Budget sweep and Ablations pages (app/logic/results.py),
without Streamlit: sweeps.csv as read (every speed-up derived from a row's two latencies), and
a model fine-tuned from a pretrained encoder meeting its own encoder's dense model and
baselines."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from app import speed
from app.logic import results
from app.logic.results import backbone_of, own_point, same_backbone, specialist_rows, sweep_curve
from budgetformer_core.shipped import dense_reference

from ..apptest import write_sweeps


def test_read_sweeps(tmp_path):
    path = tmp_path / "sweeps.csv"
    path.write_text(
        "dataset,model,budget,accuracy,flops_ratio,speedup_b32\n"
        "bbc,dense,own,0.97,1.0,1.0\n"
        "bbc,bba,0.25,0.90,0.5,\n"
        "bbc,bba,1,0.96,0.0,x\n"
    )
    frame = results.read_sweeps(path)
    assert frame["budget"].tolist() == ["own", "0.25", "1"]  # strings, as written
    assert frame["b"].tolist()[1:] == [0.25, 1.0] and math.isnan(frame["b"].iloc[0])
    assert frame["ideal_speedup"].tolist()[:2] == [1.0, 2.0] and math.isnan(frame["ideal_speedup"].iloc[2])
    assert frame["speedup_b32"].isna().tolist() == [False, True, True]  # "x" is not a number
    assert frame["latency_ms"].isna().all()  # an absent column
    path.write_text("model,budget\nbba,own\n")
    with pytest.raises(ValueError, match="dataset, accuracy are missing"):
        results.read_sweeps(path)
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError):
        results.read_sweeps(path)


def test_read_sweeps_derives_every_speedup_from_the_rows_two_latencies(tmp_path):
    frame = write_sweeps(tmp_path / "sweeps.csv")
    frame.loc[0, "speedup_b1"] = 99.0  # a ratio its latencies contradict is never shown
    frame.to_csv(tmp_path / "sweeps.csv", index=False)
    read = results.read_sweeps(tmp_path / "sweeps.csv")
    timed = read["latency_ms"].notna()
    assert timed.any() and (~timed).any()
    assert read.loc[timed, "speedup_b1"].to_numpy() == pytest.approx(
        (read["dense_latency_ms"] / read["latency_ms"])[timed].to_numpy())
    assert read.loc[~timed, "speedup_b1"].isna().all()  # not timed: NaN, shown as "not timed"
    assert set(read["reference"]) == {"bbc-dense"}
    # a file from before the reference's latency was stored: derived from its own speed-up
    old = frame.drop(columns=["dense_latency_ms", "dense_latency_b32_ms", "dense_model"])
    old.to_csv(tmp_path / "old.csv", index=False)
    back = results.read_sweeps(tmp_path / "old.csv")
    assert back["dense_latency_ms"].to_numpy() == pytest.approx((old["latency_ms"] * old["speedup_b1"]).to_numpy(),
                                                                nan_ok=True)
    assert speed.speedup_text(np.nan, "bbc-dense") == "not timed"
    assert speed.latency_versus(6.28, 7.23, "bbc-dense") == "−0.95 ms vs bbc-dense"
    assert speed.speedup_text(1.151, "bbc-dense") == "1.15× vs bbc-dense (same rounds, 1 thread, batch 1)"


def test_each_model_has_the_dense_model_of_its_own_encoder():
    assert dense_reference("bbc", "bbc-minilm-budgetformer", full=True) == "bbc-minilm-dense"
    assert dense_reference("ag_news", "ag_news-minilm-bba", full=True) == "ag_news-minilm-dense"
    assert dense_reference("bbc", "bbc-budgetformer", full=True) == "bbc-dense"
    assert dense_reference("bbc", "bbc-dense-1head", full=True) == "bbc-dense"
    assert dense_reference("bbc", "minilm-bba") == "minilm-dense"  # sweeps.csv's names
    assert backbone_of("minilm-bba") == "minilm-" and backbone_of("bba") == ""


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
