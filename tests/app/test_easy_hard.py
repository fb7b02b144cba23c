"""The "Easy vs hard" page: budgets against difficulty, the extremes, and the adaptivity figures.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import pandas as pd
import pytest

from .apptest import (
    BF,
    PER_EXAMPLE,
    all_markdown,
    chart,
    config,
    extremes_shown,
    metric,
    number,
    open_page,
    requires_default_model,
    run,
    shipped,
)

pytestmark = requires_default_model


@pytest.mark.artifacts
def test_easy_vs_hard_page(at):
    cfg = config()
    n_layers, n = cfg["model"]["n_layers"], cfg["test"]["n"]
    open_page(at, "easy_hard")
    assert at.title[0].value == "Easy vs hard"
    rhos = [
        number(metric(at, label))
        for label in ("ρ(s, prediction entropy)", "ρ(s, loss)")
    ]
    assert len(rhos) == 2 and all(-1 <= r <= 1 for r in rhos)
    assert number(metric(at, "Mean s on the test split")) == pytest.approx(
        cfg["test"]["mean_budget"], abs=0.002
    )
    hist = chart(at, "Mean budget s over")["data"][0]  # bars of counts, binned by the server
    assert sum(hist["y"]) == n and all(0 < s < 1 for s in hist["x"])
    low, high = hist["customdata"][0][0], hist["customdata"][-1][1]  # the first bin's start, the last one's end
    scatter = chart(at, "s vs prediction entropy, loss and length")
    assert [sum(len(t["x"]) for t in scatter["data"] if t["xaxis"] == x) for x in ("x", "x2", "x3")] == [n] * 3
    assert [t["name"] for t in chart(at, "Mean budget s by true class")["data"]] == cfg[
        "label_names"
    ]

    lowest, highest = extremes_shown(at)
    assert len(lowest) == len(highest) == 10
    assert [v for _, v in lowest] == sorted(v for _, v in lowest)
    assert [v for _, v in highest] == sorted((v for _, v in highest), reverse=True)
    assert lowest[0][1] == pytest.approx(low, abs=5e-4) and highest[0][1] == pytest.approx(high, abs=5e-4)
    a, b = lowest[0][0], highest[0][0]
    maps = chart(at, "Head relevance p")  # both texts' maps in one figure, on one colour scale
    assert [n["text"] for n in maps["layout"]["annotations"]] == [f"A: #{a}", f"B: #{b}"]
    assert len(maps["data"]) == 2 * 2 + 2  # per text the heads that ran and the grey ones, then the legend
    assert maps["data"][0]["zmax"] == maps["data"][2]["zmax"] and [t["xaxis"] for t in maps["data"][:4]] == [
        "x", "x", "x2", "x2"]
    for trace in maps["data"][:4]:
        assert len(trace["z"]) == n_layers

    c = min(set(range(3)) - {a, b})
    at.number_input(key=f"eh_b_{BF}").set_value(c)
    run(at)
    assert [n["text"] for n in chart(at, "Head relevance p")["layout"]["annotations"]] == [f"A: #{a}", f"B: #{c}"]


def expected_adaptivity(model: str, needed: list[int] | None = None):
    """The figures the page should show, from the shipped per-example tables."""
    from budgetformer_core.analysis.adaptivity import from_frames
    from budgetformer_core.shipped import dense_reference

    frame = pd.read_parquet(PER_EXAMPLE / f"{model}.parquet")
    reference = pd.read_parquet(PER_EXAMPLE / f"{dense_reference(config(model)['dataset'], model, full=True)}.parquet")
    return from_frames(frame, config(model)["model"]["n_heads"], reference, needed)


@pytest.mark.skipif(not shipped(BF, "bbc-dense"), reason="no shipped bbc tables")
@pytest.mark.artifacts
def test_easy_vs_hard_adaptivity_figures(at):
    from app.logic.examples import adaptivity_reading

    expected = expected_adaptivity(BF)
    open_page(at, "easy_hard")
    assert metric(at, "Accuracy") == f"{expected.accuracy:.1%}"
    assert metric(at, "Mean heads fraction") == f"{expected.mean_heads_fraction:.1%}"
    assert number(metric(at, "ρ(s, dense loss)")) == pytest.approx(expected.rho_s_reference_loss, abs=0.005)
    ratio = metric(at, "Heads run, hard / easy third")
    assert ratio.endswith("×") and float(ratio[:-1]) == pytest.approx(expected.heads_ratio_hard_easy, abs=0.005)
    reading = adaptivity_reading(expected)
    assert any(reading.split(":")[0] in m for m in all_markdown(at))
    assert not [m for m in at.metric if m.label.startswith("ρ(k")]  # bbc does not say what it needs
    bars = chart(at, "Heads run k per input")  # one figure, a panel per layer
    for layer, figures in enumerate(expected.layers):
        axis = "xaxis" + ("" if layer == 0 else str(layer + 1))
        assert bars["layout"][axis]["type"] == "category"
        assert bars["data"][layer]["xaxis"] == axis.replace("axis", "")
        shown = dict(zip(bars["data"][layer]["x"], bars["data"][layer]["y"], strict=True))
        assert {k: v for k, v in shown.items() if v} == figures.k_hist and sum(shown.values()) == expected.n
        assert metric(at, f"Layer {layer}: distinct head sets") == str(figures.distinct_head_sets)
        assert metric(at, f"Layer {layer}: head-set entropy") == f"{figures.head_set_entropy_bits:.2f} bits"
    assert chart(at, "Mean budget s over")  # the page's earlier content follows


@pytest.mark.skipif(not shipped("bbc-bba", "bbc-dense"), reason="no shipped bba model")
@pytest.mark.artifacts
def test_easy_vs_hard_bba_says_in_one_sentence_that_its_budget_is_fixed(at):
    expected = expected_adaptivity("bbc-bba")
    assert expected.rho_s_reference_loss is None  # b is the same for every input: nothing to correlate
    at.sidebar.selectbox(key="model_for_bbc").set_value("bbc-bba")
    run(at)
    open_page(at, "easy_hard")
    [sentence] = [i.value for i in at.info if "does not vary per input" in i.value]
    assert "b = 0.50" in sentence and "the requested b sets it, not the text" in sentence
    assert not at.metric and not [m.value for m in at.metric if "nan" in m.value.lower()]


@pytest.mark.skipif(not shipped("synthetic-budgetformer", "synthetic-dense"), reason="no shipped synthetic model")
@pytest.mark.artifacts
def test_easy_vs_hard_needed_heads_on_a_synthetic_task(at):
    from budgetformer_core.io.data import load_dataset

    needed = load_dataset("synthetic").split("test").needed_heads
    expected = expected_adaptivity("synthetic-budgetformer", needed)
    at.sidebar.selectbox(key="dataset").set_value("synthetic")
    run(at)
    at.sidebar.selectbox(key="model_for_synthetic").set_value("synthetic-budgetformer")
    run(at)
    open_page(at, "easy_hard")
    assert metric(at, "k ≥ needed in every layer") == f"{expected.frac_k_at_least_needed:.1%}"
    rho_k = metric(at, "ρ(k, needed heads)")
    if expected.rho_k_needed is None:
        assert rho_k == "n/a" and any("ρ(k, needed heads) is n/a" in c.value.replace("\\", "") for c in at.caption)
    else:
        assert number(rho_k) == pytest.approx(expected.rho_k_needed, abs=0.005)
    bars = chart(at, "Mean heads run k per needed n")
    assert [int(n) for n in bars["data"][0]["x"]] == sorted(set(needed))


@pytest.mark.skipif(not shipped(BF, "bbc-dense"), reason="no shipped bbc tables")
@pytest.mark.artifacts
def test_easy_vs_hard_per_class_rho_is_scipys(at):
    """Within each class, ρ(s, dense loss) is scipy's Spearman ρ on the per-example tables' rows
    of that class."""
    from scipy.stats import spearmanr

    frame = pd.read_parquet(PER_EXAMPLE / f"{BF}.parquet")
    dense = pd.read_parquet(PER_EXAMPLE / "bbc-dense.parquet")
    open_page(at, "easy_hard")
    [shown] = [t.value for t in at.table if "ρ(s, dense loss)" in t.value.columns]
    labels = config()["label_names"]
    assert shown.index.tolist() == labels
    for label, name in enumerate(labels):
        rows = frame["label"] == label
        expected = spearmanr(frame.loc[rows, "mean_s"], dense.loc[rows, "loss"]).statistic
        assert shown.loc[name, "ρ(s, dense loss)"] == pytest.approx(expected, abs=1e-9), name
        assert shown.loc[name, "inputs"] == rows.sum()
