"""A model of ours written as a Hugging Face BERT sequence classifier (``budgetformer export``).

The folder is what ``transformers`` reads with ``AutoModelForSequenceClassification`` and
``AutoTokenizer``: ``config.json`` (``model_type: bert``, ``architectures``, ``id2label`` /
``label2id``), ``model.safetensors`` (``BertModel``'s tensor names under ``bert.``, float32),
and the model's own tokenizer (``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json``), so that ``transformers`` predicts what we predict.

**Which models.** BERT-shaped ones: post-norm (``norm="post"``), as every model fine-tuned from a
pretrained BERT-family encoder is (:mod:`budgetformer_core.io.pretrained`), or a Hugging Face
classifier opened as a checkpoint (:mod:`budgetformer_core.io.classifier`). Our models trained
from scratch are pre-norm, which BERT's layers cannot compute, and are refused; so is any other
ModelConfig value BERT has no place for, in one line naming the field. A field this module does
not know (:data:`HANDLED`) must hold its default: a new option is then refused by name until
export learns what it means, rather than written wrongly.

* ``pooling="pooler"`` (BERT's pooler, as an imported classifier has): a plain
  ``BertForSequenceClassification``.
* ``pooling="mean"`` (the mean over real tokens, as the shipped MiniLM models pool): no
  ``transformers`` class pools so, and the folder carries ``modeling_budgetformer.py``
  (:mod:`budgetformer_core.io.modeling_budgetformer`), named by config.json's ``auto_map``: it is
  read with ``trust_remote_code=True``.
* A budgeted model (budgetformer, bba) is written as its dense base: every head of every layer,
  the budgeting networks dropped; it then predicts as our model with every head run
  (``mode="dense"``), not at a budget.
* A pruned model (``kept_heads``) is written with every head, the pruned ones with zero weights:
  a head whose value and output weights are zero adds nothing, so the predictions are the
  pruned model's (``transformers`` 5 has no ``pruned_heads``).

**Length.** The position table is written as the model has it, ``max_len`` rows
(``max_position_embeddings``), and the command says which call of the tokenizer gives our
predictions. Our fine-tuned models read the first ``max_len`` ids of ``[CLS] text [SEP]`` (a
long text loses its closing ``[SEP]``): the mean-pooling class cuts its input to as many tokens
itself, so ``tokenizer(text)`` gives our prediction of any text (its tokenizer has no
``model_max_length``: nothing is too long for it), while a plain BERT export needs the first
``max_len`` ids of ``tokenizer(text)`` (``truncation=True`` keeps the ``[SEP]``). An imported
classifier's tokenizer cuts as ``transformers`` does (:func:`cuts_like_transformers`): its
export's ``tokenizer(text, truncation=True)`` gives our prediction. A pair is cut
``longest_first`` either way (``truncation=True, max_length=max_len``).

**Writing.** The folder is written beside ``out`` under a temporary name and renamed into
place. An existing ``out`` is replaced only with ``force`` and only when it holds nothing but
an export's files; ``out`` may not be the checkpoint, inside it or hold it, nor lie inside any
other model folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from torch import Tensor

from ..config import ModelConfig
from ..model.encoder import BudgetFormer
from .checkpoint import _sibling, _swap_in
from .families import BERT_LAYER, OUR_LAYER
from .files import CheckpointError
from .loader import load_checkpoint
from .outputs import check_not_source

MODELING_FILE = "modeling_budgetformer.py"
"""The remote-code file a mean-pooling export carries (a copy of this package's own)."""
MEAN_POOL_CLASS = "BertMeanPoolForSequenceClassification"
"""Its classifier class."""
WRITTEN = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
           MODELING_FILE)
"""Every file an export may hold; ``--force`` replaces a folder holding nothing else."""
HIDDEN_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu", "tanh": "tanh"}
"""``ModelConfig.activation`` → BERT's ``hidden_act`` (a name ``transformers``' ``ACT2FN`` knows)."""
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"}
"""BERT's special tokens, named as ``tokenizer_config.json`` names them (those in the vocabulary are written)."""

HANDLED = frozenset({
    # the encoder, written as BERT's config and tensors (checked by bert_shaped)
    "vocab_size", "n_classes", "d_model", "n_heads", "head_dim", "n_layers", "d_ff", "max_len", "dropout",
    "pooling", "norm", "activation", "type_vocab_size", "layer_norm_eps", "kept_heads",
    # how the heads are budgeted: the dense base is exported without them
    "method", "budget_hidden", "shared_budget", "summary_norm", "tau", "use_budget_net", "fixed_budget",
    "head_choice", "head_weighting", "gate_input", "gate_source", "gate_temperature", "default_budget",
})
"""The ModelConfig fields whose every value export either writes or knows it may drop."""

@dataclass
class Export:
    """What :func:`export_checkpoint` wrote."""

    path: Path
    """The folder written."""
    architecture: str
    """The classifier class config.json names."""
    notes: list[str]
    """What a user of the folder needs to know: remote code, a dropped budget, zeroed heads."""


def bert_shaped(cfg: ModelConfig, source: Path) -> None:
    """Raise :class:`CheckpointError` (one line naming the field) unless ``cfg``'s dense base is a
    BERT classifier."""
    def refuse(field: str, why: str) -> CheckpointError:
        return CheckpointError(f"{source} cannot be exported as a BERT classifier: {field}={getattr(cfg, field)!r} "
                               f"({why})")

    if cfg.norm != "post":
        raise refuse("norm", "layer norms before each sublayer and a final one, as our models trained from "
                             "scratch have; BERT's sit after each residual sum")
    if cfg.pooling not in ("mean", "pooler"):
        raise refuse("pooling", "BERT classifiers read the pooler's output; the export also writes a mean over "
                                "real tokens, nothing else")
    if cfg.activation not in HIDDEN_ACT:
        raise refuse("activation", f"BERT's hidden_act here is one of {', '.join(HIDDEN_ACT)}")
    if cfg.head_dim and cfg.head_dim * cfg.n_heads != cfg.d_model:
        raise refuse("head_dim", f"BERT's heads split the {cfg.d_model} features of a token evenly")
    fresh = ModelConfig()
    unknown = next((f.name for f in dataclasses.fields(cfg)
                    if f.name not in HANDLED and getattr(cfg, f.name) != getattr(fresh, f.name)), None)
    if unknown is not None:
        raise refuse(unknown, f"not its default {getattr(fresh, unknown)!r}, and export does not know what a "
                              "BERT classifier makes of it")


def bert_tensors(model: BudgetFormer) -> dict[str, Tensor]:
    """``model``'s dense base under the names ``BertForSequenceClassification`` saves (float32):
    the encoder under ``bert.``, the pooler if any, the classifier; budgeting networks dropped."""
    cfg, own = model.cfg, model.state_dict()
    H, Dh, D = cfg.n_heads, cfg.d_head, cfg.d_model
    types = own["type_emb.weight"] if cfg.type_vocab_size else torch.zeros(2, D)  # no token types: adds nothing
    out = {"bert.embeddings.word_embeddings.weight": own["tok_emb.weight"],
           "bert.embeddings.position_embeddings.weight": own["pos_emb.weight"],
           "bert.embeddings.token_type_embeddings.weight": types,
           "bert.embeddings.LayerNorm.weight": own["ln_emb.weight"],
           "bert.embeddings.LayerNorm.bias": own["ln_emb.bias"],
           "classifier.weight": own["head.weight"], "classifier.bias": own["head.bias"]}
    if cfg.pooling == "pooler":
        out["bert.pooler.dense.weight"], out["bert.pooler.dense.bias"] = own["pooler.0.weight"], own["pooler.0.bias"]
    for i in range(cfg.n_layers):
        ours, layer = f"layers.{i}.", f"bert.encoder.layer.{i}."
        kept = torch.tensor(cfg.kept_heads[i] if cfg.kept_heads else list(range(H)))
        # every head's rows and columns, a pruned head's left zero (it then adds nothing)
        w_qkv, b_qkv, w_out = torch.zeros(3, H, Dh, D), torch.zeros(3, H, Dh), torch.zeros(D, H, Dh)
        w_qkv[:, kept] = own[ours + "attn.qkv.weight"].view(3, len(kept), Dh, D)  # (3·k·Dh, D): Q, K, V blocks
        b_qkv[:, kept] = own[ours + "attn.qkv.bias"].view(3, len(kept), Dh)
        w_out[:, kept] = own[ours + "attn.out.weight"].view(D, len(kept), Dh)  # (D, k·Dh)
        # BERT_LAYER: query, key, value, then OUR_LAYER's tensors in order (the loaders' own table)
        for block, name in enumerate(BERT_LAYER[:3]):
            out[f"{layer}{name}.weight"] = w_qkv[block].reshape(H * Dh, D)
            out[f"{layer}{name}.bias"] = b_qkv[block].reshape(H * Dh)
        for mine, theirs in zip(OUR_LAYER, BERT_LAYER[3:], strict=True):
            for kind in ("weight", "bias"):
                out[f"{layer}{theirs}.{kind}"] = own[f"{ours}{mine}.{kind}"]
        out[f"{layer}{BERT_LAYER[3]}.weight"] = w_out.reshape(D, H * Dh)  # attn.out with every head's columns
    return {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in out.items()}


def bert_config(cfg: ModelConfig, label_names: list[str]) -> dict:
    """config.json of the export: BERT's shape, the labels, and for mean pooling the remote class."""
    mean = cfg.pooling == "mean"
    config = {
        "architectures": [MEAN_POOL_CLASS if mean else "BertForSequenceClassification"], "model_type": "bert",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads, "intermediate_size": cfg.d_ff, "hidden_act": HIDDEN_ACT[cfg.activation],
        "hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": 0.0,  # ours drops no attention weights
        "max_position_embeddings": cfg.max_len, "type_vocab_size": cfg.type_vocab_size or 2,
        "layer_norm_eps": cfg.layer_norm_eps, "initializer_range": 0.02, "pad_token_id": 0,
        "position_embedding_type": "absolute", "problem_type": "single_label_classification", "dtype": "float32",
        "id2label": {str(i): name for i, name in enumerate(label_names)},
        "label2id": {name: i for i, name in enumerate(label_names)},
    }
    if mean:
        config["auto_map"] = {"AutoModelForSequenceClassification": f"{Path(MODELING_FILE).stem}.{MEAN_POOL_CLASS}"}
    return config


def tokenizer_files(tokenizer: Tokenizer, cfg: ModelConfig, source: Path) -> dict[str, str]:
    """The tokenizer's files: ``tokenizer.json`` as ours without padding or truncation (read as it
    is: ``PreTrainedTokenizerFast``, whatever its normaliser), its special tokens, and
    ``model_max_length`` where ``truncation=True`` is how our model cuts (:func:`cuts_like_transformers`)
    or the model cannot read more (a plain BERT); the mean-pooling class cuts its input itself."""
    plain = Tokenizer.from_str(tokenizer.to_str())
    plain.no_padding()
    plain.no_truncation()
    special = bert_special_tokens(tokenizer, source)
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "padding_side": "right", **special}
    if cfg.pooling != "mean" or cuts_like_transformers(tokenizer):
        settings["model_max_length"] = cfg.max_len
    dump = lambda obj: json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"  # noqa: E731
    return {"tokenizer.json": plain.to_str(pretty=False) + "\n", "tokenizer_config.json": dump(settings),
            "special_tokens_map.json": dump(special)}


def bert_special_tokens(tokenizer: Tokenizer, source: Path) -> dict[str, str]:
    """The BERT special tokens ``tokenizer`` has, by their ``tokenizer_config.json`` names.

    Raises:
        CheckpointError: it lacks ``[CLS]``, ``[SEP]`` or ``[PAD]`` (not a BERT tokenizer; its
            model would be read with other separators or padding than ours).
    """
    special = {key: token for key, token in SPECIAL_TOKENS.items() if tokenizer.token_to_id(token) is not None}
    missing = [token for key, token in SPECIAL_TOKENS.items() if key in ("cls_token", "sep_token", "pad_token")
               and key not in special]
    if missing:
        raise CheckpointError(f"{source} cannot be exported as a BERT classifier: its tokenizer has no "
                              f"{' or '.join(missing)} (not a BERT WordPiece tokenizer)")
    return special


def cuts_like_transformers(tokenizer: Tokenizer) -> bool:
    """True when our model's tokenizer truncates what it encodes itself (an imported classifier's,
    at ``max_len``, its special tokens kept, as ``transformers``' ``truncation=True``); False
    when our model reads the first ``max_len`` ids of ``[CLS] text [SEP]``."""
    return tokenizer.truncation is not None


def check_export_out(source: Path, out: Path, force: bool = False) -> Path:
    """``out`` resolved, once it is known that an export may be written there (else a one-line
    :class:`CheckpointError`): not the checkpoint, inside it or any model folder
    (:func:`~budgetformer_core.io.outputs.check_not_source`), nor a folder holding it; an existing
    folder only with ``force`` and only when it holds nothing but an export's files."""
    check_not_source(out, {"--checkpoint": source})
    dst = out.resolve()
    if dst in source.resolve().parents:
        raise CheckpointError(f"--out {out} holds the checkpoint {source}: choose a folder of its own")
    if dst.exists():
        if not dst.is_dir():
            raise CheckpointError(f"--out {out} is an existing file")
        if not force:
            raise CheckpointError(f"--out {out} exists; pass --force to replace it")
        other = sorted({p.name for p in dst.iterdir()} - set(WRITTEN))
        if other:
            raise CheckpointError(f"--out {out} holds files an export does not write ({other[0]}); not replacing it")
    return dst


def export_checkpoint(source: str | Path, out: str | Path, force: bool = False) -> Export:
    """Write the model at ``source`` (any folder :func:`~budgetformer_core.io.loader.load_checkpoint`
    opens) to the folder ``out`` as a Hugging Face BERT sequence classifier.

    Raises:
        CheckpointError: a model that is not BERT-shaped (see :func:`bert_shaped`) or has no
            BERT tokenizer (:func:`bert_special_tokens`), or an ``out`` that may not be written
            (see :func:`check_export_out`); nothing is written.
    """
    source, out = Path(source), Path(out)
    path = check_export_out(source, out, force)
    ckpt = load_checkpoint(source)
    cfg = ckpt.config
    bert_shaped(cfg, source)
    config = bert_config(cfg, ckpt.label_names)
    files = {**tokenizer_files(ckpt.tokenizer, cfg, source),
             "config.json": json.dumps(config, indent=2, sort_keys=True) + "\n"}
    tensors = bert_tensors(ckpt.model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    try:
        tmp.mkdir()
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if cfg.pooling == "mean":
            shutil.copyfile(Path(__file__).with_name(MODELING_FILE), tmp / MODELING_FILE)
        # safetensors creates its file readable by the owner only; the folder's files share one mode
        os.chmod(tmp / "model.safetensors", (tmp / "config.json").stat().st_mode & 0o777)
        _swap_in(tmp, path)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(f"--out {out} cannot be written: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Export(out, config["architectures"][0], notes(cfg, ckpt.tokenizer, out))


def notes(cfg: ModelConfig, tokenizer: Tokenizer, out: Path) -> list[str]:
    """What the user of an export of a model of shape ``cfg`` at ``out`` needs to be told: what
    was left out, how to read it, and which call of its tokenizer gives our predictions."""
    said = []
    if cfg.method != "dense":
        said.append(f"a {cfg.method} model: its dense base is exported (every head of every layer; the networks "
                    "that budget the heads are dropped), which predicts as this model with every head run "
                    "(eval --mode dense), not at a budget")
    if cfg.kept_heads is not None:
        kept = sum(len(heads) for heads in cfg.kept_heads)
        said.append(f"pruned to {kept} of {cfg.n_layers * cfg.n_heads} heads: the others are exported with zero "
                    "weights, so they add nothing")
    if cfg.pooling == "mean":
        said.append(f"pools by the mean over real tokens, which no transformers BERT classifier does: {out} holds "
                    f"{MODELING_FILE} ({MEAN_POOL_CLASS}); read it with AutoModelForSequenceClassification."
                    f"from_pretrained({str(out)!r}, trust_remote_code=True)")
    else:
        said.append(f"a plain BertForSequenceClassification, reading at most {cfg.max_len} tokens")
    if cuts_like_transformers(tokenizer):
        said.append(f"tokenizer(text, truncation=True) gives this model's prediction of any text (cut to {cfg.max_len} "
                    "tokens, the closing [SEP] kept, as this model's tokenizer cuts)")
    elif cfg.pooling == "mean":
        said.append(f"tokenizer(text) gives this model's prediction of any text: like this model, the export reads "
                    f"the first {cfg.max_len} tokens (a longer text loses its closing [SEP])")
    else:
        said.append(f"for this model's prediction of a text longer than {cfg.max_len} tokens give the export the first "
                    f"{cfg.max_len} ids of tokenizer(text), as this model reads them (truncation=True keeps the "
                    "closing [SEP] and can differ)")
    return said
