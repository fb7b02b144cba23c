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
from .budget import BudgetNet, Control, HeadScorer, heads_for_budget, random_relevance, select_top_k
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
        k = trace.k
        if k.shape[0] == 1 or bool((k == k[0]).all()):
            return self._run_group(xn, mask, trace.selected, trace.head_weights, int(k[0]))
        out = torch.empty_like(xn)
        for kg in k.unique().tolist():
            rows = (k == kg).nonzero().squeeze(1)
            group_mask = None if mask is None else mask[rows]
            out[rows] = self._run_group(xn[rows], group_mask, trace.selected[rows], trace.head_weights[rows], kg)
        return out

    def _run_group(self, xn: Tensor, mask: Tensor | None, selected: Tensor, w: Tensor, k: int) -> Tensor:
        idx = selected.nonzero()[:, 1].view(selected.shape[0], k)  # (Bg, k) ascending head ids
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
        self.head = nn.Linear(cfg.d_model, cfg.n_classes)
        n_pairs = 0 if cfg.variant == "dense" else (1 if cfg.shared_budget else cfg.n_layers)
        self.budget_nets = nn.ModuleList(
            BudgetNet(cfg.d_model, cfg.budget_hidden) for _ in range(n_pairs if cfg.use_budget_net else 0)
        )
        self.scorers = nn.ModuleList(
            HeadScorer(cfg.d_model, cfg.budget_hidden, cfg.n_heads)
            for _ in range(n_pairs if cfg.head_choice == "learned" else 0)
        )
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def allocate(self, i: int, xn: Tensor, mask: Tensor | None, control: Control) -> LayerTrace:
        """Layer i's budget s, relevance p, weights w and selected heads for normalised input xn.

        ``mask`` is (B, T), True for real tokens, or None when every token is real.
        """
        B, H = xn.shape[0], self.cfg.n_heads
        h = masked_mean(xn, mask)  # (B, D) global summary of the layer input
        pair = 0 if self.cfg.shared_budget else i
        if control.budget is not None:
            s = h.new_full((B,), control.budget)
        elif self.budget_nets:
            s = self.budget_nets[pair](h)
        else:
            s = h.new_full((B,), self.cfg.fixed_budget)
        choice = control.head_choice or self.cfg.head_choice
        if choice == "learned":
            if not self.scorers:
                raise ValueError("this model has no head-scoring network g_φ; choose uniform or random")
            p = torch.softmax(self.scorers[pair](h) / self.cfg.tau, dim=-1)  # (B, H)
            rank = p
        else:
            p = h.new_full((B, H), 1.0 / H)
            rank = p if choice == "uniform" else random_relevance(B, H, control.seed * 1000 + i).to(h.device)
        k = heads_for_budget(s, H) if control.k is None else control.k_tensor(B, H).to(h.device)
        return LayerTrace(s, p, (s * H)[:, None] * p, k, select_top_k(rank, k))

    def _dense_trace(self, x: Tensor) -> LayerTrace:
        """Every head, weight 1 (one trace object serves all layers of a dense forward)."""
        B, H = x.shape[0], self.cfg.n_heads
        ones = x.new_ones(B, H)
        return LayerTrace(x.new_ones(B), ones / H, ones, torch.full((B,), H, device=x.device), ones.bool())

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
        mask = mask.bool()
        key_mask = None if bool(mask.all()) else mask  # no padding: unmasked (faster) attention
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.tok_emb(ids) + self.pos_emb(pos))  # (B, T, D)
        dense_trace = self._dense_trace(x) if mode == "dense" else None
        traces = []
        for i, layer in enumerate(self.layers):
            xn = layer.ln1(x)
            trace = self.allocate(i, xn, key_mask, control) if dense_trace is None else dense_trace
            x = x + layer.drop(layer.attend(xn, key_mask, mode, trace))
            x = x + layer.drop(layer.ff(layer.ln2(x)))
            traces.append(trace)
        logits = self.head(masked_mean(self.ln_f(x), key_mask))  # (B, C)
        return ModelOutput(logits, traces, mask.sum(1))

