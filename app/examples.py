"""Per-example tables for the "Errors", "Easy vs hard" and "Ablations" pages (no Streamlit here).

The pages work on one table: a row per text of a split, built from
:meth:`budgetformer_core.infer.Evaluation.to_frame` (predictions, probabilities, s per layer),
computed live or read from the precomputed per-example tables; :func:`per_example_table` adds the
class names and texts. The filters, confusion matrix, extremes and the models' disagreements are
computed from those tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def per_example_table(frame: pd.DataFrame, texts: list[str] | None, label_names: list[str]) -> pd.DataFrame:
    """The pages' table: a per-example frame plus class names and texts.

    ``frame`` is :meth:`budgetformer_core.infer.Evaluation.to_frame`'s (columns ``index``,
    ``label``, ``prediction``, ``correct``, ``confidence``, ``p_true``, ``loss``, ``entropy``,
    ``mean_s``, ``s{l}`` / ``k{l}`` / ``heads{l}`` per layer, ``tokens``), computed live or read
    from precomputed/results. Adds ``true`` and ``predicted`` (class names) and ``text`` (empty
    when the split's texts are not on this machine).

    Raises:
        ValueError: texts of another length than the frame, or a label outside ``label_names``.
    """
    if texts is not None and len(texts) != len(frame):
        raise ValueError(f"{len(texts)} texts for {len(frame)} rows")
    names = np.asarray(label_names, dtype=object)
    ids = np.concatenate([frame["label"].to_numpy(), frame["prediction"].to_numpy()]).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(names)):
        raise ValueError(f"class ids outside the {len(names)} classes")
    table = frame.copy()
    table.insert(1, "true", names[frame["label"].to_numpy(dtype=np.int64)])
    table.insert(2, "predicted", names[frame["prediction"].to_numpy(dtype=np.int64)])
    table["text"] = list(texts) if texts is not None else [""] * len(frame)
    return table


def layer_columns(table: pd.DataFrame) -> list[str]:
    """The per-layer budget columns ``s0``, ``s1``, … of a :func:`per_example_table`."""
    return [c for c in table.columns if c[:1] == "s" and c[1:].isdigit()]


def filter_examples(
    table: pd.DataFrame,
    *,
    true: list[str] | None = None,
    predicted: list[str] | None = None,
    s_range: tuple[float, float] | None = None,
    confidence_range: tuple[float, float] | None = None,
    errors_only: bool = True,
) -> pd.DataFrame:
    """The rows matching every filter; an empty or ``None`` class list means "any class".

    Ranges are closed intervals (a little slack so a slider at 1.00 keeps s = 0.99999…).
    """
    keep = np.ones(len(table), dtype=bool)
    if errors_only:
        keep &= ~table["correct"].to_numpy()
    if true:
        keep &= table["true"].isin(true).to_numpy()
    if predicted:
        keep &= table["predicted"].isin(predicted).to_numpy()
    eps = 1e-6
    for column, bounds in (("mean_s", s_range), ("confidence", confidence_range)):
        if bounds is not None:
            lo, hi = bounds
            values = table[column].to_numpy()
            keep &= (values >= lo - eps) & (values <= hi + eps)
    return table[keep]


def confusion_matrix(table: pd.DataFrame, label_names: list[str]) -> list[list[int]]:
    """Counts by true class (rows) and predicted class (columns), in ``label_names`` order."""
    if table.empty:  # scikit-learn refuses an empty split
        return [[0] * len(label_names) for _ in label_names]
    from sklearn.metrics import confusion_matrix as counts  # slow import, only on the Errors page

    return counts(table["true"], table["predicted"], labels=label_names).tolist()


def extremes(
    table: pd.DataFrame, n: int = 10, column: str = "mean_s"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``n`` rows with the lowest and the ``n`` with the highest ``column`` (ties by index)."""
    ordered = table.sort_values([column, "index"], kind="stable")
    return ordered.head(n), ordered.tail(n).iloc[::-1]


def example_label(row) -> str:
    """A one-line name of a per-example row for pickers: "#12 · sport → politics (64%)"."""
    return f"#{int(row['index'])} · {row['true']} → {row['predicted']} ({row['confidence']:.0%})"


def preview(text: str, width: int = 160) -> str:
    """The start of ``text`` on one line, for table cells."""
    flat = " ".join(text[: width * 3].split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


PER_EXAMPLE_KEYS = ("index", "label", "prediction")


def read_per_example(path: Path | str) -> pd.DataFrame:
    """A precomputed per-example table (a row per test input, no text).

    Raises:
        ValueError: not a readable parquet file, or without the columns of :data:`PER_EXAMPLE_KEYS`.
    """
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as e:  # pyarrow's errors are one or the other
        raise ValueError(f"not a readable parquet file ({e})") from e
    missing = [c for c in PER_EXAMPLE_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"the column(s) {', '.join(missing)} are missing")
    return frame


def disagreements(
    tables: dict[str, pd.DataFrame],
    label_names: list[str],
    texts: list[str] | None = None,
    labels: list[int] | None = None,
) -> tuple[pd.DataFrame, int]:
    """The test inputs on which the models' predictions differ, and how many inputs all share.

    Joins the per-example tables on ``index``. Columns: ``index``, ``true``, one column per model
    with its predicted class, ``right`` ("2 of 3": models that got it right), and ``text`` when
    ``texts`` / ``labels`` (the split) are given and agree with the tables' labels.
    """
    def name(i: int) -> str:
        return label_names[i] if 0 <= i < len(label_names) else str(i)

    joined = None
    for model, t in tables.items():
        part = t[["index", "label", "prediction"]].rename(columns={"prediction": model})
        joined = part if joined is None else joined.merge(part.drop(columns="label"), on="index")
    if joined is None:
        return pd.DataFrame(columns=["index", "true", "right"]), 0
    models = list(tables)
    preds = joined[models].to_numpy()
    differ = joined[(preds != preds[:, :1]).any(1)]
    right = (differ[models].to_numpy() == differ[["label"]].to_numpy()).sum(1)
    out = pd.DataFrame({"index": differ["index"].astype(int), "true": differ["label"].map(name)})
    for model in models:
        out[model] = differ[model].map(name)
    out["right"] = [f"{r} of {len(models)}" for r in right]
    if texts is not None and labels is not None:
        idx = joined["index"].to_numpy()
        known = len(idx) == 0 or (idx.min() >= 0 and idx.max() < min(len(texts), len(labels)))
        if known and all(labels[i] == y for i, y in zip(idx, joined["label"], strict=True)):
            out["text"] = [texts[i] for i in out["index"]]
    return out.reset_index(drop=True), len(joined)
