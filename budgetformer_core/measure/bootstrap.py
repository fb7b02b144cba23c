"""Error bars: paired bootstrap intervals over the test examples, and the spread over seeds.

Two models tested on the same split are compared *paired*: each resample draws N test examples
with replacement, once, and both models' accuracies are measured on that same draw, so the
interval of their difference reflects only the examples on which they disagree (what a paired
test asks), not each model's own sampling noise. Percentile intervals (2,000 resamples, 95 % by
default), drawn from ``numpy.random.default_rng(seed)``: the same seed and split size give the
same draws, hence the same intervals, on every call and for every pair of models.

The inputs are the per-example tables of ``make precompute``
(``precomputed/results/per_example/<dataset>-<model>.parquet``, columns ``index``, ``label``,
``prediction``, ``correct``, …); :func:`read_seed_runs` reads ``scripts/seed_table.py``'s CSV.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0
_CHUNK_CELLS = 4_000_000
"""Drawn indices held at once (resamples × examples): ~32 MB, whatever the split size."""


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap percentile interval (fractions, not points)."""

    estimate: float
    low: float
    high: float
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    seed: int = SEED
    n: int = 0
    """Test examples resampled."""

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly on one side of 0 (a difference beyond noise)."""
        return not self.contains(0.0)

    def points(self, signed: bool = True) -> str:
        """"+0.47 [−0.94, +1.88]": the estimate and interval in percentage points."""
        spec = "+.2f" if signed else ".2f"
        return f"{self.estimate * 100:{spec}} [{self.low * 100:{spec}}, {self.high * 100:{spec}}]"

    def to_dict(self) -> dict:
        return asdict(self)


def resampled_means(
    values: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> np.ndarray:
    """(R, M) means of the M columns of ``values`` (N, M) over R bootstrap draws of its N rows.

    Every column is measured on the same draws (paired). The draws depend only on ``seed`` and N.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        raise ValueError(f"need an (N, M) array with N ≥ 1 examples, got shape {values.shape}")
    if resamples < 1:
        raise ValueError(f"resamples must be ≥ 1, got {resamples}")
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, values.shape[1]))
    step = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        r = min(step, resamples - start)
        idx = rng.integers(0, n, size=(r, n), dtype=np.int32)  # (r, N) rows drawn with replacement
        offsets = (np.arange(r, dtype=np.int64) * n)[:, None]  # (r, 1): each draw counts into its own row
        counts = np.bincount((idx + offsets).ravel(), minlength=r * n).reshape(r, n)  # (r, N) times drawn
        out[start : start + r] = counts.astype(np.float64) @ values / n  # (r, N) @ (N, M) -> (r, M)
    return out


def _interval(estimate: float, samples: np.ndarray, confidence: float, resamples: int, seed: int, n: int) -> Interval:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return Interval(float(estimate), float(low), float(high), confidence, resamples, seed, n)


def mean_interval(
    correct, resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED
) -> Interval:
    """One model's accuracy (the mean of its 0/1 ``correct`` column) with its interval."""
    x = np.asarray(correct, dtype=np.float64)[:, None]  # (N, 1)
    samples = resampled_means(x, resamples, seed)[:, 0]
    return _interval(x.mean(), samples, confidence, resamples, seed, len(x))


def paired_difference(
    a, b, resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED
) -> Interval:
    """mean(a) − mean(b) of two per-example columns of the same examples, with its paired
    interval (for 0/1 ``correct`` columns: the accuracy difference of two models)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired columns must be 1-D and of one length, got {a.shape} and {b.shape}")
    means = resampled_means(np.stack([a, b], 1), resamples, seed)  # (R, 2)
    return _interval(a.mean() - b.mean(), means[:, 0] - means[:, 1], confidence, resamples, seed, len(a))


def correct_columns(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The ``correct`` column of each model's per-example table, joined on ``index``: a row per
    test example, a column per model.

    Raises:
        ValueError: tables of different examples (other indices, or other labels for one index).
    """
    if not tables:
        raise ValueError("no per-example tables")
    frames = {}
    for name, t in tables.items():
        if not {"index", "label", "prediction"} <= set(t.columns):
            raise ValueError(f"{name}: the per-example table needs index, label and prediction columns")
        frames[name] = t.set_index("index").sort_index()
    first_name, first = next(iter(frames.items()))
    for name, t in frames.items():
        if not t.index.equals(first.index) or not (t["label"].to_numpy() == first["label"].to_numpy()).all():
            raise ValueError(f"{name} and {first_name} were not tested on the same examples")
    return pd.DataFrame(
        {name: (t["prediction"].to_numpy() == t["label"].to_numpy()) for name, t in frames.items()},
        index=first.index,
    )


def compare(
    tables: dict[str, pd.DataFrame],
    pairs: list[tuple[str, str]],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> pd.DataFrame:
    """A row per pair (a, b) of models in ``tables``: both accuracies, the difference a − b with
    its paired bootstrap interval, and how many examples only a or only b gets right.

    Columns: ``a``, ``b``, ``accuracy_a``, ``accuracy_b``, ``difference``, ``low``, ``high``
    (fractions), ``only_a``, ``only_b``, ``n``, ``beyond_noise`` (the interval excludes 0).
    Pairs naming a model without a table are left out.
    """
    correct = correct_columns(tables)
    names = list(correct.columns)
    means = resampled_means(correct.to_numpy(), resamples, seed)  # (R, models): one draw for every pair
    rows = []
    for a, b in pairs:
        if a not in correct or b not in correct:
            continue
        ca, cb = correct[a].to_numpy(), correct[b].to_numpy()
        diff = means[:, names.index(a)] - means[:, names.index(b)]  # (R,)
        iv = _interval(ca.mean() - cb.mean(), diff, confidence, resamples, seed, len(ca))
        rows.append({"a": a, "b": b, "accuracy_a": ca.mean(), "accuracy_b": cb.mean(),
                     "difference": iv.estimate, "low": iv.low, "high": iv.high,
                     "only_a": int((ca & ~cb).sum()), "only_b": int((cb & ~ca).sum()), "n": iv.n,
                     "beyond_noise": iv.excludes_zero})  # fmt: skip
    columns = ["a", "b", "accuracy_a", "accuracy_b", "difference", "low", "high", "only_a", "only_b", "n",
               "beyond_noise"]
    return pd.DataFrame(rows, columns=columns)


def accuracy_intervals(
    tables: dict[str, pd.DataFrame],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> dict[str, Interval]:
    """Each model's accuracy with its bootstrap interval (the same draws for every model)."""
    correct = correct_columns(tables)
    means = resampled_means(correct.to_numpy(), resamples, seed)  # (R, models)
    return {name: _interval(correct[name].mean(), means[:, m], confidence, resamples, seed, len(correct))
            for m, name in enumerate(correct.columns)}


# --------------------------------------------------------------------------- seeds

SEED_COLUMNS = ("dataset", "model", "seed", "accuracy")


def read_seed_runs(path: Path | str) -> pd.DataFrame | None:
    """``scripts/seed_table.py --csv``'s file (a row per dataset, model and seed); None when it
    is missing.

    Raises:
        ValueError: unreadable, or without the columns of :data:`SEED_COLUMNS`.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, dtype={"dataset": str, "model": str})
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path.name}: not a readable CSV file ({e})") from e
    missing = [c for c in SEED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path.name}: the column(s) {', '.join(missing)} are missing")
    return frame


def seed_spread(runs: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Per model of ``dataset``: the seeds run, mean and sample standard deviation of the test
    accuracy over them (fractions; sd NaN for one seed), its range, and each seed's accuracy."""
    rows = []
    for model, group in runs[runs["dataset"] == dataset].groupby("model", sort=False):
        group = group.sort_values("seed")
        acc = group["accuracy"].to_numpy(dtype=np.float64)
        rows.append({"model": model, "seeds": len(acc), "mean": acc.mean(),
                     "sd": acc.std(ddof=1) if len(acc) > 1 else np.nan, "min": acc.min(), "max": acc.max(),
                     "per_seed": ", ".join(f"{s}: {a * 100:.1f}" for s, a in zip(group["seed"], acc, strict=True))})
    return pd.DataFrame(rows, columns=["model", "seeds", "mean", "sd", "min", "max", "per_seed"])
