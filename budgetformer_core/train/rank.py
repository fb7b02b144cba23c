"""Budgets without training for a researcher's own classifier: its heads ranked once.

As :mod:`budgetformer_core.io.classifier` reads it, a Hugging Face sequence classifier is a dense
model. :func:`rank_heads` makes it the zero-shot post-hoc ``bba`` model of
:mod:`budgetformer_core.train.prune`: each layer's heads are ranked once by their per-example
gradient importance on texts the user gives, with the texts' labels, or with the model's own
predictions where the texts have none; a requested budget b then runs the ⌊b·H⌋ most important
heads of every layer (nested sets), the same for every input. On the command line the data is
``--rank-file F`` (:func:`open_checkpoint`): a CSV / JSONL / Parquet file with text and label
columns (labels as ``id2label``'s names or as integers), or texts alone (a CSV or JSONL ``text``
column, or a text per line), which are then labelled by the model. In the app it is the
validation split of the dataset whose classes are the classifier's (``app/state.py``). Ranking
costs one forward and one backward pass over the data.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..io.checkpoint import Checkpoint
from ..io.classifier import RANKED
from ..io.data import load_dataset
from ..io.hub import FORMATS, NoLabels
from ..io.inputs import TABLE_SUFFIXES, input_rows
from ..io.loader import load_checkpoint
from ..io.tokenizer import encode, pad
from ..model.encoder import BudgetFormer

RANK_BATCH = 16
"""Inputs per forward pass while ranking (the importance does not depend on it)."""


def rank_heads(ckpt: Checkpoint, texts: list[str], labels: list[int] | None = None, source: str = "") -> Checkpoint:
    """``ckpt`` (a classifier as :func:`load_classifier` reads it) as a post-hoc ``bba`` model
    whose heads are ranked by importance on ``texts``: with ``labels``, or with the model's own
    predictions when they are None. ``source`` says where the texts came from (kept in ``meta``).

    Raises:
        ValueError: not a dense classifier, no texts, or labels that do not match the texts.
    """
    if ckpt.model.method.budgeted:
        raise ValueError(f"{ckpt.path}: only a dense classifier's heads are ranked (it is {ckpt.config.method})")
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
            out += model(batch.ids, batch.mask, mode="dense", types=batch.types).logits.argmax(-1).tolist()  # (B,)
    return out


def read_rank_file(path: str | Path, label_names: list[str],
                   option: str = "--rank-file") -> tuple[list[str], list[int] | None]:
    """The texts of a ranking file, and their labels (indices into ``label_names``) when it is a
    table with a label column, else None (a CSV or JSONL ``text`` column, or a text per line).
    ``option``: how the messages name the file (the option that gave it).

    Raises:
        ValueError: an unreadable file, no texts, or a label the classifier does not know.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{option} {path}: no such file")
    if path.suffix.lower() in FORMATS:
        try:
            split = load_dataset(str(path), classes=list(label_names), whole=True).split("all")
            return list(split.texts), list(split.labels)
        except NoLabels:
            if path.suffix.lower() not in TABLE_SUFFIXES:
                raise
    texts = [text for _, text in input_rows(str(path)) if text.strip()]
    if not texts:
        raise ValueError(f"{option} {path} holds no texts")
    return texts, None


RANK_HINT = "give --rank-file F to rank a Hugging Face classifier's heads"
"""What a budget asked of an unranked classifier needs."""


def open_checkpoint(path: str | Path, rank_file: str | Path | None = None) -> Checkpoint:
    """What ``--checkpoint DIR [--rank-file F]`` opens: a checkpoint or a classifier folder
    (:func:`~budgetformer_core.io.loader.load_checkpoint`), its heads ranked on ``rank_file``
    when one is given (only a classifier's are)."""
    ckpt = load_checkpoint(path)
    if rank_file is None:
        return ckpt
    if "classifier" not in ckpt.meta:
        raise ValueError(f"--rank-file ranks the heads of a Hugging Face classifier folder; {path} is a "
                         "budgetformer checkpoint (its budgets are its own)")
    texts, labels = read_rank_file(rank_file, ckpt.label_names)
    return rank_heads(ckpt, texts, labels, source=str(rank_file))
