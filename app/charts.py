"""Pure chart functions: data in, plotly figure out (no Streamlit calls here).

Sized for a projector: large fonts, few colours, the thing to look at in the title. Only
numbers and names from the checkpoint go into the figures, never user text — except the tokens
that label a head's attention map (:func:`attention_heatmap`). Tokens and class names pass
through :func:`plotly_text`, so that plotly shows them as the text they are (plotly renders some
HTML in labels: a class name ``<b>x</b>`` would be bold, ``<a href=…>`` a live link).

Each figure is built by one ``go.Figure(data=..., layout=...)`` call from plain dicts: plotly's
``update_*`` methods validate and dispatch on every call and cost several milliseconds per
figure, which matters when the page redraws on every slider step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from app.head_cells import STAR, TIE, cell_texts, hover_texts, tied_at_cut

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
SELECTION_COLORS = ["#f0f0f0", "#9ecae1", "#fdae6b", "#31a354"]
"""Colours of: neither ran, only the full model's, only the other setting's, both."""


MARGIN = dict(l=68, r=12, t=60, b=56)
"""Room around the plot for the tick labels and axis titles of a usual chart. Axes still grow
their margins to fit (``automargin``), but plotly then draws the figure a second time: margins
set to what a chart needs (here, or per chart) save that redraw — about a third of plotly's time
on a page of six charts."""


def _layout(
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


def probabilities_bar(label_names: Sequence[str], probs: Sequence[float]) -> go.Figure:
    """Horizontal bars of the class probabilities, the predicted class highlighted."""
    top = max(range(len(probs)), key=lambda i: probs[i])
    bar = dict(
        type="bar",
        x=[float(p) for p in probs],
        y=[plotly_text(n) for n in label_names],
        orientation="h",
        marker=dict(color=[ACCENT if i == top else MUTED for i in range(len(probs))]),
        text=[f"{p:.1%}" for p in probs],
        textposition="outside",
        cliponaxis=False,
        hovertemplate="%{y}: %{x:.2%}<extra></extra>",
    )
    layout = _layout(
        "Class probabilities",
        80 + 48 * len(probs),
        # room right of the longest bar for its label ("99.9%"), which would be cut off
        xaxis=dict(range=[0, 1.35], tickvals=[0, 0.5, 1], tickformat=".0%", showgrid=False, title="probability"),
        yaxis=dict(type="category", autorange="reversed", title="class"),
        margin=dict(l=max(MARGIN["l"], 20 + 9 * max(len(str(n)) for n in label_names))),  # ~9 px a letter
    )
    return go.Figure(data=[bar], layout=layout)


def budget_bars(
    budget: Sequence[float],
    k: Sequence[int],
    n_heads: int,
    reference: Sequence[float] | None = None,
    symbol: str = "s",
) -> go.Figure:
    """Budget per layer as bars, labelled with the heads that ran (k of H).

    Args:
        budget: s per layer in this run (bba: the requested budget b).
        k: heads that actually ran per layer.
        n_heads: H.
        reference: the full model's budget per layer, drawn as a red line on each bar when this
            run overrode or ablated something.
        symbol: the budget's name in the method: ``s`` (BudgetFormer) or ``b`` (bba).
    """
    layers = [f"layer {i}" for i in range(len(budget))]
    data = [
        dict(
            type="bar",
            x=layers,
            y=[float(s) for s in budget],
            marker=dict(color=BLUE),
            text=[f"{symbol}={s:.2f}<br>k={kk} of {n_heads}" for s, kk in zip(budget, k, strict=True)],
            textposition="outside",
            cliponaxis=False,
            name=f"{symbol} in this run",
            hovertemplate=f"%{{x}}: {symbol}=%{{y:.3f}}<extra></extra>",
        )
    ]
    if reference is not None:
        data.append(
            dict(
                type="scatter",
                x=layers,
                y=[float(s) for s in reference],
                mode="markers",
                marker=dict(symbol="line-ew", size=70, line=dict(width=5, color=ACCENT)),
                name="full model",
                hovertemplate=f"%{{x}}: full model {symbol}=%{{y:.3f}}<extra></extra>",
            )
        )
    name = "Requested budget b" if symbol == "b" else "Budget s"
    title = f"{name} per layer" + (" (red line: full model)" if reference is not None else "")
    layout = _layout(
        title,
        340,
        xaxis=dict(type="category", title="layer"),
        yaxis=dict(range=[0, 1.3], tickvals=[0, 0.25, 0.5, 0.75, 1.0], title=name[0].lower() + name[1:]),
    )
    return go.Figure(data=data, layout=layout)


NOT_RUN = "#d9d9d9"
"""Cells of heads that were not computed (no colour of the scale, no value)."""


def head_heatmap(values: Sequence[Sequence[float]], selected: Sequence[Sequence[int]], title: str,
                 **options) -> go.Figure:
    """A layers × heads heatmap: the heads that ran coloured, with a ★ above their value; the
    heads that were not computed grey, outside the colour scale (one map of :func:`head_heatmaps`,
    which takes the same ``options``).

    Two traces: ``data[0]`` the heads that ran (``None`` elsewhere), ``data[1]`` the grey cells of
    the heads that did not run, written "—" (or, with ``unrun_values``, the value in parentheses:
    the head scorer rates every head, also those it then leaves out); with more than
    :data:`NUMBERED_HEADS` heads per layer the cells hold ★ and "—" alone, the values on hover.
    ``data[2:]`` draw nothing: they are the legend under the map, what ★ and the grey cells mean.

    Args:
        values: L × H numbers (relevance p or weights w).
        selected: per layer, the indices of the heads that ran.
        title: figure title.
    """
    return head_heatmaps([(values, selected, "")], title, **options)


NUMBERED_HEADS = 8
"""Heads per layer up to which a head map writes each value in its cell; a wider map (e.g. the
12 heads of MiniLM) has cells too narrow for "0.09" at a readable size and shows ★ alone."""


def head_heatmaps(
    maps: Sequence[tuple[Sequence[Sequence[float]], Sequence[Sequence[int]], str]],
    title: str,
    colorscale: str | list = "Blues",
    zmax: float | None = None,
    colorbar_title: str = "",
    unrun_values: bool = False,
    text_size: int = 16,
    cell_values: bool = True,
    cut: bool = False,
) -> go.Figure:
    """:func:`head_heatmap` for several maps side by side in one figure, on one colour scale
    and with one colour bar and legend: ``maps`` holds (values, selected, panel title) per map.

    Map i's two traces are ``data[2i]`` (the heads that ran) and ``data[2i + 1]`` (the grey
    cells), on the axes ``x{i+1}`` / ``y{i+1}``; the legend's traces come last (a third for
    heads tied at the cut, when there are any). One figure
    costs the browser less than one per map (each plotly figure is laid out and drawn on its own).

    Args:
        maps: per map, L × H values (relevance p or weights w), per layer the indices of the heads
            that ran, and the map's title ("" for none).
        title: figure title.
        zmax: top of the colour scale (default: the largest value of a head that ran); give the
            same to maps that are compared, so that their colours mean the same.
        colorbar_title: what the colours are (e.g. "p").
        unrun_values: write the values of the heads that did not run in their grey cells.
        text_size: font size of the cells' text.
        cell_values: write the values in the cells (when the cells are wide enough: a map half a
            page wide at 1280 px has room for ★ alone, and gives the values on hover).
        cut: the heads that ran were chosen by these values (the top k): mark the heads tied at
            the cut with :data:`~app.head_cells.TIE` (:func:`~app.head_cells.tied_at_cut`).
    """
    n_layers, n_heads = len(maps[0][0]), len(maps[0][0][0])
    numbers = cell_values and n_heads <= NUMBERED_HEADS  # else ★ alone in the cells, the values on hover
    rans = [[set(sel) for sel in selected] for _, selected, _ in maps]
    shown = [
        [[float(v) if h in r else None for h, v in enumerate(row)] for row, r in zip(values, ran, strict=True)]
        for (values, _, _), ran in zip(maps, rans, strict=True)
    ]
    top = zmax if zmax is not None else max((v for m in shown for row in m for v in row if v is not None), default=1.0)
    x, y = [f"h{h}" for h in range(n_heads)], [f"layer {i}" for i in range(n_layers)]
    gap = 0.16  # between two maps, as a share of the plot width: room for the right one's layer names
    width = (1 - gap * (len(maps) - 1)) / len(maps)
    data, axes, notes, any_tie = [], {}, [], False
    for i, ((values, selected, panel), ran, cells) in enumerate(zip(maps, rans, shown, strict=True)):
        ties = tied_at_cut(values, selected) if cut else [set() for _ in values]
        any_tie = any_tie or any(ties)
        ran_text, grey_text = cell_texts(values, selected, numbers, unrun_values, ties)
        hover = hover_texts(values, selected, colorbar_title or "value", unrun_values, ties)
        on = dict(xaxis=f"x{i + 1}", yaxis=f"y{i + 1}", x=x, y=y, xgap=3, ygap=3, hoverongaps=False,
                  customdata=hover, hovertemplate="%{customdata}<extra></extra>")
        data.append(dict(
            type="heatmap",
            z=cells,
            text=ran_text,
            texttemplate="%{text}",
            textfont=dict(size=text_size),
            colorscale=colorscale,
            zmin=0,
            zmax=max(float(top), 1e-9),
            showscale=i == 0,
            colorbar=dict(thickness=14, title=dict(text=colorbar_title, side="right")),
            **on,
        ))
        data.append(dict(
            type="heatmap",
            z=[[None if h in r else 0 for h in range(n_heads)] for r in ran],
            text=grey_text,
            texttemplate="%{text}",
            textfont=dict(size=text_size - 2, color="#555555"),
            colorscale=[[0.0, NOT_RUN], [1.0, NOT_RUN]],
            showscale=False,
            **on,
        ))
        suffix = "" if i == 0 else str(i + 1)
        domain = [i * (width + gap), i * (width + gap) + width]
        axes[f"xaxis{suffix}"] = dict(title="head", type="category", domain=domain, tickfont=TICKS, title_font=TICKS,
                                      anchor=f"y{suffix}")
        axes[f"yaxis{suffix}"] = dict(title="layer", type="category", autorange="reversed", tickfont=TICKS,
                                      title_font=TICKS, anchor=f"x{suffix}", **({"matches": "y"} if i else {}))
        if panel:
            notes.append(dict(text=panel, x=sum(domain) / 2, xref="paper", y=1.0, yref="paper", yanchor="bottom",
                              showarrow=False, font=dict(size=16)))
    symbol = colorbar_title or "value"
    legend = [
        dict(type="scatter", x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
             marker=dict(symbol=marker, size=15, color=color, line=dict(width=1, color="#555555")))
        for name, marker, color in (
            (f"head ran (its {symbol}" + ("" if numbers else " on hover") + ")", "star", "#333333"),
            ("not computed" + (f" ({symbol} in brackets)" if unrun_values and numbers else ""), "square", NOT_RUN),
        )
    ]
    if any_tie:  # a name alone: the mark is the text "=" of the cells
        legend.append(dict(type="scatter", x=[None], y=[None], mode="markers", hoverinfo="skip",
                           name=f"{TIE} tied at the cut: same {symbol} (as written) as a head on its other side",
                           marker=dict(size=15, color="rgba(0,0,0,0)", line=dict(width=0))))
    narrow = text_size < 16 and len(maps) == 1  # one map half a page wide: the legend takes two rows
    layout = _layout(
        title,
        150 + 85 * n_layers + (24 if notes else 0),
        margin=dict(
            l=82, r=108, b=(112 if narrow else 90) + (24 if any_tie else 0), t=MARGIN["t"] + (24 if notes else 0)
        ),
    )
    layout |= axes | dict(
        showlegend=True,
        annotations=notes,
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, font=dict(size=14)),
    )
    return go.Figure(data=[*data, *legend], layout=layout)


ATTENTION_TOKENS = 96
"""Tokens of a head's attention map shown at most (a window of the queries and keys): a map
of 512 × 512 cells is neither readable nor cheap to send."""
ATTENTION_LABELS = 40
"""Tokens labelled at most on each axis of an attention map: a longer window labels every second
(third, …) token, so that the labels keep :data:`ATTENTION_LABEL_PX` without running together."""
ATTENTION_LABEL_PX = 12


def attention_heatmap(
    probs: Sequence[Sequence[float]], tokens: Sequence[str], title: str, start: int = 0
) -> go.Figure:
    """One head's attention on one input, BertViz-style: row q is token q's attention over
    the tokens (columns); the window of :data:`ATTENTION_TOKENS` tokens from ``start``.

    Tokens label the axes as plotly markup escaped (``&lt;b&gt;``): a token written like a tag
    shows as the text it is. Positions, not tokens, are the axis values, so a repeated token
    keeps its own row and column.
    """
    end = min(len(tokens), start + ATTENTION_TOKENS)
    window = range(start, end)
    labels = [f"{plotly_text(tokens[i])} ·{i}" for i in window]
    z = [[float(probs[q][k]) for k in window] for q in window]
    heatmap = dict(
        type="heatmap",
        z=z,
        x=list(window),
        y=list(window),
        customdata=[[[labels[q - start], labels[k - start]] for k in window] for q in window],
        colorscale="Blues",
        zmin=0,
        zmax=max(1e-9, max((v for row in z for v in row), default=1.0)),
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
        colorbar=dict(thickness=14, title=dict(text="attention", side="right")),
    )
    step = math.ceil(len(window) / ATTENTION_LABELS)  # every step-th token labelled, all on hover
    ticks = dict(tickvals=list(window)[::step], ticktext=labels[::step], tickfont=dict(size=ATTENTION_LABEL_PX))
    layout = _layout(
        title,
        min(900, 220 + 16 * len(window)),
        xaxis=dict(title="attended token (key)", tickangle=-60),
        yaxis=dict(title="token (query)", autorange="reversed"),
    )
    layout["xaxis"] |= ticks
    layout["yaxis"] |= ticks
    return go.Figure(data=[heatmap], layout=layout)


def relevance_zmax(maps: Sequence[Sequence[Sequence[float]]], n_heads: int) -> float:
    """One colour-scale top for relevance maps shown together: their largest p, and at least
    2/H, so that p = 1/H everywhere (no head preferred) is a middle colour, not the darkest."""
    return max([2.0 / n_heads, *(float(v) for m in maps for row in m for v in row)])


SELECTION_MARKS = ["", "−", "+", STAR]
"""One character per cell of :func:`selection_diff` (a cell of a map in a narrow column holds no
word): neither, dropped (only the full model's), added (only the other setting's), both."""


def selection_diff(
    full: Sequence[Sequence[int]],
    other: Sequence[Sequence[int]],
    n_heads: int,
    other_name: str = "this setting",
) -> go.Figure:
    """Which heads ran in the full model, in the other setting, or in both (layers × heads): a
    colour and a mark per cell, and a legend under the map that names them."""
    if not full:
        raise ValueError("no layers to compare")
    names = ["neither ran", "full model only", f"{other_name} only", "both ran"]
    codes = [
        [int(h in set(f_sel)) + 2 * int(h in set(o_sel)) for h in range(n_heads)]
        for f_sel, o_sel in zip(full, other, strict=True)
    ]
    scale = []
    for i, c in enumerate(SELECTION_COLORS):  # a discrete scale: code i -> colour i
        scale += [[i / 4, c], [(i + 1) / 4, c]]
    heatmap = dict(
        type="heatmap",
        z=codes,
        x=[f"h{h}" for h in range(n_heads)],
        y=[f"layer {i}" for i in range(len(full))],
        text=[[SELECTION_MARKS[c] for c in row] for row in codes],
        texttemplate="%{text}",
        textfont=dict(size=16),
        colorscale=scale,
        zmin=-0.5,
        zmax=3.5,
        showscale=False,
        xgap=3,
        ygap=3,
        customdata=[[names[c] for c in row] for row in codes],
        hovertemplate="%{y}, %{x}: %{customdata}<extra></extra>",
    )
    legend = [
        dict(type="scatter", x=[None], y=[None], mode="markers", hoverinfo="skip",
             name=f"{mark} {label}".strip(), marker=dict(symbol="square", size=15, color=color,
                                                        line=dict(width=1, color="#555555")))
        for mark, label, color in zip(SELECTION_MARKS, names, SELECTION_COLORS, strict=True)
    ][::-1]  # both, added, dropped, neither
    layout = _layout(  # the legend's entries wrap to the narrow column's width (up to three rows)
        "Heads that ran",
        200 + 85 * len(full),
        xaxis=dict(title="head", type="category"),
        yaxis=dict(title="layer", type="category", autorange="reversed"),
        margin=dict(b=150),
    )
    layout |= dict(
        showlegend=True,
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, font=dict(size=14)),
    )
    return go.Figure(data=[heatmap, *legend], layout=layout)


# --------------------------------------------------------------------------- training dynamics

LAYER_COLORS = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"
]  # fmt: skip
BAND = "rgba(44, 160, 44, 0.15)"
"""Fill of the target band [s_min, s_max]."""
LEGEND = dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0, font=dict(size=14))


def _with_legend(layout: dict, n_items: int = 3, per_row: int = 2) -> dict:
    """The layout with its legend above the plot, ``per_row`` entries to a row, and a top margin
    that holds all its rows under the title (a legend wrapping upwards would cover the title)."""
    rows = math.ceil(n_items / per_row)
    legend = {**LEGEND, "entrywidth": 1 / per_row, "entrywidthmode": "fraction"}
    margin = layout["margin"] | dict(t=50 + 24 * rows)
    return {**layout, "showlegend": True, "legend": legend, "margin": margin}


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
    layout = _layout(
        "Budget s per layer during training",
        420,
        xaxis=dict(title="epoch", dtick=1),
        yaxis=dict(title="mean budget s", range=[0, 1.02]),
    )
    return go.Figure(data=data, layout=_with_legend(layout, len(data), per_row=3))


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
) -> go.Figure:
    """One line per named series against the epoch, plus dotted horizontal reference lines.

    Non-finite values (and, on a log axis, values ≤ 0) are left out as gaps.
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
        yaxis["tickformat"] = ".0%"
    layout = _layout(title, 360, xaxis=dict(title="epoch", dtick=1), yaxis=yaxis)
    return go.Figure(data=data, layout=_with_legend(layout, len(data)))


def _bars(x: Sequence, series: dict[str, Sequence[float]], hover: str, over: dict) -> list[dict]:
    """One bar trace per named series over ``x``, in the layer colours (``hover`` follows the name),
    and over them the line ``over`` (its y, name, line style and hovertemplate) with markers."""
    line = dict(type="scatter", x=list(x), mode="lines+markers", **over)
    return [
        dict(
            type="bar",
            x=list(x),
            y=[_value(v) for v in ys],
            name=name,
            marker=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)]),
            hovertemplate=f"{name}, {hover}<extra></extra>",
        )
        for i, (name, ys) in enumerate(series.items())
    ] + [line]


def loss_terms(epochs: Sequence[float], terms: dict[str, Sequence[float]], total: Sequence[float]) -> go.Figure:
    """The loss terms of each epoch as stacked bars (a negative term below zero) that add up to
    the total, drawn over them as a line; one legend entry a row, so no name is cut."""
    x = [float(e) for e in epochs]
    total_line = dict(y=[float(v) for v in total], line=dict(color="#222222", width=3), marker=dict(size=9),
                      name="total loss (the sum of the bars)",
                      hovertemplate="total, epoch %{x}: %{y:.4g}<extra></extra>")
    data = _bars(x, terms, "epoch %{x}: %{y:.4g}", total_line)
    layout = _layout("Loss terms per epoch: they add up to the total", 420,
                     xaxis=dict(title="epoch", dtick=1), yaxis=dict(title="loss (weighted term)"))
    layout["barmode"] = "relative"
    return go.Figure(data=data, layout=_with_legend(layout, len(data), per_row=1))


# --------------------------------------------------------------------------- errors


def confusion_heatmap(matrix: Sequence[Sequence[int]], label_names: Sequence[str]) -> go.Figure:
    """Counts by true class (rows) and predicted class (columns); the diagonal is correct."""
    n = len(label_names)
    heatmap = dict(
        type="heatmap",
        z=[[int(v) for v in row] for row in matrix],
        x=[plotly_text(name) for name in label_names],
        y=[plotly_text(name) for name in label_names],
        text=[[str(int(v)) for v in row] for row in matrix],
        texttemplate="%{text}",
        textfont=dict(size=18),
        colorscale="Blues",
        zmin=0,
        xgap=2,
        ygap=2,
        hovertemplate="true %{y}, predicted %{x}: %{z}<extra></extra>",
        colorbar=dict(thickness=14, title=dict(text="texts", side="right")),
    )
    # one invisible marker per cell, so that a click selects the cell (a heatmap itself sends none)
    cells = dict(
        type="scatter", mode="markers", showlegend=False, name="cells",
        x=[plotly_text(label_names[j]) for i in range(n) for j in range(n)],
        y=[plotly_text(label_names[i]) for i in range(n) for j in range(n)],
        customdata=[[i, j] for i in range(n) for j in range(n)],
        text=[str(int(matrix[i][j])) for i in range(n) for j in range(n)],
        marker=dict(symbol="square", size=max(24, 300 // max(n, 1)), color="rgba(0,0,0,0)"),
        hovertemplate="true %{y}, predicted %{x}: %{text} — click to list them<extra></extra>",
    )
    layout = _layout(
        "Confusion matrix (rows: true class, columns: predicted; click a cell to list its texts)",
        140 + 60 * n,
        xaxis=dict(title="predicted", side="bottom", type="category"),
        yaxis=dict(title="true", type="category", autorange="reversed"),
        margin=dict(l=96, r=126, b=60),  # class names left, the colour bar right
    )
    return go.Figure(data=[heatmap, cells], layout=layout)


# --------------------------------------------------------------------------- easy vs hard


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
    layout = _layout(
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


SCATTER_POINTS = 2000
"""Above this many inputs :func:`budget_scatter` draws densities instead of points."""


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
    layout = _layout(title, 400, yaxis=dict(title=f"mean budget {symbol}"), margin=dict(b=60))
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
    layout = _with_legend(layout, 2)
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
    layout = _layout(
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
    layout = _layout(title, 320, yaxis=dict(title="inputs", rangemode="tozero"))
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
    data = _bars(xs, mean_k, "n = %{x}: mean k %{y:.2f}", dict(
        y=[float(n) for n in needed], line=REFERENCE, name="k = n", hovertemplate="needed %{x}<extra></extra>"))
    layout = _layout(
        title,
        360,
        xaxis=dict(title="heads the input needs n", type="category"),
        yaxis=dict(title="mean heads run k", rangemode="tozero"),
    )
    return go.Figure(data=data, layout={**_with_legend(layout, len(data)), "barmode": "group"})


# --------------------------------------------------------------------------- budget sweep, ablations

POINT_SYMBOLS = ["star", "diamond", "square", "triangle-up", "cross"]
REFERENCE = dict(color="#555555", dash="dot", width=2)


def _value(v: float) -> float | None:
    """A plotly value: None (a gap) for NaN and infinities."""
    v = float(v)
    return v if math.isfinite(v) else None


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
            y=[_value(y) for y in ys],
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
                x=[_value(x) for x in xs],
                y=[_value(y) for y in ys],
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
            trace["error_y"] = dict(type="data", array=[_value(v) for v in above],
                                    arrayminus=[_value(v) for v in below], thickness=2 if
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
    yaxis = dict(title=y_title, tickformat=".0%") if percent else dict(title=y_title)
    layout = _layout(
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
) -> go.Figure:
    """Grouped bars: one group per model, one bar per named series, values written on the bars
    (upright side by side, their labels would run into each other: several series write them
    vertically, inside the bar where it fits). ``errors``: (above, below) error bar lengths per
    model of the named series (None: no bar)."""
    several = len(series) > 1
    data = [
        dict(
            type="bar",
            x=list(models),
            y=[_value(v) for v in values],
            name=name,
            marker=dict(color=LAYER_COLORS[i % len(LAYER_COLORS)]),
            text=["" if _value(v) is None else format(float(v), fmt) for v in values],
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
            trace["error_y"] = dict(type="data", array=[None if v is None else _value(v) for v in above],
                                    arrayminus=[None if v is None else _value(v) for v in below],
                                    thickness=2, width=6, color="#333333")
    yaxis = dict(title=y_title, tickformat=".0%") if percent else dict(title=y_title)
    layout = _layout(title, 400, xaxis=dict(title="model"), yaxis=yaxis, margin=dict(r=86, b=128))  # slanted names
    layout = _with_legend(layout, len(series)) if len(series) > 1 else layout
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
    layout = _layout(
        "Cost vs input length (batch 1, 1 thread): saving vs the same model at all heads",
        420,
        xaxis=dict(title="input length (tokens)", type="log", tickvals=xs, ticktext=[str(x) for x in xs]),
        yaxis=dict(title="latency per input (ms)", type="log", dtick="D2"),  # 1, 2, 5, 10, …
    )
    return go.Figure(data=data, layout=_with_legend(layout))


# --------------------------------------------------------------------------- head atlas

CLASS_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                "#17becf", "#d62728"]  # fmt: skip
"""One colour per class on the input map (cycled past ten classes)."""


def usage_heatmaps(maps: Sequence[tuple[Sequence[Sequence[float]], str]], title: str) -> go.Figure:
    """Layers × heads maps of the share of inputs that ran each head, side by side on one colour
    scale (0 … 1, one colour bar): ``maps`` holds (L × H shares, panel title) per map; map i is
    ``data[i]`` on the axes ``x{i+1}`` / ``y{i+1}``. Cells say the share in percent (the number
    alone, to fit three maps across a page) up to :data:`NUMBERED_HEADS` heads a layer, on hover
    beyond."""
    n_layers, n_heads = len(maps[0][0]), len(maps[0][0][0])
    numbers = n_heads <= NUMBERED_HEADS
    x, y = [f"h{h}" for h in range(n_heads)], [f"layer {i}" for i in range(n_layers)]
    gap = 0.1 if len(maps) > 1 else 0.0
    width = (1 - gap * (len(maps) - 1)) / len(maps)
    data, axes, notes = [], {}, []
    for i, (share, panel) in enumerate(maps):
        z = [[float(v) for v in row] for row in share]
        suffix = "" if i == 0 else str(i + 1)
        data.append(dict(
            type="heatmap", z=z, x=x, y=y, xaxis=f"x{i + 1}", yaxis=f"y{i + 1}", xgap=2, ygap=2,
            colorscale="Blues", zmin=0, zmax=1, showscale=i == 0,
            text=[[f"{v * 100:.0f}" if numbers else "" for v in row] for row in z], texttemplate="%{text}",
            textfont=dict(size=13), hovertemplate=f"{panel}: %{{y}}, %{{x}} ran on %{{z:.1%}} of inputs<extra></extra>",
            colorbar=dict(thickness=14, title=dict(text="% of inputs", side="right"), tickvals=[0, 0.5, 1],
                          ticktext=["0", "50", "100"]),
        ))  # fmt: skip
        domain = [i * (width + gap), i * (width + gap) + width]
        axes[f"xaxis{suffix}"] = dict(title="head", type="category", domain=domain, tickfont=TICKS,
                                      title_font=TICKS, anchor=f"y{suffix}")
        axes[f"yaxis{suffix}"] = dict(type="category", autorange="reversed", tickfont=TICKS, anchor=f"x{suffix}",
                                      showticklabels=i == 0, **({"matches": "y"} if i else {}))
        notes.append(dict(text=panel, x=sum(domain) / 2, xref="paper", y=1.0, yref="paper", yanchor="bottom",
                          showarrow=False, font=dict(size=15)))
    layout = _layout(title, 150 + 60 * n_layers, margin=dict(l=82, r=90, t=MARGIN["t"] + 24))
    return go.Figure(data=data, layout=layout | axes | dict(annotations=notes))


def usage_difference(diff: Sequence[Sequence[float]], title: str, legend: str) -> go.Figure:
    """A diverging layers × heads map of a difference of two usage maps (slice A − slice B):
    red where A ran a head more often, blue where less, white where alike; a symmetric scale
    around 0 with its own colour bar titled ``legend``."""
    z = [[float(v) for v in row] for row in diff]
    n_layers, n_heads = len(z), len(z[0])
    top = max(1e-9, max(abs(v) for row in z for v in row))
    heatmap = dict(
        type="heatmap", z=z, x=[f"h{h}" for h in range(n_heads)], y=[f"layer {i}" for i in range(n_layers)],
        xgap=2, ygap=2, colorscale="RdBu", reversescale=True, zmid=0, zmin=-top, zmax=top,
        text=[[f"{v * 100:+.0f}" if n_heads <= NUMBERED_HEADS else "" for v in row] for row in z],
        texttemplate="%{text}", textfont=dict(size=14),
        hovertemplate="%{y}, %{x}: A − B = %{customdata}<extra></extra>",
        colorbar=dict(thickness=14, title=dict(text=legend, side="right"), tickformat="+.0%"),
        customdata=[[f"{v:+.1%}" for v in row] for row in z],
    )  # fmt: skip
    layout = _layout(
        title,
        150 + 60 * n_layers,
        xaxis=dict(title="head", type="category"),
        yaxis=dict(type="category", autorange="reversed"),
        margin=dict(l=82, r=120),
    )
    return go.Figure(data=[heatmap], layout=layout)


def input_map(
    xy: np.ndarray,
    color: Sequence,
    color_title: str,
    names: Sequence[str],
    title: str,
    categories: Sequence[str] | None = None,
    max_svg: int = SCATTER_POINTS,
) -> go.Figure:
    """Every input as a point placed by its allocation (``xy``, N × 2), for box and lasso
    selection: each point's ``customdata`` is its row in the table, so a selection names its
    inputs whatever trace they are in.

    With ``categories`` (class names, or right / wrong), ``color`` holds each input's category
    index and each category is one trace with its legend entry; otherwise ``color`` is a number
    per input (s, k) on a colour scale with its colour bar. More than ``max_svg`` points are drawn
    with WebGL (``scattergl``). Hover labels (``names``) are indices and class names only.
    """
    xy = np.asarray(xy, dtype=float)
    kind = "scattergl" if len(xy) > max_svg else "scatter"
    rows = np.arange(len(xy))
    base = dict(type=kind, mode="markers", hovertemplate="%{text}<extra></extra>")
    names = np.asarray(names, dtype=object)
    if categories is not None:
        codes = np.asarray(color, dtype=int)
        data = [
            dict(base, x=xy[codes == c, 0], y=xy[codes == c, 1], customdata=rows[codes == c], name=str(label),
                 text=names[codes == c], marker=dict(color=CLASS_COLORS[c % len(CLASS_COLORS)], size=7, opacity=0.7))
            for c, label in enumerate(categories)
            if (codes == c).any()
        ]  # fmt: skip
    else:
        data = [dict(
            base, x=xy[:, 0], y=xy[:, 1], customdata=rows, text=names, name=color_title,
            marker=dict(color=np.asarray(color, dtype=float), colorscale="Viridis", size=7, opacity=0.75,
                        colorbar=dict(thickness=14, title=dict(text=color_title, side="right"))),
        )]  # fmt: skip
    layout = _layout(
        title,
        520,
        xaxis=dict(title="first principal component of p", zeroline=False),
        yaxis=dict(title="second principal component", zeroline=False),
    )
    layout |= dict(dragmode="select", showlegend=categories is not None,
                   legend=dict(title=dict(text=color_title), font=dict(size=14)))
    return go.Figure(data=data, layout=layout)


def attention_profile_bars(shares: dict[str, float], title: str) -> go.Figure:
    """Horizontal bars: the share of a head's attention on each part (first token, same token,
    …), in the order given."""
    parts = list(shares)
    bars = dict(
        type="bar", orientation="h", y=parts, x=[float(shares[p]) for p in parts], marker=dict(color=BLUE),
        text=[f"{shares[p]:.0%}" for p in parts], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.1%} of the attention<extra></extra>",
    )  # fmt: skip
    layout = _layout(
        title,
        120 + 42 * len(parts),
        xaxis=dict(title="share of the attention", range=[0, 1.15], tickformat=".0%"),
        yaxis=dict(autorange="reversed", type="category"),
        margin=dict(l=150),
    )
    return go.Figure(data=[bars], layout=layout)
