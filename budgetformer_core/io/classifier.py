"""A researcher's own BERT-family sequence classifier, opened as a checkpoint.

**The folder.** What ``transformers``' ``save_pretrained`` writes for a sequence classifier:
``config.json`` (``model_type: bert``, ``architectures`` naming a ``…ForSequenceClassification``
such as ``BertForSequenceClassification``, ``id2label``), ``model.safetensors`` (the encoder, its
pooler and its classifier) and a tokenizer (``tokenizer.json``, or ``vocab.txt``).
:func:`load_classifier` reads it into our encoder (:mod:`budgetformer_core.io.pretrained`) with its own
pooler (``ModelConfig.pooling="pooler"``: the first token's state → dense → tanh) and classifier,
so that its logits are ``transformers``' on the same text; the label names are ``id2label``'s.
Nothing is executed or unpickled (safetensors and JSON only), and a folder that is not such a
classifier is refused with a one-line :class:`~budgetformer_core.io.files.CheckpointError`
naming what is missing. :func:`~budgetformer_core.io.loader.load_checkpoint` opens such a
folder through here, so every command that takes ``--checkpoint`` takes one.

**Budgets without training.** As read, the classifier is a dense model;
:mod:`budgetformer_core.train.rank` ranks its heads once so that it takes budgets. The ranking
is computed when the model is opened, from data given at that moment, and kept in memory with
it; nothing is written into the folder and no side file is read.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..config import ModelConfig, to_dict
from ..model.encoder import BudgetFormer
from .checkpoint import Checkpoint
from .files import CheckpointError
from .pretrained import our_names, read_config, read_tokenizer, read_weights

ARCHITECTURE = "ForSequenceClassification"
"""How the class named in ``architectures`` ends (``BertForSequenceClassification``, …)."""
HEAD_TENSORS = {"pooler.0.weight": "bert.pooler.dense.weight", "pooler.0.bias": "bert.pooler.dense.bias",
                "head.weight": "classifier.weight", "head.bias": "classifier.bias"}
"""Our names of the pooler's and the classifier's tensors → their names in the folder."""


def read_classifier(path: str | Path) -> tuple[ModelConfig, list[str], str]:
    """The shape (a dense ModelConfig with ``pooling="pooler"``), the label names and the
    architecture of the classifier at ``path``, read from ``config.json`` alone.

    Raises:
        CheckpointError: not a BERT-family sequence classifier with ``id2label``.
    """
    path = Path(path)
    file = path / "config.json"
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is not a directory")
    try:
        hf = json.loads(file.read_text(encoding="utf-8"))
    except OSError:
        raise CheckpointError(f"{file}: not found; not a Hugging Face classifier folder") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{file} is not valid JSON: {e}") from None
    if not isinstance(hf, dict):
        raise CheckpointError(f"{file}: not a JSON object")
    architectures = hf.get("architectures")
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    architecture = next((a for a in names if a.endswith(ARCHITECTURE)), None)
    if architecture is None:
        raise CheckpointError(f"{file}: architectures {architectures!r} names no sequence classifier "
                              f"(e.g. BertForSequenceClassification)")
    if hf.get("problem_type") not in (None, "single_label_classification"):
        raise CheckpointError(f"{file}: problem_type {hf['problem_type']!r} is not supported "
                              "(only single_label_classification)")
    labels = _label_names(hf.get("id2label"), file)
    cfg = read_config(path)
    try:
        cfg = dataclasses.replace(cfg, method="dense", pooling="pooler", n_classes=len(labels))
    except ValueError as e:
        raise CheckpointError(f"{file}: {e}") from None
    return cfg, labels, architecture


def _label_names(id2label: Any, file: Path) -> list[str]:
    """``id2label`` as a list in id order: keys 0 … C-1 (as JSON writes them, strings), C ≥ 2."""
    if not isinstance(id2label, dict) or not id2label:
        raise CheckpointError(f"{file}: no id2label; the classifier's label names are needed")
    try:
        by_id = {int(k): v for k, v in id2label.items()}
    except (TypeError, ValueError):
        raise CheckpointError(f"{file}: id2label's keys must be the ids 0, 1, …, got {list(id2label)[:5]}") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise CheckpointError(f"{file}: id2label's keys must be the ids 0 … {len(by_id) - 1}, got {sorted(by_id)[:5]}")
    labels = [str(by_id[i]) for i in range(len(by_id))]
    if len(labels) < 2:
        raise CheckpointError(f"{file}: id2label has one label: a regression head, not a classifier")
    if len(set(labels)) != len(labels):
        raise CheckpointError(f"{file}: id2label names a label twice ({labels})")
    return labels


RANKED = {"method": "bba", "gate_input": False, "default_budget": 1.0}
"""The config values a classifier takes with its heads ranked (:func:`rank_heads`): static gates,
and the whole classifier unless a budget is asked for."""


def describe(path: str | Path) -> dict[str, Any]:
    """What a checkpoint's config.json would say of the classifier at ``path`` with its heads
    ranked (``model``, ``label_names``, ``classifier``), read from its ``config.json`` alone.

    Raises:
        CheckpointError: as :func:`read_classifier`.
    """
    cfg, labels, architecture = read_classifier(path)
    return {"model": to_dict(dataclasses.replace(cfg, **RANKED)), "label_names": labels,
            "classifier": {"path": str(path), "architecture": architecture}}


def load_classifier(path: str | Path) -> Checkpoint:
    """The classifier at ``path`` as a dense checkpoint whose logits are ``transformers``'.

    Raises:
        CheckpointError: not a sequence classifier folder (see :func:`read_classifier`), a
            missing or unreadable weights file or tokenizer, a tensor missing or of another shape.
    """
    path = Path(path)
    cfg, labels, architecture = read_classifier(path)
    hf, digest = read_weights(path)
    file = path / "model.safetensors"
    missing = [theirs for theirs in HEAD_TENSORS.values() if theirs not in hf]
    if missing:
        raise CheckpointError(f"{file}: no tensor {missing[0]} (a sequence classifier has its pooler and classifier)")
    head = {ours: hf[theirs].float() for ours, theirs in HEAD_TENSORS.items()}
    weights = {**our_names(hf, cfg.n_layers, file), **head}
    tokenizer = read_tokenizer(path)
    if tokenizer.get_vocab_size() > cfg.vocab_size:
        raise CheckpointError(f"{path}: tokenizer has {tokenizer.get_vocab_size()} tokens, model only {cfg.vocab_size}")
    model = BudgetFormer(cfg)
    expected = model.state_dict()
    wrong = next((k for k, v in weights.items() if v.shape != expected[k].shape), None)
    if wrong is not None:
        raise CheckpointError(f"{file}: {wrong} has shape {tuple(weights[wrong].shape)}, config.json implies "
                              f"{tuple(expected[wrong].shape)}")
    model.load_state_dict(weights)  # strict: a dense model with the pooler is exactly these tensors
    meta = {"classifier": {"path": str(path), "architecture": architecture, "sha256": digest}}
    return Checkpoint(model.eval(), tokenizer, labels, meta, [], path)
