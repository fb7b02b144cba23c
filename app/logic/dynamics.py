"""The "Training dynamics" page's tables and story, as plain functions (no Streamlit here).

The page reads the checkpoint's history.json: one dict per epoch, with the per-layer budgets as
lists, and the loss terms as they entered the total (``loss_terms``). Older or foreign histories
may lack keys; they become NaN columns, and their loss terms come from the run's recorded
training config (:func:`loss_terms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from budgetformer_core.train.history import TERM_COLUMNS, loss_weights

if TYPE_CHECKING:
    from budgetformer_core.config import ModelConfig

HISTORY_SCALARS = (
    "loss",
    "task_loss",
    "budget_loss",
    "cost",
    "entropy_term",
    "difficulty_loss",
    "balance_loss",
    "entropy",
    "beta",
    "lr",
    "train_accuracy",
    "val_accuracy",
    "val_mean_budget",
    "val_head_entropy",
    "val_mean_heads_fraction",
)


def history_frame(history: list[dict]) -> pd.DataFrame:
    """One row per epoch: the scalars of :data:`HISTORY_SCALARS` plus ``train_s{l}`` / ``val_s{l}``.

    ``train_s{l}`` and ``val_s{l}`` are the mean budget s of layer ``l`` in that epoch (from
    ``train_mean_budget_per_layer`` / ``val_mean_budget_per_layer``). Missing values are NaN.
    """
    rows = []
    for i, h in enumerate(history):
        epoch = h.get("epoch")
        epoch = epoch if isinstance(epoch, (int, float)) else i + 1
        row: dict[str, float] = {"epoch": float(epoch)}
        for key in HISTORY_SCALARS:
            v = h.get(key)
            row[key] = float(v) if isinstance(v, (int, float)) else np.nan
        for prefix in ("train", "val"):
            for layer, v in enumerate(h.get(f"{prefix}_mean_budget_per_layer") or []):
                row[f"{prefix}_s{layer}"] = float(v)
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["epoch", *HISTORY_SCALARS])


def history_layers(frame: pd.DataFrame) -> int:
    """How many layers the history has budget curves for (0 when it has none)."""
    return max(
        sum(c.startswith(prefix) and c[len(prefix) :].isdigit() for c in frame.columns)
        for prefix in ("train_s", "val_s")
    )


def dynamics_story(
    frame: pd.DataFrame,
    n_heads: int,
    s_min: float | None,
    s_max: float | None,
    terms: dict[str, list[float]] | None = None,
) -> str:
    """Sentences (markdown, our own words and numbers only) on what the history's figures show.

    The recipe asks for **exploration** while β(t) < 0 (the entropy term rewards spreading the
    head relevance p over all heads) and **exploitation** once β(t) > 0 (it rewards p on a few
    heads); whether p did concentrate is read from the entropy curve against its maximum ln H,
    and what made up the total loss from ``terms`` (:attr:`LossBreakdown.terms`).
    """
    if frame.empty:
        return "This checkpoint has no training history."
    parts = [
        "The entropy term asks for **exploration** while **β(t) < 0** (it rewards spreading the head "
        "relevance p over all heads) and for **exploitation** once **β(t) > 0** (it rewards p on a "
        "few heads per layer)."
    ]
    beta = frame["beta"].to_numpy()
    crossed = np.flatnonzero(beta >= 0)
    facts = []
    if np.isfinite(beta).any():
        if crossed.size:
            facts.append(f"β(t) turned positive in epoch {int(frame['epoch'].iloc[crossed[0]])}")
        else:
            facts.append("β(t) stayed negative for the whole run")
    ent = frame["val_head_entropy"].to_numpy()
    if np.isfinite(ent).sum() >= 2 and n_heads > 1:
        first, last = ent[np.isfinite(ent)][[0, -1]]
        ceiling = math.log(n_heads)
        if last >= 0.95 * ceiling:
            verdict = "p stayed close to uniform over the heads: no concentration to see"
        elif last < first - 0.05 * ceiling:
            verdict = "p concentrated on fewer heads"
        else:
            verdict = "p's spread barely moved"
        facts.append(
            f"the validation head entropy went from {first:.2f} to {last:.2f} nats, {last / ceiling:.0%} "
            f"of its maximum ln {n_heads} = {ceiling:.2f} ({verdict})"
        )
    s = frame["val_mean_budget"].to_numpy()
    if np.isfinite(s).sum() >= 2:
        first, last = s[np.isfinite(s)][[0, -1]]
        band = (
            f", {'inside' if s_min <= last <= s_max else 'outside'} the band [{s_min:g}, {s_max:g}]"
            if s_min is not None and s_max is not None
            else ""
        )
        facts.append(f"the mean budget s went from {first:.2f} to {last:.2f}{band}")
    if facts:
        parts.append("In this run " + "; ".join(facts) + ".")
    total = frame["loss"].to_numpy()
    if terms and len(terms) > 1 and np.isfinite(total[-1]) and total[-1] != 0:
        last = {name: values[-1] for name, values in terms.items()}
        top = max((n for n in last if n != TASK_TERM), key=lambda n: abs(last[n]))
        parts.append(
            f"In the last epoch the total loss is {total[-1]:.3f}: the task loss {last[TASK_TERM]:.3f}, "
            f"and the largest other term, {top}, {last[top]:+.3f} ({abs(last[top]) / abs(total[-1]):.0%} of it)."
        )
    return " ".join(parts)


TASK_TERM = "task: cross-entropy"
TERM_NAMES = {"task": TASK_TERM, "budget": "λ_b·hinge", "cost": "λ_c·s", "entropy_term": "λ_e·β(t)·H(p)",
              "difficulty": "λ_d·(s − target)²", "balance": "λ_u·head load"}
"""Each term of the loss (``budgetformer_core.train.history``'s names), as the chart names it, in
the chart's order."""
NAMED_WEIGHTS = {"budget": ("λ_b", "lambda_budget"), "cost": ("λ_c", "lambda_cost")}
"""The terms whose name also gives their weight, when the training config records it."""
REST = "every other term (this checkpoint records neither them apart nor their weights λ)"


@dataclass
class LossBreakdown:
    """The terms of the loss a model trained with, per epoch, weighted as they were added to the
    total, and where they come from."""

    terms: dict[str, list[float]]
    """Chart name → value per epoch; they add up to the history's total ``loss``."""
    source: Literal["history", "config", "unrecorded"]
    """``history``: as the run recorded them (``loss_terms``, or a model trained on the task loss
    alone); ``config``: a history written before ``loss_terms`` existed, each epoch mean times its
    λ from the run's recorded training config;
    ``unrecorded``: that config does not record the weights, so only the task loss is apart."""

    @property
    def note(self) -> str:
        """One sentence for the page on where the terms come from."""
        return {
            "history": "Each term is as the run recorded it.",
            "config": "This history predates the recorded terms: each is its epoch mean times its weight λ "
                      "from the run's own training config (config.json).",
            "unrecorded": "This checkpoint's config.json does not record the weights λ of its training loss, "
                          "so the terms besides the task loss are not drawn apart.",
        }[self.source]


def _name(term: str, train_cfg: dict) -> str:
    symbol, key = NAMED_WEIGHTS.get(term, (None, None))
    weight = train_cfg.get(key) if key else None
    return f"{TERM_NAMES[term]} ({symbol} = {weight:g})" if isinstance(weight, (int, float)) else TERM_NAMES[term]


def loss_terms(history: list[dict], frame: pd.DataFrame, train_cfg: dict, task_only: bool) -> LossBreakdown:
    """Every term of the loss the model trained with, weighted as it was added, per epoch: they
    add up to the history's total ``loss``.

    A history that records them (``loss_terms``, every epoch) gives them as they are. For an
    older one they are derived from the run's own training config (``train_cfg``, config.json's
    ``train``; :func:`~budgetformer_core.train.history.loss_weights`), never from defaults: a
    model trained on the task loss alone (``task_only``: dense, bba) has that term alone;
    BudgetFormer adds λ_b·L_budget (the hinge), λ_e·β(t)·H(p), and in the ``adaptive`` recipe
    λ_c·s and, where their weights are on, λ_d·(s − target)² and λ_u·(head load). A term the
    history does not hold by itself (β(t) moves within an epoch, so λ_e·β·H(p) cannot be rebuilt
    from the epoch's means) gets the total minus the terms it does hold, named after every term
    it stands for. When the config does not record a weight, the task loss and the rest of the
    total are all that is drawn.
    """
    if frame.empty:
        return LossBreakdown({}, "history")
    recorded = [h.get("loss_terms") for h in history]
    if len(recorded) == len(frame) and all(
        isinstance(r, dict) and all(isinstance(v, (int, float)) for v in r.values()) for r in recorded
    ):
        order = [term for term in TERM_NAMES if any(term in r for r in recorded)]
        return LossBreakdown({_name(term, train_cfg): [float(r.get(term, 0.0)) for r in recorded] for term in order},
                             "history")
    column = lambda key: frame[key].fillna(0.0).to_numpy(dtype=float)  # noqa: E731
    total = frame["loss"].to_numpy(dtype=float)
    try:
        weights = loss_weights(train_cfg, task_only)
    except (KeyError, TypeError, ValueError):  # not recorded (or not as numbers)
        weights, source = {"task": 1.0}, "unrecorded"
    else:  # (the task loss alone: the history's task_loss is the term as it entered)
        source = "history" if task_only else "config"
    terms, rest_names = {}, []
    for term in (t for t in TERM_NAMES if t in weights):
        if frame[TERM_COLUMNS[term]].notna().all():
            terms[_name(term, train_cfg)] = weights[term] * column(TERM_COLUMNS[term])
        else:
            rest_names.append(TERM_NAMES[term])
    rest = total - np.sum(list(terms.values()), axis=0)
    if source == "unrecorded":
        if np.nanmax(np.abs(rest)) > 1e-9:
            terms[REST] = rest
    elif rest_names:
        terms[" + ".join(rest_names) + (" (not recorded apart: the total minus the others)"
                                        if len(rest_names) > 1 else "")] = rest
    elif np.nanmax(np.abs(rest)) > 1e-9:
        terms["not recorded apart (the total minus the others)"] = rest
    return LossBreakdown({label: values.tolist() for label, values in terms.items()}, source)


def bba_dynamics_story(frame, train_cfg: dict, model_cfg: ModelConfig) -> str:
    """What a bba model's training history shows (markdown, our own words and numbers only).

    bba trains on the task loss alone (no budget loss, no entropy term, no β(t)): every batch
    requests a budget b, drawn uniformly in [budget_min, 1] (or the fixed ``train_budget``); the
    heads are weighted by soft gates sigmoid((z − threshold) / T) on all heads until
    ``structural_from`` of training, then only the ⌊b·H⌋ heads its gates rank highest run
    (hard-gate adaptation). Validation runs at the model's default b.
    """
    fixed = train_cfg.get("train_budget") or 0
    b_min = train_cfg.get("budget_min", 0.1)
    drawn = (
        f"every batch was trained at the fixed budget b = {fixed:g}"
        if fixed
        else f"every batch requested its own budget b, drawn uniformly in [{b_min:g}, 1]"
    )
    switch = train_cfg.get("structural_from", 0.7)
    parts = [
        f"A **bba** model learns on the task loss alone (no budget loss, no entropy term): {drawn}. "
        f"For the first {switch:.0%} of training every head runs, weighted by a **soft gate** "
        f"sigmoid((z − threshold) / T) of its gate score z (T = {model_cfg.gate_temperature:g}); "
        "after that only the ⌊b·H⌋ heads its gates rank highest run (**hard-gate adaptation**), "
        "as at inference."
    ]
    if train_cfg.get("freeze_gates"):
        parts.append("Its gate scores were kept fixed (post-hoc ranking, then recovery).")
    facts = []
    acc = frame["val_accuracy"].to_numpy() if "val_accuracy" in frame else []
    acc = [a for a in acc if math.isfinite(a)]
    if len(acc) >= 2:
        facts.append(f"the validation accuracy went from {acc[0]:.1%} to {acc[-1]:.1%}")
    heads = [h for h in frame.get("val_mean_heads_fraction", []) if math.isfinite(h)]
    if heads:
        facts.append(
            f"validation ran at the default b = {model_cfg.default_budget:g}, "
            f"{heads[-1]:.0%} of the heads"
        )
    if facts:
        parts.append("In this run " + "; ".join(facts) + ".")
    return " ".join(parts)
