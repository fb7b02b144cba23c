"""One input's analysis as a single self-contained HTML file, to read offline or to send.

:func:`build_report` runs the text through the checkpoint and writes one HTML page holding the
text, the prediction and its probabilities, the budget and the heads run per layer, the
relevance map (a plotly figure with plotly's JavaScript inside the file), the why-this-budget
highlighting (occlusion, :mod:`budgetformer_core.analysis.explain`) and the settings. Nothing is fetched
when it opens: the page's content security policy allows no request at all. Every piece of
user text (the input, its tokens) is HTML-escaped, so markup in it shows as text.

The highlighting helpers (:func:`attribution_html`, :func:`attribution_legend_html`) are the
ones the app's Explore page draws with.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..io.checkpoint import Checkpoint
    from ..model.budget import Control
    from .explain import Explanation
    from .infer import Analysis

ATTRIBUTION_RGB = {1: (214, 39, 40), -1: (31, 119, 180)}
"""Red: the token raised the quantity (s: more heads); blue: it lowered it."""


def attribution_scale(e: Explanation) -> float:
    """One colour-scale end for every layer of an explanation: the largest |attribution|."""
    return max((abs(a) for row in e.budget_attribution for a in row), default=0.0)


def attribution_html(tokens: list[str], attribution: list[float], zmax: float) -> str:
    """The tokens as highlighted text: red for those that raised the quantity, blue for those
    that lowered it, the stronger the more. Every token is HTML-escaped (markup stays text);
    its number is in its tooltip and ``data-a``."""
    spans = []
    for token, a in zip(tokens, attribution, strict=True):
        alpha = 0.0 if zmax <= 0 else min(1.0, abs(a) / zmax)
        r, g, b = ATTRIBUTION_RGB[1 if a >= 0 else -1]
        spans.append(
            f'<span data-a="{a:.6g}" title="{html.escape(token)}: {a:+.4g}" style="background: '
            f'rgba({r}, {g}, {b}, {alpha * 0.85:.3f}); padding: 1px 3px; margin: 1px; border-radius: 3px; '
            f'color: {"#ffffff" if alpha > 0.6 else "inherit"}">{html.escape(token)}</span>'
        )
    return '<div style="line-height: 2.1; font-size: 1.05rem">' + " ".join(spans) + "</div>"


def attribution_legend_html(zmax: float, symbol: str) -> str:
    """The colour legend of :func:`attribution_html`: lowered (blue) … raised (red), with its
    scale's ends."""
    (r1, g1, b1), (r2, g2, b2) = ATTRIBUTION_RGB[-1], ATTRIBUTION_RGB[1]
    bar = (f"background: linear-gradient(to right, rgba({r1}, {g1}, {b1}, 0.85), rgba(255, 255, 255, 0), "
           f"rgba({r2}, {g2}, {b2}, 0.85)); width: 220px; height: 14px; display: inline-block; "
           "vertical-align: middle; border: 1px solid #cccccc; margin: 0 8px")
    return (f'<div style="font-size: 0.95rem">lowered {symbol} (−{zmax:.3g})<span style="{bar}"></span>'
            f"raised {symbol} (+{zmax:.3g})</div>")


POLICY = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
          "img-src data:; font-src data:")
"""The report's content security policy: its own inline script and styles, nothing from outside."""

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2rem auto; padding: 0 1rem; color: #31333F; }
h1 { font-size: 1.7rem; } h2 { font-size: 1.3rem; margin-top: 2rem; }
table { border-collapse: collapse; }
th, td { padding: 0.3rem 0.7rem; border-bottom: 1px solid #e6eaf1; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre.text { white-space: pre-wrap; background: #f6f7f9; padding: 0.8rem; border-radius: 6px; font-size: 1rem; }
.note { color: #6b6b6b; font-size: 0.95rem; }
"""


def relevance_figure(a: Analysis, title: str, symbol: str):
    """The layers × heads relevance map of one analysis: p coloured, ★ on the heads that ran."""
    import plotly.graph_objects as go

    n_layers, n_heads = len(a.relevance), len(a.relevance[0])
    ran = [set(s) for s in a.selected_heads]
    text = [[("★ " if h in ran[layer] else "") + (f"{v:.2f}" if n_heads <= 8 else "") for h, v in enumerate(row)]
            for layer, row in enumerate(a.relevance)]
    heatmap = go.Heatmap(
        z=a.relevance, x=[f"h{h}" for h in range(n_heads)], y=[f"layer {i}" for i in range(n_layers)],
        text=text, texttemplate="%{text}", colorscale="Blues", zmin=0, xgap=3, ygap=3,
        colorbar=dict(title=dict(text=symbol, side="right")),
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
    )  # fmt: skip
    layout = dict(title=dict(text=title), height=160 + 70 * n_layers, margin=dict(l=80, r=40, t=60, b=50),
                  xaxis=dict(title="head", type="category"),
                  yaxis=dict(title="layer", type="category", autorange="reversed"))  # fmt: skip
    return go.Figure(data=[heatmap], layout=layout)


def _rows(cells: list[list[str]], header: list[str], numeric: set[int] = frozenset()) -> str:
    """An HTML table of already-escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in cells
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def build_report(
    ckpt: Checkpoint,
    text: str,
    control: Control | None = None,
    name: str | None = None,
    setting: str | None = None,
) -> str:
    """One self-contained HTML page on ``text`` through ``ckpt`` (see the module docstring).

    Args:
        ckpt: a loaded checkpoint.
        text: the input (a usable text, as :func:`budgetformer_core.analysis.infer.analyze` takes).
        control: the setting to run (e.g. ``Control(budget=b)``); None: the model's own.
        name: the model's name in the report (default: its folder's name).
        setting: the setting in words (default: from ``control``).

    Raises:
        ValueError: an unusable text, or a budget asked of a dense model.
    """
    from ..io.files import file_sha256
    from .explain import explain
    from .infer import analyze, check_texts

    check_texts([text])
    method = ckpt.model.method
    if control is not None and not method.budgeted:
        raise ValueError("a dense checkpoint has no budget: a budget needs a budgetformer or bba model")
    [a] = analyze(ckpt, [text], control)
    symbol = method.symbol
    name = name or (ckpt.path.name if ckpt.path else "checkpoint")
    if setting is None:
        own = control is None or control.budget is None
        setting = "the model's own budget" if own else f"{symbol} = {control.budget:g}"
    confidence = max(a.probs)
    parts = [
        f"<h1>BudgetFormer report: {html.escape(name)}</h1>",
        "<h2>Text</h2>",
        f'<pre class="text">{html.escape(text)}</pre>',
        f'<p class="note">The model read {a.n_tokens} tokens'
        + (f"; the text is longer than the {ckpt.config.max_len} tokens it reads (truncated)." if a.truncated else ".")
        + "</p>",
        "<h2>Prediction</h2>",
        f"<p><b>{html.escape(a.label)}</b> ({confidence:.1%})</p>",
        _rows([[html.escape(c), f"{p:.4f}"] for c, p in zip(ckpt.label_names, a.probs, strict=True)],
              ["class", "probability"], {1}),
        "<h2>Budget and heads per layer</h2>",
        _rows([[str(layer), f"{a.budget[layer]:.3f}", f"{a.k[layer]} of {len(a.relevance[layer])}",
                " ".join(map(str, a.selected_heads[layer]))] for layer in range(len(a.k))],
              ["layer", f"budget {symbol}", "heads run k", "heads that ran"], {1, 2}),
        f'<p class="note">FLOPs of this pass: {a.flops / a.dense_flops:.0%} of the dense model’s.</p>',
        "<h2>Relevance map</h2>",
        relevance_figure(a, "Head relevance p (★ ran)", "p").to_html(full_html=False, include_plotlyjs=True),
        "<h2>Why this budget?</h2>",
    ]
    if not method.budgeted:
        parts.append('<p class="note">A dense model runs every head on every input: there is no budget to explain.</p>')
    else:
        [e] = explain(ckpt, [text], control)
        parts += _why(e, symbol, method.attributed_name)
    parts += [
        "<h2>Settings</h2>",
        _rows([[html.escape(k), html.escape(str(v))] for k, v in (
            ("model", name),
            ("method", ckpt.config.method),
            ("layers × heads", f"{ckpt.config.n_layers} × {ckpt.config.n_heads}"),
            ("setting", setting),
            ("weights sha256", file_sha256(ckpt.path / "model.safetensors") if ckpt.path else "unknown"),
            ("tokens read (max)", f"{a.n_tokens} ({ckpt.config.max_len})"),
        )], ["setting", "value"]),  # fmt: skip
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        f"<title>BudgetFormer report: {html.escape(name)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def _why(e: Explanation, symbol: str, what: str) -> list[str]:
    """The why-this-budget section: per layer, the tokens highlighted by what they did to ``what``
    (the attributed quantity)."""
    if e.fixed:
        return [f'<p class="note">Here {symbol} is set, not predicted: no token changes it, so there is nothing '
                "to attribute.</p>"]
    zmax = attribution_scale(e)
    out = [attribution_legend_html(zmax, html.escape(what))]
    for layer, (row, value) in enumerate(zip(e.budget_attribution, e.value, strict=True)):
        out.append(f"<h3>Layer {layer}: {html.escape(what)} = {value:.3f}, k = {e.k[layer]}</h3>")
        out.append(attribution_html(e.tokens, row, zmax))
    out.append(f'<p class="note">Each token left out in turn (occlusion): red, it raised {html.escape(what)}; '
               f"blue, it lowered it (±{zmax:.3g} at the strongest). Hover a token for its number."
               + (f" Tokens were left out {e.span} at a time." if e.span > 1 else "") + "</p>")
    return out
