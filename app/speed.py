"""Speed against one baseline, named the same way on every page (no Streamlit here).

A model's speed-up is always against its dataset's **dense reference** — ``<dataset>-dense``, or
``<dataset>-minilm-dense`` for a model on the pretrained encoder
(:func:`budgetformer_core.shipped.dense_reference`) — timed in the same interleaved rounds on
the same inputs, one thread (:func:`budgetformer_core.measure.latency.time_points`):
``speed-up = reference latency / this latency``.

sweeps.csv holds both latencies on every row (``latency_ms`` and ``dense_latency_ms``, at batch
32 ``latency_b32_ms`` and ``dense_latency_b32_ms``) and the reference's name (``dense_model``);
every latency difference and speed-up a page shows is computed from one row's two latencies, and
every label names the reference in the words of :func:`speedup_label`. Explore shows sweeps.csv's
figures at the nearest budget (:func:`precomputed_point`, :func:`shipped_card`) and, on request
("Time it": off the slider's path), times the chosen model at its setting and the reference live,
the same way (:func:`time_input`), the live speed-up beside the precomputed one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from app.cards import Card
from budgetformer_core.shipped import dense_reference, model_name

if TYPE_CHECKING:
    from app.settings import Settings
    from budgetformer_core.io.checkpoint import Checkpoint
    from budgetformer_core.measure.latency import Latency
    from budgetformer_core.model.budget import Control

HOW = "same rounds, 1 thread"
"""How a speed-up was timed, said after its reference."""
NOT_TIMED = "not timed"
"""What a page shows for a latency or speed-up sweeps.csv does not have (NaN)."""


def speedup_label(reference: str | None, batch: int = 1) -> str:
    """The unit every speed-up is shown with: "× vs bbc-dense (same rounds, 1 thread, batch 1)"."""
    return f"× vs {reference or 'its dense reference'} ({HOW}, batch {batch})"


def is_number(x) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))


def speedup_text(x, reference: str | None, batch: int = 1) -> str:
    """"1.42× vs bbc-dense (same rounds, 1 thread, batch 1)", or "not timed"."""
    return f"{x:.2f}{speedup_label(reference, batch)}" if is_number(x) else NOT_TIMED


def latency_versus(latency_ms, dense_latency_ms, reference: str | None) -> str | None:
    """"−0.95 ms vs bbc-dense" from one row's two latencies (None when either is missing)."""
    if not (is_number(latency_ms) and is_number(dense_latency_ms)):
        return None
    delta = f"{latency_ms - dense_latency_ms:+.2f}".replace("-", "−")
    return f"{delta} ms vs {reference or 'its dense reference'}"


# --------------------------------------------------------------------------- sweeps.csv

TIMED_COLUMNS = ("latency_ms", "latency_iqr_ms", "dense_latency_ms", "speedup_b1",
                 "latency_b32_ms", "dense_latency_b32_ms", "speedup_b32")
"""sweeps.csv's numeric timing columns (NaN where a row was not timed)."""


def with_references(frame: pd.DataFrame) -> pd.DataFrame:
    """sweeps.csv's rows with the timing columns complete: numbers (NaN where missing), the
    reference's full name in ``reference`` (``<dataset>-<dense_model>``), and each speed-up
    recomputed from the row's two latencies, so no page can show a ratio the latencies beside
    it contradict.

    A file without ``dense_latency_ms`` (written before the reference's latency was stored)
    keeps its speed-ups and gets the reference's latency from them (``latency_ms × speedup_b1``)
    and the dataset's reference name.
    """
    frame = frame.copy()
    stored = "dense_latency_ms" in frame
    for column in TIMED_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else np.nan
    if not stored:  # the speed-ups as written; the reference's batch-1 latency from them
        frame["dense_latency_ms"] = frame["latency_ms"] * frame["speedup_b1"]
    if "dense_model" not in frame:
        frame["dense_model"] = np.nan
    named = frame["dense_model"].notna() & (frame["dense_model"].astype(str).str.strip() != "")
    frame["reference"] = [
        model_name(d, m) if ok else dense_reference(d, model, full=True)
        for d, m, model, ok in zip(frame["dataset"], frame["dense_model"], frame["model"], named, strict=True)
    ]
    if stored:
        frame["speedup_b1"] = frame["dense_latency_ms"] / frame["latency_ms"]
        frame["speedup_b32"] = frame["dense_latency_b32_ms"] / frame["latency_b32_ms"]
    return frame


def baseline_of(rows: pd.DataFrame) -> str | None:
    """The one reference every row of ``rows`` is timed against, or None when they have several
    (or none)."""
    found = rows["reference"].dropna().unique() if "reference" in rows else []
    return str(found[0]) if len(found) == 1 else None


# --------------------------------------------------------------------------- Explore, live


@dataclass
class LiveSpeed:
    """The chosen model at one setting and its dense reference, timed on one input in the same
    interleaved rounds (:func:`budgetformer_core.measure.latency.time_points`), ms per input."""

    latency: Latency
    reference: str | None
    """The reference's name; None when it is not on this machine (nothing to compare with)."""
    dense: Latency | None

    @property
    def speedup(self) -> float | None:
        """The reference's latency / this latency (None without a reference)."""
        return None if self.dense is None else self.dense.ms / self.latency.ms

    def to_dict(self) -> dict:
        """What the export and the offline report write of it
        (:func:`budgetformer_core.analysis.report.latency_record`)."""
        from budgetformer_core.analysis.report import latency_record

        return latency_record(self.latency, self.reference, self.dense)


def time_input(ckpt: Checkpoint, text: str, control: Control | None = None,
               reference: tuple[str, Checkpoint] | None = None) -> LiveSpeed:
    """Time ``ckpt`` on ``text`` with ``control`` (its own operating point when None) and the
    dense ``reference`` (name, checkpoint) in the same interleaved rounds, one thread, batch 1,
    with the engine's timer (:func:`budgetformer_core.measure.latency.time_points`, the timer of
    sweeps.csv). Each model reads the text through its own tokenizer."""
    from budgetformer_core.measure.latency import time_text

    latency, dense = time_text(ckpt, text, control, None if reference is None else reference[1])
    return LiveSpeed(latency, None if reference is None else reference[0], dense)  # itself: 1.00× by definition


def precomputed_point(rows: pd.DataFrame | None, model: str, settings: Settings, validation_budget: float,
                      n_heads: int, symbol: str = "s") -> tuple[pd.Series, str] | None:
    """The sweeps.csv row of ``model`` (without its dataset prefix) nearest to what ``settings``
    runs, and where it is ("its own point", "b = 0.50"); None when sweeps.csv has no row of it.

    The model's own point for the full model or a head ablation at its own budget; the budget
    asked for by the slider, by a forced k (k / H) or by "no f_θ" (the validation mean s)."""
    if rows is None:
        return None
    mine = rows[rows["model"] == model]
    if settings.no_budget_net:
        budget = validation_budget
    elif settings.budget_mode == "slider":
        budget = settings.budget
    elif settings.budget_mode == "force_k":
        budget = settings.k / n_heads
    else:
        budget = None
    curve = mine[mine["b"].notna()]
    if budget is None or curve.empty:
        own = mine[mine["budget"] == "own"]
        return None if own.empty else (own.iloc[0], "its own point")
    row = curve.iloc[int(np.argmin(np.abs(curve["b"].to_numpy() - budget)))]
    return row, f"{symbol} = {row['b']:.2f}"


NOTE_CHARS = 64
"""The longest latency-card note that fits the card at 1280 px."""


def speed_note(live: LiveSpeed | None, precomputed: tuple[pd.Series, str] | None) -> str:
    """The latency card's line, short enough for the card at 1280 px (:data:`NOTE_CHARS`): "vs
    bbc-dense, batch 1: 1.42× live, 1.38× shipped at s = 0.50"; where the shipped figure was
    measured is left to the card's help when the reference's name leaves no room for it (how both
    were timed is in the help too)."""
    reference = live.reference if live is not None and live.reference else (
        precomputed[0]["reference"] if precomputed is not None else None)
    if reference is None:
        return "no dense reference on this machine: speed-up not measured"
    head = f"vs {reference}, batch 1: " + (
        f"{live.speedup:.2f}× live" if live is not None and live.speedup is not None else "live not timed")
    if precomputed is None:
        return head
    row, where = precomputed
    x = row["speedup_b1"]
    shipped = f"{x:.2f}× shipped" if is_number(x) else f"shipped {NOT_TIMED}"
    note = f"{head}, {shipped} at {where}"
    return note if len(note) <= NOTE_CHARS else f"{head}, {shipped}"


LATENCY_LABEL = "Latency (1 thread)"
"""The Explore page's latency card."""


def shipped_card(precomputed: tuple[pd.Series, str] | None) -> Card:
    """The latency card before this input is timed: sweeps.csv's latency and speed-up at the
    nearest budget (``precomputed``, :func:`precomputed_point`), "—" where there is none."""
    ms = None if precomputed is None else precomputed[0]["latency_ms"]
    shipped = is_number(ms)
    note = speed_note(None, precomputed) if precomputed is not None else "live not timed"
    where = f" at {precomputed[1]}" if shipped else ""
    return Card(
        LATENCY_LABEL,
        f"{ms:.2f} ms" if shipped else "—",
        note,
        ("Shipped: sweeps.csv's latency per test text" + where + " (batch 1, one thread), not this input's. "
         if shipped else "") + "Time it to time this input at this setting now, with its dense reference in the "
        "same interleaved rounds on one thread.",
    )


def slower_note(live: LiveSpeed | None, n_tokens: int) -> str | None:
    """Why this run is slower than the dense reference on this input, in one line (None when not)."""
    if live is None or live.speedup is None or live.speedup >= 1:
        return None
    return (
        f"This run is slower than {live.reference} here: at {n_tokens} tokens, choosing the heads (pooling, "
        "the budget and scoring networks, top-k: a few dozen tiny operations per layer) costs "
        "more than the skipped heads save. The Budget sweep page's *cost vs input length* chart "
        "shows from which length it pays."
    )
