"""A researcher's own BERT-family sequence classifier, opened as a checkpoint, with budgets
that need no training.

**The folder.** What ``transformers``' ``save_pretrained`` writes for a sequence classifier:
``config.json`` (``model_type: bert``, ``architectures`` naming a ``…ForSequenceClassification``
such as ``BertForSequenceClassification``, ``id2label``), ``model.safetensors`` (the encoder, its
pooler and its classifier) and a tokenizer (``tokenizer.json``, or ``vocab.txt``).
:func:`load_classifier` reads it into our encoder (:mod:`budgetformer_core.backbone`) with its own
pooler (``ModelConfig.pooling="pooler"``: the first token's state → dense → tanh) and classifier,
so that its logits are ``transformers``' on the same text; the label names are ``id2label``'s.
Nothing is executed or unpickled (safetensors and JSON only), and a folder that is not such a
classifier is refused with a one-line :class:`~budgetformer_core.checkpoint.CheckpointError`
naming what is missing. :func:`~budgetformer_core.checkpoint.load_checkpoint` opens such a
folder through here, so every command that takes ``--checkpoint`` takes one.

**Budgets without training.** As read, the classifier is a dense model. :func:`rank_heads` makes
it the zero-shot post-hoc ``bba`` model of :mod:`budgetformer_core.prune`: each layer's heads are
ranked once by their per-example gradient importance on texts the user gives, with the texts'
labels, or with the model's own predictions where the texts have none; a requested budget b then
runs the ⌊b·H⌋ most important heads of every layer (nested sets: a head kept at b is kept at every
larger b), the same for every input. The weights are the classifier's, unchanged, and the default
budget is 1: unless a smaller b is asked for, the model is the classifier itself.

**Where the ranking lives.** It is computed when the model is opened, from data given at that
moment, and kept in memory with it; nothing is written into the folder and no side file is read.
On the command line the data is ``--rank-file F`` (:func:`open_checkpoint`): a CSV / JSONL /
Parquet file with text and label columns (labels as ``id2label``'s names or as integers), or
texts alone (a CSV or JSONL ``text`` column, or a text per line), which are then labelled by the
model. In the app it is the validation split of the dataset whose classes are the classifier's
(``app/state.py``). Ranking costs one forward and one backward pass over the data.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from .backbone import our_names, read_config, read_tokenizer, read_weights
from .checkpoint import Checkpoint, CheckpointError, load_checkpoint
from .config import ModelConfig, to_dict
from .model import BudgetFormer
from .tokenizer import encode, pad

ARCHITECTURE = "ForSequenceClassification"
"""How the class named in ``architectures`` ends (``BertForSequenceClassification``, …)."""
HEAD_TENSORS = {"pooler.0.weight": "bert.pooler.dense.weight", "pooler.0.bias": "bert.pooler.dense.bias",
                "head.weight": "classifier.weight", "head.bias": "classifier.bias"}
"""Our names of the pooler's and the classifier's tensors → their names in the folder."""
RANK_BATCH = 16
"""Inputs per forward pass while ranking (the importance does not depend on it)."""


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
        cfg = dataclasses.replace(cfg, variant="dense", pooling="pooler", n_classes=len(labels))
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


RANKED = {"variant": "bba", "gate_input": False, "default_budget": 1.0}
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


def rank_heads(ckpt: Checkpoint, texts: list[str], labels: list[int] | None = None, source: str = "") -> Checkpoint:
    """``ckpt`` (a classifier as :func:`load_classifier` reads it) as a post-hoc ``bba`` model
    whose heads are ranked by importance on ``texts``: with ``labels``, or with the model's own
    predictions when they are None. ``source`` says where the texts came from (kept in ``meta``).

    Raises:
        ValueError: not a dense classifier, no texts, or labels that do not match the texts.
    """
    if ckpt.model.method.budgeted:
        raise ValueError(f"{ckpt.path}: only a dense classifier's heads are ranked (it is {ckpt.config.variant})")
    if not texts:
        raise ValueError(f"{source or 'the ranking data'} holds no texts to rank the heads on")
    if labels is not None and len(labels) != len(texts):
        raise ValueError(f"{len(labels)} labels for {len(texts)} texts")
    from .prune import head_importance, posthoc_model  # the training code: only when ranking

    ids, _ = encode(ckpt.tokenizer, list(texts), ckpt.config.max_len)
    given = labels is not None
    if labels is None:
        labels = predicted(ckpt.model, ids)
    importance = head_importance(ckpt.model, ids, list(labels), batch_size=RANK_BATCH)
    model = posthoc_model(ckpt.model, importance, default_budget=RANKED["default_budget"])
    ranking = {"source": source, "rows": len(texts), "labels": "given" if given else "predicted"}
    meta = {**ckpt.meta, "ranking": ranking, "importance": importance.tolist()}
    return dataclasses.replace(ckpt, model=model, meta=meta)


def predicted(model: BudgetFormer, ids: list[list[int]]) -> list[int]:
    """The dense model's class for each tokenised input."""
    out: list[int] = []
    with torch.inference_mode():
        for start in range(0, len(ids), RANK_BATCH):
            batch = pad(ids[start : start + RANK_BATCH])
            out += model(batch.ids, batch.mask, mode="dense").logits.argmax(-1).tolist()  # (B,)
    return out


def read_rank_file(path: str | Path, label_names: list[str]) -> tuple[list[str], list[int] | None]:
    """The texts of a ranking file, and their labels (indices into ``label_names``) when it is a
    table with a label column, else None (a CSV or JSONL ``text`` column, or a text per line).

    Raises:
        ValueError: an unreadable file, no texts, or a label the classifier does not know.
    """
    from .data import FORMATS, NoLabels, load_dataset
    from .inputs import TABLE_SUFFIXES, input_rows

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--rank-file {path}: no such file")
    if path.suffix.lower() in FORMATS:
        try:
            split = load_dataset(str(path), classes=list(label_names), whole=True).split("all")
            return list(split.texts), list(split.labels)
        except NoLabels:
            if path.suffix.lower() not in TABLE_SUFFIXES:
                raise
    texts = [text for _, text in input_rows(str(path)) if text.strip()]
    if not texts:
        raise ValueError(f"--rank-file {path} holds no texts")
    return texts, None


RANK_HINT = "give --rank-file F to rank a Hugging Face classifier's heads"
"""What a budget asked of an unranked classifier needs."""


def open_checkpoint(path: str | Path, rank_file: str | Path | None = None) -> Checkpoint:
    """What ``--checkpoint DIR [--rank-file F]`` opens: a checkpoint or a classifier folder
    (:func:`~budgetformer_core.checkpoint.load_checkpoint`), its heads ranked on ``rank_file``
    when one is given (only a classifier's are)."""
    ckpt = load_checkpoint(path)
    if rank_file is None:
        return ckpt
    if "classifier" not in ckpt.meta:
        raise ValueError(f"--rank-file ranks the heads of a Hugging Face classifier folder; {path} is a "
                         "budgetformer checkpoint (its budgets are its own)")
    texts, labels = read_rank_file(rank_file, ckpt.label_names)
    return rank_heads(ckpt, texts, labels, source=str(rank_file))
