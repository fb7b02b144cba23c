"""Errors: which test texts the model gets wrong, what it confuses, and how much budget they got.

The whole test split goes through the model once per checkpoint (cached for every session);
the filters, the table and the confusion matrix are computed from that table. A selected row
opens in "Explore an input".
"""

from __future__ import annotations

import streamlit as st

from app.analyses import analysis_or_stop, rows_picker
from app.charts.errors import confusion_heatmap
from app.components import csv_download, md_escape, open_in_explore, per_example_or_stop, show_chart
from app.logic.errors import clicked_cell, percent, shown_table
from app.logic.examples import confusion_matrix, example_label, excerpt, filter_examples, layer_columns
from app.models import checkpoint_history, dataset_of, is_classifier, model_method, ranking_note, selected_model

PICK_KEY = "errors_pick"
TABLE_KEY = "errors_table"

st.title("Errors")
st.caption(
    "Every text of the held-out test split through the model: the confusion matrix, then the "
    "misclassified texts with their confidence and budget. Select a row to read it, or open it "
    "in “Explore an input” to see its heads."
)

name = selected_model()
dataset = dataset_of(name)
method = model_method(name)
dense = not method.budgeted
sym = method.symbol  # bba's budget is the requested b
if checkpoint_history(name):
    unavailable = "The **Training dynamics** page still shows how this model trained."
elif is_classifier(name):  # an import: no training history to send it to
    unavailable = f"{md_escape(name)} {md_escape(ranking_note(name))}."
else:
    unavailable = f"Give a local copy of {md_escape(dataset)} in the sidebar to see its errors."
analysis = rows_picker(name, "errors_rows")  # None: the test split
if analysis is None:
    table, samples = per_example_or_stop(name, dataset, unavailable)
else:
    table, samples = analysis_or_stop(name, analysis)
if table is None or table.empty:
    st.info("The test split is empty.")
    st.stop()

label_names = samples.label_names
wrong = table[~table["correct"]]
n = len(table)
m1, m2, m3, m4 = st.columns(4)
m1.metric(
    "Test accuracy", f"{1 - len(wrong) / n:.1%}", f"{n} texts", delta_color="off", delta_arrow="off"
)
m2.metric("Misclassified", f"{len(wrong)}", f"of {n}", delta_color="off", delta_arrow="off")
if dense:
    m3.metric(
        f"Mean {sym} when wrong", "1.00", "dense: every head", delta_color="off", delta_arrow="off"
    )
    m4.metric(
        f"Mean {sym} when right", "1.00", "dense: every head", delta_color="off", delta_arrow="off"
    )
else:
    m3.metric(
        f"Mean {sym} when wrong",
        f"{wrong['mean_s'].mean():.3f}" if len(wrong) else "—",
        help=f"The budget {sym} averaged over layers, then over the misclassified texts.",
    )
    m4.metric(f"Mean {sym} when right", f"{table.loc[table['correct'], 'mean_s'].mean():.3f}")

# ----------------------------------------------------------------------------- confusion
clicked = show_chart(
    st,
    confusion_heatmap(confusion_matrix(table, label_names), label_names),
    key="chart_confusion",
    on_select="rerun",
    selection_mode="points",
)
cell = clicked_cell(clicked.selection.points if clicked is not None else [], label_names)
if cell is not None and st.session_state.get("err_cell_last") != cell:
    # a new cell was clicked: the table lists its texts (set before the filters are drawn)
    st.session_state["err_true"], st.session_state["err_pred"] = [cell[0]], [cell[1]]
    if cell[0] == cell[1]:  # a diagonal cell: the texts it counts are classified correctly
        st.session_state["err_all"] = True
st.session_state["err_cell_last"] = cell

# ----------------------------------------------------------------------------- table
st.subheader("Misclassified texts")
# the filters and the picked text are kept for the session (across page switches); classes
# of another dataset, picked before a model change, are dropped
for key in ("err_true", "err_pred"):
    st.session_state[key] = [c for c in st.session_state.get(key, []) if c in label_names]
f1, f2, f3, f4 = st.columns(4, gap="medium")
true_sel = f1.multiselect(
    "True class", label_names, key="err_true", placeholder="any class", persist_state="session"
)
pred_sel = f2.multiselect(
    "Predicted class", label_names, key="err_pred", placeholder="any class", persist_state="session"
)
s_range = f3.slider(
    f"Budget range (mean {sym})",
    0.0,
    1.0,
    (0.0, 1.0),
    0.01,
    key="err_s",
    disabled=dense,
    persist_state="session",
    help=f"The budget {sym} averaged over layers"
    + (" (a dense model runs every head)." if dense else "."),
)
conf_range = f4.slider(
    "Confidence range",
    0.0,
    1.0,
    (0.0, 1.0),
    0.01,
    key="err_conf",
    persist_state="session",
    help="The largest probability.",
)
with_correct = st.toggle("Also show correctly classified texts", key="err_all", persist_state="session")
view = filter_examples(
    table,
    true=true_sel,
    predicted=pred_sel,
    s_range=None if dense else s_range,
    confidence_range=conf_range,
    errors_only=not with_correct,
)
what = "texts" if with_correct else "misclassified texts"
total = n if with_correct else len(wrong)
st.caption(f"{len(view)} of {total} {what} match the filters.")

shown = shown_table(view)
s_cols = layer_columns(view)
config = {
    "text": st.column_config.TextColumn("text (start)", width="large"),  # first: what a reader looks for
    "index": st.column_config.NumberColumn("#", help="Index in the test split"),
    "true": "true",
    "predicted": "predicted",
    "correct": "correct",
    "confidence": st.column_config.ProgressColumn(
        "confidence", format="%.1f%%", min_value=0, max_value=100
    ),
    "p_true": st.column_config.NumberColumn("p(true)", format="%.3f"),
    "loss": st.column_config.NumberColumn("loss", format="%.3f", help="−log p(true class)"),
    "entropy": st.column_config.NumberColumn(
        "entropy", format="%.3f", help="Of the predicted distribution (nats)"
    ),
    "mean_s": st.column_config.NumberColumn(f"mean {sym}", format="%.3f"),
    **{c: st.column_config.NumberColumn(f"{sym} layer {c[1:]}", format="%.3f") for c in s_cols},
    "tokens": st.column_config.NumberColumn("tokens", help="Tokens the model read"),
}
event = st.dataframe(
    shown,
    hide_index=True,
    column_config=config,
    column_order=[c for c in config if c != "correct" or with_correct],
    on_select="rerun",
    selection_mode="single-row",
    key=TABLE_KEY,
)
csv_download(view, f"errors-{name}-test.csv", "err_csv", f"Download these {len(view)} rows (CSV)")

# ----------------------------------------------------------------------------- open one
rows = event.selection.rows if event is not None else []
selected = int(view["index"].iloc[rows[0]]) if rows and rows[0] < len(view) else None
if selected is not None and st.session_state.get("errors_table_last") != selected:
    # a new row was clicked in the table: it becomes the picked text (before the picker is drawn)
    st.session_state[PICK_KEY] = selected
st.session_state["errors_table_last"] = selected

if view.empty:
    st.caption("No text to open: loosen the filters.")
    st.stop()
by_index = view.set_index("index")
options = by_index.index.tolist()
if st.session_state.get(PICK_KEY) not in options:
    st.session_state[PICK_KEY] = options[0]
pick = st.selectbox(
    "Text to read (or select a row in the table)",
    options,
    format_func=lambda i: example_label({"index": i, **by_index.loc[i].to_dict()}),
    key=PICK_KEY,
    persist_state="session",
)
row = by_index.loc[pick]
open_in_explore(dataset, int(pick), row["text"], key="err_open", label="Open in “Explore an input” →")
st.caption(
    f"Test text #{int(pick)} · true **{md_escape(row['true'])}**, predicted "
    f"**{md_escape(row['predicted'])}** ({percent(row['confidence'])}) · loss {row['loss']:.2f}"
    + ("" if dense else f" · mean {sym} {row['mean_s']:.3f}")
    + f" · {int(row['tokens'])} tokens read"
)
st.text(excerpt(row["text"]))  # plain text, never HTML
