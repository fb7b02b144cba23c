"""The Explore page's charts: the class probabilities, the budget and heads per layer, the heads
a setting dropped or added, and one head's attention on the input."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from app.charts.style import ACCENT, BLUE, MARGIN, MUTED, base_layout, plotly_text, text_px
from app.head_cells import STAR

SELECTION_COLORS = ["#f0f0f0", "#9ecae1", "#fdae6b", "#31a354"]
"""Colours of: neither ran, only the full model's, only the other setting's, both."""


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
    layout = base_layout(
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
    layout = base_layout(
        title,
        340,
        xaxis=dict(type="category", title="layer"),
        yaxis=dict(range=[0, 1.3], tickvals=[0, 0.25, 0.5, 0.75, 1.0], title=name[0].lower() + name[1:]),
    )
    return go.Figure(data=data, layout=layout)


ATTENTION_TOKENS = 96
"""Tokens of a head's attention map shown at most (a window of the queries and keys): a map
of 512 × 512 cells is neither readable nor cheap to send."""
ATTENTION_LABELS = 40
"""Tokens labelled at most on each axis of an attention map: a longer window labels every second
(third, …) token, so that the labels keep :data:`ATTENTION_LABEL_PX` without running together."""
ATTENTION_LABEL_PX = 12
ATTENTION_ANGLE = 60
"""Degrees the key tokens' labels slant under an attention map."""


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
    # room for the longest label: beside the rows, and under the columns where it slants at 60°
    # (reaching down and to the left of its column); plotly's automargin would take it from the cells
    longest = max((text_px(t, ATTENTION_LABEL_PX) for t in labels[::step]), default=0.0)
    left, bottom = int(longest + 44), int(longest * math.sin(math.radians(ATTENTION_ANGLE)) + 56)
    layout = base_layout(
        title,
        min(900, 220 + 16 * len(window)) + bottom - MARGIN["b"],
        xaxis=dict(title="attended token (key)", tickangle=-ATTENTION_ANGLE),
        yaxis=dict(title="token (query)", autorange="reversed"),
        margin=dict(l=left, b=bottom),
    )
    layout["xaxis"] |= ticks
    layout["yaxis"] |= ticks
    return go.Figure(data=[heatmap], layout=layout)


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
    layout = base_layout(  # the legend's entries wrap to the narrow column's width (up to three rows)
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
