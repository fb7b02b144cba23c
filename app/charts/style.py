"""The look every chart shares: colours, the template, margins, the legend above the plot, and
the helpers that build a layout and make text and numbers safe for plotly."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

ACCENT = "#d62728"  # the predicted class / the full model's budget
MUTED = "#9ecae1"
DARK_GREY = "#6b6b6b"  # correct inputs' density lines (MUTED is too pale as a thin line)
BLUE = "#1f77b4"
LIGHT = [[0.0, "#ffffff"], [1.0, MUTED]]
"""A pale colour scale (the dense model's all-ones weights)."""
TICKS = dict(size=16)
TEXT, GREY, GRID = "#31333F", "#808495", "#e6eaf1"
TEMPLATE = go.layout.Template(
    layout=dict(
        font=dict(family='"Source Sans", "Source Sans Pro", sans-serif', color=TEXT),
        title=dict(x=0, xref="container", xanchor="left", pad=dict(l=8), font=dict(color=TEXT, weight=600)),
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        colorway=["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a"],
        xaxis=dict(gridcolor=GRID, linecolor=GRID, zerolinecolor=GRID, tickfont=dict(color=GREY),
                   title=dict(font=dict(color=GREY)), automargin=True),
        yaxis=dict(gridcolor=GRID, linecolor=GRID, zerolinecolor=GRID, tickfont=dict(color=GREY),
                   title=dict(font=dict(color=GREY)), automargin=True),
        hoverlabel=dict(bgcolor="white", bordercolor=GRID, font=dict(color=TEXT)),
        legend=dict(bgcolor="rgba(0,0,0,0)"),
    )
)  # fmt: skip
"""The look of every figure, close to Streamlit's light theme, set here so that the app draws
charts without that theme (``theme=None``): restyling each figure in the browser cost about a
third of a second on a page of seven charts."""

MARGIN = dict(l=68, r=12, t=60, b=56)
"""Room around the plot for the tick labels and axis titles of a usual chart. Axes still grow
their margins to fit (``automargin``), but plotly then draws the figure a second time: margins
set to what a chart needs (here, or per chart) save that redraw — about a third of plotly's time
on a page of six charts."""


def base_layout(
    title: str, height: int, xaxis: dict | None = None, yaxis: dict | None = None, margin: dict | None = None
) -> dict:
    # the Streamlit theme sets axis fonts itself, so the tick fonts are explicit
    return dict(
        template=TEMPLATE,
        title=dict(text=title, font=dict(size=20)),
        font=dict(size=17),
        height=height,
        margin=MARGIN | (margin or {}),
        showlegend=False,
        xaxis=dict(tickfont=TICKS, title_font=TICKS, **(xaxis or {})),
        yaxis=dict(tickfont=TICKS, title_font=TICKS, **(yaxis or {})),
    )


def plotly_text(value: object) -> str:
    """``value`` as text for a plotly label, hover text or axis value: ``&``, ``<`` and ``>`` as
    entities, which plotly shows as those characters instead of reading a tag."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


LAYER_COLORS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"
]  # fmt: skip
BAND = "rgba(44, 160, 44, 0.15)"
"""Fill of the target band [s_min, s_max]."""
LEGEND = dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0, font=dict(size=14))


def with_legend(layout: dict, n_items: int = 3, per_row: int = 2) -> dict:
    """The layout with its legend above the plot, ``per_row`` entries to a row, and a top margin
    that holds all its rows under the title (a legend wrapping upwards would cover the title)."""
    rows = math.ceil(n_items / per_row)
    legend = {**LEGEND, "entrywidth": 1 / per_row, "entrywidthmode": "fraction"}
    margin = layout["margin"] | dict(t=50 + 24 * rows)
    return {**layout, "showlegend": True, "legend": legend, "margin": margin}


def layer_bars(x: Sequence, series: dict[str, Sequence[float]], hover: str, over: dict) -> list[dict]:
    """One bar trace per named series over ``x``, in the layer colours (``hover`` follows the name),
    and over them the line ``over`` (its y, name, line style and hovertemplate) with markers."""
    line = dict(type="scatter", x=list(x), mode="lines+markers", **over)
    return [
        dict(
            type="bar",
            x=list(x),
            y=[plotly_value(v) for v in ys],
            name=name,
            marker=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)]),
            hovertemplate=f"{name}, {hover}<extra></extra>",
        )
        for i, (name, ys) in enumerate(series.items())
    ] + [line]


REFERENCE = dict(color="#555555", dash="dot", width=2)


def plotly_value(v: float) -> float | None:
    """A plotly value: None (a gap) for NaN and infinities."""
    v = float(v)
    return v if math.isfinite(v) else None


SCATTER_POINTS = 2000
"""Above this many inputs a scatter of inputs (:func:`app.charts.easy_hard.budget_scatter`,
:func:`app.charts.atlas.input_map`) draws densities instead of points."""
