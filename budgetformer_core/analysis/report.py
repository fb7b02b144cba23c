"""One input's analysis as a single self-contained HTML file, to read offline or to send.

:func:`build_report` runs the text through the checkpoint and writes one HTML page holding the
text, the prediction and its probabilities, the budget and the heads run per layer, the measured
latency beside its dense reference's (when the run was timed), the relevance map with the heads
that did not run greyed out (a plotly figure with plotly's JavaScript inside the file), the
attention map of the head opened (when one was), the why-this-budget highlighting (occlusion,
:mod:`budgetformer_core.analysis.explain`) and the settings. Nothing is fetched
when it opens: the page's content security policy allows no request at all. Every piece of
user text (the input, its tokens) is HTML-escaped, so markup in it shows as text.

A pair of texts (a model trained on pairs, or a Hugging Face classifier) is shown as its two
texts, each under its column's name, and the tokens of the second text are marked
(:data:`SECOND_MARK`) wherever tokens are shown.

The highlighting helpers (:func:`attribution_html`, :func:`attribution_legend_html`,
:func:`marked`) are the ones the app's Explore page draws with.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..io.checkpoint import Checkpoint
    from ..io.tokenizer import Text
    from ..model.budget import Control
    from .explain import Explanation
    from .infer import Analysis

ATTRIBUTION_RGB = {1: (214, 39, 40), -1: (31, 119, 180)}
"""Red: the token raised the quantity (s: more heads); blue: it lowered it."""

SECOND_MARK = "²"
"""What marks a token of the second text of a pair in token labels (``²dog``)."""


def marked(tokens: list[str], segments: list[int]) -> list[str]:
    """Token labels with the second text's tokens marked (:data:`SECOND_MARK`); a single text's
    (or a list without segments) as they are."""
    if not segments or not any(segments):
        return list(tokens)
    return [SECOND_MARK + t if s else t for t, s in zip(tokens, segments, strict=True)]


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


NOT_RUN = "#d9d9d9"
"""The grey of a head that was not computed, as the app draws it."""


def relevance_figure(a: Analysis, title: str, symbol: str):
    """The layers × heads relevance map of one analysis, as the app draws it: the heads that ran
    coloured with a ★, those that were not computed grey (their value in brackets, outside the
    colour scale), and a legend that says which is which."""
    import plotly.graph_objects as go

    n_layers, n_heads = len(a.relevance), len(a.relevance[0])
    ran = [set(s) for s in a.selected_heads]
    numbers = n_heads <= 8  # wider maps: too narrow a cell for a number, the values on hover
    x, y = [f"h{h}" for h in range(n_heads)], [f"layer {i}" for i in range(n_layers)]
    cells = dict(x=x, y=y, xgap=3, ygap=3, hoverongaps=False, texttemplate="%{text}")
    shown = go.Heatmap(
        z=[[v if h in ran[layer] else None for h, v in enumerate(row)] for layer, row in enumerate(a.relevance)],
        text=[["★" + (f"<br>{v:.2f}" if numbers else "") if h in ran[layer] else "" for h, v in enumerate(row)]
              for layer, row in enumerate(a.relevance)],
        colorscale="Blues", zmin=0, colorbar=dict(title=dict(text=symbol, side="right")),
        zmax=max([2.0 / n_heads, *(float(v) for row in a.relevance for v in row)]),  # p = 1/H: a middle colour
        hovertemplate=f"%{{y}}, %{{x}}: ran, {symbol} = %{{z:.3f}}<extra></extra>", **cells,
    )  # fmt: skip
    grey = go.Heatmap(
        z=[[None if h in ran[layer] else 0 for h in range(n_heads)] for layer in range(n_layers)],
        text=[["" if h in ran[layer] else (f"({v:.2f})" if numbers else "—") for h, v in enumerate(row)]
              for layer, row in enumerate(a.relevance)],
        customdata=a.relevance, colorscale=[[0, NOT_RUN], [1, NOT_RUN]], showscale=False,
        textfont=dict(color="#555555"),
        hovertemplate=f"%{{y}}, %{{x}}: not computed ({symbol} = %{{customdata:.3f}})<extra></extra>", **cells,
    )  # fmt: skip
    legend = [
        go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                   marker=dict(symbol=marker, size=14, color=color, line=dict(width=1, color="#555555")))
        for name, marker, color in ((f"head ran (its {symbol})", "star", "#333333"),
                                    (f"not computed ({symbol} in brackets)" if numbers else "not computed", "square",
                                     NOT_RUN))
    ]  # fmt: skip
    layout = dict(title=dict(text=title), height=200 + 70 * n_layers, margin=dict(l=80, r=40, t=60, b=90),
                  xaxis=dict(title="head", type="category"),
                  yaxis=dict(title="layer", type="category", autorange="reversed"),
                  showlegend=True, plot_bgcolor="white",
                  legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))  # fmt: skip
    return go.Figure(data=[shown, grey, *legend], layout=layout)


ATTENTION_TOKENS = 96
"""Tokens of an attention map the report draws at most (the first ones): a 512 × 512 map is neither
readable nor small."""


def plotly_text(value: object) -> str:
    """A token as plotly shows it as text: ``&``, ``<`` and ``>`` as entities (plotly reads some
    HTML in labels)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def attention_figure(rows, tokens: list[str], title: str):
    """One head's attention on the input (row q: token q's attention over the tokens), the first
    :data:`ATTENTION_TOKENS` tokens, each axis labelled with the tokens and their positions."""
    import plotly.graph_objects as go

    n = min(len(rows), ATTENTION_TOKENS)
    labels = [f"{plotly_text(tokens[i] if i < len(tokens) else '?')} ·{i}" for i in range(n)]
    z = [[float(v) for v in row[:n]] for row in rows[:n]]
    heatmap = go.Heatmap(
        z=z, x=list(range(n)), y=list(range(n)), colorscale="Blues", zmin=0,
        customdata=[[[labels[q], labels[k]] for k in range(n)] for q in range(n)],
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
        colorbar=dict(title=dict(text="attention", side="right")),
    )  # fmt: skip
    step = max(1, -(-n // 40))  # every step-th token labelled, all of them on hover
    ticks = dict(tickvals=list(range(n))[::step], ticktext=labels[::step], tickfont=dict(size=11))
    layout = dict(title=dict(text=title), height=min(900, 260 + 14 * n), margin=dict(l=120, r=40, t=60, b=120),
                  xaxis=dict(title="attended token (key)", tickangle=-90, **ticks),
                  yaxis=dict(title="token (query)", autorange="reversed", **ticks))  # fmt: skip
    return go.Figure(data=[heatmap], layout=layout)


def head_attention(ckpt: Checkpoint, text: Text, control: Control | None, layer: int, head: int):
    """(T, T) attention of ``head`` of ``layer`` on ``text`` as the structural path computed it
    (``capture_attention``): all NaN when that head did not run."""
    import torch

    from ..io.tokenizer import encode_batch, reading_prefix

    max_len = ckpt.config.max_len
    batch = encode_batch(ckpt.tokenizer, [reading_prefix(ckpt.tokenizer, text, max_len)], max_len)
    with torch.no_grad():
        out = ckpt.model.eval()(batch.ids, batch.mask, control=ckpt.model.control_in_effect(control),
                                capture_attention=True)
    n = int(out.lengths[0])
    return out.layers[layer].attention[0, head, :n, :n].double().numpy()  # (1, H, T, T) -> (n, n)


def read_tokens(ckpt: Checkpoint, text: Text) -> list[str]:
    """The tokens the model reads of ``text`` (its first ``max_len``; a pair's second text's
    marked), to label an attention map."""
    from ..io import tokenizer

    max_len = ckpt.config.max_len
    prefix = tokenizer.reading_prefix(ckpt.tokenizer, text, max_len)
    return marked(*tokenizer.read_tokens(ckpt.tokenizer, prefix, max_len))


def time_report(ckpt: Checkpoint, text: Text, control: Control | None = None, reference: str | None = None) -> dict:
    """Time the run of ``text`` beside a dense reference in the same rounds
    (:func:`budgetformer_core.measure.latency.time_text`), as :func:`latency_record` writes it.
    ``reference``: its folder or shipped name; None: the checkpoint's own dense reference
    (:func:`budgetformer_core.shipped.dense_reference`) when the checkpoint is a shipped model,
    else none (a latency without a speed-up)."""
    from pathlib import Path

    from ..io.loader import load_checkpoint
    from ..measure.latency import time_text
    from ..shipped import dense_reference, shipped_models

    shipped = shipped_models()
    own = ckpt.path.name if ckpt.path is not None else None
    if reference is None and own in shipped:
        reference = dense_reference(str(ckpt.meta.get("dataset", "")), own, full=True)
        reference = reference if reference in shipped else None
    ref = None
    if reference is not None:
        ref = ckpt if Path(reference).name == own else load_checkpoint(shipped.get(reference, reference))
    latency, dense = time_text(ckpt, text, control, ref)
    return latency_record(latency, None if reference is None else Path(reference).name, dense)


def latency_record(latency, reference: str | None, dense) -> dict:
    """One timed run as the report (and the app's export) writes it: ms per input with its IQR,
    the dense reference's name and latency from the same rounds, and the speed-up of the two
    (``latency`` and ``dense``: :class:`~budgetformer_core.measure.latency.Latency`)."""
    from ..measure.latency import ROUNDS

    return {"latency_ms": latency.ms, "latency_iqr_ms": latency.iqr_ms, "reference": reference,
            "dense_latency_ms": None if dense is None else dense.ms,
            "dense_latency_iqr_ms": None if dense is None else dense.iqr_ms,
            "speedup": None if dense is None else dense.ms / latency.ms, "rounds": ROUNDS, "threads": 1,
            "batch": 1}  # fmt: skip


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
    text: Text,
    control: Control | None = None,
    name: str | None = None,
    setting: str | None = None,
    latency: dict | None = None,
    head: tuple[int, int] | None = None,
    attention: dict | None = None,
) -> str:
    """One self-contained HTML page on ``text`` through ``ckpt`` (see the module docstring).

    Args:
        ckpt: a loaded checkpoint.
        text: the input (a usable text or pair of texts, as
            :func:`budgetformer_core.analysis.infer.analyze` takes).
        control: the setting to run (e.g. ``Control(budget=b)``); None: the model's own.
        name: the model's name in the report (default: its folder's name).
        setting: the setting in words (default: from ``control``).
        latency: this run timed beside its dense reference (:func:`latency_record`); None: the
            report says it was not timed.
        head: (layer, head) whose attention on the text the report draws (computed here).
        attention: that map already computed, as the app's export holds it (``layer``, ``head``,
            ``tokens``, ``rows``); it wins over ``head``.

    Raises:
        ValueError: an unusable text, a budget asked of a dense model, or a head that is not one.
    """
    from ..io.files import file_sha256
    from .explain import explain
    from .infer import analyze, check_texts, pair_columns

    check_texts([text])
    columns = pair_columns(ckpt) or ("first text", "second text")
    method = ckpt.model.method
    if control is not None and not method.budgeted:
        raise ValueError("a dense checkpoint has no budget: a budget needs a budgetformer or bba model")
    [a] = analyze(ckpt, [text], control)
    if attention is None and head is not None:
        layer, h = head
        if not (0 <= layer < ckpt.config.n_layers and 0 <= h < ckpt.config.n_heads):
            raise ValueError(f"there is no head {h} in layer {layer}: the model has {ckpt.config.n_layers} layers "
                             f"of {ckpt.config.n_heads} heads")
        attention = {"layer": layer, "head": h, "tokens": read_tokens(ckpt, text),
                     "rows": head_attention(ckpt, text, control, layer, h).tolist()}
    symbol = method.symbol
    name = name or (ckpt.path.name if ckpt.path else "checkpoint")
    if setting is None:
        own = control is None or control.budget is None
        setting = "the model's own budget" if own else f"{symbol} = {control.budget:g}"
    confidence = max(a.probs)
    parts = [
        f"<h1>BudgetFormer report: {html.escape(name)}</h1>",
        *_text(text, columns),
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
        "<h2>Latency</h2>",
        _latency(latency),
        "<h2>Relevance map</h2>",
        relevance_figure(a, "Head relevance p (★ ran, grey: not computed)", "p").to_html(
            full_html=False, include_plotlyjs=True),
    ]
    if attention is not None:
        parts += ["<h2>Attention of the opened head</h2>", *_attention(attention, a.selected_heads)]
    parts.append("<h2>Why this budget?</h2>")
    if not method.budgeted:
        parts.append('<p class="note">A dense model runs every head on every input: there is no budget to explain.</p>')
    else:
        [e] = explain(ckpt, [text], control)
        parts += _why(e, symbol, method.attributed_name)
    if isinstance(text, tuple):
        parts.append(f'<p class="note">Tokens marked {SECOND_MARK} belong to the second text '
                     f"({html.escape(columns[1])}); the others to the first ({html.escape(columns[0])}).</p>")
    parts += [
        "<h2>Settings</h2>",
        _rows([[html.escape(k), html.escape(str(v))] for k, v in (
            ("model", name),
            ("method", ckpt.config.method),
            ("layers × heads", f"{ckpt.config.n_layers} × {ckpt.config.n_heads}"),
            ("setting", setting),
            *([("input", f"a pair of texts ({columns[0]}, {columns[1]})")] if isinstance(text, tuple) else []),
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


def _text(text: Text, columns: tuple[str, str]) -> list[str]:
    """The text section: the text, or a pair's two texts, each under its column's name."""
    if not isinstance(text, tuple):
        return ["<h2>Text</h2>", f'<pre class="text">{html.escape(text)}</pre>']
    return ["<h2>Texts (a pair, read together)</h2>",
            *(f'<h3>{which} text: {html.escape(column)}</h3>\n<pre class="text">{html.escape(part)}</pre>'
              for which, column, part in zip(("First", "Second"), columns, text, strict=True))]


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
        out.append(attribution_html(marked(e.tokens, e.segments), row, zmax))
    out.append(f'<p class="note">Each token left out in turn (occlusion): red, it raised {html.escape(what)}; '
               f"blue, it lowered it (±{zmax:.3g} at the strongest). Hover a token for its number."
               + (f" Tokens were left out {e.span} at a time." if e.span > 1 else "") + "</p>")
    return out


def _latency(latency: dict | None) -> str:
    """The latency section: this run's time per input and its dense reference's, from the same
    rounds, and the speed-up they make (or why there is none)."""
    if latency is None:
        return '<p class="note">Not timed.</p>'
    how = (f"median of {latency.get('rounds', '?')} interleaved rounds, {latency.get('threads', 1)} thread, "
           f"batch {latency.get('batch', 1)}, on the machine that wrote this report")
    rows = [["this run", f"{latency['latency_ms']:.2f} ms", f"{latency.get('latency_iqr_ms') or 0:.2f} ms"]]
    reference = latency.get("reference")
    if reference and latency.get("dense_latency_ms") is not None:
        rows.append([f"dense reference: {html.escape(str(reference))}", f"{latency['dense_latency_ms']:.2f} ms",
                     f"{latency.get('dense_latency_iqr_ms') or 0:.2f} ms"])
        speed = (f"<p><b>{latency['speedup']:.2f}× vs {html.escape(str(reference))}, batch "
                 f"{latency.get('batch', 1)}</b> (its latency over this run's, both timed in the same rounds).</p>")
    else:
        speed = '<p class="note">No dense reference was timed beside it: no speed-up.</p>'
    return _rows(rows, ["model", "latency per input", "IQR"], {1, 2}) + speed + f'<p class="note">{how}.</p>'


def _attention(attention: dict, selected: list[list[int]]) -> list[str]:
    """The opened head's section: its token × token attention map, or why there is none (a head
    that did not run was not computed)."""
    layer, head = int(attention["layer"]), int(attention["head"])
    rows = attention.get("rows") or []
    if head not in selected[layer] or not rows or any(v != v for v in rows[0]):  # NaN: not computed
        return [f'<p class="note">Head {head} of layer {layer} did not run on this input: it was not computed, '
                "so it has no attention to show.</p>"]
    tokens = [str(t) for t in attention.get("tokens") or []]
    title = f"Attention of layer {layer}, head {head} on this input"
    shown = f" (the first {ATTENTION_TOKENS} of {len(rows)} tokens)" if len(rows) > ATTENTION_TOKENS else ""
    return [attention_figure(rows, tokens, title).to_html(full_html=False, include_plotlyjs=False),
            f'<p class="note">Row q: how token q’s attention is spread over the tokens{shown}, as the budgeted '
            "(structural) path computed it.</p>"]
