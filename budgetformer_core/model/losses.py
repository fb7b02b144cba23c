"""The BudgetFormer objective: L = L_task + λ_b·L_budget + λ_e·β(t)·H(p) (+ λ_c·s).

* L_budget = mean( max(0, s_min − s)² + max(0, s − s_max)² ) — a quadratic hinge that is zero
  while s stays in [s_min, s_max];
* H(p) = −Σ_i p_i log p_i, the entropy of the head relevance, averaged over inputs and layers;
* β(t) moves from β_start < 0 (rewarding high entropy: explore all heads) to β_end > 0
  (rewarding low entropy: specialise) as training progresses (t ∈ [0, 1]);
* the ``adaptive`` recipe adds λ_c·s, the mean budget over inputs and layers — the expected
  fraction of heads run — so that heads have a price and an input buys more of them only where
  they lower its task loss (its head weights are gated: the task loss sees how many heads run);
  with λ_d > 0 it also pulls s towards a per-input target from the rank of the input's task loss
  in the batch (:func:`difficulty_targets`), or of a loss given per input (the warm start's,
  ``TrainConfig.difficulty_from``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..config import TrainConfig
from .encoder import ModelOutput

DISTILL_TEMPERATURE = 2.0
"""T of :func:`distillation_kl` where the caller does not choose it."""


def distillation_kl(logits: Tensor, teacher: Tensor, temperature: float = DISTILL_TEMPERATURE) -> Tensor:
    """T²·KL(softmax(teacher/T) ‖ softmax(logits/T)), mean over the batch (the T² keeps its
    gradients' size; a T above 1 also passes on how the teacher ranks the other classes).
    logits, teacher: (B, C)."""
    T = temperature
    return F.kl_div(F.log_softmax(logits / T, -1), F.log_softmax(teacher.to(logits) / T, -1), log_target=True,
                    reduction="batchmean") * T * T


def budget_loss(s: Tensor, s_min: float, s_max: float) -> Tensor:
    """Quadratic hinge keeping s in [s_min, s_max]; zero inside the band."""
    return (F.relu(s_min - s) ** 2 + F.relu(s - s_max) ** 2).mean()


def difficulty_targets(losses: Tensor, s_min: float, s_max: float) -> Tensor:
    """(B,) budgets from per-input task losses (B,): the rank of each loss in the batch (0 for
    the easiest, 1 for the hardest; ties by position) mapped linearly onto [s_min, s_max]."""
    B = losses.shape[0]
    ranks = torch.empty_like(losses).scatter_(0, losses.argsort(stable=True), torch.arange(B, dtype=losses.dtype))
    return s_min + (s_max - s_min) * ranks / max(B - 1, 1)


def head_load(p: Tensor) -> Tensor:
    """H · Σ_h (mean over inputs of p_h)², averaged over layers: 1 when the inputs spread their
    relevance evenly over the heads, H when they all favour the same one. p: (L, B, H)."""
    return (p.shape[-1] * p.mean(1).square().sum(-1)).mean()


def head_entropy(p: Tensor) -> Tensor:
    """Mean entropy (nats) of relevance distributions p (..., H)."""
    return -(p * torch.log(p.clamp_min(1e-12))).sum(-1).mean()


def beta_at(t: float, start: float, end: float, schedule: str = "linear") -> float:
    """β(t) for training progress t ∈ [0, 1]: linear, cosine or step (switch at t = 0.5)."""
    t = min(max(t, 0.0), 1.0)
    if schedule == "linear":
        frac = t
    elif schedule == "cosine":
        frac = 0.5 * (1 - math.cos(math.pi * t))
    elif schedule == "step":
        frac = 0.0 if t < 0.5 else 1.0
    else:
        raise ValueError(f"unknown beta schedule {schedule!r}")
    return start + (end - start) * frac


@dataclass
class LossTerms:
    """The total loss and its parts (floats except ``total``)."""

    total: Tensor
    task: float
    budget: float
    entropy: float
    beta: float
    cost: float = 0.0
    """λ_c·s before weighting: the mean s (adaptive recipe; 0 otherwise)."""
    entropy_term: float = 0.0
    """λ_e·β(t)·H(p), as added to the total."""
    difficulty: float = 0.0
    """λ_d's term before weighting: mean (s − target)² (adaptive recipe with λ_d > 0; else 0)."""
    balance: float = 0.0
    """λ_u's term before weighting: :func:`head_load` (adaptive recipe with λ_u > 0; else 0)."""


def total_loss(out: ModelOutput, labels: Tensor, cfg: TrainConfig, progress: float, task_only: bool,
               difficulty: Tensor | None = None, task: Tensor | None = None) -> LossTerms:
    """L_task, plus λ_b·L_budget + λ_e·β(t)·H(p) unless ``task_only`` (dense and bba models).
    ``difficulty`` (B,): the per-input losses that λ_d ranks (None: the model's own task loss).
    ``task``: L_task itself when the caller has it (``fit-budget``'s distillation to a frozen
    model, :mod:`budgetformer_core.train.fit`); None: cross-entropy with ``labels``."""
    if task is None:
        task = F.cross_entropy(out.logits, labels, label_smoothing=cfg.label_smoothing)
    beta = beta_at(progress, cfg.beta_start, cfg.beta_end, cfg.beta_schedule)
    if task_only:
        return LossTerms(task, task.item(), 0.0, 0.0, beta)
    s = torch.stack([t.budget for t in out.layers])  # (L, B)
    p = torch.stack([t.relevance for t in out.layers])  # (L, B, H)
    lb, ent = budget_loss(s, cfg.s_min, cfg.s_max), head_entropy(p)
    entropy_term = cfg.lambda_entropy * beta * ent
    total = task + cfg.lambda_budget * lb + entropy_term
    cost = s.mean() if cfg.recipe == "adaptive" else s.new_zeros(())
    total = total + cfg.lambda_cost * cost
    gap = balance = s.new_zeros(())
    if cfg.recipe == "adaptive" and cfg.lambda_difficulty:
        if difficulty is None:
            difficulty = F.cross_entropy(out.logits.detach(), labels, reduction="none")  # (B,)
        target = difficulty_targets(difficulty, cfg.s_min, cfg.s_max).to(s)  # (B,)
        gap = ((s - target[None, :]) ** 2).mean()
        total = total + cfg.lambda_difficulty * gap
    if cfg.recipe == "adaptive" and cfg.lambda_balance:
        balance = head_load(p)
        total = total + cfg.lambda_balance * balance
    return LossTerms(total, task.item(), lb.item(), ent.item(), beta, cost.item(), entropy_term.item(),
                     gap.item(), balance.item())
