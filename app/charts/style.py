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
LEGEND_ROW = 24
"""Pixels a row of a legend of :data:`LEGEND`'s font takes."""
LEGEND_SYMBOL = 40
"""Pixels of a legend entry before its text: the line or marker drawn for it, and a gap."""
TITLE_TOP = dict(y=1.0, yref="container", yanchor="top", pad=dict(t=10, l=8))
"""A title pinned to the top of the figure. Plotly's default puts it at the middle of the top
margin, where a margin grown for a legend above the plot puts it among the legend's rows."""
TITLE_ROOM = 48
"""Pixels from the top of a figure to the bottom of a :data:`TITLE_TOP` title of 20 px (its pad,
its line) and a gap above what comes under it."""

FULL_WIDTH = 800
"""Pixels wide a chart drawn across Streamlit's main column is at 1280 px (the sidebar open)."""
HALF_WIDTH = 378
"""Pixels wide a chart in one of two columns of the main column is at 1280 px."""


def text_px(text: str, size: float) -> float:
    """A generous estimate of the pixels ``text`` takes at font ``size``: half an em a character
    (the app's sans-serif averages about 0.45 em, bold titles included), to judge whether a label
    fits before drawing it."""
    return 0.5 * size * len(text)


def legend_columns(names: Sequence[str], width: float, margin: dict, most: int = 2) -> int:
    """How many legend entries to put in a row (at most ``most``) so that every entry's text ends
    inside a figure ``width`` pixels wide with ``margin`` (a fraction-wide entry is a share of
    the plot area, which starts at the left margin; the last column's text may run into the right
    margin, not past the figure)."""
    plot = width - margin["l"] - margin["r"]
    size = LEGEND["font"]["size"]
    for per_row in range(max(1, most), 1, -1):
        step = plot / per_row
        if all(margin["l"] + (i % per_row) * step + LEGEND_SYMBOL + text_px(n, size) <= width
               and (i % per_row == per_row - 1 or LEGEND_SYMBOL + text_px(n, size) <= step)
               for i, n in enumerate(names)):
            return per_row
    return 1


def with_legend(layout: dict, n_items: int = 3, per_row: int = 2, names: Sequence[str] | None = None,
                width: float | None = None) -> dict:
    """The layout with its legend above the plot, ``per_row`` entries to a row (fewer when the
    ``names`` would not fit a figure ``width`` pixels wide, :func:`legend_columns`), the title at
    the top of the figure and a top margin that holds the legend's rows under it: a legend that
    wraps upwards never covers the title."""
    if names is not None and width is not None:
        per_row = legend_columns(names, width, layout["margin"], per_row)
    rows = math.ceil(n_items / per_row)
    legend = {**LEGEND, "entrywidth": 1 / per_row, "entrywidthmode": "fraction"}
    margin = layout["margin"] | dict(t=TITLE_ROOM + 8 + LEGEND_ROW * rows)
    title = {**layout.get("title", {}), **TITLE_TOP}
    return {**layout, "title": title, "showlegend": True, "legend": legend, "margin": margin}


def percent_axis(values: Sequence[float], ticks: int = 5) -> dict:
    """Tick spacing and format of a percentage axis over ``values`` (fractions): a step of 1, 2 or
    5 × 10ⁿ giving about ``ticks`` ticks, and as many decimals as that step needs, so that no two
    ticks read the same (a span of 96–98.4 % reads 96.0 %, 96.5 %, …, not 96 %, 97 %, 97 %, 98 %)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    span = (max(finite) - min(finite)) if finite else 1.0
    if span <= 0:
        span = max(abs(finite[0]) * 0.05, 0.01)
    step = nice_step(span / ticks)
    decimals = max(0, -math.floor(math.log10(step * 100) + 1e-9))
    return dict(tickformat=f".{decimals}%", dtick=step)


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 × 10ⁿ at least ``raw`` (> 0)."""
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def log_ticks(values: Sequence[float]) -> dict:
    """Ticks of a logarithmic axis over ``values`` (> 0): 1, 2, 5 × 10ⁿ from the one below the
    smallest to the one above the largest, each written as the whole number it is ("10", "20",
    "50"), so that the axis reads in order (plotly's own 1-2-5 ticks write "2" and "5" for 20 and 50)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    lo, hi = (min(finite), max(finite)) if finite else (1.0, 10.0)
    candidates = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                  for m in (1, 2, 5)]
    below = max((c for c in candidates if c <= lo), default=lo)
    above = min((c for c in candidates if c >= hi), default=hi)
    vals = [c for c in candidates if below * (1 - 1e-9) <= c <= above * (1 + 1e-9)]
    return dict(tickvals=vals, ticktext=[f"{v:.6g}" for v in vals])


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
