"""The "Training dynamics" page's tables and story, as plain functions (no Streamlit here).

The page reads the checkpoint's history.json: one dict per epoch, with the per-layer budgets as
lists. Older or foreign histories may lack keys; they become NaN columns.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

HISTORY_SCALARS = (
    "loss",
    "task_loss",
    "budget_loss",
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
    frame: pd.DataFrame, n_heads: int, s_min: float | None, s_max: float | None
) -> str:
    """Two or three sentences (markdown, our own words and numbers only) on what the history shows.

    The story the method predicts: while β(t) < 0 the entropy term rewards spreading the head
    relevance p over all heads (exploration: entropy near its maximum ln H); once β(t) > 0 it
    rewards concentrating p on a few heads (exploitation: entropy falls) and the budget s settles
    inside [s_min, s_max].
    """
    if frame.empty:
        return "This checkpoint has no training history."
    parts = [
        "While **β(t) < 0** the entropy term *rewards* spreading the head relevance p over all "
        "heads, so every head gets trained (**exploration**); once **β(t) > 0** it rewards "
        "concentrating p on a few heads per layer (**exploitation**), and the budget loss keeps "
        "s inside the band."
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
    if np.isfinite(ent).sum() >= 2:
        first, last = ent[np.isfinite(ent)][[0, -1]]
        facts.append(
            f"the validation head entropy went from {first:.2f} to {last:.2f} nats "
            f"(maximum ln {n_heads} = {math.log(n_heads):.2f}: all heads equally relevant)"
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
    return " ".join(parts)
