"""The budgeting networks and head selection the allocators are built from.

f_θ (:class:`BudgetNet`) maps a global summary h of a layer's input to a budget s ∈ (0, 1); g_φ
(:class:`HeadScorer`, also bba's per-input gate) maps it to head scores z ∈ R^H; static gates
(:class:`StaticGate`) are one learned score per head. A budget buys k = max(1, ⌊s·H⌋) heads
(:func:`heads_for_budget`), the k with the largest scores (:func:`select_top_k`); soft gates
(:func:`soft_gates`, :func:`rank_gates`, :func:`gated_weights`) make that choice differentiable in
training. :class:`Control` holds what a caller overrides at inference (a budget, k, the head
choice) and :func:`ablation` the named ablations. The per-layer allocators that put these
together are in :mod:`budgetformer_core.model.allocators`.

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

from . import native
from .derived import kept


def mlp(net: nn.Sequential, h: Tensor) -> Tensor:
    """Run a Linear → activation → Linear ``net`` through ``torch.nn.functional``.

    Same result as ``net(h)`` without the three sub-module calls, whose Python overhead is
    comparable to the arithmetic on a batch of one. A GELU's ``approximate`` (exact or tanh)
    is the module's own; another activation (an imported encoder's ReLU) is called as it is.
    """
    first, act, last = net
    hidden = F.linear(h, first.weight, first.bias)
    hidden = F.gelu(hidden, approximate=act.approximate) if isinstance(act, nn.GELU) else act(hidden)
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
    removes one, :mod:`budgetformer_core.analysis.explain`) hands the role to the next one."""
    if mask is None:
        return x[:, 0]
    return x[torch.arange(x.shape[0], device=x.device), mask.to(torch.uint8).argmax(1)]


def summarize(x: Tensor, mask: Tensor | None, pooling: str) -> Tensor:
    """The (B, D) summary of token states x (B, T, D) that the budgeting networks read: the mean
    over real tokens, or the first real token's state where the model classifies that
    (``ModelConfig.pooling="first"`` or ``"pooler"``; ``mean_max`` models read the mean)."""
    return first_token(x, mask) if pooling in ("first", "pooler") else masked_mean(x, mask)


def mlp_flops(d_in: int, hidden: int, d_out: int) -> int:
    """FLOPs of a Linear d_in → hidden, Linear hidden → d_out on one input (2 per multiply-add)."""
    return 2 * (d_in * hidden + hidden * d_out)


class BudgetNet(nn.Module):
    """f_θ: a two-layer MLP mapping the pooled layer input to a budget s ∈ (0, 1)."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, h: Tensor) -> Tensor:
        return torch.sigmoid(mlp(self.net, h)).squeeze(-1)  # (B, D) -> (B,)


class SummaryNorm(nn.BatchNorm1d):
    """h (B, D) standardised per feature, without scale or shift (``ModelConfig.summary_norm``):
    with the batch's statistics in training (which also update the running ones), with the
    running statistics at inference, so an input's s and z never depend on its batch there. A
    training batch of one input, which has no variance, uses the running statistics too."""

    def __init__(self, d_model: int):
        super().__init__(d_model, affine=False)

    def forward(self, h: Tensor) -> Tensor:
        batch_stats = self.training and h.shape[0] > 1
        if batch_stats:
            self.num_batches_tracked.add_(1)
        return F.batch_norm(h, self.running_mean, self.running_var, training=batch_stats,
                            momentum=self.momentum, eps=self.eps)


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
    """``torch.cat`` of the weights and of the biases, kept on ``owner`` while unchanged."""
    def build() -> tuple[tuple[Tensor, ...], tuple[Tensor, Tensor]]:
        with torch.no_grad():
            return weights + biases, (torch.cat(weights), torch.cat(biases))

    return kept(owner, "_stacked_cache", build, weights + biases)


def compiled_weights(
    budget_net: BudgetNet | None, scorer: HeadScorer, x: Tensor, pooling: str,
    norm: tuple[int, Tensor | None, Tensor | None, float], tau: float | None,
) -> tuple[Tensor, Tensor, int, bool] | None:
    """The networks' weights packed for the compiled allocation of the layer input x (B, T, D)
    (:func:`native.pack`, kept on ``scorer`` while its tensors do not change), or None where that
    call does not apply: not built, autograd on, not float32 on a CPU, an activation other than
    GELU (the caller then runs the eager path). With them :func:`native.allocate` gives what the
    summary (``pooling``, then ``norm``: kind, running mean, variance, eps; ``pooling``, the kind
    and ``tau`` are taken as fixed for the networks given), :func:`run_budget_nets`,
    :func:`heads_for_budget` and :func:`rank_heads` of p = softmax(z / ``tau``) (of z itself for
    ``tau`` None) give, to float32 rounding."""
    if not native.usable(x):  # first: where the call does not apply, nothing else is done
        return None
    slot = "_compiled_f" if budget_net is not None else "_compiled"  # with f_θ, or g_φ alone
    return kept(scorer, slot, lambda: _compiled_weights(budget_net, scorer, pooling, norm, tau))


def _compiled_weights(budget_net: BudgetNet | None, scorer: HeadScorer, pooling: str,
                      norm: tuple[int, Tensor | None, Tensor | None, float], tau: float | None,
                      ) -> tuple[list[Tensor], tuple | None]:
    """What :func:`compiled_weights` keeps per scorer: the tensors it read, and the weights packed for
    :func:`native.allocate` (None for an activation other than GELU, or f_θ's and g_φ's of two
    kinds)."""
    nets = [net.net for net in (budget_net, scorer) if net is not None]
    layers = [(first, last) for first, _, last in nets]
    sources = [p for first, last in layers for p in (first.weight, first.bias, last.weight, last.bias)]
    sources += [t for t in norm[1:3] if t is not None]
    acts = {act.approximate if isinstance(act, nn.GELU) else None for _, act, _ in nets}
    if len(acts) != 1 or None in acts:
        return sources, None
    f_last = None if budget_net is None else (layers[0][1].weight, layers[0][1].bias)
    return sources, native.pack([(first.weight, first.bias) for first, _ in layers], f_last,
                                (layers[-1][1].weight, layers[-1][1].bias), pooling, norm, acts == {"tanh"}, tau)


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


@dataclass
class TrainingControl(Control):
    """A training batch's overrides: those of a :class:`Control`, plus how BudgetFormer's
    ``gated`` weights train (the ``adaptive`` recipe, ``Allocator.batch_control``)."""

    soft_gates: bool = False
    """The soft gates themselves as the weights (every head contributes a little and learns)
    instead of the exact top k with their gradients."""
    standardize_scores: bool = False
    """g_φ's soft gates read z standardised over each input's heads, (z − mean) / std, instead
    of z (the order, and so the heads that run, is the same; see ``TrainConfig.standardize_scores``)."""
    margin: float = 0.0
    """Each input runs k = max(1, ⌊s·H − margin⌋) heads, and the gradient of s comes from the
    gates of that k, so that s settles ``margin`` heads above the edge where its last needed head
    switches on (see ``TrainConfig.k_margin``)."""


NO_TRAINING = TrainingControl()
"""What an inference-time :class:`Control` means for training: none of the above."""


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
