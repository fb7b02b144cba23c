"""Typed, validated configuration: the model's shape and the training recipe.

Every choice the papers leave open is a field here with a documented default. Overrides, from
the command line (``--set key=value``) or a recipe (a mapping of typed values), go through
:func:`apply_overrides`, which rejects unknown keys and converts values to the field's type.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

MethodName = Literal["dense", "budgetformer", "bba"]
HeadChoice = Literal["learned", "uniform", "random"]
HeadWeighting = Literal["scaled", "gated"]
GateSource = Literal["embedding", "layer"]
Recipe = Literal["adaptive", "paper"]
BetaSchedule = Literal["linear", "cosine", "step"]
Norm = Literal["pre", "post"]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu", "tanh"]
ACTIVATIONS = get_args(Activation)
"""The non-linearities a feed-forward block or a pooler may use: exact (erf) GELU, its tanh
approximation, ReLU, SiLU (swish) and tanh."""

MAX_LEN = 65_536
"""Longest ``max_len`` a config may ask for (the position table and attention grow with it)."""
MAX_PARAMETERS = 2**31
"""Most weights a config may imply (8 GiB of float32): a typo should fail before allocating."""
N_SPECIAL_TOKENS = 3
"""[PAD], [UNK] and [SEP]: the smallest vocabulary a tokenizer can have."""


def check_field_types(cfg: Any) -> None:
    """Raise ``ValueError`` unless every field holds a value of its default's type.

    ints are whole numbers (not bools); floats are finite numbers (an int is accepted); bools
    are bools. Strings, NaN and infinity (from ``--set``, a config.json or the API) are refused
    here, before any comparison or allocation.
    """
    for f in dataclasses.fields(cfg):
        value, default = getattr(cfg, f.name), f.default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{f.name} must be true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{f.name} must be an integer, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{f.name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{f.name} must be a finite number, got {value}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise ValueError(f"{f.name} must be a string, got {value!r}")


@dataclass
class ModelConfig:
    """Shape of the encoder classifier and of its budget / head-scoring networks."""

    vocab_size: int = 8000
    """Largest vocabulary of the tokenizer trained on the training split (the embedding table
    is sized to what the tokenizer ends up with)."""
    n_classes: int = 2
    """Number of output classes."""
    d_model: int = 128
    """Width of the residual stream."""
    n_heads: int = 8
    """Attention heads per layer (H)."""
    head_dim: int = 0
    """Width Dh of each head's queries, keys and values; 0 = ``d_model / n_heads``, the usual
    split. A width of its own decouples what a head can pass on from the residual stream's
    width: a head of width 1 passes on one number (the synthetic_var models: one head reads one
    slot)."""
    n_layers: int = 2
    """Encoder layers."""
    d_ff: int = 256
    """Hidden width of the feed-forward block."""
    max_len: int = 512
    """Longest input in tokens; longer inputs are truncated."""
    dropout: float = 0.2
    """Dropout on embeddings, attention output and feed-forward output."""
    pooling: Literal["mean", "mean_max", "first", "pooler"] = "mean"
    """How token states become the classifier's input: their mean, mean and max concatenated, or
    the first token's state alone (``first``: in a one-layer model only the first token's query
    then reaches the classifier, so what a head passes on is one attention pattern's reading), or
    that state through a dense layer and tanh (``pooler``: BERT's pooler, which a Hugging Face
    sequence classifier brings trained, :mod:`budgetformer_core.io.classifier`)."""
    method: MethodName = "budgetformer"
    """``dense`` (plain multi-head attention), ``budgetformer`` (f_θ + g_φ per layer) or ``bba``
    (budgeted attention allocation: the caller requests a budget b, monotone head gates).
    config.json stores it under :data:`STORED_METHOD_KEY`."""
    budget_hidden: int = 32
    """Hidden width of the budget network f_θ and of the head-scoring network g_φ."""
    shared_budget: bool = False
    """One (f_θ, g_φ) pair shared by all layers instead of one pair per layer."""
    summary_norm: bool = False
    """BudgetFormer: f_θ and g_φ read the layer's summary h standardised per feature
    (:class:`~budgetformer_core.model.budget.SummaryNorm`: the batch's mean and variance in training,
    running averages of them at inference). The pooled embeddings of different texts differ
    little next to what they share (on MiniLM, 0.05 per feature around a mean of norm 2.3), so
    without it the first layer's f_θ gives nearly every input the same s."""
    tau: float = 1.0
    """Temperature of the head relevance softmax p = softmax(z / τ)."""
    use_budget_net: bool = True
    """Ablation "no f_θ": when False, s is the constant ``fixed_budget`` for every input."""
    fixed_budget: float = 0.5
    """The constant s used when ``use_budget_net`` is False."""
    head_choice: HeadChoice = "learned"
    """Ablation "no g_φ": ``uniform`` (p = 1/H, the first k heads) or ``random`` heads."""
    head_weighting: HeadWeighting = "gated"
    """BudgetFormer's head weights w. ``scaled``: the paper's w = s·H·p (s scales the output of
    the heads that run). ``gated``: w = 1 on the k heads that run, trained through soft gates
    with straight-through gradients (s decides how many heads contribute, p which). Set by the
    training recipe (``TrainConfig.recipe``): ``paper`` → scaled, ``adaptive`` → gated."""

    gate_input: bool = True
    """bba: rank heads per input with a gate network on the pooled layer input (True), or with
    one learned score per head shared by all inputs (False: static gates, as in the baselines)."""
    gate_source: GateSource = "embedding"
    """bba: what the gates read. ``embedding``: the pooled embedding output, the same at every
    budget, so head sets are nested in every layer. ``layer``: the pooled layer input (nested in the
    first layer only, since later layers' inputs depend on the heads run before them)."""
    gate_temperature: float = 0.5
    """Softness of the training gates: bba's sigmoid((z − threshold) / T), and the soft gates
    behind BudgetFormer's ``gated`` weights (of z, and of s by head rank)."""
    default_budget: float = 0.5
    """bba: the budget b used when the caller requests none."""
    kept_heads: list[list[int]] | None = None
    """Heads pruned once (``BudgetFormer.prune_heads``): per layer, the heads kept (the others'
    weights are gone); None = no pruning."""
    norm: Norm = "pre"
    """Where the layer norms sit. ``pre``: before each sublayer, plus a final one (our models
    trained from scratch). ``post``: BERT's layout — a layer norm of the embeddings, one after
    each residual sum, none at the end (pretrained encoders, :mod:`budgetformer_core.io.pretrained`)."""
    activation: Activation = "gelu"
    """The feed-forward non-linearity (:data:`ACTIVATIONS`): exact (erf) GELU, its tanh
    approximation (``gelu_new`` of some BERT-family checkpoints, ALBERT's), ReLU (some
    DistilBERTs), SiLU or tanh."""
    type_vocab_size: int = 0
    """Token-type (segment) embeddings, as BERT's; 0 = none. Every token is of type 0."""
    layer_norm_eps: float = 1e-5
    """ε of every layer norm (BERT's checkpoints use 1e-12)."""
    embedding_size: int = 0
    """Width of the token, position and type embeddings when they are factorised (ELECTRA,
    ALBERT): they are summed and layer-normed at this width, then a Linear(embedding_size,
    d_model) projects them into the residual stream. 0 = no projection (embeddings of width
    d_model)."""
    pooler_activation: Activation = "tanh"
    """The non-linearity of the pooler (``pooling="pooler"``): tanh for BERT, RoBERTa and ALBERT,
    ReLU for DistilBERT's pre-classifier, GELU for ELECTRA's classification head."""

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in ("vocab_size", "n_classes", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "budget_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.vocab_size < N_SPECIAL_TOKENS:
            raise ValueError(f"vocab_size must be >= {N_SPECIAL_TOKENS} (the special tokens), got {self.vocab_size}")
        if self.max_len > MAX_LEN:
            raise ValueError(f"max_len must be <= {MAX_LEN:,}, got {self.max_len:,}")
        if self.embedding_size < 0 or self.type_vocab_size < 0:
            raise ValueError(f"embedding_size and type_vocab_size must be >= 0 (0 = none), got "
                             f"{self.embedding_size} and {self.type_vocab_size}")
        d, ff, n_layers, hidden = self.d_model, self.d_ff, self.n_layers, self.budget_hidden
        e = self.embedding_size or d
        # embeddings (and their projection), attention and feed-forward per layer, f_θ and g_φ
        # per layer, the pooler and the classifier
        weights = ((self.vocab_size + self.max_len + self.type_vocab_size) * e + (e * d if self.embedding_size else 0)
                   + n_layers * (4 * d * self.n_heads * self.d_head + 2 * d * ff)
                   + n_layers * hidden * (2 * d + self.n_heads + 1) + d * d + 2 * d * self.n_classes)
        if weights > MAX_PARAMETERS:
            raise ValueError(f"this shape implies about {weights:,} weights (vocab_size, max_len, d_model, head_dim, "
                             f"d_ff, n_layers, budget_hidden, n_classes); the limit is {MAX_PARAMETERS:,}")
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {self.n_classes}")
        if self.head_dim < 0:
            raise ValueError(f"head_dim must be >= 0 (0 = d_model / n_heads), got {self.head_dim}")
        if not self.head_dim and self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.method not in ("dense", "budgetformer", "bba"):
            raise ValueError(f"method must be dense, budgetformer or bba, got {self.method!r}")
        if not 0.0 < self.default_budget <= 1.0:
            raise ValueError(f"default_budget must be in (0, 1], got {self.default_budget}")
        if self.gate_temperature <= 0:
            raise ValueError(f"gate_temperature must be > 0, got {self.gate_temperature}")
        if self.pooling not in ("mean", "mean_max", "first", "pooler"):
            raise ValueError(f"pooling must be 'mean', 'mean_max', 'first' or 'pooler', got {self.pooling!r}")
        if self.head_choice not in ("learned", "uniform", "random"):
            raise ValueError(f"head_choice must be learned/uniform/random, got {self.head_choice!r}")
        if not 0.0 < self.fixed_budget <= 1.0:
            raise ValueError(f"fixed_budget must be in (0, 1], got {self.fixed_budget}")
        if self.tau <= 0:
            raise ValueError(f"tau must be > 0, got {self.tau}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.head_weighting not in ("scaled", "gated"):
            raise ValueError(f"head_weighting must be 'scaled' or 'gated', got {self.head_weighting!r}")
        if self.norm not in ("pre", "post"):
            raise ValueError(f"norm must be 'pre' or 'post', got {self.norm!r}")
        for name in ("activation", "pooler_activation"):
            if getattr(self, name) not in ACTIVATIONS:
                raise ValueError(f"{name} must be one of {', '.join(ACTIVATIONS)}, got {getattr(self, name)!r}")
        if not 0.0 < self.layer_norm_eps < 1.0:
            raise ValueError(f"layer_norm_eps must be in (0, 1), got {self.layer_norm_eps}")
        if self.summary_norm and self.method != "budgetformer":
            raise ValueError(f"summary_norm standardises what f_θ and g_φ read; a {self.method} model has neither")
        if self.gate_source not in ("embedding", "layer"):
            raise ValueError(f"gate_source must be 'embedding' or 'layer', got {self.gate_source!r}")
        if self.kept_heads is not None:
            if not isinstance(self.kept_heads, list) or not all(
                isinstance(heads, list) and all(type(h) is int for h in heads) for heads in self.kept_heads
            ):
                raise ValueError(f"kept_heads must be a list of head-index lists, got {self.kept_heads!r}")
            if len(self.kept_heads) != self.n_layers:
                raise ValueError(f"kept_heads needs one head list per layer ({self.n_layers})")
            for heads in self.kept_heads:
                if not heads or len(set(heads)) != len(heads) or not all(0 <= h < self.n_heads for h in heads):
                    raise ValueError(f"kept_heads: {heads} is not a set of heads among 0..{self.n_heads - 1}")

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads


ENCODER_FIELDS = ("vocab_size", "d_model", "n_heads", "head_dim", "n_layers", "d_ff", "norm", "activation",
                  "type_vocab_size", "layer_norm_eps", "embedding_size")
"""The ModelConfig fields that fix an encoder's weights and how they compute: a pretrained
checkpoint, or a warm start, decides them."""


@dataclass
class TrainConfig:
    """The training recipe: optimiser, schedule and the BudgetFormer loss weights."""

    epochs: int = 8
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_frac: float = 0.1
    """Fraction of optimiser steps with linear learning-rate warm-up (then cosine decay)."""
    grad_clip: float = 1.0
    seed: int = 0
    label_smoothing: float = 0.0
    token_dropout: float = 0.1
    """Fraction of training tokens dropped at random from each input (augmentation)."""
    random_crop: bool = True
    """Train on a random window of ``max_len`` tokens of longer inputs (test reads the start)."""
    s_min: float = 0.1
    """Lower edge of the budget band: L_budget is zero for s in [s_min, s_max]."""
    s_max: float = 0.45
    """Upper edge of the budget band."""
    lambda_budget: float = 1.0
    """λ_b, weight of the quadratic-hinge budget loss."""
    lambda_entropy: float = 0.01
    """λ_e, weight of β(t)·H(p)."""
    recipe: Recipe = "adaptive"
    """BudgetFormer's training recipe. ``paper``: the paper's loss L_task + λ_b·L_budget +
    λ_e·β(t)·H(p) with w = s·H·p; nothing prices heads inside the band, and the task loss sees s
    only as a scale of the head outputs. ``adaptive``: w = 1 on the heads that run with
    straight-through soft gates (``ModelConfig.head_weighting="gated"``), so the task loss sees
    how many heads run, plus a per-input price λ_c·s on heads: an input gets more heads only
    where they lower its loss. The soft path runs all training (see ``structural_from``)."""
    lambda_cost: float = 0.05
    """λ_c, the price of heads in the ``adaptive`` recipe: λ_c · mean s (the expected fraction of
    heads run) is added to the loss. Unused by the ``paper`` recipe."""
    lambda_difficulty: float = 0.0
    """λ_d (``adaptive`` recipe; 0 = off): pulls each input's s towards a target set by how hard
    the input is for the model right now — the rank of its task loss within the batch, mapped
    linearly onto [s_min, s_max] — with λ_d · mean (s − target)². The budget network then learns
    to predict difficulty from the pooled layer input, and the inputs it finds hard get more heads."""
    difficulty_from: Literal["model", "init"] = "model"
    """Whose task loss ranks the inputs for λ_d: ``model``, the model in training, batch by batch;
    ``init``, the warm start (``--init``, e.g. the dense fine-tune), measured once on every
    training input before the first step (its start of ``max_len`` tokens, no augmentation) and
    fixed for the run. The first follows the model as it changes, and its ranking drifts as
    training fits the inputs; the second is the difficulty that ``budgetformer adaptivity
    --reference`` judges a model by."""
    distill: float = 0.0
    """Distillation to the warm start (``--init``, e.g. the dense fine-tune; 0 = off): the task
    term becomes (1 − distill)·CE(labels) + distill·T²·KL(softmax(t/T) ‖ softmax(z/T)) with T = 2,
    where t are the warm start's logits on each training input, measured once before the first
    step as ``difficulty_from="init"`` measures its losses, and z the model's. A model that drops
    heads then learns to answer as the model with every head does, not only to fit the labels."""
    lambda_balance: float = 0.0
    """λ_u (``adaptive`` recipe; 0 = off): weight of H·Σ_h (mean over the batch of p_h)², which is
    1 when the inputs of a batch favour different heads evenly and H when all favour one, so that
    g_φ ranks heads per input rather than once for all (as the load balancing of mixtures of
    experts)."""
    random_k: float = 0.0
    """Rank first, then count (``adaptive`` recipe; 0 = off): for this fraction of training, from
    its start, every input runs a random number of heads, uniform on 1 … ⌊s_max·H⌋, instead of
    f_θ's k, and everything but f_θ learns — g_φ which heads matter most for each input (the
    first must serve alone, the second with it, …), the rest of the model to work with any number
    of them; for the rest of training only f_θ learns, how many heads to run, at the price λ_c.
    With f_θ's k from the start g_φ is taught only at the k that f_θ picks, and while that k
    covers every input one order of heads for all inputs costs nothing; and while the rest of the
    model keeps learning, it learns to do without the heads f_θ leaves out, so that f_θ sees no
    gain in running them and leaves them out for good (docs/method.md)."""
    standardize_scores: bool = False
    """``adaptive`` recipe: g_φ's soft gates read each input's head scores standardised,
    (z − mean) / std over its H heads, rather than z itself (the ranking, and so which heads run,
    is unchanged). A soft gate passes a gradient only to heads whose z lies within a few
    temperatures of the cut between the k-th and the (k+1)-th head; with raw z, Adam's
    scale-free steps keep pushing the heads that are always cut out (or always in) further away,
    the spread of z grows without bound, p saturates (log p of −∞ for most heads) and the order
    among the heads far below the cut — the ones an input would need next — freezes at
    whatever it was (as on synthetic_var). Standardised, no
    head can leave the gates' reach."""
    k_margin: float = 0.0
    """``adaptive`` recipe, in heads (0 = off): in training each input runs
    k = max(1, ⌊s·H − k_margin⌋) heads instead of ⌊s·H⌋, and s's gradient comes from the gates
    of that k; inference runs ⌊s·H⌋. Without it s settles on the edge where an input's last
    needed head switches on — one head more lowers the loss until it runs, then only the price
    on heads speaks (the straight-through gradient of a head that runs tells how its scale, not
    its presence, would change the loss) — and the k at inference flips with the last digits of
    s. With a margin of 0.5 the edge that training settles on, s·H − ½ = n for an input whose
    last needed head is the n-th, puts s·H at n + ½: inference runs those n heads with half a
    head of slack either way."""
    beta_start: float = -1.0
    """β at the start of training (< 0 rewards high head entropy: explore)."""
    beta_end: float = 1.0
    """β at the end of training (> 0 rewards low head entropy: specialise)."""
    beta_schedule: BetaSchedule = "linear"
    """Shape of β(t) from beta_start to beta_end: linear, cosine or step (at half-way)."""
    embed_init: Literal["normal", "lsa"] = "lsa"
    """Token embeddings start random (``normal``) or from an LSA of the training split
    (``lsa``: truncated SVD of its TF-IDF token-document matrix, rescaled to the normal init's
    standard deviation), a cheap way to start with topic-aware word vectors."""
    pos_init: Literal["normal", "sinusoidal"] = "normal"
    """Position embeddings start random (``normal``) or as the sinusoids of Vaswani et al.
    rescaled to the normal init's standard deviation (``sinusoidal``: relative offsets are then
    easy to attend to from the first step, which tasks built on word order need)."""
    ema: float = 0.98
    """Decay of an exponential moving average of the weights (e.g. 0.99), used for validation,
    test and the checkpoint; 0 = off."""
    structural_from: float = 0.7
    """Fraction of training after which only the top-k heads contribute, as at inference
    (hard-gate adaptation; gradients still reach s and p through w). 1.0 = never. Gated head
    weights (the ``adaptive`` recipe) get there on the soft path — the soft gates themselves are
    the weights before it, the exact top k with straight-through gradients after it —; the other
    models run the structural path from it on."""
    train_budget: float = 0.0
    """bba: 0 = sample b uniformly in [budget_min, 1] for every batch (one checkpoint for any
    budget); otherwise train at this fixed b (the static fixed-budget baseline)."""
    freeze_gates: bool = False
    """bba: keep the gate scores fixed (post-hoc ranking + recovery epoch)."""
    budget_min: float = 0.1
    """bba: smallest budget sampled in training."""
    new_lr: float = 0.0
    """Peak learning rate of the networks a pretrained encoder does not bring — the classifier,
    f_θ, g_φ and bba's gates (parameters named ``head`` or ``alloc``) — when it should differ
    from ``lr`` (0 = ``lr``): fine-tuning a pretrained encoder wants a small ``lr``
    (1e-4), at which freshly initialised budget networks hardly leave their start in a few hundred
    steps. Same warm-up and decay."""
    max_train: int = 0
    """Use only the first N training rows (0 = all); for quick runs."""
    length_groups: int = 0
    """Batch inputs of similar length (0 = off): each epoch's shuffled order is cut into groups
    of this many batches, each group sorted by length and cut into batches, and the batches
    shuffled again. A batch is padded to its longest input, so on short texts of varied length
    (AG News: 53 tokens on average, 105 for the longest of 32 drawn at random) a step computes
    about half as many token positions."""
    freeze_embeddings: bool = False
    """Keep the token, position and token-type embeddings (and their layer norm) as they start:
    a pretrained encoder's vocabulary stays as pretrained, and each step is cheaper."""
    lora_rank: int = 0
    """Fine-tune a pretrained encoder's layers by low-rank changes (LoRA, 0 = off): each layer's
    Q/K/V, attention-output and feed-forward matrices learn ``W0 + B·A`` of this rank with W0
    frozen (:mod:`budgetformer_core.model.low_rank`), and the checkpoint stores the factors —
    about 0.6 MB at rank 8 on MiniLM instead of 11 MB of full changes. Biases and layer norms
    still learn; A and B learn at ``new_lr``."""

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be >= 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.new_lr < 0:
            raise ValueError(f"new_lr must be >= 0 (0 = lr), got {self.new_lr}")
        if self.grad_clip <= 0:
            raise ValueError(f"grad_clip must be > 0, got {self.grad_clip}")
        if self.length_groups < 0:
            raise ValueError(f"length_groups must be >= 0 (0 = off), got {self.length_groups}")
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank must be >= 0 (0 = off), got {self.lora_rank}")
        if self.max_train < 0:
            raise ValueError(f"max_train must be >= 0 (0 = all rows), got {self.max_train}")
        for name in ("weight_decay", "lambda_budget", "lambda_entropy"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if not 0.0 <= self.s_min <= self.s_max <= 1.0:
            raise ValueError(f"need 0 <= s_min <= s_max <= 1, got [{self.s_min}, {self.s_max}]")
        if self.beta_schedule not in ("linear", "cosine", "step"):
            raise ValueError(f"beta_schedule must be linear/cosine/step, got {self.beta_schedule!r}")
        if not 0.0 <= self.train_budget <= 1.0 or not 0.0 < self.budget_min <= 1.0:
            raise ValueError("train_budget must be in [0, 1] and budget_min in (0, 1]")
        if self.embed_init not in ("normal", "lsa"):
            raise ValueError(f"embed_init must be 'normal' or 'lsa', got {self.embed_init!r}")
        if self.pos_init not in ("normal", "sinusoidal"):
            raise ValueError(f"pos_init must be 'normal' or 'sinusoidal', got {self.pos_init!r}")
        if not 0.0 <= self.ema < 1.0:
            raise ValueError(f"ema must be in [0, 1), got {self.ema}")
        if not 0.0 <= self.k_margin < 1.0:
            raise ValueError(f"k_margin must be in [0, 1) heads, got {self.k_margin}")
        if not 0.0 <= self.random_k <= 1.0:
            raise ValueError(f"random_k must be in [0, 1], got {self.random_k}")
        if not 0.0 <= self.structural_from <= 1.0:
            raise ValueError(f"structural_from must be in [0, 1], got {self.structural_from}")
        if not 0.0 <= self.token_dropout < 1.0:
            raise ValueError(f"token_dropout must be in [0, 1), got {self.token_dropout}")
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ValueError(f"warmup_frac must be in [0, 1), got {self.warmup_frac}")
        if self.recipe not in ("adaptive", "paper"):
            raise ValueError(f"recipe must be 'adaptive' or 'paper', got {self.recipe!r}")
        if self.difficulty_from not in ("model", "init"):
            raise ValueError(f"difficulty_from must be 'model' or 'init', got {self.difficulty_from!r}")
        if not 0.0 <= self.distill <= 1.0:
            raise ValueError(f"distill must be in [0, 1], got {self.distill}")
        if min(self.lambda_cost, self.lambda_difficulty, self.lambda_balance) < 0:
            raise ValueError(f"lambda_cost, lambda_difficulty and lambda_balance must be >= 0, got "
                             f"{self.lambda_cost}, {self.lambda_difficulty}, {self.lambda_balance}")


STORED_METHOD_KEY = "variant"
"""The key under which a stored model config (config.json's ``model`` section, a run's records)
holds :attr:`ModelConfig.method`: the field's name when the first checkpoints were saved.
:func:`to_dict` writes it, :func:`model_config_from_dict` and :func:`stored_method` read it, and an
override ``variant=…`` means ``method=…``."""


def field_name(key: str) -> str:
    """The config field ``key`` names: ``method`` for :data:`STORED_METHOD_KEY`, else ``key``."""
    return "method" if key == STORED_METHOD_KEY else key


def stored_method(model: Mapping[str, Any], default: Any = None) -> Any:
    """The method a stored model config (config.json's ``model`` section as JSON) names, under
    :data:`STORED_METHOD_KEY` or ``method``; ``default`` when it names none."""
    return model.get(STORED_METHOD_KEY, model.get("method", default))


STATED_IF_CHANGED = ("embedding_size", "pooler_activation")
"""ModelConfig fields added after checkpoints were shipped: config.json states them only when
they differ from their default, so every config written before them is written again byte for
byte (and a config without them reads as the defaults, which is what those models ran)."""


def to_dict(cfg: Any) -> dict[str, Any]:
    """A config's fields as config.json stores them: a ModelConfig's ``method`` under
    :data:`STORED_METHOD_KEY`, in the field's place, without :data:`STATED_IF_CHANGED`'s
    fields at their default."""
    d = dataclasses.asdict(cfg)
    if isinstance(cfg, ModelConfig):
        defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
        d = {(STORED_METHOD_KEY if k == "method" else k): v for k, v in d.items()
             if k not in STATED_IF_CHANGED or v != defaults[k]}
    return d


def model_config_from_dict(d: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from JSON, rejecting unknown keys (a mismatched checkpoint) and a config
    that does not state :data:`STATED_FIELDS`. The method is read under :data:`STORED_METHOD_KEY`,
    as config.json stores it, or under ``method``; a config stating both is refused."""
    if "method" in d and STORED_METHOD_KEY in d:
        raise ValueError(f"config states the method twice, as method and as {STORED_METHOD_KEY}")
    d = {field_name(k): v for k, v in d.items()}
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    unknown = set(d) - known
    if unknown:
        raise ValueError(f"config has unknown keys {sorted(unknown)}")
    cfg = ModelConfig(**d)
    unstated = [name for name in STATED_FIELDS if name not in d]
    if unstated:
        raise ValueError(f"config does not state {' and '.join(unstated)} (a checkpoint of an older layout: "
                         "scripts/migrate_checkpoints.py rewrites it)")
    return cfg


STATED_FIELDS = ("head_weighting", "gate_source")
"""The fields a saved config must state: a model trained with the other value of either computes
something else with the same weights, so their defaults never stand in for a missing key."""


def dumps(cfg: Any) -> str:
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True)

