"""What the pages compute, as plain functions (no Streamlit here).

"Explore an input": the page reads its widgets into a :class:`Settings`, and this module turns
that into the model runs it shows: the full model's analysis of the text, the analysis under the
chosen override or ablation, the measured single-thread latency of both execution paths, the
comparison rows and the exportable record. Keeping it free of ``st.*`` lets the tests call it
directly and lets ``app/state.py`` cache it.

"Training dynamics", "Errors" and "Easy vs hard" work on tables: :func:`history_frame` turns a
checkpoint's per-epoch history into one, :func:`per_example_table` turns a whole-split
evaluation into a row per text, and the filters, confusion matrix and rank correlations are
computed from those.

torch and the core are imported inside the functions that need them: importing them takes
seconds, and the page draws its title, input and controls before it first needs a model.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from budgetformer_core.budget import Control
    from budgetformer_core.checkpoint import Checkpoint
    from budgetformer_core.infer import Analysis

MAX_INPUT_CHARS = 100_000
"""Typed or pasted text beyond this many characters is cut off before anything else happens."""

BUDGET_MODES = ("learned", "slider", "force_k")
"""``learned``: s from f_θ; ``slider``: s from the slider for every layer; ``force_k``: k heads."""

HEAD_ABLATIONS = ("random", "uniform")


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class PreparedInput:
    """The text as the page will analyse it."""

    text: str
    """At most :data:`MAX_INPUT_CHARS` characters."""
    n_chars: int
    """Length of the text as given."""

    @property
    def cut(self) -> bool:
        """True when the given text was longer than :data:`MAX_INPUT_CHARS` and was cut."""
        return self.n_chars > len(self.text)


def prepare_text(text: str | None) -> PreparedInput:
    """Cut ``text`` to :data:`MAX_INPUT_CHARS` characters (``None`` counts as empty)."""
    text = text or ""
    return PreparedInput(text[:MAX_INPUT_CHARS], len(text))


def reading_prefix(tokenizer: Tokenizer, text: str, max_len: int, start: int = 4096) -> str:
    """The shortest cheap prefix of ``text`` whose first ``max_len`` tokens are the text's own.

    The model reads only ``max_len`` tokens, but tokenising 100,000 characters takes tens of
    milliseconds. A prefix cut at whitespace tokenises exactly like the same words inside the
    full text (the normaliser works per character, the pre-tokeniser splits at whitespace), so
    once a prefix yields more than ``max_len`` tokens the rest of the text cannot change what
    the model reads — and the result still reports the input as truncated. Prefixes grow ×4.
    """
    size = start
    while size < len(text):
        cut = text.rfind(" ", 0, size)
        cut = max(cut, text.rfind("\n", 0, size))
        if cut > 0 and len(tokenizer.encode(text[:cut]).ids) > max_len:
            return text[:cut]
        size *= 4
    return text


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What the page's controls ask for; hashable so results can be cached by it."""

    budget_mode: str = "learned"
    """One of :data:`BUDGET_MODES`."""
    budget: float = 0.5
    """s used in ``slider`` mode."""
    k: int = 2
    """Heads per layer in ``force_k`` mode."""
    no_budget_net: bool = False
    """Ablation "no f_θ": a fixed budget, the full model's mean s on this input, in every layer."""
    head_ablation: str | None = None
    """Ablation "no g_φ": ``random`` or ``uniform`` head choice instead of g_φ's relevance."""
    seed: int = 0
    """Seed of the random head choice."""

    def __post_init__(self) -> None:
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {BUDGET_MODES}, got {self.budget_mode!r}")
        if self.head_ablation not in (None, *HEAD_ABLATIONS):
            raise ValueError(
                f"head_ablation must be random, uniform or None, got {self.head_ablation!r}"
            )

    @property
    def is_full_model(self) -> bool:
        """True when nothing overrides the model's own f_θ and g_φ."""
        return (
            self.budget_mode == "learned" and not self.no_budget_net and self.head_ablation is None
        )

    def canonical(self) -> Settings:
        """The same setting with the fields it does not use reset (one cache entry per setting)."""
        default = Settings()
        return Settings(
            budget_mode="learned" if self.no_budget_net else self.budget_mode,
            budget=self.budget
            if self.budget_mode == "slider" and not self.no_budget_net
            else default.budget,
            k=self.k if self.budget_mode == "force_k" and not self.no_budget_net else default.k,
            no_budget_net=self.no_budget_net,
            head_ablation=self.head_ablation,
            seed=self.seed if self.head_ablation == "random" else default.seed,
        )

    def describe(self) -> str:
        """A short human-readable name of this setting."""
        parts = []
        if self.no_budget_net:
            parts.append("no f_θ (fixed mean s)")
        elif self.budget_mode == "slider":
            parts.append(f"s = {self.budget:.2f}")
        elif self.budget_mode == "force_k":
            parts.append(f"k = {self.k}")
        if self.head_ablation:
            parts.append(f"no g_φ ({self.head_ablation} heads)")
        return ", ".join(parts) or "full model"


def mean_budget(full: Analysis) -> float:
    """The full model's mean s over layers on this input (the "no f_θ" fixed budget)."""
    return float(sum(full.budget) / len(full.budget))


def control_for(settings: Settings, full: Analysis | None) -> Control | None:
    """The :class:`Control` implementing ``settings`` (``None`` for the full model).

    ``full`` is the full model's analysis of the same input; the "no f_θ" ablation needs its
    mean s.
    """
    from budgetformer_core.budget import Control

    if settings.is_full_model:
        return None
    budget = k = None
    if settings.no_budget_net:
        if full is None:
            raise ValueError("the no-f_θ ablation needs the full model's analysis of the input")
        budget = min(1.0, max(mean_budget(full), 1e-3))
    elif settings.budget_mode == "slider":
        budget = settings.budget
    elif settings.budget_mode == "force_k":
        k = settings.k
    return Control(budget=budget, k=k, head_choice=settings.head_ablation, seed=settings.seed)


def is_budgeted(ckpt: Checkpoint) -> bool:
    """False for a dense checkpoint (no budget, no head choice)."""
    return ckpt.config.variant != "dense"


def run_analysis(ckpt: Checkpoint, text: str, control: Control | None = None) -> Analysis:
    """One input through :func:`budgetformer_core.infer.analyze` (ValueError for a bad input).

    Only :func:`reading_prefix` of the text is tokenised; ``truncated`` is set when the model
    did not read all of it. Runs on one thread: at batch size 1 more threads barely help, and
    on a busy machine their synchronisation can make a 5 ms forward pass take hundreds.
    """
    from budgetformer_core.infer import analyze

    prefix = reading_prefix(ckpt.tokenizer, text, ckpt.config.max_len)
    with single_thread():
        [a] = analyze(ckpt, [prefix], control if is_budgeted(ckpt) else None)
    a.text = text
    a.truncated = a.truncated or len(prefix) < len(text)
    return a


# --------------------------------------------------------------------------- timing

_THREADS_LOCK = threading.RLock()


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the body with one torch intra-op thread, then restore the previous count.

    ``torch.set_num_threads`` is process-wide and the server runs one thread per browser
    session, so the lock makes model runs take turns: no session can restore the count while
    another is in the middle of a run (re-entrant, so the body may use it again).
    """
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


@dataclass
class Timing:
    """Median single-thread latency of one forward pass, budgeted (structural) and dense."""

    dense_ms: float
    structural_ms: float | None
    """None for a dense checkpoint."""
    repeats: int
    threads: int = 1
    samples_ms: dict[str, list[float]] = field(default_factory=dict)
    dense_reused: bool = False
    """True when the dense time was measured earlier on the same text (see :func:`time_input`)."""

    @property
    def speedup(self) -> float | None:
        return None if not self.structural_ms else self.dense_ms / self.structural_ms


def time_input(
    ckpt: Checkpoint,
    text: str,
    control: Control | None = None,
    repeats: int = 3,
    dense: Timing | None = None,
) -> Timing:
    """Time ``ckpt.model`` on ``text`` in structural and dense mode, interleaved, single thread.

    ``repeats`` rounds each time one call of both paths, in alternating order, so a burst of
    load from elsewhere hits both alike; the medians are reported. There is no separate
    warm-up: the page has just run the same input through the model, and the median of three
    shrugs off one cold call.

    The dense path does not depend on the budget, so when the slider moves the page passes the
    full model's timing of the same text as ``dense`` and only the structural path is timed
    again: a dense forward pass of 512 tokens takes ~15 ms on one thread, and timing it three
    more times on every slider step would use most of the page's 150 ms.
    """
    import torch

    from budgetformer_core.tokenizer import encode_batch

    model = ckpt.model
    prefix = reading_prefix(ckpt.tokenizer, text, ckpt.config.max_len)
    batch = encode_batch(ckpt.tokenizer, [prefix], ckpt.config.max_len)
    names = ["structural"] if is_budgeted(ckpt) else []
    if dense is None or not names:
        names.append("dense")
    samples: dict[str, list[float]] = {name: [] for name in names}
    with torch.no_grad(), single_thread():
        for r in range(repeats):
            for mode in names if r % 2 == 0 else names[::-1]:
                t0 = time.perf_counter()
                model(batch.ids, batch.mask, mode=mode, control=control)
                samples[mode].append((time.perf_counter() - t0) * 1e3)
    structural = statistics.median(samples["structural"]) if "structural" in samples else None
    if "dense" in samples:
        return Timing(statistics.median(samples["dense"]), structural, repeats, 1, samples)
    samples["dense"] = dense.samples_ms.get("dense", [])
    return Timing(dense.dense_ms, structural, repeats, 1, samples, dense_reused=True)


def speed_note(timing: Timing) -> str:
    """ "dense 3.1 ms · 1.40× faster" (or slower) for the latency metric."""
    if timing.structural_ms is None:
        return "dense model"
    x = timing.speedup or 1.0
    pace = f"{x:.2f}× faster" if x >= 1 else f"{1 / x:.2f}× slower"
    return f"dense {timing.dense_ms:.1f} ms · {pace}"


@dataclass(frozen=True)
class Card:
    """One headline number of the page (shown with ``st.metric``)."""

    label: str
    value: str
    note: str | None = None
    help: str | None = None


def metric_cards(
    a: Analysis, timing: Timing | None, settings: Settings, n_heads: int
) -> list[Card]:
    """Prediction, budget s, heads run, FLOPs and latency of one analysis, formatted."""
    dense = a.k == [n_heads] * len(a.k) and a.flops == a.dense_flops
    if settings.no_budget_net:
        s_note = "fixed (no f_θ)"
    elif settings.budget_mode == "slider":
        s_note = "set by the slider"
    else:
        s_note = "dense: every head" if dense else "predicted by f_θ"
    if timing is None:
        latency = Card("Latency (1 thread)", "—", "not measured")
    elif timing.structural_ms is None:
        latency = Card("Latency (1 thread)", f"{timing.dense_ms:.1f} ms", "dense model")
    else:
        latency = Card(
            "Latency (1 thread)",
            f"{timing.structural_ms:.1f} ms",
            speed_note(timing),
            f"Median of {timing.repeats} single-thread forward passes of this input through "
            "the budgeted (structural) path and the dense path"
            + (
                "; the dense time was measured when this text was first analysed."
                if timing.dense_reused
                else ", taking turns."
            ),
        )
    return [
        Card("Prediction", a.label, f"{max(a.probs):.1%} confident"),
        Card("Budget s per layer", " / ".join(f"{x:.2f}" for x in a.budget), s_note),
        Card("Heads run per layer", " / ".join(str(x) for x in a.k), f"of {n_heads} per layer"),
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


def comparison_rows(full: Analysis, current: Analysis, label: str) -> list[dict[str, str]]:
    """Rows "what / full model / <label>" contrasting two analyses of the same input."""

    def heads(a: Analysis) -> str:
        return " | ".join(",".join(str(h) for h in sel) for sel in a.selected_heads)

    def fmt(a: Analysis) -> dict[str, str]:
        return {
            "prediction": f"{a.label} ({max(a.probs):.1%})",
            "budget s per layer": " / ".join(f"{s:.2f}" for s in a.budget),
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


def machine_info() -> dict[str, object]:
    """Where the latency was measured."""
    import torch

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "timing_threads": 1,
    }


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
    timing: Timing | None,
) -> dict:
    """Everything needed to reproduce and judge one analysis, as JSON-ready data."""
    return {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "input": {
            "text": prepared.text,
            "n_chars": prepared.n_chars,
            "cut_to_chars": MAX_INPUT_CHARS if prepared.cut else None,
            "n_tokens_read": current.n_tokens,
            "truncated": current.truncated or prepared.cut,
        },
        "checkpoint": {
            "name": checkpoint_name,
            "path": checkpoint_path,
            "model_sha256": checkpoint_sha256,
        },
        "label_names": label_names,
        "settings": {**asdict(settings), "description": settings.describe()},
        "control": control,
        "truncated": current.truncated or prepared.cut,
        "analysis": analysis_record(current),
        "full_model": analysis_record(full),
        "timing": None
        if timing is None
        else {
            "dense_ms": timing.dense_ms,
            "structural_ms": timing.structural_ms,
            "speedup": timing.speedup,
            "repeats": timing.repeats,
            "threads": timing.threads,
            "samples_ms": timing.samples_ms,
            "dense_reused": timing.dense_reused,
        },
        "machine": machine_info(),
    }


def search_texts(texts: list[str], query: str, limit: int = 50) -> list[int]:
    """Indices of the texts containing ``query`` (case-insensitive), at most ``limit``."""
    q = query.strip().lower()
    if not q:
        return []
    return [i for i, t in enumerate(texts) if q in t.lower()][:limit]


# --------------------------------------------------------------------------- training dynamics
#
# The "Training dynamics" page reads the checkpoint's history.json: one dict per epoch, with the
# per-layer budgets as lists. Older or foreign histories may lack keys; they become NaN columns.

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


# --------------------------------------------------------------------------- per-example results
#
# The "Errors" and "Easy vs hard" pages work on one table: a row per text of a split, built from
# :class:`budgetformer_core.infer.Evaluation` (predictions, probabilities, s per layer).


def per_example_table(frame: pd.DataFrame, texts: list[str] | None, label_names: list[str]) -> pd.DataFrame:
    """The pages' table: a per-example frame plus class names and texts.

    ``frame`` is :meth:`budgetformer_core.infer.Evaluation.to_frame`'s (columns ``index``,
    ``label``, ``prediction``, ``correct``, ``confidence``, ``p_true``, ``loss``, ``entropy``,
    ``mean_s``, ``s{l}`` / ``k{l}`` / ``heads{l}`` per layer, ``tokens``), computed live or read
    from precomputed/results. Adds ``true`` and ``predicted`` (class names) and ``text`` (empty
    when the split's texts are not on this machine).

    Raises:
        ValueError: texts of another length than the frame, or a label outside ``label_names``.
    """
    if texts is not None and len(texts) != len(frame):
        raise ValueError(f"{len(texts)} texts for {len(frame)} rows")
    names = np.asarray(label_names, dtype=object)
    ids = np.concatenate([frame["label"].to_numpy(), frame["prediction"].to_numpy()]).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(names)):
        raise ValueError(f"class ids outside the {len(names)} classes")
    table = frame.copy()
    table.insert(1, "true", names[frame["label"].to_numpy(dtype=np.int64)])
    table.insert(2, "predicted", names[frame["prediction"].to_numpy(dtype=np.int64)])
    table["text"] = list(texts) if texts is not None else [""] * len(frame)
    return table


def layer_columns(table: pd.DataFrame) -> list[str]:
    """The per-layer budget columns ``s0``, ``s1``, … of a :func:`per_example_table`."""
    return [c for c in table.columns if c[:1] == "s" and c[1:].isdigit()]


def filter_examples(
    table: pd.DataFrame,
    *,
    true: list[str] | None = None,
    predicted: list[str] | None = None,
    s_range: tuple[float, float] | None = None,
    confidence_range: tuple[float, float] | None = None,
    errors_only: bool = True,
) -> pd.DataFrame:
    """The rows matching every filter; an empty or ``None`` class list means "any class".

    Ranges are closed intervals (a little slack so a slider at 1.00 keeps s = 0.99999…).
    """
    keep = np.ones(len(table), dtype=bool)
    if errors_only:
        keep &= ~table["correct"].to_numpy()
    if true:
        keep &= table["true"].isin(true).to_numpy()
    if predicted:
        keep &= table["predicted"].isin(predicted).to_numpy()
    eps = 1e-6
    for column, bounds in (("mean_s", s_range), ("confidence", confidence_range)):
        if bounds is not None:
            lo, hi = bounds
            values = table[column].to_numpy()
            keep &= (values >= lo - eps) & (values <= hi + eps)
    return table[keep]


def confusion_matrix(table: pd.DataFrame, label_names: list[str]) -> list[list[int]]:
    """Counts by true class (rows) and predicted class (columns), in ``label_names`` order."""
    where = {name: i for i, name in enumerate(label_names)}
    m = np.zeros((len(label_names), len(label_names)), dtype=np.int64)
    for t, p in zip(table["true"], table["predicted"], strict=True):
        m[where[t], where[p]] += 1
    return m.tolist()


def spearman(x, y) -> float | None:
    """Spearman's rank correlation (ties get average ranks); None if a side is constant or n < 3."""
    a, b = pd.Series(np.asarray(x, dtype=np.float64)), pd.Series(np.asarray(y, dtype=np.float64))
    ok = a.notna() & b.notna()
    a, b = a[ok].rank(), b[ok].rank()
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def extremes(
    table: pd.DataFrame, n: int = 10, column: str = "mean_s"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``n`` rows with the lowest and the ``n`` with the highest ``column`` (ties by index)."""
    ordered = table.sort_values([column, "index"], kind="stable")
    return ordered.head(n), ordered.tail(n).iloc[::-1]


def example_label(row) -> str:
    """A one-line name of a per-example row for pickers: "#12 · sport → politics (64%)"."""
    return f"#{int(row['index'])} · {row['true']} → {row['predicted']} ({row['confidence']:.0%})"


def preview(text: str, width: int = 160) -> str:
    """The start of ``text`` on one line, for table cells."""
    flat = " ".join(text[: width * 3].split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# --------------------------------------------------------------------------- precomputed results
#
# "Budget sweep" and "Ablations" read what ``make precompute`` wrote under precomputed/results:
# sweeps.csv (a row per dataset, model and budget point) and a per-example table per shipped
# model. See budgetformer_core/precompute.py for how they are measured.

SWEEP_KEYS = ("dataset", "model", "budget", "accuracy")
"""Columns sweeps.csv must have; the other numeric ones become NaN when absent."""
SWEEP_NUMBERS = (
    "accuracy",
    "macro_f1",
    "n",
    "mean_s",
    "heads_fraction",
    "attention_cost_estimated",
    "flops_ratio",
    "latency_ms",
    "latency_iqr_ms",
    "speedup_b1",
    "speedup_b32",
)
TABLE_BUDGETS = (0.25, 0.5, 0.75, 1.0)
"""The budgets of the per-budget comparison (the specialists exist at the first three)."""
LIVE_BUDGETS = (0.1, 0.25, 0.5, 0.75, 1.0)
"""The budgets the sweep page re-measures live."""
SPECIALISTS = {"static-": "static gates", "recovery-": "post-hoc + recovery"}
"""Per-budget models by name prefix: one row each, at the budget they were trained for."""
POSTHOC = "posthoc"
METHOD_NAMES = {"bba": "BBA", POSTHOC: "post-hoc (zero-shot)", "dense": "dense"}
ABLATIONS = {
    "budgetformer": "BudgetFormer (full)",
    "no-budget-net": "no budget net (no f_θ)",
    "no-head-scorer": "no head scorer (no g_φ)",
    "dense": "dense",
    "bba": "BBA (own point)",
}
"""The models the ablation page compares at their own operating point, in its order."""
RESULT_COLUMNS = [
    "accuracy",
    "macro_f1",
    "heads_fraction",
    "mean_s",
    "flops_ratio",
    "latency_ms",
    "speedup_b1",
    "speedup_b32",
    "ideal_speedup",
]
"""The columns the result tables show (and download)."""


def read_sweeps(path: Path | str) -> pd.DataFrame:
    """sweeps.csv with numeric columns, plus ``b`` (the budget as a number; NaN for "own") and
    ``ideal_speedup`` (1 / flops_ratio).

    Raises:
        ValueError: not a readable CSV, or without the columns of :data:`SWEEP_KEYS`.
    """
    try:
        frame = pd.read_csv(path, dtype={"budget": str, "dataset": str, "model": str})
    except (OSError, ValueError, UnicodeDecodeError) as e:  # pandas' parser errors are ValueErrors
        raise ValueError(f"not a readable CSV file ({e})") from e
    missing = [c for c in SWEEP_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"the column(s) {', '.join(missing)} are missing")
    for column in SWEEP_NUMBERS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else np.nan
    frame["budget"] = frame["budget"].fillna("").str.strip()
    frame["b"] = pd.to_numeric(frame["budget"].where(frame["budget"] != "own"), errors="coerce")
    ratio = frame["flops_ratio"].where(frame["flops_ratio"] > 0)
    frame["ideal_speedup"] = 1.0 / ratio
    return frame


def sweep_curve(rows: pd.DataFrame, model: str) -> pd.DataFrame:
    """The rows of ``model`` at a numeric budget, by budget."""
    return rows[(rows["model"] == model) & rows["b"].notna()].sort_values("b")


def own_point(rows: pd.DataFrame, model: str) -> pd.Series | None:
    """The row of ``model`` at its own operating point, or None."""
    own = rows[(rows["model"] == model) & (rows["budget"] == "own")]
    return None if own.empty else own.iloc[0]


def at_budget(curve: pd.DataFrame, budget: float) -> pd.Series:
    """The row of a (non-empty) sweep curve whose budget is nearest to ``budget``."""
    return curve.iloc[int(np.argmin(np.abs(curve["b"].to_numpy() - budget)))]


def specialist_rows(rows: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The per-budget models named ``prefix``…, by budget."""
    return rows[rows["model"].str.startswith(prefix) & rows["b"].notna()].sort_values("b")


def series_xy(frame: pd.DataFrame, column: str, x: str = "b") -> tuple[list[float], list[float]]:
    """(x, y) lists of one column against the budget (or ``x``), for a chart."""
    return frame[x].tolist(), frame[column].tolist()


def budget_series(rows: pd.DataFrame, model: str, column: str) -> dict:
    """What the sweep page draws for one metric: keyword arguments of
    :func:`app.charts.budget_curves`.

    ``lines``: the model's sweep and the zero-shot post-hoc sweep; ``points``: the model's own
    operating point (at its mean s) and the per-budget specialists; ``reference``: dense.
    """
    lines = {model: series_xy(sweep_curve(rows, model), column)}
    if model != POSTHOC:
        lines[METHOD_NAMES[POSTHOC]] = series_xy(sweep_curve(rows, POSTHOC), column)
    own = own_point(rows, model)
    points = {f"{model} at its own point": ([own["mean_s"]], [own[column]])} if own is not None else {}
    points |= {name: series_xy(specialist_rows(rows, p), column) for p, name in SPECIALISTS.items()}
    dense = own_point(rows, "dense")
    reference = {"dense": dense[column]} if dense is not None else {}
    return dict(
        lines={k: v for k, v in lines.items() if v[0]},
        points={k: v for k, v in points.items() if v[0]},
        reference={k: v for k, v in reference.items() if pd.notna(v)},
    )


def speedup_series(curve: pd.DataFrame) -> dict:
    """Ideal (1 / FLOPs ratio) and measured speed-ups of a sweep, for :func:`budget_curves`."""
    b32 = curve[curve["speedup_b32"].notna()]
    lines = {
        "ideal (1 / FLOPs ratio)": series_xy(curve, "ideal_speedup"),
        "measured, batch 1": series_xy(curve, "speedup_b1"),
        "measured, batch 32": series_xy(b32, "speedup_b32"),
    }
    return dict(lines={k: v for k, v in lines.items() if v[0]}, reference={"dense": 1.0})


def method_of(model: str, chosen: str) -> str | None:
    """The comparison table's name for a model (None: not in the table)."""
    if model == chosen and model not in METHOD_NAMES:
        return model
    for prefix, name in SPECIALISTS.items():
        if model.startswith(prefix):
            return name
    return METHOD_NAMES.get(model)


def comparison_table(rows: pd.DataFrame, chosen: str) -> pd.DataFrame:
    """Every method at the budgets of :data:`TABLE_BUDGETS`: the chosen model, BBA, static gates,
    post-hoc, post-hoc + recovery, and dense (at budget 1). A row per budget and method."""
    at = rows[np.isclose(rows["b"].to_numpy()[:, None], TABLE_BUDGETS).any(1)]
    dense = rows[(rows["model"] == "dense") & (rows["budget"] == "own")].assign(b=1.0)
    table = pd.concat([at[at["model"] != "dense"], dense]).assign(
        method=lambda t: [method_of(m, chosen) for m in t["model"]]
    )
    table = table[table["method"].notna()]
    order = [chosen, "BBA", "static gates", METHOD_NAMES[POSTHOC], "post-hoc + recovery", "dense"]
    rank = {name: i for i, name in enumerate(order)}
    table = table.assign(rank=table["method"].map(rank)).sort_values(["b", "rank"])
    return table.rename(columns={"b": "budget_b"})[
        ["budget_b", "method", "model", *RESULT_COLUMNS]
    ].reset_index(drop=True)


def own_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every model of a dataset at its own operating point (specialists at their budget)."""
    own = rows[(rows["budget"] == "own") | rows["model"].str.startswith(tuple(SPECIALISTS))]
    return own[["model", "budget", *RESULT_COLUMNS]].reset_index(drop=True)


def ablation_table(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The models of :data:`ABLATIONS` at their own point, in that order, and those missing."""
    found = [(m, own_point(rows, m)) for m in ABLATIONS]
    table = pd.DataFrame(
        [{"model": ABLATIONS[m], **r[RESULT_COLUMNS].to_dict()} for m, r in found if r is not None],
        columns=["model", *RESULT_COLUMNS],
    )
    return table, [m for m, r in found if r is None]


def sweep_cards(row: pd.Series, dense: pd.Series | None) -> list[Card]:
    """The sweep page's headline numbers at one budget, each against dense when it is known."""

    def versus(column: str, fmt) -> str | None:
        if dense is None or pd.isna(dense[column]) or pd.isna(row[column]):
            return None
        return fmt(row[column] - dense[column])

    def show(value: float, fmt: str) -> str:
        return "—" if pd.isna(value) else format(value, fmt)

    return [
        Card(
            "Accuracy",
            show(row["accuracy"], ".1%"),
            versus("accuracy", lambda d: f"{d * 100:+.1f} pts vs dense"),
        ),
        Card(
            "Macro-F1",
            show(row["macro_f1"], ".3f"),
            versus("macro_f1", lambda d: f"{d:+.3f} vs dense"),
        ),
        Card(
            "Heads run",
            show(row["heads_fraction"], ".0%"),
            None if pd.isna(row["mean_s"]) else f"mean s {row['mean_s']:.2f}",
        ),
        Card("FLOPs vs dense", show(row["flops_ratio"], ".0%"), None),
        Card(
            "Latency (batch 1)",
            "—" if pd.isna(row["latency_ms"]) else f"{row['latency_ms']:.2f} ms",
            versus("latency_ms", lambda d: f"{d:+.2f} ms vs dense"),
            "Median single-thread time per input, batch 1.",
        ),
        Card(
            "Speed-up (batch 1)",
            "—" if pd.isna(row["speedup_b1"]) else f"{row['speedup_b1']:.2f}×",
            None if pd.isna(row["ideal_speedup"]) else f"ideal {row['ideal_speedup']:.2f}×",
            "Dense latency / this latency, measured; ideal = 1 / FLOPs ratio.",
        ),
    ]


def live_sweep(
    ckpt: Checkpoint, texts: list[str], labels: list[int], budgets=LIVE_BUDGETS
) -> Iterator[dict]:
    """Evaluate ``ckpt`` on the texts at each requested budget; a row per budget, as it is done."""
    from budgetformer_core.budget import Control
    from budgetformer_core.data import Split
    from budgetformer_core.infer import evaluate_split

    split = Split(list(texts), list(labels))
    for b in budgets:
        t0 = time.perf_counter()
        ev = evaluate_split(ckpt, split, Control(budget=b))
        yield {
            "budget_b": b,
            "accuracy": ev.accuracy,
            "heads_fraction": ev.mean_heads_fraction,
            "flops_ratio": ev.flops_ratio,
            "n": ev.n,
            "seconds": time.perf_counter() - t0,
        }


PER_EXAMPLE_KEYS = ("index", "label", "prediction")


def read_per_example(path: Path | str) -> pd.DataFrame:
    """A precomputed per-example table (a row per test input, no text).

    Raises:
        ValueError: not a readable parquet file, or without the columns of :data:`PER_EXAMPLE_KEYS`.
    """
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as e:  # pyarrow's errors are one or the other
        raise ValueError(f"not a readable parquet file ({e})") from e
    missing = [c for c in PER_EXAMPLE_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"the column(s) {', '.join(missing)} are missing")
    return frame


def disagreements(
    tables: dict[str, pd.DataFrame],
    label_names: list[str],
    texts: list[str] | None = None,
    labels: list[int] | None = None,
) -> tuple[pd.DataFrame, int]:
    """The test inputs on which the models' predictions differ, and how many inputs all share.

    Joins the per-example tables on ``index``. Columns: ``index``, ``true``, one column per model
    with its predicted class, ``right`` ("2 of 3": models that got it right), and ``text`` when
    ``texts`` / ``labels`` (the split) are given and agree with the tables' labels.
    """
    def name(i: int) -> str:
        return label_names[i] if 0 <= i < len(label_names) else str(i)

    joined = None
    for model, t in tables.items():
        part = t[["index", "label", "prediction"]].rename(columns={"prediction": model})
        joined = part if joined is None else joined.merge(part.drop(columns="label"), on="index")
    if joined is None:
        return pd.DataFrame(columns=["index", "true", "right"]), 0
    models = list(tables)
    preds = joined[models].to_numpy()
    differ = joined[(preds != preds[:, :1]).any(1)]
    right = (differ[models].to_numpy() == differ[["label"]].to_numpy()).sum(1)
    out = pd.DataFrame({"index": differ["index"].astype(int), "true": differ["label"].map(name)})
    for model in models:
        out[model] = differ[model].map(name)
    out["right"] = [f"{r} of {len(models)}" for r in right]
    if texts is not None and labels is not None:
        idx = joined["index"].to_numpy()
        known = len(idx) == 0 or (idx.min() >= 0 and idx.max() < min(len(texts), len(labels)))
        if known and all(labels[i] == y for i, y in zip(idx, joined["label"], strict=True)):
            out["text"] = [texts[i] for i in out["index"]]
    return out.reset_index(drop=True), len(joined)
