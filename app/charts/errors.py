"""The confusion matrix of the "Errors" and "Batch analysis" pages."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from app.charts.style import base_layout, plotly_text


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
    layout = base_layout(
        "Confusion matrix (rows: true class, columns: predicted; click a cell to list its texts)",
        140 + 60 * n,
        xaxis=dict(title="predicted", side="bottom", type="category"),
        yaxis=dict(title="true", type="category", autorange="reversed"),
        margin=dict(l=96, r=126, b=60),  # class names left, the colour bar right
    )
    return go.Figure(data=[heatmap, cells], layout=layout)
