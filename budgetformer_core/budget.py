"""The budget network f_θ, the head-scoring network g_φ, and top-k head selection.

From a global summary h of a layer's input (mean over non-padding tokens):

* f_θ(h) → s ∈ (0, 1): the fraction of the layer's H heads this input gets;
* g_φ(h) → z ∈ R^H, p = softmax(z / τ): how relevant each head is;
* w = s · H · p: the weight each head's output is scaled by;
* at inference the k = max(1, ⌊s · H⌋) heads with the largest p are the only ones computed.

At batch size 1 these networks are a few dozen tiny operations, so their cost is per-call
overhead rather than arithmetic; the code here keeps the number of tensor operations small.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def mlp(net: nn.Sequential, h: Tensor) -> Tensor:
    """Run a Linear → GELU → Linear ``net`` through ``torch.nn.functional``.

    Same result as ``net(h)`` without the three sub-module calls, whose Python overhead is
    comparable to the arithmetic on a batch of one.
    """
    first, _, last = net
    return F.linear(F.gelu(F.linear(h, first.weight, first.bias)), last.weight, last.bias)


class BudgetNet(nn.Module):
    """f_θ: a two-layer MLP mapping the pooled layer input to a budget s ∈ (0, 1)."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, h: Tensor) -> Tensor:
        return torch.sigmoid(mlp(self.net, h)).squeeze(-1)  # (B, D) -> (B,)


class HeadScorer(nn.Module):
    """g_φ: a two-layer MLP mapping the pooled layer input to head logits z ∈ R^H."""

    def __init__(self, d_model: int, hidden: int, n_heads: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, n_heads))

    def forward(self, h: Tensor) -> Tensor:
        return mlp(self.net, h)  # (B, D) -> (B, H)


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


@dataclass
class Control:
    """Inference-time overrides of what f_θ and g_φ decide (the app's slider and ablations).

    Attributes:
        budget: force s to this value for every input and layer (overrides f_θ).
        k: force exactly k heads per layer (overrides the k implied by s; s stays f_θ's);
            one int for every input, or a sequence with one k per input of the batch.
        head_choice: ``learned`` (g_φ), ``uniform`` (p = 1/H, the first k heads) or
            ``random`` (p = 1/H, k random heads per input, from ``seed``).
        seed: seed of the random head choice.
    """

    budget: float | None = None
    k: int | Sequence[int] | None = None
    head_choice: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.budget is not None and not 0.0 < self.budget <= 1.0:
            raise ValueError(f"budget must be in (0, 1], got {self.budget}")
        if self.k is not None and (not self._ks() or min(self._ks()) < 1):
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.head_choice not in (None, "learned", "uniform", "random"):
            raise ValueError(f"head_choice must be learned/uniform/random, got {self.head_choice!r}")

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


def random_relevance(batch: int, n_heads: int, seed: int) -> Tensor:
    """Random scores used only to *rank* heads for the random-choice ablation."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, n_heads, generator=g)


# --------------------------------------------------------------------------- budgeted allocation (bba)


class StaticGate(nn.Module):
    """One learned score per head, the same for every input (static gates; post-hoc ranking)."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.scores = nn.Parameter(torch.zeros(n_heads))

    def forward(self, h: Tensor) -> Tensor:
        return self.scores.expand(h.shape[0], -1)  # (H,) -> (B, H)


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
