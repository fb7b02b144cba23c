"""The encoder families a Hugging Face folder may hold, and how each maps onto our encoder.

One :class:`Family` per ``model_type`` (:data:`FAMILIES`, in small what ``transformers``'
``CONFIG_MAPPING`` is): where its config.json states each size, where its tensors are, how its
embeddings are made and what its classification head computes. All six are post-norm encoders
of BERT's shape (a layer norm of the embeddings and one after each residual sum), so one
:class:`~budgetformer_core.model.encoder.BudgetFormer` with ``norm="post"`` computes each:

=============  ==========================================  ======================================
model_type     embeddings                                  head on the first token
=============  ==========================================  ======================================
bert           word + position + token type                ``bert.pooler.dense``, tanh, ``classifier``
distilbert     word + position (no types, ε fixed 1e-12)   ``pre_classifier``, ReLU, ``classifier``
roberta,       positions start at ``pad_token_id + 1``:    ``classifier.dense``, tanh,
xlm-roberta    the table is cut there at load              ``classifier.out_proj``
electra        factorised (``embedding_size``), then       ``classifier.dense``, GELU,
               ``embeddings_project`` to the width         ``classifier.out_proj``
albert         factorised, then ``embedding_hidden_        ``albert.pooler``, tanh, ``classifier``
               mapping_in``; layers share their group's
=============  ==========================================  ======================================

Every head is a dense layer, a non-linearity and a linear classifier on the first token's
state: our pooler (``ModelConfig.pooling="pooler"``) with the family's
``ModelConfig.pooler_activation``. Cutting RoBERTa's position table is exact for right-padded
batches (its position ids count the real tokens from ``pad_token_id + 1``). Every config value
read is checked for its type and range here or by :class:`~budgetformer_core.config.ModelConfig`
before anything is allocated; a message names the folder's own key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .files import CheckpointError

HIDDEN_ACTS = {"gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_fast": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}
"""``hidden_act`` (DistilBERT: ``activation``) → ``ModelConfig.activation``."""

BERT_SIZES = {"vocab_size": "vocab_size", "d_model": "hidden_size", "n_heads": "num_attention_heads",
              "n_layers": "num_hidden_layers", "d_ff": "intermediate_size", "max_len": "max_position_embeddings",
              "dropout": "hidden_dropout_prob", "activation": "hidden_act", "type_vocab_size": "type_vocab_size",
              "layer_norm_eps": "layer_norm_eps"}
"""ModelConfig field → the config.json key that states it, in BERT's config."""
BERT_LAYER = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
              "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm")
"""A BERT layer's tensors, in :data:`OUR_LAYER`'s order after Q, K and V."""
OUR_LAYER = ("attn.out", "ln1", "ff.0", "ff.2", "ln2")
"""Our names of a layer's tensors besides the fused Q/K/V projection."""
REQUIRED = ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len")
"""The sizes a config.json must state; the rest default as in ``transformers``."""


@dataclass(frozen=True)
class Family:
    """How one ``model_type``'s folder maps onto our encoder."""

    model_type: str
    prefix: str
    """The encoder's tensors' prefix in a ``…ForSequenceClassification`` (``bert.``)."""
    pooler: str
    """The head's dense layer (our pooler), full name without ``.weight``."""
    classifier: str
    """The head's output layer (our ``head``), full name without ``.weight``."""
    pooler_activation: str = "tanh"
    sizes: dict[str, str] = field(default_factory=lambda: dict(BERT_SIZES))
    defaults: dict[str, Any] = field(default_factory=dict)
    """config.json values ``transformers`` assumes when a key is absent (the sizes are required)."""
    fixed: dict[str, Any] = field(default_factory=dict)
    """ModelConfig values the family fixes (DistilBERT: no token types, ε 1e-12)."""
    layer: str = "encoder.layer.{i}."
    """Where layer i's tensors are, under the prefix (ALBERT: ``{group}``, its shared group)."""
    layer_tensors: tuple[str, ...] = BERT_LAYER
    position_offset: bool = False
    """Positions start at ``pad_token_id + 1`` (RoBERTa, XLM-R)."""
    projection: str = ""
    """The factorised embeddings' projection to the width, under the prefix; "" = none."""
    always_projects: bool = False
    """ALBERT projects even when ``embedding_size`` equals the width; ELECTRA only when it differs."""

    def layers(self, hf: dict[str, Any], n_layers: int) -> list[str]:
        """Where each of our ``n_layers`` layers reads its tensors. ALBERT's layer i runs group
        ⌊i / (L / G)⌋ of its ``num_hidden_groups`` G, as ``transformers`` does; a group's weights
        are copied into each layer that shares them."""
        groups = hf.get("num_hidden_groups", 1) if "{group}" in self.layer else n_layers
        return [self.layer.format(i=i, group=int(i / (n_layers / groups))) for i in range(n_layers)]


_BERT_DEFAULTS = {"hidden_dropout_prob": 0.1, "hidden_act": "gelu", "type_vocab_size": 2, "layer_norm_eps": 1e-12}
_ROBERTA = dict(prefix="roberta.", pooler="classifier.dense", classifier="classifier.out_proj",
                defaults={**_BERT_DEFAULTS, "pad_token_id": 1}, position_offset=True)
FAMILIES = {f.model_type: f for f in (
    Family("bert", "bert.", "bert.pooler.dense", "classifier", defaults=_BERT_DEFAULTS),
    Family("distilbert", "distilbert.", "pre_classifier", "classifier", pooler_activation="relu",
           sizes={"vocab_size": "vocab_size", "d_model": "dim", "n_heads": "n_heads", "n_layers": "n_layers",
                  "d_ff": "hidden_dim", "max_len": "max_position_embeddings", "dropout": "dropout",
                  "activation": "activation"},
           defaults={"dropout": 0.1, "activation": "gelu"}, fixed={"type_vocab_size": 0, "layer_norm_eps": 1e-12},
           layer="transformer.layer.{i}.",
           layer_tensors=("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                          "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm")),
    Family("roberta", **_ROBERTA),
    Family("xlm-roberta", **_ROBERTA),
    Family("electra", "electra.", "classifier.dense", "classifier.out_proj", pooler_activation="gelu",
           sizes={**BERT_SIZES, "embedding_size": "embedding_size"},
           defaults={**_BERT_DEFAULTS, "embedding_size": 128}, projection="embeddings_project"),
    Family("albert", "albert.", "albert.pooler", "classifier",
           sizes={**BERT_SIZES, "embedding_size": "embedding_size"},
           defaults={**_BERT_DEFAULTS, "hidden_dropout_prob": 0.0, "hidden_act": "gelu_new", "embedding_size": 128,
                     "num_hidden_groups": 1, "inner_group_num": 1},
           layer="encoder.albert_layer_groups.{group}.albert_layers.0.",
           layer_tensors=("attention.query", "attention.key", "attention.value", "attention.dense",
                          "attention.LayerNorm", "ffn", "ffn_output", "full_layer_layer_norm"),
           projection="encoder.embedding_hidden_mapping_in", always_projects=True),
)}
"""The supported families by ``model_type``."""


def family_of(hf: dict[str, Any], file: Path, supported: tuple[str, ...] = tuple(FAMILIES)) -> Family:
    """The family config.json's ``model_type`` names, among ``supported``.

    Raises:
        CheckpointError: another model type, named with the supported ones.
    """
    model_type = hf.get("model_type")
    if not isinstance(model_type, str) or model_type not in supported:
        raise CheckpointError(f"{file}: model_type {shown(model_type)} is not supported (only "
                              f"{', '.join(repr(t) for t in supported)})")
    return FAMILIES[model_type]


def read_shape(hf: dict[str, Any], file: Path, family: Family) -> ModelConfig:
    """The encoder of config.json ``hf`` as a post-norm ModelConfig (the rest at its defaults).

    Each value is checked before use: sizes are whole numbers (not booleans or strings) within
    ModelConfig's ranges and its limit on weights, the activation is one we compute, token types
    exist where the family adds them, and RoBERTa's position offset leaves positions to read.

    Raises:
        CheckpointError: a value missing, of another type or out of range, named by its key.
    """
    values = {**family.defaults, **hf}
    missing = next((family.sizes[f] for f in REQUIRED if family.sizes[f] not in hf), None)
    if missing is not None:
        raise CheckpointError(f"{file}: no {missing!r}")
    for key in ("position_embedding_type", "is_decoder", "inner_group_num", "num_hidden_groups", "pad_token_id"):
        if key in values:
            _check_option(key, values[key], values, family, file)
    act_key = family.sizes["activation"]
    act = values.get(act_key)
    if not isinstance(act, str) or act not in HIDDEN_ACTS:
        raise CheckpointError(f"{file}: {act_key} {shown(act)} is not supported (only {', '.join(HIDDEN_ACTS)})")
    shape = {f: values[key] for f, key in family.sizes.items() if f != "activation"}
    shape.update(activation=HIDDEN_ACTS[act], norm="post", **family.fixed)
    if family.position_offset and _whole(shape["max_len"]):
        shape["max_len"] -= values["pad_token_id"] + 1  # positions 0 … pad_token_id are never read
    if family.sizes.get("type_vocab_size") and _whole(shape["type_vocab_size"]) and shape["type_vocab_size"] < 1:
        raise CheckpointError(f"{file}: type_vocab_size must be >= 1 (the {family.model_type} embeddings add "
                              f"type 0 to every token), got {shape['type_vocab_size']}")
    if "embedding_size" in shape:
        size = shape["embedding_size"]
        if _whole(size) and size < 1:
            raise CheckpointError(f"{file}: embedding_size must be >= 1, got {size}")
        if not family.always_projects and size == shape["d_model"]:
            shape["embedding_size"] = 0  # ELECTRA of one width: no projection
    try:
        return ModelConfig(**shape)
    except ValueError as e:
        raise CheckpointError(f"{file}: {_their_names(str(e), family, values)[:300]}") from None


def shown(value: Any) -> str:
    """``value`` as a message echoes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _whole(value: Any) -> bool:
    """An int that is not a bool (ModelConfig says what is wrong with anything else)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_option(key: str, value: Any, values: dict[str, Any], family: Family, file: Path) -> None:
    """Refuse a config.json option that would make the encoder compute something else."""
    if key == "position_embedding_type" and value != "absolute":
        raise CheckpointError(f"{file}: position_embedding_type {shown(value)} is not supported (only 'absolute')")
    if key == "is_decoder" and value not in (False, None):
        raise CheckpointError(f"{file}: is_decoder {shown(value)}: a decoder's causal attention is not an encoder's")
    if key == "num_hidden_groups" and family.model_type == "albert":
        n_layers = values.get(family.sizes["n_layers"])
        if not _whole(value) or value < 1 or (_whole(n_layers) and value > max(n_layers, 1)):
            raise CheckpointError(f"{file}: num_hidden_groups must be a whole number from 1 to num_hidden_layers, "
                                  f"got {shown(value)}")
    if key == "inner_group_num" and family.model_type == "albert" and value != 1:
        raise CheckpointError(f"{file}: inner_group_num {shown(value)} is not supported (only 1: one layer per "
                              "group)")
    if key == "pad_token_id" and family.position_offset and (not _whole(value) or value < 0):
        raise CheckpointError(f"{file}: pad_token_id must be a whole number >= 0 (positions start after it), "
                              f"got {shown(value)}")


def _their_names(message: str, family: Family, values: dict[str, Any]) -> str:
    """A ModelConfig error in the folder's words: its key for the field the message starts with."""
    name = message.split(" ", 1)[0]
    key = family.sizes.get(name)
    if name == "max_len" and family.position_offset:
        return f"max_position_embeddings less the {values['pad_token_id'] + 1} positions before the first " \
               f"token{message[len(name):]}"
    return key + message[len(name):] if key else message


def tensor_names(family: Family, hf: dict[str, Any], cfg: ModelConfig, prefix: str) -> dict[str, tuple[str, ...]]:
    """Our encoder's state-dict names → the folder's tensors each is made of (under ``prefix``):
    one, or Q, K and V stacked into our fused projection. The head is :func:`head_names`'."""
    names = {"tok_emb.weight": ("embeddings.word_embeddings.weight",),
             "pos_emb.weight": ("embeddings.position_embeddings.weight",)}
    if cfg.type_vocab_size:
        names["type_emb.weight"] = ("embeddings.token_type_embeddings.weight",)
    q, k, v, *rest = family.layer_tensors
    for kind in ("weight", "bias"):
        names[f"ln_emb.{kind}"] = (f"embeddings.LayerNorm.{kind}",)
        if cfg.embedding_size:
            names[f"emb_proj.{kind}"] = (f"{family.projection}.{kind}",)
        for i, layer in enumerate(family.layers(hf, cfg.n_layers)):
            # Q, K and V stacked: (3·D, D) rows, head h's rows [h·Dh, (h+1)·Dh) within each block,
            # the layout HeadAttention slices (the families' query/key/value rows are ordered by head)
            names[f"layers.{i}.attn.qkv.{kind}"] = tuple(f"{layer}{name}.{kind}" for name in (q, k, v))
            for ours, theirs in zip(OUR_LAYER, rest, strict=True):
                names[f"layers.{i}.{ours}.{kind}"] = (f"{layer}{theirs}.{kind}",)
    return {ours: tuple(prefix + name for name in theirs) for ours, theirs in names.items()}


def head_names(family: Family) -> dict[str, tuple[str]]:
    """Our pooler's and classifier's state-dict names → the folder's tensors."""
    return {f"{ours}.{kind}": (f"{theirs}.{kind}",) for ours, theirs in (("pooler.0", family.pooler),
                                                                         ("head", family.classifier))
            for kind in ("weight", "bias")}


def position_offset(family: Family, hf: dict[str, Any]) -> int:
    """Rows of the folder's position table before the first position read (RoBERTa: pad_token_id + 1)."""
    return hf.get("pad_token_id", family.defaults.get("pad_token_id", 0)) + 1 if family.position_offset else 0


def with_head(cfg: ModelConfig, family: Family, n_classes: int) -> ModelConfig:
    """``cfg`` as a dense classifier with the family's head over ``n_classes`` classes."""
    return dataclasses.replace(cfg, method="dense", pooling="pooler", n_classes=n_classes,
                               pooler_activation=family.pooler_activation)
