"""Michel et al. head importance: |∂L(x)/∂ξ| summed per example, not |·| of a batch gradient."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from budgetformer_core.io.tokenizer import pad
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.train.prune import head_importance
from tests.conftest import small_config


def dense_model(**kw) -> BudgetFormer:
    torch.manual_seed(0)
    return BudgetFormer(small_config(method="dense", **kw)).eval()


def one_by_one(model: BudgetFormer, ids: list[list[int]], labels: list[int]) -> list[torch.Tensor]:
    """∂L(x)/∂ξ (L, H) of each input, from its own forward and backward pass."""
    cfg = model.cfg
    grads = []
    for x, y in zip(ids, labels):
        xi = torch.ones(cfg.n_layers, cfg.n_heads, requires_grad=True)
        hooks = [
            layer.attn.out.register_forward_pre_hook(
                lambda _m, args, i=i, xi=xi: ((args[0].view(1, -1, cfg.n_heads, cfg.d_model // cfg.n_heads)
                                               * xi[i][:, None]).flatten(2),)  # (1, T, H, Dh) · ξ
            )
            for i, layer in enumerate(model.layers)
        ]
        try:
            batch = pad([x])
            loss = F.cross_entropy(model(batch.ids, batch.mask, mode="dense").logits, torch.tensor([y]))
            grads.append(torch.autograd.grad(loss, xi)[0])
        finally:
            for h in hooks:
                h.remove()
    return grads


def test_opposite_gradients_count_per_example_and_cancel_in_the_batch():
    """One input with label 0 and again with label 1 (two classes): for every head the two
    gradients are (p₁ − 0)·∂d/∂ξ and (p₁ − 1)·∂d/∂ξ, d = z₁ − z₀ — opposite signs. Per example
    they add up to |∂d/∂ξ|; in a batch they cancel down to |p₁ − p₀|·|∂d/∂ξ|."""
    model = dense_model(n_classes=2)
    ids, labels = [[5, 6, 7, 8, 9]] * 2, [0, 1]
    g0, g1 = one_by_one(model, ids, labels)
    assert bool((g0 * g1 < 0).all())  # every head: opposite signs
    per_example = head_importance(model, ids, labels, normalise=False)
    batch = head_importance(model, ids, labels, per_example=False, normalise=False)
    torch.testing.assert_close(per_example, g0.abs() + g1.abs())
    torch.testing.assert_close(batch, (g0 + g1).abs())
    assert bool((batch < 0.9 * per_example).all())
    batch_of_one = head_importance(model, ids, labels, batch_size=1, per_example=False, normalise=False)
    torch.testing.assert_close(batch_of_one, per_example)  # batches of one are per example


def test_per_example_importance_is_the_definition_whatever_the_batch_size():
    model = dense_model()
    gen = torch.Generator().manual_seed(1)
    ids = [torch.randint(3, 50, (int(n),), generator=gen).tolist() for n in torch.randint(2, 12, (10,), generator=gen)]
    labels = torch.randint(0, 3, (10,), generator=gen).tolist()
    reference = sum(g.abs() for g in one_by_one(model, ids, labels))
    for batch_size in (1, 4, 32):  # padded batches of mixed lengths give the same sums
        got = head_importance(model, ids, labels, batch_size=batch_size, normalise=False)
        torch.testing.assert_close(got, reference, rtol=1e-4, atol=1e-6)
    unit = head_importance(model, ids, labels)
    torch.testing.assert_close(unit, reference / reference.norm(dim=1, keepdim=True))
    batch = head_importance(model, ids, labels, batch_size=32, per_example=False)
    assert not torch.allclose(unit, batch, atol=1e-3)  # the batch variant is a different ranking signal
