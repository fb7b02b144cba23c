"""Cached loading shared by the pages: models with cache_resource, tables with cache_data.

Which models there are and what their config.json says is :mod:`app.models`; where the shipped
files are, :mod:`budgetformer_core.shipped`.

Every cache is keyed by the checkpoint's name *and* a stamp of its files (size and mtime), so a
checkpoint replaced on disk is picked up without restarting the server. Caches of per-input
results are bounded (``max_entries``), so many sessions and many inputs cannot grow memory
without limit.

Only the first call that needs a model imports torch and the core (seconds), so the pages can
draw their widgets from ``config.json`` before that.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from app.logic import examples, results
from app.models import (
    checkpoint_config,
    checkpoint_path,
    data_source,
    dataset_of,
    is_classifier,
    is_ranked,
    model_dir,
    ranking_note,
    ranking_source,
    reference_model,
    stamp,
)
from app.sources import Samples, read_split
from budgetformer_core import shipped

if TYPE_CHECKING:
    from budgetformer_core.io.checkpoint import Checkpoint

@st.cache_resource(show_spinner="Loading model…", max_entries=8)
def _checkpoint(name: str, version: tuple) -> Checkpoint:
    from budgetformer_core.io.loader import load_checkpoint

    return load_checkpoint(checkpoint_path(name))


@st.cache_resource(show_spinner="Loading the classifier and ranking its heads…", max_entries=8)
def _ranked(name: str, version: tuple, dataset: str, source: tuple) -> Checkpoint:
    from budgetformer_core.io.files import CheckpointError
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.train.rank import rank_heads

    ckpt = load_checkpoint(checkpoint_path(name))
    samples = read_split(dataset, "validation", *source)
    if samples is None or samples.label_names != ckpt.label_names:  # ranking_source checked both
        raise CheckpointError(f"the validation split of {dataset} cannot be read with {name}'s classes")
    return rank_heads(ckpt, samples.texts, samples.labels, source=f"the validation split of {dataset}")


def get_checkpoint(name: str) -> Checkpoint:
    """Load a shipped checkpoint once per server (read-only afterwards, so safe to share); a
    listed classifier with its heads ranked on the validation split of its dataset (zero-shot
    post-hoc budgets, :func:`budgetformer_core.train.rank.rank_heads`) where this session has
    its texts (:func:`ranking_source`), else as it is: every head, as
    :func:`app.models.checkpoint_config` then says.

    Raises:
        CheckpointError: unknown name, missing / corrupt files, or a folder that is not a
            classifier (a ValueError).
    """
    source = ranking_source(name) if is_classifier(name) else None
    if source is not None:
        return _ranked(name, stamp(name), dataset_of(name), source)
    return _checkpoint(name, stamp(name))


@st.cache_data(max_entries=4, show_spinner="Running the classifier at every number of heads…")
def _classifier_sweep(name: str, version: tuple, dataset: str, source: tuple) -> pd.DataFrame:
    samples = read_split(dataset, "test", *source)
    ckpt = _ranked(name, version, dataset, source)
    budgets = results.head_budgets(ckpt.config.n_heads)
    return results.sweep_rows(list(results.live_sweep(ckpt, samples.texts, samples.labels, budgets)), dataset, name)


def classifier_sweep(name: str) -> pd.DataFrame:
    """The budget sweep of a listed classifier on the test split of its dataset, with its heads
    ranked zero-shot (:func:`get_checkpoint`): a row per number of heads, as sweeps.csv's rows
    (cached for all sessions; the first call runs the split once per budget).

    Raises:
        ValueError: the classifier cannot be loaded or ranked (the reason, in one line).
    """
    get_checkpoint(name)  # the reason it cannot be used, if any
    if not is_ranked(name):
        raise ValueError(f"it {ranking_note(name)}")
    dataset = dataset_of(name)
    return _classifier_sweep(name, stamp(name), dataset, data_source(dataset))


def model_sha256(name: str) -> str:
    """sha256 of the checkpoint's weights (cached until the file changes)."""
    path = model_dir(name) / "model.safetensors"
    return _file_sha256(str(path), file_stamp(path))


def split_samples(dataset: str, split: str = "test") -> Samples | None:
    """One split of ``dataset``, or None when its texts are not available here (see app.models.data_source)."""
    source = data_source(dataset)
    return None if source is None else read_split(dataset, split, *source)


def test_samples(dataset: str) -> Samples | None:
    """The test split of ``dataset``, or None when its texts are not available here."""
    return split_samples(dataset, "test")


@st.cache_data(max_entries=4, show_spinner=False)
def _allocation(name: str, version: tuple, dataset: str, split: str, source: tuple, budget: float | None):
    from budgetformer_core.analysis.atlas import allocate
    from budgetformer_core.io.splits import Split
    from budgetformer_core.model.budget import Control

    samples = read_split(dataset, split, *source)
    control = None if budget is None else Control(budget=budget)
    return allocate(get_checkpoint(name), Split(samples.texts, samples.labels), control)


def per_example(name: str, split: str = "test", budget: float | None = None) -> pd.DataFrame | None:
    """Every text of a split through the model, a row per text (:func:`app.logic.examples.per_example_table`).

    The test split's table comes from precomputed/results when the manifest vouches that it was
    made from this very checkpoint (instant); otherwise the model runs over the split once
    (seconds; cached for all sessions). Rows are in the split's order, so a row's ``index`` is
    the sample picker's index. ``text`` is empty when the texts are not on this machine. None
    when there is neither a precomputed table nor the texts. ``budget``: every input run at that
    budget (bba: the requested b) instead of the model's own, which needs the texts.

    Raises:
        ValueError: the checkpoint cannot be loaded, or its classes are not the dataset's.
    """
    dataset = dataset_of(name)
    samples = split_samples(dataset, split)
    label_names = list(checkpoint_config(name).get("label_names", []))
    if samples is not None and samples.label_names != label_names:
        raise ValueError(f"the checkpoint's classes {label_names} are not the dataset's {samples.label_names}")
    frame = precomputed_table(name) if split == "test" and budget is None else None
    if frame is not None:
        texts = samples.texts if samples is not None and samples.labels == frame["label"].tolist() else None
    elif samples is not None:
        frame, texts = _allocation(name, stamp(name), dataset, split, data_source(dataset), budget).frame, samples.texts
    else:
        return None
    return examples.per_example_table(frame, texts, label_names)


@st.cache_data(max_entries=8, show_spinner=False)
def heads_ran(heads: pd.DataFrame, n_layers: int, n_heads: int):
    """(N, L, H) bool: :func:`budgetformer_core.analysis.atlas.heads_matrix` of a per-example table's
    ``heads{l}`` columns, cached by their content (reading 7,600 × L cells anew would cost every
    run of a page over AG News more than the rest of it).

    Raises:
        ValueError: a layer's column is missing or names a head outside ``0 … n_heads − 1``.
    """
    from budgetformer_core.analysis.atlas import heads_matrix

    return heads_matrix(heads, n_layers, n_heads)


def relevance(name: str, budget: float | None = None, split: str = "test"):
    """(N, L, H) head relevance p of every input of the split, in the split's order (the rows of
    :func:`per_example`), at ``budget`` (None: the model's own): the shipped one of the test split
    at the model's own budget (:func:`precomputed_relevance`, instant), else one pass of the model
    over the split, cached with :func:`per_example`'s; None when neither is here."""
    if split == "test" and budget is None and (shipped_p := precomputed_relevance(name)) is not None:
        return shipped_p
    dataset = dataset_of(name)
    if split_samples(dataset, split) is None:
        return None
    return _allocation(name, stamp(name), dataset, split, data_source(dataset), budget).relevance


def relevance_is_shipped(name: str, budget: float | None = None) -> bool:
    """True when :func:`relevance` of the test split at ``budget`` reads the shipped file (no pass
    of the model over the split)."""
    return budget is None and precomputed_relevance(name) is not None


@st.cache_data(max_entries=8, show_spinner=False)
def _precomputed_relevance(path: str, version: tuple):
    from app.logic.atlas import read_relevance

    return read_relevance(path)


def precomputed_relevance(name: str):
    """The shipped (N, L, H) relevance p of checkpoint ``name`` on its test split
    (:func:`budgetformer_core.shipped.relevance_path`) when the manifest vouches for it, for its
    per-example table and for the checkpoint's weights (made together), else None."""
    path = shipped.relevance_path(name)
    if not (vouched(path) and precomputed_table(name) is not None):
        return None
    try:
        return _precomputed_relevance(str(path), file_stamp(path))
    except ValueError:  # vouched for, yet unreadable: computed live instead
        return None


# --------------------------------------------------------------------------- precomputed results


def file_stamp(path: Path) -> tuple | None:
    """(size, mtime) of a file, None when it is missing."""
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_size, s.st_mtime_ns


@st.cache_data(max_entries=4, show_spinner=False)
def _sweeps(path: str, version: tuple) -> pd.DataFrame:
    return results.read_sweeps(path)


def sweeps() -> pd.DataFrame | None:
    """precomputed/results/sweeps.csv as :func:`app.logic.results.read_sweeps` reads it; None when
    the file is missing (re-read when it changes on disk).

    Raises:
        ValueError: the file cannot be read or lacks columns.
    """
    path = shipped.sweeps_csv()
    version = file_stamp(path)
    return None if version is None else _sweeps(str(path), version)


@st.cache_data(max_entries=16, show_spinner=False)
def _precomputed_example(path: str, version: tuple) -> pd.DataFrame:
    return examples.read_per_example(path)


def precomputed_per_example(dataset: str, model: str) -> pd.DataFrame | None:
    """The precomputed per-example test table of ``<dataset>-<model>``; None when missing.

    Raises:
        ValueError: the file cannot be read or lacks columns.
    """
    path = shipped.per_example_path(shipped.model_name(dataset, model))
    version = file_stamp(path)
    return None if version is None else _precomputed_example(str(path), version)


@st.cache_data(max_entries=2, show_spinner=False)
def _manifest_files(path: str, version: tuple) -> dict:
    try:
        files = json.loads(Path(path).read_text()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return files if isinstance(files, dict) else {}


@st.cache_data(max_entries=64, show_spinner=False)
def _file_sha256(path: str, version: tuple) -> str:
    from budgetformer_core.io.files import file_sha256

    return file_sha256(path)


def vouched(path: Path) -> bool:
    """True when ``path`` is listed in the manifest with its current sha256."""
    try:
        rel = shipped.relative(path.resolve()).as_posix()
    except ValueError:
        return False
    entry = _manifest_files(str(shipped.MANIFEST), file_stamp(shipped.MANIFEST)).get(rel)
    version = file_stamp(path)
    return isinstance(entry, dict) and version is not None and entry.get("sha256") == _file_sha256(str(path), version)


def precomputed_table(name: str) -> pd.DataFrame | None:
    """The precomputed per-example test table of checkpoint ``name`` when the manifest vouches
    for it and for the checkpoint's weights (made together), else None."""
    path = shipped.per_example_path(name)
    if not (vouched(path) and vouched(shipped.checkpoint_dir(name) / "model.safetensors")):
        return None
    try:
        return _precomputed_example(str(path), file_stamp(path))
    except ValueError:  # vouched for, yet unreadable: computed live instead
        return None


PREFETCH: dict[str, threading.Thread] = {}
"""The thread that read each picked model's per-example tables (:func:`prefetch`), by model."""


def prefetch(name: str) -> None:
    """Read the precomputed per-example test tables of ``name`` and of its reference model in a
    background thread, once per server process, after the page that picked the model is drawn:
    the pages built on them (Easy vs hard, Errors) then find them in the cache instead of
    reading them (and the manifest's sha256 of the files) on their first visit — about 0.3 s on
    AG News. A table that cannot be read is left to the page, which says why."""
    if name in PREFETCH:
        return

    def read() -> None:
        for model in (name, reference_model(name)):
            if model is not None:
                try:
                    precomputed_table(model)
                except (OSError, ValueError):  # the page reads it again and reports it
                    pass

    thread = threading.Thread(target=read, name=f"prefetch {name}", daemon=True)
    add_script_run_ctx(thread, get_script_run_ctx())  # the caches' own bookkeeping wants a context
    PREFETCH[name] = thread
    thread.start()


# --------------------------------------------------------------------------- adaptivity

NEEDS_DATASETS = ("synthetic", "synthetic_var")
"""Datasets built in code whose splits say how many heads each input needs (``Split.needed_heads``)."""


@st.cache_data(max_entries=4, show_spinner="Loading the dataset…")
def _needed_heads(dataset: str, split: str, seed: int) -> list[int] | None:
    from budgetformer_core.io.data import load_dataset

    try:
        needed = load_dataset(dataset, seed=seed).split(split).needed_heads
    except (RuntimeError, ValueError, OSError, ImportError):
        return None
    return None if needed is None else [int(n) for n in needed]


def needed_heads(name: str, split: str = "test") -> list[int] | None:
    """Heads each input of the split of ``name``'s dataset needs, in the split's order (the rows
    of :func:`per_example`); None for a dataset that does not say (all but :data:`NEEDS_DATASETS`)."""
    dataset = dataset_of(name)
    if dataset not in NEEDS_DATASETS:
        return None
    return _needed_heads(dataset, split, int(checkpoint_config(name).get("split_seed", 0)))
