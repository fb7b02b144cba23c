"""Allocation: how each attention layer decides which heads run for each input.

Every layer owns an :class:`Allocator` that turns the layer's normalised input into a
:class:`~budgetformer_core.model.trace.LayerTrace` — the budget s, the head relevance p, the head
weights w and the heads that run. The attention layer then executes that trace
(:mod:`budgetformer_core.model.attention`). One allocator class per method, chosen once when the
model is built (:func:`method_class`):

* :class:`AllHeads` — dense: every head, weight 1;
* :class:`BudgetAllocator` — BudgetFormer. From a global summary h of the layer input (its mean
  over real tokens), f_θ(h) → s ∈ (0, 1) is the fraction of the H heads this input gets and
  g_φ(h) → z ∈ R^H, p = softmax(z / τ) how relevant each head is; the k = max(1, ⌊s·H⌋) heads
  with the largest p run. Two weightings (``ModelConfig.head_weighting``): ``scaled``, the
  paper's w = s·H·p; ``gated``, w = 1 on the heads that run, trained through soft gates
  (:func:`~budgetformer_core.model.budget.gated_weights`) so that s decides which heads contribute
  rather than how loud they are;
* :class:`GateAllocator` — budgeted attention allocation (bba): the caller requests a budget b,
  which buys k = max(1, ⌊b·H⌋) heads, the k with the highest gate scores z. z is computed from a
  summary that does not depend on b (the pooled embedding output), so for b₁ < b₂ the heads at
  b₁ are a subset of those at b₂ in every layer; static gates are one learned score per head.

A layer whose heads were pruned once (:meth:`HeadAttention.prune_heads`) gets a
:class:`FixedHeads`, whatever the method: the heads kept, weight 1, nothing decided per input.

What differs between the methods outside the layer — the default execution mode, the FLOPs of
the networks, what an explanation attributes, how training sets up a batch — is said once: the
facts by the method's torch-free description (:mod:`budgetformer_core.methods`), which its class
carries as class attributes, the rest by the class's class methods. The rest of the engine reads
them from the class, the app from the description.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig, TrainConfig
from ..methods import METHOD_DESCRIPTIONS, MethodDescription
from . import native
from .budget import (
    NO_TRAINING,
    BudgetNet,
    Control,
    HeadScorer,
    StaticGate,
    SummaryNorm,
    TrainingControl,
    batch_ranking,
    gated_weights,
    heads_for_budget,
    heads_for_budget_value,
    mlp_flops,
    rank_heads,
    run_budget_nets,
    run_compiled,
    select_top_k,
    soft_gates,
    summarize,
)
from .trace import ForwardContext, LayerTrace, full_budget_trace, once, read_later

METHOD_FACTS = ("budgeted", "predicts_budget", "symbol", "default_mode", "training_mode", "attributed",
                "attributed_name")
"""The facts of a method's description that its allocator class carries as class attributes."""


class Allocator(nn.Module):
    """Decides, per input, which of a layer's heads run; ``forward`` returns the layer's trace.

    The class of a method (:func:`method_class`) also says what the rest of the engine does
    differently for a model of that method: the facts of its description as class attributes,
    the rest in its class methods.
    """

    description: ClassVar[MethodDescription | None] = None
    """The method this class allocates for (:data:`~budgetformer_core.methods.METHOD_DESCRIPTIONS`);
    None for :class:`FixedHeads`, which serves a pruned layer of any method."""
    budgeted: ClassVar[bool]
    predicts_budget: ClassVar[bool]
    symbol: ClassVar[str]
    default_mode: ClassVar[str]
    training_mode: ClassVar[str]
    attributed: ClassVar[str]
    attributed_name: ClassVar[str]

    def __init_subclass__(cls, **kwargs):
        """The class of a method carries its description's facts (:data:`METHOD_FACTS`)."""
        super().__init_subclass__(**kwargs)
        if "description" in vars(cls):
            for fact in METHOD_FACTS:
                setattr(cls, fact, getattr(cls.description, fact))

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg

    @classmethod
    def network_flops(cls, cfg: ModelConfig, control: Control) -> int:
        """FLOPs of the networks one layer runs for one input under ``control``."""
        return 0

    @classmethod
    def budget_is_set(cls, cfg: ModelConfig, control: Control | None) -> bool:
        """True when no token of the input can change the attributed quantity (it is set, not
        predicted): an explanation's attributions are then 0."""
        return False

    @classmethod
    def notes(cls, cfg: ModelConfig, control: Control | None) -> list[str]:
        """What to say beside adaptivity figures about how this model's budget is set."""
        if control is not None and control.budget is not None:
            return [f"s is the requested budget {control.budget:g} for every input"]
        return []

    @classmethod
    def trained_config(cls, cfg: ModelConfig, train: TrainConfig) -> ModelConfig:
        """``cfg`` as the training recipe ``train`` sets it before the model is built."""
        return cfg

    @classmethod
    def gated_training(cls, cfg: ModelConfig) -> bool:
        """True when training runs the soft path with gated weights throughout (straight-through
        from ``structural_from`` on) rather than switching to the structural path."""
        return False

    @classmethod
    def batch_control(cls, heads: Control, t: float, n: int, cfg: ModelConfig, train: TrainConfig,
                      rng: random.Random) -> Control:
        """The overrides one training batch of ``n`` inputs runs under at training progress ``t``;
        ``heads`` carries the stream random heads are drawn from."""
        return heads

    @classmethod
    def after_training(cls, model: nn.Module, train: TrainConfig) -> None:
        """What becomes of the trained ``model`` before it is stored (nothing here)."""

    def networks(self, xn: Tensor, ctx: ForwardContext) -> object:
        """Run only this layer's networks on its input xn (B, T, D) (none here): what the budgeting
        costs before heads are selected."""
        return None

    def forward(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        """The trace for normalised layer input xn (B, T, D); every head in ``dense`` mode."""
        if ctx.mode == "dense":
            return ctx.every_head(self.cfg.n_heads)
        return self.allocate(xn, ctx)

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        raise NotImplementedError


class AllHeads(Allocator):
    """Dense: every head, weight 1."""

    description = METHOD_DESCRIPTIONS["dense"]

    @classmethod
    def notes(cls, cfg: ModelConfig, control: Control | None) -> list[str]:
        return ["dense model: every input runs all heads"]

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        return ctx.every_head(self.cfg.n_heads)


class FixedHeads(Allocator):
    """A layer whose attention was pruned to ``heads`` (original indices): they all run, weight 1."""

    def __init__(self, cfg: ModelConfig, heads: Sequence[int]):
        super().__init__(cfg)
        self.heads = list(heads)

    def forward(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        control, H = ctx.control, self.cfg.n_heads
        if control.k is not None:
            asked = control._ks()
        else:
            asked = [] if control.budget is None else [heads_for_budget_value(control.budget, H)]
        if any(k != len(self.heads) for k in asked):
            raise ValueError(f"this layer's heads are pruned to {len(self.heads)} of {H}; it cannot run {asked}")
        return ctx.every_head(H, self.heads)


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

    def compiled(self, xn: Tensor, ctx: ForwardContext, constant: float | None, choice: str
                 ) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None] | None:
        """s (B,) (None when ``constant``), z (B, H), the heads ranked (B, H) and k (B,) (None when
        ``constant``) in one compiled call (:func:`~budgetformer_core.model.budget.run_compiled`),
        where it applies: at inference, with g_φ ranking each input's heads by its own scores."""
        if (self.training or choice != "learned" or self.scorer is None or ctx.control.head_sets != "input"
                or (constant is None and self.budget_net is None)):
            return None
        norm = (native.NORM_NONE, None, None, 0.0) if self.norm is None else (
            native.NORM_RUNNING, self.norm.running_mean, self.norm.running_var, self.norm.eps)
        return run_compiled(None if constant is not None else self.budget_net, self.scorer, xn, ctx.mask,
                            ctx.pooling, norm, self.cfg.tau)  # ranked by p, as decide() ranks them

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

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
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
                                     lambda: rank_heads(decided()[3]), H, B, xn)
        compiled = self.compiled(xn, ctx, constant, choice)
        if compiled is None:
            s, z, p, rank = self.decide(self.summary(xn, ctx), control, constant, choice)
            order, predicted_k = rank_heads(rank), None
        else:  # s, z, the ranking (by p) and k in one call; p itself when read
            s, z, order, predicted_k = compiled
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
            return full_budget_trace(s, p, order, H, B, xn)
        # the mask of the heads that run, made when read (k is a tensor whenever shared_k is None)
        selected = once(lambda: select_top_k(rank, k if shared_k is None else shared_k, order))
        if cfg.head_weighting == "scaled":
            weights = (p() if callable(p) else p) * ((s() if callable(s) else s) * H)[:, None]
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
                              shared_k=shared_k)
        return LayerTrace(s, p, weights, k, selected, order, shared_k=shared_k)


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

    def compiled(self, ctx: ForwardContext) -> tuple[None, Tensor, Tensor, None] | None:
        """(None, z (B, H), the heads ranked (B, H), None) in one compiled call
        (:func:`~budgetformer_core.model.budget.run_compiled`) where it applies: gates that read
        the pooled embedding output, each input ranking its heads by its own scores."""
        if (not isinstance(self.gate, HeadScorer) or self.cfg.gate_source != "embedding"
                or ctx.control.head_sets != "input"):
            return None
        return run_compiled(None, self.gate, ctx.embeddings, ctx.mask, ctx.pooling,
                            (native.NORM_LAYER, None, None, 1e-5), None)  # F.layer_norm's eps; ranked by z

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
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
                                     z, cfg.gate_temperature)
        compiled = self.compiled(ctx) if unit else None
        z, order = (gate_scores(), None) if compiled is None else compiled[1:3]
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
                          cfg.gate_temperature, unit_weights=unit, shared_k=shared_k)


RECIPE_WEIGHTING = {"paper": "scaled", "adaptive": "gated"}
"""BudgetFormer's head weighting under each training recipe (``TrainConfig.recipe``)."""

METHODS: dict[str, type[Allocator]] = {"dense": AllHeads, "budgetformer": BudgetAllocator, "bba": GateAllocator}
"""The allocator class of each method (``ModelConfig.method``)."""


def method_class(cfg: ModelConfig) -> type[Allocator]:
    """The allocator class of ``cfg``'s method: what the engine asks about a model's method."""
    return METHODS[cfg.method]


def make_allocators(cfg: ModelConfig) -> list[Allocator]:
    """One allocator per layer for ``cfg``; with ``shared_budget`` every layer shares one f_θ, g_φ."""
    kept = cfg.kept_heads or [None] * cfg.n_layers
    method = method_class(cfg)
    if method is AllHeads:
        return [AllHeads(cfg) if heads is None else FixedHeads(cfg, heads) for heads in kept]

    if method is GateAllocator:
        def make(_: int) -> Allocator:
            if cfg.gate_input:
                return GateAllocator(cfg, HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads))
            return GateAllocator(cfg, StaticGate(cfg.n_heads))
    else:
        def make(_: int) -> Allocator:
            f = BudgetNet(cfg.d_model, cfg.budget_hidden) if cfg.use_budget_net else None
            g = HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads) if cfg.head_choice == "learned" else None
            return BudgetAllocator(cfg, f, g)

    shared = make(0) if cfg.shared_budget and method is BudgetAllocator else None
    return [FixedHeads(cfg, heads) if heads is not None else (shared or make(i)) for i, heads in enumerate(kept)]
