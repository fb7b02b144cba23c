"""A tiny training run lowers the loss and records the history the app plots."""

from __future__ import annotations

import pytest
import torch

from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.io.splits import Split, TextDataset
from budgetformer_core.model.allocators import method_class
from budgetformer_core.model.budget import Control
from budgetformer_core.model.encoder import BudgetFormer
from budgetformer_core.overrides import apply_overrides
from budgetformer_core.train.build import input_logits, input_losses
from budgetformer_core.train.loop import by_length, keep_ranking, lr_at, param_groups, set_seed, train

from ..conftest import small_config, train_tiny


def keyword_task(n: int, seed: int) -> Split:
    """Three classes, each marked by its own keyword among random noise words."""
    import random

    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        y = i % 3
        words = [f"n{rng.randrange(30)}" for _ in range(12)]
        words[rng.randrange(12)] = ("alpha", "beta", "gamma")[y]
        texts.append(" ".join(words))
        labels.append(y)
    return Split(texts, labels)


@pytest.mark.parametrize("method", ["budgetformer", "dense"])
def test_tiny_run_lowers_the_loss(tmp_path, method):
    data = TextDataset("keywords", ["a", "b", "c"], {"train": keyword_task(240, 0),
                       "validation": keyword_task(60, 1), "test": keyword_task(60, 2)})
    result = train(data, small_config(method=method, vocab_size=200, max_len=64),
                   TrainConfig(epochs=4, batch_size=16, lr=3e-3), tmp_path / method, progress=False)
    losses = [h["task_loss"] for h in result.history]
    assert losses[-1] < losses[0] * 0.7
    if method == "dense":  # the task loss alone made up its total
        assert [h["loss_terms"] for h in result.history] == [{"task": h["task_loss"]} for h in result.history]
    assert [h["epoch"] for h in result.history] == [1, 2, 3, 4]
    betas = [h["beta"] for h in result.history]
    assert betas == sorted(betas)
    assert (tmp_path / method / "model.safetensors").is_file()


@pytest.mark.parametrize("method", ["budgetformer", "bba", "dense"])
def test_new_lr_is_the_rate_of_the_classifier_and_the_allocators_only(method):
    model = BudgetFormer(small_config(method=method))
    names = {id(p): n for n, p in model.named_parameters()}
    fresh = {n for n in names.values() if n.startswith("head.") or ".alloc." in n}
    assert fresh and any(".alloc." in n for n in fresh) == (method != "dense")
    cfg = TrainConfig(lr=1e-4, new_lr=2e-3, weight_decay=0.01)
    groups = param_groups(model, cfg)
    in_groups = [names[id(p)] for g in groups for p in g["params"]]
    assert sorted(in_groups) == sorted(names.values())  # every parameter once
    for g in groups:
        got = {names[id(p)] for p in g["params"]}
        assert g["lr_scale"] == pytest.approx(20.0 if got <= fresh else 1.0) and (got <= fresh or not got & fresh)
        assert all((p.dim() >= 2 and "emb" not in names[id(p)]) == (g["weight_decay"] > 0) for p in g["params"])
    # the scheduled rate at the peak (after warm-up) is lr for the encoder, new_lr for the fresh networks
    peak = lr_at(int(0.1 * 100), 100, cfg)
    assert {round(peak * g["lr_scale"], 12) for g in groups} == {1e-4, 2e-3}
    plain = param_groups(model, TrainConfig(weight_decay=0.01))  # new_lr 0: lr everywhere, decayed group first
    assert [g["lr_scale"] for g in plain] == [1.0, 1.0] and plain[0]["weight_decay"] == 0.01


@pytest.mark.parametrize("n", [1000, 1003])
def test_length_groups_batch_inputs_of_similar_length_and_keep_each_once(n):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, 128, (n,), generator=g).tolist()
    perm = torch.randperm(n, generator=g).tolist()
    assert by_length(perm, lengths, 32, 0, g) == perm  # off
    grouped = by_length(perm, lengths, 32, 5, torch.Generator().manual_seed(1))
    assert sorted(grouped) == list(range(n))  # every input once
    assert grouped == by_length(perm, lengths, 32, 5, torch.Generator().manual_seed(1))  # the generator decides
    batches = [grouped[b : b + 32] for b in range(0, n, 32)]
    # each batch comes from one group of 5 × 32 consecutive inputs of perm
    group_of = {i: p // 160 for p, i in enumerate(perm)}
    assert all(len({group_of[i] for i in batch}) == 1 for batch in batches)
    assert all(len(batch) == 32 for batch in batches[:-1]) and len(batches[-1]) == (n % 32 or 32)
    assert [group_of[i] for i in batches[-1]] == [group_of[perm[-1]]] * len(batches[-1])  # the short one last

    def padded(order):  # token positions computed: each batch as long as its longest input
        return sum(max(lengths[i] for i in order[b : b + 32]) * len(order[b : b + 32]) for b in range(0, n, 32))

    assert padded(grouped) < 0.75 * padded(perm)


def test_set_seed_returns_seed():
    assert set_seed(123) == 123


def test_overrides_convert_and_reject_unknown_keys():
    m, t = apply_overrides(ModelConfig(), TrainConfig(), ["n_heads=4", "lr=0.01", "random_crop=true", "tau=0.5"])
    assert (m.n_heads, t.lr, t.random_crop, m.tau) == (4, 0.01, True, 0.5)
    with pytest.raises(ValueError, match="unknown config key 'learning_rate'"):
        apply_overrides(ModelConfig(), TrainConfig(), ["learning_rate=1"])
    with pytest.raises(ValueError, match="expected int"):
        apply_overrides(ModelConfig(), TrainConfig(), ["n_heads=four"])
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(ModelConfig(), TrainConfig(), ["n_heads"])
    with pytest.raises(ValueError, match="s_min"):
        apply_overrides(ModelConfig(), TrainConfig(), ["s_min=0.9", "s_max=0.1"])


def test_the_history_holds_each_loss_term_as_it_entered_the_total(tiny_checkpoint):
    """history.json's ``loss_terms``: each term the run's loss added, times its λ from the run's
    training config, adding up to the epoch's mean total; a term whose λ is 0 is not there."""
    import json

    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.train.history import TERM_COLUMNS

    ckpt = load_checkpoint(tiny_checkpoint)
    train_cfg = ckpt.meta["train"]  # the adaptive recipe, λ_d and λ_u off
    assert train_cfg["recipe"] == "adaptive" and not train_cfg["lambda_difficulty"] and not train_cfg["lambda_balance"]
    weights = {"task": 1.0, "budget": train_cfg["lambda_budget"], "entropy_term": 1.0,
               "cost": train_cfg["lambda_cost"]}
    history = json.loads((tiny_checkpoint / "history.json").read_text())
    assert history == ckpt.history and len(history) == 2
    for h in history:
        assert h["loss_terms"] == pytest.approx({term: w * h[TERM_COLUMNS[term]] for term, w in weights.items()},
                                                rel=1e-12)
        assert h["loss_terms"]["cost"] > 0
        assert sum(h["loss_terms"].values()) == pytest.approx(h["loss"], abs=1e-6)
    # β(t) < 0 in the first epoch: the entropy term lowers the total; > 0 in the second
    assert [h["loss_terms"]["entropy_term"] < 0 for h in history] == [True, False]


def test_tokenizer_ids_are_canonical():
    """The WordPiece trainer numbers equal-frequency tokens in hash order (a new order each run);
    ours renumbers them: specials first, then sorted."""
    from budgetformer_core.io.data import load_bbc
    from budgetformer_core.io.synthetic import make_synthetic
    from budgetformer_core.io.tokenizer import SPECIAL_TOKENS, canonical_order, is_canonical, train_tokenizer

    bbc = train_tokenizer(load_bbc().split("train").texts[:300], vocab_size=3000)
    assert is_canonical(bbc) and bbc.get_vocab_size() == 3000
    assert [bbc.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    assert [bbc.id_to_token(i) for i in range(3000)] == canonical_order(bbc)
    assert bbc.encode("shares rose").tokens == ["shares", "rose"]
    texts = make_synthetic(500, seed=0).texts
    assert train_tokenizer(texts).to_str() == train_tokenizer(texts).to_str()


def test_the_same_run_writes_the_same_files(tiny_checkpoint, tmp_path):
    """What makes ``make precompute`` reproducible: the same recipe gives the same bytes."""
    again = train_tiny(tmp_path / "again")
    names = sorted(p.name for p in tiny_checkpoint.iterdir())
    assert names == sorted(p.name for p in again.iterdir()) and "model.safetensors" in names
    for name in names:
        assert (tiny_checkpoint / name).read_bytes() == (again / name).read_bytes(), name


def test_bbc_vocabulary_is_the_same_in_every_process():
    """The Rust trainer's hash maps are seeded per process, and on a small corpus its ties can
    learn a different vocabulary each run; on BBC's training split (the shipped recipe) two
    processes learn the same one, so its models rebuild exactly."""
    import subprocess
    import sys

    code = ("from budgetformer_core.io.data import load_bbc; "
            "from budgetformer_core.io.tokenizer import train_tokenizer; "
            "print(train_tokenizer(load_bbc().split('train').texts).to_str())")
    a, b = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2))
    assert a == b and '"[SEP]":2' in a.replace(" ", "")


def test_random_k_draws_every_inputs_k_before_f_theta_takes_over():
    """``random_k``: early in training each input of a batch runs its own random k on 1 … ⌊s_max·H⌋
    (g_φ learns to rank for every k); afterwards f_θ's k, as with the other recipes throughout."""
    import random

    gated = ModelConfig(method="budgetformer", head_weighting="gated")  # 8 heads
    recipe = TrainConfig(random_k=0.5, s_max=0.5, structural_from=0.25)  # k on 1 … 4
    rng = random.Random(0)

    def batch_control(heads, t, n, cfg, train_cfg, rng):
        return method_class(cfg).batch_control(heads, t, n, cfg, train_cfg, rng)

    early = batch_control(Control(), 0.2, 400, gated, recipe, rng)
    assert len(early.k) == 400 and set(early.k) == {1, 2, 3, 4} and early.soft_gates
    later = batch_control(Control(), 0.3, 400, gated, recipe, rng)
    assert len(later.k) == 400 and later.k != early.k and not later.soft_gates  # fresh draws, hard gates
    assert batch_control(Control(), 0.6, 400, gated, recipe, rng).k is None
    assert batch_control(Control(), 0.2, 4, ModelConfig(head_weighting="scaled"), recipe, rng).k is None  # paper
    assert batch_control(Control(), 0.2, 4, gated, TrainConfig(), rng).k is None  # off by default
    b = batch_control(Control(), 0.2, 4, ModelConfig(method="bba"), recipe, rng).budget
    assert recipe.budget_min <= b <= 1.0
    with pytest.raises(ValueError, match="random_k"):
        TrainConfig(random_k=1.5)


def test_after_random_k_f_theta_alone_learns():
    """The end of ``random_k``: with f_θ only f_θ keeps its gradients; without f_θ (a constant k)
    all but g_φ do; what was frozen before has none anyway."""
    def learning(model):
        ids, mask = torch.randint(3, 50, (4, 12)), torch.ones(4, 12, dtype=torch.bool)
        model.zero_grad(set_to_none=True)
        model.train()(ids, mask, mode="soft").logits.sum().backward()
        keep_ranking(model)
        return {n.split(".")[0] if not n.startswith("layers") else ".".join(n.split(".")[2:4])
                for n, p in model.named_parameters() if p.grad is not None}

    assert learning(BudgetFormer(small_config(head_weighting="gated"))) == {"alloc.budget_net"}
    ablation = BudgetFormer(small_config(head_weighting="gated", use_budget_net=False))
    ablation.layers[0].attn.requires_grad_(False)  # frozen before training
    kept = learning(ablation)
    assert "alloc.scorer" not in kept and {"tok_emb", "head", "ff.0", "ln1.weight", "attn.qkv"} <= kept
    assert all(p.grad is None for p in ablation.layers[0].attn.parameters())
    assert all(p.grad is not None for p in ablation.layers[1].attn.parameters())


def test_input_losses_are_the_per_example_losses_of_evaluate_on_a_whole_split(tiny_checkpoint):
    """The warm start's loss per training input (``difficulty_from="init"``) is the loss that
    ``evaluate``'s probabilities give, on every input of the split, kept in float64."""
    import numpy as np

    from budgetformer_core.analysis.adaptivity import per_example_loss
    from budgetformer_core.analysis.infer import evaluate
    from budgetformer_core.io.data import load_synthetic
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import encode

    ckpt, split = load_checkpoint(tiny_checkpoint), load_synthetic().split("train").head(300)
    ids, _ = encode(ckpt.tokenizer, split.texts, 10**9)  # uncut: input_losses reads the first max_len
    losses = input_losses(input_logits(ckpt.model, ids), split.labels)
    assert losses.dtype == torch.float64 and losses.shape == (300,)
    cut = [x[: ckpt.model.cfg.max_len] for x in ids]
    expected = per_example_loss(evaluate(ckpt.model, cut, split.labels).probs, split.labels)
    np.testing.assert_allclose(losses.numpy(), expected, atol=1e-4, rtol=1e-4)


def test_difficulty_from_init_ranks_by_the_warm_start_and_needs_one(tiny_checkpoint, tmp_path):
    """A run with ``difficulty_from="init"`` pulls s towards the warm start's ranking: on one
    thread, where the same run gives the same sums, its λ_d term differs from that of the run
    that ranks by the model's own loss (the two start alike: the model is its warm start).
    Without a warm start it is refused before anything runs."""
    from budgetformer_core.io.data import load_synthetic
    from budgetformer_core.measure.timing import torch_threads

    data = load_synthetic()
    data.splits = {k: v.head(96) for k, v in data.splits.items()}
    cfg = small_config(vocab_size=200, max_len=64, head_weighting="gated", gate_source="embedding")
    gaps = {}
    for source in ("model", "init"):
        train_cfg = TrainConfig(epochs=2, batch_size=32, lr=1e-2, lambda_difficulty=5.0, difficulty_from=source)
        with torch_threads(1):
            result = train(data, cfg, train_cfg, tmp_path / source, progress=False, init=tiny_checkpoint)
        gaps[source] = result.history[-1]["difficulty_loss"]
    assert gaps["model"] > 0 and gaps["init"] > 0 and gaps["model"] != gaps["init"]
    with pytest.raises(ValueError, match="give an init checkpoint"):
        train(data, cfg, TrainConfig(lambda_difficulty=5.0, difficulty_from="init"), tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()


def test_a_training_step_ranks_its_rows_by_their_own_entries_of_the_warm_starts_losses():
    """``train_step`` hands the loss the warm start's losses of the batch's rows, in the batch's
    order: λ_d's term is mean (s − target)² with the targets of those rows' ranks."""
    from budgetformer_core.model.losses import difficulty_targets
    from budgetformer_core.train.loop import Training, train_step

    torch.manual_seed(0)
    model = BudgetFormer(small_config(head_weighting="gated")).train()
    cfg = TrainConfig(lambda_difficulty=5.0, difficulty_from="init", s_min=0.1, s_max=0.7)
    run = Training.start(model, cfg)
    run.difficulty = torch.arange(10, 0, -1, dtype=torch.float64)  # (N,) input 0 the hardest
    rows, labels = [5, 2, 9, 0], torch.zeros(10, dtype=torch.long)
    views = [torch.randint(3, 50, (7,)).tolist() for _ in rows]
    terms, out, _ = train_step(run, model, views, rows, labels, cfg, 10, torch.device("cpu"), "test")
    s = torch.stack([t.budget for t in out.layers]).detach()  # (L, B)
    target = difficulty_targets(run.difficulty[rows], cfg.s_min, cfg.s_max).float()  # ranks 1, 2, 0, 3
    assert target.tolist() == pytest.approx([0.3, 0.5, 0.1, 0.7])
    own = torch.nn.functional.cross_entropy(out.logits.detach(), labels[rows], reduction="none")
    assert difficulty_targets(own, cfg.s_min, cfg.s_max).tolist() != target.tolist()  # the model would rank otherwise
    assert terms.difficulty == pytest.approx(((s - target) ** 2).mean().item(), rel=1e-5)


def test_a_distilling_step_learns_from_the_warm_starts_logits_of_its_own_rows(tmp_path):
    """With ``distill`` = w, a step's task term is (1 − w)·CE(labels, with label smoothing) plus
    w·T²·KL(softmax(t/T) ‖ softmax(z/T)), T = 2, t being the warm start's logits of the batch's
    rows in the batch's order (written out here from the softmaxes). Without a warm start the
    run is refused before anything runs."""
    from budgetformer_core.io.data import load_synthetic
    from budgetformer_core.train.loop import Training, train_step

    torch.manual_seed(0)
    model = BudgetFormer(small_config()).train()
    cfg = TrainConfig(distill=0.75, label_smoothing=0.1)
    run = Training.start(model, cfg)
    run.teacher = torch.randn(10, model.cfg.n_classes) * 3  # (N, C)
    rows, labels = [5, 2, 9, 0], torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 0, 1]) % model.cfg.n_classes
    views = [torch.randint(3, 50, (7,)).tolist() for _ in rows]
    terms, out, y = train_step(run, model, views, rows, labels, cfg, 10, torch.device("cpu"), "test")
    z, t = out.logits.detach().double() / 2, run.teacher[rows].double() / 2
    q = t.softmax(-1)
    kl = (q * (q.log() - z.log_softmax(-1))).sum(-1).mean() * 4
    ce = torch.nn.functional.cross_entropy(z * 2, labels[rows], label_smoothing=0.1)
    assert terms.task == pytest.approx((0.25 * ce + 0.75 * kl).item(), rel=1e-5)
    assert kl.item() > 0.1  # the teacher's answers are not the model's
    data = load_synthetic()
    with pytest.raises(ValueError, match="give an init checkpoint"):
        train(data, small_config(), TrainConfig(distill=0.5), tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError, match="distill must be in"):
        TrainConfig(distill=1.5)
