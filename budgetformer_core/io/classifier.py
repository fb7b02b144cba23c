"""A researcher's own encoder sequence classifier, opened as a checkpoint.

**The folder.** What ``transformers``' ``save_pretrained`` writes for a sequence classifier of a
family of :mod:`budgetformer_core.io.families` (``model_type`` bert, distilbert, roberta,
xlm-roberta, electra or albert): ``config.json`` (``architectures`` naming a
``…ForSequenceClassification`` such as ``RobertaForSequenceClassification``, ``id2label``),
``model.safetensors`` (the encoder and its classification head) and a tokenizer
(``tokenizer.json``, or ``vocab.txt``). :func:`load_classifier` reads it into our encoder with
the family's head as our pooler (``ModelConfig.pooling="pooler"``: the first token's state →
dense → the family's non-linearity) and classifier, so that its logits are ``transformers``' on
the same text; the label names are ``id2label``'s. Its tokenizer cuts a long text as
``transformers``' does with ``truncation=True, max_length=max_len`` (the special tokens kept).
Nothing is executed or unpickled (safetensors and JSON only), and a folder that is not such a
classifier — another model type, a pickle only, a config value of the wrong type or range, a
tensor of the wrong shape or dtype or holding NaN, labels that are not 0 … C−1, no tokenizer, a
FIFO among its files — is refused with a one-line
:class:`~budgetformer_core.io.files.CheckpointError` naming what is wrong.
:func:`~budgetformer_core.io.loader.load_checkpoint` opens such a folder through here, so every
command that takes ``--checkpoint`` takes one.

**Budgets without training.** As read, the classifier is a dense model;
:mod:`budgetformer_core.train.rank` ranks its heads once so that it takes budgets. The ranking
is computed when the model is opened, from data given at that moment, and kept in memory with
it; nothing is written into the folder and no side file is read.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..config import ModelConfig, to_dict
from ..model.encoder import BudgetFormer
from .checkpoint import Checkpoint
from .families import Family, head_names, position_offset, shown, tensor_names, with_head
from .files import CheckpointError
from .pretrained import gather, read_hf_config, read_tokenizer, read_weights

ARCHITECTURE = "ForSequenceClassification"
"""How the class named in ``architectures`` ends (``BertForSequenceClassification``, …)."""


def read_classifier(path: str | Path) -> tuple[ModelConfig, list[str], str]:
    """The shape (a dense ModelConfig with the family's pooler), the label names and the
    architecture of the classifier at ``path``, read from ``config.json`` alone.

    Raises:
        CheckpointError: not a sequence classifier of a supported family with ``id2label``.
    """
    cfg, labels, architecture, _, _ = _read(Path(path))
    return cfg, labels, architecture


def _read(path: Path) -> tuple[ModelConfig, list[str], str, Family, dict[str, Any]]:
    """:func:`read_classifier`'s answer, and the family and config.json that gave it."""
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is not a directory")
    file = path / "config.json"
    hf, family, cfg = read_hf_config(path)
    architectures = hf.get("architectures")
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    architecture = next((a for a in names if a.endswith(ARCHITECTURE)), None)
    if architecture is None:
        raise CheckpointError(f"{file}: architectures {shown(architectures)} names no sequence classifier "
                              f"(e.g. BertForSequenceClassification)")
    if hf.get("problem_type") not in (None, "single_label_classification"):
        raise CheckpointError(f"{file}: problem_type {shown(hf['problem_type'])} is not supported "
                              "(only single_label_classification)")
    labels = _label_names(hf.get("id2label"), file)
    try:
        cfg = with_head(cfg, family, len(labels))
    except ValueError as e:
        raise CheckpointError(f"{file}: {e}") from None
    return cfg, labels, architecture, family, hf


def _label_names(id2label: Any, file: Path) -> list[str]:
    """``id2label`` as a list in id order: keys exactly "0" … "C-1" (as JSON writes them), names
    strings, C ≥ 2, no name twice."""
    if not isinstance(id2label, dict) or not id2label:
        raise CheckpointError(f"{file}: no id2label; the classifier's label names are needed")
    if set(id2label) != {str(i) for i in range(len(id2label))}:
        keys = [k if len(k) <= 12 else k[:12] + "…" for k in sorted(id2label, key=lambda k: (len(k), k))[:5]]
        raise CheckpointError(f"{file}: id2label's keys must be the ids 0 … {len(id2label) - 1}, got {keys}")
    labels = [id2label[str(i)] for i in range(len(id2label))]
    if not all(isinstance(name, str) for name in labels):
        raise CheckpointError(f"{file}: id2label's label names must be strings, got {str(labels[:5])[:80]}")
    if len(labels) < 2:
        raise CheckpointError(f"{file}: id2label has one label: a regression head, not a classifier")
    if len(set(labels)) != len(labels):
        raise CheckpointError(f"{file}: id2label names a label twice ({str(labels)[:80]})")
    return labels


RANKED = {"method": "bba", "gate_input": False, "default_budget": 1.0}
"""The config values a classifier takes with its heads ranked (:func:`rank_heads`): static gates,
and the whole classifier unless a budget is asked for."""


def describe(path: str | Path, ranked: bool = True) -> dict[str, Any]:
    """What a checkpoint's config.json would say of the classifier at ``path`` with its heads
    ranked (``model``, ``label_names``, ``classifier``), read from its ``config.json`` alone;
    ``ranked=False``: of the classifier as it is (dense, every head).

    Raises:
        CheckpointError: as :func:`read_classifier`.
    """
    cfg, labels, architecture = read_classifier(path)
    return {"model": to_dict(dataclasses.replace(cfg, **RANKED) if ranked else cfg), "label_names": labels,
            "classifier": {"path": str(path), "architecture": architecture}}


def load_classifier(path: str | Path) -> Checkpoint:
    """The classifier at ``path`` as a dense checkpoint whose logits are ``transformers``'.

    Raises:
        CheckpointError: not a sequence classifier folder (see :func:`read_classifier`), a
            missing or unreadable weights file or tokenizer, a tensor missing, of another shape
            or dtype, or holding NaN or infinity.
    """
    path = Path(path)
    cfg, labels, architecture, family, hf = _read(path)
    weights, digest = read_weights(path)
    tokenizer = read_tokenizer(path)
    if tokenizer.get_vocab_size() > cfg.vocab_size:
        raise CheckpointError(f"{path}: tokenizer has {tokenizer.get_vocab_size()} tokens, model only {cfg.vocab_size}")
    tokenizer.enable_truncation(cfg.max_len)  # as transformers' truncation=True: the special tokens stay
    model = BudgetFormer(cfg)
    names = {**tensor_names(family, hf, cfg, family.prefix), **head_names(family)}
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    tensors = gather(weights, names, shapes, path / "model.safetensors", position_offset(family, hf))
    model.load_state_dict(tensors)  # strict: a dense model with the pooler is exactly these tensors
    meta = {"classifier": {"path": str(path), "architecture": architecture, "sha256": digest}}
    return Checkpoint(model.eval(), tokenizer, labels, meta, [], path)
