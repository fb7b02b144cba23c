"""Structural top-k execution equals the soft path with the other heads zeroed; k = H with
unit weights equals dense attention; inputs may pick different heads within a batch."""

from __future__ import annotations

import pytest
import torch

from budgetformer_core.attention import HeadAttention


@pytest.fixture
def attn() -> HeadAttention:
    torch.manual_seed(0)
    return HeadAttention(d_model=32, n_heads=8).eval()


def inputs(B=3, T=7):
    torch.manual_seed(1)
    x = torch.randn(B, T, 32)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[-1, 5:] = False  # a padded row
    return x, mask


def test_all_heads_unit_weights_equal_dense(attn):
    x, mask = inputs()
    all_heads = torch.arange(8).repeat(3, 1)  # (B, H)
    structural = attn.structural(x, mask, all_heads, torch.ones(3, 8))
    weighted = attn.weighted(x, mask, torch.ones(3, 8))
    dense = attn.dense(x, mask)
    torch.testing.assert_close(structural, dense, atol=1e-5, rtol=0)
    torch.testing.assert_close(weighted, dense, atol=1e-5, rtol=0)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_structural_equals_weighted_with_other_heads_zeroed(attn, k):
    x, mask = inputs()
    torch.manual_seed(k)
    selected = torch.stack([torch.randperm(8)[:k].sort().values for _ in range(3)])  # per-input heads
    weights = torch.rand(3, k) * 2
    full = torch.zeros(3, 8).scatter(1, selected, weights)  # the other heads' weights are 0
    torch.testing.assert_close(
        attn.structural(x, mask, selected, weights), attn.weighted(x, mask, full), atol=1e-5, rtol=0
    )


def test_shared_head_set_takes_the_same_result_as_per_input(attn):
    x, mask = inputs()
    selected = torch.tensor([[1, 4, 6]]).repeat(3, 1)
    weights = torch.rand(3, 3)
    shared = attn.structural(x, mask, selected, weights)
    one = lambda i: attn.structural(x[i : i + 1], mask[i : i + 1], selected[i : i + 1], weights[i : i + 1])  # noqa: E731
    per_input = torch.cat([one(i) for i in range(3)])
    torch.testing.assert_close(shared, per_input, atol=1e-5, rtol=0)


def test_head_slices_pick_each_heads_rows_and_columns(attn):
    Dh, D = 4, 32
    w_qkv, b_qkv, w_out = attn.head_slices(torch.tensor([6, 2]))
    rows = [blk * D + h * Dh + c for blk in range(3) for h in (6, 2) for c in range(Dh)]  # Q, K, V blocks
    cols = [h * Dh + c for h in (6, 2) for c in range(Dh)]
    assert torch.equal(w_qkv, attn.qkv.weight[rows]) and torch.equal(b_qkv, attn.qkv.bias[rows])
    assert torch.equal(w_out, attn.out.weight[:, cols])
    # per-input sets: the same slices, one batch entry per input
    bw_qkv, bb_qkv, bw_out = attn.head_slices(torch.tensor([[6, 2], [0, 7]]))
    assert torch.equal(bw_qkv[0], w_qkv) and torch.equal(bb_qkv[0, 0], b_qkv)
    assert torch.equal(bw_out[0], w_out.T)
    assert torch.equal(bw_qkv[1], attn.head_slices(torch.tensor([0, 7]))[0])


def test_structural_does_less_matmul_work(attn):
    from torch.utils.flop_counter import FlopCounterMode

    x, mask = inputs(B=1, T=16)
    def count(fn):
        with FlopCounterMode(display=False) as fc:
            fn()
        return fc.get_total_flops()
    dense = count(lambda: attn.dense(x, mask))
    two = count(lambda: attn.structural(x, mask, torch.tensor([[0, 5]]), torch.ones(1, 2)))
    assert two * 4 <= dense * 1.01  # 2 of 8 heads: a quarter of the projection work


def test_all_heads_in_any_order_equal_weighted(attn):
    x, mask = inputs()
    order = torch.stack([torch.randperm(8, generator=torch.Generator().manual_seed(i)) for i in range(3)])
    weights = torch.rand(3, 8)
    full = torch.zeros(3, 8).scatter(1, order, weights)
    structural = attn.structural(x, mask, order, weights)
    torch.testing.assert_close(structural, attn.weighted(x, mask, full), atol=1e-5, rtol=0)


def test_no_mask_equals_an_all_true_mask(attn):
    x, _ = inputs()
    mask = torch.ones(3, 7, dtype=torch.bool)
    torch.testing.assert_close(attn.dense(x, None), attn.dense(x, mask), atol=1e-6, rtol=0)
    sel, w = torch.tensor([[0, 3], [5, 1], [2, 7]]), torch.rand(3, 2)
    torch.testing.assert_close(attn.structural(x, None, sel, w), attn.structural(x, mask, sel, w), atol=1e-6, rtol=0)
