"""Training: tokenizer on the training split, AdamW with warm-up and cosine decay, the
BudgetFormer loss, per-epoch validation, a history of every epoch, and a checkpoint at the end.

The checkpoint holds the final epoch's weights (no picking the best epoch on validation), and
its reported test figures are measured on the model exactly as stored. A run saves its state
after every epoch and on Ctrl-C, and resumes from it to the same final weights
(:mod:`budgetformer_core.train.resume`). The model a run starts from is built in
:mod:`budgetformer_core.train.build`; what each epoch's row of the history holds is
:mod:`budgetformer_core.train.history`.
"""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from ..analysis.infer import evaluate
from ..config import ModelConfig, TrainConfig, to_dict
from ..io.checkpoint import check_out_dir, round_for_storage, save_checkpoint
from ..io.data import TextDataset
from ..io.loader import load_checkpoint
from ..io.tokenizer import encode, keep_positions, pad
from ..model import low_rank
from ..model.allocators import method_class
from ..model.budget import Control
from ..model.encoder import BudgetFormer
from ..model.losses import distillation_kl, total_loss
from . import distributed
from .build import build_model, freeze, init_embeddings, input_logits, input_losses
from .history import SUMS, epoch_summary, loss_weights
from .resume import (
    CtrlC,
    TrainingInterrupted,
    clear_state_dir,
    load_state,
    resume_dir,
    rng_state,
    save_state,
    set_rng_state,
)


def set_seed(seed: int) -> int:
    """Seed Python, NumPy and PyTorch; returns the seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def param_groups(model: nn.Module, cfg: TrainConfig) -> list[dict]:
    """AdamW's parameter groups: weight decay on matrices but not on embeddings, biases and norms;
    with ``cfg.new_lr`` the classifier, the allocators' networks (f_θ, g_φ, gates) and low-rank
    factors in groups of their own, whose ``lr_scale`` (new_lr / lr) multiplies the scheduled learning rate."""
    scale = cfg.new_lr / cfg.lr if cfg.new_lr else 1.0
    groups: dict[tuple[bool, float], list] = {}
    for n, p in model.named_parameters():
        if p.requires_grad:
            fresh = n.startswith("head.") or ".alloc." in n or ".parametrizations." in n  # (LoRA's A, B)
            key = (p.dim() >= 2 and "emb" not in n, scale if fresh else 1.0)
            groups.setdefault(key, []).append(p)
    ordered = sorted(groups.items(), key=lambda item: (not item[0][0], item[0][1] != 1.0))  # decayed first
    return [{"params": ps, "weight_decay": cfg.weight_decay if decay else 0.0, "lr_scale": s}
            for (decay, s), ps in ordered]


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up over ``warmup_frac`` of the steps, then cosine decay to 0."""
    warm = max(1, int(cfg.warmup_frac * total))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def augment(ids: list[int], max_len: int, cfg: TrainConfig, rng: random.Random) -> list[int]:
    """A random ``max_len`` window (``random_crop``) with ``token_dropout`` of its tokens dropped
    (a pair's tokens keep their segments)."""
    if len(ids) > max_len:
        start = rng.randrange(len(ids) - max_len + 1) if cfg.random_crop else 0
        ids = ids[start : start + max_len]
    if cfg.token_dropout:
        kept = [i for i in range(len(ids)) if rng.random() >= cfg.token_dropout]
        ids = keep_positions(ids, kept) if kept else ids[:1]
    return ids


@dataclass
class TrainResult:
    """Where the checkpoint went and what it scored."""

    checkpoint: Path
    history: list[dict[str, Any]]
    test: dict[str, Any]
    seconds: float


def keep_ranking(model: BudgetFormer) -> None:
    """After ``random_k``, called between the backward pass and the optimiser step: what learnt
    while k was random stays as it is. With f_θ, f_θ alone learns on (how many heads to run);
    without (a constant k), all but g_φ learn to work with it. The others' gradients are dropped
    (AdamW skips a parameter without one, weight decay included) rather than their
    ``requires_grad`` switched off mid-run, which DDP (``torchrun``) does not allow."""
    has_f = model.cfg.use_budget_net
    for name, param in model.named_parameters():
        if (".budget_net." not in name) if has_f else (".scorer." in name):
            param.grad = None


def step_mode(model_cfg: ModelConfig, train_cfg: TrainConfig, t: float) -> str:
    """The execution mode of the training step at progress ``t``: the method's training mode, and
    from ``structural_from`` on its inference mode, the top-k heads alone. Gated weights keep the
    soft path (their straight-through weights are the top k from ``structural_from`` on,
    ``Allocator.batch_control``)."""
    method = method_class(model_cfg)
    structural_from = 1.0 if method.gated_training(model_cfg) else train_cfg.structural_from
    return method.default_mode if t >= structural_from else method.training_mode


@dataclass
class Training:
    """What a run changes step by step: the weights, their average, the optimiser, the random
    streams, the history and the step count — what its saved state holds."""

    model: BudgetFormer
    opt: torch.optim.Optimizer
    averaged: AveragedModel | None
    streams: dict[str, Any]
    """``order`` (the epochs' row order), ``augment`` (crops, token dropout, training budgets) and
    ``heads`` (random heads)."""
    heads: Control
    """Carries the ``heads`` stream: random heads (``head_choice="random"``) fresh every step."""
    difficulty: torch.Tensor | None = None
    """(N,) the warm start's task loss on each training input (``difficulty_from="init"``)."""
    teacher: torch.Tensor | None = None
    """(N, C) the warm start's logits on each training input (``distill``)."""
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    step: int = 0

    @classmethod
    def start(cls, model: BudgetFormer, cfg: TrainConfig) -> Training:
        averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema)) if cfg.ema else None
        opt = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr)
        heads = Control(generator=torch.Generator().manual_seed(cfg.seed + 1))
        streams = {"order": torch.Generator().manual_seed(cfg.seed), "augment": random.Random(cfg.seed),
                   "heads": heads.generator}
        return cls(model, opt, averaged, streams, heads)

    def final(self) -> BudgetFormer:
        """The model to validate and keep: the weight average when ``ema`` is on."""
        return self.averaged.module if self.averaged is not None else self.model

    def state(self, epoch: int, batch: int, **in_epoch: Any) -> dict[str, Any]:
        """What :func:`save_state` keeps: the run as it stands before ``batch`` of ``epoch``."""
        ema = self.averaged.state_dict() if self.averaged is not None else None
        return {"epoch": epoch, "batch": batch, "step": self.step, "history": self.history,
                "model": self.model.state_dict(), "ema": ema, "optimizer": self.opt.state_dict(),
                "rng": rng_state(self.streams), **in_epoch}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue where the saved run stood."""
        self.model.load_state_dict(saved["model"])
        if self.averaged is not None:
            self.averaged.load_state_dict(saved["ema"])
        self.opt.load_state_dict(saved["optimizer"])
        set_rng_state(saved["rng"], self.streams)
        self.history, self.step = saved["history"], saved["step"]


class Diverged(RuntimeError):
    """The loss is no longer finite: training stops before the weights are overwritten."""


def train_step(run: Training, net: nn.Module, views: list[list[int]], rows: list[int], labels: torch.Tensor,
               train_cfg: TrainConfig, total_steps: int, device: torch.device, where: str):
    """One optimiser step on the global batch ``rows`` (``views``: their augmented token ids);
    returns the loss terms, the output and the labels of this process's rows."""
    model, model_cfg = run.model, run.model.cfg
    method = model.method
    mine, share = distributed.shard(len(rows))  # this process's rows of the global batch
    batch = pad([views[j] for j in mine])
    types = None if batch.types is None else batch.types.to(device)  # a pair's segments
    y = labels[[rows[j] for j in mine]].to(device)
    for g in run.opt.param_groups:
        # (a run's state saved before new_lr existed has no lr_scale: 1)
        g["lr"] = lr_at(run.step, total_steps, train_cfg) * g.get("lr_scale", 1.0)
    t = run.step / max(1, total_steps - 1)  # training progress in [0, 1]
    control = method.batch_control(run.heads, t, len(rows), model_cfg, train_cfg, run.streams["augment"])
    if isinstance(control.k, list):  # random k per row (random_k): this process's rows'
        control = dataclasses.replace(control, k=[control.k[j] for j in mine])
    out = net(batch.ids.to(device), batch.mask.to(device), mode=step_mode(model_cfg, train_cfg, t), control=control,
              types=types)
    difficulty = None if run.difficulty is None else run.difficulty[[rows[j] for j in mine]]
    task = None
    if run.teacher is not None:
        w = train_cfg.distill
        task = (1 - w) * F.cross_entropy(out.logits, y, label_smoothing=train_cfg.label_smoothing) \
            + w * distillation_kl(out.logits, run.teacher[[rows[j] for j in mine]].to(device))
    terms = total_loss(out, y, train_cfg, t, not method.predicts_budget, difficulty, task)
    if not torch.isfinite(terms.total):  # diverged: stop before the weights are overwritten
        raise Diverged(f"training stopped at {where}: the loss is {terms.total.item()} (try a lower lr); "
                                 "no checkpoint was written")
    run.opt.zero_grad(set_to_none=True)
    (terms.total * share).backward()  # DDP's mean over ranks: the global batch's mean
    if method.gated_training(model_cfg) and 0 < train_cfg.random_k <= t:
        keep_ranking(model)
    torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
    run.opt.step()
    if run.averaged is not None:
        run.averaged.update_parameters(model)
    run.step += 1
    return terms, out, y


def by_length(perm: list[int], lengths: list[int], batch_size: int, groups: int,
              generator: torch.Generator) -> list[int]:
    """``perm`` with inputs of similar length batched together (``TrainConfig.length_groups``):
    every ``groups`` batches of it sorted by length and cut into batches, the full batches
    shuffled, a last short batch kept last. ``groups`` 0: ``perm`` itself."""
    if not groups:
        return perm
    size = batch_size * groups
    ordered = [i for g in range(0, len(perm), size) for i in sorted(perm[g : g + size], key=lengths.__getitem__)]
    batches = [ordered[b : b + batch_size] for b in range(0, len(ordered), batch_size)]
    full = len(perm) // batch_size  # the batches of batch_size inputs; the one after them is short
    order = torch.randperm(full, generator=generator).tolist() + list(range(full, len(batches)))
    return [i for b in order for i in batches[b]]


def run_epochs(run: Training, train_ids: list[list[int]], labels: torch.Tensor, val_ids: list[list[int]],
               val_labels: list[int], train_cfg: TrainConfig, device: torch.device, progress: bool,
               state_dir: Path, record: dict[str, Any], tok, saved: dict[str, Any] | None) -> None:
    """Every epoch from where ``saved`` stood (or the start), saving the state after each one and
    on Ctrl-C (then raising :class:`TrainingInterrupted`)."""
    model, model_cfg = run.model, run.model.cfg
    steps_per_epoch = math.ceil(len(train_ids) / train_cfg.batch_size)
    total_steps = steps_per_epoch * train_cfg.epochs
    first_epoch, first_batch = (saved["epoch"], saved["batch"]) if saved is not None else (0, 0)
    weights = loss_weights(to_dict(train_cfg), not model.method.predicts_budget)  # as total_loss adds them
    net = distributed.wrap(model, train_cfg.seed)  # DDP under torchrun, else the model itself
    again = " --force" if record["force"] else ""  # a resume is granted --force only when typed again
    with CtrlC() as ctrl_c:
        for epoch in range(first_epoch, train_cfg.epochs):
            model.train()
            if saved is not None and first_batch:  # resumed inside this epoch
                perm, sums, s_sum = saved["perm"], saved["sums"], saved["s_sum"]
            else:
                sums = {**dict.fromkeys(SUMS, 0.0), "correct": 0}
                s_sum = torch.zeros(model_cfg.n_layers)
                perm = torch.randperm(len(train_ids), generator=run.streams["order"]).tolist()
                perm = by_length(perm, [min(len(x), model_cfg.max_len) for x in train_ids],
                                 train_cfg.batch_size, train_cfg.length_groups, run.streams["order"])
            bar = tqdm(range(first_batch, steps_per_epoch), desc=f"epoch {epoch + 1}/{train_cfg.epochs}",
                       disable=not progress, leave=False)
            first_batch = 0
            for b in bar:
                if ctrl_c.pressed:
                    save_state(state_dir, run.state(epoch, b, perm=perm, sums=sums, s_sum=s_sum), record, tok)
                    raise TrainingInterrupted(
                        f"stopped in epoch {epoch + 1} of {train_cfg.epochs} (step {run.step} of {total_steps}); "
                        f"its state is saved: continue with `budgetformer train --resume {state_dir}{again}`")
                rows = perm[b * train_cfg.batch_size : (b + 1) * train_cfg.batch_size]
                views = [augment(train_ids[i], model_cfg.max_len, train_cfg, run.streams["augment"])
                         for i in rows]  # on every rank
                terms, out, y = train_step(run, net, views, rows, labels, train_cfg, total_steps, device,
                                           f"epoch {epoch + 1}, step {run.step + 1}")
                n = len(y)
                for key in SUMS:  # (a state saved without some of them: from 0)
                    value = terms.total.item() if key == "loss" else getattr(terms, key)
                    sums[key] = sums.get(key, 0.0) + value * n
                sums["correct"] += int((out.logits.argmax(-1) == y).sum())
                s_sum += torch.stack([t.budget.detach().sum() for t in out.layers]).cpu()
                bar.set_postfix(loss=f"{terms.total.item():.3f}")
            sums, s_sum = distributed.sum_over_ranks(sums), distributed.sum_over_ranks(s_sum)
            val = evaluate(run.final(), val_ids, val_labels)
            row = epoch_summary(epoch, sums, s_sum, len(train_ids), terms, run.opt.param_groups[0]["lr"], val,
                                weights)
            run.history.append(row)
            if progress:
                tqdm.write(
                    f"epoch {epoch + 1}: loss {row['loss']:.4f} train acc {row['train_accuracy']:.4f} "
                    f"val acc {val.accuracy:.4f} s {val.mean_budget:.3f} heads {val.mean_heads_fraction:.3f} "
                    f"β {terms.beta:+.2f}"
                )
            save_state(state_dir, run.state(epoch + 1, 0), record, tok)
            if ctrl_c.pressed:
                raise TrainingInterrupted(f"stopped after epoch {epoch + 1} of {train_cfg.epochs}; its state is "
                                          f"saved: continue with `budgetformer train --resume {state_dir}{again}`")


def train(
    dataset: TextDataset,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    out_dir: str | Path,
    progress: bool = True,
    device: torch.device | None = None,
    init: str | Path | None = None,
    meta: dict[str, Any] | None = None,
    force: bool = False,
    resume: bool = False,
    backbone: str | None = None,
) -> TrainResult:
    """Train a model on ``dataset`` and write a checkpoint to ``out_dir``.

    With ``init`` (a checkpoint directory, e.g. a trained dense model) the new model takes its
    tokenizer, its shape and every weight the two share — the dense warm start of ``bba``; its
    own networks (gates, f_θ, g_φ) start fresh. With ``backbone`` (``minilm-l6`` or a Hugging
    Face BERT folder, :mod:`budgetformer_core.io.pretrained`) the encoder starts pretrained: its
    tokenizer and weights, ``model_cfg`` keeping its shape (start from
    ``backbone_config(backbone)``); the classifier and budgeting networks start fresh. The
    checkpoint's ``backbone`` entry names the base (source, package, path, sha256), and so does
    that of a model warm-started from one. ``meta`` (e.g. the command that ran) is stored
    in the checkpoint's config.json. Nothing time-dependent is stored, so the same run writes the
    same bytes.

    A pair task (``dataset.pair_columns``) trains a model that reads pairs: each pair cut to
    ``max_len`` tokens as ``transformers`` cuts it (``longest_first``, no random crop), and the
    checkpoint's config.json names the two columns (``pair_columns``).

    An existing checkpoint at ``out_dir`` is replaced only with ``force``. The run saves its state
    in :func:`resume_dir` after every epoch and on Ctrl-C (then raising :class:`TrainingInterrupted`);
    ``resume=True`` continues from it, given the same arguments.
    """
    t0 = time.perf_counter()
    progress = progress and distributed.is_main()  # under torchrun rank 0 alone prints
    out_dir = Path(out_dir)
    check_out_dir(out_dir, force=force)  # a bad --out fails now, not after the run
    state_dir = resume_dir(out_dir)
    if backbone is not None and init is not None:
        raise ValueError("give a backbone or an init checkpoint, not both (a checkpoint carries its backbone)")
    if train_cfg.difficulty_from == "init" and init is None:
        raise ValueError("difficulty_from=init ranks inputs by the warm start's loss: give an init checkpoint")
    if train_cfg.distill and init is None:
        raise ValueError("distill learns from the warm start's answers: give an init checkpoint")
    record = {"command": (meta or {}).get("command"), "dataset": dataset.name, "split_seed": dataset.split_seed,
              "model": to_dict(model_cfg), "train": to_dict(train_cfg), "init": None if init is None else str(init),
              "out": str(out_dir), "out_resolved": str(out_dir.resolve()), "force": force,
              **({"backbone": str(backbone)} if backbone is not None else {})}
    saved = load_state(state_dir, record) if resume else None
    if not resume:
        clear_state_dir(state_dir, force)
    set_seed(train_cfg.seed)
    device = device or default_device()
    train_split = dataset.split("train")
    if train_cfg.max_train:
        train_split = train_split.head(train_cfg.max_train)
    saved_tokenizer = state_dir / "tokenizer.json" if saved is not None else None
    model, tok, base = build_model(dataset, model_cfg, train_cfg, train_split.texts, init, backbone, saved_tokenizer,
                                   device)
    model_cfg = model.cfg
    # (a pair is cut longest_first to max_len: a random window could lose one of its texts)
    crop_len = 10**9 if train_cfg.random_crop and dataset.pair_columns is None else model_cfg.max_len
    train_ids, _ = encode(tok, train_split.texts, crop_len)
    val_split = dataset.split("validation")
    val_ids, _ = encode(tok, val_split.texts, model_cfg.max_len)
    if init is None and base is None:
        init_embeddings(model, train_ids, train_cfg)
    freeze(model, train_cfg)
    if train_cfg.lora_rank:
        if base is None:
            raise ValueError("lora_rank fine-tunes a pretrained encoder: give --backbone or an --init built on one")
        low_rank.attach(model, train_cfg.lora_rank)
    distributed.check_batches(len(train_ids), train_cfg.batch_size)
    run = Training.start(model, train_cfg)
    if train_cfg.difficulty_from == "init" or train_cfg.distill:
        # (read again rather than kept from build_model: building it draws from torch's global
        # generator, and the shipped runs' dropout masks follow those draws)
        logits = input_logits(load_checkpoint(init).model.to(device), train_ids)  # (N, C)
        if train_cfg.difficulty_from == "init":
            run.difficulty = input_losses(logits, train_split.labels)
        if train_cfg.distill:
            run.teacher = logits.float()
    if saved is not None:
        run.restore(saved)
    try:
        run_epochs(run, train_ids, torch.tensor(train_split.labels), val_ids, val_split.labels, train_cfg, device,
                   progress, state_dir, record, tok, saved)
    except Diverged:
        shutil.rmtree(state_dir, ignore_errors=True)  # resuming would diverge again
        raise
    test = finish(run.final().cpu(), dataset, tok, base, train_cfg, init, meta, out_dir, run.history)
    if distributed.is_main():  # the checkpoint is whole: nothing left to resume
        shutil.rmtree(state_dir, ignore_errors=True)
    return TrainResult(out_dir, run.history, test, time.perf_counter() - t0)


def finish(model: BudgetFormer, dataset: TextDataset, tok, base, train_cfg: TrainConfig, init: str | Path | None,
           meta: dict[str, Any] | None, out_dir: Path, history: list[dict[str, Any]]) -> dict[str, Any]:
    """Round the trained ``model`` as it is stored, measure it on the test split and write the
    checkpoint (rank 0 alone under torchrun); returns the test figures."""
    model.method.after_training(model, train_cfg)
    if train_cfg.lora_rank:
        low_rank.merge(model)  # plain weights again; the factors are what the checkpoint stores
    meta = {"dataset": dataset.name, "split_seed": dataset.split_seed, "train": to_dict(train_cfg),
            "init": None if init is None else str(init), **(meta or {})}
    if dataset.pair_columns is not None:  # absent for single texts (their config.json stays as it was)
        meta["pair_columns"] = list(dataset.pair_columns)
    if base is not None:  # the base; the tensors taken from it unchanged (not stored), and changed (deltas)
        meta["backbone"] = {**base.describe(), "tensors": base.unchanged(model), "delta": base.changed(model)}
    if distributed.world_size() > 1:  # absent: one process (its files stay as they were)
        meta["world_size"] = distributed.world_size()
    round_for_storage(model, meta, base=None if base is None else base.encoder_weights(model.cfg.max_len))
    # (the test split sees the weights exactly as they will be stored)
    test_split = dataset.split("test")
    test_ids, _ = encode(tok, test_split.texts, model.cfg.max_len)
    test = evaluate(model, test_ids, test_split.labels).summary()
    if distributed.is_main():  # under torchrun rank 0 alone writes
        save_checkpoint(out_dir, model, tok, dataset.label_names, {**meta, "test": test}, history)
    return test
