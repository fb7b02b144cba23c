"""Analytic FLOPs of one forward pass, given the number of heads each layer runs.

Counting convention: matrix-multiply FLOPs only, 2 per multiply-add (what
``torch.utils.flop_counter.FlopCounterMode`` counts); layer norms, softmax, activations and
embedding look-ups are left out. For one input of T tokens, width D, head size Dh = D / H,
feed-forward width F, k heads run in a layer, C classes, budget-network hidden size M:

    Q/K/V projection      2 · T · D · 3kDh
    scores  Q Kᵀ          2 · k · T · T · Dh
    mixing  A V           2 · k · T · T · Dh
    output projection     2 · T · kDh · D
    feed-forward          2 · T · D · F · 2
    budgeting networks    what the layer's allocator runs (:func:`budgeting_flops`):
                          f_θ 2 · (D·M + M·1), g_φ 2 · (D·M + M·H), a bba gate network
                          2 · (D·M + M·H); nothing for static gates, pruned heads or dense
    classifier (once)     2 · D · C   (2 · 2D · C with ``pooling="mean_max"``; plus BERT's
                          pooler 2 · D · D with ``pooling="pooler"``)
    embedding projection  2 · T · E · D, factorised embeddings of width E only (ELECTRA, ALBERT)

The dense baseline is the same model with k = H in every layer and no budgeting networks. With
one k per input (a batch whose inputs got different budgets) the batch's FLOPs are the sum of the
inputs' FLOPs. ``tests/core/test_flops.py`` checks these numbers against
``torch.utils.flop_counter.FlopCounterMode`` on real forward passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import ModelConfig
from ..model.allocators import method_class
from ..model.budget import Control


def budgeting_flops(cfg: ModelConfig, control: Control | None = None) -> list[int]:
    """Per layer, the FLOPs of the networks its allocator runs for one input under ``control``:
    f_θ unless the budget is given (``control.budget``) or the model has none, g_φ when heads are
    chosen by it, a bba gate network when the gates read the input; 0 for a dense layer, static
    gates and heads pruned once."""
    per_layer = method_class(cfg).network_flops(cfg, control or Control())
    kept = cfg.kept_heads or [None] * cfg.n_layers
    return [0 if heads is not None else per_layer for heads in kept]


def layer_flops(cfg: ModelConfig, n_tokens: int, k: int, budget: int = 0) -> dict[str, int]:
    """FLOPs of one encoder layer for one input running k heads, by component; ``budget`` is
    what its allocator's networks cost (:func:`budgeting_flops`)."""
    T, D, Dh = n_tokens, cfg.d_model, cfg.d_head
    return {
        "qkv": 2 * T * D * 3 * k * Dh,
        "attention": 2 * 2 * k * T * T * Dh,
        "out": 2 * T * k * Dh * D,
        "ffn": 2 * 2 * T * D * cfg.d_ff,
        "budget": budget,
    }


def forward_flops(
    cfg: ModelConfig, n_tokens: int, ks: Sequence[int] | None = None, control: Control | None = None
) -> int:
    """FLOPs of one forward pass for one input; ``ks`` = heads per layer (None: a dense pass,
    every head the model has and no budgeting networks), ``control`` the overrides it ran under."""
    nets = budgeting_flops(cfg, control) if ks is not None else [0] * cfg.n_layers
    if ks is None:
        ks = [cfg.n_heads if heads is None else len(heads) for heads in cfg.kept_heads or [None] * cfg.n_layers]
    if len(ks) != cfg.n_layers:
        raise ValueError(f"need one k per layer ({cfg.n_layers}), got {len(ks)}")
    body = sum(sum(layer_flops(cfg, n_tokens, k, net).values()) for k, net in zip(ks, nets))
    return embedding_flops(cfg, n_tokens) + body + head_flops(cfg)


def embedding_flops(cfg: ModelConfig, n_tokens: int) -> int:
    """FLOPs of projecting factorised embeddings (``embedding_size`` E) to D; 0 without them."""
    return 2 * n_tokens * cfg.embedding_size * cfg.d_model


def head_flops(cfg: ModelConfig) -> int:
    """FLOPs of the classifier on the pooled input, once per input (BERT's pooler included)."""
    pooled = cfg.d_model * (2 if cfg.pooling == "mean_max" else 1)  # the classifier's input width
    pooler = 2 * cfg.d_model * cfg.d_model if cfg.pooling == "pooler" else 0
    return pooler + 2 * pooled * cfg.n_classes


def dense_flops(cfg: ModelConfig, n_tokens: int) -> int:
    """FLOPs of the dense model of the same shape (every one of the H heads, no pruning) on the input."""
    return embedding_flops(cfg, n_tokens) + cfg.n_layers * sum(layer_flops(cfg, n_tokens, cfg.n_heads).values()) \
        + head_flops(cfg)


def attention_share(cfg: ModelConfig, n_tokens: int) -> float:
    """Share of a dense layer's FLOPs in the attention product itself (QKᵀ and AV).

    It grows with the sequence length (T² against T): the longer the input, the more of the
    layer's work head budgeting can remove.
    """
    parts = layer_flops(cfg, n_tokens, cfg.n_heads)
    return parts["attention"] / sum(parts.values())
