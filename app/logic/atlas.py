"""What the "Head atlas" page computes besides the engine's atlas (no Streamlit here): the shipped
relevance p of a split read back, and the two slices the page opens on.

The engine's :mod:`budgetformer_core.analysis.atlas` computes the allocation of a split; the rebuild
ships each model's relevance p on its test split beside its per-example table
(:func:`budgetformer_core.shipped.relevance_path`), so the input map and the head card need no pass
of the model over the split.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


def read_relevance(path: Path | str) -> np.ndarray:
    """The (N, L, H) relevance p a rebuild shipped (float16, named ``relevance`` in a ``.npz``), as
    float32.

    Raises:
        ValueError: not a readable array of three dimensions with values in [0, 1].
    """
    try:
        stored = np.load(path, allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an .npz archive")
        with stored:
            p = stored["relevance"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"not a readable .npz of the relevance ({e})") from e
    if p.ndim != 3 or p.dtype.kind != "f":
        raise ValueError(f"an array of shape {p.shape} and type {p.dtype}, not (inputs, layers, heads) numbers")
    p = p.astype(np.float32)
    if p.size and not (np.isfinite(p).all() and p.min() >= 0 and p.max() <= 1):
        raise ValueError("values outside [0, 1]: not a relevance p")
    return p


@dataclass(frozen=True)
class Slice:
    """One slice of the usage tab as its widgets start: a true class (None: any) and an outcome."""

    label: int | None = None
    outcome: str = "any"
    """``any``, ``right`` or ``wrong``."""


def default_slices(frame: pd.DataFrame) -> tuple[Slice, Slice]:
    """The slices A and B the usage tab opens on, so that their difference map shows something:
    the inputs the model got right against those it got wrong when it got some wrong; else (every
    input right, or every input wrong) its two largest classes; else (one class) all inputs twice,
    the only slice there is."""
    correct = frame["correct"].to_numpy(dtype=bool)
    if correct.any() and not correct.all():
        return Slice(outcome="right"), Slice(outcome="wrong")
    sizes = frame["label"].value_counts(sort=False).sort_index()
    largest = sizes.sort_values(ascending=False, kind="stable").index[:2].tolist()
    if len(largest) == 2:
        return Slice(label=int(min(largest))), Slice(label=int(max(largest)))
    return Slice(), Slice()
