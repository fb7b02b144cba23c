"""Latency of checkpoints on real texts, each against a dense checkpoint timed in the same rounds.

Every latency the project ships or shows on the Budget sweep page is measured here, one way:
the texts of a split, each model tokenizing them itself, timed with
:func:`budgetformer_core.timing.time_interleaved` — every operating point asked for (a model at
a budget) and its dense reference in the same interleaved rounds, one intra-op thread, each
model warmed up first. A latency is the median over rounds of a block of calls divided by the
inputs in the block: **ms per input**, at batch 1 (the texts one at a time) or batch 32 (one
padded batch). A speed-up is the dense reference's latency divided by the point's, both from
the same rounds, so ``speedup = dense_latency_ms / latency_ms`` holds exactly.

The clock is the timing thread's CPU time by default (``clock="cpu"``): with one intra-op thread
all of torch's work runs there, so on a quiet machine it equals the wall-clock latency, and on a
busy one the time spent waiting for a core is not counted (see :mod:`budgetformer_core.timing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from .budget import Control
from .model import BudgetFormer
from .timing import time_interleaved
from .tokenizer import pad

TIMED_INPUTS = 8
"""Texts timed one at a time (batch 1) per operating point."""
BATCH = 32
"""Inputs per forward pass of the batched timing."""
BATCH_BUDGETS = (0.25, 0.5, 0.75, 1.0)
"""The budgets timed at batch 32 as well (with every model's own operating point)."""
ROUNDS = 7
"""Interleaved rounds: each gives one sample per operating point."""
CLOCK = "cpu"


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
        control = self.control if self.control is not None else (
            Control(budget=self.budget) if self.budget is not None else None)
        control = None if mode == "dense" else control
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
