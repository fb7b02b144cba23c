"""One speed baseline, named everywhere: every latency difference and speed-up a page shows comes
from one sweeps.csv row's two latencies (the model's and its dense reference's, timed in the same
rounds), and every speed figure's label names that reference.

The pages read a small sweeps.csv (:func:`apptest.write_sweeps`: made-up latencies, different on
every row, some rows not timed); the checks hold for any numbers, as they must for a file timed
again.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import speed
from app.logic import results
from app.models import available_models
from budgetformer_core.measure.latency import Latency
from budgetformer_core.shipped import CHECKPOINTS

from .apptest import BF, NOT_TIMED_MODEL, SPORT, run, start, typed_arrays_as_lists, write_sweeps

pytestmark = pytest.mark.skipif(
    not {BF, "bbc-dense"} <= set(available_models()), reason=f"{CHECKPOINTS} lacks the bbc models"
)


@pytest.fixture
def sweeps(tmp_path, monkeypatch) -> pd.DataFrame:
    from budgetformer_core import shipped

    frame = write_sweeps(tmp_path / "sweeps.csv")
    monkeypatch.setattr(shipped, "RESULTS", tmp_path)
    return frame


def page_charts(page: AppTest) -> dict[str, dict]:
    return {(spec := typed_arrays_as_lists(json.loads(el.proto.spec)))["layout"]["title"]["text"]: spec
            for el in page.get("plotly_chart")}


@pytest.fixture
def page() -> AppTest:
    """The app, run once: the Explore page on bbc-budgetformer."""
    return start()


def row_of(frame: pd.DataFrame, model: str, budget: str) -> pd.Series:
    [i] = frame.index[(frame["model"] == model) & (frame["budget"] == budget)]
    return frame.loc[i]


def speed_texts(page: AppTest) -> list[str]:
    """Every chart that speaks of speed or latency (its title, axes and trace names, as one line),
    and every such metric (label, value and note)."""
    found = []
    for title, spec in page_charts(page).items():
        axes = [spec["layout"].get(a, {}).get("title", {}) for a in ("xaxis", "yaxis")]
        words = [title, *[a.get("text", "") if isinstance(a, dict) else a for a in axes],
                 *[t.get("name", "") for t in spec["data"]]]
        if any(re.search(r"speed|×|latency|\bms\b", w, re.I) for w in words[:3]):
            found.append(" · ".join(words))
    for m in page.metric:
        if re.search(r"speed|latency", m.label, re.I):
            found.append(f"{m.label} · {m.value} · {m.proto.delta}")
    return found


def names_its_baseline(text: str) -> bool:
    """A speed figure names the dense reference, or (a saving against the model itself) says so."""
    saving = "saving vs the same model at all heads" in text and "same model, all heads" in text
    return "bbc-dense" in text or saving


def test_sweep_page_figures_are_the_rows_and_name_the_baseline(page, sweeps):
    page.switch_page("views/sweep.py")
    run(page)
    for b in (0.5, 0.25):
        page.slider(key="sweep_budget").set_value(b)
        run(page)
        row = row_of(sweeps, "budgetformer", f"{b:g}")
        cards = {m.label: m for m in page.metric}
        assert cards["Latency (batch 1)"].value == f"{row['latency_ms']:.2f} ms"
        delta = row["latency_ms"] - row["dense_latency_ms"]
        assert cards["Latency (batch 1)"].proto.delta == f"{'−' if delta < 0 else '+'}{abs(delta):.2f} ms vs bbc-dense"
        assert cards["Speed-up vs dense"].value == f"{row['dense_latency_ms'] / row['latency_ms']:.2f}×"
        assert "bbc-dense" in cards["Speed-up vs dense"].proto.delta
    specs = page_charts(page)
    [title] = [t for t in specs if t.startswith("Speed-up over dense")]
    measured = {t["name"]: t for t in specs[title]["data"]}["measured, batch 1"]
    curve = sweeps[(sweeps["model"] == "budgetformer") & (sweeps["budget"] != "own")]
    assert measured["y"] == pytest.approx((curve["dense_latency_ms"] / curve["latency_ms"]).tolist())
    for text in speed_texts(page):  # every latency and speed-up names its reference
        assert names_its_baseline(text), text
    [table] = [d.value for d in page.dataframe if "budget_b" in d.value.columns]
    assert table["speedup_b1"].to_numpy() == pytest.approx(
        (table["dense_latency_ms"] / table["latency_ms"]).to_numpy(), nan_ok=True)


def test_a_row_that_was_not_timed_says_so(page, sweeps):
    page.sidebar.selectbox(key="model_for_bbc").set_value(f"bbc-{NOT_TIMED_MODEL}")
    run(page)
    page.switch_page("views/sweep.py")
    run(page)
    cards = {m.label: m.value for m in page.metric}
    assert cards["Latency (batch 1)"] == "not timed" and cards["Speed-up vs dense"] == "not timed"


def test_ablation_page_figures_are_the_rows_and_name_the_baseline(page, sweeps):
    page.switch_page("views/ablations.py")
    run(page)
    table = page.dataframe[0].value
    own = {m: row_of(sweeps, m, "own") for m in ("budgetformer", "no-budget-net", "dense", "bba")}
    shown = dict(zip(table["model"], table["speedup_b1"], strict=True))
    for model, row in own.items():
        assert shown[results.ABLATIONS[model]] == pytest.approx(row["dense_latency_ms"] / row["latency_ms"])
    assert np.isnan(shown[results.ABLATIONS[NOT_TIMED_MODEL]])
    specs = page_charts(page)
    [title] = [t for t in specs if t.startswith("Speed-up over dense")]
    bars = {t["name"]: t for t in specs[title]["data"]}["batch 1"]
    assert bars["y"][:1] == pytest.approx([own["budgetformer"]["dense_latency_ms"] / own["budgetformer"]["latency_ms"]])
    for text in speed_texts(page):
        assert names_its_baseline(text), text


def test_explore_times_the_model_beside_its_reference_and_shows_the_precomputed_speedup(page, sweeps):
    page.text_area(key="text").input(SPORT)
    run(page)
    page.button(key="time_it").click()  # timed on request
    run(page)
    [card] = [m for m in page.metric if m.label.startswith("Latency")]
    note = card.proto.delta
    own = row_of(sweeps, "budgetformer", "own")
    assert note.startswith("vs bbc-dense, batch 1: ") and "× live" in note
    # where the shipped figure was measured goes when the card has no room for it (its help says it)
    assert f"{own['dense_latency_ms'] / own['latency_ms']:.2f}× shipped" in note and len(note) <= speed.NOTE_CHARS
    page.radio(key="budget_mode").set_value("slider")
    run(page)
    page.slider(key="budget_s").set_value(0.5)
    run(page)
    [card] = [m for m in page.metric if m.label.startswith("Latency")]
    at_half = row_of(sweeps, "budgetformer", "0.5")  # not timed at this budget: the shipped figures, until asked
    assert card.value == f"{at_half['latency_ms']:.2f} ms" and "live not timed" in card.proto.delta
    assert f"{at_half['dense_latency_ms'] / at_half['latency_ms']:.2f}× shipped at s = 0.50" in card.proto.delta


def test_live_speedup_is_the_references_latency_over_the_runs(bbc_budgetformer):
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.model.budget import Control

    dense = load_checkpoint(CHECKPOINTS / "bbc-dense")
    live = speed.time_input(bbc_budgetformer, SPORT, Control(budget=0.25), ("bbc-dense", dense))
    assert live.latency.ms > 0 and live.dense.ms > 0
    assert live.speedup == pytest.approx(live.dense.ms / live.latency.ms)
    record = live.to_dict()
    assert record["reference"] == "bbc-dense" and record["speedup"] == pytest.approx(live.speedup)
    itself = speed.time_input(dense, SPORT, None, ("bbc-dense", dense))
    assert itself.speedup == 1.0  # the reference against itself
    fixed = speed.LiveSpeed(Latency(2.0, 0.1), "bbc-dense", Latency(3.0, 0.1))
    precomputed = (pd.Series({"speedup_b1": 1.42, "reference": "bbc-dense"}), "b = 0.50")
    assert speed.speed_note(fixed, precomputed) == (
        "vs bbc-dense, batch 1: 1.50× live, 1.42× shipped at b = 0.50")
