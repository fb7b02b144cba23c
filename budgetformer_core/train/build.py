"""The model a run starts from: fresh, on a pretrained base or warm-started from a checkpoint,
with its tokenizer; its first embeddings (LSA token vectors, sinusoidal positions), what stays
frozen, and the warm start's task loss on each training input (``difficulty_from="init"``).

A model for a pair task reads each pair's segments: its tokenizer joins pairs (ours get
:data:`~budgetformer_core.io.tokenizer.PAIR_TEMPLATE`) and it has token-type embeddings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import ENCODER_FIELDS, ModelConfig, TrainConfig
from ..io.data import TextDataset
from ..io.loader import load_checkpoint
from ..io.pretrained import load_backbone, load_base
from ..io.tokenizer import Text, flatten, load_tokenizer, pad, train_tokenizer, with_pair_template
from ..model.allocators import method_class
from ..model.encoder import BudgetFormer
from . import distributed


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


SHAPE_FIELDS = (*ENCODER_FIELDS, "max_len", "pooling")
"""What a warm start (``init``) takes from its checkpoint."""


def warm_start(model: BudgetFormer, source: BudgetFormer, skip: Collection[str] = ()) -> list[str]:
    """Copy every weight ``source`` shares with ``model`` (by name; shapes must agree), less
    those named in ``skip``, into it.

    Returns:
        The names of ``model``'s weights that were not copied (they keep their fresh init).
    """
    own, theirs = model.state_dict(), source.state_dict()
    shared = {k: v for k, v in theirs.items() if k in own and k not in skip}
    for k, v in shared.items():
        if v.shape != own[k].shape:
            raise ValueError(
                f"the init checkpoint's {k} has shape {tuple(v.shape)}, this model's {tuple(own[k].shape)}"
            )
    model.load_state_dict(shared, strict=False)
    return sorted(set(own) - set(shared))


def build_model(dataset: TextDataset, model_cfg: ModelConfig, train_cfg: TrainConfig, train_texts: list[Text],
                init: str | Path | None, backbone: str | None, saved_tokenizer: Path | None,
                device: torch.device) -> tuple[BudgetFormer, Any, Any]:
    """The model to train, its tokenizer and its pretrained base (None when it has none).

    With ``init`` the model takes the checkpoint's tokenizer, shape and every weight the two share
    (:func:`warm_start`) — except ``max_len`` on a pretrained base, whose position table serves
    any length up to its own, so that a fine-tune can go on at longer inputs; with ``backbone``
    the base's tokenizer and encoder weights. Otherwise the
    tokenizer is the resumed run's (``saved_tokenizer``) or one trained on ``train_texts``. The
    method's recipe settings are applied to the config (``Allocator.trained_config``). For a pair
    task (``dataset.pair_columns``) the tokenizer joins pairs (:func:`with_pair_template`) and a
    model without token types gets two, one per text of a pair.
    """
    start = load_checkpoint(init) if init is not None else None
    base = load_backbone(backbone) if backbone is not None else None
    if start is not None and start.meta.get("backbone"):
        base = load_base(start.meta["backbone"])  # what it was built on, and what it left unchanged
    if start is not None:
        tok = start.tokenizer
        shape = {k: getattr(start.config, k) for k in SHAPE_FIELDS if k != "max_len" or base is None}
        model_cfg = dataclasses.replace(model_cfg, **shape)
    elif base is not None:
        tok = base.tokenizer
    elif saved_tokenizer is not None:  # the run's own vocabulary (a retrained one could differ on a small corpus)
        tok = load_tokenizer(saved_tokenizer)
    else:
        tok = distributed.same_tokenizer(train_tokenizer(flatten(train_texts), model_cfg.vocab_size))
    if dataset.pair_columns is not None:
        tok = with_pair_template(tok)
        if not model_cfg.type_vocab_size:  # a segment embedding for each text of a pair
            model_cfg = dataclasses.replace(model_cfg, type_vocab_size=2)
    model_cfg = dataclasses.replace(model_cfg, vocab_size=tok.get_vocab_size(), n_classes=dataset.n_classes)
    model_cfg = method_class(model_cfg).trained_config(model_cfg, train_cfg)
    model = (base.build(model_cfg) if base is not None else BudgetFormer(model_cfg)).to(device)
    if start is not None:  # (the tensors it kept as the base's are the model's already, at its length)
        warm_start(model, start.model, skip=base.unchanged(start.model) if base is not None else ())
        # the low-rank changes its weights carry: a further low-rank fine-tune stacks on them, and a
        # save stores both as factors (otherwise as the int8 delta of the whole matrix)
        model.low_rank = dict(start.model.low_rank)
        model.low_rank_from = start.path if start.model.low_rank else None  # stored once, there
    return model, tok, base


@torch.no_grad()
def input_logits(model: BudgetFormer, ids: list[list[int]], batch_size: int = 64) -> torch.Tensor:
    """(N, C) ``model``'s logits on each input, its first ``max_len`` tokens (a pair's with its
    segments), in float64 (the losses of inputs it fits well differ in digits that float32 rounds
    away)."""
    model.eval()
    device = next(model.parameters()).device
    logits = []
    for start in range(0, len(ids), batch_size):
        batch = pad([x[: model.cfg.max_len] for x in ids[start : start + batch_size]])
        types = None if batch.types is None else batch.types.to(device)
        logits.append(model(batch.ids.to(device), batch.mask.to(device), types=types).logits.double().cpu())
    return torch.cat(logits)


def input_losses(logits: torch.Tensor, labels: list[int]) -> torch.Tensor:
    """(N,) the task loss of each input from its logits (N, C) (:func:`input_logits`)."""
    return torch.nn.functional.cross_entropy(logits, torch.tensor(labels), reduction="none")


def init_embeddings(model: BudgetFormer, train_ids: list[list[int]], cfg: TrainConfig) -> None:
    """Token embeddings from an LSA of the training split (``embed_init``) and sinusoidal
    positions (``pos_init``), for a model that does not start pretrained."""
    with torch.no_grad():
        if cfg.embed_init == "lsa":
            lsa = lsa_embeddings(train_ids, model.cfg.vocab_size, model.cfg.d_model, cfg.seed)
            model.tok_emb.weight.copy_(lsa)
        if cfg.pos_init == "sinusoidal":
            model.pos_emb.weight.copy_(sinusoids(model.cfg.max_len, model.cfg.d_model))


def freeze(model: BudgetFormer, cfg: TrainConfig) -> None:
    """What stays as it starts: the embeddings (``freeze_embeddings``), bba's gates (``freeze_gates``)."""
    if cfg.freeze_embeddings:
        for module in (model.tok_emb, model.pos_emb, model.type_emb, model.ln_emb):
            if module is not None:
                module.requires_grad_(False)
    if cfg.freeze_gates:
        for alloc in model.allocators:
            alloc.gate.requires_grad_(False)
