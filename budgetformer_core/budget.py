"""Allocation: how each attention layer decides which heads run for each input.

Every layer owns an :class:`Allocator` that turns the layer's normalised input into a
:class:`LayerTrace` — the budget s, the head relevance p, the head weights w and the heads that
run. The attention layer then executes that trace (:mod:`budgetformer_core.attention`). One
allocator per method, chosen once when the model is built:

* :class:`AllHeads` — dense: every head, weight 1;
* :class:`FixedHeads` — a layer whose heads were pruned once (:meth:`HeadAttention.prune_heads`):
  the heads kept, weight 1, nothing decided per input;
* :class:`BudgetAllocator` — BudgetFormer. From a global summary h of the layer input (its mean
  over real tokens), f_θ(h) → s ∈ (0, 1) is the fraction of the H heads this input gets and
  g_φ(h) → z ∈ R^H, p = softmax(z / τ) how relevant each head is; the k = max(1, ⌊s·H⌋) heads
  with the largest p run. Two weightings (``ModelConfig.head_weighting``): ``scaled``, the
  paper's w = s·H·p; ``gated``, w = 1 on the heads that run, trained through soft gates
  (:func:`gated_weights`) so that s decides which heads contribute rather than how loud they are;
* :class:`GateAllocator` — budgeted attention allocation (bba): the caller requests a budget b,
  which buys k = max(1, ⌊b·H⌋) heads, the k with the highest gate scores z. z is computed from a
  summary that does not depend on b (the pooled embedding output), so for b₁ < b₂ the heads at
  b₁ are a subset of those at b₂ in every layer; static gates are one learned score per head.

At batch size 1 these networks are a few dozen tiny operations, so their cost is per-call
overhead rather than arithmetic; the code here keeps the number of tensor operations small.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ModelConfig


def mlp(net: nn.Sequential, h: Tensor) -> Tensor:
    """Run a Linear → GELU → Linear ``net`` through ``torch.nn.functional``.

    Same result as ``net(h)`` without the three sub-module calls, whose Python overhead is
    comparable to the arithmetic on a batch of one. The GELU's ``approximate`` (exact or tanh)
    is the module's own.
    """
    first, gelu, last = net
    hidden = F.gelu(F.linear(h, first.weight, first.bias), approximate=gelu.approximate)
    return F.linear(hidden, last.weight, last.bias)


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    """Mean over real tokens: x (B, T, D), mask (B, T) or None (all real) -> (B, D)."""
    if mask is None:
        return x.mean(1)
    m = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


def first_token(x: Tensor, mask: Tensor | None) -> Tensor:
    """(B, D) the state of each input's first real token: x (B, T, D), mask (B, T) or None.

    That is position 0 of every input the tokenizer gives; a token masked out (as occlusion
    removes one, :mod:`budgetformer_core.explain`) hands the role to the next one."""
    if mask is None:
        return x[:, 0]
    return x[torch.arange(x.shape[0], device=x.device), mask.to(torch.uint8).argmax(1)]


def summarize(x: Tensor, mask: Tensor | None, pooling: str) -> Tensor:
    """The (B, D) summary of token states x (B, T, D) that the budgeting networks read: the mean
    over real tokens, or the first real token's state where the model classifies that
    (``ModelConfig.pooling="first"`` or ``"pooler"``; ``mean_max`` models read the mean)."""
    return first_token(x, mask) if pooling in ("first", "pooler") else masked_mean(x, mask)


class BudgetNet(nn.Module):
    """f_θ: a two-layer MLP mapping the pooled layer input to a budget s ∈ (0, 1)."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, h: Tensor) -> Tensor:
        return torch.sigmoid(mlp(self.net, h)).squeeze(-1)  # (B, D) -> (B,)


class HeadScorer(nn.Module):
    """g_φ (and bba's per-input gate): a two-layer MLP mapping a pooled input to head logits z ∈ R^H."""

    def __init__(self, d_model: int, hidden: int, n_heads: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, n_heads))

    def forward(self, h: Tensor) -> Tensor:
        return mlp(self.net, h)  # (B, D) -> (B, H)


class StaticGate(nn.Module):
    """One learned score per head, the same for every input (static gates; post-hoc ranking)."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.scores = nn.Parameter(torch.zeros(n_heads))

    def forward(self, h: Tensor) -> Tensor:
        # (H,) -> (B, H); a view of a parameter would claim requires_grad even under no_grad
        scores = self.scores if torch.is_grad_enabled() else self.scores.detach()
        return scores.expand(h.shape[0], -1)


def run_budget_nets(
    budget_net: BudgetNet | None, scorer: HeadScorer | None, h: Tensor
) -> tuple[Tensor | None, Tensor | None]:
    """s = f_θ(h) and z = g_φ(h) for the networks given (None for a missing one).

    Both read the same h, so when both are given and autograd is off their first layers run
    as one matmul and one GELU on the two weight matrices stacked (the same FLOPs, half the
    calls). The stacked copy is cached on ``budget_net`` and rebuilt when a parameter changes.
    With autograd on each network runs as itself. The two ways agree (tested).
    """
    if budget_net is None or scorer is None or torch.is_grad_enabled():
        return (budget_net(h) if budget_net else None), (scorer(h) if scorer else None)
    (f1, _, f2), (g1, _, g2) = budget_net.net, scorer.net
    w1, b1 = _stacked(budget_net, (f1.weight, g1.weight), (f1.bias, g1.bias))
    hidden = F.gelu(F.linear(h, w1, b1))  # (B, 2·M): f_θ's hidden units, then g_φ's
    m = f1.out_features
    s = torch.sigmoid(F.linear(hidden[:, :m], f2.weight, f2.bias)).squeeze(-1)  # (B,)
    return s, F.linear(hidden[:, m:], g2.weight, g2.bias)  # (B, H)


def _stacked(
    owner: nn.Module, weights: tuple[Tensor, ...], biases: tuple[Tensor, ...]
) -> tuple[Tensor, Tensor]:
    """``torch.cat`` of the weights and of the biases, cached on ``owner`` while unchanged."""
    # a new tensor changes data_ptr; an in-place update (optimiser step, load_state_dict) _version
    key = tuple((p.data_ptr(), p._version) for p in weights + biases)
    cached = owner.__dict__.get("_stacked_cache")
    if cached is None or cached[0] != key:
        with torch.no_grad():
            cached = (key, torch.cat(weights), torch.cat(biases))
        owner.__dict__["_stacked_cache"] = cached
    return cached[1], cached[2]


HEAD_SETS = ("input", "batch")
"""Whose scores rank the heads (``Control.head_sets``): each input's own, or the batch's mean."""


def batch_ranking(scores: Tensor) -> Tensor:
    """(B, H) head scores -> (B, H), every row the batch's mean scores: one head ranking shared
    by the whole batch (``Control(head_sets="batch")``)."""
    return scores.mean(0, keepdim=True).expand_as(scores)


@dataclass
class Control:
    """Inference-time overrides of what f_θ and g_φ decide (the app's slider and ablations).

    Attributes:
        budget: force s (BudgetFormer) or request the budget b (bba) for every input and layer.
        k: force exactly k heads per layer (overrides the k implied by s; s stays f_θ's);
            one int for every input, or a sequence with one k per input of the batch.
        head_choice: ``learned`` (g_φ), ``uniform`` (p = 1/H, the first k heads) or
            ``random`` (p = 1/H, k random heads per input).
        seed: seed of the random head choice. One Control draws from one generator, so the
            batches of one evaluation (or the steps of one training run) get fresh draws.
        generator: the generator random heads are drawn from (default: one seeded by ``seed``,
            made on first use and kept by this Control).
    """

    budget: float | None = None
    k: int | Sequence[int] | None = None
    head_choice: str | None = None
    seed: int = 0
    generator: torch.Generator | None = field(default=None, repr=False, compare=False)
    soft_gates: bool = False
    """Training only, ``gated`` weights: the soft gates themselves as the weights (every head
    contributes a little and learns) instead of the exact top k with their gradients."""
    standardize_scores: bool = False
    """Training only, ``gated`` weights: g_φ's soft gates read z standardised over each input's
    heads, (z − mean) / std, instead of z (the order, and so the heads that run, is the same; see
    ``TrainConfig.standardize_scores``)."""
    margin: float = 0.0
    """Training only, ``gated`` weights: each input runs k = max(1, ⌊s·H − margin⌋) heads, and
    the gradient of s comes from the gates of that k, so that s settles ``margin`` heads above
    the edge where its last needed head switches on (see ``TrainConfig.k_margin``)."""
    head_sets: str = "input"
    """``input``: each input ranks the heads by its own scores (g_φ's p, bba's gates). ``batch``:
    one ranking for the whole batch, by the scores averaged over its inputs
    (:func:`batch_ranking`), so every input running k heads runs the same k — at a requested
    budget one head set per layer for the batch, computed like a pruned layer. An input's heads
    then depend on the other inputs of its batch."""

    def __post_init__(self) -> None:
        if self.budget is not None and not 0.0 < self.budget <= 1.0:
            raise ValueError(f"budget must be in (0, 1], got {self.budget}")
        if self.k is not None and (not self._ks() or min(self._ks()) < 1):
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.head_choice not in (None, "learned", "uniform", "random"):
            raise ValueError(f"head_choice must be learned/uniform/random, got {self.head_choice!r}")
        if self.head_sets not in HEAD_SETS:
            raise ValueError(f"head_sets must be {' or '.join(HEAD_SETS)}, got {self.head_sets!r}")

    def _ks(self) -> list[int]:
        return [self.k] if isinstance(self.k, int) else list(self.k)

    def k_tensor(self, batch: int, n_heads: int, device: torch.device | None = None) -> Tensor:
        """The forced k as a (batch,) long tensor, capped at ``n_heads``.

        Raises:
            ValueError: if a per-input k does not have one entry per input.
        """
        ks = self._ks()
        if isinstance(self.k, int):
            return torch.full((batch,), min(ks[0], n_heads), device=device)
        if len(ks) != batch:
            raise ValueError(f"k has {len(ks)} entries for a batch of {batch} inputs")
        return torch.tensor(ks, device=device).clamp_(max=n_heads)

    def random_scores(self, batch: int, n_heads: int) -> Tensor:
        """(batch, n_heads) uniform scores from this Control's generator, to rank heads at random."""
        if self.generator is None:
            self.generator = torch.Generator().manual_seed(self.seed)
        return torch.rand(batch, n_heads, generator=self.generator)


ABLATIONS = {
    "no-budget-net": "no f_θ: s is a constant for every input, the model's mean s on its validation split",
    "no-head-scorer": "no g_φ: the first k heads run (p = 1/H)",
    "random-heads": "k heads drawn at random for each input (p = 1/H)",
}
"""The eval-time ablations, one meaning per name on every surface (CLI, app, tables). The models
*trained* as ``<dataset>-no-budget-net`` and ``<dataset>-no-head-scorer`` are the same two
ablations built in from the start."""


def ablation(name: str, validation_budget: float, seed: int = 0) -> Control:
    """The :class:`Control` of ablation ``name`` (a key of :data:`ABLATIONS`).

    Args:
        validation_budget: the model's mean s on its validation split (``no-budget-net``'s s).
    """
    if name == "no-budget-net":
        return Control(budget=validation_budget)
    if name == "no-head-scorer":
        return Control(head_choice="uniform")
    if name == "random-heads":
        return Control(head_choice="random", seed=seed)
    raise ValueError(f"unknown ablation {name!r}; choose one of {', '.join(ABLATIONS)}")


def heads_for_budget(s: Tensor, n_heads: int) -> Tensor:
    """k = max(1, ⌊s · H⌋) per input, as a long tensor. A tiny epsilon keeps s·H = 4.0 at 4."""
    return torch.floor(s * n_heads + 1e-6).long().clamp(1, n_heads)


@functools.lru_cache(maxsize=1024)
def heads_for_budget_value(budget: float, n_heads: int) -> int:
    """:func:`heads_for_budget` of one budget value (same float32 arithmetic), memoised: a
    requested budget's k is then known without tensor operations on every call."""
    return int(heads_for_budget(torch.tensor([budget]), n_heads))


def rank_heads(relevance: Tensor) -> Tensor:
    """(B, H) head indices by decreasing relevance; equal scores keep index order.

    The stable sort makes a uniform p pick heads 0..k-1, and the top k of any row are
    ``order[:, :k]`` (the heads the structural path runs).
    """
    return torch.sort(relevance, dim=-1, descending=True, stable=True).indices


def select_top_k(relevance: Tensor, k: Tensor | int, order: Tensor | None = None) -> Tensor:
    """Boolean mask (B, H) of the k[b] heads with the largest relevance (ties: lower index).

    Args:
        relevance: (B, H) head scores.
        k: (B,) heads per input, or one int for the whole batch.
        order: ``rank_heads(relevance)`` when the caller has it already.
    """
    order = rank_heads(relevance) if order is None else order  # (B, H)
    if isinstance(k, int):
        return torch.zeros_like(order, dtype=torch.bool).scatter_(1, order[:, :k], True)
    rank_ok = torch.arange(order.shape[1], device=order.device)[None, :] < k[:, None]  # (B, H)
    return torch.zeros_like(rank_ok).scatter(-1, order, rank_ok)


def soft_gates(z: Tensor, order: Tensor, k: Tensor, temperature: float) -> Tensor:
    """Differentiable gates ≈ 1 on the k[b] highest-scoring heads and ≈ 0 on the others.

    ``sigmoid((z − θ) / T)`` with θ half-way between the k-th and (k+1)-th largest score
    (detached), so the gates follow the exact top-k set while z still gets gradients. Their
    mean is the *estimated* attention cost of the soft path.

    Args:
        z: (B, H) head scores; order: ``rank_heads(z)``; k: (B,) heads per input.
    """
    H = z.shape[1]
    ranked = z.detach().gather(1, order)  # (B, H) scores in decreasing order
    kth = ranked.gather(1, (k - 1)[:, None])  # (B, 1) the last head in
    after = ranked.gather(1, k.clamp(max=H - 1)[:, None])  # (B, 1) the first head out
    gates = torch.sigmoid((z - (kth + after) / 2) / temperature)
    return torch.where((k == H)[:, None], torch.ones_like(gates), gates)  # a full budget: all on


def rank_gates(s: Tensor, order: Tensor, temperature: float) -> Tensor:
    """Differentiable gates of the heads by rank: head at rank r (0 = most relevant) gets
    ``sigmoid((s·H − r − 1/2) / T)``, ≈ 1 while r < s·H. Their gradient tells s whether one
    head more (or less) would lower the loss. s: (B,), order: (B, H) -> (B, H) by head."""
    H = order.shape[1]
    by_rank = torch.sigmoid((s[:, None] * H - torch.arange(H, device=s.device) - 0.5) / temperature)  # (B, H)
    return torch.empty_like(by_rank).scatter_(1, order, by_rank)  # rank -> head


def gated_weights(selected: Tensor, z: Tensor | None, s: Tensor | None, order: Tensor, k: Tensor,
                  temperature: float, dtype: torch.dtype, soft: bool = False) -> Tensor:
    """Head weights equal to the exact top-k mask in the forward pass, with the gradients of soft
    gates (straight-through): of z through :func:`soft_gates` (which heads) and of s through
    :func:`rank_gates` (how many). Either may be None (a constant s, or no g_φ). With ``soft``
    the weights are the product of the soft gates themselves."""
    gates = [g for g in (None if z is None else soft_gates(z, order, k, temperature),
                         None if s is None else rank_gates(s, order, temperature)) if g is not None]
    if soft and gates:
        return torch.stack(gates).prod(0).to(dtype)
    w = selected.to(dtype)
    for g in gates:
        w = w + g - g.detach()
    return w


# --------------------------------------------------------------------------- traces and allocators


@dataclass
class LayerTrace:
    """What one attention layer decided for each input of the batch."""

    budget: Tensor
    """(B,) the budget s (BudgetFormer) or the requested budget b (bba)."""
    relevance: Tensor
    """(B, H) head relevance p (sums to 1)."""
    head_weights: Tensor
    """(B, H) w: s·H·p (``scaled``), or 1 on the heads that run (``gated``, bba, dense, pruned)."""
    k: Tensor
    """(B,) number of heads run."""
    selected: Tensor
    """(B, H) bool, True for the heads that ran."""
    order: Tensor
    """(B, H) head indices by decreasing relevance: the heads that ran are ``order[b, :k[b]]``."""
    gate_scores: Tensor | None = None
    """(B, H) bba gate scores z (None for the other variants)."""
    gate_temperature: float = 1.0
    every_head: bool = False
    """True when the layer runs all the heads its attention has at weight 1 (dense, heads pruned
    once, or a budget that buys every head at unit weights): executed as plain attention,
    nothing gathered."""
    unit_weights: bool = False
    """True when ``head_weights`` are exactly ``selected`` (1 on the heads that run, no
    gradient): the structural path then skips scaling the heads' outputs."""
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
    """``dense``, ``soft``, ``masked`` or ``structural`` (see :mod:`budgetformer_core.model`)."""
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


def every_head_trace(x: Tensor, n_heads: int, heads: Sequence[int] | None = None) -> LayerTrace:
    """All of a layer's heads at weight 1: the dense trace, or (``heads``: the original indices
    of the heads kept) the trace of a layer pruned to those heads. x: (B, ...) for B and device."""
    B = x.shape[0]
    keep = list(range(n_heads)) if heads is None else list(heads)
    selected = torch.zeros(B, n_heads, dtype=torch.bool, device=x.device)
    selected[:, keep] = True
    rest = [h for h in range(n_heads) if h not in keep]
    order = torch.tensor(keep + rest, device=x.device).expand(B, n_heads)
    relevance = selected.to(x.dtype) / len(keep)
    k = torch.full((B,), len(keep), device=x.device)
    return LayerTrace(x.new_ones(B), relevance, selected.to(x.dtype), k, selected, order, every_head=True)


def full_budget_trace(budget: Tensor, relevance: Tensor, order: Tensor, gate_scores: Tensor | None = None,
                      gate_temperature: float = 1.0) -> LayerTrace:
    """The trace of a layer whose budget buys all H heads at weight 1 (k = H): every head selected,
    run as plain attention (``every_head``); s or b, p and the ranking are kept for what is shown.
    budget: (B,), relevance and order: (B, H)."""
    B, H = order.shape
    selected = torch.ones(B, H, dtype=torch.bool, device=order.device)
    k = torch.full((B,), H, device=order.device)
    return LayerTrace(budget, relevance, selected.to(relevance.dtype), k, selected, order, gate_scores,
                      gate_temperature, every_head=True, unit_weights=True)


class Allocator(nn.Module):
    """Decides, per input, which of a layer's heads run; ``forward`` returns the layer's trace."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg

    def forward(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        """The trace for normalised layer input xn (B, T, D); every head in ``dense`` mode."""
        if ctx.mode == "dense":
            return ctx.every_head(self.cfg.n_heads)
        return self.allocate(xn, ctx)

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        raise NotImplementedError


class AllHeads(Allocator):
    """Dense: every head, weight 1."""

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

    def __init__(self, cfg: ModelConfig, budget_net: BudgetNet | None, scorer: HeadScorer | None):
        super().__init__(cfg)
        self.budget_net, self.scorer = budget_net, scorer

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        cfg, control = self.cfg, ctx.control
        B, H = xn.shape[0], cfg.n_heads
        h = summarize(xn, ctx.mask, ctx.pooling)  # (B, D) global summary of the layer input
        choice = control.head_choice or cfg.head_choice
        if choice == "learned" and self.scorer is None:
            raise ValueError("this model has no head-scoring network g_φ; choose uniform or random")
        budget_net = self.budget_net if control.budget is None else None
        s, z = run_budget_nets(budget_net, self.scorer if choice == "learned" else None, h)
        constant = None  # a budget shared by every input (requested, or the no-f_θ model's)
        if s is None:
            constant = cfg.fixed_budget if control.budget is None else control.budget
            s = h.new_full((B,), constant)
        if z is not None:
            p = torch.softmax(z if cfg.tau == 1.0 else z / cfg.tau, dim=-1)  # (B, H)
            rank = p
        else:
            p = h.new_full((B, H), 1.0 / H)
            rank = p if choice == "uniform" else control.random_scores(B, H).to(h.device)
        if control.head_sets == "batch":
            rank = batch_ranking(rank)  # (B, H) the batch's ranking; w still reads each input's p
        # k per input, and as an int where the whole batch shares it (a one-scatter selection)
        if control.k is not None:
            k = control.k_tensor(B, H, h.device)
            shared_k = min(control.k, H) if isinstance(control.k, int) else None
        elif constant is not None:
            shared_k = heads_for_budget_value(constant, H)
            k = torch.full((B,), shared_k, device=h.device)
        elif control.margin and self.training:
            k = heads_for_budget(s - control.margin / H, H)
            shared_k = None
        else:
            k = heads_for_budget(s, H)
            shared_k = int(k) if B == 1 else None
        order = rank_heads(rank)
        unit = cfg.head_weighting != "scaled" and not (self.training and ctx.mode == "soft")
        if unit and shared_k == H:  # every head at weight 1: the layer's dense kernel
            return full_budget_trace(s, p, order)
        selected = select_top_k(rank, k if shared_k is None else shared_k, order)
        if cfg.head_weighting == "scaled":
            weights = p * (s * H)[:, None]
        elif self.training and ctx.mode == "soft":
            learnt_s = s - control.margin / H if constant is None and control.k is None else None
            if z is not None and control.standardize_scores:  # (B, H), the same order
                z = (z - z.mean(-1, keepdim=True)) / z.std(-1, keepdim=True).clamp_min(1e-6)
            weights = gated_weights(selected, z, learnt_s, order, k, cfg.gate_temperature, h.dtype,
                                    soft=control.soft_gates)
        else:  # unit
            return LayerTrace(s, p, selected.to(h.dtype), k, selected, order, unit_weights=True)
        return LayerTrace(s, p, weights, k, selected, order)


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

    def __init__(self, cfg: ModelConfig, gate: nn.Module):
        super().__init__(cfg)
        self.gate = gate

    def scores(self, xn: Tensor, ctx: ForwardContext) -> Tensor:
        """(B, H) gate scores z of the layer input xn (B, T, D)."""
        if self.cfg.gate_source == "embedding":
            summary = ctx.embedded()  # (B, D), the same at every budget
            return self.gate(F.layer_norm(summary, summary.shape[-1:]))
        return self.gate(summarize(xn, ctx.mask, ctx.pooling))

    def allocate(self, xn: Tensor, ctx: ForwardContext) -> LayerTrace:
        cfg, control = self.cfg, ctx.control
        B, H = xn.shape[0], cfg.n_heads
        b = cfg.default_budget if control.budget is None else control.budget
        z = self.scores(xn, ctx)  # (B, H)
        if control.head_sets == "batch":
            z = batch_ranking(z)  # the gates of the batch: its mean scores in every row
        order = rank_heads(z)
        unit = ctx.mode != "soft" and not self.training
        shared_k = heads_for_budget_value(b, H) if control.k is None else None
        if unit and shared_k == H:  # every head at weight 1: the layer's dense kernel
            return full_budget_trace(xn.new_full((B,), b), torch.softmax(z, -1), order, z, cfg.gate_temperature)
        if control.k is not None:
            k = control.k_tensor(B, H, xn.device)
        else:
            k = torch.full((B,), shared_k, device=xn.device)
        selected = select_top_k(z, k if shared_k is None else shared_k, order)
        if unit:
            weights = selected.to(xn.dtype)
        else:
            gates = soft_gates(z, order, k, cfg.gate_temperature)
            weights = gates if ctx.mode == "soft" else selected + gates - gates.detach()
        return LayerTrace(xn.new_full((B,), b), torch.softmax(z, -1), weights, k, selected, order, z,
                          cfg.gate_temperature, unit_weights=unit)


def make_allocators(cfg: ModelConfig) -> list[Allocator]:
    """One allocator per layer for ``cfg``; with ``shared_budget`` every layer shares one f_θ, g_φ."""
    kept = cfg.kept_heads or [None] * cfg.n_layers
    if cfg.variant == "dense":
        return [AllHeads(cfg) if heads is None else FixedHeads(cfg, heads) for heads in kept]

    if cfg.variant == "bba":
        def make(_: int) -> Allocator:
            if cfg.gate_input:
                return GateAllocator(cfg, HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads))
            return GateAllocator(cfg, StaticGate(cfg.n_heads))
    else:
        def make(_: int) -> Allocator:
            f = BudgetNet(cfg.d_model, cfg.budget_hidden) if cfg.use_budget_net else None
            g = HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads) if cfg.head_choice == "learned" else None
            return BudgetAllocator(cfg, f, g)

    shared = make(0) if cfg.shared_budget and cfg.variant == "budgetformer" else None
    return [FixedHeads(cfg, heads) if heads is not None else (shared or make(i)) for i, heads in enumerate(kept)]
