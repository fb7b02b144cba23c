"""The Ablations page's rows for the picked model: its own family (its ablations, trained or run
live on it, and its encoder's dense and BBA models), every row named after its checkpoint."""

from __future__ import annotations

import pandas as pd
import pytest

from app.logic.ablations import LIVE, family, family_table, live_seconds, live_summary, run_label, to_run_live
from app.logic.results import RESULT_COLUMNS, live_sample
from budgetformer_core.shipped import CHECKPOINTS


def own(model: str, accuracy: float, reference: str = "bbc-dense") -> dict:
    return {"model": model, "budget": "own", "accuracy": accuracy, "reference": reference}


ROWS = pd.DataFrame([
    own("budgetformer", 0.9765), own("no-budget-net", 0.969), own("no-head-scorer", 0.967), own("dense", 0.9718),
    own("bba", 0.97), own("minilm-budgetformer", 0.9836, "bbc-minilm-dense"),
    own("minilm-dense", 0.9789, "bbc-minilm-dense"),
]).reindex(columns=["model", "budget", *RESULT_COLUMNS])  # fmt: skip


def test_a_fine_tuned_model_meets_its_own_encoders_models_only():
    fam = family("bbc-minilm-budgetformer", "bbc", "budgetformer")
    table, missing = family_table(ROWS, fam)
    assert table["checkpoint"].tolist() == ["bbc-minilm-budgetformer", "bbc-minilm-dense"]
    assert table["accuracy"].tolist() == [0.9836, 0.9789] and fam.reference == "bbc-minilm-dense"
    assert missing == ["bbc-minilm-no-budget-net", "bbc-minilm-no-head-scorer", "bbc-minilm-bba"]
    assert to_run_live(fam, table) == list(LIVE)  # no trained ablation of its own: all three run live
    assert live_seconds(ROWS, fam, 426, 3) is None  # not timed in ROWS: the button gives no estimate
    timed = ROWS.assign(latency_ms=50.0, latency_b32_ms=40.0)  # ms per input: batch 32's, else batch 1's
    assert live_seconds(timed, fam, 426, 3) == pytest.approx(40 * 426 * 3 / 1000)
    assert live_seconds(timed.assign(latency_b32_ms=float("nan")), fam, 10, 3) == pytest.approx(50 * 10 * 3 / 1000)
    assert fam.pairs()[0] == ("minilm-budgetformer", "minilm-dense")
    assert fam.pairs()[-2:] == (("minilm-bba", "minilm-dense"), ("minilm-bba", "minilm-budgetformer"))


def test_a_model_trained_from_scratch_keeps_its_trained_ablations():
    fam = family("bbc-budgetformer", "bbc", "budgetformer")
    table, missing = family_table(ROWS, fam)
    assert table["checkpoint"].tolist() == ["bbc-budgetformer", "bbc-no-budget-net", "bbc-no-head-scorer",
                                            "bbc-dense", "bbc-bba"]
    assert table["model"].iloc[0] == "BudgetFormer (full)" and missing == []
    assert to_run_live(fam, table) == ["random-heads"]  # the other two are shipped as models
    assert run_label(426, 2.4) == "Run the live ablations on 426 test texts (about 2 s)"
    assert run_label(7600, 1234.0) == "Run the live ablations on 7600 test texts (about 21 min)"
    assert run_label(426, None) == "Run the live ablations on 426 test texts"
    live = {"random-heads": {"accuracy": 0.9, "mean_heads_fraction": 0.27, "flops_ratio": 0.5}}
    table, _ = family_table(ROWS, fam, live)
    row = table.iloc[3]
    assert (row["model"], row["checkpoint"], row["accuracy"]) == ("random heads, run live", "bbc-budgetformer", 0.9)
    assert row["ideal_speedup"] == 2.0 and row["reference"] == "bbc-dense" and pd.isna(row["speedup_b1"])


def test_bba_and_dense_models_say_what_applies():
    bba = family("ag_news-minilm-bba", "ag_news", "bba")
    assert bba.live == () and bba.relatives == () and "no f_θ or g_φ" in bba.note
    assert [m.checkpoint for m in bba.shipped] == ["ag_news-minilm-bba", "ag_news-minilm-dense"]
    dense = family("bbc-dense", "bbc", "dense")
    assert dense.live == () and [m.checkpoint for m in dense.shipped] == ["bbc-dense", "bbc-bba"]
    mine = family("my-model", "bbc", "budgetformer", has_f=False)  # a folder of one's own
    assert mine.shipped == (mine.picked,) and mine.live == ("no-head-scorer", "random-heads")
    table, missing = family_table(ROWS, mine, picked_test={"accuracy": 0.8, "flops_ratio": 0.5})
    assert table["checkpoint"].tolist() == ["my-model"] and table["accuracy"].tolist() == [0.8] and missing == []


@pytest.mark.skipif(not (CHECKPOINTS / "bbc-budgetformer").is_dir(), reason="no shipped bbc-budgetformer")
def test_ablations_run_live_on_the_model_itself():
    """Each runs the model itself over the texts with the engine's control: no f_θ runs every
    input at the model's mean s on its validation split; no g_φ and random heads keep f_θ, so
    their first layer runs as many heads as the full model's (later layers read other outputs).
    On the sample the page's "N test texts" takes (every text of the split: tests/app/test_ablations.py)."""
    from budgetformer_core.analysis.infer import evaluate_split
    from budgetformer_core.io.data import load_dataset
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.splits import Split
    from budgetformer_core.model.budget import ABLATIONS

    assert list(LIVE) == list(ABLATIONS)  # the engine's ablations, each offered by its own name
    ckpt = load_checkpoint(CHECKPOINTS / "bbc-budgetformer")
    test = load_dataset("bbc").split("test")
    texts, labels = live_sample(test.texts, test.labels, 100)
    assert sorted(set(labels)) == sorted(set(test.labels))  # every class
    full = evaluate_split(ckpt, Split(texts, labels))
    uniform = live_summary(ckpt, texts, labels, "no-head-scorer")
    random = live_summary(ckpt, texts, labels, "random-heads")
    fixed = live_summary(ckpt, texts, labels, "no-budget-net")
    first = full.mean_budget_per_layer[0]
    assert uniform["mean_budget_per_layer"][0] == pytest.approx(first)
    assert random["mean_budget_per_layer"][0] == pytest.approx(first)
    assert fixed["mean_budget"] == pytest.approx(ckpt.validation_budget, abs=1e-6)
    assert uniform["n"] == 100 and 0 < uniform["accuracy"] <= 1
