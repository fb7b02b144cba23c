"""Where a session's texts come from: the datasets built into the app, the local copies a
visitor gives in the sidebar (:func:`data_dir`), and the cached reading of a split from either
(:func:`read_split`). Nothing here knows the models; :mod:`app.models` decides which source a
model's dataset reads from, :mod:`app.state` what is computed on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app.local_copy import local_copy

OFFLINE_DATASETS = ("bbc", "synthetic", "synthetic_var", "synthetic_pairs")
"""Datasets whose texts ship with the app (others would need the network)."""


@dataclass
class Samples:
    """The test split of a dataset: texts, integer labels and the dataset's label names."""

    label_names: list[str]
    texts: list[str]
    labels: list[int]


DATA_DIRS_KEY = "data_dirs"
"""Session-state key: dataset → the local copy (folder or file) the user pointed the app at."""


@st.cache_data(max_entries=4, show_spinner="Loading the dataset…")
def read_split(dataset: str, split: str, data_dir: str | None, seed: int,
               classes: tuple[str, ...] | None = None) -> Samples | None:
    """One split of ``dataset`` read from a local copy (``data_dir``: a folder, or one file that is
    the split) or built in, its labels matched to ``classes`` by name; None when it cannot be read."""
    from budgetformer_core.io.data import load_dataset, source_path
    from budgetformer_core.io.hub import ALIASES, HUB_LABELS

    named = list(classes) if classes else HUB_LABELS.get(ALIASES.get(dataset, dataset))  # a file's labels: by name
    try:
        if data_dir and Path(data_dir).is_file():  # one file is the split asked for, labelled as the dataset
            data = load_dataset(data_dir, seed=seed, classes=named, whole=True)
            part = data.split("all")
        elif data_dir and source_path(dataset) is not None:  # a folder of the texts of a model's own classes
            data = load_dataset(data_dir, seed=seed, classes=named)
            part = data.split(split)
        else:
            data = load_dataset(dataset, data_dir or None, seed=seed)
            part = data.split(split)
    except (RuntimeError, ValueError, OSError, ImportError):
        return None
    return Samples(list(data.label_names), list(part.texts), list(part.labels))


def data_dir(dataset: str) -> str | None:
    """The local copy of ``dataset`` given in the sidebar, when it is one a visitor may use
    (:func:`local_copy`); None when none was given or the path is not allowed. The sidebar's box
    as typed (its widget state) counts from the run it was typed in, before the box is drawn again."""
    typed = st.session_state.get(f"data_dir_{dataset}")
    given = typed.strip() if isinstance(typed, str) else st.session_state.get(DATA_DIRS_KEY, {}).get(dataset)
    path = local_copy(given)
    return None if path is None else str(path)


@st.cache_data(max_entries=32, show_spinner=False)
def readable(dataset: str, source: tuple, classes: tuple[str, ...]) -> bool:
    """True when the validation split of ``dataset`` reads from ``source`` with these classes (a
    verdict kept apart from the split, which a busy page may push out of its small cache)."""
    samples = read_split(dataset, "validation", *source)
    return samples is not None and samples.label_names == list(classes)
