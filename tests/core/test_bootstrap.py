"""Paired bootstrap intervals and the seed spread (budgetformer_core.measure.bootstrap)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from budgetformer_core.measure import bootstrap as bs


def table(correct: list[bool], labels: list[int] | None = None) -> pd.DataFrame:
    labels = labels if labels is not None else [i % 3 for i in range(len(correct))]
    pred = [y if c else (y + 1) % 3 for y, c in zip(labels, correct, strict=True)]
    return pd.DataFrame({"index": range(len(labels)), "label": labels, "prediction": pred})


def test_same_seed_same_interval_other_seed_other_draws():
    rng = np.random.default_rng(1)
    a, b = rng.random(300) < 0.8, rng.random(300) < 0.75
    first, again = bs.paired_difference(a, b, seed=3), bs.paired_difference(a, b, seed=3)
    assert first == again and first.resamples == 2000 and first.confidence == 0.95 and first.n == 300
    assert first.estimate == pytest.approx(a.mean() - b.mean())
    assert first.low < first.estimate < first.high
    assert bs.paired_difference(a, b, seed=4) != first  # the seed is what fixes the draws


def test_pairing_removes_the_shared_noise():
    # b is a with 4 of 400 answers flipped to wrong: the difference is small and certain,
    # although each accuracy alone has an interval of several points
    rng = np.random.default_rng(0)
    a = rng.random(400) < 0.7
    b = a.copy()
    b[np.flatnonzero(a)[:4]] = False
    diff = bs.paired_difference(a, b)
    assert diff.estimate == pytest.approx(0.01) and diff.low >= 0 and diff.high <= 0.025
    alone = bs.mean_interval(a)
    assert alone.high - alone.low > 0.07 > 3 * (diff.high - diff.low)
    assert bs.paired_difference(a, a).low == bs.paired_difference(a, a).high == 0.0


def test_compare_joins_on_index_and_counts_who_is_right():
    tables = {"full": table([True] * 8 + [False] * 2), "ablated": table([True] * 6 + [False] * 4)}
    shuffled = tables["ablated"].sample(frac=1, random_state=0)  # rows in another order
    out = bs.compare({"full": tables["full"], "ablated": shuffled}, [("ablated", "full"), ("ablated", "missing")])
    [row] = out.to_dict("records")
    assert (row["a"], row["b"], row["only_a"], row["only_b"], row["n"]) == ("ablated", "full", 0, 2, 10)
    assert row["difference"] == pytest.approx(-0.2) and row["low"] <= -0.2 <= row["high"]
    # every pair and every single accuracy comes from the same draws: compare == paired_difference
    direct = bs.paired_difference(shuffled.sort_values("index")["prediction"] == shuffled.sort_values("index")["label"],
                                  tables["full"]["prediction"] == tables["full"]["label"])
    assert (row["low"], row["high"]) == (direct.low, direct.high)
    intervals = bs.accuracy_intervals(tables)
    assert intervals["full"] == bs.mean_interval(tables["full"]["prediction"] == tables["full"]["label"])


def test_tables_of_other_examples_are_refused():
    with pytest.raises(ValueError, match="not tested on the same examples"):
        bs.compare({"a": table([True] * 5), "b": table([True] * 6)}, [("a", "b")])
    with pytest.raises(ValueError, match="not tested on the same examples"):
        bs.compare({"a": table([True] * 3, [0, 1, 2]), "b": table([True] * 3, [0, 1, 1])}, [("a", "b")])
    with pytest.raises(ValueError, match="N ≥ 1"):
        bs.mean_interval([])


def test_seed_runs_and_their_spread(tmp_path):
    path = tmp_path / "seeds.csv"
    assert bs.read_seed_runs(path) is None
    pd.DataFrame({"dataset": ["bbc"] * 3 + ["x"], "model": ["dense"] * 3 + ["dense"], "seed": [2, 0, 1, 0],
                  "accuracy": [0.96, 0.97, 0.98, 0.5]}).to_csv(path, index=False)
    [row] = bs.seed_spread(bs.read_seed_runs(path), "bbc").to_dict("records")
    assert row["seeds"] == 3 and row["mean"] == pytest.approx(0.97) and row["sd"] == pytest.approx(0.01)
    assert row["per_seed"] == "0: 97.0, 1: 98.0, 2: 96.0"
    path.write_text("dataset,model\nbbc,dense\n")
    with pytest.raises(ValueError, match="seed, accuracy are missing"):
        bs.read_seed_runs(path)


SEEDS = Path(__file__).resolve().parents[2] / "precomputed" / "results" / "seeds.csv"


@pytest.mark.skipif(not SEEDS.is_file(), reason="no shipped seed runs")
@pytest.mark.artifacts
def test_the_shipped_seed_runs_start_from_the_shipped_models():
    """seeds.csv's seed 0 of each model is the shipped checkpoint (its recorded test figures), and
    every other seed is a run of its own: three seeds per model, no two the same row."""
    runs = bs.read_seed_runs(SEEDS)
    assert not runs.duplicated(["dataset", "model", "seed"]).any()
    checkpoints = SEEDS.parents[1] / "checkpoints"
    for row in runs[runs["seed"] == 0].itertuples():
        test = json.loads((checkpoints / f"{row.dataset}-{row.model}" / "config.json").read_text())["test"]
        assert row.accuracy == pytest.approx(test["accuracy"], abs=1e-6)
        assert row.heads_fraction == pytest.approx(test["mean_heads_fraction"], abs=1e-6)
    assert (runs.groupby(["dataset", "model"])["seed"].nunique() == 3).all()


PER_EXAMPLE = Path(__file__).resolve().parents[2] / "precomputed" / "results" / "per_example"


@pytest.mark.skipif(not (PER_EXAMPLE / "bbc-budgetformer.parquet").is_file(), reason="no shipped tables")
@pytest.mark.artifacts
def test_the_shipped_intervals_hold_their_verdicts():
    """On the shipped per-example tables every point difference lies in its interval, and the
    verdicts are these: on BBC every gap between the shipped models is within noise; on AG News
    only bba at b = 0.5 is beyond noise against dense."""
    import importlib.util

    root = PER_EXAMPLE.parents[2]
    spec = importlib.util.spec_from_file_location("tables", root / "scripts" / "tables.py")
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    for dataset in ("bbc", "ag_news"):
        if not all((PER_EXAMPLE / f"{dataset}-{m}.parquet").is_file() for pair in tables.INTERVAL_PAIRS for m in pair):
            continue
        t = {m: pd.read_parquet(PER_EXAMPLE / f"{dataset}-{m}.parquet") for pair in tables.INTERVAL_PAIRS for m in pair}
        rows = bs.compare(t, list(tables.INTERVAL_PAIRS))
        assert ((rows["low"] <= rows["difference"]) & (rows["difference"] <= rows["high"])).all()
        verdicts = dict(zip(zip(rows["a"], rows["b"]), rows["beyond_noise"], strict=True))
        if dataset == "bbc":
            assert not any(verdicts.values())
        else:  # AG News: the full model's 0.25 below dense and its ablations' 0.1 are noise, bba's 1.07 is not
            assert not verdicts["budgetformer", "dense"] and not verdicts["no-budget-net", "budgetformer"]
            assert not verdicts["no-head-scorer", "budgetformer"]
            assert verdicts["bba", "dense"]


@pytest.mark.skipif(not (SEEDS.parents[1] / "checkpoints" / "bbc-dense").is_dir(), reason="no shipped models")
def test_seed_table_keeps_the_rows_of_the_models_it_did_not_run(tmp_path):
    """scripts/seed_table.py --csv replaces the rows of the models it ran and keeps the others, so
    runs made side by side end up in one file; seed 0 is the shipped checkpoint (nothing trained)."""
    root = SEEDS.parents[2]
    path = tmp_path / "seeds.csv"
    pd.DataFrame({"dataset": ["bbc", "bbc", "ag_news"], "model": ["bba", "dense", "dense"], "seed": [1, 5, 0],
                  "accuracy": [0.9, 0.1, 0.8]}).to_csv(path, index=False)
    done = subprocess.run([sys.executable, str(root / "scripts" / "seed_table.py"), "--dataset", "bbc", "--seeds", "0",
                           "--models", "dense", "--out", str(tmp_path / "runs"), "--csv", str(path)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = bs.read_seed_runs(path)
    assert sorted(zip(rows["dataset"], rows["model"], rows["seed"])) == [
        ("ag_news", "dense", 0), ("bbc", "bba", 1), ("bbc", "dense", 0)]  # bbc dense's seed 5 replaced
    dense = rows[(rows["dataset"] == "bbc") & (rows["model"] == "dense")].iloc[0]
    assert dense["checkpoint"] == "precomputed/checkpoints/bbc-dense"
    assert not (tmp_path / "runs").exists()  # seed 0 is the shipped checkpoint: nothing trained
