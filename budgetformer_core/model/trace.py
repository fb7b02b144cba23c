"""What an attention layer decided for a batch (:class:`LayerTrace`) and what every layer of one
forward pass shares (:class:`ForwardContext`).

An allocator (:mod:`budgetformer_core.model.allocators`) writes a layer's trace; the attention
layer executes it (:mod:`budgetformer_core.model.attention`); explanations, the atlas and the
app read it. The two traces every method shares are made here: all heads at weight 1
(:func:`every_head_trace`) and a budget that buys every head (:func:`full_budget_trace`).

What the execution does not need (p at a requested budget, the mask of selected heads, the head
weights when they are 1, the whole allocation when every head runs) an allocator may hand over
as a function of no arguments (:class:`Deferred`): the trace calls it on first read and keeps the
value, so a reader gets the same tensor and inference does not pay for what nobody reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .budget import Control, soft_gates, summarize

_REQUIRED = object()


class once:  # noqa: N801 (used as functools.cache is)
    """``fn``, a function of no arguments, run on the first call only and its value then returned:
    what ``functools.cache`` does for it, at an eighth of its set-up cost (0.2 against 1.5 µs; an
    allocator makes a few of these per layer and call)."""

    __slots__ = ("fn", "value")

    def __init__(self, fn: Callable[[], Tensor]):
        self.fn, self.value = fn, _REQUIRED

    def __call__(self) -> Tensor:
        if self.value is _REQUIRED:
            self.value, self.fn = self.fn(), None
        return self.value


class Deferred:
    """A field given as a tensor or as a function of no arguments that computes it: called on
    the first read, its value then kept in place of the function."""

    def __init__(self, default: object = _REQUIRED):
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: object, owner: type | None = None) -> Tensor:
        if obj is None:  # the class's default, which a dataclass reads: none for a required field
            if self.default is _REQUIRED:
                raise AttributeError(self.slot)
            return self.default
        value = obj.__dict__[self.slot]
        if callable(value):
            value = obj.__dict__[self.slot] = value()
        return value

    def __set__(self, obj: object, value: Tensor | Callable[[], Tensor]) -> None:
        obj.__dict__[self.slot] = value


@dataclass
class LayerTrace:
    """What one attention layer decided for each input of the batch. The first six fields may be
    given as functions computing them (:class:`Deferred`), and ``gate_scores``."""

    budget: Tensor = Deferred()
    """(B,) the budget s (BudgetFormer) or the requested budget b (bba)."""
    relevance: Tensor = Deferred()
    """(B, H) head relevance p (sums to 1)."""
    head_weights: Tensor = Deferred()
    """(B, H) w: s·H·p (``scaled``), or 1 on the heads that run (``gated``, bba, dense, pruned)."""
    k: Tensor = Deferred()
    """(B,) number of heads run."""
    selected: Tensor = Deferred()
    """(B, H) bool, True for the heads that ran."""
    order: Tensor = Deferred()
    """(B, H) head indices by decreasing relevance: the heads that ran are ``order[b, :k[b]]``."""
    gate_scores: Tensor | None = Deferred(None)
    """(B, H) bba gate scores z (None for the other methods)."""
    gate_temperature: float = 1.0
    every_head: bool = False
    """True when the layer runs all the heads its attention has at weight 1 (dense, heads pruned
    once, or a budget that buys every head at unit weights): executed as plain attention,
    nothing gathered."""
    unit_weights: bool = False
    """True when ``head_weights`` are exactly ``selected`` (1 on the heads that run, no
    gradient): the structural path then skips scaling the heads' outputs."""
    shared_k: int | None = None
    """The k every input of the batch runs, when the allocator knows it as a number (a requested
    budget, or a batch of one): the execution then needs neither ``k`` nor ``selected``."""
    attention: Tensor | None = None
    """(B, H, T, T) the attention probabilities each head computed in this layer (query × key,
    by head index), NaN for the heads that were not computed; only when the forward pass was
    asked for them (``BudgetFormer.forward(..., capture_attention=True)``), else None."""

    @property
    def est_cost(self) -> Tensor:
        """(B,) estimated attention cost, the fraction of head work the soft path pays for: the
        mean soft gate (bba), the budget s (budgetformer) or 1 (dense). Computed on demand, so
        inference does not pay for it."""
        if self.gate_scores is None:
            return self.budget
        return soft_gates(self.gate_scores, self.order, self.k, self.gate_temperature).mean(-1)


@dataclass
class ForwardContext:
    """What every layer of one forward pass shares."""

    mask: Tensor | None
    """(B, T) True for real tokens, or None when every token is real."""
    control: Control
    mode: str
    """``dense``, ``soft``, ``masked`` or ``structural`` (see :mod:`budgetformer_core.model.encoder`)."""
    embeddings: Tensor
    """(B, T, D) the embedding output (the input of the first layer)."""
    capture_attention: bool = False
    """Keep every layer's attention probabilities in its trace (``LayerTrace.attention``)."""
    pooling: str = "mean"
    """The model's pooling: how :func:`summarize` sums up an input for the budgeting networks."""
    _memo: dict = field(default_factory=dict, repr=False)

    def embedded(self) -> Tensor:
        """(B, D) :func:`summarize` of the embedding output: a summary of the input that no
        layer's head choice changes (bba's gates read it). Computed once per forward pass."""
        if "embedded" not in self._memo:
            self._memo["embedded"] = summarize(self.embeddings, self.mask, self.pooling)
        return self._memo["embedded"]

    def every_head(self, n_heads: int, heads: Sequence[int] | None = None) -> LayerTrace:
        """:func:`every_head_trace` for this batch, made once per forward pass and head set."""
        key = ("every", None if heads is None else tuple(heads))
        if key not in self._memo:
            self._memo[key] = every_head_trace(self.embeddings, n_heads, heads)
        return self._memo[key]


KEEP_ALIVE = 1 << 16
"""The most elements of a layer input a deferred value may keep alive (:func:`read_later`)."""


def read_later(fn: Callable[[], Tensor], reads: Tensor) -> Callable[[], Tensor]:
    """``fn`` made a value on its first call and then kept — or made now, when ``reads`` (the
    tensor ``fn`` reads, e.g. a layer input (B, T, D)) has more than :data:`KEEP_ALIVE` elements:
    a deferred value keeps what it reads alive, and a (B, D) summary costs less to keep than a
    large layer input. A small input (a typed text) pays for nothing that is not read."""
    value = once(fn)
    if reads.numel() > KEEP_ALIVE:
        value()
    return value


def every_head_trace(x: Tensor, n_heads: int, heads: Sequence[int] | None = None) -> LayerTrace:
    """All of a layer's heads at weight 1: the dense trace, or (``heads``: the original indices
    of the heads kept) the trace of a layer pruned to those heads. x: (B, ...) for B and device.
    Its fields are made when read (:class:`Deferred`): plain attention reads none of them."""
    B, dtype, device = x.shape[0], x.dtype, x.device
    keep = list(range(n_heads)) if heads is None else list(heads)

    def selected() -> Tensor:
        mask = torch.zeros(B, n_heads, dtype=torch.bool, device=device)
        mask[:, keep] = True
        return mask

    def order() -> Tensor:
        return torch.tensor(keep + [h for h in range(n_heads) if h not in keep], device=device).expand(B, n_heads)

    trace = LayerTrace(lambda: torch.ones(B, dtype=dtype, device=device),
                       lambda: trace.selected.to(dtype) / len(keep), lambda: trace.selected.to(dtype),
                       lambda: torch.full((B,), len(keep), device=device), selected, order, every_head=True)
    return trace


def full_budget_trace(budget: Tensor | Callable[[], Tensor], relevance: Tensor | Callable[[], Tensor],
                      order: Tensor | Callable[[], Tensor], n_heads: int, batch: int, like: Tensor,
                      gate_scores: Tensor | Callable[[], Tensor] | None = None,
                      gate_temperature: float = 1.0) -> LayerTrace:
    """The trace of a layer whose budget buys all H heads at weight 1 (k = H): every head selected,
    run as plain attention (``every_head``); s or b, p and the ranking are kept for what is shown,
    and may be given as functions (:class:`Deferred`): nothing of them is run for the execution.
    budget: (B,), relevance, order and gate_scores: (B, H); ``like``: a tensor of the batch's dtype
    and device (not kept: a deferred value holds no layer input alive)."""
    B, H, dtype, device = batch, n_heads, like.dtype, like.device

    def selected() -> Tensor:
        return torch.ones(B, H, dtype=torch.bool, device=device)

    return LayerTrace(budget, relevance, lambda: torch.ones(B, H, dtype=dtype, device=device),
                      lambda: torch.full((B,), H, device=device), selected, order, gate_scores, gate_temperature,
                      every_head=True, unit_weights=True, shared_k=H)
