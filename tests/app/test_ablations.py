"""The "Ablations" page: the full model and its ablations, where they disagree, and the error bars.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.logic import results as results_module
from app.logic.ablations import run_label

from .apptest import (
    BBA,
    MAIN,
    ROOT,
    TIMEOUT,
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
    shipped,
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


MINILM = "bbc-minilm-budgetformer"
"""The default model: the MiniLM fine-tune, whose family is its encoder's, not the from-scratch one."""
SWEEPS = ROOT / "precomputed" / "results" / "sweeps.csv"


def opened(model: str) -> AppTest:
    """A session opened on ``model``'s link straight onto the Ablations page (its first run)."""
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params["model"] = model
    at.switch_page("views/ablations.py")
    return run(at)


def column_config(at, index: int = 0) -> dict:
    """The column settings of the page's ``index``-th table, as the browser receives them."""
    return json.loads(at.dataframe[index].proto.columns)


def as_shown(value: float) -> str:
    """A fraction as a ``format="percent"`` column shows it: at most two decimals ("98.36%")."""
    return f"{value * 100:.2f}".rstrip("0").rstrip(".") + "%"


@pytest.mark.skipif(not (SWEEPS.is_file() and shipped(MINILM, "bbc-minilm-dense")), reason="no shipped MiniLM family")
def test_the_ablations_of_a_fine_tuned_model_are_its_own_family():
    """Picked bbc-minilm-budgetformer: its own row first (98.36 %, as the sidebar says) and its
    encoder's dense model, at once; the ablations none of which ships as a model run live on it on
    request (here on a sample of 10 texts), every row naming its checkpoint, its encoder's dense
    model the reference of every speed-up, and no model trained from scratch."""
    at = opened(MINILM)
    table, columns = at.dataframe[0].value, column_config(at)
    assert table["checkpoint"].tolist() == [MINILM, "bbc-minilm-dense"]  # nothing run before it is asked for
    assert columns["accuracy"]["type_config"]["format"] == "percent" and as_shown(table["accuracy"].iloc[0]) == "98.36%"
    assert table["reference"].unique().tolist() == ["bbc-minilm-dense"]
    assert columns["speedup_b1"]["label"] == "speed-up vs bbc-minilm-dense, batch 1"
    assert any("bbc\\-minilm\\-bba" in c.value for c in at.caption if c.value.startswith("Not in sweeps"))
    sweeps = pd.read_csv(SWEEPS)  # the estimate: 3 ablations × N texts × its latency per input at batch 32
    ms = sweeps.query("dataset == 'bbc' and model == 'minilm-budgetformer' and budget == 'own'")["latency_b32_ms"]
    go = at.button(key="ablation_live_go")
    assert go.label == run_label(426, ms.iloc[0] * 426 * 3 / 1000) and re.search(r"\(about \d+ (s|min)\)$", go.label)
    at.number_input(key="ablation_live_n").set_value(10)
    run(at)
    assert at.button(key="ablation_live_go").label == run_label(10, ms.iloc[0] * 10 * 3 / 1000)
    at.button(key="ablation_live_go").click()
    run(at)
    table = at.dataframe[0].value
    assert table["model"].tolist()[1:4] == ["no f_θ, run live", "no g_φ, run live", "random heads, run live"]
    assert table["checkpoint"].tolist() == [MINILM] * 4 + ["bbc-minilm-dense"]
    assert table["speedup_b1"][1:4].isna().all() and table["accuracy"][1:4].between(0, 1).all()
    assert not {"bbc-budgetformer", "bbc-dense", "bbc-bba", "bbc-no-budget-net"} & set(table["checkpoint"])
    assert any(c.value.startswith("Rows run live: on a stratified sample of 10 of the 426 test texts")
               for c in at.caption)
    open_page(at, "ablations")  # the session keeps them, from the cache
    assert at.dataframe[0].value["model"].tolist()[1:4] == table["model"].tolist()[1:4]


def test_a_bba_model_shows_its_family_and_says_no_ablation_runs_on_it(results):
    """Picked bbc-bba: it comes first and sits beside its dense model; nothing is offered to run
    live, and the page says why."""
    at = opened(BBA)
    table = at.dataframe[0].value
    assert table["checkpoint"].tolist() == [BBA, "bbc-dense"]
    expected = [csv_value(results, m, "own", "accuracy") for m in ("bba", "dense")]
    assert table["accuracy"].tolist() == pytest.approx(expected)
    assert any("BBA has no f\\_θ or g\\_φ to take away" in c.value for c in at.caption)
    assert "ablation_live_go" not in [b.key for b in at.button]


def test_ablations_without_a_trained_model_run_live_on_the_picked_one(at, results):
    """bbc-budgetformer's random-heads ablation is not shipped as a model: the button runs it on the
    model itself over the whole test split, a row named after the model's checkpoint, not timed."""
    open_page(at, "ablations")
    assert at.dataframe[0].value["model"].tolist()[3] == "dense"  # nothing run before it is asked for
    go = at.button(key="ablation_live_go")
    assert go.label.startswith("Run the live ablations on 426 test texts (about ") and go.label.endswith(" s)")
    go.click()
    run(at)
    table = at.dataframe[0].value
    assert table["model"].tolist()[3:5] == ["random heads, run live", "dense"]
    row = table.iloc[3]
    assert row["checkpoint"] == "bbc-budgetformer" and 0.5 < row["accuracy"] <= 1
    assert pd.isna(row["speedup_b1"]) and row["reference"] == "bbc-dense"
    assert any(c.value.startswith("Rows run live: on all 426 test texts; not timed") for c in at.caption)


@pytest.mark.skipif(not (SWEEPS.is_file() and shipped("ag_news-minilm-bba", "ag_news-minilm-dense")),
                    reason="no shipped AG News MiniLM models")
def test_the_ablations_of_a_fine_tuned_bba_model_are_its_encoders_models():
    """Picked ag_news-minilm-bba: its row and its encoder's dense model's, nothing from scratch,
    nothing run live (no f_θ or g_φ to take away), every speed-up against ag_news-minilm-dense."""
    at = opened("ag_news-minilm-bba")
    table = at.dataframe[0].value
    assert table["checkpoint"].tolist() == ["ag_news-minilm-bba", "ag_news-minilm-dense"]
    assert column_config(at)["speedup_b32"]["label"] == "speed-up vs ag_news-minilm-dense, batch 32"
    assert "ablation_live_go" not in [b.key for b in at.button]
    assert any("BBA has no f\\_θ or g\\_φ" in c.value for c in at.caption)
