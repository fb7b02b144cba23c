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

from ...config import ModelConfig
from ..budget import BudgetNet, HeadScorer, StaticGate
from .base import METHOD_FACTS, AllHeads, Allocator, FixedHeads
from .bba import GateAllocator
from .budgetformer import RECIPE_WEIGHTING, BudgetAllocator

__all__ = ["METHODS", "METHOD_FACTS", "RECIPE_WEIGHTING", "AllHeads", "Allocator", "BudgetAllocator", "FixedHeads",
           "GateAllocator", "make_allocators", "method_class"]

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
