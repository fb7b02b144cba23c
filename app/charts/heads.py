"""The layers × heads maps of relevance and weights (Explore, Side by side, Easy vs hard): the heads
that ran coloured and starred, the others grey."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from app.charts.style import MARGIN, TICKS, base_layout
from app.head_cells import TIE, cell_texts, hover_texts, tied_at_cut

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


ROW_HEIGHT = 85
"""Pixels per layer of a head map."""
TALLEST_LAYERS = 2
"""A map is as tall as one of this many layers at most (320 px), so that Explore's first screen
at 1280×720 holds it under the cards: a deeper model's rows share that height (six layers of
MiniLM: rows of 28 px, about as tall as its twelve heads' cells are wide)."""


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
                           name=f"{TIE} tied at the cut (same {symbol})",  # the digits apart: on hover
                           marker=dict(size=15, color="rgba(0,0,0,0)", line=dict(width=0))))
    narrow = text_size < 16 and len(maps) == 1  # one map half a page wide: the legend takes two rows
    layout = base_layout(
        title,
        150 + ROW_HEIGHT * min(n_layers, TALLEST_LAYERS) + (24 if notes else 0),
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


def relevance_zmax(maps: Sequence[Sequence[Sequence[float]]], n_heads: int) -> float:
    """One colour-scale top for relevance maps shown together: their largest p, and at least
    2/H, so that p = 1/H everywhere (no head preferred) is a middle colour, not the darkest."""
    return max([2.0 / n_heads, *(float(v) for m in maps for row in m for v in row)])
