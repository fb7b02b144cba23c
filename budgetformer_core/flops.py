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
    f_θ + g_φ (budgeted)  2 · (D·M + M·1) + 2 · (D·M + M·H)
    classifier (once)     2 · D · C   (2 · 2D · C with ``pooling="mean_max"``)

The dense baseline is the same model with k = H in every layer and no f_θ / g_φ. With one k
per input (a batch whose inputs got different budgets) the batch's FLOPs are the sum of the
inputs' FLOPs. ``tests/core/test_flops.py`` checks these numbers against
``torch.utils.flop_counter.FlopCounterMode`` on real forward passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import ModelConfig


def layer_flops(cfg: ModelConfig, n_tokens: int, k: int, budgeted: bool = True) -> dict[str, int]:
    """FLOPs of one encoder layer for one input, by component."""
    T, D, Dh = n_tokens, cfg.d_model, cfg.d_head
    M, H = cfg.budget_hidden, cfg.n_heads
    parts = {
        "qkv": 2 * T * D * 3 * k * Dh,
        "attention": 2 * 2 * k * T * T * Dh,
        "out": 2 * T * k * Dh * D,
        "ffn": 2 * 2 * T * D * cfg.d_ff,
        "budget": 2 * (D * M + M) + 2 * (D * M + M * H) if budgeted else 0,
    }
    return parts


def forward_flops(cfg: ModelConfig, n_tokens: int, ks: Sequence[int] | None = None) -> int:
    """FLOPs of one forward pass for one input; ``ks`` = heads per layer (None: dense model)."""
    budgeted = ks is not None
    ks = list(ks) if budgeted else [cfg.n_heads] * cfg.n_layers
    if len(ks) != cfg.n_layers:
        raise ValueError(f"need one k per layer ({cfg.n_layers}), got {len(ks)}")
    body = sum(sum(layer_flops(cfg, n_tokens, k, budgeted).values()) for k in ks)
    pooled = cfg.d_model * (2 if cfg.pooling == "mean_max" else 1)  # the classifier's input width
    return body + 2 * pooled * cfg.n_classes


def dense_flops(cfg: ModelConfig, n_tokens: int) -> int:
    """FLOPs of the dense model of the same shape on the same input."""
    return forward_flops(cfg, n_tokens, None)


def attention_share(cfg: ModelConfig, n_tokens: int) -> float:
    """Share of a dense layer's FLOPs in the attention product itself (QKᵀ and AV).

    It grows with the sequence length (T² against T): the longer the input, the more of the
    layer's work head budgeting can remove.
    """
    parts = layer_flops(cfg, n_tokens, cfg.n_heads, budgeted=False)
    return parts["attention"] / sum(parts.values())
