"""Pure chart functions: data in, plotly figure out (no Streamlit calls here).

Sized for a projector: large fonts, few colours, the thing to look at in the title. Only
numbers and names from the checkpoint go into the figures, never user text.

Each figure is built by one ``go.Figure(data=..., layout=...)`` call from plain dicts: plotly's
``update_*`` methods validate and dispatch on every call and cost several milliseconds per
figure, which matters when the page redraws on every slider step.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

ACCENT = "#d62728"  # the predicted class / the full model's budget
MUTED = "#9ecae1"
BLUE = "#1f77b4"
STAR = "★"
LIGHT = [[0.0, "#ffffff"], [1.0, MUTED]]
"""A pale colour scale (the dense model's all-ones weights)."""
TICKS = dict(size=16)
SELECTION_COLORS = ["#f0f0f0", "#9ecae1", "#fdae6b", "#31a354"]
"""Colours of: neither ran, only the full model's, only the other setting's, both."""


def _layout(title: str, height: int, xaxis: dict | None = None, yaxis: dict | None = None) -> dict:
    # the Streamlit theme sets axis fonts itself, so the tick fonts are explicit
    return dict(
        title=dict(text=title, font=dict(size=20)),
        font=dict(size=17),
        height=height,
        margin=dict(l=10, r=10, t=60, b=10),
        showlegend=False,
        xaxis=dict(tickfont=TICKS, title_font=TICKS, **(xaxis or {})),
        yaxis=dict(tickfont=TICKS, title_font=TICKS, **(yaxis or {})),
    )


def probabilities_bar(label_names: Sequence[str], probs: Sequence[float]) -> go.Figure:
    """Horizontal bars of the class probabilities, the predicted class highlighted."""
    top = max(range(len(probs)), key=lambda i: probs[i])
    bar = dict(
        type="bar",
        x=[float(p) for p in probs],
        y=list(label_names),
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
        xaxis=dict(range=[0, 1.15], tickformat=".0%", showgrid=False),
        yaxis=dict(autorange="reversed"),
    )
    return go.Figure(data=[bar], layout=layout)


def budget_bars(
    budget: Sequence[float],
    k: Sequence[int],
    n_heads: int,
    reference: Sequence[float] | None = None,
) -> go.Figure:
    """Budget s per layer as bars, labelled with the heads that ran (k of H).

    Args:
        budget: s per layer in this run.
        k: heads that actually ran per layer.
        n_heads: H.
        reference: the full model's s per layer, drawn as a red line on each bar when this run
            overrode or ablated something.
    """
    layers = [f"layer {i}" for i in range(len(budget))]
    data = [
        dict(
            type="bar",
            x=layers,
            y=[float(s) for s in budget],
            marker=dict(color=BLUE),
            text=[f"s={s:.2f}<br>k={kk} of {n_heads}" for s, kk in zip(budget, k, strict=True)],
            textposition="outside",
            cliponaxis=False,
            name="s in this run",
            hovertemplate="%{x}: s=%{y:.3f}<extra></extra>",
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
                hovertemplate="%{x}: full model s=%{y:.3f}<extra></extra>",
            )
        )
    title = "Budget s per layer" + (" (red line: full model)" if reference is not None else "")
    layout = _layout(
        title, 340, yaxis=dict(range=[0, 1.3], tickvals=[0, 0.25, 0.5, 0.75, 1.0], title="budget s")
    )
    return go.Figure(data=data, layout=layout)


def head_heatmap(
    values: Sequence[Sequence[float]],
    selected: Sequence[Sequence[int]],
    title: str,
    colorscale: str | list = "Blues",
    zmax: float | None = None,
) -> go.Figure:
    """A layers × heads heatmap; cells of heads that ran carry a ★ above their value.

    Args:
        values: L × H numbers (relevance p or weights w).
        selected: per layer, the indices of the heads that ran.
        title: figure title.
        zmax: top of the colour scale (default: the largest value).
    """
    n_layers, n_heads = len(values), len(values[0])
    top = zmax if zmax is not None else max(max(r) for r in values)
    text = [
        [f"{STAR}<br>{v:.2f}" if h in set(sel) else f"{v:.2f}" for h, v in enumerate(row)]
        for row, sel in zip(values, selected, strict=True)
    ]
    heatmap = dict(
        type="heatmap",
        z=[[float(v) for v in r] for r in values],
        x=[f"h{h}" for h in range(n_heads)],
        y=[f"layer {i}" for i in range(n_layers)],
        text=text,
        texttemplate="%{text}",
        textfont=dict(size=16),
        colorscale=colorscale,
        zmin=0,
        zmax=max(float(top), 1e-9),
        xgap=3,
        ygap=3,
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
        colorbar=dict(thickness=14),
    )
    layout = _layout(title, 120 + 85 * n_layers, yaxis=dict(autorange="reversed"))
    return go.Figure(data=[heatmap], layout=layout)


def selection_diff(
    full: Sequence[Sequence[int]],
    other: Sequence[Sequence[int]],
    n_heads: int,
    other_name: str = "this setting",
) -> go.Figure:
    """Which heads ran in the full model, in the other setting, or in both (layers × heads)."""
    if not full:
        raise ValueError("no layers to compare")
    names = ["neither", "full model only", f"{other_name} only", "both"]
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
        text=[[["", "full", "new", "both"][c] for c in row] for row in codes],
        texttemplate="%{text}",
        textfont=dict(size=15),
        colorscale=scale,
        zmin=-0.5,
        zmax=3.5,
        showscale=False,
        xgap=3,
        ygap=3,
        customdata=[[names[c] for c in row] for row in codes],
        hovertemplate="%{y}, %{x}: %{customdata}<extra></extra>",
    )
    layout = _layout(
        "Heads that ran: full model vs " + other_name,
        120 + 85 * len(full),
        yaxis=dict(autorange="reversed"),
    )
    return go.Figure(data=[heatmap], layout=layout)
