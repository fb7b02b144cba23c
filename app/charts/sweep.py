"""The "Budget sweep" and "Ablations" pages' charts: accuracy and cost against the budget, the
models side by side, and latency against text length."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from app.charts.style import (
    ACCENT,
    BLUE,
    FULL_WIDTH,
    HALF_WIDTH,
    LAYER_COLORS,
    LEGEND,
    MARGIN,
    REFERENCE,
    base_layout,
    log_ticks,
    percent_axis,
    plotly_value,
    with_legend,
)

POINT_SYMBOLS = ["star", "diamond", "square", "triangle-up", "cross"]


def budget_curves(
    title: str,
    y_title: str,
    lines: dict[str, tuple[Sequence[float], Sequence[float]]],
    points: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    reference: dict[str, float] | None = None,
    mark: float | None = None,
    percent: bool = False,
    x_title: str = "budget b",
    errors: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    legend_columns: int = 1,
) -> go.Figure:
    """A metric against the budget b (or another share of dense, named ``x_title``): lines (the
    first drawn thickest), single points as large markers, dotted horizontal reference lines
    (dense) and a vertical line at ``mark``. ``errors``: (above, below) error bar lengths of the
    named lines or points (e.g. a 95% interval of an accuracy). ``legend_columns``: legend entries
    to a row (1 for a chart half a page wide, whose longer names would not fit two)."""
    x_name = x_title.removeprefix("budget ") if x_title.startswith("budget ") else "cost"
    data = [
        dict(
            type="scatter",
            x=[float(x) for x in xs],
            y=[plotly_value(y) for y in ys],
            mode="lines+markers",
            line=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)], width=4 if i == 0 else 2),
            marker=dict(size=7 if i == 0 else 5),
            name=name,
            hovertemplate=f"{name}, {x_name}=%{{x:.2f}}: %{{y:.4g}}<extra></extra>",
        )
        for i, (name, (xs, ys)) in enumerate(lines.items())
    ]
    for i, (name, (xs, ys)) in enumerate((points or {}).items()):
        data.append(
            dict(
                type="scatter",
                x=[plotly_value(x) for x in xs],
                y=[plotly_value(y) for y in ys],
                mode="markers",
                marker=dict(
                    symbol=POINT_SYMBOLS[i % len(POINT_SYMBOLS)],
                    size=15,
                    color=LAYER_COLORS[(len(lines) + i) % len(LAYER_COLORS)],
                    line=dict(width=1, color="#333333"),
                ),
                name=name,
                hovertemplate=f"{name}, {x_name}=%{{x:.2f}}: %{{y:.4g}}<extra></extra>",
            )
        )
    for trace in data:  # error bars on the lines and points named in ``errors``
        if trace["name"] in (errors or {}):
            above, below = errors[trace["name"]]
            trace["error_y"] = dict(type="data", array=[plotly_value(v) for v in above],
                                    arrayminus=[plotly_value(v) for v in below], thickness=2 if
                                    trace["mode"] == "markers" else 1.5, width=8 if trace["mode"] == "markers" else 3)
    for name, value in (reference or {}).items():
        data.append(
            dict(
                type="scatter",
                x=[0.0, 1.0],
                y=[float(value)] * 2,
                mode="lines",
                line=REFERENCE,
                name=name,
                hovertemplate=f"{name}: %{{y:.4g}}<extra></extra>",
            )
        )
    yaxis = dict(title=y_title, **percent_axis(shown_values(data))) if percent else dict(title=y_title)
    layout = base_layout(
        title,
        380,
        xaxis=dict(title=x_title, range=[0, 1.03], tickvals=[0, 0.25, 0.5, 0.75, 1.0]),
        yaxis=yaxis,
    )
    if mark is not None:
        layout["shapes"] = [
            dict(
                type="line",
                xref="x",
                yref="paper",
                x0=float(mark),
                x1=float(mark),
                y0=0,
                y1=1,
                line=dict(color=ACCENT, width=2, dash="dash"),
            )
        ]
    # many traces: the legend goes at the bottom of the figure, where it cannot cover the title,
    # legend_columns entries to a row; the bottom margin holds the axis and those rows
    below = dict(LEGEND, yref="container", yanchor="bottom", y=0, font=dict(size=13),
                 entrywidth=1 / legend_columns, entrywidthmode="fraction")
    rows = math.ceil(len(data) / legend_columns)
    return go.Figure(data=data, layout={**layout, "showlegend": True, "legend": below, "height": 460,
                                        "margin": layout["margin"] | dict(t=50, b=MARGIN["b"] + 8 + 22 * rows)})


def model_bars(
    models: Sequence[str],
    series: dict[str, Sequence[float]],
    title: str,
    y_title: str,
    fmt: str = ".3f",
    percent: bool = False,
    errors: dict[str, tuple[Sequence[float | None], Sequence[float | None]]] | None = None,
    width: float = HALF_WIDTH,
) -> go.Figure:
    """Grouped bars: one group per model, one bar per named series, values written on the bars
    (upright side by side, their labels would run into each other: several series write them
    vertically, inside the bar where it fits). ``errors``: (above, below) error bar lengths per
    model of the named series (None: no bar). ``width``: the pixels the page gives the chart
    (half the main column on Ablations): legend entries a row so that every name fits."""
    several = len(series) > 1
    data = [
        dict(
            type="bar",
            x=list(models),
            y=[plotly_value(v) for v in values],
            name=name,
            marker=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)]),
            text=["" if plotly_value(v) is None else format(float(v), fmt) for v in values],
            textposition="auto" if several else "outside",
            textangle=-90 if several else 0,
            cliponaxis=False,
            hovertemplate=f"%{{x}}, {name}: %{{y:.4g}}<extra></extra>",
        )
        for i, (name, values) in enumerate(series.items())
    ]
    for trace in data:
        if trace["name"] in (errors or {}):
            above, below = errors[trace["name"]]
            trace["error_y"] = dict(type="data", array=[None if v is None else plotly_value(v) for v in above],
                                    arrayminus=[None if v is None else plotly_value(v) for v in below],
                                    thickness=2, width=6, color="#333333")
    yaxis = dict(title=y_title, **percent_axis([0.0, *shown_values(data)])) if percent else dict(title=y_title)
    layout = base_layout(title, 400, xaxis=dict(title="model"), yaxis=yaxis, margin=dict(r=86, b=128))  # slanted names
    layout = with_legend(layout, len(series), names=list(series), width=width) if len(series) > 1 else layout
    # labels that do not fit at a readable size are left out (the hover and the table have them)
    return go.Figure(data=data, layout={**layout, "barmode": "group",
                                        "uniformtext": dict(minsize=12, mode="hide")})


ALL_HEADS = "same model, all heads"
"""The baseline of a saving against the model itself with every head (not a speed-up vs dense)."""


def cost_by_length(
    tokens: Sequence[int],
    dense_ms: Sequence[float],
    budgeted_ms: Sequence[float],
    ideal_ms: Sequence[float],
    budget_label: str,
) -> go.Figure:
    """Latency against input length, both axes logarithmic: the same model with all its heads
    (its dense path, dotted), the budgeted path measured, and its FLOP ideal (dashed). Where the
    measured line runs above the all-heads one, the fixed per-call cost of choosing heads
    outweighs the heads skipped."""
    xs = [int(t) for t in tokens]

    def line(name: str, ys: Sequence[float], style: dict) -> dict:
        return dict(type="scatter", x=xs, y=[float(y) for y in ys], mode="lines+markers", name=name,
                    line=style, marker=dict(size=7, color=style["color"]),
                    hovertemplate=f"{name}, %{{x}} tokens: %{{y:.3f}} ms<extra></extra>")

    data = [
        line(ALL_HEADS, dense_ms, REFERENCE),
        line(f"budgeted, {budget_label} (measured)", budgeted_ms, dict(color=ACCENT, width=4)),
        line(f"budgeted, {budget_label} (FLOP ideal)", ideal_ms, dict(color=BLUE, width=2, dash="dash")),
    ]
    layout = base_layout(
        "Cost vs input length (batch 1, 1 thread): saving vs the same model at all heads",
        420,
        xaxis=dict(title="input length (tokens)", type="log", tickvals=xs, ticktext=[str(x) for x in xs]),
        yaxis=dict(title="latency per input (ms)", type="log", **log_ticks(shown_values(data))),  # 1, 2, 5, 10, …
    )
    return go.Figure(data=data, layout=with_legend(layout, names=[t["name"] for t in data], width=FULL_WIDTH))


def shown_values(data: list[dict]) -> list[float]:
    """Every y value the traces draw, with the ends of their error bars."""
    out = []
    for trace in data:
        ys = [y for y in trace["y"] if y is not None]
        out += ys
        bars = trace.get("error_y")
        if bars:
            out += [y + (a or 0) for y, a in zip(trace["y"], bars["array"], strict=False) if y is not None]
            out += [y - (b or 0) for y, b in zip(trace["y"], bars["arrayminus"], strict=False) if y is not None]
    return out
