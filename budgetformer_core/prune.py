"""Post-hoc structural pruning of a dense model: the zero-shot baseline of budgeted allocation.

Heads are ranked once, on the validation split, by the gradient-based importance of Michel et
al. (2019, "Are Sixteen Heads Really Better than One?"): each head's output is multiplied by a
mask variable ξ_h = 1, and

    I_h = Σ_x | ∂L(x) / ∂ξ_h |,  normalised to unit L2 norm within each layer.

The ranking becomes the static gate scores of a ``bba`` model (``gate_input=False``) that keeps
the dense weights unchanged, so any budget b runs the ⌊b·H⌋ most important heads of every layer
structurally, for every input alike. One recovery epoch at a fixed budget (``train`` with
``init=`` this checkpoint, ``train_budget=b`` and ``freeze_gates``) gives the "dense specialist".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .checkpoint import Checkpoint, save_checkpoint
from .model import BudgetFormer
from .tokenizer import pad
from .train import warm_start


def head_importance(model: BudgetFormer, ids: list[list[int]], labels: list[int], batch_size: int = 32) -> Tensor:
    """(L, H) gradient-based head importance of a model run densely on tokenised inputs."""
    cfg = model.cfg
    xi = torch.ones(cfg.n_layers, cfg.n_heads, requires_grad=True)

    def scale(i: int):
        def hook(_module, args):
            (merged,) = args  # (B, T, H·Dh): every head's output, before the output projection
            B, T, _ = merged.shape
            heads = merged.view(B, T, cfg.n_heads, cfg.d_head) * xi[i][:, None]  # (B, T, H, Dh)
            return (heads.view(B, T, -1),)
        return hook

    hooks = [layer.attn.out.register_forward_pre_hook(scale(i)) for i, layer in enumerate(model.layers)]
    importance = torch.zeros(cfg.n_layers, cfg.n_heads)
    model.eval()
    try:
        for start in range(0, len(ids), batch_size):
            batch = pad(ids[start : start + batch_size])
            out = model(batch.ids, batch.mask, mode="dense")
            loss = F.cross_entropy(out.logits, torch.tensor(labels[start : start + batch_size]), reduction="sum")
            (grad,) = torch.autograd.grad(loss, xi)
            importance += grad.abs()
    finally:
        for h in hooks:
            h.remove()
    return importance / importance.norm(dim=1, keepdim=True).clamp_min(1e-12)


def posthoc_checkpoint(dense: Checkpoint, importance: Tensor, out_dir: str | Path, meta: dict) -> Path:
    """Write a static-gate ``bba`` checkpoint with the dense weights and heads ranked by importance."""
    cfg = dataclasses.replace(dense.config, variant="bba", gate_input=False)
    model = BudgetFormer(cfg)
    warm_start(model, dense.model)
    with torch.no_grad():
        for gate, scores in zip(model.gates, importance, strict=True):
            gate.scores.copy_(scores)
    return save_checkpoint(out_dir, model.eval(), dense.tokenizer, dense.label_names, meta, dense.history)
