"""Analysis folders of ``budgetformer analyze`` as rows of their own on the pages built on a split's
per-example table (Easy vs hard, Errors, Head atlas).

The operator lists the folders (:func:`app.local_copy.analysis_folders`); a page offers, beside
the test split, each one made with the selected model's very weights (the sha256 its
``summary.json`` records, :func:`choices`), as "analysis: NAME". Its records are the shipped
tables' columns keyed by the row's place in the analysed input, without texts; the pages use its
labelled rows (they compare each prediction with its class).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st

from app.components import md_escape
from app.local_copy import analysis_folders
from app.logic.examples import per_example_table
from app.models import checkpoint_config
from app.sources import Samples
from app.state import file_stamp, model_sha256

TEST_ROWS = "the test split"
PREFIX = "analysis: "


@st.cache_data(max_entries=32, show_spinner=False)
def _summary(path: str, version: tuple) -> dict:
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


@st.cache_data(max_entries=4, show_spinner="Reading the analysis…")
def _records(path: str, version: tuple) -> tuple[pd.DataFrame, int]:
    from budgetformer_core.analysis.corpus import labelled, read_records

    frame = read_records(path)
    return labelled(frame), len(frame)


def summary(folder: Path) -> dict:
    """A folder's ``summary.json`` ({} when it cannot be read), re-read when it changes."""
    path = folder / "summary.json"
    return _summary(str(path), file_stamp(path))


def choices(name: str) -> list[str]:
    """The names of the operator's analysis folders made with model ``name``'s weights."""
    folders = analysis_folders()
    if not folders:
        return []
    try:
        sha = model_sha256(name)
    except OSError:
        return []
    return [a for a, folder in folders.items() if summary(folder).get("model_sha256") == sha]


def rows_picker(name: str, key: str) -> str | None:
    """A choice of rows, drawn only where model ``name`` has analysis folders: the name of the
    analysis picked, or None for the test split."""
    found = choices(name)
    if not found:
        return None
    picked = st.selectbox("Rows", [TEST_ROWS, *(PREFIX + a for a in found)], key=key,
                          help="The test split, or an analysis of another corpus made with this model "
                               "(budgetformer analyze) from the folders the operator listed.")
    return None if picked == TEST_ROWS else picked.removeprefix(PREFIX)


def analysis_or_stop(name: str, analysis: str) -> tuple[pd.DataFrame, Samples]:
    """The pages' table (:func:`~app.logic.examples.per_example_table`, no texts) of the labelled
    rows of analysis folder ``analysis`` and its class names, or a clear message and ``st.stop()``."""
    folder = analysis_folders().get(analysis)
    if folder is None:
        st.error(f"The analysis {md_escape(analysis)} is no longer listed.")
        st.stop()
    label_names = list(checkpoint_config(name).get("label_names", []))
    try:
        frame, rows = _records(str(folder), file_stamp(folder / "summary.json"))
        table = per_example_table(frame, None, label_names)
    except (ValueError, KeyError) as e:
        st.error(f"The analysis {md_escape(analysis)} cannot be read: {md_escape(e)}")
        st.stop()
    about = summary(folder)
    if table.empty:
        st.info(f"The analysis {md_escape(analysis)} has no labelled rows: this page compares each prediction "
                "with its class.")
        st.stop()
    left_out = f"; {rows - len(table)} rows without a label are left out" if rows > len(table) else ""
    st.caption(f"Rows: the {len(table)} labelled rows of the analysis {md_escape(analysis)} "
               f"({md_escape(about.get('dataset', '?'))}, split {md_escape(about.get('split', '?'))}){left_out}; "
               "# is a row's place in that input, whose texts are not shown here.")
    return table, Samples(label_names, [], table["label"].tolist())
