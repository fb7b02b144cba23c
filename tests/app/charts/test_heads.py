"""The layers × heads maps (app/charts/heads.py): the heads that ran coloured and starred, the
others grey, a legend for both, and one colour scale for several maps."""

from __future__ import annotations

import pytest

from app.charts.heads import NOT_RUN, head_heatmap, head_heatmaps, relevance_zmax


def test_head_heatmap_marks_the_heads_that_ran():
    values = [[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]
    fig = head_heatmap(values, [[1, 2], [0]], "p", colorbar_title="p")
    heat, grey, ran_key, not_run_key = fig.data
    # the legend beside the map: what ★ and the grey cells are; those two traces draw nothing
    assert (ran_key.name, not_run_key.name) == ("head ran (its p)", "not computed")
    assert ran_key.marker.symbol == "star" and not_run_key.marker.color == NOT_RUN
    assert list(ran_key.x) == [None] and fig.layout.showlegend
    assert len(heat.z) == 2 and len(heat.z[0]) == 4
    stars = [[cell.startswith("★") for cell in row] for row in heat.text]
    assert stars == [[False, True, True, False], [True, False, False, False]]
    # the heads that did not run: no colour of the scale, grey, "—"
    assert [list(r) for r in heat.z] == [[None, 0.6, 0.2, None], [0.25, None, None, None]]
    assert [list(r) for r in grey.text] == [["—", "", "", "—"], ["", "—", "—", "—"]]
    assert not grey.showscale and {c for _, c in grey.colorscale} == {NOT_RUN}
    assert heat.zmax == pytest.approx(0.6)  # the largest value of a head that ran
    assert heat.colorbar.title.text == "p"
    assert fig.layout.xaxis.title.text == "head" and fig.layout.yaxis.title.text == "layer"
    with_values = head_heatmap(values, [[1, 2], [0]], "p", unrun_values=True, zmax=1.0)
    assert list(with_values.data[1].text[0]) == ["(0.10)", "", "", "(0.10)"]
    assert with_values.data[3].name == "not computed (value in brackets)"
    assert with_values.data[0].zmax == 1.0
    # 12 heads a layer (MiniLM): cells too narrow for numbers, ★ and "—" alone, the values on hover
    wide = [[0.05 + 0.01 * h for h in range(12)]]
    heat, grey, ran_key, not_run_key = head_heatmap(wide, [[0, 11]], "p", colorbar_title="p",
                                                           unrun_values=True).data
    assert list(heat.text[0]) == ["★"] + [""] * 10 + ["★"] and heat.z[0][11] == pytest.approx(0.16)
    assert list(grey.text[0]) == [""] + ["—"] * 10 + [""] and "p = 0.160 (ran)" in heat.customdata[0][11]
    assert (ran_key.name, not_run_key.name) == ("head ran (its p on hover)", "not computed")


def test_head_heatmaps_put_several_maps_on_one_colour_scale():
    a, b = [[0.1, 0.6, 0.2, 0.1]], [[0.3, 0.3, 0.2, 0.2]]
    fig = head_heatmaps([(a, [[1, 2]], "A: #1"), (b, [[0]], "B: #2")], "p", colorbar_title="p")
    ran_a, grey_a, ran_b, grey_b, *legend = fig.data
    assert [t.name for t in legend] == ["head ran (its p)", "not computed"]
    assert (ran_a.xaxis, ran_b.xaxis, grey_b.yaxis) == ("x", "x2", "y2")
    assert ran_a.zmax == ran_b.zmax == pytest.approx(0.6)  # the largest value that ran, of both maps
    assert ran_a.showscale and not ran_b.showscale  # one colour bar
    assert [list(r) for r in ran_b.z] == [[0.3, None, None, None]] and list(grey_b.text[0]) == ["", "—", "—", "—"]
    assert [n.text for n in fig.layout.annotations] == ["A: #1", "B: #2"]
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]  # side by side, not overlapping
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis2.title.text == "layer"
    # one map is head_heatmap's figure
    assert head_heatmap(a, [[1, 2]], "p").data[0].z == head_heatmaps([(a, [[1, 2]], "")], "p").data[0].z


def test_relevance_colour_scale_is_shared_and_uniform_p_is_not_the_darkest():
    uniform = [[0.125] * 8]
    assert relevance_zmax([uniform], 8) == pytest.approx(0.25)  # 1/H: half the scale
    peaked = [[0.9] + [0.1 / 7] * 7]
    assert relevance_zmax([uniform, peaked], 8) == pytest.approx(0.9)  # one scale for both
