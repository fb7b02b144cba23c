"""Chart hygiene, read from the figures the app's own chart functions build (``fig.layout`` and
the traces): percentage ticks that never read the same twice, legends that never cover a title,
a logarithmic axis that reads in order, and labels that fit the width the page gives a chart at
1280 px (:data:`app.charts.style.FULL_WIDTH`, :data:`~app.charts.style.HALF_WIDTH`)."""

from __future__ import annotations

import math

import pytest

from app.charts import dynamics, explore, heads, sweep
from app.charts.style import FULL_WIDTH, HALF_WIDTH, LEGEND_ROW, LEGEND_SYMBOL, text_px
from app.logic import results

# ----------------------------------------------------------------------------- helpers


def tick_labels(axis, lo: float, hi: float) -> list[str]:
    """The labels of the ticks an axis with a set ``dtick`` and ``tickformat`` draws over [lo, hi]."""
    assert axis.dtick is not None and axis.tickformat, "the ticks are left to plotly: they may repeat"
    step = float(axis.dtick)
    first, last = math.floor(lo / step), math.ceil(hi / step)
    return [format(k * step, axis.tickformat) for k in range(first, last + 1)]


def legend_entries(fig) -> list[str]:
    return [t.name for t in fig.data if t.name and t.showlegend is not False]


def title_fits(fig, width: float) -> None:
    title = fig.layout.title
    size = title.font.size or 20
    assert 8 + text_px(title.text, size) <= width, f"{title.text!r} is wider than {width} px"


def legend_fits(fig, width: float) -> None:
    """Every legend entry's text ends inside a figure ``width`` px wide (an entry of a fraction-wide
    legend starts at its column's share of the plot area)."""
    layout = fig.layout
    names = legend_entries(fig)
    per_row = round(1 / layout.legend.entrywidth) if layout.legend.entrywidth else 1
    plot = width - layout.margin.l - layout.margin.r
    for i, name in enumerate(names):
        start = layout.margin.l + (i % per_row) * plot / per_row
        assert start + LEGEND_SYMBOL + text_px(name, 14) <= width, f"legend entry {name!r} runs past {width} px"


def legend_clear_of_title(fig) -> None:
    """A legend drawn above the plot sits under the title: the title pinned to the top of the
    figure, the legend's rows between it and the plot."""
    layout = fig.layout
    if not (layout.showlegend and layout.legend.yanchor == "bottom" and layout.legend.yref != "container"):
        return  # a legend under the plot cannot reach the title
    per_row = round(1 / layout.legend.entrywidth)
    rows = math.ceil(len(legend_entries(fig)) / per_row)
    title = layout.title
    assert title.yref == "container" and title.yanchor == "top" and title.y == 1, (
        f"{title.text!r}: a title in the middle of a tall top margin sits among the legend's rows")
    title_bottom = title.pad.t + 1.3 * (title.font.size or 20)
    legend_top = layout.margin.t - rows * LEGEND_ROW - 8  # the legend's own padding
    assert legend_top >= title_bottom, f"{title.text!r}: {rows} legend rows reach the title"


# ----------------------------------------------------------------------------- percentage ticks


ACCURACIES = [0.962441, 0.974178, 0.971831, 0.976526, 0.976526]  # bbc-minilm-budgetformer's sweep


@pytest.mark.parametrize("values", [ACCURACIES, [0.978873, 0.983568], [0.2, 0.9], [0.9835, 0.9837]])
def test_percentage_ticks_never_repeat(values):
    figures = {
        "budget curves": sweep.budget_curves("Accuracy vs budget", "test accuracy",
                                             {"model": ([0.1, 0.25, 0.5, 0.75, 1.0][: len(values)], values)},
                                             percent=True),
        "bars": sweep.model_bars(["a", "b"], {"heads run": values[:2]}, "Heads run", "share", ".0%", percent=True),
        "epoch lines": dynamics.epoch_lines(list(range(1, len(values) + 1)), {"training": values}, "Accuracy",
                                            "accuracy", percent=True),
    }
    for what, fig in figures.items():
        lo = 0.0 if what == "bars" else min(values)
        labels = tick_labels(fig.layout.yaxis, lo, max(values))
        assert len(labels) == len(set(labels)), f"{what}: ticks read the same: {labels}"
        assert len(labels) >= 3, f"{what}: too few ticks to read: {labels}"


# ----------------------------------------------------------------------------- legends and titles


def test_legends_above_a_plot_never_cover_its_title():
    six = 6  # MiniLM's layers: 13 legend entries in five rows
    epochs = [1, 2, 3]
    figures = [
        dynamics.training_budget(epochs, [[0.4, 0.35, 0.33]] * six, [[0.45, 0.4, 0.34]] * six, 0.05, 0.6),
        dynamics.epoch_lines(epochs, {"validation H(p)": [2.4, 2.4, 2.3], "training H(p)": [2.5, 2.4, 2.4]},
                             "Head entropy H(p) (nats)", "entropy of p", reference={"maximum ln 12": 2.48},
                             width=HALF_WIDTH),
        dynamics.epoch_lines(epochs, {"training": [0.98, 0.99, 0.995], "validation": [0.97, 0.97, 0.97]},
                             "Accuracy", "accuracy", percent=True),
        dynamics.loss_terms(epochs, {f"term {i}": [0.1, 0.1, 0.1] for i in range(6)}, [0.6, 0.6, 0.6]),
        sweep.model_bars(["a", "b"], {"latency": [1.0, 2.0], "bbc-minilm-dense (same rounds)": [2.0, 2.0]},
                         "Latency per input, batch 1", "ms"),
        sweep.cost_by_length([16, 32, 64], [1.0, 2.0, 4.0], [0.9, 1.7, 3.2], [0.8, 1.5, 3.0], "s = 0.5"),
    ]
    for fig in figures:
        legend_clear_of_title(fig)


# ----------------------------------------------------------------------------- a logarithmic axis


@pytest.mark.parametrize("ms", [[0.9, 1.4, 2.3, 3.8, 6.2], [9.5, 14.0, 31.0, 70.0, 160.0], [0.05, 0.08, 0.3]])
def test_the_log_axis_of_cost_vs_length_reads_in_order(ms):
    tokens = [16 * 2**i for i in range(len(ms))]
    fig = sweep.cost_by_length(tokens, ms, [m * 0.9 for m in ms], [m * 0.8 for m in ms], "s = 0.5")
    axis = fig.layout.yaxis
    assert axis.type == "log"
    values = [float(t) for t in axis.ticktext]
    assert values == pytest.approx(list(axis.tickvals)), "each tick is written as the number it is"
    assert values == sorted(values) and len(set(values)) == len(values), f"out of order: {axis.ticktext}"
    assert min(values) <= min(ms) * 0.8 and max(values) >= max(ms), "the ticks span the data"
    assert sum(min(ms) * 0.8 <= v <= max(ms) for v in values) >= 2, "at least two ticks inside the data"


# ----------------------------------------------------------------------------- labels at 1280 px


@pytest.mark.parametrize("reference", ["bbc-dense", "bbc-minilm-dense", "ag_news-minilm-dense"])
def test_speedup_titles_and_ablation_legends_fit_at_1280_px(reference):
    curve = {"ideal (1 / FLOPs ratio)": ([0.25, 1.0], [2.0, 1.0]), "measured, batch 1": ([0.25, 1.0], [1.5, 1.0]),
             "measured, batch 32": ([0.25, 1.0], [1.6, 1.0])}
    title_fits(sweep.budget_curves(results.speedup_title(reference), "×", curve, legend_columns=2), FULL_WIDTH)
    models = ["BudgetFormer (full)", "no f_θ, run live", "no g_φ, run live", "random heads, run live", "dense"]
    latency = sweep.model_bars(models, {"latency": [1.0] * 5, f"{reference} (same rounds)": [2.0] * 5},
                               "Latency per input, batch 1", "ms", ".2f")
    bars = {"batch 1": [1.2] * 5, "batch 32": [1.3] * 5, "ideal (1 / FLOPs ratio)": [1.4] * 5}
    speedup = sweep.model_bars(models, bars, "Speed-up over dense", f"× vs {reference}", ".2f")
    for fig in (latency, speedup):
        title_fits(fig, HALF_WIDTH)
        legend_fits(fig, HALF_WIDTH)


def test_the_tie_legend_of_a_head_map_fits_half_a_page():
    p = [[0.13, 0.13, 0.11, 0.12, 0.10, 0.15, 0.12, 0.13], [0.14, 0.11, 0.14, 0.14, 0.12, 0.12, 0.11, 0.12]]
    ran = [[0, 1, 5, 7], [0, 2, 3, 7]]
    fig = heads.head_heatmap(p, ran, "A: Gate scores z (softmax over the heads)", colorbar_title="softmax(z)",
                             unrun_values=True, text_size=13, cell_values=False, cut=True)
    assert any(name.startswith("= tied at the cut") for name in legend_entries(fig)), "the example has a tie"
    for name in legend_entries(fig):  # one entry a row under the map, from its left edge
        assert fig.layout.margin.l + LEGEND_SYMBOL + text_px(name, 14) <= HALF_WIDTH, name


def test_the_attention_maps_key_labels_have_room_under_it():
    tokens = ["[CLS]", "internationalisation", "telecommunications", "a", *["word"] * 60, "[SEP]"]
    n = len(tokens)
    probs = [[1 / n] * n for _ in range(n)]
    fig = explore.attention_heatmap(probs, tokens, "Attention of layer 0, head 0 on this input")
    layout = fig.layout
    labels = list(layout.xaxis.ticktext)
    longest = max(text_px(label, layout.xaxis.tickfont.size) for label in labels)
    slant = math.radians(abs(layout.xaxis.tickangle))
    assert layout.margin.b >= longest * math.sin(slant) + 40, "the slanted key labels and the axis title fit under"
    assert layout.margin.l >= longest, "the query labels fit beside the rows"
    assert layout.margin.l >= longest * math.cos(slant), "the first key label does not run off the left edge"
    assert layout.height - layout.margin.t - layout.margin.b >= 6 * min(n, explore.ATTENTION_TOKENS)
