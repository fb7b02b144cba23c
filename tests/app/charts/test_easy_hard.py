"""The Easy vs hard page's figures (app/charts/easy_hard.py): the budget against difficulty
(points, or density contours when there are many), by class (five statistics per class, not the
values) and as a histogram; checked together with the class axes of the probability bars
(app/charts/explore.py) and the confusion matrix (app/charts/errors.py), and the training
dynamics lines (app/charts/dynamics.py)."""

from __future__ import annotations

import numpy as np
import pytest

from app.charts.dynamics import epoch_lines, training_budget
from app.charts.easy_hard import budget_by_class, budget_histogram, budget_scatter
from app.charts.errors import confusion_heatmap
from app.charts.explore import probabilities_bar
from app.charts.style import TITLE_ROOM


def test_class_axes_are_categories():
    labels = ["00", "10", "01", "11"]  # the synthetic task's classes look like numbers
    bars = probabilities_bar(labels, [0.1, 0.2, 0.3, 0.4])
    assert bars.layout.yaxis.type == "category" and list(bars.data[0].y) == labels
    cm = confusion_heatmap([[1] * 4] * 4, labels)
    assert cm.layout.xaxis.type == cm.layout.yaxis.type == "category"
    assert list(cm.data[0].x) == list(cm.data[0].y) == labels
    assert cm.layout.xaxis.title.text == "predicted" and cm.data[0].colorbar.title.text == "texts"
    box = budget_by_class(["00", "11", "00"], [0.1, 0.2, 0.3], labels)
    assert box.layout.xaxis.type == "category" and list(box.layout.xaxis.categoryarray) == labels
    assert [t.x0 for t in box.data] == labels
    # the statistics, computed here: the browser gets five numbers per class, not its values
    stats = [[list(getattr(t, f)) for f in ("lowerfence", "q1", "median", "q3", "upperfence")] for t in box.data]
    assert stats[0] == [[0.1], [0.15], [pytest.approx(0.2)], [0.25], [0.3]] and stats[3] == [[0.2]] * 5
    assert stats[1] == stats[2] == [[]] * 5 and all(t.y is None for t in box.data)
    with pytest.raises(ValueError, match="2 classes for 3 budgets"):
        budget_by_class(["00", "11"], [0.1, 0.2, 0.3], labels)


def test_page_charts():
    curves = [[0.5, 0.4], [0.5, 0.2]]
    fig = training_budget([1, 2], curves, curves, 0.1, 0.45)
    assert len(fig.data) == 1 + 2 + 2 and fig.data[0].fill == "toself"
    assert len(training_budget([1, 2], [], [[0.5, 0.4]]).data) == 1  # no band, no train
    lines = epoch_lines([1, 2], {"a": [1.0, -1.0]}, "t", "y", log_y=True, reference={"r": 1})
    assert list(lines.data[0].y) == [1.0, None] and len(lines.data) == 2  # ≤ 0: not on a log axis
    # a legend of three entries takes two rows of two, and the top margin holds both under the title
    three = epoch_lines([1, 2], {"total": [1, 2], "task": [1, 2], "budget": [1, 2]}, "Loss terms", "y")
    assert three.layout.legend.entrywidth == 0.5 and three.layout.legend.entrywidthmode == "fraction"
    top = TITLE_ROOM + 8  # the title pinned to the figure's top, then the legend's rows
    assert three.layout.margin.t == top + 24 * 2 > lines.layout.margin.t == top + 24
    cm = confusion_heatmap([[1, 2], [0, 3]], ["x", "y"])
    assert [list(r) for r in cm.data[0].z] == [[1, 2], [0, 3]] and list(cm.data[0].y) == ["x", "y"]
    panels = [("entropy", [1, 2, 3], False), ("loss", [0.1, 1, 10], True)]
    sc = budget_scatter(panels, [0.1, 0.2, 0.3], [True, False, True], "abc", "t")
    # one figure, WebGL; per panel the smaller group first (beneath), both translucent
    assert [t.name for t in sc.data] == ["misclassified", "correct"] * 2 and list(sc.data[0].text) == ["b"]
    assert [len(t.x) for t in sc.data] == [1, 2, 1, 2] and {t.type for t in sc.data} == {"scattergl"}
    assert list(sc.data[3].x) == [0.1, 10] and [t.xaxis for t in sc.data] == ["x", "x", "x2", "x2"]
    assert all(0 < t.marker.opacity < 1 for t in sc.data) and [t.showlegend for t in sc.data] == [1, 1, 0, 0]
    assert (sc.layout.xaxis.title.text, sc.layout.xaxis2.title.text) == ("entropy", "loss")
    assert sc.layout.xaxis2.type == "log" and sc.layout.xaxis.domain[1] < sc.layout.xaxis2.domain[0]
    mostly_wrong = budget_scatter(panels, [0.1, 0.2, 0.3], [False, True, False], "abc", "t")
    assert [t.name for t in mostly_wrong.data][:2] == ["correct", "misclassified"]
    assert sc.layout.yaxis.title.text == "mean budget s"
    bba = budget_scatter(panels[:1], [0.5, 0.5, 0.5], [True] * 3, "abc", "t", symbol="b")
    assert bba.layout.yaxis.title.text == "mean budget b"
    # more inputs than it draws as points: each group's density as contour lines, log x binned in log10
    n, ok = 50, [i % 5 != 0 for i in range(50)]
    many = [("x", [i + 1 for i in range(n)], False), ("loss", [10.0 ** -(i / 10) for i in range(n)], True)]
    dense = budget_scatter(many, [i / n for i in range(n)], ok, [str(i) for i in range(n)], "t", max_points=20)
    assert {t.type for t in dense.data} == {"contour"}
    assert [t.name for t in dense.data] == ["misclassified", "correct"] * 2
    assert [int(np.asarray(t.text, dtype=int).sum()) for t in dense.data] == [10, 40] * 2  # each input once a panel
    for t in dense.data[:2]:  # z: log(1 + count), the counts in the hover text
        assert np.asarray(t.z) == pytest.approx(np.log1p(np.asarray(t.text, dtype=float)))
    levels = {(t.contours.start, t.contours.end, t.contours.size) for t in dense.data[:2]}
    assert len(levels) == 1 and not dense.data[0].autocontour  # both groups of a panel on one scale
    assert dense.layout.xaxis2.type == "linear" and dense.layout.xaxis2.title.text == "loss (log10)"
    assert min(dense.data[2].x) > -4.9 - 0.1 and max(dense.data[2].x) < 0.1  # bins of log10 of 10^-(i/10)
    box = budget_by_class(["x", "y", "x"], [0.1, 0.2, 0.3], ["x", "y"])
    assert [list(t.median) for t in box.data] == [[pytest.approx(0.2)], [0.2]]
    hist = budget_histogram([0.3, 0.4, 0.4], 0.1, 0.9, bins=5)  # binned here: bars of counts
    assert hist.layout.shapes[0].x0 == 0.1 and list(hist.data[0].y) == [1, 0, 0, 0, 2]
    assert hist.data[0].x[0] == pytest.approx(0.31) and sum(hist.data[0].width) == pytest.approx(0.1)
    assert list(budget_histogram([0.5, 0.5]).data[0].y)[15] == 2  # one value: a narrow range around it
    lo, hi = hist.layout.xaxis.range  # the data's range, not the band's
    assert 0.25 < lo < 0.3 and 0.4 < hi < 0.45
