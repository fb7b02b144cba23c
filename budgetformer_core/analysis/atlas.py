"""Head atlas: how a model spends its heads over a whole split, and which inputs share a head set.

The atlas works on two things per input of a split: the per-example frame of
:meth:`budgetformer_core.analysis.infer.Evaluation.to_frame` (the heads that ran per layer, ``heads{l}``,
with s, k, loss, correctness, class and length) and the head relevance p per layer (an
(N, L, H) array the frame does not hold). :func:`allocate` computes both in one evaluation pass;
the functions after it are plain numpy / pandas on them:

* :func:`heads_matrix` reads the (N, L, H) heads-run mask back from a frame, :func:`head_usage`
  is the share of inputs that ran each head (count / n) and :func:`slice_rows` picks a slice
  (class, correct or wrong, budget range, length range);
* :func:`head_sets` lists, per layer, the most frequent sets of heads run together;
* :func:`input_map` places every input by its allocation: the first two principal components of
  its per-layer relevance p, flattened (L·H numbers per input);
* :func:`ranked` gives the inputs that ranked a head highest, and :func:`attention_profile`
  where that head attends on average, from the attention the structural path itself computed.

torch is imported only by the functions that run the model.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ..io.checkpoint import Checkpoint
    from ..io.splits import Split
    from ..io.tokenizer import Text
    from ..model.budget import Control


@dataclass
class Allocation:
    """How a model allocated its heads over one split, an entry per input in the split's order."""

    frame: pd.DataFrame
    """:meth:`~budgetformer_core.analysis.infer.Evaluation.to_frame`'s rows (heads run, s, k, loss, …)."""
    relevance: np.ndarray
    """(N, L, H) head relevance p per input, layer and head."""


def allocate(ckpt: Checkpoint, split: Split, control: Control | None = None) -> Allocation:
    """Run ``split`` through the checkpoint once (structural path) and keep, per input, what the
    per-example frame holds plus the relevance p of every head of every layer.

    ``control`` sets the budget (bba: the requested b) for every input; None is the model's own
    (a dense model runs without it, as :func:`~budgetformer_core.analysis.infer.evaluate` says).
    """
    from ..io.tokenizer import encode
    from .infer import check_kind, evaluate

    check_kind(ckpt, split.texts[:1], "each row of the split")  # one kind per split (a pair's ids carry its segments)
    ids, _ = encode(ckpt.tokenizer, split.texts, ckpt.config.max_len)
    evaluation = evaluate(ckpt.model, ids, split.labels, control)
    return Allocation(evaluation.to_frame([len(x) for x in ids]), evaluation.relevance)


def heads_matrix(frame: pd.DataFrame, n_layers: int, n_heads: int) -> np.ndarray:
    """(N, L, H) bool: the heads that ran, read from a frame's ``heads{l}`` columns
    (space-separated head indices).

    Raises:
        ValueError: a layer's column is missing or names a head outside ``0 … n_heads − 1``.
    """
    out = np.zeros((len(frame), n_layers, n_heads), dtype=bool)
    for layer in range(n_layers):
        column = f"heads{layer}"
        if column not in frame.columns:
            raise ValueError(f"the per-example table has no column {column!r}")
        for row, cell in enumerate(frame[column].astype(str)):
            heads = [int(h) for h in cell.split()]
            if heads and (min(heads) < 0 or max(heads) >= n_heads):
                raise ValueError(f"row {row} of {column!r} names a head outside 0–{n_heads - 1}")
            out[row, layer, heads] = True
    return out


def head_usage(selected: np.ndarray) -> np.ndarray:
    """(L, H) share of the inputs that ran each head: the count over the N inputs of
    ``selected`` (N, L, H) divided by N (zeros for no input)."""
    n = selected.shape[0]
    return selected.sum(0) / n if n else np.zeros(selected.shape[1:])


def slice_rows(
    frame: pd.DataFrame,
    label: int | None = None,
    correct: bool | None = None,
    budget: tuple[float, float] | None = None,
    tokens: tuple[int, int] | None = None,
) -> np.ndarray:
    """(N,) bool: the rows of one slice — a true class (``label``), right or wrong (``correct``),
    mean budget ``mean_s`` in a closed range, and tokens read in a closed range; None: any."""
    keep = np.ones(len(frame), dtype=bool)
    if label is not None:
        keep &= frame["label"].to_numpy() == label
    if correct is not None:
        keep &= frame["correct"].to_numpy(dtype=bool) == correct
    if budget is not None:
        s = frame["mean_s"].to_numpy()
        keep &= (s >= budget[0] - 1e-6) & (s <= budget[1] + 1e-6)  # a slider at 1.00 keeps s = 0.99999…
    if tokens is not None:
        n = frame["tokens"].to_numpy()
        keep &= (n >= tokens[0]) & (n <= tokens[1])
    return keep


HEAD_SETS = 10
"""Head sets listed per layer by :func:`head_sets`."""


def head_sets(frame: pd.DataFrame, layer: int, limit: int = HEAD_SETS) -> pd.DataFrame:
    """The most frequent sets of heads run together in ``layer``: columns ``heads`` (the set,
    space-separated), ``k``, ``inputs`` (how many ran exactly that set), ``share``, ``accuracy``
    and ``mean_loss`` over those inputs; most inputs first (ties: the set's text)."""
    column = f"heads{layer}"
    groups = frame.groupby(column, sort=False).agg(
        inputs=("index", "size"), accuracy=("correct", "mean"), mean_loss=("loss", "mean")
    )
    table = groups.reset_index().rename(columns={column: "heads"})
    table["k"] = [len(str(h).split()) for h in table["heads"]]
    table["share"] = table["inputs"] / max(len(frame), 1)
    table = table.sort_values(["inputs", "heads"], ascending=[False, True], kind="stable").head(limit)
    return table[["heads", "k", "inputs", "share", "accuracy", "mean_loss"]].reset_index(drop=True)


def rows_with_heads(frame: pd.DataFrame, layer: int, heads: str) -> np.ndarray:
    """(N,) bool: the inputs that ran exactly the set ``heads`` (as :func:`head_sets` writes it)."""
    return (frame[f"heads{layer}"].astype(str) == heads).to_numpy()


@dataclass
class InputMap:
    """Every input placed by its allocation (:func:`input_map`)."""

    xy: np.ndarray
    """(N, 2) the first two principal components of each input's per-layer relevance p."""
    explained: list[float]
    """Share of the variance each of the two components explains (0 when p never varies)."""


def input_map(relevance: np.ndarray) -> InputMap:
    """Place every input by its allocation: PCA (scikit-learn, deterministic SVD) of its
    relevance p over all layers and heads, flattened to L·H numbers. Inputs with similar p
    — which run similar heads — land close together.

    Fewer than two inputs, or p the same for every input (a dense model, static gates): every
    input at (0, 0) and both shares 0.
    """
    n = relevance.shape[0]
    flat = relevance.reshape(n, -1).astype(np.float64)  # (N, L, H) -> (N, L·H)
    if n < 2 or float(flat.var(0).sum()) < 1e-12:
        return InputMap(np.zeros((n, 2)), [0.0, 0.0])
    from sklearn.decomposition import PCA  # slow import, only for the map

    components = min(2, n, flat.shape[1])
    pca = PCA(n_components=components, svd_solver="full")
    xy = pca.fit_transform(flat)
    explained = [float(v) for v in pca.explained_variance_ratio_]
    if components < 2:  # one head in one layer: a line
        xy, explained = np.hstack([xy, np.zeros((n, 1))]), explained + [0.0]
    return InputMap(xy, explained)


def selection_summary(frame: pd.DataFrame, rows: list[int]) -> dict:
    """What a selection of inputs (positions in ``frame``) did: ``inputs``, ``accuracy`` and the
    mean over inputs and layers of the heads run, ``mean_k`` (None for an empty selection)."""
    picked = frame.iloc[rows]
    k_columns = [c for c in frame.columns if c[:1] == "k" and c[1:].isdigit()]
    if picked.empty:
        return {"inputs": 0, "accuracy": None, "mean_k": None}
    return {
        "inputs": len(picked),
        "accuracy": float(picked["correct"].mean()),
        "mean_k": float(picked[k_columns].to_numpy(dtype=np.float64).mean()),
    }


def ranked(relevance: np.ndarray, layer: int, head: int, limit: int = 10) -> np.ndarray:
    """The positions of the ``limit`` inputs whose relevance p ranked ``head`` of ``layer``
    highest, highest first (ties: the earlier input)."""
    p = relevance[:, layer, head]
    return np.argsort(-p, kind="stable")[:limit]


PROFILE_PARTS = ("first token", "same token", "previous token", "next token", "punctuation")
"""Where :func:`attention_profile` measures a head's attention going."""


def is_punctuation(token: str) -> bool:
    """A token made of punctuation only (a WordPiece continuation's ``##`` left out)."""
    body = token.removeprefix("##")
    return bool(body) and all(unicodedata.category(c).startswith("P") for c in body)


@dataclass
class AttentionProfile:
    """Where one head attends on average (:func:`attention_profile`)."""

    shares: dict[str, float]
    """Per part of :data:`PROFILE_PARTS`, the mean over queries of the attention on it. The parts
    overlap (the first token is the previous one of the second), so they need not sum to 1."""
    inputs: int
    """Inputs of the sample on which the head ran (the others have no attention to average)."""
    queries: int
    """Query tokens averaged over."""


def attention_profile(
    ckpt: Checkpoint, texts: list[Text], layer: int, head: int, control: Control | None = None, batch_size: int = 4
) -> AttentionProfile:
    """Where ``head`` of ``layer`` attends on average over ``texts``: for every query token, the
    share of its attention on the first token, on itself, on the previous and the next token and
    on punctuation tokens, averaged over all query tokens of the inputs on which the head ran.

    The attention is the structural path's own (``capture_attention``): an input on which the
    head did not run has none and is left out. Small batches: every head's (T, T) map of every
    layer is kept during the pass.
    """
    import torch

    from ..io.tokenizer import encode_batch, read_tokens, reading_prefix
    from ..measure.timing import torch_threads

    max_len = ckpt.config.max_len
    totals = dict.fromkeys(PROFILE_PARTS, 0.0)
    inputs = queries = 0
    model = ckpt.model.eval()
    control = model.control_in_effect(control)
    for start in range(0, len(texts), batch_size):
        prefixes = [reading_prefix(ckpt.tokenizer, t, max_len) for t in texts[start : start + batch_size]]
        batch = encode_batch(ckpt.tokenizer, prefixes, max_len)
        with torch.no_grad(), torch_threads(1):
            out = model(batch.ids, batch.mask, control=control, capture_attention=True, types=batch.types)
        maps = out.layers[layer].attention[:, head].double().numpy()  # (B, H, T, T) -> (B, T, T)
        for b, prefix in enumerate(prefixes):
            n = int(out.lengths[b])
            att = maps[b, :n, :n]  # real tokens only: (n, n)
            if np.isnan(att).any():  # the head did not run on this input
                continue
            tokens, _ = read_tokens(ckpt.tokenizer, prefix, max_len)
            q = np.arange(n)
            totals["first token"] += float(att[:, 0].sum())
            totals["same token"] += float(att[q, q].sum())
            totals["previous token"] += float(att[q[1:], q[1:] - 1].sum())
            totals["next token"] += float(att[q[:-1], q[:-1] + 1].sum())
            if len(tokens) == n:
                punct = np.array([is_punctuation(t) for t in tokens])
                totals["punctuation"] += float(att[:, punct].sum())
            inputs += 1
            queries += n
    shares = {part: (total / queries if queries else 0.0) for part, total in totals.items()}
    return AttentionProfile(shares, inputs, queries)
