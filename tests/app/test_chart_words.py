"""What the pages say around their charts matches what the charts draw, read from real runs
(AppTest): the Budget sweep's intro and captions name only the curves drawn, the Head atlas opens
on two slices that differ, Side by side says how many colour scales its maps use, every speed-up
on Explore and the Budget sweep names its reference model and batch size, and labels fit the
width the page gives them at 1280 px."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import speed
from app.charts.style import HALF_WIDTH, text_px
from app.models import available_models
from budgetformer_core.measure.latency import Latency

from .apptest import BF, MAIN, TIMEOUT, chart, charts, open_page, run, start

MINILM = "bbc-minilm-budgetformer"

pytestmark = pytest.mark.skipif(not {BF, MINILM, "bbc-bba", "bbc-dense"} <= set(available_models()),
                                reason="the shipped bbc models are missing")


def opened(model: str, view: str) -> AppTest:
    """A session opened on ``model``'s link, straight onto ``view`` (its first run)."""
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params["model"] = model
    at.switch_page(f"views/{view}.py")
    return run(at)


def captions(at: AppTest) -> list[str]:
    return [c.value for c in at.main.caption]


def trace_names(at: AppTest) -> set[str]:
    return {t.get("name", "") for spec in charts(at).values() for t in spec["data"]}


# ----------------------------------------------------------------------------- Budget sweep


def test_the_sweep_promises_only_the_curves_it_draws():
    minilm = opened(MINILM, "sweep")
    intro = captions(minilm)[0]
    drawn = trace_names(minilm)
    assert not any("post-hoc" in n or "static" in n or "recovery" in n for n in drawn)  # none for this encoder
    assert "post-hoc" not in intro and "specialist" not in intro, intro
    assert "dense (dotted)" in intro and "0.1 to 1" in intro, intro
    every = [c for c in captions(minilm) if "sits at the cost it chose" in c]
    assert every and "BBA" not in every[0] and "specialists" not in every[0], every

    scratch = opened(BF, "sweep")
    intro = captions(scratch)[0]
    drawn = trace_names(scratch)
    assert {"post-hoc (zero-shot)", "static gates", "post-hoc + recovery"} <= drawn
    assert "the zero-shot post-hoc sweep" in intro and "static gates, post-hoc + recovery" in intro, intro
    assert "0.05 to 1" in intro


def test_every_speedup_on_the_sweep_names_its_reference_and_batch():
    at = opened(MINILM, "sweep")
    [card] = [m for m in at.metric if m.label == "Speed-up vs dense"]
    assert card.proto.delta == "vs bbc-minilm-dense, batch 1", card.proto.delta
    speedup = chart(at, "Speed-up over dense")
    assert "bbc-minilm-dense" in speedup["layout"]["title"]["text"]
    measured = [t["name"] for t in speedup["data"] if t["name"].startswith("measured")]
    assert measured and all("batch" in n for n in measured), measured
    assert "bbc-minilm-dense" in speedup["layout"]["yaxis"]["title"]["text"]


def test_explores_speedup_names_its_reference_and_batch():
    at = start(BF)
    [latency] = [m for m in at.metric if m.label.startswith("Latency")]
    assert latency.proto.delta.startswith("vs bbc-dense, batch 1: "), latency.proto.delta
    # the longest reference's name still leaves a note that fits the card
    live = speed.LiveSpeed(Latency(2.0, 0.1), "ag_news-minilm-dense", Latency(2.2, 0.1))
    shipped = (pd.Series({"speedup_b1": 1.28, "reference": "ag_news-minilm-dense"}), "its own point")
    note = speed.speed_note(live, shipped)
    assert note.startswith("vs ag_news-minilm-dense, batch 1: 1.10× live") and len(note) <= speed.NOTE_CHARS, note


# ----------------------------------------------------------------------------- Head atlas


@pytest.mark.parametrize("model", [BF, "bbc-bba"])
def test_the_atlas_opens_on_two_slices_that_differ(model):
    at = opened(model, "atlas")
    usage = chart(at, "Share of inputs that ran each head")
    panels = [a["text"] for a in usage["layout"]["annotations"]]
    assert panels[1].startswith("A: right") and panels[2].startswith("B: wrong"), panels
    diff = np.array(chart(at, "Slice A − slice B")["data"][0]["z"])
    whole = np.array(usage["data"][0]["z"])
    if ((whole == 0) | (whole == 1)).all():  # bbc-bba at its default b: one head set for every input
        assert any(c.startswith("Every input ran the same heads") for c in captions(at)), captions(at)
    else:
        assert np.abs(diff).max() > 0, "the difference map opens all zero"


# ----------------------------------------------------------------------------- Side by side


def test_side_by_side_says_how_many_colour_scales_it_uses():
    at = opened(BF, "compare")  # B opens on the dense model of the same encoder
    note = captions(at)[-1]
    a, b = chart(at, "A: "), chart(at, "B: ")
    assert a["data"][0]["zmax"] != b["data"][0]["zmax"]  # p on its own scale, dense w on 0 … 1
    assert note.startswith("Two colour scales") and f"{a['data'][0]['zmax']:.2f}" in note, note
    assert "share one colour scale" not in note
    at.selectbox(key="sbs_model_B").set_value("bbc-bba")
    run(at)
    note = captions(at)[-1]
    a, b = chart(at, "A: "), chart(at, "B: ")
    assert a["data"][0]["zmax"] == b["data"][0]["zmax"]
    assert "share one colour scale" in note and f"{a['data'][0]['zmax']:.2f}" in note, note


# ----------------------------------------------------------------------------- labels at 1280 px

TOGGLE_TEXT = 190
"""Pixels of text a switch's label has beside it in Explore's left column at 1280 px."""
CARD_LABEL = 165
"""Pixels of label a headline card of Explore's narrowest column has at 1280 px."""


def test_explores_ablation_switches_and_cards_fit_their_columns():
    at = start(BF)
    labels = [t.label for t in at.toggle if t.key in ("no_f", "no_g")]
    assert len(labels) == 2
    for label in labels:
        assert text_px(label, 14) <= TOGGLE_TEXT, label
    bba = start("bbc-bba")
    for m in bba.metric[:3]:
        assert text_px(m.label, 14) <= CARD_LABEL, m.label


def test_the_dynamics_half_page_charts_fit_their_titles():
    for model in (MINILM, "bbc-bba"):
        at = opened(model, "dynamics")
        half = [t for t in charts(at) if not t.startswith(("Budget s per layer", "Accuracy", "Loss terms"))]
        assert half, list(charts(at))
        for title in half:
            assert 8 + text_px(title, 20) <= HALF_WIDTH, title


def test_the_difference_table_fits_the_page():
    from app.error_bars import INTERVAL_COLUMNS

    widths = [c["width"] for c in INTERVAL_COLUMNS.values()]
    assert all(isinstance(w, int) for w in widths)
    assert sum(widths) <= 784 - 4, "the table is wider than an expander of the main column at 1280 px"
    at = open_page(start(BF), "sweep")
    [table] = [d for d in at.dataframe if "95% interval (points)" in d.value.columns]
    assert set(table.value.columns) <= set(INTERVAL_COLUMNS)  # every column shown has its set width
