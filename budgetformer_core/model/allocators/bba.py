"""Budgeted attention allocation's allocator: a requested budget b buys the heads with the
highest gate scores (:class:`GateAllocator`)."""

from __future__ import annotations

import dataclasses
import functools
import random

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...config import ModelConfig, TrainConfig
from ...methods import METHOD_DESCRIPTIONS
from .. import native
from ..attention import HeadAttention
from ..budget import (
    Control,
    HeadScorer,
    batch_ranking,
    compiled_weights,
    heads_for_budget_value,
    mlp_flops,
    rank_heads,
    select_top_k,
    soft_gates,
    summarize,
)
from ..trace import ForwardContext, LayerTrace, full_budget_trace, once, read_later
from .base import Allocator


class GateAllocator(Allocator):
    """Budgeted attention allocation: the requested budget b buys k = max(1, ⌊b·H⌋) heads, the k
    with the highest gate scores z.

    With ``gate_source="embedding"`` z is computed from the pooled embedding output, which does
    not depend on b, so the head sets are nested in every layer: for b₁ < b₂ the heads at b₁ are
    among those at b₂. (``"layer"`` gates read the layer's own input,
    which depends on the heads earlier layers ran at this b: nested in the first layer only.)

    Head weights are soft gates in the ``soft`` mode (training); otherwise exactly 1 on the
    selected heads — with the soft gates' gradient passed straight through in training
    (hard-gate adaptation).
    """

    description = METHOD_DESCRIPTIONS["bba"]

    def __init__(self, cfg: ModelConfig, gate: nn.Module):
        super().__init__(cfg)
        self.gate = gate

    @classmethod
    def network_flops(cls, cfg: ModelConfig, control: Control) -> int:
        """The gate network when the gates read the input; nothing for static gates."""
        return mlp_flops(cfg.d_model, cfg.budget_hidden, cfg.n_heads) if cfg.gate_input else 0

    @classmethod
    def notes(cls, cfg: ModelConfig, control: Control | None) -> list[str]:
        return super().notes(cfg, control) or [
            f"bba model: s is the requested budget (default {cfg.default_budget:g}), "
            "the same for every input; the head sets still depend on the input"]

    @classmethod
    def trained_config(cls, cfg: ModelConfig, train: TrainConfig) -> ModelConfig:
        """A fixed-budget model (``train_budget``) runs at its budget."""
        return dataclasses.replace(cfg, default_budget=train.train_budget) if train.train_budget else cfg

    @classmethod
    def batch_control(cls, heads: Control, t: float, n: int, cfg: ModelConfig, train: TrainConfig,
                      rng: random.Random) -> Control:
        """One requested budget for the batch: its ``train_budget``, or uniform on [budget_min, 1]."""
        return Control(budget=train.train_budget or rng.uniform(train.budget_min, 1.0))

    @classmethod
    def after_training(cls, model: nn.Module, train: TrainConfig) -> None:
        """A fixed budget with static gates is a fixed head set: sliced once, for good."""
        cfg = model.cfg
        if cfg.gate_input or not train.train_budget:
            return
        k = heads_for_budget_value(cfg.default_budget, cfg.n_heads)
        model.prune_heads([rank_heads(alloc.gate.scores.detach()[None])[0, :k].tolist() for alloc in model.allocators])

    def networks(self, xn: Tensor, ctx: ForwardContext) -> object:
        return self.scores(xn, ctx)

    def scores(self, xn: Tensor, ctx: ForwardContext) -> Tensor:
        """(B, H) gate scores z of the layer input xn (B, T, D)."""
        return self.gate(self.gate_input(xn, ctx))

    def gate_input(self, xn: Tensor, ctx: ForwardContext) -> Tensor:
        """(B, D) what the gates read: the pooled embedding output, layer-normed (the same at
        every budget), or the layer input's summary."""
        if self.cfg.gate_source == "embedding":
            summary = ctx.embedded()  # (B, D)
            return F.layer_norm(summary, summary.shape[-1:])
        return summarize(xn, ctx.mask, ctx.pooling)

    runs_attention = True

    def compiled(self, ctx: ForwardContext, attention: HeadAttention | None = None, x: Tensor | None = None,
                 k: int = 0) -> tuple[None, Tensor, Tensor, None, Tensor | None] | None:
        """(None, z (B, H), the heads ranked (B, H), None, None) in one compiled call
        (:func:`native.allocate` of the weights
        :func:`~budgetformer_core.model.budget.compiled_weights` packs) where it applies: gates
        that read the pooled embedding output, each input ranking its heads by its own scores.
        With ``attention``, the layer's, and its input x, the same call also runs each input's
        first k heads at weight 1 (:meth:`HeadAttention.allocate_attend`) where that call
        applies: their output comes last."""
        if (not isinstance(self.gate, HeadScorer) or self.cfg.gate_source != "embedding"
                or ctx.control.head_sets != "input"):
            return None
        xa = ctx.embeddings  # F.layer_norm's eps; ranked by z
        packed = compiled_weights(None, self.gate, xa, ctx.pooling, (native.NORM_LAYER, None, None, 1e-5), None)
        if packed is None:
            return None
        if attention is not None and (done := attention.allocate_attend(xa, x, ctx.mask, packed, k)) is not None:
            return done
        return *native.allocate(xa, ctx.mask, *packed), None

    def allocate_and_attend(self, xn: Tensor, ctx: ForwardContext, attention: HeadAttention | None
                            ) -> tuple[LayerTrace, Tensor | None]:
        cfg, control = self.cfg, ctx.control
        B, H = xn.shape[0], cfg.n_heads
        b = cfg.default_budget if control.budget is None else control.budget
        unit = ctx.mode != "soft" and not self.training
        shared_k = heads_for_budget_value(b, H) if control.k is None else None
        if isinstance(control.k, int):
            shared_k = min(control.k, H)

        dtype, device = xn.dtype, xn.device
        gate_input = read_later(lambda: self.gate_input(xn, ctx), xn)  # (B, D)

        def budget() -> Tensor:
            return torch.full((B,), b, dtype=dtype, device=device)

        def gate_scores() -> Tensor:
            z = self.gate(gate_input())  # (B, H)
            return batch_ranking(z) if control.head_sets == "batch" else z  # batch: its mean scores

        if unit and shared_k == H and control.k is None:
            # every head at weight 1, the dense kernel: the gates are run only if read
            z = once(gate_scores)
            return full_budget_trace(budget, lambda: torch.softmax(z(), -1), lambda: rank_heads(z()), H, B, xn,
                                     z, cfg.gate_temperature), None
        attention = attention if control.k is None else None  # with the attention too, at the budget's k
        compiled = self.compiled(ctx, attention, xn, shared_k or 0) if unit else None
        if compiled is None:
            z, order, attended = gate_scores(), None, None
        else:
            _, z, order, _, attended = compiled
        order = rank_heads(z) if order is None else order
        if control.k is not None:
            k = control.k_tensor(B, H, xn.device)
        else:
            k = functools.partial(torch.full, (B,), shared_k, device=xn.device)  # made if read
        selected = once(lambda: select_top_k(z, k if shared_k is None else shared_k, order))
        if unit:
            weights = lambda: selected().to(dtype)  # noqa: E731
        else:
            k = k() if callable(k) else k
            gates = soft_gates(z, order, k, cfg.gate_temperature)
            weights = gates if ctx.mode == "soft" else selected() + gates - gates.detach()
        return LayerTrace(budget, lambda: torch.softmax(z, -1), weights, k, selected, order, z,
                          cfg.gate_temperature, unit_weights=unit, shared_k=shared_k), attended
