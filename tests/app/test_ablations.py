"""The "Ablations" page: the full model and its ablations, where they disagree, and the error bars.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import pandas as pd
import pytest

from app.logic import results as results_module

from .apptest import (
    ROOT,
    chart,
    charts,
    config,
    csv_value,
    extremes_shown,
    fake_sweeps,
    frame_with,
    open_page,
    requires_default_model,
    run,
)

pytestmark = requires_default_model


def test_ablation_page(at, results):
    from budgetformer_core import shipped

    open_page(at, "ablations")
    assert at.title[0].value == "Ablations"
    table = at.dataframe[0].value
    assert table["model"].tolist() == [
        "BudgetFormer (full)", "no budget net (no f_θ)", "no head scorer (no g_φ)", "dense", "BBA (own point)"
    ]  # fmt: skip
    models = ("budgetformer", "no-budget-net", "no-head-scorer", "dense", "bba")
    assert table["accuracy"].tolist() == pytest.approx([csv_value(results, m, "own", "accuracy") for m in models])
    bars = chart(at, "Accuracy and macro-F1")["data"]
    assert [t["name"] for t in bars] == ["accuracy", "macro-F1"] and bars[0]["x"] == table["model"].tolist()
    assert len(charts(at)) == 4

    # inputs on which they disagree: the made-up tables differ at 3, 10 and 20
    differ = frame_with(at, "right")
    labels = config()["label_names"]
    assert differ["index"].tolist() == [3, 10, 20]
    assert list(differ.columns) == ["index", "true", "budgetformer", "no-head-scorer", "dense", "right", "text"]
    assert differ["right"].tolist() == ["2 of 3", "1 of 3", "2 of 3"]
    assert set(differ["true"]) <= set(labels) and set(differ["budgetformer"]) <= set(labels)
    left_out = [c.value for c in at.caption if c.value.startswith("No per-example results")]
    assert left_out == ["No per-example results for: no\\-budget\\-net, bba; left out."]  # markdown-escaped
    assert any("3 of the 426 test inputs" in c.value for c in at.caption)
    from budgetformer_core.io.data import load_dataset

    assert at.text[0].value == load_dataset("bbc").split("test").texts[3][:3000]  # the first row, as text
    assert len(at.get("download_button")) == 3  # the table, its intervals, the disagreements

    # a model missing from sweeps.csv: one row per model that is there
    fake_sweeps(without=("no-budget-net", "bba")).to_csv(shipped.sweeps_csv(), index=False)
    run(at)
    assert at.dataframe[0].value["model"].tolist() == ["BudgetFormer (full)", "no head scorer (no g_φ)", "dense"]
    assert any(c.value.startswith("Not in sweeps") and "bba" in c.value for c in at.caption)


@pytest.mark.skipif(not all((ROOT / "precomputed" / "results" / "per_example" / f"bbc-{m}.parquet").is_file()
                            for m in results_module.INTERVAL_MODELS), reason="no shipped bbc tables")
@pytest.mark.artifacts
def test_error_bars_on_the_ablation_and_sweep_pages(at):
    """The shipped per-example tables' paired bootstrap intervals, as the engine computes them, in
    the Ablations page's table and on its accuracy bars, and on the sweep page's every-method chart."""
    from budgetformer_core.measure import bootstrap

    tables = {m: pd.read_parquet(ROOT / "precomputed" / "results" / "per_example" / f"bbc-{m}.parquet")
              for m in results_module.INTERVAL_MODELS}  # fmt: skip
    expected = bootstrap.compare(tables, list(results_module.ABLATION_PAIRS))
    open_page(at, "ablations")
    shown = frame_with(at, "95% interval (points)")
    names = results_module.ABLATIONS
    assert shown["model"].tolist() == [names[m] for m in expected["a"]]
    assert shown["against"].tolist() == [names[m] for m in expected["b"]]
    assert shown["difference (points)"].tolist() == pytest.approx((expected["difference"] * 100).round(2).tolist())
    assert shown["95% interval (points)"].tolist() == [
        f"[{lo * 100:+.2f}, {hi * 100:+.2f}]" for lo, hi in zip(expected["low"], expected["high"], strict=True)
    ]
    for row in shown.itertuples():  # the point difference lies in its interval
        lo, hi = (float(x) for x in row[6].strip("[]").split(", "))
        assert lo <= row[5] <= hi
    assert set(shown["verdict"]) <= {"within noise", "beyond noise"}
    assert any("Paired bootstrap over the 426 test inputs (2,000 resamples, seed 0)" in c.value for c in at.caption)
    # the spread over training seeds, as scripts/seed_table.py wrote it (seed 0: the shipped models)
    runs = bootstrap.read_seed_runs(ROOT / "precomputed" / "results" / "seeds.csv")
    seeds = frame_with(at, "per seed (%)")
    assert seeds.equals(results_module.seed_table(bootstrap.seed_spread(runs, "bbc")))
    assert (seeds["seeds"] == 3).all() and set(seeds["model"]) == set(results_module.INTERVAL_MODELS)
    intervals = bootstrap.accuracy_intervals(tables)
    accuracy = chart(at, "Accuracy and macro-F1")["data"][0]
    keys = [m for m, name in names.items() if name in accuracy["x"]]
    assert accuracy["error_y"]["array"] == pytest.approx([intervals[m].high - intervals[m].estimate for m in keys])

    open_page(at, "sweep")
    methods = {t["name"]: t for t in chart(at, "Accuracy vs cost, every method")["data"]}
    assert list(methods) == ["BBA (one checkpoint)", "post-hoc (zero-shot)", "BudgetFormer (its own point)", "dense",
                             "static gates", "post-hoc + recovery", "dense level"]
    rows = pd.read_csv(ROOT / "precomputed" / "results" / "sweeps.csv", dtype={"budget": str})
    own = rows[(rows.dataset == "bbc") & (rows.model == "budgetformer") & (rows.budget == "own")].iloc[0]
    assert methods["BudgetFormer (its own point)"]["x"] == [pytest.approx(own.heads_fraction)]
    iv = intervals["budgetformer"]
    assert methods["BudgetFormer (its own point)"]["error_y"]["array"] == [pytest.approx(iv.high - iv.estimate)]
    assert methods["static gates"]["x"] == pytest.approx([0.25, 0.5, 0.75])
    assert chart(at, "Latency vs cost, every method")["layout"]["xaxis"]["title"]["text"].startswith("heads run")
    at.radio(key="sweep_cost_axis").set_value("flops_ratio")
    run(at)
    assert chart(at, "Accuracy vs cost, every method")["layout"]["xaxis"]["title"]["text"] == "FLOPs vs dense"
    sweep_pairs = frame_with(at, "95% interval (points)")
    assert sweep_pairs["model"].tolist() == ["budgetformer"] * 5 and "dense" in sweep_pairs["against"].tolist()


def test_disagreements_and_extremes_open_in_explore(at, results):
    from budgetformer_core.io.data import load_dataset

    texts = load_dataset("bbc").split("test").texts
    open_page(at, "ablations")
    assert at.selectbox(key="ablation_pick").value == 3  # the first input they disagree on
    at.button(key="ablation_open").click()
    run(at)
    assert at.title[0].value == "Explore an input" and at.text_area(key="text").value == texts[3]
    assert any(c.value.startswith("Test text #3 of bbc") for c in at.caption)

    open_page(at, "easy_hard")
    pick = extremes_shown(at)[1][0][0]  # the highest budget
    at.selectbox(key="eh_open_pick").set_value(pick)
    run(at)
    at.button(key="eh_open").click()
    run(at)
    assert at.title[0].value == "Explore an input" and at.text_area(key="text").value == texts[pick]
    assert any(c.value.startswith(f"Test text #{pick} of bbc") for c in at.caption)
