"""Error bars of a dataset's shipped models: paired bootstrap intervals of their per-example
tables, and the spread of test accuracy over training seeds (precomputed/results/seeds.csv);
:func:`error_bars_section` shows both on the sweep and ablation pages."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import state
from app.components import csv_download, md_escape
from app.logic.results import INTERVAL_MODELS
from budgetformer_core import shipped


@dataclass
class ErrorBars:
    """Paired bootstrap intervals of one dataset's shipped models (their per-example tables)."""

    compared: pd.DataFrame
    """:func:`budgetformer_core.measure.bootstrap.compare`'s rows, one per pair with both tables."""
    intervals: dict
    """Each model's accuracy :class:`~budgetformer_core.measure.bootstrap.Interval`."""
    missing: list[str]
    """The models asked for (:data:`app.logic.results.INTERVAL_MODELS` unless told) without a
    readable per-example table."""
    n: int = 0
    resamples: int = 0
    seed: int = 0


@st.cache_data(max_entries=16, show_spinner="Resampling the test split…")
def _error_bars(dataset: str, versions: tuple, pairs: tuple, models: tuple = INTERVAL_MODELS) -> ErrorBars:
    from budgetformer_core.measure import bootstrap

    tables, missing = {}, []
    for model in models:
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


def error_bars(dataset: str, pairs: tuple[tuple[str, str], ...], models: tuple = INTERVAL_MODELS) -> ErrorBars:
    """Paired bootstrap intervals of ``pairs`` of ``dataset``'s ``models`` (their names in
    sweeps.csv; cached until a table changes).

    Raises:
        ValueError: the per-example tables are not of the same test inputs.
    """
    paths = [shipped.per_example_path(shipped.model_name(dataset, m)) for m in models]
    versions = tuple(state.file_stamp(path) for path in paths)
    return _error_bars(dataset, versions, tuple(pairs), tuple(models))


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

    path = shipped.seeds_csv()
    version = state.file_stamp(path)
    runs = None if version is None else _seed_runs(str(path), version)
    table = None if runs is None else spread(runs, dataset)
    return None if table is None or table.empty else table


INTERVAL_COLUMNS = {  # short headers, set widths: the whole table fits the page at 1280 px (the CSV keeps the names)
    "model": st.column_config.TextColumn("model", width=130),
    "against": st.column_config.TextColumn("against", width=100),
    "accuracy": st.column_config.NumberColumn("accuracy", format="percent", width=72),
    "its accuracy": st.column_config.NumberColumn("its acc.", format="percent", width=66,
                                                  help="The accuracy of the model it is compared against"),
    "difference (points)": st.column_config.NumberColumn("Δ points", format="%+.2f", width=66,
                                                         help="Accuracy difference, in points"),
    "95% interval (points)": st.column_config.TextColumn("95% interval", width=104,
                                                         help="95% paired bootstrap interval, in points"),
    "only model right": st.column_config.NumberColumn("only it ✓", width=66,
                                                      help="Inputs only the model got right"),
    "only other right": st.column_config.NumberColumn("only other ✓", width=84,
                                                      help="Inputs only the model it is compared against got right"),
    "verdict": st.column_config.TextColumn("verdict", width=88),
}

def error_bars_section(dataset: str, pairs, key: str, names: dict[str, str] | None = None,
                       models: tuple | None = None):
    """The paired bootstrap intervals of ``pairs`` of ``dataset``'s models and, where seed runs
    exist, the spread over seeds: tables with a line on how they were made. Returns the
    :class:`app.error_bars.ErrorBars` (None when the tables cannot be compared).

    ``models``: the models whose tables are read (default :data:`INTERVAL_MODELS`); given, the
    seed spread keeps the models built on the same encoder as the first of them."""
    from app.logic import results

    try:
        bars = error_bars(dataset, pairs, models or INTERVAL_MODELS)
    except ValueError as e:
        st.warning(f"The per-example tables cannot be compared: {md_escape(e)}")
        return None
    if bars.compared.empty:
        st.info(
            "Error bars need the per-example results of two of these models "
            f"(precomputed/results/per\\_example/{md_escape(dataset)}-<model>.parquet). Run `make precompute`."
        )
    else:
        table = results.difference_table(bars.compared, names)
        st.dataframe(
            table,
            hide_index=True,
            column_config=INTERVAL_COLUMNS,
            key=f"{key}_intervals",
        )
        st.caption(results.interval_note(bars.compared, bars.n, bars.resamples, bars.seed))
        csv_download(table, f"intervals-{dataset}.csv", f"{key}_intervals_csv")
    try:
        spread = seed_spread(dataset)
    except ValueError as e:
        st.warning(f"precomputed/results/seeds\\.csv cannot be used: {md_escape(e)}")
        spread = None
    if spread is not None and models:  # only the models of the same encoder
        encoder = results.backbone_of(models[0])
        spread = spread[[results.backbone_of(m) == encoder for m in spread["model"]]]
        spread = None if spread.empty else spread
    if spread is None:
        st.caption(
            f"No seed runs of {'these models of ' if models else ''}{md_escape(dataset)} are shipped "
            "(every model here is seed 0): "
            "`scripts/seed_table.py --csv precomputed/results/seeds.csv` trains them."
        )
    else:
        st.markdown("**Spread over training seeds** (the same recipe, only the seed differs)")
        st.dataframe(
            results.seed_table(spread),
            hide_index=True,
            column_config={"accuracy (mean)": st.column_config.NumberColumn(format="percent")},
            key=f"{key}_seeds",
        )
    return bars
