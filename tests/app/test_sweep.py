"""The "Budget sweep" page: precomputed curves (made-up results written per test), the live
re-measure, missing results.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.logic import results as results_module
from app.models import available_models, checkpoint_config

from .apptest import (
    BF,
    SWEEP_BUDGETS,
    chart,
    charts,
    csv_value,
    fake_sweeps,
    frame_with,
    metric,
    open_page,
    requires_default_model,
    run,
    start,
)

pytestmark = requires_default_model


def budget_charts(at: AppTest) -> dict[str, dict]:
    """The sweep page's charts against the budget b (not those against the input length or the cost)."""
    return {t: spec for t, spec in charts(at).items()
            if not t.startswith("Cost vs input length") and "every method" not in t}


def test_sweep_page(at, results):
    open_page(at, "sweep")
    assert at.title[0].value == "Budget sweep"
    assert at.slider(key="sweep_budget").value == 0.5
    assert metric(at, "Accuracy") == f"{csv_value(results, 'budgetformer', '0.5', 'accuracy'):.1%}"
    assert metric(at, "FLOPs vs dense") == f"{csv_value(results, 'budgetformer', '0.5', 'flops_ratio'):.0%}"
    specs = budget_charts(at)
    assert len(specs) == 5
    for spec in specs.values():  # the slider's budget is marked on every chart against b
        assert [s["x0"] for s in spec["layout"]["shapes"]] == [0.5]
    accuracy = {t["name"]: t for t in chart(at, "Accuracy vs budget")["data"]}
    assert list(accuracy) == [
        "budgetformer", "post-hoc (zero-shot)", "budgetformer at its own point", "static gates",
        "post-hoc + recovery", "dense",
    ]  # fmt: skip
    assert accuracy["budgetformer"]["x"] == SWEEP_BUDGETS
    assert accuracy["static gates"]["x"] == [0.25, 0.5, 0.75]
    assert accuracy["dense"]["y"] == [csv_value(results, "dense", "own", "accuracy")] * 2
    speedup = {t["name"]: t for t in chart(at, "Speed-up over dense")["data"]}
    assert speedup["ideal (1 / FLOPs ratio)"]["y"] == pytest.approx([1 / (0.3 + 0.7 * b) for b in SWEEP_BUDGETS])
    assert speedup["measured, batch 32"]["x"] == [0.25, 0.5, 0.75, 1.0]

    at.slider(key="sweep_budget").set_value(0.25)
    run(at)
    assert metric(at, "Accuracy") == f"{csv_value(results, 'budgetformer', '0.25', 'accuracy'):.1%}"
    assert metric(at, "Accuracy") != f"{csv_value(results, 'budgetformer', '0.5', 'accuracy'):.1%}"
    assert all(s["layout"]["shapes"][0]["x0"] == 0.25 for s in budget_charts(at).values())

    table = frame_with(at, "budget_b")
    assert table.loc[table["budget_b"] == 0.25, "method"].tolist() == [
        "budgetformer", "BBA", "static gates", "post-hoc (zero-shot)", "post-hoc + recovery"
    ]
    at_one = ["budgetformer", "BBA", "post-hoc (zero-shot)", "dense"]  # the specialists stop at 0.75
    assert table.loc[table["budget_b"] == 1.0, "method"].tolist() == at_one
    assert sorted(set(table["budget_b"])) == [0.25, 0.5, 0.75, 1.0]
    assert "Download this table (19 rows, CSV)" in [b.label for b in at.get("download_button")]


def test_sweep_page_live_remeasure(at, results):
    open_page(at, "sweep")
    at.number_input(key="sweep_live_n").set_value(5)
    at.button(key="sweep_live_go").click()
    run(at)
    live = {t["name"]: t for t in chart(at, "Live accuracy vs budget")["data"]}
    assert list(live) == ["precomputed (whole split)", "live (5 texts, stratified)"]
    assert live["live (5 texts, stratified)"]["x"] == [0.1, 0.25, 0.5, 0.75, 1.0]
    assert all(round(y * 5) == pytest.approx(y * 5) for y in live["live (5 texts, stratified)"]["y"])
    table = frame_with(at, "timed")
    assert table["n"].tolist() == [5] * 5 and table["heads_fraction"].is_monotonic_increasing
    # latency is re-measured too, on the texts timed one at a time, not copied from sweeps.csv
    assert table["timed"].tolist() == [results_module.LIVE_TIMED] * 5
    assert (table["latency_ms"] > 0).all() and (table["speedup_b1"] > 0).all()
    latency = {t["name"]: t for t in chart(at, "Live latency vs budget")["data"]}
    live_latency = latency[f"live ({results_module.LIVE_TIMED} texts timed)"]["y"]
    assert live_latency == pytest.approx(table["latency_ms"].tolist())
    precomputed = latency["precomputed (whole split)"]["y"]
    assert precomputed == pytest.approx([2 + 4 * b for b in SWEEP_BUDGETS])  # the fake sweeps.csv
    at.slider(key="sweep_budget").set_value(0.75)
    run(at)  # the live result stays when the page is redrawn
    assert chart(at, "Live accuracy vs budget") and chart(at, "Live latency vs budget")


def test_live_remeasure_takes_a_stratified_sample(at, results, monkeypatch):
    """BBC's test split is in class order (its first 50 texts are all business): the live
    re-measure runs N texts drawn from every class in its share, the same texts each time, and the
    page says so."""
    measured = []
    live_sweep = results_module.live_sweep

    def spy(ckpt, texts, labels, *args, **kwargs):
        measured.append((list(texts), list(labels)))
        return live_sweep(ckpt, texts, labels, *args, **kwargs)

    monkeypatch.setattr(results_module, "live_sweep", spy)
    open_page(at, "sweep")
    assert "stratified" in at.number_input(key="sweep_live_n").label
    at.number_input(key="sweep_live_n").set_value(10)
    for _ in range(2):
        at.button(key="sweep_live_go").click()
        run(at)
    assert Counter(measured[0][1]) == {c: 2 for c in range(5)}  # 10 texts of 5 classes of similar size
    assert measured[1] == measured[0]
    assert "live (10 texts, stratified)" in {t["name"] for t in chart(at, "Live accuracy vs budget")["data"]}
    assert any("stratified sample" in c.value for c in at.caption)
    assert (frame_with(at, "timed")["macro_f1"] > 0.5).all()  # not 0.23–0.32 beside a 0.97 curve


def test_live_macro_f1_is_over_the_classes_in_the_sample():
    """BBC's first 20 test texts are all business and the model calls one of them something else:
    the live macro-F1 is over the classes present (business's F1, 2a / (1 + a) at accuracy a), not a
    mean with the F1 = 0 of a class the sample does not have."""
    from app.state import get_checkpoint, test_samples

    samples = test_samples("bbc")
    texts, labels = samples.texts[:20], samples.labels[:20]
    [row] = results_module.live_sweep(get_checkpoint(BF), texts, labels, budgets=(1.0,))
    assert set(labels) == {0} and row["accuracy"] < 1  # one class, and a text called another
    a = row["accuracy"]
    assert row["macro_f1"] == pytest.approx(2 * a / (1 + a))


@pytest.mark.skipif("bbc-dense" not in available_models(), reason="no dense checkpoint shipped")
def test_sweep_page_with_a_dense_checkpoint(at, results):
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-dense")
    run(at)
    open_page(at, "sweep")
    assert any("sweep does not apply" in i.value for i in at.info)
    assert not at.get("plotly_chart") and not at.metric
    assert "budgetformer" in at.dataframe[0].value["model"].tolist()


@pytest.mark.parametrize("case", ["missing", "unreadable", "other dataset", "no sweep"])
def test_sweep_and_ablation_pages_without_results(tmp_path, monkeypatch, case):
    from budgetformer_core import shipped

    csv = tmp_path / "sweeps.csv"
    if case == "unreadable":
        csv.write_text("model,budget\nbudgetformer,own\n")
    elif case == "other dataset":
        fake_sweeps().assign(dataset="synthetic").to_csv(csv, index=False)
    elif case == "no sweep":
        fake_sweeps(without=("budgetformer",)).to_csv(csv, index=False)
    monkeypatch.setattr(shipped, "RESULTS", tmp_path)
    at = start()
    expected = {
        "missing": "sweeps\\.csv is missing",
        "unreadable": "dataset, accuracy are missing",
        "other dataset": "no results for the dataset **bbc**",
        "no sweep": "no budget sweep of **budgetformer**",
    }[case]
    open_page(at, "sweep")
    assert any(expected in m.value and "make precompute" in m.value for m in [*at.info, *at.error])
    assert not at.metric
    if case == "no sweep":  # the rest of the page still works; the live re-measure is offered
        assert at.button(key="sweep_live_go")
        open_page(at, "ablations")
        # the picked model's row comes from its config.json's test results: its accuracy, not timed
        picked = at.dataframe[0].value.set_index("model").loc["BudgetFormer (full)"]
        assert picked["checkpoint"] == "bbc-budgetformer" and pd.isna(picked["latency_ms"])
        assert picked["accuracy"] == pytest.approx(checkpoint_config("bbc-budgetformer")["test"]["accuracy"])
    else:
        assert not at.get("plotly_chart")
        open_page(at, "ablations")
        assert any(expected in m.value for m in [*at.info, *at.error])
        assert not at.get("plotly_chart") and not at.dataframe
