"""Error bars of a dataset's shipped models: paired bootstrap intervals of their per-example
tables, and the spread of test accuracy over training seeds (precomputed/results/seeds.csv)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import state
from app.logic.results import INTERVAL_MODELS


@dataclass
class ErrorBars:
    """Paired bootstrap intervals of one dataset's shipped models (their per-example tables)."""

    compared: pd.DataFrame
    """:func:`budgetformer_core.measure.bootstrap.compare`'s rows, one per pair with both tables."""
    intervals: dict
    """Each model's accuracy :class:`~budgetformer_core.measure.bootstrap.Interval`."""
    missing: list[str]
    """Models of :data:`app.logic.results.INTERVAL_MODELS` without a readable per-example table."""
    n: int = 0
    resamples: int = 0
    seed: int = 0


@st.cache_data(max_entries=16, show_spinner="Resampling the test split…")
def _error_bars(dataset: str, versions: tuple, pairs: tuple) -> ErrorBars:
    from budgetformer_core.measure import bootstrap

    tables, missing = {}, []
    for model in INTERVAL_MODELS:
        try:
            found = state.precomputed_per_example(dataset, model)
        except ValueError:
            found = None
        if found is None:
            missing.append(model)
        else:
            tables[model] = found
    if not tables:
        return ErrorBars(pd.DataFrame(), {}, missing)
    compared = bootstrap.compare(tables, list(pairs))
    n = len(next(iter(tables.values())))
    return ErrorBars(compared, bootstrap.accuracy_intervals(tables), missing, n, bootstrap.RESAMPLES, bootstrap.SEED)


def error_bars(dataset: str, pairs: tuple[tuple[str, str], ...]) -> ErrorBars:
    """Paired bootstrap intervals of ``pairs`` of ``dataset``'s models (cached until a table changes).

    Raises:
        ValueError: the per-example tables are not of the same test inputs.
    """
    versions = tuple(state.file_stamp(state.per_example_path(f"{dataset}-{m}")) for m in INTERVAL_MODELS)
    return _error_bars(dataset, versions, tuple(pairs))


@st.cache_data(max_entries=2, show_spinner=False)
def _seed_runs(path: str, version: tuple) -> pd.DataFrame | None:
    from budgetformer_core.measure.bootstrap import read_seed_runs

    return read_seed_runs(path)


def seed_spread(dataset: str) -> pd.DataFrame | None:
    """Test accuracy over seeds per model of ``dataset`` (precomputed/results/seeds.csv, written
    by ``scripts/seed_table.py --csv``); None when no seed run of it is there.

    Raises:
        ValueError: the file is unreadable or lacks columns.
    """
    from budgetformer_core.measure.bootstrap import seed_spread as spread

    path = state.RESULTS / "seeds.csv"
    version = state.file_stamp(path)
    runs = None if version is None else _seed_runs(str(path), version)
    table = None if runs is None else spread(runs, dataset)
    return None if table is None or table.empty else table
