"""Post-hoc structural pruning of a dense model: the zero-shot baseline of budgeted allocation.

Heads are ranked once, on the validation split, by the gradient-based importance of Michel et
al. (2019, "Are Sixteen Heads Really Better than One?"): each head's output is multiplied by a
mask variable ξ_h = 1, and

    I_h = Σ_x | ∂L(x) / ∂ξ_h |,  normalised to unit L2 norm within each layer.

The absolute value is taken per example, so two inputs that pull a head in opposite directions
both count; ``per_example=False`` gives the cheaper batch variant Σ_batches |Σ_{x∈batch} ∂L(x)/∂ξ_h|
(what Michel et al.'s released code computes), in which such gradients cancel. Per-example
gradients cost one backward pass per batch: every input gets its own copy of ξ, and since inputs
do not interact in an evaluation forward pass, the gradient of the batch's summed loss with
respect to input x's copy is exactly ∂L(x)/∂ξ.

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

from ..io.checkpoint import Checkpoint, check_out_dir, save_checkpoint
from ..io.tokenizer import pad
from ..model.encoder import BudgetFormer
from .build import warm_start


def head_importance(
    model: BudgetFormer,
    ids: list[list[int]],
    labels: list[int],
    batch_size: int = 32,
    per_example: bool = True,
    normalise: bool = True,
) -> Tensor:
    """(L, H) gradient-based head importance of a model run densely on tokenised inputs.

    Args:
        model: an unpruned model (run in ``dense`` mode).
        ids, labels: the inputs' token ids and their labels.
        batch_size: inputs per forward pass; the per-example importance does not depend on it.
        per_example: Σ_x |∂L(x)/∂ξ| (the definition) if True, else |·| of each batch's gradient.
        normalise: scale each layer's row to unit L2 norm.
    """
    cfg = model.cfg
    L, H = cfg.n_layers, cfg.n_heads
    if any(layer.attn.n_heads != H for layer in model.layers):
        raise ValueError("head importance ranks the heads of an unpruned model")
    xi: Tensor | None = None  # (B, L, H) this batch's mask variables, one copy per input

    def scale(i: int):
        def hook(module, args):
            (merged,) = args  # (B, T, H·Dh): every head's output, before the output projection
            B, T, _ = merged.shape
            heads = merged.view(B, T, H, module.in_features // H)  # (B, T, H, Dh)
            return ((heads * xi[:, i, None, :, None]).view(B, T, -1),)  # ξ: (B, 1, H, 1)
        return hook

    hooks = [layer.attn.out.register_forward_pre_hook(scale(i)) for i, layer in enumerate(model.layers)]
    importance = torch.zeros(L, H)
    model.eval()
    try:
        for start in range(0, len(ids), batch_size):
            batch = pad(ids[start : start + batch_size])
            xi = torch.ones(len(batch.ids), L, H, requires_grad=True)
            out = model(batch.ids, batch.mask, mode="dense", types=batch.types)
            target = torch.tensor(labels[start : start + batch_size])
            loss = F.cross_entropy(out.logits, target, reduction="sum")
            (grad,) = torch.autograd.grad(loss, xi)  # (B, L, H): row b is ∂L(x_b)/∂ξ
            importance += grad.abs().sum(0) if per_example else grad.sum(0).abs()
    finally:
        for h in hooks:
            h.remove()
    if not normalise:
        return importance
    return importance / importance.norm(dim=1, keepdim=True).clamp_min(1e-12)


def posthoc_model(dense: BudgetFormer, importance: Tensor, **fields) -> BudgetFormer:
    """A static-gate ``bba`` model (in eval mode) with ``dense``'s weights and its heads ranked
    by ``importance`` (L, H); ``fields`` change other config values (e.g. ``default_budget``)."""
    model = BudgetFormer(dataclasses.replace(dense.cfg, method="bba", gate_input=False, **fields))
    warm_start(model, dense)
    with torch.no_grad():
        for gate, scores in zip((a.gate for a in model.allocators), importance, strict=True):
            gate.scores.copy_(scores)
    return model.eval()


def posthoc_checkpoint(dense: Checkpoint, importance: Tensor, out_dir: str | Path, meta: dict,
                       force: bool = False) -> Path:
    """Write a static-gate ``bba`` checkpoint with the dense weights and heads ranked by importance
    (an existing checkpoint at ``out_dir`` is replaced only with ``force``).

    It keeps what the dense model reads by: on a pretrained encoder its ``backbone`` (the base,
    and the tensors taken from it unchanged); from a Hugging Face classifier its ``classifier``
    entry, by which the checkpoint reads as the classifier does (a long text cut with its
    closing ``[SEP]`` kept, pairs joined by its tokenizer)."""
    check_out_dir(out_dir, force=force)
    model = posthoc_model(dense.model, importance)
    meta = {**meta, **{key: dense.meta[key] for key in ("backbone", "classifier") if key in dense.meta}}
    return save_checkpoint(out_dir, model, dense.tokenizer, dense.label_names, meta, dense.history)
