"""Budgeted attention allocation: nested head sets, monotone cost, exact budgets, warm start."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from budgetformer_core.analysis.infer import analyze
from budgetformer_core.cli import main
from budgetformer_core.config import TrainConfig
from budgetformer_core.io.data import load_dataset, load_synthetic
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.model.budget import Control, heads_for_budget_value, rank_heads, soft_gates
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.train.build import warm_start
from budgetformer_core.train.loop import train

from ..conftest import PRECOMPUTED, small_config

BUDGETS = [round(0.1 * i, 1) for i in range(1, 11)]


@pytest.fixture(scope="module")
def bba_checkpoint(tiny_checkpoint, tmp_path_factory):
    """A bba model warm-started from a briefly trained dense model on the synthetic task."""
    data = load_synthetic()
    data.splits = {k: v.head(300) for k, v in data.splits.items()}
    root = tmp_path_factory.mktemp("bba")
    cfg = small_config(vocab_size=200, max_len=64)
    train(data, small_config(method="dense", vocab_size=200, max_len=64), TrainConfig(epochs=1), root / "dense",
          progress=False)
    train(data, small_config(method="bba", vocab_size=cfg.vocab_size), TrainConfig(epochs=2), root / "bba",
          progress=False, init=root / "dense")
    return load_checkpoint(root / "bba")


def test_head_sets_are_nested_and_cost_monotone_on_real_inputs(bba_checkpoint):
    texts = load_synthetic().split("test").texts[:20]
    per_budget = [analyze(bba_checkpoint, texts, Control(budget=b)) for b in BUDGETS]
    for i in range(len(texts)):
        runs = [results[i] for results in per_budget]
        for small, large in zip(runs, runs[1:]):
            for layer_small, layer_large in zip(small.selected_heads, large.selected_heads):
                assert set(layer_small) <= set(layer_large)
            assert small.flops <= large.flops
        assert [r.k for r in runs][-1] == [4, 4]  # b = 1.0 runs every head


def test_exact_budget_k(bba_checkpoint):
    for b, k in [(0.1, 1), (0.25, 1), (0.5, 2), (0.75, 3), (1.0, 4)]:
        [a] = analyze(bba_checkpoint, ["w1 m0 a m1 b"], Control(budget=b))
        assert a.k == [k, k]


def varied_bba() -> BudgetFormer:
    """A small random bba model whose gates give different inputs different heads."""
    torch.manual_seed(0)
    model = BudgetFormer(small_config(method="bba")).eval()
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.gate.net[-1].weight.normal_(0, 3.0)
    return model


def test_structural_equals_masked_and_weights_are_one():
    model = varied_bba()
    ids = torch.randint(3, 50, (3, 9))
    mask = torch.ones_like(ids, dtype=torch.bool)
    for b in (0.25, 0.5, 1.0):
        s = model(ids, mask, mode="structural", control=Control(budget=b))
        m = model(ids, mask, mode="masked", control=Control(budget=b))
        torch.testing.assert_close(s.logits, m.logits, atol=1e-5, rtol=0)
        for t in s.layers:
            assert torch.equal(t.head_weights, t.selected.float())
    # input-conditioned gates: different inputs may pick different heads
    heads = model(ids, mask, control=Control(budget=0.5)).layers[0].selected
    assert len({tuple(r.tolist()) for r in heads}) > 1


@pytest.mark.parametrize("source", ["embedding", "layer"])
def test_gates_on_the_embedding_are_nested_in_every_layer(source):
    """Gates that read the pooled embeddings rank heads the same way at every budget, so the head
    sets nest in every layer; gates on each layer's input (``gate_source="layer"``) need not."""
    torch.manual_seed(0)
    model = BudgetFormer(small_config(method="bba", gate_source=source, n_layers=3)).eval()
    with torch.no_grad():
        for alloc in model.allocators:
            alloc.gate.net[-1].weight.normal_(0, 0.3)
    ids = torch.randint(3, 50, (64, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids, dtype=torch.bool)
    runs = [model(ids, mask, control=Control(budget=b)).layers for b in (0.25, 0.5, 0.75, 1.0)]
    nested = all(bool((small.selected <= large.selected).all())
                 for lo, hi in zip(runs, runs[1:]) for small, large in zip(lo, hi))
    assert nested == (source == "embedding")


def test_static_gates_pick_the_same_heads_for_every_input():
    model = BudgetFormer(small_config(method="bba", gate_input=False)).eval()
    with torch.no_grad():
        model.allocators[0].gate.scores.copy_(torch.tensor([0.1, 3.0, -1.0, 2.0]))
    out = model(torch.randint(3, 50, (4, 6)), torch.ones(4, 6, dtype=torch.bool), control=Control(budget=0.5))
    assert out.layers[0].selected.tolist() == [[False, True, False, True]] * 4


def test_soft_gates_follow_top_k_and_pass_gradients():
    z = torch.tensor([[4.0, -2.0, 1.0, 0.0]], requires_grad=True)
    gates = soft_gates(z, rank_heads(z), torch.tensor([2]), temperature=0.1)
    assert gates.round().tolist() == [[1.0, 0.0, 1.0, 0.0]]
    gates.sum().backward()
    assert z.grad.abs().sum() > 0
    full = soft_gates(z.detach(), rank_heads(z.detach()), torch.tensor([4]), temperature=0.1)
    assert full.tolist() == [[1.0, 1.0, 1.0, 1.0]]


def test_warm_start_copies_the_shared_weights():
    dense = BudgetFormer(small_config(method="dense"))
    bba = BudgetFormer(small_config(method="bba"))
    fresh = warm_start(bba, dense)
    assert fresh and all(".alloc.gate." in name for name in fresh)
    assert torch.equal(bba.layers[0].attn.qkv.weight, dense.layers[0].attn.qkv.weight)
    with pytest.raises(ValueError, match="has shape"):
        warm_start(BudgetFormer(small_config(method="bba", d_model=64)), dense)


def test_posthoc_pruning_ranks_heads_by_importance(tmp_path):
    from budgetformer_core.io.checkpoint import Checkpoint
    from budgetformer_core.io.tokenizer import train_tokenizer
    from budgetformer_core.train.prune import head_importance, posthoc_checkpoint

    torch.manual_seed(0)
    dense = BudgetFormer(small_config(method="dense")).eval()
    ids = [[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16]]
    importance = head_importance(dense, ids, [0, 1, 2])
    assert importance.shape == (2, 4) and bool((importance >= 0).all())
    torch.testing.assert_close(importance.norm(dim=1), torch.ones(2))
    # a head whose output projection columns are zero does nothing: least important
    with torch.no_grad():
        dense.layers[0].attn.out.weight[:, 8:16] = 0  # head 1 of layer 0 (d_head 8)
    importance = head_importance(dense, ids, [0, 1, 2])
    assert int(importance[0].argmin()) == 1
    tok = train_tokenizer(["a b c"], 50)
    ckpt = Checkpoint(dense, tok, ["x", "y", "z"])
    pruned = load_checkpoint(posthoc_checkpoint(ckpt, importance, tmp_path / "posthoc", {}))
    out = pruned.model(torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.bool), control=Control(budget=0.75))
    assert not bool(out.layers[0].selected[0, 1])  # the dead head is pruned first
    full = pruned.model(torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.bool), control=Control(budget=1.0))
    dense_logits = dense(torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.bool)).logits
    torch.testing.assert_close(full.logits, dense_logits, atol=2e-3, rtol=0)  # float16 storage


def test_fixed_budget_training_runs_at_its_budget(tmp_path):
    data = load_synthetic()
    data.splits = {k: v.head(64) for k, v in data.splits.items()}
    cfg = small_config(method="bba", gate_input=False, vocab_size=200, max_len=64)
    train(data, cfg, TrainConfig(epochs=1, train_budget=0.25), tmp_path / "static", progress=False)
    ckpt = load_checkpoint(tmp_path / "static")
    assert ckpt.config.default_budget == 0.25
    [a] = analyze(ckpt, ["w1 m0 a m1 b"])
    assert a.k == [1, 1]
    # a fixed budget with static gates is a fixed head set: pruned once, the top-scored head kept
    assert [len(heads) for heads in ckpt.config.kept_heads] == [1, 1]
    assert [layer.attn.n_heads for layer in ckpt.model.layers] == [1, 1]
    assert analyze(ckpt, ["w1 m0 a"], Control(budget=0.25))[0].k == [1, 1]  # its own budget
    with pytest.raises(ValueError, match="pruned to 1 of 4"):
        analyze(ckpt, ["w1 m0 a"], Control(budget=0.5))


def test_eval_reports_estimated_and_exact_attention_cost_and_active_heads(bba_checkpoint, capsys):
    estimated = []
    for b in (0.25, 0.5, 0.75, 1.0):
        assert main(["eval", "--checkpoint", str(bba_checkpoint.path), "--budget", str(b), "--limit", "50",
                     "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        k = heads_for_budget_value(b, 4)
        assert r["attention_cost"] == r["mean_heads_fraction"] == k / 4  # exact: k of H heads per layer
        assert [len(layer) for layer in r["head_usage"]] == [4, 4]
        assert [sum(layer) for layer in r["head_usage"]] == pytest.approx([k, k])  # fraction of inputs per head
        estimated.append(r["attention_cost_estimated"])
    assert estimated == sorted(estimated) and estimated[-1] == 1.0


SWEEP = [round(0.05 * i, 2) for i in range(1, 21)]
SHIPPED_BBA = sorted(p.name for p in PRECOMPUTED.glob("*-bba"))
FORWARD_CHECK = 512
"""Inputs whose full structural forward pass is compared with the allocators' choice."""


@pytest.mark.parametrize("name", SHIPPED_BBA)
@pytest.mark.artifacts
def test_shipped_bba_head_sets_are_nested_on_every_test_input(name):
    """Every test input, every layer, b = 0.05, 0.10, …, 1.0: the heads at a budget are among
    those at any larger one, and the cost never falls.

    The heads come from each layer's own allocator. Its gates read the pooled embedding output
    (``gate_source="embedding"``, or static gates that read nothing), which no budget changes,
    so the allocators are called on that context once per budget without running the layers;
    that this is what the model's structural forward pass selects is checked on the first
    :data:`FORWARD_CHECK` inputs at one budget (a MiniLM's forward pass over AG News's 7,600
    texts alone takes minutes)."""
    from budgetformer_core.analysis.infer import evaluate
    from budgetformer_core.io.tokenizer import encode, pad
    from budgetformer_core.model.trace import ForwardContext
    from rebuild.measure import local_copy

    ckpt = load_checkpoint(PRECOMPUTED / name)
    cfg = ckpt.model.cfg
    assert cfg.gate_source == "embedding" or not cfg.gate_input, "gates that read the layer input need the full pass"
    data = local_copy(ckpt.meta["dataset"])
    if data and not data.is_dir():
        pytest.skip(f"{data} is not here")
    split = load_dataset(ckpt.meta["dataset"], data, seed=ckpt.meta.get("split_seed", 0))
    ids, _ = encode(ckpt.tokenizer, split.split("test").texts, ckpt.config.max_len)
    model = ckpt.model.eval()
    batches = [pad(ids[i : i + 512]) for i in range(0, len(ids), 512)]

    with torch.no_grad():  # one context per batch: its embeddings and their summary serve every budget
        # (B, T, D) embeddings, a pair's with its segments as the forward pass reads them
        contexts = [ForwardContext(batch.mask, Control(), "structural", model.embed(batch.ids, batch.types),
                                   pooling=model.cfg.pooling) for batch in batches]

    def heads(b: float) -> torch.Tensor:
        """(N, L, H) bool: the heads every layer's allocator runs on every input at budget b."""
        out = []
        with torch.no_grad():
            for base in contexts:
                ctx = dataclasses.replace(base, control=Control(budget=b))  # the same memo
                x = ctx.embeddings
                out.append(torch.stack([layer.alloc.allocate(x, ctx).selected for layer in model.layers], 1))
        return torch.cat(out)  # (N, L, H)

    previous = None
    for b in SWEEP:
        selected = heads(b)
        if previous is not None:
            violations = int((previous & ~selected).any(-1).sum())  # (N, L) pairs losing a head
            assert violations == 0, f"{name}: {violations} input × layer pairs not nested at b = {b}"
            assert (selected.sum(-1) >= previous.sum(-1)).all()  # heads run, hence cost, never fall
        previous = selected
    assert bool(previous.all())  # b = 1 runs every head
    n = FORWARD_CHECK
    ev = evaluate(model, ids[:n], split.split("test").labels[:n], Control(budget=0.5), batch_size=256)
    assert (ev.selected == heads(0.5)[:n].numpy()).all(), "the forward pass selects other heads than its allocators"


def test_one_head_set_per_batch_equals_each_input_run_with_that_set():
    """head_sets="batch": the heads are the top k of the batch's mean gate scores, the same for
    every input, and each input's logits are those of the model pruned to that set."""
    model = varied_bba()
    ids = torch.randint(3, 50, (5, 9))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[3, 6:] = False
    with torch.no_grad():
        own = model(ids, mask, control=Control(budget=0.5))
        batch = model(ids, mask, control=Control(budget=0.5, head_sets="batch"))
    assert len({tuple(r.tolist()) for r in own.layers[0].selected}) > 1  # inputs differ on their own
    sets = []
    for own_t, t in zip(own.layers, batch.layers, strict=True):
        assert (t.selected == t.selected[:1]).all() and (t.k == 2).all()
        top = rank_heads(own_t.gate_scores.mean(0, keepdim=True))[0, :2]  # the batch mean's top 2
        assert sorted(top.tolist()) == t.selected[0].nonzero().flatten().tolist()
        sets.append(top.tolist())
    pruned = BudgetFormer(model.cfg).eval()
    pruned.load_state_dict(model.state_dict())
    pruned.prune_heads(sets)
    with torch.no_grad():
        for i in range(5):
            alone = pruned(ids[i : i + 1, : int(mask[i].sum())], mask[i : i + 1, : int(mask[i].sum())])
            torch.testing.assert_close(batch.logits[i : i + 1], alone.logits, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="head_sets"):
        Control(head_sets="layer")


def test_cli_bench_with_one_head_set_per_batch(capsys):
    assert main(["bench", "--set", "method=bba", "--set", "n_layers=1", "--set", "max_len=16",
                 "--batch-size", "3", "--budgets", "0.5", "--repeats", "2", "--warmup", "0",
                 "--head-sets", "batch", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["head_sets"] == "batch" and [r["budget"] for r in result["rows"]] == ["0.5", "per-input"]
