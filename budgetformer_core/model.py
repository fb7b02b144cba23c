"""Encoder classifier whose attention layers budget their heads per input.

A pre-norm Transformer encoder (token + learned position embeddings, ``n_layers`` layers of
attention and feed-forward, final layer norm, mean-pool over real tokens, linear classifier).
In the ``budgetformer`` variant each layer has its own f_θ and g_φ (or one shared pair) that
decide, from the mean of the layer's normalised input, the budget s, the head relevance p and
the head weights w = s·H·p (see :mod:`budgetformer_core.budget`).

Execution modes of :meth:`BudgetFormer.forward`:

* ``dense`` — plain multi-head attention, no budgeting (the baseline; the only mode of a dense
  model);
* ``soft`` — every head computed and weighted by w (training);
* ``masked`` — every head computed, unselected heads' weights zeroed (saves nothing; the
  contrast for the structural path);
* ``structural`` — only the k selected heads per input are computed (inference).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import HeadAttention
from .budget import (
    BudgetNet,
    Control,
    HeadScorer,
    StaticGate,
    heads_for_budget,
    heads_for_budget_value,
    mlp,
    random_relevance,
    rank_heads,
    run_budget_nets,
    select_top_k,
    soft_gates,
)
from .config import ModelConfig

MODES = ("dense", "soft", "masked", "structural")


@dataclass
class LayerTrace:
    """What one attention layer decided for each input of the batch."""

    budget: Tensor
    """(B,) the budget s."""
    relevance: Tensor
    """(B, H) head relevance p (sums to 1)."""
    head_weights: Tensor
    """(B, H) w = s·H·p."""
    k: Tensor
    """(B,) number of heads run."""
    selected: Tensor
    """(B, H) bool, True for the heads that ran."""
    order: Tensor
    """(B, H) head indices by decreasing relevance: the heads that ran are ``order[b, :k[b]]``."""
    gate_scores: Tensor | None = None
    """(B, H) bba gate scores z (None for the other variants)."""
    gate_temperature: float = 1.0

    @property
    def est_cost(self) -> Tensor:
        """(B,) estimated attention cost, the fraction of head work the soft path pays for: the
        mean soft gate (bba), the budget s (budgetformer) or 1 (dense). Computed on demand, so
        inference does not pay for it."""
        if self.gate_scores is None:
            return self.budget
        return soft_gates(self.gate_scores, self.order, self.k, self.gate_temperature).mean(-1)


@dataclass
class ModelOutput:
    """Logits plus the per-layer budgeting trace."""

    logits: Tensor
    """(B, C)."""
    layers: list[LayerTrace]
    lengths: Tensor
    """(B,) number of real tokens per input."""


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    """Mean over real tokens: x (B, T, D), mask (B, T) or None (all real) -> (B, D)."""
    if mask is None:
        return x.mean(1)
    m = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * m).sum(1) / m.sum(1).clamp_min(1.0)


class EncoderLayer(nn.Module):
    """Pre-norm attention + feed-forward block."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = HeadAttention(cfg.d_model, cfg.n_heads)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, xn: Tensor, mask: Tensor | None, mode: str, trace: LayerTrace) -> Tensor:
        """The layer's output for input x (B, T, D) whose first layer norm ``xn`` is given."""
        x = x + self.dropout(self.attend(xn, mask, mode, trace))
        return x + self.dropout(mlp(self.ff, self.ln2(x)))

    def dropout(self, x: Tensor) -> Tensor:
        return self.drop(x) if self.training else x  # skip the module call in eval

    def attend(self, xn: Tensor, mask: Tensor | None, mode: str, trace: LayerTrace) -> Tensor:
        """The attention block in ``mode``; ``mask`` is None when every token is real."""
        if mode == "dense":
            return self.attn.dense(xn, mask)
        if mode == "soft":
            return self.attn.weighted(xn, mask, trace.head_weights)
        if mode == "masked":
            return self.attn.weighted(xn, mask, trace.head_weights * trace.selected)
        return self.structural(xn, mask, trace)

    def structural(self, xn: Tensor, mask: Tensor | None, trace: LayerTrace) -> Tensor:
        """Run each group of inputs that share k through the structural path.

        One call when the batch shares k (always at batch size 1); otherwise one call per
        distinct k — at most H groups, never a loop over heads.
        """
        k, order = trace.k, trace.order
        if k.shape[0] == 1:
            return self._run_group(xn, mask, order, trace.head_weights, int(k))
        if bool((k == k[0]).all()):
            return self._run_group(xn, mask, order, trace.head_weights, int(k[0]))
        out = torch.empty_like(xn)
        for kg in k.unique().tolist():
            rows = (k == kg).nonzero().squeeze(1)
            group_mask = None if mask is None else mask[rows]
            out[rows] = self._run_group(xn[rows], group_mask, order[rows], trace.head_weights[rows], kg)
        return out

    def _run_group(self, xn: Tensor, mask: Tensor | None, order: Tensor, w: Tensor, k: int) -> Tensor:
        idx = order[:, :k]  # (Bg, k) the k most relevant heads of each input
        return self.attn.structural(xn, mask, idx, w.gather(1, idx))


class BudgetFormer(nn.Module):
    """The encoder classifier; ``variant='dense'`` gives the standard Transformer baseline."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model * (2 if cfg.pooling == "mean_max" else 1), cfg.n_classes)
        n_pairs = 0 if cfg.variant != "budgetformer" else (1 if cfg.shared_budget else cfg.n_layers)
        self.budget_nets = nn.ModuleList(
            BudgetNet(cfg.d_model, cfg.budget_hidden) for _ in range(n_pairs if cfg.use_budget_net else 0)
        )
        self.scorers = nn.ModuleList(
            HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads)
            for _ in range(n_pairs if cfg.head_choice == "learned" else 0)
        )
        self.gates = nn.ModuleList(  # bba: the head-ranking gate of each layer
            (HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads) if cfg.gate_input else StaticGate(cfg.n_heads))
            for _ in range(cfg.n_layers if cfg.variant == "bba" else 0)
        )
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def pool(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """(B, T, D) final states -> (B, D) mean, or (B, 2D) mean ‖ max, over real tokens."""
        mean = masked_mean(x, mask)
        if self.cfg.pooling == "mean":
            return mean
        masked = x if mask is None else x.masked_fill(~mask[..., None], float("-inf"))
        return torch.cat([mean, masked.amax(1)], -1)

    def allocate_bba(self, i: int, xn: Tensor, mask: Tensor | None, control: Control, mode: str) -> LayerTrace:
        """Budgeted attention allocation: the requested budget b buys k = max(1, ⌊b·H⌋) heads,
        the k with the highest gate scores z. z does not depend on b, so the head sets are
        nested: for b₁ < b₂ the heads at b₁ are among those at b₂, for every input and layer.

        Head weights are soft gates in the ``soft`` mode (training); otherwise exactly 1 on the
        selected heads — with the soft gates' gradient passed straight through in training
        (hard-gate adaptation).
        """
        B, H = xn.shape[0], self.cfg.n_heads
        b = self.cfg.default_budget if control.budget is None else control.budget
        z = self.gates[i](masked_mean(xn, mask))  # (B, H)
        order = rank_heads(z)
        if control.k is not None:
            k = control.k_tensor(B, H, xn.device)
        else:
            k = torch.full((B,), heads_for_budget_value(b, H), device=xn.device)
        selected = select_top_k(z, k, order)
        if mode == "soft" or self.training:
            gates = soft_gates(z, order, k, self.cfg.gate_temperature)
            weights = gates if mode == "soft" else selected + gates - gates.detach()
        else:
            weights = selected.to(xn.dtype)
        return LayerTrace(xn.new_full((B,), b), torch.softmax(z, -1), weights, k, selected, order, z,
                          self.cfg.gate_temperature)

    def allocate(
        self, i: int, xn: Tensor, mask: Tensor | None, control: Control, mode: str = "structural"
    ) -> LayerTrace:
        """Layer i's budget s, relevance p, weights w and selected heads for normalised input xn.

        ``mask`` is (B, T), True for real tokens, or None when every token is real.
        """
        if self.cfg.variant == "bba":
            return self.allocate_bba(i, xn, mask, control, mode)
        B, H = xn.shape[0], self.cfg.n_heads
        h = masked_mean(xn, mask)  # (B, D) global summary of the layer input
        pair = 0 if self.cfg.shared_budget else i
        choice = control.head_choice or self.cfg.head_choice
        if choice == "learned" and not self.scorers:
            raise ValueError("this model has no head-scoring network g_φ; choose uniform or random")
        budget_net = self.budget_nets[pair] if self.budget_nets and control.budget is None else None
        s, z = run_budget_nets(budget_net, self.scorers[pair] if choice == "learned" else None, h)
        constant = None  # a budget shared by every input (requested, or the no-f_θ ablation's)
        if s is None:
            constant = self.cfg.fixed_budget if control.budget is None else control.budget
            s = h.new_full((B,), constant)
        if z is not None:
            p = torch.softmax(z if self.cfg.tau == 1.0 else z / self.cfg.tau, dim=-1)  # (B, H)
            rank = p
        else:
            p = h.new_full((B, H), 1.0 / H)
            rank = p if choice == "uniform" else random_relevance(B, H, control.seed * 1000 + i).to(h.device)
        # k per input, and as an int where the whole batch shares it (a one-scatter selection)
        if control.k is not None:
            k = control.k_tensor(B, H, h.device)
            shared_k = min(control.k, H) if isinstance(control.k, int) else None
        elif constant is not None:
            shared_k = heads_for_budget_value(constant, H)
            k = torch.full((B,), shared_k, device=h.device)
        else:
            k = heads_for_budget(s, H)
            shared_k = int(k) if B == 1 else None
        order = rank_heads(rank)
        selected = select_top_k(rank, k if shared_k is None else shared_k, order)
        return LayerTrace(s, p, p * (s * H)[:, None], k, selected, order)

    def _dense_trace(self, x: Tensor) -> LayerTrace:
        """Every head, weight 1 (one trace object serves all layers of a dense forward)."""
        B, H = x.shape[0], self.cfg.n_heads
        ones = x.new_ones(B, H)
        k = torch.full((B,), H, device=x.device)
        order = torch.arange(H, device=x.device).expand(B, H)
        return LayerTrace(x.new_ones(B), ones / H, ones, k, ones.bool(), order)

    def forward(
        self, ids: Tensor, mask: Tensor, mode: str | None = None, control: Control | None = None
    ) -> ModelOutput:
        """Classify a batch.

        Args:
            ids: (B, T) token ids.
            mask: (B, T) bool, True for real tokens (at least one per row).
            mode: one of :data:`MODES`; default ``dense`` for a dense model, else ``soft`` in
                training and ``structural`` in eval.
            control: inference overrides (forced budget or k, head-choice ablation).
        """
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of {ids.shape[1]} tokens exceeds max_len={self.cfg.max_len}")
        if mode is None:
            mode = "dense" if self.cfg.variant == "dense" else ("soft" if self.training else "structural")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if self.cfg.variant == "dense" and mode != "dense":
            raise ValueError(f"a dense model runs only in mode 'dense', not {mode!r}")
        control = control or Control()
        mask = mask if mask.dtype == torch.bool else mask.bool()
        key_mask = None if bool(mask.all()) else mask  # no padding: unmasked (faster) attention
        x = self.tok_emb(ids) + self.pos_emb.weight[: ids.shape[1]]  # (B, T, D): token + position
        x = self.drop(x) if self.training else x
        dense_trace = self._dense_trace(x) if mode == "dense" else None
        traces = []
        for i, layer in enumerate(self.layers):
            xn = layer.ln1(x)
            trace = self.allocate(i, xn, key_mask, control, mode) if dense_trace is None else dense_trace
            x = layer(x, xn, key_mask, mode, trace)
            traces.append(trace)
        logits = self.head(self.pool(self.ln_f(x), key_mask))  # (B, C)
        return ModelOutput(logits, traces, mask.sum(1))

