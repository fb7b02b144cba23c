"""Encoder classifier whose attention layers budget their heads per input.

A Transformer encoder (token + learned position embeddings, ``n_layers`` layers of attention and
feed-forward, mean-pool over real tokens — or the first token's state, alone or through BERT's
pooler — linear classifier).
Pre-norm by default (a layer norm before each sublayer and a final one); ``ModelConfig.norm="post"``
gives BERT's layout (token-type embeddings, a layer norm of the embeddings and after each
residual sum), into which :mod:`budgetformer_core.io.pretrained` loads pretrained checkpoints and
:mod:`budgetformer_core.io.classifier` the sequence classifiers of the BERT family (with
ELECTRA's and ALBERT's factorised embeddings, ``ModelConfig.embedding_size``, and each family's
pooler non-linearity, ``ModelConfig.pooler_activation``).
Each layer owns an allocator (:mod:`budgetformer_core.model.allocators`) that decides, from the layer's
normalised input, which heads run for each input — BudgetFormer's f_θ and g_φ, bba's gates, a
fixed pruned set, or every head for the dense baseline — and its attention executes that
decision (:mod:`budgetformer_core.model.attention`).

Execution modes of :meth:`BudgetFormer.forward`:

* ``dense`` — plain multi-head attention, no budgeting (the baseline; the only mode of a dense
  model);
* ``soft`` — every head computed and weighted by w (training);
* ``masked`` — every head computed, unselected heads' weights zeroed (saves nothing; the
  contrast for the structural path);
* ``structural`` — only the k selected heads per input are computed (inference).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .allocators import Allocator, make_allocators, method_class
from .attention import MODES, AttentionCapture, HeadAttention
from .budget import Control, first_token, masked_mean, mlp
from .trace import ForwardContext, LayerTrace

__all__ = ["MODES", "BudgetFormer", "EncoderLayer", "LayerTrace", "ModelOutput", "masked_mean"]


@dataclass
class ModelOutput:
    """Logits plus the per-layer budgeting trace."""

    logits: Tensor
    """(B, C)."""
    layers: list[LayerTrace]
    lengths: Tensor
    """(B,) number of real tokens per input."""
    hidden: Tensor | None = None
    """(B, T, D) the final token states the classifier pools (after the final layer norm)."""


def nonlinearity(name: str) -> nn.Module:
    """The module of a :data:`~budgetformer_core.config.ACTIVATIONS` name."""
    if name in ("gelu", "gelu_tanh"):
        return nn.GELU(approximate="tanh" if name == "gelu_tanh" else "none")
    return {"relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}[name]()


class EncoderLayer(nn.Module):
    """One block: allocate heads, attend with them, feed forward.

    Pre-norm: x + attn(ln1(x)), then x + ff(ln2(x)); the allocator reads ln1(x). Post-norm
    (BERT): ln1(x + attn(x)), then ln2(x + ff(x)); the allocator reads x, already normalised
    by the layer before (or the embeddings' layer norm).
    """

    def __init__(self, cfg: ModelConfig, alloc: Allocator, kept: list[int] | None = None):
        super().__init__()
        self.n_heads = cfg.n_heads  # the trace's heads (the attention may be pruned to fewer)
        self.post_norm = cfg.norm == "post"
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.alloc = alloc
        self.attn = HeadAttention(cfg.d_model, cfg.n_heads, kept, cfg.d_head)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        act = nonlinearity(cfg.activation)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), act, nn.Linear(cfg.d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, ctx: ForwardContext) -> tuple[Tensor, LayerTrace]:
        """x (B, T, D) -> the layer's output (B, T, D) and what its allocator decided."""
        xn = x if self.post_norm else self.ln1(x)  # what the allocator and the heads read
        if ctx.capture_attention:  # a copy of the trace: dense layers share one
            trace = self.alloc(xn, ctx)
            capture = AttentionCapture.empty(x.shape[0], self.n_heads, x.shape[1], x)
            attended = self.attn(xn, ctx.mask, trace, ctx.mode, capture)
            trace = dataclasses.replace(trace, attention=capture.probs)
        else:  # at inference the allocator may run the chosen heads in the same compiled call
            trace, attended = self.alloc.run(xn, ctx, self.attn)
            attended = self.attn(xn, ctx.mask, trace, ctx.mode) if attended is None else attended
        if self.post_norm:
            x = self.ln1(x + self.dropout(attended))
            return self.ln2(x + self.dropout(mlp(self.ff, x))), trace
        x = x + self.dropout(attended)
        return x + self.dropout(mlp(self.ff, self.ln2(x))), trace

    def dropout(self, x: Tensor) -> Tensor:
        return self.drop(x) if self.training else x  # skip the module call in eval


class BudgetFormer(nn.Module):
    """The encoder classifier; ``method='dense'`` gives the standard Transformer baseline."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        width = cfg.embedding_size or cfg.d_model  # of the embeddings (factorised: narrower, then projected)
        self.tok_emb = nn.Embedding(cfg.vocab_size, width)
        self.pos_emb = nn.Embedding(cfg.max_len, width)
        self.drop = nn.Dropout(cfg.dropout)
        kept = cfg.kept_heads or [None] * cfg.n_layers
        self.layers = nn.ModuleList(
            EncoderLayer(cfg, alloc, heads) for alloc, heads in zip(make_allocators(cfg), kept, strict=True)
        )
        post = cfg.norm == "post"
        # pre-norm: a final layer norm; post-norm: the embeddings' (the layers end normalised)
        self.ln_f = nn.Identity() if post else nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.ln_emb = nn.LayerNorm(width, eps=cfg.layer_norm_eps) if post else nn.Identity()
        self.type_emb = nn.Embedding(cfg.type_vocab_size, width) if cfg.type_vocab_size else None
        # ELECTRA's embeddings_project, ALBERT's embedding_hidden_mapping_in
        self.emb_proj = nn.Linear(width, cfg.d_model) if cfg.embedding_size else None
        # BERT's pooler: the first token's state -> dense -> tanh (or the family's non-linearity;
        # only with pooling="pooler")
        self.pooler = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), nonlinearity(cfg.pooler_activation)
                                    ) if cfg.pooling == "pooler" else None
        self.head = nn.Linear(cfg.d_model * (2 if cfg.pooling == "mean_max" else 1), cfg.n_classes)
        self.low_rank: dict[str, tuple[Tensor, Tensor]] = {}
        """A low-rank fine-tune's factors (A, B) per changed weight (:mod:`.low_rank`), which a
        checkpoint stores instead of the weights; empty for any other model."""
        self.low_rank_from: Path | None = None
        """The checkpoint folder whose factors begin :attr:`low_rank` (the warm start of a stacked
        low-rank fine-tune, :mod:`budgetformer_core.io.stacked`): a save stores only the rest."""
        self._init_weights()

    def _init_weights(self) -> None:
        """Normal(0, 0.02) weights, zero biases; the budgeting networks last, f_θ of every layer,
        then g_φ, then the gates — the order the shipped checkpoints were drawn in, so the
        same seed still gives the same initial model."""
        allocators = list({id(a): a for a in self.allocators}.values())  # shared ones once
        skip = {id(a) for a in allocators}

        def visit(m: nn.Module) -> None:
            if id(m) in skip:
                return
            for child in m.children():
                visit(child)
            self._init(m)

        visit(self)
        for name in ("budget_net", "scorer", "gate"):
            for alloc in allocators:
                net = getattr(alloc, name, None)
                if net is not None:
                    net.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    @property
    def method(self) -> type[Allocator]:
        """The allocator class of this model's method: what differs between the methods
        (:func:`~budgetformer_core.model.allocators.method_class`)."""
        return method_class(self.cfg)

    def control_in_effect(self, control: Control | None) -> Control | None:
        """What a request means for this model: ``control`` itself, or None for a dense model,
        which has no budget or head choice to override (the request is dropped, not refused).
        The one place that decides it: inference, evaluation, the atlas, timing and the app ask here."""
        return control if self.method.budgeted else None

    @property
    def allocators(self) -> list[Allocator]:
        return [layer.alloc for layer in self.layers]

    def prune_heads(self, keep: list[list[int]]) -> None:
        """Prune every layer to a fixed head set once (``keep[l]``: the heads layer l keeps), as
        ``HeadAttention.prune_heads``; recorded in ``cfg.kept_heads`` so a saved model reloads
        pruned. Each layer then runs its kept heads at weight 1, the same for every input."""
        if len(keep) != self.cfg.n_layers:
            raise ValueError(f"need one head set per layer ({self.cfg.n_layers}), got {len(keep)}")
        if self.cfg.kept_heads is not None:
            raise ValueError("this model's heads are pruned already")
        from .allocators import FixedHeads

        self.cfg = dataclasses.replace(self.cfg, kept_heads=[sorted(set(heads)) for heads in keep])
        for layer, heads in zip(self.layers, self.cfg.kept_heads, strict=True):
            layer.attn.prune_heads(heads)
            layer.alloc = FixedHeads(self.cfg, heads)

    def embed(self, ids: Tensor, types: Tensor | None = None) -> Tensor:
        """(B, T) token ids -> (B, T, D) the first layer's input, before dropout: token + position
        (+ token type, then the embeddings' layer norm, for a post-norm model), projected from
        ``embedding_size`` to D when the embeddings are factorised.

        ``types``: (B, T) each token's segment (0 for the first text of a pair, 1 for the
        second); None = every token of type 0. Ignored by a model without token-type embeddings.
        """
        x = self.tok_emb(ids) + self.pos_emb.weight[: ids.shape[1]]  # (B, T, E): token + position
        if self.type_emb is not None:
            # one segment: every token of type 0; a pair: each token its own segment's embedding
            x = x + (self.type_emb.weight[0] if types is None else self.type_emb(types))
        x = self.ln_emb(x)
        return x if self.emb_proj is None else self.emb_proj(x)  # (B, T, D)

    def pool(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """(B, T, D) final states -> (B, D) mean, or (B, 2D) mean ‖ max, over real tokens, or
        (B, D) the first real token's state, or that state through the pooler."""
        if self.pooler is not None:
            return self.pooler(first_token(x, mask))
        if self.cfg.pooling == "first":
            return first_token(x, mask)
        mean = masked_mean(x, mask)
        if self.cfg.pooling == "mean":
            return mean
        masked = x if mask is None else x.masked_fill(~mask[..., None], float("-inf"))
        return torch.cat([mean, masked.amax(1)], -1)

    def forward(
        self, ids: Tensor, mask: Tensor, mode: str | None = None, control: Control | None = None,
        capture_attention: bool = False, types: Tensor | None = None,
    ) -> ModelOutput:
        """Classify a batch.

        Args:
            ids: (B, T) token ids.
            mask: (B, T) bool, True for real tokens (at least one per row).
            mode: one of :data:`MODES`; default ``dense`` for a dense model, else ``soft`` in
                training and ``structural`` in eval.
            control: inference overrides (forced budget or k, head-choice ablation).
            capture_attention: keep the attention probabilities of every head that runs in its
                layer's trace (``LayerTrace.attention``), as the execution path computes them.
            types: (B, T) token types (segments of a text pair, :attr:`Batch.types`); None = all 0.
        """
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of {ids.shape[1]} tokens exceeds max_len={self.cfg.max_len}")
        if mode is None:
            mode = self.method.training_mode if self.training else self.method.default_mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not self.method.budgeted and mode != "dense":
            raise ValueError(f"a dense model runs only in mode 'dense', not {mode!r}")
        mask = mask if mask.dtype == torch.bool else mask.bool()
        key_mask = None if bool(mask.all()) else mask  # no padding: unmasked (faster) attention
        x = self.embed(ids, types)  # (B, T, D)
        x = self.drop(x) if self.training else x
        ctx = ForwardContext(key_mask, control or Control(), mode, x, capture_attention, self.cfg.pooling)
        traces = []
        for layer in self.layers:
            x, trace = layer(x, ctx)
            traces.append(trace)
        hidden = self.ln_f(x)  # (B, T, D)
        logits = self.head(self.pool(hidden, key_mask))  # (B, C)
        return ModelOutput(logits, traces, mask.sum(1), hidden)
