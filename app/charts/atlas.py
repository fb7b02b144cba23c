"""The "Head atlas" page's charts: head usage per slice, the inputs placed by their allocation,
and where one head attends."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from app.charts.heads import NUMBERED_HEADS
from app.charts.style import BLUE, MARGIN, SCATTER_POINTS, TICKS, base_layout

CLASS_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                "#17becf", "#d62728"]  # fmt: skip
"""One colour per class on the input map (cycled past ten classes)."""


def usage_heatmaps(maps: Sequence[tuple[Sequence[Sequence[float]], str]], title: str) -> go.Figure:
    """Layers × heads maps of the share of inputs that ran each head, side by side on one colour
    scale (0 … 1, one colour bar): ``maps`` holds (L × H shares, panel title) per map; map i is
    ``data[i]`` on the axes ``x{i+1}`` / ``y{i+1}``. Cells say the share in percent (the number
    alone, to fit three maps across a page) up to :data:`app.charts.heads.NUMBERED_HEADS` heads a layer, on hover
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
    layout = base_layout(title, 150 + 60 * n_layers, margin=dict(l=82, r=90, t=MARGIN["t"] + 24))
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
    layout = base_layout(
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
    layout = base_layout(
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
    layout = base_layout(
        title,
        120 + 42 * len(parts),
        xaxis=dict(title="share of the attention", range=[0, 1.15], tickformat=".0%"),
        yaxis=dict(autorange="reversed", type="category"),
        margin=dict(l=150),
    )
    return go.Figure(data=[bars], layout=layout)
