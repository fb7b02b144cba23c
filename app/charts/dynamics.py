"""The "Training dynamics" page's charts: the budget during training, per-epoch lines and the
loss terms."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from app.charts.style import BAND, FULL_WIDTH, LAYER_COLORS, base_layout, layer_bars, percent_axis, with_legend


def training_budget(
    epochs: Sequence[float],
    train: Sequence[Sequence[float]],
    val: Sequence[Sequence[float]],
    s_min: float | None = None,
    s_max: float | None = None,
) -> go.Figure:
    """Mean budget s per layer and epoch: validation solid, training dashed, the band shaded.

    Args:
        epochs: epoch numbers (x).
        train: per layer, the mean s on the training data per epoch (may be empty).
        val: per layer, the mean s on the validation split per epoch.
        s_min, s_max: the band the budget loss keeps s in (drawn when both are given).
    """
    x = [float(e) for e in epochs]
    data = []
    if s_min is not None and s_max is not None and x:
        data.append(
            dict(
                type="scatter",
                x=x + x[::-1],
                y=[float(s_min)] * len(x) + [float(s_max)] * len(x),
                fill="toself",
                fillcolor=BAND,
                line=dict(width=0),
                mode="lines",
                name=f"target band [{s_min:g}, {s_max:g}]",
                hoverinfo="skip",
            )
        )
    for kind, curves, dash in (("val", val, "solid"), ("train", train, "dash")):
        for layer, ys in enumerate(curves):
            data.append(
                dict(
                    type="scatter",
                    x=x,
                    y=[float(v) for v in ys],
                    mode="lines+markers",
                    line=dict(color=LAYER_COLORS[layer % len(LAYER_COLORS)], dash=dash, width=3),
                    name=f"layer {layer} ({kind})",
                    hovertemplate=f"layer {layer} ({kind}), epoch %{{x}}: s=%{{y:.3f}}"
                    "<extra></extra>",
                )
            )
    layout = base_layout(
        "Budget s per layer during training",
        420,
        xaxis=dict(title="epoch", dtick=1),
        yaxis=dict(title="mean budget s", range=[0, 1.02]),
    )
    names = [t["name"] for t in data]
    return go.Figure(data=data, layout=with_legend(layout, len(data), per_row=3, names=names, width=FULL_WIDTH))


def epoch_lines(
    epochs: Sequence[float],
    series: dict[str, Sequence[float]],
    title: str,
    y_title: str,
    *,
    log_y: bool = False,
    reference: dict[str, float] | None = None,
    y_range: Sequence[float] | None = None,
    percent: bool = False,
    width: float = FULL_WIDTH,
) -> go.Figure:
    """One line per named series against the epoch, plus dotted horizontal reference lines.

    Non-finite values (and, on a log axis, values ≤ 0) are left out as gaps. ``percent``: a
    percentage axis whose ticks never repeat (:func:`app.charts.style.percent_axis`); ``width``:
    the pixels the page gives the chart, so that the legend takes fewer entries a row when its
    names need it.
    """
    x = [float(e) for e in epochs]

    def clean(v: float) -> float | None:
        v = float(v)
        if v != v or v in (float("inf"), float("-inf")) or (log_y and v <= 0):
            return None
        return v

    data = [
        dict(
            type="scatter",
            x=x,
            y=[clean(v) for v in ys],
            mode="lines+markers",
            line=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)], width=3),
            name=name,
            hovertemplate=f"{name}, epoch %{{x}}: %{{y:.4g}}<extra></extra>",
        )
        for i, (name, ys) in enumerate(series.items())
    ]
    for name, value in (reference or {}).items():
        data.append(
            dict(
                type="scatter",
                x=[x[0], x[-1]] if x else [],
                y=[float(value)] * (2 if x else 0),
                mode="lines",
                line=dict(color="#555555", dash="dot", width=2),
                name=name,
                hoverinfo="skip",
            )
        )
    yaxis = dict(title=y_title, type="log" if log_y else "linear")
    if log_y:
        yaxis["exponentformat"] = "power"  # 10⁻⁴, not the SI "100µ"
    if y_range is not None:
        yaxis["range"] = list(y_range)
    if percent:
        shown = list(y_range) if y_range is not None else [v for t in data for v in t["y"] if v is not None]
        yaxis |= percent_axis(shown)
    layout = base_layout(title, 360, xaxis=dict(title="epoch", dtick=1), yaxis=yaxis)
    names = [t["name"] for t in data]
    return go.Figure(data=data, layout=with_legend(layout, len(data), names=names, width=width))


def loss_terms(epochs: Sequence[float], terms: dict[str, Sequence[float]], total: Sequence[float]) -> go.Figure:
    """The loss terms of each epoch as stacked bars (a negative term below zero) that add up to
    the total, drawn over them as a line; one legend entry a row, so no name is cut."""
    x = [float(e) for e in epochs]
    total_line = dict(y=[float(v) for v in total], line=dict(color="#222222", width=3), marker=dict(size=9),
                      name="total loss (the sum of the bars)",
                      hovertemplate="total, epoch %{x}: %{y:.4g}<extra></extra>")
    data = layer_bars(x, terms, "epoch %{x}: %{y:.4g}", total_line)
    layout = base_layout("Loss terms per epoch: they add up to the total", 420,
                     xaxis=dict(title="epoch", dtick=1), yaxis=dict(title="loss (weighted term)"))
    layout["barmode"] = "relative"
    return go.Figure(data=data, layout=with_legend(layout, len(data), per_row=1))  # the title on top, the rows under it
