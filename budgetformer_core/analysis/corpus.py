"""A whole corpus's head allocation (``budgetformer analyze``): the input rows, and the one pure
function that turns a batch of them into records.

:func:`read_corpus` reads the rows ``--dataset`` names (a dataset's split, or a file with or
without labels) into a :class:`Corpus`. :func:`records` turns a batch of those rows into the rows of
the shipped per-example tables (:meth:`~budgetformer_core.analysis.infer.Evaluation.to_frame`:
prediction, confidence, loss where the row has a label, s, k and the heads run per layer, tokens
read), keyed by each row's ``index`` in the input. Both engines call it on batches of the same rows:
the local one (:func:`budgetformer_core.analysis.runs.run_local`) and Ray Data's
(:mod:`budgetformer_core.analysis.ray_engine`). They write the records as Parquet shards
(``part-00000.parquet``, …) into an analysis folder (:mod:`budgetformer_core.analysis.runs`);
:func:`read_records` reads them back, sorted by index, and :func:`summarize` gives their figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..io.checkpoint import Checkpoint
from ..io.data import load_dataset, source_path
from ..io.hub import FORMATS, NoLabels
from ..io.inputs import TABLE_SUFFIXES, input_rows
from ..io.splits import PAIR_COLUMNS
from ..io.tokenizer import Text, encode, reading_prefix
from ..model.budget import Control
from .adaptivity import hard_easy_ratio
from .infer import check_kind, evaluate, is_blank, spearman

SHARD = "part-{:05d}.parquet"
"""The name of an analysis folder's i-th shard of records."""
SHARD_PATTERN = re.compile(r"part-\d{5}\.parquet")


@dataclass
class Corpus:
    """The rows to analyse, in the input's order."""

    name: str
    """The dataset's name or the file's path, as given."""
    split: str
    frame: pd.DataFrame
    """``index`` (the row's place in the input, from 0), ``text`` (and ``text_pair`` for a pair)
    and ``label`` (the class id; -1 where the input gives none)."""
    skipped: int = 0
    """Blank rows of an unlabelled file, left out (their indices are missing from the records)."""


def corpus_frame(texts: list[Text], labels: list[int] | None, index: list[int] | None = None) -> pd.DataFrame:
    """The input rows as :class:`Corpus` holds them (``labels`` None: none known)."""
    pairs = bool(texts) and isinstance(texts[0], tuple)
    frame = pd.DataFrame({"index": np.arange(len(texts)) if index is None else np.asarray(index, dtype=np.int64)})
    frame["text"] = [t[0] for t in texts] if pairs else list(texts)
    if pairs:
        frame["text_pair"] = [t[1] for t in texts]
    frame["label"] = np.full(len(texts), -1, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    return frame


def batch_texts(batch: pd.DataFrame) -> list[Text]:
    """The texts (or pairs) of a batch of :func:`corpus_frame` rows."""
    if "text_pair" in batch.columns:
        return list(zip(batch["text"].tolist(), batch["text_pair"].tolist()))
    return batch["text"].tolist()


def read_corpus(ckpt: Checkpoint, dataset: str | None, data_dir: str | None = None, split: str | None = None,
                split_seed: int | None = None, limit: int | None = None) -> Corpus:
    """The rows ``--dataset`` names: a split of a dataset (default: the checkpoint's own dataset
    and split seed, its test split), or a CSV / JSONL / Parquet file read whole (``--split all``,
    the default for a file) with its labels mapped to the checkpoint's classes, or, without a
    label column, its texts alone (a ``text`` column, two of a pair, or a text per line; blank
    rows are left out and counted). ``limit``: the first rows only.

    Raises:
        ValueError: no such dataset or file, no texts, a label the model does not know, a pair for
            a model of single texts (or the reverse).
    """
    name = dataset or ckpt.meta.get("dataset")
    if not name:
        raise ValueError("the checkpoint does not name its dataset: pass --dataset")
    seed = ckpt.meta.get("split_seed", 0) if split_seed is None else split_seed
    source = source_path(name, data_dir)
    if source is not None and not source.exists():
        raise ValueError(f"--dataset {name}: no such file or folder")
    single = source is not None and source.is_file()
    split = split or ("all" if single else "test")
    skipped = 0
    try:
        if single and source.suffix.lower() not in FORMATS:  # a text per line: no labels
            raise NoLabels(f"{source} is a text per line")
        data = load_dataset(name, data_dir, seed=seed, classes=list(ckpt.label_names), whole=split == "all")
        part = data.split(split)
        frame = corpus_frame(part.texts, part.labels)
    except NoLabels:
        if not single or split != "all":
            raise ValueError(f"{name} has no labels: unlabelled texts are read from one file, whole "
                             "(--split all)") from None
        rows = unlabelled_rows(source)
        kept = [(i, t) for i, t in rows if not any(is_blank(p) for p in (t if isinstance(t, tuple) else (t,)))]
        skipped = len(rows) - len(kept)
        frame = corpus_frame([t for _, t in kept], None, [i for i, _ in kept])
    if limit:
        frame = frame.head(limit)
    if frame.empty:
        raise ValueError(f"{name} holds no texts to analyse")
    check_kind(ckpt, batch_texts(frame.head(1)), "each row of --dataset")
    return Corpus(str(name), split, frame.reset_index(drop=True), skipped)


def unlabelled_rows(path: Path) -> list[tuple[int, Text]]:
    """(index from 0, text) of each row of a file without labels: a CSV or JSONL table or a
    text per line (:func:`~budgetformer_core.io.inputs.input_rows`), or a Parquet table."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return parquet_rows(path)
    if suffix in FORMATS and suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path} has no label column; unlabelled texts are read from a CSV, JSONL or Parquet "
                         "file or a text per line")
    return [(number - 1, text) for number, text in input_rows(str(path))]


def parquet_rows(path: Path) -> list[tuple[int, Text]]:
    """(index from 0, text) of each row of an unlabelled Parquet table: its ``text`` column (or
    its only one), or two columns of a pair (:data:`~budgetformer_core.io.splits.PAIR_COLUMNS`)."""
    try:
        table = pd.read_parquet(path)
    except (OSError, ValueError) as e:  # pyarrow's errors are one or the other
        raise ValueError(f"{path} is not a readable Parquet file ({e})") from None
    columns = {str(c).strip().lower(): c for c in table.columns}
    pair = next((p for p in PAIR_COLUMNS if set(p) <= set(columns)), None)
    wanted = pair or (("text",) if "text" in columns else tuple(columns)[:1] if len(columns) == 1 else None)
    if wanted is None:
        shown = ", ".join(repr(str(c)) for c in list(table.columns)[:10])
        raise ValueError(f"{path}: no 'text' column (its columns: {shown}); name the column of texts 'text'")
    cells = [table[columns[c]].tolist() for c in wanted]
    for column, values in zip(wanted, cells, strict=True):
        bad = next((i for i, v in enumerate(values) if v is not None and not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"{path}: row {bad + 1} of column {column!r} is not text")
    texts = [tuple(v or "" for v in row) for row in zip(*cells)] if pair else [v or "" for v in cells[0]]
    return list(enumerate(texts))


# --------------------------------------------------------------------------- the pure function

@torch.inference_mode()
def records(ckpt: Checkpoint, batch: pd.DataFrame, control: Control | None = None) -> pd.DataFrame:
    """The per-example records of a batch of input rows (:func:`corpus_frame`'s columns).

    The rows of the shipped per-example tables (:meth:`~budgetformer_core.analysis.infer.Evaluation.to_frame`
    of :func:`~budgetformer_core.analysis.infer.evaluate`, rounded to 6 decimals as they are) with
    ``index`` the row's place in the input; a row without a label has null ``label``, ``correct``,
    ``p_true`` and ``loss``. The same rows give the same records whichever engine or process asks;
    a row's floats may differ in the last bits with the rows it is padded beside.
    """
    texts = batch_texts(batch)
    max_len = ckpt.config.max_len
    ids, _ = encode(ckpt.tokenizer, [reading_prefix(ckpt.tokenizer, t, max_len) for t in texts], max_len)
    labels = batch["label"].to_numpy(dtype=np.int64)
    known = labels >= 0
    frame = evaluate(ckpt.model, ids, np.where(known, labels, 0).tolist(), control).to_frame([len(x) for x in ids])
    frame = frame.round(6)
    frame["index"] = batch["index"].to_numpy(dtype=np.int64)
    frame["label"] = frame["label"].astype("Int64").mask(~known)
    frame["correct"] = frame["correct"].astype("boolean").mask(~known)
    frame.loc[~known, ["p_true", "loss"]] = np.nan
    return frame


def read_records(folder: str | Path) -> pd.DataFrame:
    """Every shard of an analysis folder as one table, sorted by ``index`` (``label`` as
    nullable integers, ``correct`` as nullable truth values, ``p_true`` and ``loss`` NaN where a
    row has no label, whichever engine wrote them).

    Raises:
        ValueError: no shard, or one that cannot be read.
    """
    paths = sorted(p for p in Path(folder).iterdir() if SHARD_PATTERN.fullmatch(p.name))
    if not paths:
        raise ValueError(f"{folder} holds no records ({SHARD.format(0)}, …)")
    try:
        frame = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder}: a shard cannot be read ({e})") from None
    frame["label"] = frame["label"].astype("Int64")
    frame["correct"] = frame["correct"].astype("boolean")
    frame[["p_true", "loss"]] = frame[["p_true", "loss"]].astype(np.float64)  # a shard of nulls only: None
    return frame.sort_values("index", kind="stable").reset_index(drop=True)


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`read_records` that have a label, typed as the shipped tables are
    (``label`` integers, ``correct`` truth values)."""
    rows = frame[frame["label"].notna()].reset_index(drop=True)
    return rows.astype({"label": np.int64, "correct": bool})


def summarize(frame: pd.DataFrame, n_heads: int) -> dict:
    """Figures of an analysis's records: rows, heads run (mean fraction, per layer the histogram
    of k and the number of distinct head sets), mean s; where rows have labels, accuracy and how
    the budget follows the model's own loss (Spearman ρ of mean s with it, heads run on the
    hardest third over the easiest). ``budgetformer adaptivity`` judges difficulty by a dense
    reference instead, on a split."""
    layers = sorted(int(c[1:]) for c in frame.columns if c[:1] == "k" and c[1:].isdigit())
    k = frame[[f"k{layer}" for layer in layers]].to_numpy(dtype=np.float64)  # (N, L)
    figures = {
        "rows": len(frame),
        "labelled": int(frame["label"].notna().sum()),
        "mean_s": float(frame["mean_s"].mean()),
        "mean_heads_fraction": float(k.mean() / n_heads),
        "layers": [{"k_hist": {str(int(v)): int(c) for v, c in frame[f"k{layer}"].value_counts().sort_index().items()},
                    "distinct_head_sets": int(frame[f"heads{layer}"].nunique())} for layer in layers],
        "accuracy": None, "rho_s_own_loss": None, "heads_ratio_hard_easy_own_loss": None,
    }
    rows = labelled(frame)
    if len(rows):
        heads = rows[[f"k{layer}" for layer in layers]].to_numpy(dtype=np.float64).mean(1)  # (N,) mean k over layers
        figures.update(accuracy=float(rows["correct"].mean()), rho_s_own_loss=spearman(rows["mean_s"], rows["loss"]),
                       heads_ratio_hard_easy_own_loss=hard_easy_ratio(heads, rows["loss"].to_numpy()))
    return figures
