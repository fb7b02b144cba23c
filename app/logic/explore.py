"""What the "Explore an input" page computes, as plain functions (no Streamlit here).

The page reads its widgets into a :class:`app.settings.Settings`, and this module turns that into
the model runs it shows: the full model's analysis of the text, the analysis under the chosen
override or ablation, the metric cards, the comparison rows and the exportable record. Keeping it
free of ``st.*`` lets the tests call it directly and lets ``app/live.py`` cache it.

torch and the core are imported inside the functions that need them: importing them takes
seconds, and the page draws its title, input and controls before it first needs a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from app.cards import Card
from app.logic.pairs import input_texts, tokens_and_segments
from app.method import Method
from app.settings import Settings, control_for

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from app.speed import LiveSpeed
    from budgetformer_core.analysis.explain import Explanation
    from budgetformer_core.analysis.infer import Analysis
    from budgetformer_core.io.checkpoint import Checkpoint
    from budgetformer_core.io.tokenizer import Text
    from budgetformer_core.model.budget import Control


# --------------------------------------------------------------------------- input


DEFAULT_TEXT = (
    "The striker scored twice in the second half as the champions came from behind to win the "
    "cup final, and the manager praised his players after the match."
)
"""The text a session on the BBC models starts from."""


def starting_sample(dataset: str, samples, picked: tuple[str, int] | None) -> tuple[str, tuple[str, int] | None] | None:
    """The text a session (or a switch to ``dataset``) starts from and its test sample: the
    football sentence on BBC, test text #0 of another dataset whose texts are here; None to keep
    the text box as it is (``picked``, the session's test sample, is one of ``dataset``'s, or there
    are no texts)."""
    if picked and picked[0] == dataset:  # opened from another page with one of its texts
        return None
    if dataset == "bbc":
        return DEFAULT_TEXT, None
    return None if samples is None or not samples.texts else (samples.texts[0], (dataset, 0))


def text_help(method: Method) -> str:
    """The help of the text box, in the model's own terms."""
    return (
        f"Type a text or pick one from the test set: the model's prediction, {method.description.explore_shows} "
        "and the cost next to the dense model."
    )


@dataclass(frozen=True)
class PreparedInput:
    """The text (or pair of texts) as the page will analyse it."""

    text: Text
    """At most ``limit`` characters (each text of a pair)."""
    n_chars: int
    """Length of the text as given (a pair: of its longer text)."""
    limit: int
    """The engine's limit, :data:`budgetformer_core.io.inputs.MAX_CHARS`."""

    @property
    def cut(self) -> bool:
        """True when the given text was longer than ``limit`` and was cut."""
        return self.n_chars > self.limit


def prepare_text(text: str | None, pair: str | None = None) -> PreparedInput:
    """Cut ``text`` (and the second text ``pair`` of a pair, when given) to the engine's limit on
    input length (``None`` counts as empty).

    The CLI refuses a longer text; the page keeps its start and says so.
    """
    from budgetformer_core.io.inputs import MAX_CHARS

    parts = [text or ""] + ([] if pair is None else [pair])
    cut = tuple(p[:MAX_CHARS] for p in parts)
    return PreparedInput(cut if pair is not None else cut[0], max(map(len, parts)), MAX_CHARS)


def run_analysis(ckpt: Checkpoint, text: Text, control: Control | None = None) -> Analysis:
    """One input through :func:`budgetformer_core.analysis.infer.analyze` (ValueError for a bad input).

    Runs on one thread: at batch size 1 more threads barely help, and on a busy machine their
    synchronisation can make a 5 ms forward pass take hundreds.
    """
    from budgetformer_core.analysis.infer import analyze
    from budgetformer_core.measure.timing import torch_threads

    with torch_threads(1):
        [a] = analyze(ckpt, [text], control)
    return a


def tokens_read(ckpt: Checkpoint, text: Text) -> list[str]:
    """The tokens the model reads of ``text`` (its first ``max_len``; a pair's as the tokenizer joins it)."""
    return tokens_and_segments(ckpt, text)[0]


# --------------------------------------------------------------------------- why this budget, what the heads saw


def settings_control(ckpt: Checkpoint, settings: Settings) -> Control | None:
    """The Control of ``settings`` that ``ckpt`` runs under: None for the full model, and for a
    dense model, which drops any request (the engine's
    :meth:`~budgetformer_core.model.encoder.BudgetFormer.control_in_effect`)."""
    validation = ckpt.validation_budget if settings.no_budget_net else 1.0  # history.json read only when it is used
    return ckpt.model.control_in_effect(control_for(settings, validation))


def explain_input(ckpt: Checkpoint, text: Text, control: Control | None = None) -> Explanation:
    """:func:`budgetformer_core.analysis.explain.explain` of one input on one thread (as
    :func:`run_analysis`): per layer, what each token did to s (bba: the gate margin)."""
    from budgetformer_core.analysis.explain import explain
    from budgetformer_core.measure.timing import torch_threads

    with torch_threads(1):
        [e] = explain(ckpt, [text], control)
    return e


def head_attention(ckpt: Checkpoint, text: Text, control: Control | None, layer: int) -> np.ndarray:
    """(H, T, T) the attention of each head of ``layer`` on ``text`` (query × key), as the
    structural path computed it (``capture_attention``); NaN for the heads that did not run."""
    import torch

    from budgetformer_core.io.tokenizer import encode_batch, reading_prefix
    from budgetformer_core.measure.timing import torch_threads

    max_len = ckpt.config.max_len
    batch = encode_batch(ckpt.tokenizer, [reading_prefix(ckpt.tokenizer, text, max_len)], max_len)
    control = ckpt.model.control_in_effect(control)
    with torch.no_grad(), torch_threads(1):
        out = ckpt.model.eval()(batch.ids, batch.mask, control=control, capture_attention=True, types=batch.types)
    return out.layers[layer].attention[0].numpy()  # (1, H, T, T) -> (H, T, T)


def offline_report(ckpt: Checkpoint, text: Text, settings: Settings, name: str, symbol: str = "s",
                   latency: dict | None = None, attention: dict | None = None) -> str:
    """:func:`budgetformer_core.analysis.report.build_report` of ``text`` under ``settings`` (what the
    Explore page shows, with the page's own ``latency`` record and the ``attention`` map of the
    head it opened): one self-contained HTML file. Runs on one thread, as :func:`run_analysis`."""
    from budgetformer_core.analysis.report import build_report
    from budgetformer_core.measure.timing import torch_threads

    control = settings_control(ckpt, settings)
    with torch_threads(1):
        return build_report(ckpt, text, control, name, settings.describe(symbol), latency=latency,
                            attention=attention)


def explanation_record(e: Explanation) -> dict:
    """The exported part of an explanation: tokens, what is attributed, the numbers per layer."""
    return {
        "method": "occlusion (leave one token out)",
        "attributed": e.attributed,
        "tokens": e.tokens,
        "value": e.value,
        "budget_attribution": e.budget_attribution,
        "span": e.span,
        "fixed": e.fixed,
    }

LATENCY_NOTE = (
    "- Latency: the shipped figures at this budget until you press *Time it*, which times this input live on\n"
    "  this server with one CPU thread, so it varies from run to run;\n"
    "  on very short texts the bookkeeping of choosing heads can cost more than the heads it saves."
)


def explanation(method: Method, n_heads: int) -> str:
    """The "What am I looking at?" text of the Explore page, in the model's own terms."""
    H = n_heads
    if method.is_dense:
        body = (
            f"- A **dense** model: every layer runs all of its {H} heads on every input, each with "
            "weight 1. There is no budget and no head choice; it is the reference the budgeted "
            "models' FLOPs and latency are compared with."
        )
    elif method.is_bba:
        body = (
            "- **Budgeted attention allocation (bba)**: you request a **budget b** ∈ (0, 1], the "
            f"share of each layer's {H} heads to run; the layer runs **k = ⌊b·{H}⌋** heads "
            "(at least 1).\n"
            "- A small gate network reads a summary of the input and gives every head a **gate "
            "score z**; the k heads with the highest z run (★), the others are not computed at "
            "all. The heads chosen for a smaller b are among those for a larger one (nested).\n"
            "- " + method.weight_note + "\n"
            f"- With no b requested the model runs its default b = {method.default_budget:g}."
        )
    else:
        f_line = (
            "- **f_θ** predicts the **budget s** ∈ (0, 1): the share of the layer's "
            f"{H} heads this input gets; the layer runs **k = ⌊s·{H}⌋** heads (at least 1)."
            if method.has_f
            else f"- This model has no f_θ: its **budget s** is fixed by its config; the layer "
            f"runs **k = ⌊s·{H}⌋** heads (at least 1)."
        )
        g_line = (
            "- **g_φ** scores the heads: the **relevance p** (sums to 1 per layer). The k most "
            "relevant heads run (★); the others are not computed at all — that is where the FLOPs "
            "and time are saved."
            if method.has_g
            else f"- This model has no g_φ: its heads are chosen as {method.head_choice} "
            "(p is uniform); the heads not chosen are not computed at all."
        )
        body = (
            "- In every layer, small networks look at a summary of the input (the mean of its "
            "token vectors).\n"
            + f_line + "\n" + g_line + "\n- " + method.weight_note + "\n"
            "- **Ablations**: *no f_θ* fixes s (at the model's mean s on its validation split) "
            "instead of predicting it per layer; *no g_φ* picks the heads at random or always the "
            "first ones instead of by relevance."
        )
    return body + "\n" + LATENCY_NOTE


def same_run(full: Analysis, current: Analysis) -> bool:
    """True when a setting ran exactly what the full model runs (e.g. bba at its default b):
    same budget, same heads, same probabilities."""
    return (
        current.selected_heads == full.selected_heads
        and all(abs(a - b) < 1e-6 for a, b in zip(current.budget, full.budget, strict=True))
        and all(abs(a - b) < 1e-6 for a, b in zip(current.probs, full.probs, strict=True))
    )


def unknown_share(tokens: list[str]) -> float:
    """The share of ``tokens`` that are ``[UNK]`` (words outside the model's vocabulary)."""
    from budgetformer_core.io.tokenizer import UNK

    return sum(t == UNK for t in tokens) / len(tokens) if tokens else 0.0


UNKNOWN_WARN = 0.3
"""Above this share of unknown tokens the page warns that the text is not what the model knows."""


def why_s_moves(full: Analysis, current: Analysis, settings: Settings) -> str | None:
    """Why s moves with g_φ off although f_θ still predicts it (a line naming the layers whose s
    moved, as written to two digits), or None when that does not apply."""
    moved = [layer for layer in range(1, len(current.budget))
             if f"{current.budget[layer]:.2f}" != f"{full.budget[layer]:.2f}"]
    if not (settings.head_ablation and settings.budget_mode == "learned" and not settings.no_budget_net and moved):
        return None
    return (
        "Why s moves without g_φ: f_θ still predicts s, but from each layer's input, and the layers "
        "before it now run other heads, so that input is another one — "
        + "; ".join(f"layer {layer}: s {full.budget[layer]:.2f} → {current.budget[layer]:.2f}" for layer in moved)
        + "."
    )


def explain_help(method: Method) -> str:
    """The help of the "Why this budget?" switch (bba: of "What the gates depend on")."""
    return (
        "Each token is left out in turn (masked as padding is) and the model run again: its number "
        f"{method.description.explain_effect} One forward pass per token (longer texts: per span of "
        "tokens), computed when asked."
    )


def attribution_caption(what: str, zmax: float, span: int) -> str:
    """The line under the token attributions: the colours, their scale (±``zmax``) and, for a long
    text, the ``span`` of tokens left out together."""
    return (
        f"Red: the token raised {what}; blue: it lowered it; one colour scale for every layer "
        f"(±{zmax:.3g}, the largest change). Hover a token for its number."
        + (
            f" This text is long: tokens were left out {span} at a time, and each shows its span's number."
            if span > 1
            else ""
        )
    )


def ran_heads_caption(layer: int, ran: list[int], n_heads: int) -> str:
    """Which heads of ``layer`` ran (``ran``) and which were not computed."""
    skipped = [h for h in range(n_heads) if h not in ran]
    return (
        f"Layer {layer} ran heads {', '.join(map(str, ran))}"
        + (f"; not computed: {', '.join(map(str, skipped))}." if skipped else " (all of them).")
    )


def attention_record(layer: int, head: int, tokens: list[str], probs) -> dict:
    """One head's attention map as the export holds it: layer, head, the tokens and the (T, T)
    rows, rounded to 6 digits."""
    return {"layer": layer, "head": head, "tokens": tokens,
            "rows": [[round(float(p), 6) for p in row] for row in probs]}


# --------------------------------------------------------------------------- cards

INLINE_LAYERS = 3
"""Layers whose values a metric card lists one by one ("0.43 / 0.36"); a deeper model's card
shows their range, the list in its help (the per-layer chart below has them too)."""


def per_layer_value(values: list[str]) -> tuple[str, str | None]:
    """A metric card's value for one formatted number per layer, and its help: "a / b" up to
    :data:`INLINE_LAYERS` layers, else "lo–hi" (one value when all are equal) with the whole
    list, "Per layer: a / b / …", as the help."""
    joined = " / ".join(values)
    if len(values) <= INLINE_LAYERS:
        return joined, None
    lo, hi = min(values, key=float), max(values, key=float)
    return (lo if lo == hi else f"{lo}–{hi}"), f"Per layer: {joined}"


def latency_card(timing: LiveSpeed | None, precomputed: tuple | None = None, failed: bool = False) -> Card:
    """The latency of one run, with its speed-up against the dense reference timed in the same
    rounds and the precomputed one at that budget (:func:`app.speed.precomputed_point`) beside it;
    without ``timing``, the precomputed figures (:func:`app.speed.shipped_card`; ``failed``: it could
    not be timed)."""
    from app.speed import HOW, shipped_card, speed_note

    if timing is None:
        return Card("Latency (1 thread)", "—", "could not be timed") if failed else shipped_card(precomputed)
    ref = timing.reference or "no dense reference on this machine"
    dense = "" if timing.dense is None else (
        f" and {ref} in the same rounds ({timing.dense.ms:.2f} ms, IQR {timing.dense.iqr_ms:.2f} ms); speed-up = "
        f"{ref}'s latency / this latency ({HOW}, batch 1)")
    return Card(
        "Latency (1 thread)",
        f"{timing.latency.ms:.2f} ms",
        speed_note(timing, precomputed),
        f"Median over interleaved rounds of single-thread forward passes of this input at this setting "
        f"(IQR {timing.latency.iqr_ms:.2f} ms){dense}, with the engine's timer (the CPU time of one "
        "thread, as sweeps.csv's latencies: waiting for a core on a busy server is not counted). The "
        "precomputed speed-up is sweeps.csv's at the nearest budget, on the test texts.",
    )


def metric_cards(
    a: Analysis, timing: LiveSpeed | None, settings: Settings, n_heads: int, method: Method | None = None,
    precomputed: tuple | None = None,
) -> list[Card]:
    """Prediction, budget (s, or bba's b), heads run, FLOPs and latency of one analysis, formatted
    (``precomputed``: the sweeps.csv row at this setting and where it is, for the latency card)."""
    method = method or Method()
    dense = a.k == [n_heads] * len(a.k) and a.flops == a.dense_flops
    if settings.no_budget_net:
        s_note = "fixed (no f_θ)"
    elif settings.budget_mode == "slider":
        s_note = f"requested: b = {settings.budget:.2f}" if method.requested else "set by the slider"
    elif not method.budgeted or dense:
        s_note = "dense: every head"
    else:
        s_note = method.own_budget
    latency = latency_card(timing, precomputed)
    budget, budget_help = per_layer_value([f"{x:.2f}" for x in a.budget])
    if settings.budget_mode == "force_k" and not settings.no_budget_net and method.budgeted:
        # k is set, so the budget decides nothing: no number that reads as if it did
        budget, s_note = "not in use", f"k = {settings.k} forced"
        budget_help = (f"With k forced every layer runs {settings.k} heads: the budget "
                       f"{method.symbol} does not decide how many.")
    heads, heads_help = per_layer_value([str(x) for x in a.k])
    return [
        Card("Prediction", a.label, f"{max(a.probs):.1%} confident"),
        Card(f"Budget {method.symbol} per layer", budget, s_note, budget_help),  # bba: its note says "requested"
        Card("Heads run", heads, f"of {n_heads} per layer", heads_help),
        Card(
            "FLOPs vs dense",
            f"{flops_fraction(a):.0%}",
            f"{a.flops / 1e6:.2f} of {a.dense_flops / 1e6:.2f} MFLOPs",
        ),
        latency,
    ]


# --------------------------------------------------------------------------- comparison


def flops_fraction(a: Analysis) -> float:
    return a.flops / a.dense_flops


def comparison_rows(
    full: Analysis, current: Analysis, label: str, symbol: str = "s"
) -> list[dict[str, str]]:
    """Rows "what / full model / <label>" contrasting two analyses of the same input.

    The prediction and its confidence are two rows, so that "changed" says which of them moved.
    """

    def heads(a: Analysis) -> str:
        return " | ".join(",".join(str(h) for h in sel) for sel in a.selected_heads)

    def fmt(a: Analysis) -> dict[str, str]:
        return {
            "prediction": a.label,
            "confidence": f"{max(a.probs):.1%}",
            f"budget {symbol} per layer": " / ".join(f"{s:.2f}" for s in a.budget),
            "heads run per layer (k)": " / ".join(str(k) for k in a.k),
            "which heads ran (layer | layer)": heads(a),
            "FLOPs vs dense": f"{flops_fraction(a):.1%}",
        }

    f, c = fmt(full), fmt(current)
    return [
        {"": key, "full model": f[key], label: c[key], "changed": "yes" if f[key] != c[key] else ""}
        for key in f
    ]


def probability_rows(label_names: list[str], probs: list[float]) -> list[dict[str, object]]:
    return [
        {"class": name, "probability": round(float(p), 6)}
        for name, p in zip(label_names, probs, strict=True)
    ]


# --------------------------------------------------------------------------- export


def shown_path(path: Path | None, root: Path) -> str:
    """A checkpoint's folder as the export names it: relative to the project's ``root`` when
    it lies under it."""
    return str(path.relative_to(root)) if path and path.is_relative_to(root) else str(path)


def analysis_record(a: Analysis) -> dict:
    """An :class:`Analysis` as JSON-ready data, without the (separately stored) text."""
    d = a.to_dict()
    d.pop("text", None)
    return d


def export_record(
    *,
    prepared: PreparedInput,
    checkpoint_name: str,
    checkpoint_path: str,
    checkpoint_sha256: str,
    label_names: list[str],
    settings: Settings,
    control: dict | None,
    current: Analysis,
    full: Analysis,
    timing: LiveSpeed | None,
    tokens: list[str] | None = None,
    explanation: Explanation | None = None,
    symbol: str = "s",
    source: dict | None = None,
    attention: dict | None = None,
    segments: list[int] | None = None,
) -> dict:
    """Everything needed to reproduce and judge one analysis, as JSON-ready data: with the
    tokens the model read, only the settings in effect (:meth:`app.settings.Settings.in_effect`; the budget
    named ``symbol``), where the text comes from (``source``: dataset, test index and true label;
    None for a typed text), the token attribution of the budget when it was computed, and the
    attention map when one is shown (``attention``: layer, head, tokens and the (T, T) rows)."""
    from budgetformer_core.measure.timing import machine_info

    return {
        "source": source,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "input": {
            **input_texts(prepared.text, segments),
            "n_chars": prepared.n_chars,
            "cut_to_chars": prepared.limit if prepared.cut else None,
            "n_tokens_read": current.n_tokens,
            "tokens": tokens,
            "truncated": current.truncated or prepared.cut,
        },
        "checkpoint": {
            "name": checkpoint_name,
            "path": checkpoint_path,
            "model_sha256": checkpoint_sha256,
        },
        "label_names": label_names,
        "settings": settings.in_effect(symbol),
        "control": control,
        "truncated": current.truncated or prepared.cut,
        "analysis": analysis_record(current),
        "full_model": analysis_record(full),
        "timing": None if timing is None else timing.to_dict(),
        "explanation": None if explanation is None else explanation_record(explanation),
        "attention": attention,
        "machine": machine_info(1).to_dict(),
    }
