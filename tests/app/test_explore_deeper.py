"""Explore's deeper views through AppTest, for a BudgetFormer and a bba model: which tokens raised
or lowered each layer's budget (highlighted text), one head's attention as the structural path
computed it, the JSON export holding both, and the page's address reopening the same view.

Assertions are on rendered values: the highlighted numbers against the engine's, attention rows
summing to 1 over the tokens, heads that did not run marked not computed, the widgets a link
sets.
"""

from __future__ import annotations

import json
import re

import pytest
import streamlit.testing.v1.app_test as app_test_module
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from app.links import LINK_TEXT_LIMIT, link_params, read_link
from app.method import method_of
from app.models import DEFAULT_MODEL, available_models
from app.settings import Settings
from budgetformer_core.analysis.explain import explain
from budgetformer_core.analysis.report import attribution_html
from budgetformer_core.config import ModelConfig
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint

from ..conftest import PRECOMPUTED
from .apptest import MAIN, TIMEOUT, chart, metric, run, type_text

TEXT = "Shares in the bank rose after it reported record profits <b>and</b> sales"
MODELS = ["bbc-budgetformer", "bbc-bba"]

pytestmark = pytest.mark.skipif(
    not set(MODELS) <= set(available_models()), reason="the shipped bbc models are missing"
)


@pytest.fixture
def stored(monkeypatch) -> list[MemoryMediaFileStorage]:
    """The media storages of the AppTest runs (where download buttons keep their files)."""
    made: list[MemoryMediaFileStorage] = []

    class Kept(MemoryMediaFileStorage):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(app_test_module, "MemoryMediaFileStorage", Kept)
    return made


def exported(stored: list[MemoryMediaFileStorage], name: str) -> dict:
    [record] = [f.content for f in stored[-1]._files_by_id.values() if f.filename == f"analysis-{name}.json"]
    return json.loads(record)


def highlighted(at: AppTest) -> list[list[tuple[str, float]]]:
    """Per layer, the (token, number) of the highlighted text (after the legend)."""
    bodies = [el.proto.body for el in at.get("html")]
    assert bodies[0].startswith('<div style="font-size') and "raised" in bodies[0]  # the legend
    pattern = re.compile(r'<span data-a="([^"]+)"[^>]*>([^<]*)</span>')
    return [[(tok, float(a)) for a, tok in pattern.findall(body)] for body in bodies[1:]]


@pytest.mark.parametrize("name", MODELS)
def test_attribution_and_head_attention_views(name, stored):
    ckpt = load_checkpoint(PRECOMPUTED / name)
    H, L = ckpt.config.n_heads, ckpt.config.n_layers
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    at.sidebar.selectbox(key="model_for_bbc").set_value(name)
    run(at)
    type_text(at, TEXT)
    assert not at.get("html") and not at.get("plotly_chart")[-1:] == []  # nothing computed until asked
    at.toggle(key="explain_on").set_value(True)
    at.toggle(key="attention_on").set_value(True)
    run(at)

    # why this budget: one highlighted line per layer, the engine's numbers, markup as text
    [e] = explain(ckpt, [TEXT])
    layers = highlighted(at)
    assert len(layers) == L
    for shown, tokens, numbers in zip(layers, [e.tokens] * L, e.budget_attribution, strict=True):
        assert [t for t, _ in shown] == [t.replace("<", "&lt;").replace(">", "&gt;") for t in tokens]
        assert [a for _, a in shown] == pytest.approx(numbers, abs=1e-5)
    assert any(abs(a) > 1e-3 for row in e.budget_attribution for a in row)
    assert not any("<b>" in el.proto.body for el in at.get("html"))
    what = "gate margin" if name == "bbc-bba" else "s"
    assert any(m.value.startswith(f"**Layer 0** · {what} = ") for m in at.markdown)

    # what the heads looked at: the heads that ran, rows summing to 1, the others not computed
    captions = " ".join(c.value for c in at.caption)
    ran = [int(h) for h in re.search(r"ran heads ([\d, ]+)", captions).group(1).split(", ")]
    assert at.selectbox(key="att_head").value == ran[0]
    attention = chart(at, f"Attention of layer 0, head {ran[0]}")["data"][0]
    T = len(e.tokens)
    assert len(attention["z"]) == T and all(sum(row) == pytest.approx(1, abs=1e-5) for row in attention["z"])
    skipped = [h for h in range(H) if h not in ran]
    assert skipped and f"not computed: {', '.join(map(str, skipped))}." in " ".join(c.value for c in at.caption)
    at.selectbox(key="att_head").set_value(skipped[0])
    run(at)
    assert any(f"Head {skipped[0]} did not run" in i.value for i in at.info)
    titles = [json.loads(s.proto.spec)["layout"]["title"]["text"] for s in at.get("plotly_chart")]
    assert not [t for t in titles if t.startswith("Attention of")]

    # the export holds the tokens and the attribution
    record = exported(stored, name)
    assert record["input"]["tokens"] == e.tokens
    for got, numbers in zip(record["explanation"]["budget_attribution"], e.budget_attribution, strict=True):
        assert got == pytest.approx(numbers, abs=1e-5)


def test_a_forced_budget_has_nothing_to_attribute():
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(mode="slider", budget="0.5")
    run(at).toggle(key="explain_on").set_value(True)
    run(at)
    assert any(i.value.startswith("Here s is set") for i in at.info) and not at.get("html")


def test_a_link_reopens_the_same_view():
    samples = load_dataset("bbc").split("test")
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model="bbc-budgetformer", index="7", mode="force_k", k="3",
                           ablation="no-head-scorer")
    run(at)
    assert at.text_area(key="text").value == samples.texts[7]
    assert any(c.value.startswith("Test text #7 of bbc") for c in at.caption)
    assert at.radio(key="budget_mode").value == "force_k" and at.slider(key="force_k").value == 3
    assert at.toggle(key="no_g").value and at.radio(key="head_ablation").value == "uniform"
    assert metric(at, "Heads run") == "3 / 3"
    ran = chart(at, "Head relevance p")["data"][0]["z"]
    assert [[v is not None for v in row] for row in ran] == [[h < 3 for h in range(8)]] * 2  # no g_φ: heads 0-2
    assert dict(at.query_params) == {"model": "bbc-budgetformer", "index": "7", "mode": "force_k", "k": "3",
                                     "ablation": "no-head-scorer"}
    # a change is written back
    at.slider(key="force_k").set_value(5)
    run(at)
    assert at.query_params["k"] == "5" and metric(at, "Heads run") == "5 / 5"
    type_text(at, TEXT)
    assert at.query_params["text"] == TEXT and "index" not in at.query_params


def test_bad_link_values_fall_back_with_a_message():
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model="gpt-9", index="99999", mode="turbo", budget="nan", k="-2", ablation="all",
                           seed="x")
    run(at)
    warnings = " ".join(w.value for w in at.warning)
    for name in ("model", "index", "mode", "budget", "k", "ablation", "seed"):
        assert f"link's {name}" in warnings or (name == "model" and "names a model that is not here" in warnings)
    assert at.sidebar.selectbox(key="model_for_bbc").value == DEFAULT_MODEL
    assert at.radio(key="budget_mode").value == "learned" and metric(at, "Prediction") == "sports"  # the default text
    assert at.query_params["model"] == DEFAULT_MODEL and at.query_params["mode"] == "learned"


def test_link_parameters_round_trip():
    method = method_of(ModelConfig(method="budgetformer", head_weighting="scaled"))
    for settings in (Settings(), Settings("slider", budget=0.35), Settings("force_k", k=4),
                     Settings(no_budget_net=True, head_ablation="random", seed=12)):
        params = link_params("m", "a text", None, settings, method)
        view, notes = read_link(params, method, 8, None)
        assert not notes and view.text == "a text"
        back = Settings(view.budget_mode, view.budget, view.k or 2, view.no_budget_net, view.head_ablation,
                           view.seed)
        assert back.canonical() == settings.canonical()
    assert "text" not in link_params("m", "x" * (LINK_TEXT_LIMIT + 1), None, Settings(), method)
    bba = method_of(ModelConfig(method="bba"))
    view, notes = read_link({"ablation": "no-budget-net", "budget": "0.26"}, bba, 8, None)
    assert view.budget == 0.25 and not view.no_budget_net and "does not apply to a bba model" in notes[0]
    assert link_params("m", "t", 3, Settings("slider", budget=0.25), bba) == {
        "model": "m", "index": "3", "mode": "slider", "budget": "0.25"}


def test_tokens_written_like_markup_stay_text():
    from app.charts.explore import attention_heatmap

    tokens = ["<script>", "alert", "</script>", "<b>x</b>"]
    body = attribution_html(tokens, [0.1, -0.2, 0.0, 0.05], 0.2)
    assert "<script>" not in body and "<b>" not in body and body.count("&lt;script&gt;") == 2  # text and tooltip
    spec = attention_heatmap([[0.25] * 4] * 4, tokens, "t").to_dict()
    assert spec["layout"]["yaxis"]["ticktext"][0] == "&lt;script&gt; ·0"  # plotly shows the entity as "<"
    assert all("<" not in label for label in spec["layout"]["xaxis"]["ticktext"])
