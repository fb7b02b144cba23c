"""Ablations: the picked model against itself without f_θ or g_φ, and its encoder's dense and BBA.

The picked model first, then its ablations (the models trained without f_θ or g_φ where they
are shipped, else the same ablations run live on it, on request), then the dense and BBA models
of the same encoder, each at its own operating point (precomputed/results/sweeps.csv); then the
test inputs on which their predictions differ, from the precomputed per-example tables.
"""

from __future__ import annotations

import streamlit as st

from app import speed
from app.charts.sweep import model_bars
from app.components import (
    csv_download,
    md_escape,
    open_in_explore,
    result_column_config,
    show_chart,
    sweeps_or_stop,
)
from app.error_bars import error_bars_section
from app.live import ablation as live_ablation
from app.logic import ablations, examples, results
from app.models import checkpoint_config, dataset_of, model_method, selected_model
from app.state import precomputed_per_example, test_samples


def chart_specs(baseline: str | None) -> list:
    """The charts: (title, y axis, {series name: column}, number format, percent), each latency
    and speed-up named after the dense reference ``baseline`` they were timed against."""
    ref = baseline or "the dense reference"
    return [
        ("Accuracy and macro-F1", "score", {"accuracy": "accuracy", "macro-F1": "macro_f1"}, ".3f", False),
        ("Heads run and FLOPs vs dense", "fraction of dense",
         {"heads run": "heads_fraction", "FLOPs": "flops_ratio"}, ".0%", True),
        ("Latency per input, batch 1", "ms",  # the legend names the reference: a title that fits
         {"latency": "latency_ms", f"{ref} (same rounds)": "dense_latency_ms"}, ".2f", False),
        ("Speed-up over dense",  # a half-page chart: its axis names the reference, its legend the batch
         speed.speedup_label(baseline).split(" (")[0],
         {"batch 1": "speedup_b1", "batch 32": "speedup_b32", "ideal (1 / FLOPs ratio)": "ideal_speedup"}, ".2f",
         False),
    ]  # fmt: skip


# session-state key: model → the number of test texts its live ablations last ran on (shown again,
# from the cache, whenever the page is back on that model)
LIVE_RUNS = "ablation_live_runs"

st.title("Ablations")
name = selected_model()
dataset = dataset_of(name)
method = model_method(name)
family = ablations.family(name, dataset, method.kind, method.has_f, method.has_g)
st.caption(
    f"What each part of **{md_escape(name)}** buys: the model itself, the model with its budget network "
    "f_θ replaced by a fixed s, the model with its head scorer g_φ replaced by the first k heads (or k random "
    "ones), and the dense and BBA models of the same encoder, each at its own operating point on the held-out "
    "test split. "
    "Every row names the checkpoint it ran."
    if not family.note else md_escape(family.note)
)
rows = sweeps_or_stop(dataset)
picked_test = checkpoint_config(name).get("test")
table, missing = ablations.family_table(rows, family, picked_test=picked_test)
live = ablations.to_run_live(family, table)
samples = test_samples(dataset) if live else None
if table.empty and samples is None:
    st.info(
        f"precomputed/results/sweeps\\.csv has none of these models for **{md_escape(dataset)}**. "
        "Run `make precompute` to add them."
    )
    st.stop()
slot = st.empty()  # the table: its shipped rows at once, the rows run live once they have run
names = ", ".join(ablations.LIVE[a].split(",")[0] for a in live)
if live and samples is None:
    st.caption(f"Not shipped as models of their own: {names}. Running them on {md_escape(name)} needs "
               f"the {md_escape(dataset)} test texts, which are not on this machine.")
elif live:  # on request: over BBC's test split they take a minute on a MiniLM model
    n_all = len(samples.texts)
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    n = int(c1.number_input(
        "N test texts (a stratified sample)", min(5, n_all), n_all, n_all, key="ablation_live_n",
        help="Every class in its share of the test split (seeded: the same texts each time); all of them "
        "for rows comparable with the shipped ones.",
    ))
    runs = st.session_state.setdefault(LIVE_RUNS, {})  # model → the N its live ablations last ran on
    label = ablations.run_label(n, ablations.live_seconds(rows, family, n, len(live)))
    if c2.button(label, key="ablation_live_go", help=f"Runs {names} on {md_escape(name)} now; not timed."):
        runs[name] = n
    if name in runs:
        slot.dataframe(table, hide_index=True, column_config=result_column_config(speed.baseline_of(table)))
        done = {}
        for a in live:
            try:
                with st.spinner(f"Running {ablations.LIVE[a].split(',')[0]} on {name} over {runs[name]} test inputs…"):
                    done[a] = live_ablation(name, a, runs[name])
            except ValueError as e:
                st.warning(f"{md_escape(ablations.LIVE[a])} cannot run on {md_escape(name)}: {md_escape(e)}")
        done = {a: summary for a, summary in done.items() if summary is not None}
        table, missing = ablations.family_table(rows, family, done, picked_test)
        sample = "all" if runs[name] == n_all else f"a stratified sample of {runs[name]} of the"
        st.caption(f"Rows run live: on {sample} {n_all} test texts; not timed, so their latency and speed-up are "
                   "left empty.")
    else:
        st.caption(f"Not shipped as models of their own: {names}; they run on {md_escape(name)} on request.")

baseline = speed.baseline_of(table)
slot.dataframe(table, hide_index=True, column_config=result_column_config(baseline), key="ablation_table")
csv_download(table, f"ablations-{name}.csv", "ablation_csv")
if missing:
    st.caption(f"Not in sweeps\\.csv for {md_escape(dataset)}: {', '.join(md_escape(m) for m in missing)}.")

models = table["model"].tolist()
keys = ablations.interval_keys(family, models)  # each row's name in sweeps.csv (None: run live)
chart_area = st.container()  # drawn above the intervals, once they are known
# ----------------------------------------------------------------------------- error bars
st.subheader("Are the differences beyond noise?")
shipped_keys = tuple(m.key for m in family.shipped)
bars = error_bars_section(dataset, family.pairs(), "ablation", family.names, shipped_keys)
errors = {"accuracy": results.accuracy_error_bars(bars.intervals, keys)} if bars and bars.intervals else None
BARS = chart_specs(baseline)
for pair in (BARS[:2], BARS[2:]):
    for col, (title, y_title, series, fmt, percent) in zip(chart_area.columns(2, gap="large"), pair, strict=True):
        values = {label: table[column].tolist() for label, column in series.items()}
        show_chart(
            col,
            model_bars(models, values, title, y_title, fmt, percent, errors=errors),
            key=f"chart_ablation_{title}",
        )
if errors:
    chart_area.caption("Error bars on accuracy: 95% bootstrap intervals over the test inputs (none where a model "
               "has no per-example table).")

# ----------------------------------------------------------------------------- disagreements
st.subheader("Inputs on which they disagree")
tables, notes = {}, []
for model in shipped_keys:
    try:
        found = precomputed_per_example(dataset, model)
    except ValueError as e:
        notes.append(f"{md_escape(model)} (unreadable: {md_escape(e)})")
        continue
    if found is None:
        notes.append(md_escape(model))
    else:
        tables[model] = found
if notes:
    st.caption(f"No per-example results for: {', '.join(notes)}; left out.")
if len(tables) < 2:
    st.info(
        "Comparing predictions needs the per-example results of at least two of these models "
        f"(precomputed/results/per\\_example/{md_escape(dataset)}-<model>.parquet). Run `make precompute`."
    )
    st.stop()

label_names = next(
    (names for m in tables if (names := checkpoint_config(f"{dataset}-{m}").get("label_names"))), []
)
samples = test_samples(dataset)
differ, n = examples.disagreements(
    tables, label_names, *((samples.texts, samples.labels) if samples is not None else (None, None))
)
st.caption(
    f"{len(differ)} of the {n} test inputs get different predictions from "
    f"{', '.join(md_escape(m) for m in tables)}."
    + ("" if "text" in differ else " (No texts: they are not on this machine, or not the texts of these results.)")
)
shown = differ.assign(text=[examples.preview(t) for t in differ["text"]]) if "text" in differ else differ
st.dataframe(
    shown,
    hide_index=True,
    column_config={
        "index": st.column_config.NumberColumn("#", help="Index in the test split"),
        "right": st.column_config.TextColumn("models right"),
        "text": st.column_config.TextColumn("text (start)", width="large"),
    },
    key="ablation_differ",
)
csv_download(differ, f"disagreements-{dataset}.csv", "ablation_differ_csv")
if "text" in differ and not differ.empty:
    by_index = differ.set_index("index")
    pick = st.selectbox(
        "Read one of them",
        by_index.index.tolist(),
        format_func=lambda i: f"#{i} · true {by_index.loc[i, 'true']}",
        key="ablation_pick",
    )
    open_in_explore(dataset, int(pick), by_index.loc[pick, "text"], key="ablation_open")
    st.text(examples.excerpt(by_index.loc[pick, "text"]))  # plain text, never HTML
