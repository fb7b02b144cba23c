"""The Budget sweep page draws the "cost vs input length" chart from the saved length sweep of
the model (``benchmarks/<model>-lengths.json``, made by ``budgetformer bench --seq-lens``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.models import DEFAULT_MODEL
from budgetformer_core.measure.bench import read_length_sweep

from .apptest import BF, start

ROOT = Path(__file__).resolve().parents[2]


def saved_sweep(model: str) -> Path:
    return ROOT / "benchmarks" / f"{model}-lengths.json"


def length_chart(at: AppTest) -> dict:
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    [spec] = [s for s in specs if s["layout"]["title"]["text"].startswith("Cost vs input length")]
    return spec


@pytest.mark.parametrize("model", sorted({DEFAULT_MODEL, BF}))
def test_the_model_has_its_cost_vs_length_chart(model):
    saved = read_length_sweep(saved_sweep(model))
    at = start(model)
    at.switch_page("views/sweep.py").run()
    assert not at.exception, [e.value for e in at.exception]
    spec = length_chart(at)
    assert [t["name"] for t in spec["data"]] == [
        "same model, all heads", "budgeted, s = 0.5 (measured)", "budgeted, s = 0.5 (FLOP ideal)"
    ]
    for trace in spec["data"]:
        assert trace["x"] == saved["seq_lens"] and all(y > 0 for y in trace["y"])
    dense, _, ideal = spec["data"]
    assert all(i < d for i, d in zip(ideal["y"], dense["y"], strict=True))  # b = 0.5 does less work
    assert spec["layout"]["xaxis"]["type"] == "log"
    assert any("saving vs all heads pays" in c.value or "does not pay" in c.value for c in at.caption)

    at.slider(key="sweep_budget").set_value(0.25).run()  # the chart follows the slider
    assert length_chart(at)["data"][1]["name"] == "budgeted, s = 0.25 (measured)"


@pytest.mark.parametrize("budget, shown", [(0.05, "0.125"), (0.7, "0.75"), (1.0, "1")])
def test_the_chart_shows_the_saved_budget_nearest_the_slider(budget, shown):
    from budgetformer_core.measure.bench import length_curve

    assert {p["budget"] for p in length_curve(read_length_sweep(saved_sweep(BF)), budget)} == {shown}
