"""Budget sweep: accuracy, cost and speed of one model across requested budgets b.

Everything but the live re-measure comes from precomputed/results/sweeps.csv (``make
precompute``): the chosen model at each budget 0.05 … 1, next to dense, the zero-shot post-hoc
sweep and the per-budget specialists (static gates, post-hoc + recovery) of the same dataset.
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from app import speed
from app.charts.sweep import budget_curves, cost_by_length
from app.components import budget_slider, csv_download, md_escape, result_column_config, show_chart, sweeps_or_stop
from app.error_bars import error_bars, error_bars_section
from app.live import reference_checkpoint
from app.logic import results
from app.logic import sweep as words
from app.models import available_models, dataset_of, is_classifier, model_method, selected_model
from app.state import classifier_sweep, get_checkpoint, sweeps, test_samples
from budgetformer_core.measure.bench import length_curve, read_length_sweep
from budgetformer_core.shipped import dense_reference, length_sweep_path

CHARTS = [  # (column, title, y axis, percent)
    ("accuracy", "Accuracy vs budget", "test accuracy", True),
    ("macro_f1", "Macro-F1 vs budget", "macro-F1", False),
    ("latency_ms", "Latency vs budget (batch 1, 1 thread)", "ms per input", False),  # fits half a page
    ("flops_ratio", "FLOPs vs dense, by budget", "FLOPs ratio", True),
]

st.title("Budget sweep")
name = selected_model()
dataset = dataset_of(name)
model = name.removeprefix(f"{dataset}-")
method = model_method(name)
sym = method.symbol  # the budget's name: s, or bba's requested b
if is_classifier(name):
    st.caption(
        "Your classifier run at a requested budget b, one point per number of heads, on the held-out "
        "test split: its heads ranked zero-shot by their importance on the validation split (nested "
        "sets, no training), measured on this machine; the shipped models of the same dataset beside it."
    )
intro = st.empty()  # a model that takes a budget: what its curves are drawn against, once the rows are read


def classifier_rows() -> pd.DataFrame:
    """The listed classifier's own sweep, with the precomputed rows of its dataset when there are some."""
    try:
        own = classifier_sweep(name)
    except ValueError as e:  # CheckpointError: not a classifier, or no texts to rank its heads on
        st.error(f"The classifier {md_escape(name)} cannot be run: {md_escape(e)}")
        st.stop()
    try:
        shipped = sweeps()
    except ValueError:
        shipped = None
    if shipped is None:
        return own
    return pd.concat([shipped[(shipped["dataset"] == dataset) & (shipped["model"] != name)], own], ignore_index=True)


rows = classifier_rows() if is_classifier(name) else sweeps_or_stop(dataset)
config = result_column_config(speed.baseline_of(rows[rows["model"] == model]))

if not method.budgeted:
    others = [m for m in available_models() if dataset_of(m) == dataset and m != name]
    st.info(
        "This is a **dense** model: it always runs every head, so a budget sweep does not apply. "
        + (
            f"Pick one of {', '.join(md_escape(m) for m in others)} in the sidebar. "
            if others
            else ""
        )
        + f"The models of **{md_escape(dataset)}** at their own operating point:"
    )
    table = results.own_rows(rows)
    st.dataframe(table, hide_index=True, column_config=result_column_config(speed.baseline_of(table)),
                 key="sweep_own_table")
    csv_download(table, f"models-{dataset}.csv", "sweep_own_csv")
    st.stop()

# a model fine-tuned from a pretrained encoder meets the dense model, post-hoc sweep and
# specialists of that encoder: its rows, named without the encoder's prefix (minilm-dense → dense)
backbone = "" if is_classifier(name) else results.backbone_of(model)
if backbone:
    rows, model = results.same_backbone(rows, model), model.removeprefix(backbone)
    st.caption(f"Beside it: the models of {md_escape(dataset)} built on the same pretrained encoder "
               f"(names without their `{backbone}` prefix).")
intervals = model in results.INTERVAL_MODELS and not backbone  # per-example tables of from-scratch models


def live_section(curve: pd.DataFrame) -> None:
    """Re-evaluate the model now on a stratified sample of N test texts at a few budgets."""
    st.subheader("Live re-measure on a sample")
    samples = test_samples(dataset)
    if samples is None or not samples.texts:
        st.info(
            f"The texts of the dataset {md_escape(dataset)} are not available on this machine, "
            "so the model cannot be re-run here."
        )
        return
    c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
    n = c1.number_input(
        "N test texts (a stratified sample)", 5, len(samples.texts), min(50, len(samples.texts)), key="sweep_live_n",
        help="Drawn from every class in its share of the test split (seeded: the same texts each time), "
        "not the split's first texts, which are in class order.",
    )
    budgets = ", ".join(f"{b:g}" for b in results.LIVE_BUDGETS)
    key = f"sweep_live_{name}"
    if c2.button(f"Re-measure at {sym} = {budgets}", key="sweep_live_go"):
        try:
            ckpt = get_checkpoint(name)
            bar = st.progress(0.0, text="Evaluating…")
            done = []
            reference = reference_checkpoint(name)
            texts, labels = results.live_sample(samples.texts, samples.labels, n)
            for row in results.live_sweep(ckpt, texts, labels, reference=reference):
                done.append(row)
                bar.progress(len(done) / len(results.LIVE_BUDGETS), text=f"{sym} = {row['budget_b']:g} done")
            st.session_state[key] = pd.DataFrame(done)
        except ValueError as e:  # CheckpointError, an unusable text
            st.error(f"The model {md_escape(name)} cannot be re-run: {md_escape(e)}")
            return
        except Exception as e:  # never a traceback on the page
            logging.getLogger(__name__).exception("live sweep failed")
            st.error(f"Something went wrong while re-running the model ({type(e).__name__}).")
            return
    live = st.session_state.get(key)
    if live is None:
        st.caption("Runs the model on this machine now, on a stratified sample of the test texts (every class "
                   "in its share of the split); the precomputed curve used the whole split.")
        return
    c1, c2 = st.columns(2, gap="large")
    for col, column, title, y_title, live_name in (
        (c1, "accuracy", "Live accuracy vs budget", "accuracy", f"live ({int(live['n'].iloc[0])} texts, stratified)"),
        (c2, "latency_ms", "Live latency vs budget (batch 1, 1 thread)", "ms per input",
         f"live ({int(live['timed'].iloc[0])} texts timed)"),
    ):  # fmt: skip
        lines = {"precomputed (whole split)": results.series_xy(curve, column)} if not curve.empty else {}
        lines[live_name] = results.series_xy(live, column, "budget_b")
        show_chart(
            col,
            budget_curves(title, y_title, lines, percent=column == "accuracy", x_title=f"budget {sym}"),
            key=f"chart_sweep_live_{column}",
        )
    ref = live["reference"].iloc[0]
    st.caption(
        f"Live accuracy and macro-F1: a stratified sample of {int(live['n'].iloc[0])} test texts, every class in "
        "its share of the split; macro-F1 over the classes in the sample. "
        "Live latency: the median single-thread time per input of a few of these texts, one at a "
        "time, at each budget; "
        + (f"speed-up {speed.speedup_label(ref)}: {ref} timed on the same texts in the same rounds."
           if isinstance(ref, str) else f"speed-up {speed.NOT_TIMED}: no dense reference of {md_escape(dataset)} "
           "on this machine.")
    )
    st.dataframe(live, hide_index=True, column_config=config, key="sweep_live_table")
    csv_download(live, f"live-{name}.csv", "sweep_live_csv")


curve = results.sweep_curve(rows, model)
if curve.empty:
    st.info(
        f"precomputed/results/sweeps\\.csv has no budget sweep of **{md_escape(model)}** on "
        f"{md_escape(dataset)}. Run `make precompute` to add it."
    )
    live_section(curve)
    st.stop()
if method.budgeted and not is_classifier(name):
    intro.caption(words.intro(results.budget_series(rows, model, "accuracy"), sym, curve["b"].tolist()))

# ----------------------------------------------------------------------------- at one budget
budget = budget_slider(f"Budget {sym}", "sweep_budget", format="%.2f")
row = results.at_budget(curve, budget)
if abs(row["b"] - budget) > 1e-6:
    st.caption(f"No point at {sym} = {budget:.2f}; showing the nearest one, {sym} = {row['b']:.2f}.")
cards = results.sweep_cards(row, results.own_point(rows, "dense"), sym)
for i in range(0, len(cards), 3):  # three to a row: a card's note names the dense reference in full at 1280 px
    for col, card in zip(st.columns(3), cards[i : i + 3]):
        card.show(col)

# ----------------------------------------------------------------------------- curves
for pair in (CHARTS[:2], CHARTS[2:]):
    for col, (column, title, y_title, percent) in zip(st.columns(2, gap="large"), pair, strict=True):
        show_chart(
            col,
            budget_curves(
                title, y_title, mark=budget, percent=percent, x_title=f"budget {sym}",
                **results.budget_series(rows, model, column),
            ),
            key=f"chart_sweep_{column}",
        )
st.caption(
    "Error bars on accuracy: the 95% interval of each point over its test inputs (normal "
    "approximation, ±1.96·√(acc·(1 − acc) / n)); the paired bootstrap below compares models on the same inputs."
)
baseline = speed.baseline_of(curve)
show_chart(
    st,
    budget_curves(
        results.speedup_title(baseline), speed.speedup_label(baseline).replace(", batch 1", ""), mark=budget,
        legend_columns=2, x_title=f"budget {sym}", **results.speedup_series(curve),
    ),
    key="chart_sweep_speedup",
)
st.caption(
    f"Ideal = 1 / FLOPs ratio. Measured = {baseline or 'the dense reference'}'s latency / this latency, "
    "both timed in the same interleaved rounds on the same test texts, one thread; batch 32 was "
    f"timed at {sym} = 0.25, 0.5, 0.75 and 1 only. A point missing from a line was not timed."
)

# ----------------------------------------------------------------------------- every method, one chart
st.subheader("Every method against its cost")
cost = st.radio("Cost axis", list(results.COST_AXES), format_func=results.COST_AXES.get, horizontal=True,
                key="sweep_cost_axis")
bars = error_bars(dataset, results.sweep_pairs(model)) if intervals else None
scratch = dense_reference(dataset, "dense", full=True)  # the rows timed against the dense model trained from scratch
drawn = {}
for col, (column, title, y_title, percent) in zip(st.columns(2, gap="large"), (
    ("accuracy", "Accuracy vs cost, every method", "test accuracy", True),
    ("latency_ms", "Latency vs cost, every method (batch 1)", "ms per input (1 thread)", False),
), strict=True):  # fmt: skip
    dense = results.own_point(rows, "dense")
    level = ({"dense level": dense[column]} if dense is not None and pd.notna(dense[column]) else None) \
        if column == "accuracy" else results.dense_level(rows[rows["reference"] == scratch]) or None
    series = results.method_series(rows, column, cost, bars.intervals if bars else None)
    drawn = {key: {**drawn.get(key, {}), **series[key]} for key in series}
    show_chart(
        col,
        budget_curves(title, y_title, percent=percent, x_title=results.COST_AXES[cost], reference=level, **series),
        key=f"chart_sweep_methods_{column}",
    )  # fmt: skip
st.caption(words.methods_caption(drawn))
if intervals:
    with st.expander(f"Accuracy differences of {model} at its own point, with error bars", expanded=True):
        error_bars_section(dataset, results.sweep_pairs(model), "sweep")

# ----------------------------------------------------------------------------- cost vs input length
st.subheader("Cost vs input length")
try:
    sweep = read_length_sweep(length_sweep_path(name))
except FileNotFoundError:
    sweep = None
    st.caption(
        f"No length sweep is saved for {md_escape(name)}; `budgetformer bench --checkpoint "
        f"precomputed/checkpoints/{md_escape(name)} --seq-lens 16,32,64,128 --json > "
        f"benchmarks/{md_escape(name)}-lengths.json` measures one on this machine."
    )
except ValueError as e:
    sweep = None
    st.warning(md_escape(e))
if sweep is not None:
    by_length = pd.DataFrame(length_curve(sweep, budget))
    b_saved = by_length["budget"].iloc[0]
    show_chart(
        st,
        cost_by_length(by_length["tokens"], by_length["dense_ms"], by_length["budgeted_ms"],
                              by_length["ideal_ms"], f"{sym} = {b_saved}"),
        key="chart_sweep_length",
    )
    pays, machine = sweep["crossover"].get(b_saved), sweep["results"][0]["machine"]
    st.caption(
        f"Random inputs of each length, {sym} = {b_saved} (the saved budget nearest the slider), against the "
        "same model with all its heads (its dense path, not the dense checkpoint), "
        f"`budgetformer bench --seq-lens` on {md_escape(machine['cpu_model'])}, one thread "
        f"({sweep['results'][0].get('clock', 'wall')} clock), load "
        f"average {machine['load_average'][0] if machine['load_average'] else '?'}. Choosing heads "
        "costs a few dozen tiny operations per layer whatever the length, while the heads skipped "
        "save work that grows with it: "
        + (f"the saving vs all heads pays from **{pays} tokens** here." if pays
           else "here it does not pay at any length measured.")
    )

# ----------------------------------------------------------------------------- table
st.subheader("Per-budget comparison")
table = results.comparison_table(rows, model).assign(model=lambda t: backbone + t["model"])
st.dataframe(table, hide_index=True, column_config=config, key="sweep_table")
csv_download(table, f"budget-comparison-{dataset}.csv", "sweep_csv")

live_section(curve)
