"""Batch analysis: a CSV / JSONL file of texts through the model, a row per text, downloadable.

The file is read by :func:`budgetformer_core.io.inputs.read_text_table` and classified by
:func:`budgetformer_core.analysis.infer.predict_rows`, the two functions ``budgetformer predict
--input-file`` uses: the table holds what that command prints, a row per input.
"""

from __future__ import annotations

import logging

import streamlit as st

from app.charts.errors import confusion_heatmap
from app.components import budget_slider, csv_download, md_escape, show_chart
from app.live import batch_predictions
from app.logic.batch import (
    BATCH_MAX_BYTES,
    BATCH_MAX_MB,
    BATCH_MAX_ROWS,
    batch_accuracy,
    batch_table,
    kind_problem,
    label_notes,
)
from app.models import checkpoint_config, model_method, selected_model
from app.settings import Settings

log = logging.getLogger(__name__)

st.title("Batch analysis")
name = selected_model()
method = model_method(name)
sym = method.symbol
st.caption(
    f"Upload texts and get, for each, **{md_escape(name)}**'s prediction, its confidence, "
    + (
        "and (every head runs: a dense model) the tokens read. "
        if not method.budgeted
        else f"per layer the {method.budget_name.lower()}, the heads run (k) "
        "and which heads ran. "
    )
    + f"CSV with a `text` column, JSONL with a \"text\" per line, or one text per line (two text columns, "
    "e.g. `premise` and `hypothesis`, for a model that reads pairs; a `label` column "
    "or \"label\" gives the accuracy and a confusion matrix); up to "
    f"{BATCH_MAX_ROWS} texts and {BATCH_MAX_MB} MB. The same rows as "
    "`budgetformer predict --json --input-file FILE`."
)

settings = Settings()
if method.budgeted:
    c1, c2 = st.columns([2, 3], vertical_alignment="bottom")
    how = c1.radio(method.budget_name, ["learned", "slider"], format_func=method.mode_labels.get,
                   horizontal=True, key="batch_how")
    value = budget_slider(method.budget_name, "batch_budget", c2, disabled=how != "slider")
    settings = Settings(budget_mode=how, budget=float(value))

upload = st.file_uploader("File of texts", type=["csv", "jsonl", "txt"], key="batch_file",
                          max_upload_size=BATCH_MAX_MB)
if upload is None:
    st.info("Upload a file to classify its texts.")
    st.stop()

from budgetformer_core.io.inputs import read_labels, read_text_table  # noqa: E402  (numpy only; after the widgets)

try:
    rows = read_text_table(upload.getvalue(), upload.name, BATCH_MAX_BYTES, BATCH_MAX_ROWS)
except ValueError as e:  # empty, too large, not UTF-8, a broken row: say which
    st.error(f"This file cannot be read: {md_escape(e)}")
    st.stop()
if problem := kind_problem(checkpoint_config(name), rows):  # pairs for a model of single texts, or the reverse
    st.error(f"This file cannot be classified by {md_escape(name)}: {md_escape(problem)}.")
    st.stop()
try:
    predictions = batch_predictions(name, rows, settings)
except ValueError as e:  # CheckpointError
    st.error(f"The model {md_escape(name)} cannot be loaded: {md_escape(e)}")
    st.stop()
except Exception as e:  # never a traceback on the page
    log.exception("batch analysis failed")
    st.error(f"Something went wrong while classifying the file ({type(e).__name__}).")
    st.stop()

label_names = list(checkpoint_config(name).get("label_names", []))
labels = read_labels(upload.getvalue(), upload.name)
table = batch_table(predictions, sym, labels, label_names)
errors = int((table["error"] != "").sum())
c1, c2, c3 = st.columns(3)
c1.metric("Texts classified", f"{len(table) - errors} of {len(table)}")
c2.metric("Not classified", str(errors), "see the error column" if errors else None, delta_color="off",
          delta_arrow="off")
ks = [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()]
if ks and errors < len(table):
    c3.metric("Mean heads run per layer (k)", " / ".join(f"{table[k].mean():.2f}" for k in ks))
if settings.budget_mode == "slider":
    st.caption(f"Every text at {md_escape(settings.describe(sym))}.")
judged = batch_accuracy(table, label_names)
notes = " ".join(md_escape(note) for note in label_notes(table, labels, label_names))  # labels are user text
if "label" in table and judged is None:
    st.caption("No accuracy to give: no text that was classified has a label naming one of the model's "
               "classes. " + notes)
elif judged is not None:
    accuracy, n_judged, matrix = judged
    m1, m2 = st.columns([1, 2], gap="large")
    m1.metric("Accuracy against the file's labels", f"{accuracy:.1%}", f"{n_judged} texts with a label",
              delta_color="off", delta_arrow="off")
    if notes:
        m1.caption(notes)
    show_chart(m2, confusion_heatmap(matrix, label_names), key="batch_confusion")
st.dataframe(  # cells are plain text: markup in a text stays text
    table,
    hide_index=True,
    column_config={
        "text": st.column_config.TextColumn("text", width="large"),
        "text_pair": st.column_config.TextColumn("second text", width="large", help="The second text of the pair."),
        "error": st.column_config.TextColumn("not classified because", help="Empty when the text was classified."),
        "label": st.column_config.TextColumn("true label", help="The file's label column."),
        "confidence": st.column_config.NumberColumn(format="percent"),
        "flops_vs_dense": st.column_config.NumberColumn("FLOPs vs dense", format="percent"),
        **{f"{sym}{i}": st.column_config.NumberColumn(f"{sym} layer {i}", format="%.3f") for i in range(len(ks))},
    },
    key="batch_table",
)
csv_download(table, f"batch-{name}.csv", "batch_csv")
