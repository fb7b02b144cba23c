"""The encoder: modes agree where they must, padding is invisible, budgets are respected."""

from __future__ import annotations

import pytest
import torch

from budgetformer_core.model.budget import (
    Control,
    TrainingControl,
    heads_for_budget,
    heads_for_budget_value,
    run_budget_nets,
    select_top_k,
)
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config, spread


def batch(B=4, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 50, (B, T), generator=g)
    lengths = torch.tensor([T, T - 3, 5, 1][:B])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    return ids * mask, mask


def test_structural_equals_masked_soft_path(small_model):
    ids, mask = batch()
    structural = small_model(ids, mask, mode="structural")
    masked = small_model(ids, mask, mode="masked")
    assert len({tuple(t.k.tolist()) for t in structural.layers}) > 1 or len(set(structural.layers[0].k.tolist())) > 1
    torch.testing.assert_close(structural.logits, masked.logits, atol=1e-5, rtol=0)
    for a, b in zip(structural.layers, masked.layers):
        assert torch.equal(a.selected, b.selected)


def test_full_budget_selects_every_head(small_model):
    ids, mask = batch()
    out = small_model(ids, mask, mode="structural", control=Control(budget=1.0))
    soft = small_model(ids, mask, mode="soft", control=Control(budget=1.0))
    assert all(bool(t.selected.all()) for t in out.layers)
    torch.testing.assert_close(out.logits, soft.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["dense", "soft", "structural"])
def test_padding_does_not_change_logits(small_model, mode):
    ids, mask = batch()
    out = small_model(ids, mask, mode=mode)
    # the same inputs with 9 more padding positions each
    ids_p = torch.cat([ids, torch.zeros(4, 9, dtype=torch.long)], 1)
    mask_p = torch.cat([mask, torch.zeros(4, 9, dtype=torch.bool)], 1)
    out_p = small_model(ids_p, mask_p, mode=mode)
    torch.testing.assert_close(out.logits, out_p.logits, atol=1e-5, rtol=0)
    # and each input alone, unpadded
    for b in range(4):
        n = int(mask[b].sum())
        alone = small_model(ids[b : b + 1, :n], mask[b : b + 1, :n], mode=mode)
        torch.testing.assert_close(alone.logits[0], out.logits[b], atol=1e-5, rtol=0)


def test_k_follows_budget_and_selects_largest_relevance(small_model):
    ids, mask = batch()
    out = small_model(ids, mask, mode="structural")
    for t in out.layers:
        assert torch.equal(t.k, heads_for_budget(t.budget, 4))
        assert torch.equal(t.selected.sum(1), t.k)
        # every selected head is at least as relevant as every unselected one
        lowest_in = torch.where(t.selected, t.relevance, torch.inf).min(1).values
        highest_out = torch.where(t.selected, -torch.inf, t.relevance).max(1).values
        assert bool((lowest_in >= highest_out).all())
        torch.testing.assert_close(t.head_weights, t.budget[:, None] * 4 * t.relevance)


def test_heads_for_budget_floor_and_minimum():
    s = torch.tensor([0.0, 0.1, 0.25, 0.49, 0.5, 0.99, 1.0])
    assert heads_for_budget(s, 4).tolist() == [1, 1, 1, 1, 2, 3, 4]


def test_select_top_k_breaks_ties_by_index():
    p = torch.full((2, 4), 0.25)
    assert select_top_k(p, torch.tensor([1, 3])).tolist() == [[True, False, False, False], [True, True, True, False]]


def test_forced_k_and_head_choice_ablations(small_model):
    ids, mask = batch()
    out = small_model(ids, mask, mode="structural", control=Control(k=2, head_choice="uniform"))
    for t in out.layers:
        assert t.selected[:, :2].all() and not t.selected[:, 2:].any()
        torch.testing.assert_close(t.head_weights, t.budget[:, None].expand(-1, 4))  # w = s·H·(1/H)
    r1 = small_model(ids, mask, mode="structural", control=Control(k=2, head_choice="random", seed=1))
    r2 = small_model(ids, mask, mode="structural", control=Control(k=2, head_choice="random", seed=1))
    assert all(torch.equal(a.selected, b.selected) for a, b in zip(r1.layers, r2.layers))
    assert all(bool((t.selected.sum(1) == 2).all()) for t in r1.layers)


def test_fixed_budget_ablation_model_has_no_budget_net():
    model = BudgetFormer(small_config(use_budget_net=False, fixed_budget=0.5)).eval()
    assert all(alloc.budget_net is None for alloc in model.allocators)
    ids, mask = batch()
    out = model(ids, mask)
    assert all(bool((t.k == 2).all()) for t in out.layers)


def test_dense_model_runs_only_dense():
    model = BudgetFormer(small_config(method="dense")).eval()
    ids, mask = batch()
    out = model(ids, mask)
    assert all(bool(t.selected.all()) for t in out.layers)
    with pytest.raises(ValueError, match="dense model"):
        model(ids, mask, mode="structural")


def test_bad_arguments_are_clear(small_model):
    ids, mask = batch()
    with pytest.raises(ValueError, match="mode"):
        small_model(ids, mask, mode="fast")
    with pytest.raises(ValueError, match="max_len"):
        small_model(torch.zeros(1, 41, dtype=torch.long), torch.ones(1, 41, dtype=torch.bool))
    with pytest.raises(ValueError, match="budget"):
        Control(budget=0.0)
    with pytest.raises(ValueError, match="divisible"):
        small_config(d_model=30)


def test_per_input_k(small_model):
    ids, mask = batch()
    out = small_model(ids, mask, mode="structural", control=Control(k=[1, 4, 2, 3]))
    masked = small_model(ids, mask, mode="masked", control=Control(k=[1, 4, 2, 3]))
    for t in out.layers:
        assert t.k.tolist() == [1, 4, 2, 3] and t.selected.sum(1).tolist() == [1, 4, 2, 3]
    torch.testing.assert_close(out.logits, masked.logits, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="entries for a batch of 4"):
        small_model(ids, mask, mode="structural", control=Control(k=[1, 2]))
    with pytest.raises(ValueError, match="k must be"):
        Control(k=[2, 0])


def test_budget_nets_fast_path_equals_the_modules(small_model):
    f, g = small_model.allocators[0].budget_net, small_model.allocators[0].scorer
    h = torch.randn(5, 32)
    s_slow, z_slow = run_budget_nets(f, g, h)  # autograd on: each network as itself
    with torch.no_grad():
        s_fast, z_fast = run_budget_nets(f, g, h)  # stacked first layers
        torch.testing.assert_close(s_fast, s_slow.detach(), atol=1e-6, rtol=0)
        torch.testing.assert_close(z_fast, z_slow.detach(), atol=1e-6, rtol=0)
        g.net[0].weight.mul_(2)  # an in-place update must refresh the stacked copy
        torch.testing.assert_close(run_budget_nets(f, g, h)[1], g(h), atol=1e-6, rtol=0)
        g.net[0].weight = torch.nn.Parameter(g.net[0].weight / 3)  # and so must a replaced parameter
        torch.testing.assert_close(run_budget_nets(f, g, h)[1], g(h), atol=1e-6, rtol=0)
    with torch.inference_mode():
        assert run_budget_nets(None, g, h)[0] is None and run_budget_nets(f, None, h)[1] is None


@pytest.mark.parametrize("budget", [0.05, 0.25, 0.3, 0.5, 0.74, 0.75, 1.0])
def test_requested_budget_gives_k_of_the_budget(small_model, budget):
    ids, mask = batch()
    k = heads_for_budget(torch.tensor([budget]), 4)
    assert heads_for_budget_value(budget, 4) == int(k)
    for t in small_model(ids, mask, mode="structural", control=Control(budget=budget)).layers:
        assert torch.equal(t.k, k.expand(4)) and torch.equal(t.selected.sum(1), t.k)
        assert torch.equal(t.k, heads_for_budget(t.budget, 4))


def test_pruned_heads_equal_the_structural_path_with_those_heads_and_survive_saving(tmp_path):
    from budgetformer_core.io.checkpoint import save_checkpoint
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import train_tokenizer

    torch.manual_seed(0)
    model = BudgetFormer(small_config(method="bba", gate_input=False)).eval()
    ids, mask = batch()
    keep = [[1, 3], [0, 2, 3]]
    with torch.no_grad():  # static scores that rank the kept heads first, so k = 2 / 3 runs them
        for alloc, heads in zip(model.allocators, keep):
            alloc.gate.scores.copy_(torch.tensor([1.0 if h in heads else 0.0 for h in range(4)]))
    model.prune_heads(keep)
    assert model.cfg.kept_heads == keep
    assert [layer.attn.n_heads for layer in model.layers] == [2, 3]
    assert model.layers[0].attn.qkv.weight.shape == (3 * 2 * 8, 32)  # 2 heads of 8 dims kept
    out = model(ids, mask)
    assert [t.selected[0].nonzero().flatten().tolist() for t in out.layers] == keep
    assert [int(t.k[0]) for t in out.layers] == [2, 3]
    path = save_checkpoint(tmp_path / "pruned", model, train_tokenizer(["a b c"], 50), ["x", "y", "z"], {})
    loaded = load_checkpoint(path)
    assert loaded.config.kept_heads == keep
    torch.testing.assert_close(loaded.model(ids, mask).logits, out.logits, atol=2e-3, rtol=0)  # float16 storage


def test_pruning_equals_running_the_same_heads_structurally():
    torch.manual_seed(0)
    model = BudgetFormer(small_config(method="bba", gate_input=False)).eval()
    keep = [[1, 3], [0, 2]]
    with torch.no_grad():
        for alloc, heads in zip(model.allocators, keep):
            alloc.gate.scores.copy_(torch.tensor([1.0 if h in heads else 0.0 for h in range(4)]))
    ids, mask = batch()
    gathered = model(ids, mask, control=Control(k=2))
    assert [t.selected[0].nonzero().flatten().tolist() for t in gathered.layers] == keep
    model.prune_heads(keep)
    torch.testing.assert_close(model(ids, mask).logits, gathered.logits, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="pruned already"):
        model.prune_heads(keep)


def test_random_heads_differ_across_training_steps():
    """The trainer's Control draws fresh random heads at every step, for the same batch."""
    model = BudgetFormer(small_config(head_choice="random")).train()
    ids, mask = batch()
    heads = Control(seed=1)
    steps = [model(ids, mask, control=heads).layers[0].selected for _ in range(4)]
    assert len({tuple(s.flatten().tolist()) for s in steps}) > 1
    again = Control(seed=1)  # the same seed replays the same stream
    assert all(torch.equal(model(ids, mask, control=again).layers[0].selected, s) for s in steps)


def test_gated_weights_are_the_top_k_forward_and_pass_gradients_to_s_and_z():
    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_weighting="gated")).train()
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.budget_net.net[-1].weight.normal_(0, 3.0)
            alloc.scorer.net[-1].weight.normal_(0, 3.0)
    ids, mask = batch()
    out = model(ids, mask, mode="soft")
    for t in out.layers:
        # forward: the top k (up to rounding of w + g − g)
        torch.testing.assert_close(t.head_weights.detach(), t.selected.float(), atol=1e-6, rtol=0)
    out.logits.square().sum().backward()
    f, g = model.allocators[0].budget_net, model.allocators[0].scorer
    assert f.net[0].weight.grad.abs().sum() > 0 and g.net[0].weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        structural, masked = model(ids, mask, mode="structural"), model(ids, mask, mode="masked")
    torch.testing.assert_close(structural.logits, masked.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_heads_of_their_own_width_run_structurally_prune_and_survive_saving(tmp_path, pooling):
    """Heads of width 1 on a width-32 stream (``head_dim``): the structural path equals the
    masked one, padding is invisible, pruning slices them, a saved model reloads; ``first``
    pooling classifies the first token's state."""
    from budgetformer_core.io.checkpoint import save_checkpoint
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import train_tokenizer

    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_dim=1, pooling=pooling))
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.budget_net.net[-1].weight.normal_(0, 3.0)
            alloc.scorer.net[-1].weight.normal_(0, 3.0)
    model.eval()
    assert model.layers[0].attn.qkv.weight.shape == (3 * 4 * 1, 32) and model.layers[0].attn.out.weight.shape == (32, 4)
    ids, mask = batch()
    out = model(ids, mask)
    torch.testing.assert_close(out.logits, model(ids, mask, mode="masked").logits, atol=1e-5, rtol=0)
    mean = (out.hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # (B, D) over real tokens
    pooled = out.hidden[:, 0] if pooling == "first" else mean
    torch.testing.assert_close(out.logits, model.head(pooled), atol=1e-5, rtol=0)
    for b in range(4):  # each input alone, unpadded
        n = int(mask[b].sum())
        torch.testing.assert_close(model(ids[b : b + 1, :n], mask[b : b + 1, :n]).logits[0], out.logits[b],
                                   atol=1e-5, rtol=0)
    # f_θ and g_φ read the same summary as the classifier: with ``first`` the first token's state,
    # so in the first layer s and p do not move when any other token changes
    other = model(torch.cat([ids[:, :1], (ids[:, 1:] + 7) % 50], 1), mask).layers[0]
    same = torch.allclose(other.budget, out.layers[0].budget, atol=1e-6) and torch.allclose(
        other.relevance, out.layers[0].relevance, atol=1e-6)
    assert same == (pooling == "first")
    path = save_checkpoint(tmp_path / "narrow", model, train_tokenizer(["a b c"], 50), ["x", "y", "z"], {})
    loaded = load_checkpoint(path)
    assert (loaded.config.head_dim, loaded.config.pooling) == (1, pooling)
    torch.testing.assert_close(loaded.model(ids, mask).logits, out.logits, atol=2e-3, rtol=0)  # float16 storage
    loaded.model.prune_heads([[0, 2], [1, 2, 3]])
    assert loaded.model.layers[1].attn.qkv.weight.shape == (3 * 3, 32)


def test_head_width_and_pooling_are_checked():
    with pytest.raises(ValueError, match="head_dim must be >= 0"):
        small_config(head_dim=-1)
    with pytest.raises(ValueError, match="divisible"):
        small_config(d_model=30)
    assert small_config(d_model=30, head_dim=7).d_head == 7  # a width of their own needs no divisibility
    with pytest.raises(ValueError, match="pooling must be"):
        small_config(pooling="cls")


def test_a_k_margin_runs_fewer_heads_in_training_only():
    """``TrainingControl(margin=m)``: in training each input runs max(1, ⌊s·H − m⌋) heads and s's
    gradient comes from the gates of that k (so s settles m heads above the edge where its last
    needed head switches on); in eval the same control runs ⌊s·H⌋."""
    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_weighting="gated", n_heads=8))
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.budget_net.net[-1].weight.normal_(0, 3.0)
    ids, mask = batch()
    control = TrainingControl(margin=0.5)
    model.train()
    out = model(ids, mask, mode="soft", control=control)
    for t in out.layers:
        assert torch.equal(t.k, heads_for_budget(t.budget - 0.5 / 8, 8))
        assert torch.equal(t.selected.sum(-1), t.k)
        torch.testing.assert_close(t.head_weights.detach(), t.selected.float())  # the exact top k runs
    assert any(not torch.equal(t.k, heads_for_budget(t.budget, 8)) for t in out.layers)  # the margin bites
    # s's gradient through the first head left out (rank k) is the slope of its rank gate
    # sigmoid((s·H − m − k − ½) / T), centred with the margin
    t, T = out.layers[0], model.cfg.gate_temperature
    b = int(torch.nonzero(t.k < 8)[0])
    (grad,) = torch.autograd.grad(t.head_weights[b, t.order[b, t.k[b]]], t.budget)
    gate = torch.sigmoid((t.budget[b].detach() * 8 - 0.5 - t.k[b] - 0.5) / T)
    torch.testing.assert_close(grad[b], gate * (1 - gate) * 8 / T)
    model.eval()
    with torch.no_grad():
        plain = model(ids, mask, control=control)
    assert all(torch.equal(t.k, heads_for_budget(t.budget, 8)) for t in plain.layers)


def test_standardized_scores_run_the_same_heads_with_a_scale_free_gradient():
    """``TrainingControl(standardize_scores=True)``: the same heads run, and what the gates pass back to g_φ's
    scores z is the gradient of (z − mean) / std — orthogonal to shifting and to scaling each input's
    z — so the gates cannot widen z's spread (with raw z they can)."""
    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_weighting="gated", n_heads=8)).train()
    ids, mask = batch()
    scores = []  # z of the first layer, as g_φ gives it, once per forward pass

    def keep(module, args, z):
        z.retain_grad()
        scores.append(z)

    model.allocators[0].scorer.register_forward_hook(keep)
    runs = [model(ids, mask, mode="soft", control=TrainingControl(standardize_scores=flag)) for flag in (False, True)]
    assert all(torch.equal(a.selected, b.selected) for a, b in zip(runs[0].layers, runs[1].layers))
    along = []
    for out, z in zip(runs, scores, strict=True):
        (out.layers[0].head_weights * torch.randn(out.layers[0].head_weights.shape)).sum().backward()
        centred = z.detach() - z.detach().mean(-1, keepdim=True)
        along.append(((z.grad * centred).sum(-1) / centred.norm(dim=-1), z.grad.sum(-1), z.grad.norm(dim=-1)))
    (raw_scale, _, raw_norm), (scale, shift, norm) = along
    assert (norm > 0).all()
    torch.testing.assert_close(scale, torch.zeros_like(scale), atol=1e-5 * norm.max().item(), rtol=0)
    torch.testing.assert_close(shift, torch.zeros_like(shift), atol=1e-5 * norm.max().item(), rtol=0)
    assert (raw_scale.abs() > 1e-3 * raw_norm).any()  # raw z: a part of the gradient stretches z


def test_first_token_pooling_reads_the_first_real_token():
    """``pooling="first"`` reads position 0 of every input the tokenizer gives; with that token masked
    out (as occlusion removes a token) the next real one takes its place, for the classifier and f_θ."""
    from budgetformer_core.model.budget import first_token, summarize

    x = torch.randn(3, 5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, :2] = False  # input 1 without its first two tokens
    mask[2, 3:] = False  # input 2 padded at the end
    assert torch.equal(first_token(x, mask), torch.stack([x[0, 0], x[1, 2], x[2, 0]]))
    assert torch.equal(first_token(x, None), x[:, 0]) and torch.equal(summarize(x, mask, "first"), first_token(x, mask))
    model = BudgetFormer(small_config(pooling="first", n_layers=1)).eval()
    ids, full = batch(B=2)
    occluded = full.clone()
    occluded[:, 0] = False
    with torch.no_grad():
        a, b = model(ids, full), model(ids, occluded)
    assert not torch.allclose(a.layers[0].budget, b.layers[0].budget)  # f_θ read another token
    assert not torch.allclose(a.logits, b.logits)


def test_summary_norm_spreads_inputs_that_share_most_of_their_summary_and_survives_saving(tmp_path):
    """Summaries that differ little next to what they share (token states of one common mean, as
    pooled pretrained embeddings are) give f_θ nearly one s; standardised (``summary_norm``), the
    same f_θ tells them apart. At inference an input's s does not depend on its batch, the
    structural path equals the masked one, and the running statistics are saved and loaded."""
    from budgetformer_core.io.checkpoint import save_checkpoint
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import train_tokenizer

    torch.manual_seed(0)
    plain = spread(BudgetFormer(small_config(n_layers=1))).train()
    normed = BudgetFormer(small_config(n_layers=1, summary_norm=True))
    normed.load_state_dict(plain.state_dict(), strict=False)  # the same f_θ, g_φ and encoder
    common = torch.randn(32) * 3
    with torch.no_grad():
        plain.tok_emb.weight.copy_(common + 0.05 * torch.randn_like(plain.tok_emb.weight))
        normed.tok_emb.weight.copy_(plain.tok_emb.weight)
    ids, mask = batch(B=4)
    train_ids = torch.randint(3, 50, (64, 12))
    normed.train()
    with torch.no_grad():
        for _ in range(30):  # training batches: the running statistics settle on them
            normed(train_ids, torch.ones_like(train_ids, dtype=torch.bool), mode="soft")
        normed(ids[:1], mask[:1], mode="soft")  # a training batch of one runs on the running statistics
    plain.eval(), normed.eval()
    with torch.no_grad():
        s_plain, s_normed = plain(ids, mask).layers[0].budget, normed(ids, mask).layers[0].budget
        assert s_normed.std() > 10 * s_plain.std()
        alone = torch.cat([normed(ids[b:b + 1], mask[b:b + 1]).layers[0].budget for b in range(4)])
        torch.testing.assert_close(alone, s_normed, atol=1e-6, rtol=0)
        structural, masked = normed(ids, mask, mode="structural"), normed(ids, mask, mode="masked")
        torch.testing.assert_close(structural.logits, masked.logits, atol=1e-5, rtol=0)
        path = save_checkpoint(tmp_path / "normed", normed, train_tokenizer(["a b c"], 50), ["x", "y", "z"], {})
        loaded = load_checkpoint(path).model
        assert int(loaded.allocators[0].norm.num_batches_tracked) == 30
        torch.testing.assert_close(loaded.allocators[0].norm.running_var, normed.allocators[0].norm.running_var)
        torch.testing.assert_close(loaded(ids, mask).logits, normed(ids, mask).logits, atol=0, rtol=0)
