"""Low-rank fine-tuning (LoRA): a pretrained encoder's linear weights learn a rank-r change.

With ``TrainConfig.lora_rank = r`` each encoder layer's four matrices — the fused Q/K/V
projection, the attention output and the two feed-forward layers — are trained as
``W = W0 + B·A`` (A: (r, in), B: (out, r)), W0 frozen, through a ``torch.nn.utils.parametrize``
parametrization: every reader of ``.weight`` (the structural top-k path gathers head rows from
it) sees the changed weight, nothing else in the model knows. After training :func:`merge`
writes ``W0 + B·A`` into the plain weight and keeps the factors on the model
(``model.low_rank``); a checkpoint stores only the factors, and loading merges them into its
base's weights again (:func:`merged`, the one place the sum is formed), so what is stored is
r·(in + out) numbers per matrix instead of in·out.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

TARGETS = ("attn.qkv", "attn.out", "ff.0", "ff.2")
"""The matrices of each encoder layer that learn a low-rank change (module paths in a layer)."""
LOW_RANK_A, LOW_RANK_B = ".lora_a", ".lora_b"
"""Suffixes of a stored weight's two factors: A (r, in) and B (out, r)."""

Factors = dict[str, tuple[Tensor, Tensor]]
"""Weight name (``layers.0.attn.qkv.weight``) -> its factors (A, B)."""


def merged(base: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``base + b · a`` in float32: the weight a low-rank change makes of ``base``."""
    return base.float() + b.float() @ a.float()  # (out, r) @ (r, in) -> (out, in)


class LowRankChange(nn.Module):
    """The parametrization ``W0 ↦ W0 + B·A``: A starts as ``nn.Linear`` starts its weight, B at
    zero, so training starts from the pretrained weight exactly."""

    def __init__(self, out_features: int, in_features: int, rank: int):
        super().__init__()
        self.a = nn.Parameter(torch.empty(rank, in_features))
        self.b = nn.Parameter(torch.zeros(out_features, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))

    def forward(self, weight: Tensor) -> Tensor:
        return weight + self.b @ self.a  # (out, in)


def target_names(model: nn.Module) -> list[str]:
    """The weights that learn a low-rank change, as ``model.state_dict()`` names them."""
    return [f"layers.{i}.{path}.weight" for i in range(len(model.layers)) for path in TARGETS]


def attach(model: nn.Module, rank: int) -> None:
    """Train each target weight of ``model`` as ``W0 + B·A`` of rank ``rank``, W0 frozen."""
    if rank < 1:
        raise ValueError(f"lora_rank must be >= 1 to attach low-rank changes, got {rank}")
    for name in target_names(model):
        linear = model.get_submodule(name.removesuffix(".weight"))
        linear.weight.requires_grad_(False)
        out_features, in_features = linear.weight.shape
        parametrize.register_parametrization(linear, "weight", LowRankChange(out_features, in_features, rank))


def merge(model: nn.Module) -> Factors:
    """Write ``W0 + B·A`` into each parametrized weight of ``model`` (plain weights again) and
    return the factors, also kept as ``model.low_rank``. A model that already carried factors
    (warm-started from a low-rank fine-tune) gets both changes side by side: [A₁; A₂] and [B₁ B₂]."""
    earlier: Factors = model.low_rank
    factors: Factors = {}
    for name in target_names(model):
        linear = model.get_submodule(name.removesuffix(".weight"))
        if not parametrize.is_parametrized(linear, "weight"):
            continue
        change = linear.parametrizations.weight[0]
        a, b = change.a.detach().clone(), change.b.detach().clone()
        base = linear.parametrizations.weight.original.detach().clone()
        parametrize.remove_parametrizations(linear, "weight", leave_parametrized=False)
        if name in earlier:
            a, b = torch.cat([earlier[name][0], a]), torch.cat([earlier[name][1], b], dim=1)
            base = merged(base, -earlier[name][0], earlier[name][1])  # back to the pretrained weight
        factors[name] = (a, b)
        with torch.no_grad():
            linear.weight.copy_(merged(base, a, b))
        linear.weight.requires_grad_(True)
    model.low_rank = factors
    return factors
