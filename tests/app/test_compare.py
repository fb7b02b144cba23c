"""The "Side by side" page: two models, two budgets or two texts, each side the engine's own analysis.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.models import available_models

from .apptest import BBA, BF, MARKUP, SPORT, chart, config, metric, open_page, pick_model, requires_default_model, run

pytestmark = requires_default_model


def engine_analysis(model: str, text: str, budget: float | None = None):
    from app.logic.explore import run_analysis
    from app.state import get_checkpoint
    from budgetformer_core.model.budget import Control

    return run_analysis(get_checkpoint(model), text, None if budget is None else Control(budget=budget))


def shown_ks(at: AppTest, side: str) -> list[int]:
    return [int(k) for k in metric(at, f"{side} · Heads run").split(" / ")]


@pytest.mark.skipif(BBA not in available_models(), reason="no bbc bba checkpoint")
def test_side_by_side_two_models_two_budgets_two_texts(at):
    from app.logic.compare import side_differences
    from app.models import model_method

    open_page(at, "compare")
    at.text_area(key="sbs_text").input(SPORT)
    at.selectbox(key="sbs_model_B").set_value(BBA)
    run(at)
    bf, bba = engine_analysis(BF, SPORT), engine_analysis(BBA, SPORT)
    assert shown_ks(at, "A") == bf.k and shown_ks(at, "B") == bba.k  # each model's own analysis
    assert metric(at, "A · Budget s per layer") == " / ".join(f"{s:.2f}" for s in bf.budget)
    assert metric(at, "B · Budget b per layer") == " / ".join(f"{s:.2f}" for s in bba.budget)
    assert metric(at, "A · Prediction") == bf.label and metric(at, "B · Prediction") == bba.label
    a_map, b_map = chart(at, "A: Head relevance p"), chart(at, "B: Gate scores z")
    assert a_map["data"][0]["zmax"] == b_map["data"][0]["zmax"]  # one colour scale
    top = max(2 / config()["model"]["n_heads"], *(v for m in (bf.relevance, bba.relevance) for row in m for v in row))
    assert a_map["data"][0]["zmax"] == pytest.approx(top)
    lines = side_differences(bf, bba, model_method(BF), model_method(BBA))
    assert lines[1].startswith("layer 0: k ") and len(lines) == 1 + config()["model"]["n_layers"]
    [listed] = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert listed.replace("\\", "") == "\n".join(f"- {line}" for line in lines)

    # the same model at two budgets
    at.selectbox(key="sbs_model_B").set_value(BF)
    run(at)
    for side in "AB":
        at.radio(key=f"sbs_{side}_how").set_value("slider")
    run(at)
    for side, b in (("A", 0.25), ("B", 0.75)):
        at.slider(key=f"sbs_{side}_budget").set_value(b)
    run(at)
    assert shown_ks(at, "A") == engine_analysis(BF, SPORT, 0.25).k == [2] * len(bf.k)
    assert shown_ks(at, "B") == engine_analysis(BF, SPORT, 0.75).k == [6] * len(bf.k)
    assert any("k 2 vs 6" in m.value for m in at.markdown)

    # one model (bba) on two texts, with its budget control
    pick_model(at, BBA)
    open_page(at, "compare")
    at.radio(key="sbs_mode").set_value("texts")
    run(at)
    assert any("Text B is empty" in i.value for i in at.info)
    at.text_area(key="sbs_text_A").input(SPORT)
    at.text_area(key="sbs_text_B").input(MARKUP)
    at.radio(key="sbs_one_how").set_value("slider")
    run(at)
    at.slider(key="sbs_one_budget").set_value(0.25)
    run(at)
    assert shown_ks(at, "A") == engine_analysis(BBA, SPORT, 0.25).k and shown_ks(at, "B") == engine_analysis(
        BBA, MARKUP, 0.25).k
    assert not any(MARKUP in m.value for m in at.markdown)  # the texts stay in their text areas
