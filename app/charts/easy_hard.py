"""The "Easy vs hard" page's charts: the budget's spread, its relation to correctness, class
and difficulty, and the heads run per layer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from app.charts.style import (
    ACCENT,
    BAND,
    BLUE,
    DARK_GREY,
    LAYER_COLORS,
    MUTED,
    REFERENCE,
    SCATTER_POINTS,
    TICKS,
    base_layout,
    layer_bars,
    plotly_text,
    with_legend,
)


def budget_histogram(
    mean_s: Sequence[float],
    s_min: float | None = None,
    s_max: float | None = None,
    bins: int = 30,
    symbol: str = "s",
) -> go.Figure:
    """How many inputs got each mean budget s; the band [s_min, s_max] shaded where it meets the
    data. The x range is the data's (a little wider), not the band's: a shape would widen it."""
    values = np.asarray(mean_s, dtype=float)
    lo, hi = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    pad = max((hi - lo) * 0.05, 0.01)
    # binned here, drawn as bars: the browser does not bin thousands of values itself
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.005, hi + 0.005))
    hist = dict(
        type="bar",
        x=(edges[:-1] + edges[1:]) / 2,
        y=counts,
        width=np.diff(edges),
        customdata=np.stack([edges[:-1], edges[1:]], axis=-1),
        marker=dict(color=BLUE, line=dict(color="white", width=1)),
        hovertemplate=f"{symbol} %{{customdata[0]:.3f}}–%{{customdata[1]:.3f}}: %{{y}} inputs<extra></extra>",
    )
    layout = base_layout(
        f"Mean budget {symbol} over {len(values)} test inputs",
        360,
        xaxis=dict(title=f"mean budget {symbol} (over layers)", range=[lo - pad, hi + pad]),
        yaxis=dict(title="inputs"),
    )
    if s_min is not None and s_max is not None:
        layout["shapes"] = [
            dict(
                type="rect",
                xref="x",
                yref="paper",
                x0=float(s_min),
                x1=float(s_max),
                y0=0,
                y1=1,
                fillcolor=BAND,
                line=dict(width=0),
                layer="below",
            )
        ]
    return go.Figure(data=[hist], layout=layout)


def _span(*values: np.ndarray) -> list[list[float]]:
    """[lo, hi] of each array, widened where it is a single value (a range np.histogram2d takes)."""
    out = []
    for v in values:
        lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
        out.append([lo, hi] if hi > lo else [lo - 0.5, hi + 0.5])
    return out


def budget_scatter(
    panels: Sequence[tuple[str, Sequence[float], bool]],
    mean_s: Sequence[float],
    correct: Sequence[bool],
    names: Sequence[str],
    title: str,
    symbol: str = "s",
    max_points: int = SCATTER_POINTS,
) -> go.Figure:
    """Mean budget s (y, shared) against per-input quantities, one panel each, side by side;
    misclassified inputs in red.

    Up to ``max_points`` inputs: one point each, drawn with WebGL (``scattergl``; thousands of
    SVG points take seconds to draw in a browser), the smaller group (usually the misclassified
    inputs) beneath the larger one, both translucent, so that neither hides the other. More
    inputs: the density of each group as contour lines (a 30 × 30 histogram per panel and group,
    binned here; a log x axis is binned in log10 of x, its title says so; the caller says so
    beside the chart): 7,600 points hid one another and took seconds to
    draw, and where the errors gather shows as well as where the most inputs are.

    Args:
        panels: per panel, (x axis title, x per input, log x axis).
        mean_s: y per input (bba: the requested budget b).
        correct: per input, whether the model got it right.
        names: hover labels of the points (e.g. "#12 · sport → politics"): indices and class
            names only, never the text.
        symbol: the budget's name, s or b.
        max_points: the most inputs drawn as points.
    """
    ys, ok_list = np.asarray(mean_s, dtype=float), np.asarray(correct, dtype=bool)
    dense = len(ys) > max_points
    groups = [(True, "correct", DARK_GREY if dense else MUTED), (False, "misclassified", ACCENT)]
    groups.sort(key=lambda g: int((ok_list == g[0]).sum()))  # the minority first: beneath
    layout = base_layout(title, 400, yaxis=dict(title=f"mean budget {symbol}"), margin=dict(b=60))
    gap = 0.05
    width = (1 - gap * (len(panels) - 1)) / max(len(panels), 1)
    data = []
    for p, (x_title, x, log_x) in enumerate(panels):
        axis = "" if p == 0 else str(p + 1)
        xs = np.asarray(x, dtype=float)
        if dense and log_x:  # contours are binned on a linear axis: bin log10 x
            xs, x_title = np.log10(np.clip(xs, 1e-6, None)), f"{x_title} (log10)"
        # both groups of a panel binned alike and contoured at the same levels (of log(1 + count)),
        # so a group of 11 % of the inputs draws fewer, smaller rings than one of 89 %
        counts = {ok: np.histogram2d(xs[ok_list == ok], ys[ok_list == ok], bins=30, range=_span(xs, ys))
                  for ok, _, _ in groups} if dense else {}
        top = max((float(np.log1p(c[0].max())) for c in counts.values()), default=1.0) or 1.0
        for ok, label, color in groups:
            rows = ok_list == ok
            if dense:  # binned here (30 × 30 over the panel), contoured by the browser
                z, x_edges, y_edges = counts[ok]
                trace = dict(
                    type="contour", x=(x_edges[:-1] + x_edges[1:]) / 2, y=(y_edges[:-1] + y_edges[1:]) / 2,
                    z=np.log1p(z.T), text=z.T.astype(int).astype(str), xaxis=f"x{axis}", name=label,
                    legendgroup=label, showlegend=p == 0, autocontour=False,
                    contours=dict(coloring="lines", start=top / 6, end=top, size=top / 6),
                    showscale=False, colorscale=[[0, color], [1, color]], line=dict(width=2),
                    hovertemplate=f"{x_title}: %{{x:.3g}}, {symbol}=%{{y:.3f}}: %{{text}} {label}<extra></extra>",
                )  # fmt: skip
            else:
                trace = dict(
                    type="scattergl", x=xs[rows], y=ys[rows], xaxis=f"x{axis}", name=label, legendgroup=label,
                    showlegend=p == 0, mode="markers", marker=dict(color=color, size=7, opacity=0.55),
                    text=[plotly_text(names[i]) for i in np.flatnonzero(rows)],
                    hovertemplate=f"%{{text}}<br>{x_title}: %{{x:.3g}}, {symbol}=%{{y:.3f}}<extra></extra>",
                )  # fmt: skip
            data.append(trace)
        start = p * (width + gap)
        layout[f"xaxis{axis}"] = dict(
            tickfont=TICKS, title_font=TICKS, title=x_title, type="log" if log_x and not dense else "linear",
            domain=[start, start + width], anchor="y",
        )  # fmt: skip
    layout = with_legend(layout, 2)
    layout["legend"] = {**layout["legend"], "traceorder": "normal"}  # legend groups would stack, one per row
    return go.Figure(data=data, layout=layout)


def budget_by_class(
    classes: Sequence[str], mean_s: Sequence[float], order: Sequence[str], symbol: str = "s"
) -> go.Figure:
    """Box plot of the mean budget s (bba: b) per true class, classes in ``order``: quartiles and
    median as the box, the lowest and highest value as the whiskers.

    The statistics are computed here and sent as numbers (``q1``, ``median``, ``q3``,
    ``lowerfence``, ``upperfence``), not the thousands of values behind them: the browser then
    neither sorts them nor draws every outlier as a point (which, on 7,600 inputs, pile into one
    solid column).
    """
    classes, values = np.asarray(classes, dtype=object), np.asarray(mean_s, dtype=float)
    if classes.shape != values.shape:
        raise ValueError(f"{len(classes)} classes for {len(values)} budgets")
    data = []
    for i, name in enumerate(order):
        mine = values[classes == name]
        # min, q1, median, q3, max: one each (none for a class without inputs, which keeps its place)
        stats = np.quantile(mine, [0, 0.25, 0.5, 0.75, 1])[:, None].tolist() if len(mine) else [[]] * 5
        low, q1, median, q3, high = stats
        data.append(dict(
            type="box",
            x0=plotly_text(name),  # one position per box, on the categorical axis
            q1=q1, median=median, q3=q3, lowerfence=low, upperfence=high,
            name=plotly_text(name),
            marker=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)]),
        ))
    layout = base_layout(
        f"Mean budget {symbol} by true class",
        380,
        xaxis=dict(title="true class", type="category", categoryorder="array",
                   categoryarray=[plotly_text(n) for n in order]),
        yaxis=dict(title=f"mean budget {symbol}"),
    )
    return go.Figure(data=data, layout=layout)


def k_histograms(
    layers: Sequence[tuple[int, Sequence[str], Sequence[int]]], title: str = "Heads run k per input"
) -> go.Figure:
    """How many inputs ran k heads, one panel per layer side by side in one figure (one chart to
    draw, not one per layer), k on a categorical axis (every k given, also those with 0).

    Args:
        layers: per panel, (layer index, the values of k, how many inputs ran each).
    """
    gap = 0.06
    width = (1 - gap * (len(layers) - 1)) / max(len(layers), 1)
    layout = base_layout(title, 320, yaxis=dict(title="inputs", rangemode="tozero"))
    data = []
    for p, (layer, ks, inputs) in enumerate(layers):
        axis = "" if p == 0 else str(p + 1)
        data.append(
            dict(
                type="bar",
                x=[str(k) for k in ks],
                y=[int(v) for v in inputs],
                xaxis=f"x{axis}",
                marker=dict(color=BLUE),
                text=[str(int(v)) for v in inputs],
                textposition="outside",
                cliponaxis=False,
                name=f"layer {layer}",
                hovertemplate=f"layer {layer}, k = %{{x}}: %{{y}} inputs<extra></extra>",
            )
        )
        start = p * (width + gap)
        layout[f"xaxis{axis}"] = dict(
            tickfont=TICKS, title_font=TICKS, title=f"layer {layer}: heads run k", type="category",
            domain=[start, start + width], anchor="y",
        )  # fmt: skip
    return go.Figure(data=data, layout=layout)


def k_by_need(
    needed: Sequence[int], mean_k: dict[str, Sequence[float]], title: str = "Mean heads run k per needed n"
) -> go.Figure:
    """Mean k (y) per needed n (categorical x), one bar per layer, with the dotted line k = n."""
    xs = [str(int(n)) for n in needed]
    data = layer_bars(xs, mean_k, "n = %{x}: mean k %{y:.2f}", dict(
        y=[float(n) for n in needed], line=REFERENCE, name="k = n", hovertemplate="needed %{x}<extra></extra>"))
    layout = base_layout(
        title,
        360,
        xaxis=dict(title="heads the input needs n", type="category"),
        yaxis=dict(title="mean heads run k", rangemode="tozero"),
    )
    return go.Figure(data=data, layout={**with_legend(layout, len(data)), "barmode": "group"})
