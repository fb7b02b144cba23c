"""Per-input budgets on a frozen model: only the allocation networks learn (``budgetformer fit-budget``).

The base — one of our dense checkpoints, or a Hugging Face classifier that
:func:`~budgetformer_core.io.loader.load_checkpoint` opens — stays exactly as it is. On its
weights a model of the chosen method is built with fresh allocation networks (BudgetFormer's f_θ
and g_φ per layer, or bba's gates), and only those learn (:func:`fit_budget`):

* **task term: distillation** to the base's own logits t on each training text,
  T²·KL(softmax(t/T) ‖ softmax(z/T)) with the temperature T (``temperature``), so a file of texts
  alone is enough; where the texts have labels, ``label_weight``·CE(z, label) is added;
* **cost and budget terms: the method's own** (:func:`~budgetformer_core.model.losses.total_loss`
  with the fit's ``TrainConfig``: BudgetFormer's adaptive recipe by default, bba's task term
  alone at a budget drawn per batch). λ_d ranks each batch by the base's loss on its texts — on
  the label where there is one, else −log of the base's top probability — the difficulty that
  ``budgetformer adaptivity --reference`` judges a model by.

The base runs as at inference (no dropout), so at a budget that buys every head the fitted
model's logits are the base's. The result is an adapter (:mod:`budgetformer_core.io.adapter`):
the networks alone, a few hundred kB, naming the base by its sha256.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from ..analysis.infer import evaluate
from ..config import ModelConfig, TrainConfig, to_dict
from ..io.adapter import ALLOCATION_FIELDS, check_out, save_adapter
from ..io.checkpoint import Checkpoint
from ..io.data import load_dataset, source_path
from ..io.tokenizer import encode, pad
from ..model.allocators import method_class
from ..model.budget import Control
from ..model.encoder import BudgetFormer
from ..model.losses import DISTILL_TEMPERATURE, distillation_kl, total_loss
from ..overrides import apply_overrides, parse_overrides
from .history import SUMS, epoch_summary, loss_weights
from .loop import Diverged, keep_ranking, lr_at, param_groups, set_seed, step_mode
from .rank import read_rank_file

METHODS = ("budgetformer", "bba")
"""The methods whose networks a fit trains."""


@dataclass(frozen=True)
class DistillConfig:
    """The fit's task term: distillation to the frozen base (``--set temperature=… label_weight=…``)."""

    temperature: float = DISTILL_TEMPERATURE
    """T: both softmaxes read the logits divided by T, and the KL is multiplied by T² (so its
    gradients keep their size); a T above 1 also passes on how the base ranks the other classes."""
    label_weight: float = 0.5
    """Weight of the cross-entropy with the labels, where the texts have them (0: distillation alone)."""

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not self.label_weight >= 0:
            raise ValueError(f"label_weight must be >= 0, got {self.label_weight}")


DISTILL_KEYS = tuple(f.name for f in dataclasses.fields(DistillConfig))
FIT_MODEL_FIELDS = tuple(f for f in ALLOCATION_FIELDS if f != "head_weighting")
"""The model fields a fit may set (the recipe sets ``head_weighting``); every other is the base's."""
_MODEL_FIELDS = frozenset(f.name for f in dataclasses.fields(ModelConfig))

FIT_DEFAULTS: dict[str, dict[str, Any]] = {
    "budgetformer": {"summary_norm": True, "recipe": "adaptive", "s_min": 0.05, "s_max": 0.6,
                     "lambda_difficulty": 20.0, "structural_from": 0.0, "lr": 1e-3, "epochs": 2, "ema": 0.0},
    "bba": {"gate_input": True, "gate_source": "embedding", "lr": 1e-3, "epochs": 2, "ema": 0.0},
}
"""Where a fit's settings start, per method: BudgetFormer's adaptive recipe for 12 heads as the
shipped MiniLM model uses it (band [0.05, 0.6], λ_d 20, f_θ and g_φ reading the layer summary
standardised, gated weights straight-through from the first step), bba's gates on the pooled
embeddings; a learning rate for networks that start fresh; no weight average (``ema`` is not
used by a fit)."""


def parse_fit_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``key=value`` strings (``--set``) as typed values: the keys of :class:`DistillConfig` as
    numbers, the others as :func:`~budgetformer_core.overrides.parse_overrides` types them.

    Raises:
        ValueError: an unknown key, or a value of the wrong type.
    """
    items = list(items)
    ours = [i for i in items if i.partition("=")[0].strip() in DISTILL_KEYS]
    typed = parse_overrides([i for i in items if i not in ours])
    for item in ours:
        key, _, value = item.partition("=")
        try:
            typed[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--set {key.strip()}: expected a number, got {value!r}") from None
    return typed


def fit_settings(method: str, overrides: Iterable[str] | Mapping[str, Any] = ()) -> tuple[
        dict[str, Any], TrainConfig, DistillConfig]:
    """A fit's model changes (allocation fields only), training config and distillation config:
    :data:`FIT_DEFAULTS` of ``method`` changed by ``overrides`` (``--set`` strings or typed values).

    Raises:
        ValueError: an unknown method or key, a value of the wrong type, or a key the base decides.
    """
    if method not in METHODS:
        raise ValueError(f"fit-budget fits {' or '.join(METHODS)} networks, not {method!r}")
    given = dict(overrides) if isinstance(overrides, Mapping) else parse_fit_overrides(overrides)
    merged = {**FIT_DEFAULTS[method], **given}
    distill = DistillConfig(**{k: merged.pop(k) for k in DISTILL_KEYS if k in merged})
    model = {k: merged.pop(k) for k in [k for k in merged if k in _MODEL_FIELDS or k == "variant"]}
    refused = sorted(set(model) - set(FIT_MODEL_FIELDS))
    if refused:
        raise ValueError(f"--set {refused[0]}: the frozen base decides it; a fit sets only "
                         f"{', '.join(FIT_MODEL_FIELDS)}")
    _, train = apply_overrides(ModelConfig(), TrainConfig(), merged)
    return model, train, distill


@dataclass
class Texts:
    """Texts and, where the data has them, their labels (indices into the base's label names)."""

    texts: list
    labels: list[int] | None


@dataclass
class FitData:
    """What a fit reads: the texts the networks learn on, and where known a validation and a test split."""

    source: str
    """The dataset's name or the file's path."""
    train: Texts
    validation: Texts | None = None
    test: Texts | None = None
    split_seed: int = 0


def fit_data(dataset: str, label_names: list[str], data_dir: str | None = None, split_seed: int = 0) -> FitData:
    """The data ``--dataset`` names: a dataset (its train split, with its validation and test
    splits, labels mapped to ``label_names``), or a file used whole — a CSV / JSONL / Parquet
    table with text and label columns, or texts alone (a ``text`` column, or a text per line).

    Raises:
        ValueError: no such dataset or file, no texts, or a label the base does not know.
    """
    if Path(dataset).is_file():
        texts, labels = read_rank_file(dataset, label_names, option="--dataset")
        return FitData(str(dataset), Texts(texts, labels), split_seed=split_seed)
    data = load_dataset(dataset, data_dir, seed=split_seed, classes=list(label_names))
    parts = (data.split(s) for s in ("train", "validation", "test"))
    name = data.name if source_path(dataset, data_dir) is None else dataset  # a name as the data calls itself
    return FitData(name, *(Texts(part.texts, part.labels) for part in parts), split_seed=split_seed)


VALIDATION_ROWS = 256
"""Without a validation split, each epoch is measured on this many of the training texts."""


@dataclass
class FitResult:
    """Where the adapter went, its history and test figures (None without a test split)."""

    adapter: Path
    history: list[dict[str, Any]]
    test: dict[str, Any] | None
    seconds: float


def frozen_model(base: Checkpoint, cfg: ModelConfig) -> BudgetFormer:
    """A model of ``cfg`` holding ``base``'s weights, of which only its allocators learn."""
    model = BudgetFormer(cfg)
    missing, unexpected = model.load_state_dict(base.model.state_dict(), strict=False)
    if unexpected or any(".alloc." not in name for name in missing):
        raise ValueError(f"{base.path}: its weights do not fit a {cfg.method} model of its shape")
    for name, param in model.named_parameters():
        param.requires_grad_(".alloc." in name)
    return model


def fitting(model: BudgetFormer) -> None:
    """The base as at inference (no dropout), the allocators training (soft path, batch statistics)."""
    model.eval()
    for alloc in model.allocators:
        alloc.train()


@torch.no_grad()
def base_logits(model: BudgetFormer, ids: list, batch_size: int = 32) -> Tensor:
    """(N, C) float32 logits of the dense ``model`` on tokenised inputs (batched by length)."""
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = torch.empty(len(ids), model.cfg.n_classes)
    for start in range(0, len(ids), batch_size):
        rows = order[start : start + batch_size]
        batch = pad([ids[i] for i in rows])
        out[rows] = model(batch.ids, batch.mask, types=batch.types).logits.float()
    return out


def distillation(logits: Tensor, teacher: Tensor, labels: Tensor | None, cfg: DistillConfig) -> Tensor:
    """T²·KL(softmax(teacher/T) ‖ softmax(logits/T)), mean over the batch, plus
    ``label_weight``·CE(logits, labels) where ``labels`` are given. logits, teacher: (B, C)."""
    kl = distillation_kl(logits, teacher, cfg.temperature)
    if labels is None or not cfg.label_weight:
        return kl
    return kl + cfg.label_weight * F.cross_entropy(logits, labels)


def fit_budget(base: Checkpoint, data: FitData, method: str = "budgetformer",
               overrides: Iterable[str] | Mapping[str, Any] = (), out: str | Path = "adapter",
               progress: bool = True, meta: dict[str, Any] | None = None, force: bool = False) -> FitResult:
    """Fit ``method``'s allocation networks on the frozen ``base`` and write them as an adapter to ``out``.

    ``overrides`` change :data:`FIT_DEFAULTS` (``--set``: the allocation fields of ModelConfig,
    TrainConfig's optimiser and loss settings, and :class:`DistillConfig`'s). Each epoch is
    measured on the validation split (or :data:`VALIDATION_ROWS` training texts), the adapter
    on the test split where there is one, against its labels, with ``agreement``: the share of
    test texts where it predicts the base's class. ``meta`` (the command) goes into its config.json.

    Raises:
        ValueError: a base that is not a dense model, bad settings, or no texts.
        CheckpointError: an ``out`` that cannot be written.
    """
    t0 = time.perf_counter()
    out = check_out(out, force)
    changes, train_cfg, distill = fit_settings(method, overrides)
    if base.model.method.budgeted or base.config.kept_heads is not None:
        raise ValueError(f"fit-budget fits budgets on a dense model with all its heads; {base.path} is a "
                         f"{base.config.method} model (its budgets are its own)")
    set_seed(train_cfg.seed)
    cfg = dataclasses.replace(base.config, method=method, **changes)
    cfg = method_class(cfg).trained_config(cfg, train_cfg)
    model = frozen_model(base, cfg)
    train = data.train if not train_cfg.max_train else Texts(
        data.train.texts[: train_cfg.max_train], data.train.labels and data.train.labels[: train_cfg.max_train])
    if not train.texts:
        raise ValueError(f"{data.source} holds no texts to fit on")
    ids, _ = encode(base.tokenizer, list(train.texts), cfg.max_len)
    teacher = base_logits(base.model, ids)  # (N, C)
    labels = None if train.labels is None else torch.tensor(train.labels)
    targets = teacher.argmax(-1) if labels is None else labels  # what the base's loss is measured on
    difficulty = F.cross_entropy(teacher.double(), targets, reduction="none")  # (N,) the base's loss
    val = data.validation or Texts(train.texts[:VALIDATION_ROWS], train.labels and train.labels[:VALIDATION_ROWS])
    val_ids, _ = encode(base.tokenizer, list(val.texts), cfg.max_len)
    val_labels = val.labels if val.labels is not None else base_logits(base.model, val_ids).argmax(-1).tolist()

    opt = torch.optim.AdamW(param_groups(model, train_cfg), lr=train_cfg.lr)
    order, rng = torch.Generator().manual_seed(train_cfg.seed), random.Random(train_cfg.seed)
    heads = Control(generator=torch.Generator().manual_seed(train_cfg.seed + 1))
    method_cls, n = model.method, len(ids)
    steps = math.ceil(n / train_cfg.batch_size)
    total, step, history = steps * train_cfg.epochs, 0, []
    weights = loss_weights(to_dict(train_cfg), not method_cls.predicts_budget)
    for epoch in range(train_cfg.epochs):
        fitting(model)
        perm = torch.randperm(n, generator=order).tolist()
        sums, s_sum = {**dict.fromkeys(SUMS, 0.0), "correct": 0}, torch.zeros(cfg.n_layers)
        for b in tqdm(range(steps), desc=f"epoch {epoch + 1}/{train_cfg.epochs}", disable=not progress, leave=False):
            rows = perm[b * train_cfg.batch_size : (b + 1) * train_cfg.batch_size]
            batch = pad([ids[i] for i in rows])
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, train_cfg) * g["lr_scale"]
            t = step / max(1, total - 1)  # progress in [0, 1]
            control = method_cls.batch_control(heads, t, len(rows), cfg, train_cfg, rng)
            out_ = model(batch.ids, batch.mask, mode=step_mode(cfg, train_cfg, t), control=control, types=batch.types)
            task = distillation(out_.logits, teacher[rows], None if labels is None else labels[rows], distill)
            terms = total_loss(out_, targets[rows], train_cfg, t, not method_cls.predicts_budget, difficulty[rows],
                               task=task)
            if not torch.isfinite(terms.total):
                raise Diverged(f"fit stopped at epoch {epoch + 1}, step {step + 1}: the loss is "
                               f"{terms.total.item()} (try a lower lr); no adapter was written")
            opt.zero_grad(set_to_none=True)
            terms.total.backward()
            if method_cls.gated_training(cfg) and 0 < train_cfg.random_k <= t:
                keep_ranking(model)
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], train_cfg.grad_clip)
            opt.step()
            step += 1
            for key in SUMS:
                sums[key] += (terms.total.item() if key == "loss" else getattr(terms, key)) * len(rows)
            sums["correct"] += int((out_.logits.argmax(-1) == targets[rows]).sum())
            s_sum += torch.stack([tr.budget.detach().sum() for tr in out_.layers])
        measured = evaluate(model, val_ids, val_labels)
        history.append(epoch_summary(epoch, sums, s_sum, n, terms, opt.param_groups[0]["lr"], measured, weights))
        if progress:
            tqdm.write(f"epoch {epoch + 1}: loss {history[-1]['loss']:.4f} val acc {measured.accuracy:.4f} "
                       f"s {measured.mean_budget:.3f} heads {measured.mean_heads_fraction:.3f}")
    test = measure_test(model, base, data.test)
    record = {"dataset": data.source, "split_seed": data.split_seed, "method": method, "train": to_dict(train_cfg),
              "distill": dataclasses.asdict(distill), "fit": {"rows": n, "labels": "given" if labels is not None
                                                              else "predicted by the base"},
              **({"test": test} if test is not None else {}), **(meta or {})}
    save_adapter(out, model, base, record, history)
    return FitResult(out, history, test, time.perf_counter() - t0)


def measure_test(model: BudgetFormer, base: Checkpoint, test: Texts | None) -> dict[str, Any] | None:
    """The fitted model's test figures (as ``train`` records them) and ``agreement``, the share
    of test texts where it predicts the base's class; None without labelled test texts."""
    if test is None or test.labels is None:
        return None
    ids, _ = encode(base.tokenizer, list(test.texts), model.cfg.max_len)
    fitted = evaluate(model, ids, test.labels)
    agreement = float((fitted.predictions == base_logits(base.model, ids).argmax(-1).numpy()).mean())
    return {**fitted.summary(), "agreement": agreement}
