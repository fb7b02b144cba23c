"""Training: tokenizer on the training split, AdamW with warm-up and cosine decay, the
BudgetFormer loss, per-epoch validation, a history of every epoch, and a checkpoint at the end.

The checkpoint holds the final epoch's weights (no picking the best epoch on validation), and
its reported test figures are measured on the model exactly as stored.

No lost work: a run keeps its state in ``<out>.resume/`` beside the checkpoint folder —
``run.json`` (what the run is: command, configs, dataset) and ``tokenizer.json`` when it starts,
``state.pt`` (weights, optimiser, EMA, every random stream, the step that sets the learning rate,
the history, and where in the epoch it stands) after every epoch and on Ctrl-C — and removes it
once the checkpoint is written. Ctrl-C is acted on between two steps, so the state is never
half-updated; ``train(..., resume=True)`` (``budgetformer train --resume <out>.resume``) loads it
and runs the same steps the uninterrupted run would have, to the same final weights.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from . import distributed
from .backbone import load_backbone, load_base
from .budget import Control, heads_for_budget_value, rank_heads
from .checkpoint import check_out_dir, load_checkpoint, read_json, round_for_storage, save_checkpoint
from .config import ENCODER_FIELDS, ModelConfig, TrainConfig, to_dict
from .data import TextDataset
from .infer import evaluate
from .losses import total_loss
from .model import BudgetFormer
from .tokenizer import encode, load_tokenizer, pad, train_tokenizer


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
    with ``cfg.new_lr`` the classifier and the allocators' networks (f_θ, g_φ, gates) in groups of
    their own, whose ``lr_scale`` (new_lr / lr) multiplies the scheduled learning rate."""
    scale = cfg.new_lr / cfg.lr if cfg.new_lr else 1.0
    groups: dict[tuple[bool, float], list] = {}
    for n, p in model.named_parameters():
        if p.requires_grad:
            fresh = n.startswith("head.") or ".alloc." in n
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

SHAPE_FIELDS = (*ENCODER_FIELDS, "max_len", "pooling")
"""What a warm start (``init``) takes from its checkpoint."""


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


STATE_FILES = ("run.json", "tokenizer.json", "state.pt")
"""What a resume folder holds (see the module docstring)."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training, after the state was saved; the message says where and how to resume."""


def resume_dir(out_dir: str | Path) -> Path:
    """The folder where the run writing ``out_dir`` keeps its state: ``<out_dir>.resume`` beside it."""
    out_dir = Path(out_dir)
    return out_dir.parent / f"{out_dir.name}.resume"


def read_run(state_dir: str | Path) -> dict[str, Any]:
    """The ``run.json`` of a resume folder: the command, configs and dataset of the run it continues."""
    state_dir = Path(state_dir)
    if not (state_dir / "run.json").is_file() or not (state_dir / "state.pt").is_file():
        raise ValueError(f"{state_dir} is not the saved state of a training run (it lacks run.json or state.pt; "
                         "a run saves it after its first epoch)")
    run = read_json(state_dir / "run.json")
    if not isinstance(run, dict):
        raise ValueError(f"{state_dir / 'run.json'} is not a run record: not a JSON object")
    return run


def _clear_state_dir(state_dir: Path, force: bool) -> None:
    """Make way for a new run's state; that of an interrupted run is removed only with ``force``."""
    if not state_dir.exists():
        return
    # (a .state-* file is a save cut short by a kill)
    names = {p.name for p in state_dir.iterdir() if not p.name.startswith(".state-")} if state_dir.is_dir() else None
    if names is None or not names <= set(STATE_FILES):
        raise ValueError(f"{state_dir} (where this run keeps its state) holds other files; move them away")
    if "state.pt" in names and not force:
        raise ValueError(f"{state_dir} holds the state of an interrupted run: continue it with "
                         f"`budgetformer train --resume {state_dir}`, or pass --force to start again")
    if distributed.is_main():  # under torchrun rank 0 alone writes
        shutil.rmtree(state_dir)


def _rng_state(streams: dict[str, Any]) -> dict[str, Any]:
    """Every random stream training draws from, in a form ``torch.load(weights_only=True)`` reads."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": (name, keys.tolist(), pos, has_gauss, cached),
        **{k: v.get_state() if isinstance(v, torch.Generator) else v.getstate() for k, v in streams.items()},
    }


def _set_rng_state(saved: dict[str, Any], streams: dict[str, Any]) -> None:
    torch.set_rng_state(saved["torch"])
    if saved["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda"])
    random.setstate(saved["python"])
    name, keys, pos, has_gauss, cached = saved["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    for k, v in streams.items():
        v.set_state(saved[k]) if isinstance(v, torch.Generator) else v.setstate(saved[k])


def _save_state(state_dir: Path, state: dict[str, Any], run: dict[str, Any], tok) -> None:
    """Write ``state.pt`` beside the old one and rename it into place (a kill leaves one whole file);
    the first save writes ``run.json`` and ``tokenizer.json`` too."""
    if not distributed.is_main():  # under torchrun rank 0 alone writes
        return
    if not (state_dir / "run.json").is_file():
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "tokenizer.json").write_text(tok.to_str(pretty=False) + "\n")
        (state_dir / "run.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    tmp = state_dir / f".state-{os.getpid()}.pt"
    torch.save(state, tmp)
    os.replace(tmp, state_dir / "state.pt")


def _load_state(state_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    """The saved state of the run ``run`` describes; a folder of another run is refused."""
    recorded = read_run(state_dir)
    try:
        state = torch.load(state_dir / "state.pt", map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a damaged file
        raise ValueError(f"{state_dir / 'state.pt'} cannot be read ({type(e).__name__}): start again with --force"
                         ) from None
    # a config field added since the run started ran at its default
    for key, cls in (("model", ModelConfig), ("train", TrainConfig)):
        if isinstance(recorded.get(key), dict):
            recorded[key] = {**to_dict(cls()), **recorded[key]}
    differ = sorted(k for k in run if k != "force" and recorded.get(k) != run[k])
    if differ:
        raise ValueError(f"{state_dir} holds the state of another run ({', '.join(differ)} differ); "
                         "resume it with the command it records")
    return state


class _CtrlC:
    """Notes Ctrl-C (SIGINT) instead of raising at once, so training stops between two steps.
    A second Ctrl-C raises at once. Only the main thread can take signals; elsewhere it does nothing."""

    def __enter__(self) -> _CtrlC:
        self.pressed, self._previous = False, None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum, frame) -> None:
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


@dataclass
class TrainResult:
    """Where the checkpoint went and what it scored."""

    checkpoint: Path
    history: list[dict[str, Any]]
    test: dict[str, Any]
    seconds: float


def batch_control(heads: Control, t: float, n: int, model_cfg: ModelConfig, train_cfg: TrainConfig,
                  rng: random.Random) -> Control:
    """The overrides one training batch of ``n`` inputs runs under, at training progress ``t``.

    ``heads`` carries the stream random heads are drawn from. BudgetFormer with gated weights:
    the soft gates themselves as weights before ``structural_from``, and before ``random_k`` a
    random k per input, uniform on 1 … ⌊s_max·H⌋ (drawn from ``rng``). bba: one requested
    budget for the batch, its ``train_budget`` or uniform on [budget_min, 1].
    """
    if model_cfg.variant == "bba":
        return Control(budget=train_cfg.train_budget or rng.uniform(train_cfg.budget_min, 1.0))
    if model_cfg.variant != "budgetformer" or model_cfg.head_weighting != "gated":
        return heads
    control = dataclasses.replace(heads, soft_gates=t < train_cfg.structural_from, margin=train_cfg.k_margin,
                                  standardize_scores=train_cfg.standardize_scores)
    if t < train_cfg.random_k:  # g_φ learns to rank the heads before f_θ learns how many to run
        top = heads_for_budget_value(train_cfg.s_max, model_cfg.n_heads)
        control = dataclasses.replace(control, k=[rng.randint(1, top) for _ in range(n)])
    return control


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
    Face BERT folder, :mod:`budgetformer_core.backbone`) the encoder starts pretrained: its
    tokenizer and weights, ``model_cfg`` keeping its shape (start from
    ``backbone_config(backbone)``); the classifier and budgeting networks start fresh. The
    checkpoint's ``backbone`` entry names the base (source, package, path, sha256), and so does
    that of a model warm-started from one. ``meta`` (e.g. the command that ran) is stored
    in the checkpoint's config.json. Nothing time-dependent is stored, so the same run writes the
    same bytes.

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
    run = {"command": (meta or {}).get("command"), "dataset": dataset.name, "split_seed": dataset.split_seed,
           "model": to_dict(model_cfg), "train": to_dict(train_cfg), "init": None if init is None else str(init),
           "out": str(out_dir), "force": force, **({"backbone": str(backbone)} if backbone is not None else {})}
    saved = _load_state(state_dir, run) if resume else None
    if not resume:
        _clear_state_dir(state_dir, force)
    set_seed(train_cfg.seed)
    device = device or default_device()
    train_split = dataset.split("train")
    if train_cfg.max_train:
        train_split = train_split.head(train_cfg.max_train)
    start = load_checkpoint(init) if init is not None else None
    base = load_backbone(backbone) if backbone is not None else None
    if start is not None and start.meta.get("backbone"):
        base = load_base(start.meta["backbone"])  # what it was built on, and what it left unchanged
    if start is not None:
        tok = start.tokenizer
        shape = {k: getattr(start.config, k) for k in SHAPE_FIELDS}
        model_cfg = dataclasses.replace(model_cfg, **shape)
    elif base is not None:
        tok = base.tokenizer
    elif saved is not None:  # the run's own vocabulary (a retrained one could differ on a small corpus)
        tok = load_tokenizer(state_dir / "tokenizer.json")
    else:
        tok = distributed.same_tokenizer(train_tokenizer(train_split.texts, model_cfg.vocab_size))
    model_cfg = dataclasses.replace(model_cfg, vocab_size=tok.get_vocab_size(), n_classes=dataset.n_classes)
    if model_cfg.variant == "bba" and train_cfg.train_budget:  # a fixed-budget model runs at its budget
        model_cfg = dataclasses.replace(model_cfg, default_budget=train_cfg.train_budget)
    if model_cfg.variant == "budgetformer":  # the recipe decides how the head weights work
        model_cfg = dataclasses.replace(model_cfg, head_weighting=RECIPE_WEIGHTING[train_cfg.recipe])
    model = (base.build(model_cfg) if backbone is not None else BudgetFormer(model_cfg)).to(device)
    if start is not None:
        warm_start(model, start.model)
    pretrained = start is not None or base is not None
    frozen = []
    if train_cfg.freeze_embeddings or train_cfg.freeze_attention:
        frozen += [model.tok_emb, model.pos_emb, model.type_emb, model.ln_emb]
    if train_cfg.freeze_attention:  # what the heads read, and how they compute
        frozen += [m for layer in model.layers for m in (layer.ln1, layer.attn)]
    for module in frozen:
        if module is not None:
            module.requires_grad_(False)
    dense = model_cfg.variant == "dense"

    crop_len = 10**9 if train_cfg.random_crop else model_cfg.max_len
    train_ids, _ = encode(tok, train_split.texts, crop_len)
    val_split = dataset.split("validation")
    val_ids, _ = encode(tok, val_split.texts, model_cfg.max_len)
    labels = torch.tensor(train_split.labels)
    if train_cfg.embed_init == "lsa" and not pretrained:
        with torch.no_grad():
            lsa = lsa_embeddings(train_ids, model_cfg.vocab_size, model_cfg.d_model, train_cfg.seed)
            model.tok_emb.weight.copy_(lsa)
    if train_cfg.pos_init == "sinusoidal" and not pretrained:
        with torch.no_grad():
            model.pos_emb.weight.copy_(sinusoids(model_cfg.max_len, model_cfg.d_model))

    if train_cfg.freeze_gates:
        for alloc in model.allocators:
            alloc.gate.requires_grad_(False)
    opt = torch.optim.AdamW(param_groups(model, train_cfg), lr=train_cfg.lr)
    steps_per_epoch = math.ceil(len(train_ids) / train_cfg.batch_size)
    total_steps = steps_per_epoch * train_cfg.epochs
    distributed.check_batches(len(train_ids), train_cfg.batch_size)
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

    streams = {"order": gen, "augment": rng, "heads": heads.generator}
    first_epoch, first_batch = 0, 0
    if saved is not None:  # continue where the saved run stood
        model.load_state_dict(saved["model"])
        if averaged is not None:
            averaged.load_state_dict(saved["ema"])
        opt.load_state_dict(saved["optimizer"])
        _set_rng_state(saved["rng"], streams)
        history, step = saved["history"], saved["step"]
        first_epoch, first_batch = saved["epoch"], saved["batch"]

    def state(epoch: int, batch: int, **in_epoch: Any) -> dict[str, Any]:
        """What :func:`_save_state` keeps: the run as it stands before ``batch`` of ``epoch``."""
        return {"epoch": epoch, "batch": batch, "step": step, "history": history, "model": model.state_dict(),
                "ema": averaged.state_dict() if averaged is not None else None, "optimizer": opt.state_dict(),
                "rng": _rng_state(streams), **in_epoch}

    net = distributed.wrap(model, train_cfg.seed)  # DDP under torchrun, else the model itself
    with _CtrlC() as ctrl_c:
        for epoch in range(first_epoch, train_cfg.epochs):
            model.train()
            if saved is not None and first_batch:  # resumed inside this epoch
                perm, sums, s_sum = saved["perm"], saved["sums"], saved["s_sum"]
            else:
                sums = {"loss": 0.0, "task": 0.0, "budget": 0.0, "entropy": 0.0, "cost": 0.0, "entropy_term": 0.0,
                        "difficulty": 0.0, "balance": 0.0, "correct": 0}
                s_sum = torch.zeros(model_cfg.n_layers)
                perm = torch.randperm(len(train_ids), generator=gen).tolist()
            desc = f"epoch {epoch + 1}/{train_cfg.epochs}"
            bar = tqdm(range(first_batch, steps_per_epoch), desc=desc, disable=not progress, leave=False)
            first_batch = 0
            for b in bar:
                if ctrl_c.pressed:
                    _save_state(state_dir, state(epoch, b, perm=perm, sums=sums, s_sum=s_sum), run, tok)
                    raise TrainingInterrupted(
                        f"stopped in epoch {epoch + 1} of {train_cfg.epochs} (step {step} of {total_steps}); "
                        f"its state is saved: continue with `budgetformer train --resume {state_dir}`")
                rows = perm[b * train_cfg.batch_size : (b + 1) * train_cfg.batch_size]
                views = [augment(train_ids[i], model_cfg.max_len, train_cfg, rng) for i in rows]  # on every rank
                mine, share = distributed.shard(len(rows))  # this process's rows of the global batch
                batch = pad([views[j] for j in mine])
                y = labels[[rows[j] for j in mine]].to(device)
                for g in opt.param_groups:
                    # (a run's state saved before new_lr existed has no lr_scale: 1)
                    g["lr"] = lr_at(step, total_steps, train_cfg) * g.get("lr_scale", 1.0)
                t = step / max(1, total_steps - 1)  # training progress in [0, 1]
                mode = "dense" if dense else ("structural" if t >= structural_from else "soft")
                control = batch_control(heads, t, len(rows), model_cfg, train_cfg, rng)  # the global batch's
                if isinstance(control.k, list):  # random k per row (random_k): this process's rows'
                    control = dataclasses.replace(control, k=[control.k[j] for j in mine])
                out = net(batch.ids.to(device), batch.mask.to(device), mode=mode, control=control)
                terms = total_loss(out, y, train_cfg, t, model_cfg.variant != "budgetformer")
                if not torch.isfinite(terms.total):  # diverged: stop before the weights are overwritten
                    shutil.rmtree(state_dir, ignore_errors=True)  # resuming would diverge again
                    raise RuntimeError(f"training stopped at epoch {epoch + 1}, step {step + 1}: the loss is "
                                       f"{terms.total.item()} (try a lower lr); no checkpoint was written")
                opt.zero_grad(set_to_none=True)
                (terms.total * share).backward()  # DDP's mean over ranks: the global batch's mean
                if gated and 0 < train_cfg.random_k <= t:
                    keep_ranking(model)
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
                opt.step()
                if averaged is not None:
                    averaged.update_parameters(model)
                step += 1
                n = len(mine)
                sums["loss"] += terms.total.item() * n
                sums["task"] += terms.task * n
                sums["budget"] += terms.budget * n
                sums["entropy"] += terms.entropy * n
                sums["cost"] += terms.cost * n
                for key in ("entropy_term", "difficulty", "balance"):  # (a state saved without them: from 0)
                    sums[key] = sums.get(key, 0.0) + getattr(terms, key) * n
                sums["correct"] += int((out.logits.argmax(-1) == y).sum())
                s_sum += torch.stack([t.budget.detach().sum() for t in out.layers]).cpu()
                bar.set_postfix(loss=f"{terms.total.item():.3f}")
            sums, s_sum = distributed.sum_over_ranks(sums), distributed.sum_over_ranks(s_sum)
            n_train = len(train_ids)
            val = evaluate(final(), val_ids, val_split.labels)
            row = {
                "epoch": epoch + 1,
                "loss": sums["loss"] / n_train,
                "task_loss": sums["task"] / n_train,
                "budget_loss": sums["budget"] / n_train,
                "entropy": sums["entropy"] / n_train,
                "cost": sums["cost"] / n_train,
                "entropy_term": sums["entropy_term"] / n_train,
                "difficulty_loss": sums["difficulty"] / n_train,
                "balance_loss": sums["balance"] / n_train,
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
            _save_state(state_dir, state(epoch + 1, 0), run, tok)
            if ctrl_c.pressed:
                raise TrainingInterrupted(f"stopped after epoch {epoch + 1} of {train_cfg.epochs}; its state is "
                                          f"saved: continue with `budgetformer train --resume {state_dir}`")

    model = final().cpu()
    if model_cfg.variant == "bba" and not model_cfg.gate_input and train_cfg.train_budget:
        # a fixed budget with static gates is a fixed head set: slice it once, for good
        k = heads_for_budget_value(model_cfg.default_budget, model_cfg.n_heads)
        model.prune_heads([rank_heads(alloc.gate.scores.detach()[None])[0, :k].tolist() for alloc in model.allocators])
    meta = {"dataset": dataset.name, "split_seed": dataset.split_seed, "train": to_dict(train_cfg),
            "init": None if init is None else str(init), **(meta or {})}
    if base is not None:  # the base; the tensors taken from it unchanged (not stored), and changed (deltas)
        meta["backbone"] = {**base.describe(), "tensors": base.unchanged(model), "delta": base.changed(model)}
    if distributed.world_size() > 1:  # absent: one process (its files stay as they were)
        meta["world_size"] = distributed.world_size()
    round_for_storage(model, meta, base=None if base is None else base.encoder_weights(model_cfg.max_len))
    # (the test split sees the weights exactly as they will be stored)
    test_split = dataset.split("test")
    test_ids, _ = encode(tok, test_split.texts, model_cfg.max_len)
    test = evaluate(model, test_ids, test_split.labels).summary()
    seconds = time.perf_counter() - t0
    meta = {**meta, "test": test}
    path = Path(out_dir)
    if distributed.is_main():  # under torchrun rank 0 alone writes
        save_checkpoint(path, model, tok, dataset.label_names, meta, history)
        shutil.rmtree(state_dir, ignore_errors=True)  # the checkpoint is whole: nothing left to resume
    return TrainResult(path, history, test, seconds)

