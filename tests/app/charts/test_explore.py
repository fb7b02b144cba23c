"""The Explore page's figures (app/charts/explore.py): the selection comparison and the
probability and budget bars; with the Budget sweep page's model bars (app/charts/sweep.py)."""

from __future__ import annotations

from app.charts.explore import budget_bars, probabilities_bar, selection_diff
from app.charts.style import ACCENT
from app.charts.sweep import model_bars


def test_selection_diff_codes():
    fig = selection_diff([[0, 1]], [[1, 2]], 4)
    assert [list(r) for r in fig.data[0].z] == [[1, 3, 2, 0]]  # full only, both, new only, neither


def test_bar_charts():
    fig = probabilities_bar(["a", "b", "c"], [0.2, 0.7, 0.1])
    assert list(fig.data[0].marker.color).count(ACCENT) == 1
    assert fig.data[0].marker.color[1] == ACCENT
    assert len(budget_bars([0.4, 0.3], [3, 2], 8).data) == 1
    with_ref = budget_bars([0.5, 0.5], [4, 4], 8, reference=[0.4, 0.3])
    assert len(with_ref.data) == 2 and "full model" in with_ref.layout.title.text
    one = model_bars(["full", "dense"], {"accuracy": [0.984, float("nan")]}, "t", "y")
    assert list(one.data[0].text) == ["0.984", ""] and one.data[0].textangle == 0
    pair = model_bars(["full", "dense"], {"accuracy": [0.98, 0.97], "macro-F1": [0.98, 0.97]}, "t", "y")
    assert all(bar.textangle == -90 for bar in pair.data)  # side by side labels stand up
    assert pair.layout.uniformtext.minsize == 12 and pair.layout.uniformtext.mode == "hide"  # never tiny
    assert fig.layout.xaxis.range[1] > 1.3  # room for the label of a bar at 100%
