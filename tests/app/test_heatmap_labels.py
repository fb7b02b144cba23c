"""The labels of the head maps read cleanly at 1280 px: what each cell says, the heads tied at the
cut marked exactly where they are, one mark per cell where a map is narrow, the selection
comparison with a legend, a head's attention labelled at a readable size; and, on the pages,
the one sentence for what cannot be shown (a budget that does not vary, a bba gate with every
head running).

Chart tests call the pure chart functions; the page tests run the shipped bbc models through
AppTest and compare with the engine's own numbers.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.charts.explore import ATTENTION_LABELS, attention_heatmap, selection_diff
from app.charts.heads import head_heatmap
from app.head_cells import TIE, tied_at_cut
from app.logic.explore import run_analysis
from app.models import available_models
from budgetformer_core.io.loader import load_checkpoint

from ..conftest import PRECOMPUTED
from .apptest import MAIN, TIMEOUT, chart, run, start, type_text

MODELS = ["bbc-budgetformer", "bbc-bba"]
shipped = pytest.mark.skipif(not set(MODELS) <= set(available_models()), reason="the shipped bbc models are missing")


# ----------------------------------------------------------------------------- charts


def test_heads_tied_at_the_cut_are_marked_and_only_they():
    # layer 0: h1-h3 ran at 0.13 (as written), h0 did not at 0.13 too; h4 (0.12) is below the cut
    # layer 1: a clear cut (0.40, 0.30 ran; 0.20 did not)
    values = [[0.1262, 0.1278, 0.1273, 0.1299, 0.1213], [0.40, 0.30, 0.20, 0.05, 0.05]]
    selected = [[1, 2, 3], [0, 1]]
    fig = head_heatmap(values, selected, "p", colorbar_title="p", unrun_values=True, cut=True)
    heat, grey = fig.data[0], fig.data[1]
    assert [list(r) for r in heat.text] == [
        ["", f"★{TIE}<br>0.13", f"★{TIE}<br>0.13", f"★{TIE}<br>0.13", ""],
        ["★<br>0.40", "★<br>0.30", "", "", ""],
    ]
    assert [list(r) for r in grey.text] == [
        [f"{TIE}<br>(0.13)", "", "", "", "(0.12)"],
        ["", "", "(0.20)", "(0.05)", "(0.05)"],
    ]
    # hovering a tied head gives the digits that tell it from its neighbour across the cut
    assert heat.customdata[0][2].endswith("tied at the cut with h0, which did not run: 0.127 vs 0.126")
    assert grey.customdata[0][0].endswith("tied at the cut with h2, which ran: 0.126 vs 0.127")
    assert "tied" not in grey.customdata[0][4] and "tied" not in heat.customdata[1][0]
    assert fig.data[-1].name.startswith(f"{TIE} tied at the cut")
    # exactly equal values (a stable top-k ran the lower index) say so
    even = head_heatmap([[0.25] * 4], [[0, 1]], "p", colorbar_title="p", cut=True)
    assert even.data[0].customdata[0][1].endswith("which did not run: exactly equal (0.2500)")
    # heads not chosen by these values (cut=False), or no tie: no mark and no legend entry
    for fig in (
        head_heatmap(values, selected, "p", unrun_values=True),
        head_heatmap(values[1:], selected[1:], "p", unrun_values=True, cut=True),
    ):
        cells = [c for trace in fig.data[:2] for row in trace.text for c in row]
        assert not any(TIE in c for c in cells) and "tied" not in fig.data[-1].name


def test_a_narrow_map_writes_one_mark_per_cell_and_the_values_on_hover():
    values = [[0.10, 0.12, 0.10, 0.15, 0.13, 0.13, 0.13, 0.13], [1.0] * 8]
    fig = head_heatmap(
        values,
        [[3, 4], list(range(8))],
        "A",
        colorbar_title="p",
        unrun_values=True,
        text_size=13,
        cell_values=False,
        cut=True,
    )
    cells = [c for trace in fig.data[:2] for row in trace.text for c in row if c]
    assert set(cells) <= {"★", "—", f"★{TIE}", TIE}, cells  # nothing that could run into its neighbour
    assert f"★{TIE}" in cells and TIE in cells  # h4 ran at 0.13, h5-h7 did not
    assert "p = 0.100, not computed" in fig.data[1].customdata[0][0]
    assert fig.data[2].name == "head ran (its p on hover)"


def test_the_selection_comparison_has_one_mark_a_cell_and_a_legend():
    fig = selection_diff([[0, 1]], [[1, 2]], 4)
    assert [list(r) for r in fig.data[0].z] == [[1, 3, 2, 0]]
    assert list(fig.data[0].text[0]) == ["−", "★", "+", ""]
    assert [t.name for t in fig.data[1:]] == ["★ both ran", "+ this setting only", "− full model only", "neither ran"]
    assert fig.layout.showlegend and fig.layout.title.text == "Heads that ran"


def test_attention_labels_are_readable_thinned_and_escaped():
    tokens = ['"', "<b>", "&", *(f"w{i}" for i in range(93))]  # 96 tokens
    probs = [[1 / 96] * 96 for _ in range(96)]
    layout = attention_heatmap(probs, tokens, "attention").layout
    for axis in (layout.xaxis, layout.yaxis):
        assert axis.tickfont.size >= 11
        assert len(axis.ticktext) <= ATTENTION_LABELS and list(axis.tickvals) == list(range(0, 96, 3))
    assert layout.yaxis.ticktext[0] == '" ·0'  # plotly shows `"` itself; "&quot;" it would show as is
    short = attention_heatmap([[0.5, 0.5]] * 2, ["<b>", "&"], "attention").layout
    assert list(short.xaxis.ticktext) == ["&lt;b&gt; ·0", "&amp; ·1"]  # a tag-like token stays text


# ----------------------------------------------------------------------------- pages


@shipped
def test_explore_marks_exactly_the_heads_tied_at_the_cut():
    """The relevance map of the page marks the heads the engine's own relevance ties at the cut
    (a ran head and a head that did not run with the same p as written)."""
    ckpt = load_checkpoint(PRECOMPUTED / "bbc-budgetformer")
    texts = [
        "Microsoft releases a new version of Windows with better security",
        "The striker scored twice as the champions won the cup final",
    ]
    for text in texts:
        a = run_analysis(ckpt, text)
        expected = tied_at_cut(a.relevance, a.selected_heads)
        if any(expected):
            break
    else:
        pytest.skip("no tie at the cut on these texts with this checkpoint")
    at = start()
    type_text(at, text)
    spec = chart(at, "Head relevance p")
    marked = [
        {h for h, (ran, grey) in enumerate(zip(r, g, strict=True)) if TIE in ran or TIE in grey}
        for r, g in zip(spec["data"][0]["text"], spec["data"][1]["text"], strict=True)
    ]
    assert marked == expected
    assert any(t["name"].startswith(f"{TIE} tied at the cut") for t in spec["data"][2:])


@shipped
def test_a_fixed_budget_gets_one_sentence_on_easy_vs_hard():
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model="bbc-bba")
    run(at)
    at.switch_page("views/easy_hard.py")
    run(at)
    [info] = at.info
    assert info.value.startswith("This model's budget does not vary per input") and "b = 0.50" in info.value
    assert not at.get("plotly_chart") and not at.table and not at.metric  # no one-bar charts, no tables


@shipped
def test_bba_with_every_head_says_no_gate_decides():
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model="bbc-bba", mode="force_k", k="8")
    run(at)
    assert any("no gate decides anything" in i.value for i in at.info)
    assert not any(t.key == "explain_on" for t in at.toggle)  # nothing to compute
    at.slider(key="force_k").set_value(4)
    run(at)
    assert any(t.key == "explain_on" for t in at.toggle)
