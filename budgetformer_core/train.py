"""Training: tokenizer on the training split, AdamW with warm-up and cosine decay, the
BudgetFormer loss, per-epoch validation, a history of every epoch, and a checkpoint at the end.

The checkpoint holds the final epoch's weights (no picking the best epoch on validation), and
its reported test figures are measured on the model exactly as stored.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from .budget import Control, heads_for_budget_value, rank_heads
from .checkpoint import check_out_dir, load_checkpoint, round_weights, save_checkpoint
from .config import ModelConfig, TrainConfig, to_dict
from .data import TextDataset
from .infer import evaluate
from .losses import total_loss
from .model import BudgetFormer
from .tokenizer import encode, pad, train_tokenizer


def set_seed(seed: int) -> int:
    """Seed Python, NumPy and PyTorch; returns the seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``warmup_frac`` of the steps, then cosine decay to 0."""
    warm = max(1, int(cfg.warmup_frac * total))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def augment(ids: list[int], max_len: int, cfg: TrainConfig, rng: random.Random) -> list[int]:
    """A random ``max_len`` window (``random_crop``) with ``token_dropout`` of its tokens dropped."""
    if len(ids) > max_len:
        start = rng.randrange(len(ids) - max_len + 1) if cfg.random_crop else 0
        ids = ids[start : start + max_len]
    if cfg.token_dropout:
        kept = [t for t in ids if rng.random() >= cfg.token_dropout]
        ids = kept or ids[:1]
    return ids


def sinusoids(length: int, dim: int, std: float = 0.02) -> torch.Tensor:
    """(length, dim) sine / cosine position table of Vaswani et al., scaled to ``std``."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]  # (T, 1)
    freq = torch.exp(-math.log(10_000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (D/2,)
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table * (std / table.std())


def lsa_embeddings(ids: list[list[int]], vocab_size: int, dim: int, seed: int, std: float = 0.02) -> torch.Tensor:
    """(vocab_size, dim) token vectors from a truncated SVD of the TF-IDF token-document matrix."""
    from scipy.sparse import csr_matrix
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfTransformer

    rows = np.repeat(np.arange(len(ids)), [len(x) for x in ids])
    cols = np.concatenate([np.asarray(x) for x in ids])
    counts = csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(ids), vocab_size))  # (docs, vocab)
    tfidf = TfidfTransformer(sublinear_tf=True).fit_transform(counts)
    svd = TruncatedSVD(min(dim, min(tfidf.shape) - 1), random_state=seed).fit(tfidf)
    vectors = np.zeros((vocab_size, dim), dtype=np.float32)
    vectors[:, : svd.components_.shape[0]] = (svd.components_ * svd.singular_values_[:, None]).T
    vectors *= std / max(vectors.std(), 1e-12)
    return torch.from_numpy(vectors)


RECIPE_WEIGHTING = {"paper": "scaled", "adaptive": "gated"}
"""BudgetFormer's head weighting under each training recipe (see ``TrainConfig.recipe``)."""

SHAPE_FIELDS = ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "pooling")


def warm_start(model: BudgetFormer, source: BudgetFormer) -> list[str]:
    """Copy every weight ``source`` shares with ``model`` (by name; shapes must agree) into it.

    Returns:
        The names of ``model``'s weights that were not copied (they keep their fresh init).
    """
    own, theirs = model.state_dict(), source.state_dict()
    shared = {k: v for k, v in theirs.items() if k in own}
    for k, v in shared.items():
        if v.shape != own[k].shape:
            raise ValueError(
                f"the init checkpoint's {k} has shape {tuple(v.shape)}, this model's {tuple(own[k].shape)}"
            )
    model.load_state_dict(shared, strict=False)
    return sorted(set(own) - set(shared))


@dataclass
class TrainResult:
    """Where the checkpoint went and what it scored."""

    checkpoint: Path
    history: list[dict[str, Any]]
    test: dict[str, Any]
    seconds: float


def train(
    dataset: TextDataset,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str | Path,
    progress: bool = True,
    device: torch.device | None = None,
    init: str | Path | None = None,
    meta: dict[str, Any] | None = None,
) -> TrainResult:
    """Train a model on ``dataset`` and write a checkpoint to ``out_dir``.

    With ``init`` (a checkpoint directory, e.g. a trained dense model) the new model takes its
    tokenizer, its shape and every weight the two share — the dense warm start of ``bba``; its
    own networks (gates, f_θ, g_φ) start fresh. ``meta`` (e.g. the command that ran) is stored
    in the checkpoint's config.json. Nothing time-dependent is stored, so the same run writes the
    same bytes.
    """
    t0 = time.perf_counter()
    check_out_dir(out_dir, force=True)  # a bad --out fails now, not after the run; a checkpoint is replaced
    set_seed(train_cfg.seed)
    device = device or default_device()
    train_split = dataset.split("train")
    if train_cfg.max_train:
        train_split = train_split.head(train_cfg.max_train)
    start = load_checkpoint(init) if init is not None else None
    if start is not None:
        tok = start.tokenizer
        shape = {k: getattr(start.config, k) for k in SHAPE_FIELDS}
        model_cfg = dataclasses.replace(model_cfg, **shape)
    else:
        tok = train_tokenizer(train_split.texts, model_cfg.vocab_size)
    model_cfg = dataclasses.replace(model_cfg, vocab_size=tok.get_vocab_size(), n_classes=dataset.n_classes)
    if model_cfg.variant == "bba" and train_cfg.train_budget:  # a fixed-budget model runs at its budget
        model_cfg = dataclasses.replace(model_cfg, default_budget=train_cfg.train_budget)
    if model_cfg.variant == "budgetformer":  # the recipe decides how the head weights work
        model_cfg = dataclasses.replace(model_cfg, head_weighting=RECIPE_WEIGHTING[train_cfg.recipe])
    model = BudgetFormer(model_cfg).to(device)
    if start is not None:
        warm_start(model, start.model)
    dense = model_cfg.variant == "dense"

    crop_len = 10**9 if train_cfg.random_crop else model_cfg.max_len
    train_ids, _ = encode(tok, train_split.texts, crop_len)
    val_split = dataset.split("validation")
    val_ids, _ = encode(tok, val_split.texts, model_cfg.max_len)
    labels = torch.tensor(train_split.labels)
    if train_cfg.embed_init == "lsa" and start is None:
        with torch.no_grad():
            lsa = lsa_embeddings(train_ids, model_cfg.vocab_size, model_cfg.d_model, train_cfg.seed)
            model.tok_emb.weight.copy_(lsa)
    if train_cfg.pos_init == "sinusoidal" and start is None:
        with torch.no_grad():
            model.pos_emb.weight.copy_(sinusoids(model_cfg.max_len, model_cfg.d_model))

    if train_cfg.freeze_gates:
        for alloc in model.allocators:
            alloc.gate.requires_grad_(False)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in params if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in params if not (p.dim() >= 2 and "emb" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": train_cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=train_cfg.lr,
    )
    steps_per_epoch = math.ceil(len(train_ids) / train_cfg.batch_size)
    total_steps = steps_per_epoch * train_cfg.epochs
    gen = torch.Generator().manual_seed(train_cfg.seed)
    rng = random.Random(train_cfg.seed)
    # random heads (head_choice="random") are drawn from the trainer's own stream: fresh every step
    heads = Control(generator=torch.Generator().manual_seed(train_cfg.seed + 1))
    # the gated weights learn from every head's gradient: the soft path (all heads) throughout
    # gated weights learn from every head's output: the soft path throughout, with the soft gates
    # themselves as weights before ``structural_from`` and the exact top k (straight-through) after
    gated = model_cfg.head_weighting == "gated" and model_cfg.variant == "budgetformer"
    structural_from = 1.0 if gated else train_cfg.structural_from
    history: list[dict[str, Any]] = []
    step = 0
    averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(train_cfg.ema)) if train_cfg.ema else None

    def final() -> BudgetFormer:
        """The model to validate and keep: the weight average when ``ema`` is on."""
        return averaged.module if averaged is not None else model

    for epoch in range(train_cfg.epochs):
        model.train()
        sums = {"loss": 0.0, "task": 0.0, "budget": 0.0, "entropy": 0.0, "cost": 0.0, "correct": 0}
        s_sum = torch.zeros(model_cfg.n_layers)
        perm = torch.randperm(len(train_ids), generator=gen).tolist()
        desc = f"epoch {epoch + 1}/{train_cfg.epochs}"
        bar = tqdm(range(steps_per_epoch), desc=desc, disable=not progress, leave=False)
        for b in bar:
            rows = perm[b * train_cfg.batch_size : (b + 1) * train_cfg.batch_size]
            batch = pad([augment(train_ids[i], model_cfg.max_len, train_cfg, rng) for i in rows])
            y = labels[rows].to(device)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total_steps, train_cfg)
            t = step / max(1, total_steps - 1)  # training progress in [0, 1]
            mode = "dense" if dense else ("structural" if t >= structural_from else "soft")
            control = dataclasses.replace(heads, soft_gates=t < train_cfg.structural_from) if gated else heads
            if model_cfg.variant == "bba":  # one requested budget per batch
                control = Control(budget=train_cfg.train_budget or rng.uniform(train_cfg.budget_min, 1.0))
            out = model(batch.ids.to(device), batch.mask.to(device), mode=mode, control=control)
            terms = total_loss(out, y, train_cfg, t, model_cfg.variant != "budgetformer")
            if not torch.isfinite(terms.total):  # diverged: stop before the weights are overwritten
                raise RuntimeError(f"training stopped at epoch {epoch + 1}, step {step + 1}: the loss is "
                                   f"{terms.total.item()} (try a lower lr); no checkpoint was written")
            opt.zero_grad(set_to_none=True)
            terms.total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
            opt.step()
            if averaged is not None:
                averaged.update_parameters(model)
            step += 1
            n = len(rows)
            sums["loss"] += terms.total.item() * n
            sums["task"] += terms.task * n
            sums["budget"] += terms.budget * n
            sums["entropy"] += terms.entropy * n
            sums["cost"] += terms.cost * n
            sums["correct"] += int((out.logits.argmax(-1) == y).sum())
            s_sum += torch.stack([t.budget.detach().sum() for t in out.layers]).cpu()
            bar.set_postfix(loss=f"{terms.total.item():.3f}")
        n_train = len(train_ids)
        val = evaluate(final(), val_ids, val_split.labels)
        row = {
            "epoch": epoch + 1,
            "loss": sums["loss"] / n_train,
            "task_loss": sums["task"] / n_train,
            "budget_loss": sums["budget"] / n_train,
            "entropy": sums["entropy"] / n_train,
            "cost": sums["cost"] / n_train,
            "beta": terms.beta,
            "lr": opt.param_groups[0]["lr"],
            "train_accuracy": sums["correct"] / n_train,
            "train_mean_budget_per_layer": (s_sum / n_train).tolist(),
            "val_accuracy": val.accuracy,
            "val_mean_budget": val.mean_budget,
            "val_mean_budget_per_layer": val.mean_budget_per_layer,
            "val_mean_heads_fraction": val.mean_heads_fraction,
            "val_head_entropy": val.head_entropy,
        }
        history.append(row)
        if progress:
            tqdm.write(
                f"epoch {epoch + 1}: loss {row['loss']:.4f} train acc {row['train_accuracy']:.4f} "
                f"val acc {val.accuracy:.4f} s {val.mean_budget:.3f} heads {val.mean_heads_fraction:.3f} "
                f"β {terms.beta:+.2f}"
            )

    model = final().cpu()
    if model_cfg.variant == "bba" and not model_cfg.gate_input and train_cfg.train_budget:
        # a fixed budget with static gates is a fixed head set: slice it once, for good
        k = heads_for_budget_value(model_cfg.default_budget, model_cfg.n_heads)
        model.prune_heads([rank_heads(alloc.gate.scores.detach()[None])[0, :k].tolist() for alloc in model.allocators])
    meta = {"dataset": dataset.name, "split_seed": dataset.split_seed, "train": to_dict(train_cfg),
            "init": None if init is None else str(init), **(meta or {})}
    round_weights(model)  # test the weights exactly as they will be stored
    test_split = dataset.split("test")
    test_ids, _ = encode(tok, test_split.texts, model_cfg.max_len)
    test = evaluate(model, test_ids, test_split.labels).summary()
    seconds = time.perf_counter() - t0
    meta = {**meta, "test": test}
    path = save_checkpoint(out_dir, model, tok, dataset.label_names, meta, history)
    return TrainResult(path, history, test, seconds)

