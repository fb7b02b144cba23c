"""What every allocator is (:class:`Allocator`), and the two that decide nothing per input:
:class:`AllHeads` (dense) and :class:`FixedHeads` (a layer pruned once). The package
(:mod:`budgetformer_core.model.allocators`) says how the methods' allocators fit together."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

from torch import Tensor, nn

from ...config import ModelConfig, TrainConfig
from ...methods import METHOD_DESCRIPTIONS, MethodDescription
from ..attention import HeadAttention
from ..budget import Control, heads_for_budget_value
from ..trace import ForwardContext, LayerTrace

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
        return self.allocate_and_attend(xn, ctx, None)[0]

    runs_attention: ClassVar[bool] = False
    """True when :meth:`allocate_and_attend` can run the chosen heads' attention in the same
    compiled call as the allocation."""

    def run(self, xn: Tensor, ctx: ForwardContext, attention: HeadAttention) -> tuple[LayerTrace, Tensor | None]:
        """The trace for xn (B, T, D) and, at inference on the structural path where one compiled
        call ran the allocation and the chosen heads of ``attention`` (the layer's), their output
        (B, T, D); None: the caller runs ``attention`` on the trace. That path calls
        :meth:`allocate_and_attend` directly, so hooks on the allocator module see only the other
        modes' calls (``bench`` reads each layer's input from a dense pass)."""
        if self.runs_attention and ctx.mode == "structural" and not self.training:
            return self.allocate_and_attend(xn, ctx, attention)
        return self(xn, ctx), None

    def allocate_and_attend(self, xn: Tensor, ctx: ForwardContext, attention: HeadAttention | None
                            ) -> tuple[LayerTrace, Tensor | None]:
        """:meth:`allocate`, with the attention output where ``attention`` ran in the same call (:meth:`run`)."""
        raise NotImplementedError


class AllHeads(Allocator):
    """Dense: every head, weight 1."""

    description = METHOD_DESCRIPTIONS["dense"]

    @classmethod
    def notes(cls, cfg: ModelConfig, control: Control | None) -> list[str]:
        return ["dense model: every input runs all heads"]

    def allocate_and_attend(self, xn: Tensor, ctx: ForwardContext, attention: HeadAttention | None
                            ) -> tuple[LayerTrace, Tensor | None]:
        return ctx.every_head(self.cfg.n_heads), None


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
