"""The Head atlas page through AppTest, on a BudgetFormer, a bba, a random 6 layers × 12 heads model
and the shipped BudgetFormer fine-tuned from MiniLM (6 × 12).

Assertions are on rendered values: the usage maps against counts made here from the per-example
table (the shipped parquet, or the engine's own evaluation for the 6 × 12 model), the slice
difference against the two slice maps, and the inputs listed for a selection on the input map
against the points selected. A selection on a chart cannot be made through AppTest's widgets: it
is sent as the browser sends it, the chart's widget state (a JSON string) with the next run.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.testing.v1 import AppTest

from app.models import available_models
from budgetformer_core import shipped
from budgetformer_core.analysis.infer import evaluate_split
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import encode

from ..conftest import DEEP
from .apptest import MAIN, TIMEOUT, chart, run

SHIPPED = ["bbc-budgetformer", "bbc-bba"]
MINILM = "bbc-minilm-budgetformer"
MODELS = [*SHIPPED, DEEP, MINILM]

pytestmark = pytest.mark.skipif(
    not set(SHIPPED) <= set(available_models()), reason="the shipped bbc models are missing"
)


@pytest.fixture(params=MODELS)
def model(request, monkeypatch) -> str:
    """The model's name; for the 6 × 12 model, the app's checkpoint folder is the one holding it."""
    if request.param == DEEP:
        monkeypatch.setattr(shipped, "CHECKPOINTS", request.getfixturevalue("deep_checkpoint").parent)
    elif request.param not in available_models():
        pytest.skip(f"{request.param} is not shipped here")
    return request.param


def per_example_frame(name: str) -> pd.DataFrame:
    """The per-example test table: the shipped parquet, or (a model not shipped) the engine's
    evaluation of the BBC test split."""
    path = shipped.per_example_path(name)
    if path.is_file():
        return pd.read_parquet(path)
    ckpt = load_checkpoint(shipped.CHECKPOINTS / name)
    split = load_dataset("bbc", seed=0).split("test")
    ids, _ = encode(ckpt.tokenizer, split.texts, ckpt.config.max_len)
    return evaluate_split(ckpt, split).to_frame([len(x) for x in ids])


def counts(frame: pd.DataFrame, n_layers: int, n_heads: int) -> np.ndarray:
    """(L, H) how many rows ran each head, from the ``heads{l}`` cells."""
    out = np.zeros((n_layers, n_heads), dtype=int)
    for layer in range(n_layers):
        for cell in frame[f"heads{layer}"]:
            for head in str(cell).split():
                out[layer, int(head)] += 1
    return out


def open_atlas(name: str, section: str = "Head usage") -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params["model"] = name  # a link names the model
    at.switch_page("views/atlas.py")
    at.session_state["atlas_section"] = section
    return run(at)


def send_selection(at: AppTest, key: str, state: dict) -> AppTest:
    """Run again with the selection ``state`` on the chart or table ``key``, as the browser
    sends it (the element's widget state, a JSON string)."""
    [element] = [e for e in [*at.get("plotly_chart"), *at.dataframe] if e.proto.id.endswith(f"-{key}")]
    states: WidgetStates = at._tree.get_widget_states()
    widget = states.widgets.add()
    widget.id, widget.string_value = element.proto.id, json.dumps(state)
    at._run(states)
    assert not at.exception, [e.value for e in at.exception]
    return at


def listed(at: AppTest) -> pd.DataFrame:
    """The last listing of inputs on the page (the table with the links to Explore)."""
    tables = [t.value for t in at.dataframe if "explore" in t.value.columns]
    assert tables, "no inputs listed"
    return tables[-1]


def test_usage_slices_and_a_selection_on_the_input_map(model):
    at = open_atlas(model)
    frame = per_example_frame(model)
    n = len(frame)
    usage = chart(at, "Share of inputs that ran each head")
    whole = np.array(usage["data"][0]["z"])
    n_layers, n_heads = whole.shape
    assert (n_layers, n_heads) == ((6, 12) if model in (DEEP, MINILM) else (2, 8))
    np.testing.assert_allclose(whole, counts(frame, n_layers, n_heads) / n, atol=1e-12)

    # two slices: class 1 against the inputs the model got right
    at.selectbox(key="atlas_A_class").set_value(1)
    at.selectbox(key="atlas_A_outcome").set_value("any")  # it opens on the inputs the model got right
    at.selectbox(key="atlas_B_outcome").set_value("right")
    run(at)
    usage = chart(at, "Share of inputs that ran each head")
    share_a, share_b = (np.array(usage["data"][i]["z"]) for i in (1, 2))
    a_rows, b_rows = frame[frame["label"] == 1], frame[frame["correct"]]
    np.testing.assert_allclose(share_a, counts(a_rows, n_layers, n_heads) / len(a_rows), atol=1e-12)
    np.testing.assert_allclose(share_b, counts(b_rows, n_layers, n_heads) / len(b_rows), atol=1e-12)
    diff = chart(at, "Slice A − slice B")["data"][0]
    np.testing.assert_allclose(np.array(diff["z"]), share_a - share_b, atol=1e-12)
    assert diff["zmid"] == 0 and diff["colorbar"]["title"]["text"] == "A − B"  # its own legend

    # the input map: a box over the lower left of the map lists exactly the points inside it
    at.session_state["atlas_section"] = "Input map"
    run(at)
    spec = chart(at, "Inputs placed by their relevance p")
    assert spec["layout"]["dragmode"] == "select"
    points = [(x, y, row) for trace in spec["data"] for x, y, row in zip(trace["x"], trace["y"], trace["customdata"])]
    assert sorted(row for *_, row in points) == list(range(n))  # every input once
    x0, y0 = np.median([p[0] for p in points]), np.median([p[1] for p in points])
    inside = [(x, y, row) for x, y, row in points if x <= x0 and y <= y0]
    assert 0 < len(inside) < n
    send_selection(at, "atlas_map", {"selection": {
        "points": [{"x": x, "y": y, "customdata": row, "point_index": i} for i, (x, y, row) in enumerate(inside)],
        "point_indices": list(range(len(inside))), "box": [{"x": [min(p[0] for p in points), x0],
                                                            "y": [min(p[1] for p in points), y0]}], "lasso": [],
    }})  # fmt: skip
    rows = sorted(row for *_, row in inside)
    shown = listed(at)
    assert shown["index"].tolist() == frame["index"].iloc[rows].tolist()
    assert all(link == f"./?model={model}&index={i}&mode=learned" for link, i in zip(shown["explore"], shown["index"]))
    picked = frame.iloc[rows]
    k_mean = picked[[f"k{layer}" for layer in range(n_layers)]].to_numpy(float).mean()
    [summary] = [m.value for m in at.markdown if "selected input" in m.value]
    assert f"accuracy **{picked['correct'].mean():.1%}**" in summary and f"mean k **{k_mean:.2f}**" in summary


def test_a_bba_model_at_another_budget_runs_nested_subsets_of_its_heads():
    at = open_atlas("bbc-bba")
    own = np.array(chart(at, "Share of inputs that ran each head")["data"][0]["z"])
    at.select_slider(key="atlas_b").set_value(0.25)
    run(at)
    usage = chart(at, "Share of inputs that ran each head")
    assert "at b = 0.25" in usage["layout"]["title"]["text"]
    lower = np.array(usage["data"][0]["z"])
    np.testing.assert_allclose(lower.sum(1), [2, 2])  # ⌊0.25 · 8⌋ = 2 heads per input in each layer
    assert (lower <= own + 1e-12).all()  # nested: a head runs at b = 0.25 only where it runs at 0.5


def test_head_sets_and_head_card(monkeypatch, deep_checkpoint):
    monkeypatch.setattr(shipped, "CHECKPOINTS", deep_checkpoint.parent)
    frame = per_example_frame(DEEP)
    at = open_atlas(DEEP, "Head sets")
    at.selectbox(key="atlas_sets_layer").set_value(3)
    run(at)
    [sets] = [t.value for t in at.dataframe if "heads" in t.value.columns]
    expected = frame["heads3"].value_counts()
    assert sets["inputs"].tolist() == sorted(expected.to_numpy().tolist(), reverse=True)[: len(sets)]
    top = sets.iloc[0]
    assert top["inputs"] == expected[top["heads"]]
    assert top["accuracy"] == pytest.approx(frame.loc[frame["heads3"] == top["heads"], "correct"].mean())
    send_selection(at, "atlas_sets", {"selection": {"rows": [0], "columns": [], "cells": []}})
    assert listed(at)["index"].tolist() == frame.loc[frame["heads3"] == top["heads"], "index"].tolist()[:500]

    # the head card of the head that ran most often in layer 3
    head = int(np.argmax(counts(frame, 6, 12)[3]))
    at.session_state["atlas_section"] = "Head card"
    run(at)
    at.selectbox(key="atlas_card_layer").set_value(3)
    at.selectbox(key="atlas_card_head").set_value(head)
    run(at)
    ranking = listed(at)["p"].tolist()
    assert len(ranking) == 10 and ranking == sorted(ranking, reverse=True)
    bars = chart(at, f"Where layer 3, head {head} attends")["data"][0]
    assert bars["y"] == ["first token", "same token", "previous token", "next token", "punctuation"]
    assert all(0 <= share <= 1 for share in bars["x"])
