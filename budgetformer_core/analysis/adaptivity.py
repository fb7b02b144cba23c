"""How much a model's head allocation follows the input, judged against an outside difficulty.

The claim under test: easy inputs get few heads and hard ones many, with difficulty measured by
something other than the model judged — the per-example loss of a reference model (a dense one
by default) or, on a synthetic task, the number of heads each input is built to need.

:func:`adaptivity` evaluates a checkpoint (and its reference) on a split; :func:`from_frames`
reads the same figures off per-example tables (:meth:`Evaluation.to_frame`, the precomputed
ones); :func:`from_arrays` does the arithmetic on plain per-input arrays, so every figure can be
checked by hand:

* per layer, the histogram of k, how many distinct head sets ran and the entropy (bits) of the
  distribution of head sets over the inputs;
* ``rho_s_reference_loss``: Spearman ρ of each input's mean s (over layers) with the reference
  model's cross-entropy on it;
* ``heads_ratio_hard_easy``: mean heads run per input (mean k over layers) on the hardest third
  by reference loss / on the easiest third;
* ``rho_k_needed`` and ``frac_k_at_least_needed`` where the inputs carry their needed n.

A correlation with a constant column (a requested budget, a dense model) is ``None``, never NaN.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import entropy

from ..io.checkpoint import Checkpoint
from ..io.loader import load_checkpoint
from ..io.splits import Split
from ..model.budget import Control
from .infer import Evaluation, evaluate_split, spearman

MIN_SHARE = 0.05
"""A value of k counts in ``k_values_over_5pct`` when at least this share of inputs take it."""


@dataclass
class LayerAdaptivity:
    """How one layer's head allocation varies over the inputs."""

    k_hist: dict[str, int]
    """Inputs per number of heads run, keyed by k as a string, in increasing k."""
    distinct_head_sets: int
    """How many different sets of heads ran."""
    head_set_entropy_bits: float
    """Entropy (bits) of the distribution of head sets over the inputs: 0 iff one set."""
    k_values_over_5pct: int
    """How many values of k are each taken by at least 5 % of the inputs."""


@dataclass
class Adaptivity:
    """Adaptivity figures of one model on one split (see the module docstring)."""

    n: int
    accuracy: float
    mean_heads_fraction: float
    """Heads run / heads available, over inputs and layers."""
    layers: list[LayerAdaptivity]
    rho_s_reference_loss: float | None
    """Spearman ρ(mean s over layers, reference loss); None without a reference or for constant s."""
    heads_ratio_hard_easy: float | None
    """Mean heads run on the hardest third by reference loss / on the easiest third."""
    rho_k_needed: float | None
    """Spearman ρ(mean k over layers, needed n); None where the task does not say what it needs."""
    frac_k_at_least_needed: float | None
    """Fraction of inputs whose k ≥ n in every layer."""
    notes: list[str] = field(default_factory=list)
    """Why a figure is None, or what it means for this kind of model."""

    def to_dict(self) -> dict:
        return asdict(self)


def per_example_loss(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N,) cross-entropy of the true label, −log p_true in nats (p clipped at 1e-12, as in the
    precomputed per-example tables)."""
    probs = np.asarray(probs, dtype=np.float64)
    p_true = probs[np.arange(len(probs)), np.asarray(labels, dtype=np.int64)]
    return -np.log(np.clip(p_true, 1e-12, 1.0))


def layer_adaptivity(selected: np.ndarray) -> LayerAdaptivity:
    """Figures of one layer from its (N, H) bool matrix of the heads that ran."""
    selected = np.asarray(selected, dtype=bool)
    n = len(selected)
    ks, k_counts = np.unique(selected.sum(-1), return_counts=True)
    packed = np.packbits(selected, axis=-1)  # (N, ⌈H/8⌉) bytes: each head set as one opaque value
    codes = np.ascontiguousarray(packed).view(f"V{packed.shape[1]}")[:, 0]  # (N,): a 1-D unique, not by rows
    _, set_counts = np.unique(codes, return_counts=True)  # one count per distinct head set
    bits = float(entropy(set_counts, base=2)) if len(set_counts) > 1 else 0.0
    return LayerAdaptivity(
        k_hist={str(int(k)): int(c) for k, c in zip(ks, k_counts)},
        distinct_head_sets=len(set_counts),
        head_set_entropy_bits=bits,
        k_values_over_5pct=int((k_counts >= MIN_SHARE * n).sum()),
    )


def hard_easy_ratio(heads: np.ndarray, loss: np.ndarray) -> float | None:
    """Mean of ``heads`` on the third of inputs with the highest ``loss`` / on the lowest third.

    The thirds have ⌊N/3⌋ inputs each; ties in loss keep input order. None for N < 3.
    """
    heads, loss = np.asarray(heads, dtype=np.float64), np.asarray(loss, dtype=np.float64)
    third = len(loss) // 3
    if third == 0:
        return None
    order = np.argsort(loss, kind="stable")
    return float(heads[order[-third:]].mean() / heads[order[:third]].mean())


def from_arrays(
    selected: np.ndarray,
    budgets: np.ndarray,
    labels: np.ndarray,
    predictions: np.ndarray,
    reference_loss: np.ndarray | None = None,
    needed_heads: np.ndarray | None = None,
    notes: list[str] | None = None,
) -> Adaptivity:
    """Adaptivity figures from per-input arrays.

    Args:
        selected: (N, L, H) bool, the heads that ran per input and layer.
        budgets: (N, L) the budget s per input and layer.
        labels, predictions: (N,) class ids.
        reference_loss: (N,) the reference model's per-example loss (None: no reference figures).
        needed_heads: (N,) heads each input needs (None: the task does not say).
        notes: notes to carry into the result.
    """
    selected = np.asarray(selected, dtype=bool)
    budgets = np.asarray(budgets, dtype=np.float64)
    n, n_layers, n_heads = selected.shape
    if budgets.shape != (n, n_layers) or len(labels) != n or len(predictions) != n:
        raise ValueError(f"per-input arrays differ in shape: selected {selected.shape}, budgets {budgets.shape}, "
                         f"{len(labels)} labels, {len(predictions)} predictions")
    notes = list(notes or [])
    k = selected.sum(-1)  # (N, L)
    heads = k.mean(-1)  # (N,) heads run per input, mean over layers
    mean_s = budgets.mean(-1)  # (N,)
    rho_s = ratio = rho_k = frac = None
    if reference_loss is not None:
        reference_loss = np.asarray(reference_loss, dtype=np.float64)
        if reference_loss.shape != (n,):
            raise ValueError(f"reference loss has shape {reference_loss.shape}, expected ({n},)")
        rho_s = spearman(mean_s, reference_loss)
        if rho_s is None and n > 2:
            notes.append("s is the same for every input, so it cannot correlate with difficulty: "
                         "rho_s_reference_loss is null")
        ratio = hard_easy_ratio(heads, reference_loss)
    if needed_heads is not None:
        needed = np.asarray(needed_heads, dtype=np.int64)
        if needed.shape != (n,):
            raise ValueError(f"{len(needed)} needed-head counts for {n} inputs")
        rho_k = spearman(heads, needed)
        if rho_k is None and n > 2:
            notes.append("rho_k_needed is null: " + (f"every input needs {needed[0]} heads" if np.ptp(needed) == 0
                                                     else "every input runs the same number of heads"))
        frac = float((k >= needed[:, None]).all(-1).mean()) if n else None
    return Adaptivity(
        n=n,
        accuracy=float((np.asarray(predictions) == np.asarray(labels)).mean()) if n else 0.0,
        mean_heads_fraction=float(k.mean() / n_heads) if n else 0.0,
        layers=[layer_adaptivity(selected[:, layer]) for layer in range(n_layers)],
        rho_s_reference_loss=rho_s,
        heads_ratio_hard_easy=ratio,
        rho_k_needed=rho_k,
        frac_k_at_least_needed=frac,
        notes=notes,
    )


def from_frames(
    frame: pd.DataFrame,
    n_heads: int,
    reference: pd.DataFrame | None = None,
    needed_heads: np.ndarray | None = None,
    notes: list[str] | None = None,
) -> Adaptivity:
    """Adaptivity figures from per-example tables (columns of :meth:`Evaluation.to_frame`).

    Args:
        frame: the judged model's table: ``label``, ``prediction``, and per layer ``s{l}`` and
            ``heads{l}`` (space-separated indices of the heads that ran).
        n_heads: heads per layer of that model.
        reference: the reference model's table on the same inputs (its ``loss`` column).
        needed_heads, notes: as in :func:`from_arrays`.

    Raises:
        ValueError: when the two tables do not list the same inputs.
    """
    layers = sorted(int(c[5:]) for c in frame.columns if c.startswith("heads") and c[5:].isdigit())
    selected = np.zeros((len(frame), len(layers), n_heads), dtype=bool)  # (N, L, H)
    for j, layer in enumerate(layers):
        # " 0 3 5 " per input (empty when missing): head h ran where " h " occurs
        cells = np.char.add(np.char.add(" ", frame[f"heads{layer}"].fillna("").astype(str).to_numpy(dtype=str)), " ")
        for h in range(n_heads):
            selected[:, j, h] = np.char.find(cells, f" {h} ") >= 0
    budgets = frame[[f"s{layer}" for layer in layers]].to_numpy()
    loss = None
    if reference is not None:
        if len(reference) != len(frame) or not np.array_equal(reference["label"], frame["label"]):
            raise ValueError("the reference table does not list the same inputs (length or labels differ)")
        loss = reference["loss"].to_numpy()
    return from_arrays(selected, budgets, frame["label"].to_numpy(), frame["prediction"].to_numpy(),
                       loss, needed_heads, notes)


def default_reference(checkpoint_dir: str | Path) -> Path:
    """The dense model beside a checkpoint: ``<dataset>-<model>`` → ``<dataset>-dense``, and for a
    model fine-tuned from a pretrained encoder the dense fine-tune of that encoder
    (``bbc-minilm-budgetformer`` → ``bbc-minilm-dense``).

    Raises:
        FileNotFoundError: when there is no such directory (pass a reference explicitly).
    """
    from ..shipped import dense_reference

    path = Path(checkpoint_dir)
    dataset = path.name.partition("-")[0]
    reference = path.parent / dense_reference(dataset, path.name, full=True)
    if not reference.is_dir():
        raise FileNotFoundError(f"no reference model: {reference} does not exist; pass --reference DIR "
                                f"(a dense model trained on the same dataset)")
    return reference


def adaptivity(
    ckpt: Checkpoint,
    split: Split,
    reference: Checkpoint | None = None,
    control: Control | None = None,
    mode: str | None = None,
    needed_heads: list[int] | None = None,
) -> Adaptivity:
    """Evaluate ``ckpt`` on ``split`` and measure how its head allocation follows the input.

    Args:
        ckpt: the model judged.
        split: the inputs; its ``needed_heads`` (where the dataset has them) give ``rho_k_needed``.
        reference: the model whose per-example loss is the difficulty (None: no loss figures).
            It is evaluated on the same texts and must have the same label names.
        control: budget / ablation overrides for ``ckpt`` (see :class:`Control`).
        mode: execution mode of ``ckpt`` (default: structural, dense for a dense model).
        needed_heads: heads each input needs, overriding the split's own.

    Raises:
        ValueError: when the reference's labels differ from the checkpoint's.
    """
    evaluation = evaluate_split(ckpt, split, control, mode)
    loss = None
    if reference is not None:
        if list(reference.label_names) != list(ckpt.label_names):
            raise ValueError(f"the reference model's labels {reference.label_names} differ from the "
                             f"checkpoint's {ckpt.label_names}")
        same = reference is ckpt and control is None and mode is None
        ref: Evaluation = evaluation if same else evaluate_split(reference, split)
        loss = per_example_loss(ref.probs, ref.labels)
    if needed_heads is None:
        needed_heads = getattr(split, "needed_heads", None)
    return from_arrays(evaluation.selected, evaluation.budgets, evaluation.labels, evaluation.predictions,
                       loss, needed_heads, ckpt.model.method.notes(ckpt.config, control))


def load_reference(checkpoint_dir: str | Path, reference_dir: str | Path | None = None) -> Checkpoint:
    """Load ``reference_dir``, or the dense model beside ``checkpoint_dir`` (see
    :func:`default_reference`)."""
    return load_checkpoint(reference_dir if reference_dir else default_reference(checkpoint_dir))
