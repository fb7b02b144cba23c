"""Analytic FLOPs equal the matmul FLOPs torch counts on real forward passes, and fall with k."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from budgetformer_core.measure.flops import attention_share, budgeting_flops, dense_flops, forward_flops
from budgetformer_core.model import native
from budgetformer_core.model.budget import Control
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config


def counted_flops(
    model: BudgetFormer, n_tokens: int, mode: str, control: Control | None = None
) -> tuple[int, list[int]]:
    """Matmul FLOPs torch counts for one input, and the heads each layer ran.

    The fused CPU attention kernel is invisible to FlopCounterMode; the math backend computes
    the same QKᵀ and AV as two counted batched matmuls. So are the compiled allocation (f_θ and
    g_φ in one C call) and the compiled attention (BLAS calls); the eager path computes the same
    networks and projections as counted matmuls.
    """
    g = torch.Generator().manual_seed(n_tokens)
    ids = torch.randint(3, model.cfg.vocab_size, (1, n_tokens), generator=g)
    mask = torch.ones(1, n_tokens, dtype=torch.bool)
    with (torch.no_grad(), sdpa_kernel(SDPBackend.MATH), native.eager(),
          FlopCounterMode(display=False) as counter):
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


@pytest.mark.parametrize("pooling", ["mean_max", "pooler"])
def test_pooling_flops_match_torch_counter(pooling):
    torch.manual_seed(0)
    model = BudgetFormer(small_config(pooling=pooling)).eval()
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


MODELS = {
    "budgetformer": dict(),
    "budgetformer gated": dict(head_weighting="gated"),
    "no f_θ": dict(use_budget_net=False, fixed_budget=0.5),
    "no g_φ": dict(head_choice="uniform"),
    "random heads": dict(head_choice="random"),
    "bba": dict(method="bba"),
    "bba, layer-input gates": dict(method="bba", gate_source="layer"),
    "static gates": dict(method="bba", gate_input=False),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("control", [None, Control(budget=0.5), Control(k=3), Control(head_choice="uniform")],
                         ids=["own", "budget", "k", "uniform"])
def test_every_variant_counts_exactly_the_networks_it_runs(name, control):
    torch.manual_seed(0)
    model = BudgetFormer(small_config(**MODELS[name])).eval()
    if control is not None and control.head_choice and model.cfg.method == "bba":
        pytest.skip("bba takes no head choice")
    for n_tokens in (1, 9):
        counted, ks = counted_flops(model, n_tokens, "structural", control)
        assert counted == forward_flops(model.cfg, n_tokens, ks, control), (name, n_tokens)


def test_budget_networks_cost_what_their_layers_do():
    cfg = small_config()
    M, D, H = cfg.budget_hidden, cfg.d_model, cfg.n_heads
    assert budgeting_flops(cfg) == [2 * (D * M + M) + 2 * (D * M + M * H)] * cfg.n_layers
    assert budgeting_flops(cfg, Control(budget=0.5)) == [2 * (D * M + M * H)] * cfg.n_layers  # f_θ skipped
    assert budgeting_flops(small_config(method="bba", gate_input=False)) == [0, 0]
    assert budgeting_flops(small_config(method="dense")) == [0, 0]
    # all heads plus f_θ and g_φ costs a little more than the dense model
    assert forward_flops(cfg, 10, [H] * cfg.n_layers) == dense_flops(cfg, 10) + sum(budgeting_flops(cfg))


def test_pruned_model_flops_match_torch_counter():
    torch.manual_seed(0)
    for method in ("dense", "budgetformer", "bba"):
        model = BudgetFormer(small_config(method=method)).eval()
        model.prune_heads([[1, 3], [2]])
        assert budgeting_flops(model.cfg) == [0, 0]
        mode = "dense" if method == "dense" else "structural"
        counted, ks = counted_flops(model, 9, mode)
        assert ks == [2, 1]
        assert counted == forward_flops(model.cfg, 9, ks) == forward_flops(model.cfg, 9)
        assert counted < dense_flops(model.cfg, 9)  # the unpruned dense model of the same shape


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
