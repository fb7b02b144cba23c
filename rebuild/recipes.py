"""How every model of ``precomputed/`` is trained: typed config overrides per dataset.

An override set is a mapping from a field of :class:`~budgetformer_core.config.ModelConfig` or
:class:`~budgetformer_core.config.TrainConfig` to a value of that field's type; the engine
checks both (:func:`~budgetformer_core.overrides.apply_overrides`). A model's overrides are the
sets of its recipe merged in order (a later value of a key wins); :mod:`rebuild.jobs` turns them
into the ``budgetformer train`` command that makes the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

Value = bool | int | float | str
Overrides = Mapping[str, Value]

SHIPPED = ("dense", "budgetformer", "budgetformer-paper", "no-budget-net", "no-head-scorer", "bba")
"""The models of every dataset that ship (``precomputed/checkpoints/<dataset>-<model>``)."""
SHIPPED_PRETRAINED = ("minilm-dense", "minilm-budgetformer", "minilm-bba", "minilm-frozen-budgetformer")
"""The models on the pretrained encoder that ship (where a dataset's recipe makes them)."""
TABLE_BUDGETS = (0.25, 0.5, 0.75)
"""The budgets of the per-budget baselines (static gates, post-hoc pruning with recovery)."""
DATA_ROOT = Path("../shared/data")
"""Where the local copies of the hub datasets lie by default, relative to the project root
(``--data-root``): ``<root>/ag_news`` for AG News."""

SYNTHETIC: Overrides = {
    "n_layers": 1, "max_len": 64, "dropout": 0.0, "token_dropout": 0, "random_crop": False,
    "embed_init": "normal", "pos_init": "sinusoidal", "lr": 3e-3,
}
"""The synthetic tasks: one layer, 64 tokens, no dropout or cropping, a larger learning rate."""

ADAPTIVE: Overrides = {"lambda_difficulty": 10, "s_min": 0.05, "s_max": 0.65, "lambda_balance": 0.2,
                       "structural_from": 0}
"""BudgetFormer's adaptive recipe on BBC: gated weights trained straight-through from the start,
the price λ_c·s, s pulled towards each input's difficulty rank (λ_d) over the band [0.05, 0.65]
(k = 1 … 5 of 8; the easiest inputs can run one head per layer), and heads balanced over the
inputs of a batch (λ_u 0.2)."""

AG_NEWS_ADAPTIVE: Overrides = {**ADAPTIVE, "lambda_cost": 0.03}
"""The adaptive recipe with a lower price on heads (λ_c 0.03 instead of 0.05), for AG News."""

MINILM: Overrides = {"max_len": 128, "freeze_embeddings": True, "random_crop": False, "token_dropout": 0,
                     "dropout": 0.1, "lr": 1e-4, "new_lr": 1e-3}
"""Fine-tuning all-MiniLM-L6-v2: 128 tokens, the embeddings kept as pretrained, a small learning
rate for the encoder and a larger one for the networks it does not bring (classifier, f_θ, g_φ,
gates)."""

MINILM_ADAPTIVE: Overrides = {"lambda_difficulty": 20, "difficulty_from": "init", "label_smoothing": 0.1,
                              "s_min": 0.05, "s_max": 0.6, "structural_from": 0, "summary_norm": True}
"""The adaptive recipe for 12 heads: the band [0.05, 0.6] (k = 1 … 7 of 12), s pulled firmly
(λ_d 20) towards each input's difficulty rank by the loss of the dense fine-tune it starts from,
label smoothing 0.1, f_θ and g_φ reading the layer summary standardised (pooled pretrained
embeddings share most of their vector across inputs), no head balancing (g_φ reading
standardised summaries spreads head use over the inputs already)."""

FROZEN_MINILM: Overrides = {"epochs": 1, "lr": 2e-3, "s_min": 0.05, "s_max": 0.6, "lambda_difficulty": 20,
                              "structural_from": 0, "summary_norm": True, "temperature": 2.0, "label_weight": 0.5}
"""Budgets fitted on the frozen MiniLM fine-tune (``budgetformer fit-budget``): BudgetFormer's
adaptive recipe for 12 heads as :data:`MINILM_ADAPTIVE` has it, f_θ and g_φ learning alone for
one epoch at 2e-3 (two at 1e-3 gave the same accuracy within a test article, and take longer
than the 15 minutes a fit should take here), the task term the dense model's own logits
(temperature 2) plus half the labels' cross-entropy."""

BBC_MINILM: Overrides = {**MINILM, "max_len": 256}
"""Fine-tuning MiniLM on BBC News: the first 256 tokens of an article (the median test article has
425; 88 % have more)."""

AG_MINILM: Overrides = {**MINILM, "length_groups": 50}
"""Fine-tuning MiniLM on AG News: inputs of similar length batched together (groups of 50
batches), which halves the token positions a step computes on its short texts."""

LORA_MINILM: Overrides = {**MINILM, "lora_rank": 8, "length_groups": 50}
"""Fine-tuning MiniLM by rank-8 changes (LoRA) of each layer's matrices, stored as their factors
(0.6 MB against 11 MB for a full fine-tune's changes): the seeds' benchmarks, whose nine models
would not fit ``precomputed/``'s 100 MB as full fine-tunes. The factors learn at ``new_lr``
(1e-3), biases and layer norms at ``lr`` (1e-4); inputs of similar length batched together."""

FROZEN_BBA: Overrides = {"epochs": 1, "budget_min": 0.25}
"""bba's gates fitted on the frozen MiniLM fine-tune (``budgetformer fit-budget --method bba``):
gates on the pooled embeddings, a budget drawn per batch in [0.25, 1], one epoch."""

BASELINES_ROWS: Overrides = {"max_train": 4000}
"""The per-budget baselines on the pretrained encoder train on the first 4,000 rows (a fifth of
AG News's training rows): a full epoch each would take longer than all shipped models together."""


@dataclass(frozen=True)
class Extra:
    """A further model trained from scratch with the dataset's common overrides (e.g. one head)."""

    name: str
    method: str
    overrides: Overrides


@dataclass(frozen=True)
class Pretrained:
    """A model fine-tuned from the pretrained encoder ``minilm-l6`` (6 layers × 12 heads)."""

    name: str
    method: str
    overrides: Overrides = field(default_factory=dict)
    init: str | None = None
    """The model of the same dataset it starts from (a warm start); None: the pretrained encoder."""
    budget: float | None = None
    """The budget a per-budget baseline was made for."""
    prune: bool = False
    """A post-hoc baseline: ``init``'s heads ranked on the validation split, no training."""
    stage: bool = False
    """The first stage of a model that goes on from it: made only when that model is to be made
    (or when it is here and out of date), never evaluated, never shipped."""
    fit: bool = False
    """Budgets fitted on ``init`` kept frozen (``budgetformer fit-budget``): only the method's
    allocation networks learn, and the model ships as an adapter of ``init``."""


@dataclass(frozen=True)
class Recipe:
    """How one dataset's models are trained: overrides shared by all of them, and each kind's."""

    common: Overrides = field(default_factory=dict)
    """Every model trained from scratch or warm-started from dense (not those on MiniLM)."""
    scratch: Overrides = field(default_factory=dict)
    """Only the models trained like dense (dense, budgetformer, its paper recipe, the ablations)."""
    adaptive: Overrides = field(default_factory=dict)
    """Only budgetformer (the adaptive recipe) and its two ablations (e.g. the budget band)."""
    paper: Overrides = field(default_factory=dict)
    """Only budgetformer-paper, the paper's recipe (``recipe="paper"``)."""
    warm: Overrides = field(default_factory=lambda: {"epochs": 5})
    """Only the models warm-started from dense (bba and the static-gate baselines)."""
    bba: Overrides = field(default_factory=dict)
    """Only the bba model."""
    data: str | None = None
    """The folder of the dataset's local copy under the data root (None: built in)."""
    extra: tuple[Extra, ...] = ()
    budget_init: bool = False
    """Start budgetformer, budgetformer-paper and the ablations from the dense model (its weights;
    f_θ and g_φ fresh), as bba does, instead of from scratch."""
    pretrained: tuple[Pretrained, ...] = ()
    """The models on the pretrained encoder, in the order they are made."""
    from_scratch: bool = True
    """Make the models trained from scratch (dense, budgetformer and its paper recipe, the
    ablations, bba and the per-budget baselines); False: only :attr:`pretrained`'s."""


def _minilm_baselines(b: float, *, recovery: bool) -> Pretrained:
    """A per-budget baseline on MiniLM: static gates from the dense fine-tune, or the post-hoc
    pruned model with one recovery epoch (its gates frozen)."""
    overrides = {**AG_MINILM, "epochs": 1, **BASELINES_ROWS, "gate_input": False, "train_budget": b}
    if recovery:
        return Pretrained(f"minilm-recovery-{b:g}", "bba", {**overrides, "freeze_gates": True},
                          init="minilm-posthoc", budget=b)
    return Pretrained(f"minilm-static-{b:g}", "bba", overrides, init="minilm-dense", budget=b)


RECIPES: dict[str, Recipe] = {
    "bbc": Recipe(adaptive=ADAPTIVE, pretrained=(
        # 4 epochs at 128 tokens, then 2 more at 256 at half the learning rates
        Pretrained("minilm-dense-128", "dense", {**MINILM, "epochs": 4}, stage=True),
        Pretrained("minilm-dense", "dense", {**BBC_MINILM, "lr": 5e-5, "new_lr": 5e-4, "epochs": 2},
                   init="minilm-dense-128"),
        Pretrained("minilm-budgetformer", "budgetformer", {**BBC_MINILM, "epochs": 3, **MINILM_ADAPTIVE},
                   init="minilm-dense"),
        Pretrained("minilm-frozen-budgetformer", "budgetformer", FROZEN_MINILM, init="minilm-dense", fit=True),
    )),
    "synthetic": Recipe(
        common=SYNTHETIC,
        scratch={"epochs": 8},
        # warm-started from dense. The task needs 2 of 8 heads: a band whose floor buys them
        # (s ≥ 0.25 → k ≥ 2), held firmly
        adaptive={"epochs": 6, "s_min": 0.3, "lambda_budget": 10, "structural_from": 0},
        paper={"s_min": 0.3, "lambda_budget": 10},
        warm={"epochs": 16},
        # static gates read no input; "layer" is the layout the shipped checkpoint was trained in
        # (trained again under "embedding", it reached 98.6 % at b = 0.25 instead of 99.7 %)
        bba={"gate_input": False, "structural_from": 0, "budget_min": 0.25, "gate_source": "layer"},
        extra=(Extra("dense-1head", "dense", {"epochs": 8, "n_heads": 1}),),
        budget_init=True,
    ),
    "synthetic_var": Recipe(
        # one layer, heads of width 1 (a head passes on one number), the anchor's state classified
        common={**SYNTHETIC, "head_dim": 1, "pooling": "first"},
        scratch={"epochs": 6},
        # warm-started from dense. Rank, then count: for the first half every input runs a random
        # k of 1 … 4 and all but f_θ learn (g_φ which heads first, the heads to read a slot each);
        # then f_θ alone learns how many to run, at a price that makes a head worth its cost only
        # where it reads a slot in use, with half a head of margin
        adaptive={"epochs": 8, "s_min": 0.1875, "s_max": 0.6, "lambda_budget": 10, "structural_from": 0,
                  "random_k": 0.5, "standardize_scores": True, "k_margin": 0.5, "lambda_cost": 2.0},
        paper={"epochs": 8, "s_max": 0.6, "lambda_budget": 10},
        warm={"epochs": 8},
        bba={"structural_from": 0, "budget_min": 0.125},
        # dense models with fewer heads than some inputs need, trained as long as the 8-head one
        extra=tuple(Extra(f"dense-{h}head", "dense", {"epochs": 6, "n_heads": h}) for h in (1, 2, 3)),
        budget_init=True,
    ),
    "ag_news": Recipe(
        common={"max_len": 128, "dropout": 0.3, "d_ff": 128},
        adaptive=AG_NEWS_ADAPTIVE,
        scratch={"epochs": 3},
        warm={"epochs": 3},
        data="ag_news",
        pretrained=(
            Pretrained("minilm-dense-epoch1", "dense", {**MINILM, "epochs": 1}, stage=True),
            # a second epoch from the first at half the learning rate
            Pretrained("minilm-dense", "dense", {**AG_MINILM, "epochs": 1, "lr": 5e-5, "new_lr": 5e-5},
                       init="minilm-dense-epoch1"),
            # warm-started from the dense fine-tune, as the paper does, on the first 8,000 rows
            Pretrained("minilm-bba", "bba", {**AG_MINILM, "epochs": 1, "max_train": 8000}, init="minilm-dense"),
            *(_minilm_baselines(b, recovery=False) for b in (0.25, 0.5)),
            Pretrained("minilm-posthoc", "dense", init="minilm-dense", prune=True),
            *(_minilm_baselines(b, recovery=True) for b in (0.25, 0.5)),
        ),
    ),
}


@dataclass(frozen=True)
class Benchmark:
    """One of the seeds' benchmarks: what its dense fine-tune changes of :data:`LORA_MINILM`, and
    how its bba and BudgetFormer are made from that dense model."""

    dense: Overrides
    fit: Overrides = field(default_factory=dict)
    """What both fits on the frozen dense model change (:data:`FROZEN_BBA`, :data:`FROZEN_MINILM`)."""
    adapting: Overrides | None = None
    """Train the methods of :attr:`adapted` from the dense model with its encoder adapting too
    (rank-8 changes, or ``lora_rank``'s, stacked on the dense model's) with these changes of the
    dense recipe, instead of fitting them on it frozen; None: both fitted."""
    adapted: tuple[str, ...] = ("bba", "budgetformer")
    """The methods trained with the encoder adapting (where :attr:`adapting` is given)."""
    bba: Overrides = field(default_factory=dict)
    """What the adapting bba changes further (its epochs, rank)."""
    budgetformer: Overrides = field(default_factory=dict)
    """What the adapting BudgetFormer changes further (its band [s_min, s_max] of
    :data:`MINILM_ADAPTIVE`, its rows, rank)."""


ADAPTING_BBA: Overrides = {"budget_min": 0.25}
"""bba trained from the dense model with its encoder adapting: a budget drawn per batch in
[0.25, 1], as :data:`FROZEN_BBA` draws it."""


def _benchmark(data: str, b: Benchmark) -> Recipe:
    """One of the seeds' benchmarks (its local copy in ``data``): MiniLM fine-tuned by low-rank
    changes, then bba's gates and BudgetFormer's f_θ and g_φ warm-started from it, as the bba paper
    does — fitted on it kept frozen (stored as adapters of it), or trained with its encoder adapting
    (:attr:`Benchmark.adapting`)."""
    dense = {**LORA_MINILM, **b.dense}

    def made(method: str, fitted: Overrides, trained: Overrides) -> Pretrained:
        if b.adapting is not None and method in b.adapted:
            return Pretrained(f"minilm-{method}", method, {**dense, **b.adapting, **trained}, init="minilm-dense")
        return Pretrained(f"minilm-{method}", method, {**fitted, **b.fit}, init="minilm-dense", fit=True)

    return Recipe(data=data, from_scratch=False, pretrained=(
        Pretrained("minilm-dense", "dense", dense),
        made("bba", FROZEN_BBA, {**ADAPTING_BBA, **b.bba}),
        made("budgetformer", FROZEN_MINILM, {**MINILM_ADAPTIVE, **b.budgetformer}),
    ))


BENCHMARKS: dict[str, Benchmark] = {
    # 3,500 training rows of 14 classes: a title and the start of its abstract (96 tokens)
    "dbpedia": Benchmark({"epochs": 3, "max_len": 96}),
    # GLUE's 67,349 training phrases (median 7 words): one epoch at 64 tokens; bba and BudgetFormer
    # two epochs with the encoder adapting (fitted on the frozen encoder they stayed 1.1 and 2.5
    # points below dense), bba on the first 16,000 phrases, BudgetFormer on 32,000 with the band
    # [0.15, 0.75] (the runs tried are in docs/pretrained.md)
    "sst2": Benchmark({"epochs": 1, "max_len": 64}, adapting={"epochs": 2, "max_train": 16000},
                      budgetformer={"max_train": 32000, "s_min": 0.15, "s_max": 0.75}),
    # 6,885 pairs (each premise on one side of the split only): bba and BudgetFormer with the
    # encoder adapting by rank-32 changes (at rank 8 or 16 both stayed 2.1 to 2.6 points below
    # dense, fitted on the frozen encoder 6.9 and 12.6), bba 6 epochs distilled to the dense
    # model (without it, one training seed in three stayed 2.3 points below), BudgetFormer 4 in
    # the band [0.25, 0.8]
    "snli": Benchmark({"epochs": 4}, adapting={"epochs": 4, "lora_rank": 32}, bba={"epochs": 6, "distill": 0.5},
                      budgetformer={"s_min": 0.25, "s_max": 0.8}),
}
"""The seeds' benchmarks (local copies in ``<data root>/<name>``)."""
RECIPES.update({name: _benchmark(name, benchmark) for name, benchmark in BENCHMARKS.items()})


def data_dir(dataset: str, root: str | Path = DATA_ROOT) -> Path | None:
    """The local copy of ``dataset`` under ``root`` (None for a built-in dataset)."""
    folder = RECIPES[dataset].data
    return None if folder is None else Path(root) / folder
