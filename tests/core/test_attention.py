"""Structural top-k execution equals the soft path with the other heads zeroed; k = H with
unit weights equals dense attention; inputs may pick different heads within a batch. Each test
runs on the eager path (autograd on) and through the compiled call (autograd off)."""

from __future__ import annotations

import pytest
import torch

from budgetformer_core.model import native
from budgetformer_core.model.attention import HeadAttention


@pytest.fixture(params=["eager", "compiled"], autouse=True)
def path(request):
    """The eager path with autograd on; the compiled attention (``native.attend``) with it off."""
    if request.param == "eager":
        yield request.param
        return
    if native.attention() is None:
        pytest.skip("the compiled attention is not usable here")
    with torch.no_grad():
        yield request.param


@pytest.fixture(params=[0, 1, 6], ids=["width-D/H", "width-1", "width-6"])
def attn(request) -> HeadAttention:
    """8 heads on a width-32 stream: of width 32 / 8 = 4, or of a width of their own (1, 6)."""
    torch.manual_seed(0)
    return HeadAttention(d_model=32, n_heads=8, d_head=request.param).eval()


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
    Dh = attn.d_head
    assert attn.qkv.weight.shape == (3 * 8 * Dh, 32) and attn.out.weight.shape == (32, 8 * Dh)
    w_qkv, b_qkv, w_out = attn.head_slices(torch.tensor([6, 2]))
    rows = [blk * 8 * Dh + h * Dh + c for blk in range(3) for h in (6, 2) for c in range(Dh)]  # Q, K, V blocks
    cols = [h * Dh + c for h in (6, 2) for c in range(Dh)]
    assert torch.equal(w_qkv, attn.qkv.weight[rows]) and torch.equal(b_qkv, attn.qkv.bias[rows])
    assert torch.equal(w_out, attn.out.weight[:, cols])
    # per-input sets: the same slices, one batch entry per input
    bw_qkv, bb_qkv, bw_out = attn.head_slices(torch.tensor([[6, 2], [0, 7]]))
    assert torch.equal(bw_qkv[0], w_qkv) and torch.equal(bb_qkv[0, 0], b_qkv)
    assert torch.equal(bw_out[0], w_out.T)
    assert torch.equal(bw_qkv[1], attn.head_slices(torch.tensor([0, 7]))[0])


def test_structural_does_less_matmul_work(attn, path):
    """The eager path's products, as FlopCounterMode counts them (the compiled call's products
    are BLAS calls it does not see)."""
    from torch.utils.flop_counter import FlopCounterMode

    if path == "compiled":
        pytest.skip("FlopCounterMode counts PyTorch operations")

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


# --------------------------------------------------------------------------- unit head weights
# At inference the adaptive recipe and bba weight the heads that run by exactly 1; the structural
# path then skips scaling (weights=None) and runs all H heads as dense attention. Each shortcut
# must give what the plain structural path gives with the weights multiplied in.


@pytest.mark.parametrize("k", [1, 3, 8])
def test_unit_weights_skip_equals_plain_structural_per_input_heads(attn, k):
    x, mask = inputs()
    torch.manual_seed(10 + k)
    selected = torch.stack([torch.randperm(8)[:k] for _ in range(3)])  # a head set per input
    plain = attn.structural(x, mask, selected, torch.ones(3, k))
    torch.testing.assert_close(attn.structural(x, mask, selected, None), plain, atol=1e-5, rtol=0)


@pytest.mark.parametrize("k", [2, 8])
def test_unit_weights_skip_equals_plain_structural_shared_heads(attn, k):
    x, mask = inputs()
    selected = torch.randperm(8, generator=torch.Generator().manual_seed(k))[:k].repeat(3, 1)  # one set
    plain = attn.structural(x, mask, selected, torch.ones(3, k))
    for key_mask in (mask, None):
        torch.testing.assert_close(
            attn.structural(x, key_mask, selected, None),
            attn.structural(x, key_mask, selected, torch.ones(3, k)),
            atol=1e-5, rtol=0,
        )
    torch.testing.assert_close(attn.structural(x, mask, selected, None), plain, atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", ["budgetformer", "bba"])
def test_models_mark_unit_weights_only_where_the_weights_are_one(method):
    """The model's structural pass (unit weights skipped) equals its masked pass, per-input k and
    a shared budget, and the flag is set exactly when the trace's weights are the selection."""
    from budgetformer_core.model.budget import Control
    from budgetformer_core.model.encoder import BudgetFormer

    from ..conftest import small_config

    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_weighting="gated", method=method)).eval()
    with torch.no_grad():
        for alloc in model.allocators:  # varied head choices per input
            net = getattr(alloc, "scorer", None) or alloc.gate
            net.net[-1].weight.normal_(0, 3.0)
    ids = torch.randint(3, 50, (4, 12))
    mask = torch.ones(4, 12, dtype=torch.bool)
    mask[1, 8:] = False
    for control in (Control(k=[1, 2, 3, 4]), Control(budget=0.5), Control(budget=1.0), None):
        with torch.no_grad():
            out = model(ids, mask, mode="structural", control=control)
            masked = model(ids, mask, mode="masked", control=control)
        torch.testing.assert_close(out.logits, masked.logits, atol=1e-5, rtol=0)
        for t in out.layers:
            assert t.unit_weights and torch.equal(t.head_weights, t.selected.float())
    scaled = BudgetFormer(small_config(head_weighting="scaled")).eval()
    assert not any(t.unit_weights for t in scaled(ids, mask).layers)  # w = s·H·p is not 1
    model.train()  # training weights carry the soft gates' gradients (bba straight through)
    modes = ["soft", "structural"] if method == "bba" else ["soft"]
    assert not any(t.unit_weights for mode in modes for t in model(ids, mask, mode=mode).layers)


@pytest.mark.parametrize("method", ["budgetformer", "bba"])
def test_a_budget_buying_every_head_runs_the_dense_kernel_and_keeps_the_ranking(method):
    """At b = 1 (k = H, weights 1) a layer runs as plain attention: the dense path's output and
    attention, each head's attention under its own index although the trace ranks the heads by
    relevance, and s or b, p and that ranking kept for what is shown."""
    from budgetformer_core.model.budget import Control, rank_heads
    from budgetformer_core.model.encoder import BudgetFormer

    from ..conftest import small_config

    torch.manual_seed(1)
    model = BudgetFormer(small_config(head_weighting="gated", method=method)).eval()
    with torch.no_grad():
        for alloc in model.allocators:  # rankings far from index order
            (getattr(alloc, "scorer", None) or alloc.gate).net[-1].weight.normal_(0, 3.0)
    ids = torch.randint(3, 50, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[1, 7:] = False
    full = captured(model, ids, mask, control=Control(budget=1.0))
    dense = captured(model, ids, mask, mode="dense")
    torch.testing.assert_close(full.logits, dense.logits, atol=1e-5, rtol=0)
    H = model.cfg.n_heads
    for f, d in zip(full.layers, dense.layers, strict=True):
        assert f.every_head and f.unit_weights and f.selected.all() and (f.k == H).all()
        assert (f.budget == 1.0).all() if method == "bba" else f.budget.shape == (3,)
        scores = f.gate_scores if method == "bba" else f.relevance
        assert torch.equal(f.order, rank_heads(scores)) and (f.order != torch.arange(H)).any()
        torch.testing.assert_close(f.attention, d.attention, atol=1e-5, rtol=0)


# --------------------------------------------------------------------------- captured attention
# What the app shows of a head is what the execution path computed: the structural path keeps
# the attention of the heads it runs (NaN for the others) when asked, and changes nothing else.


def captured(model, ids, mask, **kw):
    with torch.no_grad():
        return model(ids, mask, capture_attention=True, **kw)


def check_rows(probs: torch.Tensor, mask: torch.Tensor, ran: torch.Tensor) -> None:
    """probs (B, H, T, T): the heads that ran are distributions over real keys, the others NaN."""
    for b in range(probs.shape[0]):
        heads = probs[b, ran[b]]  # (k, T, T)
        assert not torch.isnan(heads).any() and torch.isnan(probs[b, ~ran[b]]).all()
        torch.testing.assert_close(heads[..., mask[b]].sum(-1), torch.ones(heads.shape[:2]), atol=1e-5, rtol=0)
        assert (heads[..., ~mask[b]] == 0).all()  # no attention on padding


def test_captured_attention_is_the_structural_paths_and_equals_dense_at_k_h(bbc_budgetformer):
    from budgetformer_core.io.tokenizer import encode_batch
    from budgetformer_core.model.budget import Control

    model, H = bbc_budgetformer.model.eval(), bbc_budgetformer.config.n_heads
    batch = encode_batch(bbc_budgetformer.tokenizer, ["the striker scored twice in the cup final"], 512)
    ids, mask = batch.ids, batch.mask
    dense = captured(model, ids, mask, mode="dense")
    full = captured(model, ids, mask, control=Control(k=H))  # structural, every head
    for d, s in zip(dense.layers, full.layers, strict=True):
        torch.testing.assert_close(s.attention, d.attention, atol=1e-5, rtol=0)
    with torch.no_grad():
        plain = model(ids, mask)
    own = captured(model, ids, mask)  # the model's own k (1 or 2 of 8 heads here)
    torch.testing.assert_close(own.logits, plain.logits, atol=1e-5, rtol=0)  # capturing changes nothing
    assert all(t.attention is None for t in plain.layers)
    assert sum(int(t.k[0]) for t in own.layers) < 2 * H
    for t in own.layers:
        check_rows(t.attention, mask, t.selected)
    # layer 0 reads the same input on both paths: the gathered heads' attention is dense's
    ran = own.layers[0].selected[0]
    torch.testing.assert_close(own.layers[0].attention[0, ran], dense.layers[0].attention[0, ran], atol=1e-5, rtol=0)


def test_capture_with_per_input_head_sets_padding_and_pruned_heads(small_model):
    from budgetformer_core.model.budget import Control

    torch.manual_seed(3)
    ids = torch.randint(3, 50, (4, 9))
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[2, 6:] = False
    for control in (None, Control(k=[1, 2, 2, 4])):  # per-input k: one group per k
        out = captured(small_model, ids, mask, control=control)
        dense = captured(small_model, ids, mask, mode="dense")
        with torch.no_grad():
            torch.testing.assert_close(out.logits, small_model(ids, mask, control=control).logits, atol=1e-5, rtol=0)
        for t in out.layers:
            check_rows(t.attention, mask, t.selected)
        first = out.layers[0]
        expected = dense.layers[0].attention * first.selected[..., None, None]  # (B, H, T, T), not run: 0
        torch.testing.assert_close(first.attention.nan_to_num(0), expected, atol=1e-5, rtol=0)
    small_model.prune_heads([[0, 2], [1, 3]])
    out = captured(small_model, ids, mask)
    for t, kept in zip(out.layers, ([0, 2], [1, 3]), strict=True):
        assert t.selected[0].nonzero().flatten().tolist() == kept
        check_rows(t.attention, mask, t.selected)


# --------------------------------------------------------------------------- inputs sharing a head set
# Inputs whose head sets are equal (in any order) run together, one plain matmul per set; the
# result is the per-input path's and the soft path's with the other heads zeroed.


@pytest.mark.parametrize("unit", [True, False], ids=["unit-weights", "weights"])
def test_inputs_sharing_a_head_set_run_grouped_with_the_same_result(attn, unit, monkeypatch):
    x, mask = inputs(B=6)
    mask[2, 3:] = False
    sets = torch.tensor([[1, 4, 6], [6, 1, 4], [0, 2, 7], [2, 7, 0], [1, 6, 4], [7, 0, 2]])  # 2 sets, any order
    weights = None if unit else torch.rand(6, 3) + 0.5
    full = torch.zeros(6, 8).scatter(1, sets, torch.ones(6, 3) if unit else weights)
    grouped = attn.structural(x, mask, sets, weights)
    monkeypatch.setattr(attn, "GROUP_SHARE", 0.0)  # no grouping: per-input weight slices
    per_input = attn.structural(x, mask, sets, weights)
    torch.testing.assert_close(grouped, per_input, atol=1e-5, rtol=0)
    torch.testing.assert_close(grouped, attn.weighted(x, mask, full), atol=1e-5, rtol=0)


def test_a_deferred_summary_is_made_when_read_of_a_small_input_and_at_once_of_a_large_one():
    """What a full-budget trace keeps for display: a small layer input (a typed text) pays for its
    summary only when something reads it; a large one is summarised at once, so that the trace
    keeps (B, D) alive rather than the (B, T, D) input."""
    from budgetformer_core.model.trace import KEEP_ALIVE, read_later

    made = []
    small = torch.randn(1, 4, 8)
    value = read_later(lambda: made.append("small") or small.mean(1), small)
    assert made == []
    assert torch.equal(value(), small.mean(1)) and value() is value() and made == ["small"]
    large = torch.randn(2, KEEP_ALIVE // 2 + 1)
    value = read_later(lambda: made.append("large") or large.mean(1), large)
    assert made == ["small", "large"] and value() is value() and made == ["small", "large"]
