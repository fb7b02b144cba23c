"""Analytic FLOPs equal the matmul FLOPs torch counts on real forward passes, and fall with k."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from budgetformer_core.budget import Control
from budgetformer_core.flops import attention_share, dense_flops, forward_flops, layer_flops
from budgetformer_core.model import BudgetFormer

from ..conftest import small_config


def counted_flops(
    model: BudgetFormer, n_tokens: int, mode: str, control: Control | None = None
) -> tuple[int, list[int]]:
    """Matmul FLOPs torch counts for one input, and the heads each layer ran.

    The fused CPU attention kernel is invisible to FlopCounterMode; the math backend computes
    the same QKᵀ and AV as two counted batched matmuls.
    """
    g = torch.Generator().manual_seed(n_tokens)
    ids = torch.randint(3, model.cfg.vocab_size, (1, n_tokens), generator=g)
    mask = torch.ones(1, n_tokens, dtype=torch.bool)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        out = model(ids, mask, mode=mode, control=control)
    return counter.get_total_flops(), [int(t.k) for t in out.layers]


@pytest.mark.parametrize("n_tokens", [1, 7, 40])
def test_dense_flops_match_torch_counter(small_model, n_tokens):
    counted, _ = counted_flops(small_model, n_tokens, "dense")
    assert counted == dense_flops(small_model.cfg, n_tokens)


@pytest.mark.parametrize("n_tokens", [1, 7, 40])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_structural_flops_match_torch_counter(small_model, n_tokens, k):
    counted, ks = counted_flops(small_model, n_tokens, "structural", Control(k=k))
    assert ks == [k, k]
    assert counted == forward_flops(small_model.cfg, n_tokens, ks)  # f_θ and g_φ included


def test_mean_max_pooling_flops_match_torch_counter():
    torch.manual_seed(0)
    model = BudgetFormer(small_config(pooling="mean_max")).eval()
    for mode, control in (("dense", None), ("structural", Control(k=2))):
        counted, ks = counted_flops(model, 9, mode, control)
        assert counted == forward_flops(model.cfg, 9, None if mode == "dense" else ks)


def test_flops_with_a_different_k_per_layer(small_model):
    # the learned budgets of this model give its two layers different k on some inputs
    for n_tokens in range(2, 40):
        counted, ks = counted_flops(small_model, n_tokens, "structural")
        assert counted == forward_flops(small_model.cfg, n_tokens, ks)
        if ks[0] != ks[1]:
            return
    pytest.fail("no input gave the two layers different k")


def test_budget_networks_are_counted():
    cfg = small_config()
    nets = layer_flops(cfg, 10, cfg.n_heads)["budget"]
    M, D, H = cfg.budget_hidden, cfg.d_model, cfg.n_heads
    assert nets == 2 * (D * M + M) + 2 * (D * M + M * H)
    # all heads plus f_θ and g_φ costs a little more than the dense model
    assert forward_flops(cfg, 10, [H] * cfg.n_layers) == dense_flops(cfg, 10) + cfg.n_layers * nets


def test_flops_fall_with_k_and_grow_with_length():
    cfg = small_config()
    for n_tokens in (1, 16, 40):
        by_k = [forward_flops(cfg, n_tokens, [k] * cfg.n_layers) for k in range(1, cfg.n_heads + 1)]
        assert by_k == sorted(by_k) and len(set(by_k)) == len(by_k)
    assert dense_flops(cfg, 20) < dense_flops(cfg, 40)


def test_attention_share_grows_with_length():
    cfg = small_config(max_len=512)
    shares = [attention_share(cfg, n) for n in (16, 128, 512)]
    assert shares == sorted(shares) and 0 < shares[0] and shares[-1] < 1


def test_one_k_per_layer_is_required():
    with pytest.raises(ValueError, match="one k per layer"):
        forward_flops(small_config(), 10, [1])
