"""BudgetFormer's allocator: f_θ says how many heads an input gets, g_φ which
(:class:`BudgetAllocator`)."""

from __future__ import annotations

import dataclasses
import functools
import random

import torch
from torch import Tensor

from ...config import ModelConfig, TrainConfig
from ...methods import METHOD_DESCRIPTIONS
from .. import native
from ..attention import HeadAttention
from ..budget import (
    NO_TRAINING,
    BudgetNet,
    Control,
    HeadScorer,
    SummaryNorm,
    TrainingControl,
    batch_ranking,
    compiled_weights,
    gated_weights,
    heads_for_budget,
    heads_for_budget_value,
    mlp_flops,
    rank_heads,
    run_budget_nets,
    select_top_k,
    summarize,
)
from ..trace import ForwardContext, LayerTrace, full_budget_trace, once, read_later
from .base import Allocator

RECIPE_WEIGHTING = {"paper": "scaled", "adaptive": "gated"}
"""BudgetFormer's head weighting under each training recipe (``TrainConfig.recipe``)."""


class BudgetAllocator(Allocator):
    """BudgetFormer: s = f_θ(h), p = softmax(g_φ(h) / τ), the k = max(1, ⌊s·H⌋) heads of largest p.

    ``budget_net`` is None for the "no f_θ" model (s = ``fixed_budget``), ``scorer`` None for the
    "no g_φ" model (p = 1/H: the first k heads, or random ones).
    """

    description = METHOD_DESCRIPTIONS["budgetformer"]

    def __init__(self, cfg: ModelConfig, budget_net: BudgetNet | None, scorer: HeadScorer | None):
        super().__init__(cfg)
        self.budget_net, self.scorer = budget_net, scorer
        self.norm = SummaryNorm(cfg.d_model) if cfg.summary_norm else None

    def summary(self, xn: Tensor, ctx: ForwardContext) -> Tensor:
        """(B, D) what f_θ and g_φ read: the layer input's summary, standardised with ``summary_norm``."""
        h = summarize(xn, ctx.mask, ctx.pooling)
        return h if self.norm is None else self.norm(h)

    @classmethod
    def network_flops(cls, cfg: ModelConfig, control: Control) -> int:
        """f_θ unless the budget is given or the model has none; g_φ when it chooses the heads."""
        runs_f = cfg.use_budget_net and control.budget is None
        runs_g = cfg.head_choice == "learned" and (control.head_choice or "learned") == "learned"
        return (mlp_flops(cfg.d_model, cfg.budget_hidden, 1) * runs_f
                + mlp_flops(cfg.d_model, cfg.budget_hidden, cfg.n_heads) * runs_g
                + 2 * cfg.d_model * (cfg.summary_norm and (runs_f or runs_g)))

    @classmethod
    def budget_is_set(cls, cfg: ModelConfig, control: Control | None) -> bool:
        return (control is not None and control.budget is not None) or not cfg.use_budget_net

    @classmethod
    def trained_config(cls, cfg: ModelConfig, train: TrainConfig) -> ModelConfig:
        """The recipe decides how the head weights work (:data:`RECIPE_WEIGHTING`)."""
        return dataclasses.replace(cfg, head_weighting=RECIPE_WEIGHTING[train.recipe])

    @classmethod
    def gated_training(cls, cfg: ModelConfig) -> bool:
        return cfg.head_weighting == "gated"

    @classmethod
    def batch_control(cls, heads: Control, t: float, n: int, cfg: ModelConfig, train: TrainConfig,
                      rng: random.Random) -> Control:
        """With gated weights: the soft gates themselves as weights before ``structural_from``, and
        before ``random_k`` a random k per input, uniform on 1 … ⌊s_max·H⌋ (drawn from ``rng``)."""
        if not cls.gated_training(cfg):
            return heads
        control = TrainingControl(**{f.name: getattr(heads, f.name) for f in dataclasses.fields(Control)},
                                  soft_gates=t < train.structural_from, margin=train.k_margin,
                                  standardize_scores=train.standardize_scores)
        if t < train.random_k:  # g_φ learns to rank the heads before f_θ learns how many to run
            top = heads_for_budget_value(train.s_max, cfg.n_heads)
            control = dataclasses.replace(control, k=[rng.randint(1, top) for _ in range(n)])
        return control

    def networks(self, xn: Tensor, ctx: ForwardContext) -> object:
        return run_budget_nets(self.budget_net, self.scorer, self.summary(xn, ctx))

    runs_attention = True

    def compiled(self, xn: Tensor, ctx: ForwardContext, constant: float | None, choice: str,
                 attention: HeadAttention | None = None, k: int = 0,
                 ) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None, Tensor | None] | None:
        """s (B,) (None when ``constant``), z (B, H), the heads ranked (B, H), k (B,) (None when
        ``constant``) and the attention output (B, T, D) or None, in one compiled call
        (:func:`native.allocate` of the weights
        :func:`~budgetformer_core.model.budget.compiled_weights` packs), where it applies: at
        inference, with g_φ ranking each input's heads by its own scores. With ``attention``, the
        layer's, the same call also runs each input's first k heads (k = 0: f_θ's k), weighted as
        the model weights them (:meth:`HeadAttention.allocate_attend`), where that call applies."""
        if (self.training or choice != "learned" or self.scorer is None or ctx.control.head_sets != "input"
                or (constant is None and self.budget_net is None)):
            return None
        norm = (native.NORM_NONE, None, None, 0.0) if self.norm is None else (
            native.NORM_RUNNING, self.norm.running_mean, self.norm.running_var, self.norm.eps)
        budget_net = None if constant is not None else self.budget_net  # ranked by p, as decide() ranks them
        packed = compiled_weights(budget_net, self.scorer, xn, ctx.pooling, norm, self.cfg.tau)
        if packed is None:
            return None
        scaled = self.cfg.head_weighting == "scaled"
        if attention is not None and (done := attention.allocate_attend(
                xn, xn, ctx.mask, packed, k, scaled, 0.0 if constant is None else constant)) is not None:
            return done
        return *native.allocate(xn, ctx.mask, *packed), None

    def decide(self, h: Tensor, control: Control, constant: float | None, choice: str
               ) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
        """s (B,), z (B, H) or None, p (B, H) and the scores the heads are ranked by (B, H), for
        the layer input's summary h (B, D) (:meth:`summary`); ``constant``: s for every input
        (f_θ not run)."""
        cfg = self.cfg
        B, H = h.shape[0], cfg.n_heads
        s, z = run_budget_nets(None if constant is not None else self.budget_net,
                               self.scorer if choice == "learned" else None, h)
        s = h.new_full((B,), constant) if s is None else s
        if z is not None:
            p = torch.softmax(z if cfg.tau == 1.0 else z / cfg.tau, dim=-1)  # (B, H)
            rank = p
        else:
            p = h.new_full((B, H), 1.0 / H)
            rank = p if choice == "uniform" else control.random_scores(B, H).to(h.device)
        if control.head_sets == "batch":
            rank = batch_ranking(rank)  # (B, H) the batch's ranking; w still reads each input's p
        return s, z, p, rank

    def allocate_and_attend(self, xn: Tensor, ctx: ForwardContext, attention: HeadAttention | None
                            ) -> tuple[LayerTrace, Tensor | None]:
        cfg, control = self.cfg, ctx.control
        training = control if isinstance(control, TrainingControl) else NO_TRAINING
        B, H = xn.shape[0], cfg.n_heads
        choice = control.head_choice or cfg.head_choice
        if choice == "learned" and self.scorer is None:
            raise ValueError("this model has no head-scoring network g_φ; choose uniform or random")
        unit = cfg.head_weighting != "scaled" and not (self.training and ctx.mode == "soft")
        # a budget shared by every input (requested, or the no-f_θ model's), and the k it buys
        constant = None
        if control.budget is not None or self.budget_net is None:
            constant = cfg.fixed_budget if control.budget is None else control.budget
        shared_k = min(control.k, H) if isinstance(control.k, int) else None
        if control.k is None and constant is not None:
            shared_k = heads_for_budget_value(constant, H)
        if unit and shared_k == H and choice != "random":
            # every head at weight 1, the dense kernel: s, p and the ranking are run only if read
            # (random heads are drawn now, so that the draws do not depend on what is read)
            h = read_later(lambda: self.summary(xn, ctx), xn)  # (B, D)
            decided = once(lambda: self.decide(h(), control, constant, choice))
            return full_budget_trace(lambda: decided()[0], lambda: decided()[2],
                                     lambda: rank_heads(decided()[3]), H, B, xn), None
        # with the attention too, where k is known before the call: a budget's, or f_θ's (0)
        attention = None if control.k is not None else attention
        compiled = self.compiled(xn, ctx, constant, choice, attention, shared_k or 0)
        attended = None
        if compiled is None:
            s, z, p, rank = self.decide(self.summary(xn, ctx), control, constant, choice)
            order, predicted_k = rank_heads(rank), None
        else:  # s, z, the ranking (by p), k and the attention in one call; p itself when read
            s, z, order, predicted_k, attended = compiled
            rank = z  # only passed on beside ``order``, which is what select_top_k reads
            s = functools.partial(xn.new_full, (B,), constant) if s is None else s  # the budget asked: made if read
            p = once(lambda: torch.softmax(z if cfg.tau == 1.0 else z / cfg.tau, dim=-1))
        if control.k is not None:
            k = control.k_tensor(B, H, xn.device)
        elif constant is not None:
            k = functools.partial(torch.full, (B,), shared_k, device=xn.device)  # made if read
        elif training.margin and self.training:
            k = heads_for_budget(s - training.margin / H, H)
        else:
            k = heads_for_budget(s, H) if predicted_k is None else predicted_k
            shared_k = int(k) if B == 1 else None  # the one number read back: how many heads run
        if unit and shared_k == H:  # every head at weight 1: the layer's dense kernel
            return full_budget_trace(s, p, order, H, B, xn), attended
        # the mask of the heads that run, made when read (k is a tensor whenever shared_k is None)
        selected = once(lambda: select_top_k(rank, k if shared_k is None else shared_k, order))
        if cfg.head_weighting == "scaled":
            weights = once(lambda: (p() if callable(p) else p) * ((s() if callable(s) else s) * H)[:, None])
            weights = weights if attended is not None else weights()  # read by the attention still to run
        elif self.training and ctx.mode == "soft":
            learnt_s = s - training.margin / H if constant is None and control.k is None else None
            if z is not None and training.standardize_scores:  # (B, H), the same order
                z = (z - z.mean(-1, keepdim=True)) / z.std(-1, keepdim=True).clamp_min(1e-6)
            k = k() if callable(k) else k
            weights = gated_weights(selected(), z, learnt_s, order, k, cfg.gate_temperature, xn.dtype,
                                    soft=training.soft_gates)
        else:  # unit
            dtype = xn.dtype
            return LayerTrace(s, p, lambda: selected().to(dtype), k, selected, order, unit_weights=True,
                              shared_k=shared_k), attended
        return LayerTrace(s, p, weights, k, selected, order, shared_k=shared_k), attended
