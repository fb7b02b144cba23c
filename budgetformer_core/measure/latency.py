"""Latency of checkpoints on real texts, each against a dense checkpoint timed in the same rounds.

Every latency the project ships or shows on the Budget sweep page is measured here, one way:
the texts of a split, each model tokenizing them itself, timed with
:func:`budgetformer_core.measure.timing.time_interleaved` — every operating point asked for (a model at
a budget) and its dense reference in the same interleaved rounds, one intra-op thread, each
model warmed up first. A latency is the median over rounds of a block of calls divided by the
inputs in the block: **ms per input**, at batch 1 (the texts one at a time) or batch 32 (one
padded batch). A speed-up is the dense reference's latency divided by the point's, both from
the same rounds, so ``speedup = dense_latency_ms / latency_ms`` holds exactly.

The clock is the timing thread's CPU time by default (``clock="cpu"``): with one intra-op thread
all of torch's work runs there, so on a quiet machine it equals the wall-clock latency, and on a
busy one the time spent waiting for a core is not counted (see :mod:`budgetformer_core.measure.timing`).

:func:`time_dataset` times the rows of a results table (sweeps.csv) this way: the rebuild of
``precomputed/`` writes its latency columns with it, and ``budgetformer latency-check``
(:func:`live_check`) times shipped models again with it and sets the result beside the shipped
figures.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from ..io.tokenizer import encode, pad
from ..model.budget import Control
from ..model.encoder import BudgetFormer
from ..shipped import dense_reference, shipped_models
from .timing import time_interleaved

if TYPE_CHECKING:
    from ..io.checkpoint import Checkpoint

TIMED_INPUTS = 8
"""Texts timed one at a time (batch 1) per operating point."""
BATCH = 32
"""Inputs per forward pass of the batched timing."""
BATCH_BUDGETS = (0.25, 0.5, 0.75, 1.0)
"""The budgets timed at batch 32 as well (with every model's own operating point)."""
ROUNDS = 7
"""Interleaved rounds: each gives one sample per operating point."""
CLOCK = "cpu"
LATENCY_COLUMNS = ("latency_ms", "latency_iqr_ms", "dense_latency_ms", "speedup_b1",
                   "latency_b32_ms", "dense_latency_b32_ms", "speedup_b32", "dense_model")
"""The columns of a results table that :func:`time_dataset` writes."""
CHECK_MODELS = ("budgetformer", "bba")
"""The models :func:`live_check` re-measures by default (with their dense reference)."""
CHECK_BUDGETS = ("own", "0.25", "0.5", "0.75", "1")
"""Their points re-measured: the own operating point and the budgets timed at batch 32 too."""
CHECK_TOLERANCE = 0.25
"""A live speed-up agrees with the shipped one when their ratio is within 1 ± this."""


@dataclass(frozen=True)
class Point:
    """One operating point to time: a model, the budget it is asked for, its token ids."""

    model: BudgetFormer
    budget: float | None
    """The requested budget (s for BudgetFormer, b for bba); None: the model's own operating point."""
    ids: list[list[int]]
    """The timed texts as this model's tokenizer encodes them (at most ``max_len`` tokens each)."""
    control: Control | None = None
    """Overrides to run with instead of ``budget`` alone (a forced k, heads chosen without g_φ)."""

    def forward(self, batch: bool) -> tuple[Callable[[], object], int]:
        """A call running the point's inputs — one at a time, or the first :data:`BATCH` as one
        padded batch — and how many inputs it runs."""
        model = self.model
        mode = model.method.default_mode
        control = model.control_in_effect(self.control if self.control is not None else (
            Control(budget=self.budget) if self.budget is not None else None))
        if batch:
            b = pad(self.ids[:BATCH])  # (B, T) ids and mask
            return (lambda: model(b.ids, b.mask, mode=mode, control=control)), len(self.ids[:BATCH])
        one = [(torch.tensor([seq]), torch.ones(1, len(seq), dtype=torch.bool)) for seq in self.ids]  # (1, T) each
        return (lambda: [model(x, m, mode=mode, control=control) for x, m in one]), len(one)


@dataclass(frozen=True)
class Latency:
    """Time per input of one operating point: median and inter-quartile range over rounds."""

    ms: float
    iqr_ms: float


def timed_rows(n: int, k: int = TIMED_INPUTS) -> list[int]:
    """``k`` row indices of a split of ``n`` rows, evenly spaced from the first to the last."""
    return sorted(set(np.linspace(0, n - 1, min(k, n)).astype(int).tolist())) if n else []


def time_points(points: Mapping[str, Point], batch: bool = False, rounds: int = ROUNDS,
                clock: str = CLOCK) -> dict[str, Latency]:
    """Time every point in the same interleaved rounds, on one thread, without autograd.

    Args:
        points: name → :class:`Point`; include the dense reference among them.
        batch: time one padded batch of up to :data:`BATCH` inputs instead of the inputs one at
            a time.
        rounds: interleaved rounds (one sample per point each).
        clock: ``cpu`` (the timing thread's CPU time) or ``wall``.

    Returns:
        name → :class:`Latency`, ms per input.
    """
    calls = {name: point.forward(batch) for name, point in points.items()}
    with torch.inference_mode():
        stats = time_interleaved({name: fn for name, (fn, _) in calls.items()}, repeats=rounds, warmup=1,
                                 threads=1, clock=clock)
    return {name: Latency(stats[name].median_ms / n, stats[name].iqr_ms / n) for name, (_, n) in calls.items()}


def time_text(ckpt: Checkpoint, text: str, control: Control | None = None,
              reference: Checkpoint | None = None) -> tuple[Latency, Latency | None]:
    """One text through ``ckpt`` under ``control`` (None: its own operating point) and through
    the dense ``reference`` in the same interleaved rounds (:func:`time_points`: one thread,
    batch 1), each model reading the text through its own tokenizer: (its latency, the
    reference's; None without a reference; the model's own when it is its own reference)."""
    from ..io.tokenizer import reading_prefix

    def point(c: Checkpoint, with_control: Control | None) -> Point:
        max_len = c.config.max_len
        ids = encode(c.tokenizer, [reading_prefix(c.tokenizer, text, max_len)], max_len)[0]  # one id list
        return Point(c.model, None, ids, with_control)

    points = {"model": point(ckpt, control)}
    if reference is not None and reference is not ckpt:
        points["reference"] = point(reference, None)
    timed = time_points(points)
    return timed["model"], (timed["model"] if reference is ckpt else timed.get("reference"))

def time_dataset(dataset: str, rows: pd.DataFrame, checkpoints: Mapping[str, Path], data_dir: str | Path | None = None,
                 untimed: Collection[str] = ()) -> pd.DataFrame:
    """``rows`` (one dataset's rows of a results table: dataset, model, budget) with the columns
    of :data:`LATENCY_COLUMNS`.

    Every operating point of the rows (a model at a budget) is timed with its dense reference
    (:func:`~budgetformer_core.shipped.dense_reference`) in the same interleaved rounds by
    :func:`time_points`, the points of each dense reference in rounds of their own, on the same
    test texts: at batch 1 over :data:`TIMED_INPUTS` texts, at batch 32 at the budgets of
    :data:`BATCH_BUDGETS` and the own points.

    Args:
        checkpoints: model name (as in ``rows``) → checkpoint folder. A row whose checkpoint is
            not there gets no latency (NaN) and a line on stderr.
        data_dir: a local copy of the dataset (for a hub dataset such as ag_news).
        untimed: models without heads to time (e.g. a text baseline): NaN, no message.
    """
    from ..io.data import load_dataset
    from ..io.loader import load_checkpoint

    rows = rows.reset_index(drop=True).copy()
    rows["dense_model"] = [dense_reference(dataset, m) for m in rows["model"]]
    names = sorted(set(rows["model"]) - set(untimed) | set(rows["dense_model"]))
    missing = {n for n in names if n not in checkpoints or not (Path(checkpoints[n]) / "config.json").is_file()}
    for n in sorted(missing):
        print(f"no latency for {dataset}-{n}: its checkpoint is not on this machine", file=sys.stderr)
    missing |= set(untimed)
    ckpts = {n: load_checkpoint(checkpoints[n]) for n in names if n not in missing}
    any_ckpt = next(iter(ckpts.values()), None)
    if any_ckpt is None:
        return rows.assign(**{c: np.nan for c in LATENCY_COLUMNS if c != "dense_model"})
    split = load_dataset(dataset, data_dir, seed=any_ckpt.meta.get("split_seed", 0)).split("test")
    texts_b1 = [split.texts[i] for i in timed_rows(len(split.texts))]
    texts_b32 = split.texts[:BATCH]

    def point(model: str, budget: str, texts: list[str]) -> Point:
        ckpt = ckpts[model]
        return Point(ckpt.model, None if budget == "own" else float(budget),
                     encode(ckpt.tokenizer, texts, ckpt.config.max_len)[0])

    def key(model: str, budget: str) -> str:
        return f"{model}@{budget}"

    timed = rows[~rows["model"].isin(missing) & ~rows["dense_model"].isin(missing)]
    one: dict[str, Latency] = {}
    many: dict[str, Latency] = {}
    for ref, group in timed.groupby("dense_model", sort=True):
        # a dense model and the rows read against it in rounds of their own: timed among a
        # larger model's calls, which leave the caches cold, a small model's speed-ups shrink
        # (BBC's 128-wide budgetformer at its own budget: 1.37x dense among the MiniLM points,
        # 2.03x among its own)
        b1 = {key(m, b): point(m, b, texts_b1) for m, b in zip(group["model"], group["budget"], strict=True)}
        b1[key(ref, "own")] = point(ref, "own", texts_b1)
        batched = group[(group["budget"] == "own")
                        | pd.to_numeric(group["budget"], errors="coerce").isin(BATCH_BUDGETS)]
        b32 = {key(m, b): point(m, b, texts_b32) for m, b in zip(batched["model"], batched["budget"], strict=True)}
        b32[key(ref, "own")] = point(ref, "own", texts_b32)
        print(f"timing {dataset} against {ref}: {len(b1)} points at batch 1, {len(b32)} at batch {BATCH}", flush=True)
        one |= time_points(b1)
        many |= time_points(b32, batch=True)

    def column(latencies, what: str, ref: bool = False) -> list[float]:
        out = []
        for m, b, r in zip(rows["model"], rows["budget"], rows["dense_model"], strict=True):
            lat = latencies.get(key(r, "own") if ref else key(m, b))
            out.append(np.nan if lat is None or key(m, b) not in latencies else getattr(lat, what))
        return out

    rows["latency_ms"] = column(one, "ms")
    rows["latency_iqr_ms"] = column(one, "iqr_ms")
    rows["dense_latency_ms"] = column(one, "ms", ref=True)
    rows["latency_b32_ms"] = column(many, "ms")
    rows["dense_latency_b32_ms"] = column(many, "ms", ref=True)
    return with_speedups(rows)


def with_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Latencies rounded as sweeps.csv stores them, and ``speedup_b1`` / ``speedup_b32`` the dense
    reference's latency over the row's, computed from those stored values (so the identity
    holds in the file)."""
    rows = rows.copy()
    for column in ("latency_ms", "latency_iqr_ms", "dense_latency_ms", "latency_b32_ms", "dense_latency_b32_ms"):
        rows[column] = rows[column].astype(float).round(6)
    rows["speedup_b1"] = rows["dense_latency_ms"] / rows["latency_ms"]
    rows["speedup_b32"] = rows["dense_latency_b32_ms"] / rows["latency_b32_ms"]
    return rows


def live_check(frame: pd.DataFrame, datasets: list[str], models=CHECK_MODELS, budgets=CHECK_BUDGETS,
               data_dir: str | Path | None = None) -> pd.DataFrame:
    """Time the shipped ``models`` of ``datasets`` again now, exactly as the rebuild's timing
    phase did (:func:`time_dataset`: the same test texts, the same rounds, against the same dense
    reference), and set the result beside the shipped rows of ``frame`` (sweeps.csv).

    ``data_dir``: local copies of the hub datasets among ``datasets`` (a dataset's folder, or
    the folder holding one folder per dataset).

    Returns one row per dataset, model and budget: the shipped and live latency (ms per input,
    batch 1) and speed-up over the dense reference at batch 1 and batch 32, and ``ratio`` =
    live / shipped speed-up at batch 1. Absolute latencies follow the machine; the speed-ups,
    both taken against a dense model timed in the same rounds, should not.
    """
    chosen = frame[frame["dataset"].isin(datasets) & frame["model"].isin(models) & frame["budget"].isin(budgets)]
    if chosen.empty:
        raise ValueError(f"sweeps.csv has no rows of {', '.join(models)} on {', '.join(datasets)}")
    keys = ["dataset", "model", "budget"]
    shipped = shipped_models()
    parts = []
    for ds, rows in chosen.groupby("dataset", sort=False):
        torch.set_num_threads(1)
        mine = {name.removeprefix(f"{ds}-"): path for name, path in shipped.items() if name.startswith(f"{ds}-")}
        live = time_dataset(ds, rows[keys], mine, data_dir)
        parts.append(rows[keys + ["latency_ms", "speedup_b1", "speedup_b32"]].merge(
            live[keys + ["latency_ms", "speedup_b1", "speedup_b32"]], on=keys, suffixes=("", "_live")))
    out = pd.concat(parts, ignore_index=True)
    out["ratio"] = out["speedup_b1_live"] / out["speedup_b1"]
    return out


def agrees(check: pd.DataFrame, tolerance: float = CHECK_TOLERANCE) -> pd.Series:
    """Per row of :func:`live_check`: is the live speed-up within ``tolerance`` of the shipped one?"""
    return (check["ratio"] - 1).abs() <= tolerance
