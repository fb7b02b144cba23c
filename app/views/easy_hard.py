"""Easy vs hard: which test texts get a small budget s and which a large one, and why.

The paper's claim is that easy inputs get small budgets and hard or noisy ones larger. This page
checks it on the held-out test split. First the adaptivity figures, with difficulty
judged by another model (the dense model's per-example loss) or, on a synthetic task, by the
heads an input is built to need: k per layer, distinct head sets, ρ(s, dense loss), the heads run
on the hardest third against the easiest. Then the distribution of s, s against the model's
uncertainty (prediction entropy), its error (loss) and the text's length, s by class, and two
texts side by side with their head relevance.
"""

from __future__ import annotations

import streamlit as st

from app.analyses import analysis_or_stop, rows_picker
from app.charts import easy_hard as charts
from app.charts.heads import head_heatmaps, relevance_zmax
from app.charts.style import SCATTER_POINTS
from app.components import md_escape, open_in_explore, per_example_or_stop, show_chart, show_table
from app.live import explore
from app.logic.examples import (
    adaptivity_figures,
    adaptivity_reading,
    class_reading,
    example_label,
    excerpt,
    extremes,
    figure_text,
    fixed_budget_sentence,
    in_terms_of,
    k_by_need,
    k_histogram_frame,
    null_reason,
    per_class_adaptivity,
    preview,
)
from app.models import dataset_of, model_config, model_method, reference_model, selected_model, train_config
from app.settings import Settings
from app.state import needed_heads, per_example
from budgetformer_core.analysis.infer import spearman
from budgetformer_core.shipped import dense_reference

N_EXTREMES = 10
METRICS_PER_ROW = 4  # more to a row cut their labels short at 1280 px


def n_heads_of(model: str) -> int:
    cfg = model_config(model)
    return 1 if cfg is None else cfg.n_heads

st.title("Easy vs hard")
name = selected_model()
dataset = dataset_of(name)
method = model_method(name)
sym = method.symbol  # bba: the requested budget b
st.caption(
    f"Does the model give easy texts a small budget {sym} and hard ones a large one? Here {sym} is "
    "the budget averaged over layers, for every text of the held-out test split."
)
if not method.budgeted:
    st.info(
        "This is a **dense** model: it runs every head of every layer on every input, so its "
        "budget is **s = 1 everywhere** and there is nothing to tell easy from hard inputs by. "
        "Pick a BudgetFormer model in the sidebar to compare budgets."
    )
    st.stop()
analysis = rows_picker(name, "eh_rows")  # None: the test split
if analysis is None:
    table, samples = per_example_or_stop(
        name, dataset, "The **Training dynamics** page still shows how this model's budget moved during training."
    )
else:
    table, samples = analysis_or_stop(name, analysis)
if table is None or len(table) < 2:
    st.info("The test split has too few texts to compare.")
    st.stop()
if fixed := fixed_budget_sentence(table, sym, n_heads_of(name), method.requested):
    st.info(fixed)
    st.stop()

# ----------------------------------------------------------------------------- adaptivity
reference = reference_model(name) if analysis is None else None  # the reference's table is the test split's
reference_table = None
if reference is not None:
    try:
        with st.spinner(f"Running {reference} over the test texts (once)…"):
            reference_table = per_example(reference, "test")
    except ValueError:  # the reference cannot be evaluated: its figures are n/a, with the reason
        reference_table = None
needed = needed_heads(name) if analysis is None else None
figures_reference = (  # the dense model's table when it lists the same inputs, as the figures use it
    reference_table
    if reference_table is not None and reference_table["label"].tolist() == table["label"].tolist()
    else None
)
judge = reference or dense_reference(dataset, name, full=True)  # named even when it is not here
figures = adaptivity_figures(table, n_heads_of(name), reference_table, needed, judge)

st.subheader("Do harder inputs get more heads?")
st.caption(
    f"Difficulty judged by another model: the loss of **{md_escape(judge)}** on "
    f"each of the {figures.n} test inputs (hardest third = its highest losses)"
    + (", and the number of heads each input is built to need." if needed is not None else ".")
)
st.markdown(f"**Reading:** {md_escape(in_terms_of(adaptivity_reading(figures), sym))}")
rho_s, ratio = figures.rho_s_reference_loss, figures.heads_ratio_hard_easy
shown = [
    ("Accuracy", f"{figures.accuracy:.1%}", None, "Test accuracy of this model."),
    (
        "Mean heads fraction",
        f"{figures.mean_heads_fraction:.1%}",
        None,
        "Heads run / heads available, over the test inputs and layers.",
    ),
    (
        f"ρ({sym}, dense loss)",
        figure_text(rho_s, "+.2f"),
        "rho_s_reference_loss",
        f"Spearman ρ of each input's mean {sym} with the dense model's loss on it: > 0 means inputs "
        "another model finds hard get larger budgets.",
    ),
    (
        "Heads run, hard / easy third",
        figure_text(ratio, ".2f") + ("×" if ratio is not None else ""),
        "heads_ratio_hard_easy",
        "Mean heads run per input (over layers) on the third of inputs with the highest dense "
        "loss / on the third with the lowest.",
    ),
]
if needed is not None:
    shown += [
        (
            "ρ(k, needed heads)",
            figure_text(figures.rho_k_needed, "+.2f"),
            "rho_k_needed",
            "Spearman ρ of the heads each input runs (mean over layers) with the heads it needs.",
        ),
        (
            "k ≥ needed in every layer",
            figure_text(figures.frac_k_at_least_needed, ".1%"),
            "frac_k_at_least_needed",
            "Share of inputs that run at least the heads they need in every layer.",
        ),
    ]
reasons = []
cols = [col for _ in range(0, len(shown), METRICS_PER_ROW) for col in st.columns(METRICS_PER_ROW)][: len(shown)]
for col, (label, value, key, help_text) in zip(cols, shown, strict=True):
    if value == "n/a":
        reason = in_terms_of(null_reason(figures.notes, key, "the figure cannot be computed for this model"), sym)
        reasons.append(f"{label} is n/a: {reason}")
        help_text = f"{help_text} n/a: {reason}"
    col.metric(label, value, help=help_text)
for line in reasons:
    st.caption(md_escape(line))


st.markdown(f"**Within each class** (does {sym} follow difficulty, or only the class?)")
by_class = per_class_adaptivity(table, figures_reference, samples.label_names)
st.table(by_class.rename(columns={"mean s": f"mean {sym}", "ρ(s, dense loss)": f"ρ({sym}, dense loss)"})
         .set_index("class").style.format(
    {f"mean {sym}": "{:.3f}", f"ρ({sym}, dense loss)": "{:+.2f}", "heads run, hard / easy third": "{:.2f}×"},
    na_rep="—",
))
if reading := class_reading(by_class["ρ(s, dense loss)"].tolist() if len(by_class) else [], rho_s):
    st.markdown(f"**Within the classes:** {md_escape(in_terms_of(reading, sym))}")
st.caption(
    f"Inside a class the inputs share a topic: a ρ near the overall one ({figure_text(rho_s, '+.2f')}) there "
    f"means {sym} follows how hard an input is; a ρ near 0 inside every class with an overall ρ above 0 means "
    f"{sym} follows the class (hard classes get more heads), not the input. "
    "— : too few inputs, or no dense model to judge difficulty by."
)

hists = k_histogram_frame([layer.k_hist for layer in figures.layers])
s_range = f"{table['mean_s'].min():.3f} – {table['mean_s'].max():.3f}"
per_row = min(len(figures.layers), 4) or 1
for start in range(0, len(figures.layers), per_row):
    shown_layers = range(start, min(start + per_row, len(figures.layers)))
    parts = (hists[hists["layer"] == layer] for layer in shown_layers)
    panels = [(layer, part["k"], part["inputs"]) for layer, part in zip(shown_layers, parts, strict=True)]
    title = "Heads run k per input" if start == 0 else "Heads run k per input (continued)"
    if all(table[f"k{layer}"].nunique() == 1 for layer in shown_layers):  # one bar a layer: a sentence says it
        st.markdown(f"**{title}:** every test input runs the same number of heads — " + ", ".join(
            f"k = {int(table[f'k{layer}'].iloc[0])} of {n_heads_of(name)} in layer {layer}" for layer in shown_layers)
            + f" — though its {sym} varies ({s_range}).")
    else:
        show_chart(st, charts.k_histograms(panels, title), key=f"chart_eh_k_{start}")
    for col, layer in zip(st.columns(per_row), shown_layers):
        stats = figures.layers[layer]
        col.metric(
            f"Layer {layer}: distinct head sets",
            str(stats.distinct_head_sets),
            help="How many different sets of heads ran over the test inputs.",
        )
        col.metric(
            f"Layer {layer}: head-set entropy",
            f"{stats.head_set_entropy_bits:.2f} bits",
            help="Entropy of the distribution of head sets over the inputs: 0 when every input "
            "runs the same heads.",
        )
if needed is not None:
    by_need = k_by_need(table, needed)
    show_chart(
        st,
        charts.k_by_need(
            sorted(by_need["needed"].unique()),
            {
                f"layer {layer}": part.sort_values("needed")["mean_k"].tolist()
                for layer, part in by_need.groupby("layer")
            },
        ),
        key="chart_eh_k_by_need",
    )
st.divider()

tcfg = train_config(name)
band = (tcfg.get("s_min"), tcfg.get("s_max"))
band = band if all(isinstance(v, (int, float)) for v in band) else (None, None)
s = table["mean_s"].to_numpy()
as_density = len(table) > SCATTER_POINTS  # the scatter then draws densities, not points
hover = [] if as_density else [
    example_label({"index": i, "true": t, "predicted": p, "confidence": c})
    for i, t, p, c in zip(table["index"], table["true"], table["predicted"], table["confidence"], strict=True)
]

# ----------------------------------------------------------------------------- numbers
rho_entropy = spearman(s, table["entropy"])
rho_loss = spearman(s, table["loss"])
rho_len = spearman(s, table["tokens"])


def rho_text(rho: float | None) -> str:
    return "—" if rho is None else f"{rho:+.2f}"


c = st.columns(4)
c[0].metric(
    f"Mean {sym} on the test split",
    f"{s.mean():.3f}",
    f"range {s.min():.3f} – {s.max():.3f}",
    delta_color="off",
    delta_arrow="off",
)
c[1].metric(
    f"ρ({sym}, prediction entropy)",
    rho_text(rho_entropy),
    help=f"Rank correlation of the mean budget {sym} with the entropy of the predicted class "
    "distribution: > 0 means less certain texts get more heads.",
)
c[2].metric(
    f"ρ({sym}, loss)",
    rho_text(rho_loss),
    help=f"Rank correlation of the mean budget {sym} with the cross-entropy of the true class: "
    "> 0 means texts the model gets (more) wrong get more heads.",
)
c[3].metric(f"ρ({sym}, length)", rho_text(rho_len), help="Spearman ρ with the length: tokens the model read.")
if rho_entropy is not None and rho_loss is not None:
    verdict = (
        "harder texts (less certain, higher loss) tend to get **larger** budgets, as the "
        "paper reports"
        if rho_entropy > 0.1 and rho_loss > 0.1
        else "harder texts tend to get **smaller** budgets here"
        if rho_entropy < -0.1 and rho_loss < -0.1
        else "the budget is only weakly related to how hard a text is for this model"
    )
    st.caption(f"On this checkpoint, {verdict}.")

# ----------------------------------------------------------------------------- charts
g1, g2 = st.columns(2, gap="large")
show_chart(g1, charts.budget_histogram(s, *band, symbol=sym), key="chart_eh_hist")
show_chart(
    g2,
    charts.budget_by_class(table["true"].tolist(), s, samples.label_names, symbol=sym), key="chart_eh_class"
)
show_chart(
    st,
    charts.budget_scatter(
        [
            ("prediction entropy (nats)", table["entropy"], False),
            ("loss −log p(true), log scale", table["loss"], True),
            ("tokens read", table["tokens"], False),
        ],
        s,
        table["correct"],
        hover,
        f"{sym} vs prediction entropy, loss and length",
        symbol=sym,
    ),
    key="chart_eh_scatter",
)
if as_density:
    st.caption(
        f"{len(table):,} inputs: each group drawn as its density (contour lines of a 30 × 30 histogram per "
        "panel), not as points, which would hide one another. Both groups share one scale: the same "
        "contour levels (of log(1 + inputs per cell)), so the smaller group draws fewer, tighter rings. "
        "The loss axis is log10 of the loss."
    )

# ----------------------------------------------------------------------------- extremes
lowest, highest = extremes(table, N_EXTREMES)
columns = {"index": "#", "mean_s": f"mean {sym}", "true": "true", "predicted": "predicted",
           "confidence": "confidence", "text": "text (start)", "loss": "loss", "tokens": "tokens"}
formats = {"#": "{:d}", f"mean {sym}": "{:.3f}", "confidence": "{:.1%}", "loss": "{:.3f}", "tokens": "{:d}"}
for title, rows in (("Lowest budgets", lowest), ("Highest budgets", highest)):
    st.subheader(title)
    # plain HTML, not st.dataframe: ten fixed rows need no grid, and a grid costs the browser
    # a quarter of a second or more to draw
    show_table(st, rows[list(columns)].assign(text=[preview(t, 110) for t in rows["text"]]).rename(columns=columns),
               formats, key=f"eh_{title.split()[0].lower()}", wide="text (start)")
ends = {
    **{int(i): f"#{int(i)} · lowest {sym} {v:.3f}" for i, v in zip(lowest["index"], lowest["mean_s"], strict=True)},
    **{int(i): f"#{int(i)} · highest {sym} {v:.3f}" for i, v in zip(highest["index"], highest["mean_s"], strict=True)},
}
o1, o2 = st.columns([3, 2], vertical_alignment="bottom")
end = o1.selectbox("Open one of them", list(ends), format_func=ends.get, key="eh_open_pick")
with o2:
    open_in_explore(dataset, end, table.iloc[end]["text"], key="eh_open")

# ----------------------------------------------------------------------------- side by side
st.subheader("Two texts side by side")
if not samples.texts:
    st.info("The texts are not on this machine: give a local copy of the dataset in the sidebar to compare two.")
    st.stop()
n = len(table)
default_a, default_b = int(lowest["index"].iloc[0]), int(highest["index"].iloc[0])
pick = st.columns(2, gap="large")
indices = [
    pick[0].number_input(
        f"Text A: test index (0–{n - 1}); default the lowest budget",
        0,
        n - 1,
        default_a,
        key=f"eh_a_{name}",
    ),
    pick[1].number_input(
        f"Text B: test index (0–{n - 1}); default the highest budget",
        0,
        n - 1,
        default_b,
        key=f"eh_b_{name}",
    ),
]
analyses = {}
for side, index in zip("ab", indices, strict=True):
    try:
        analyses[side] = explore(name, table.iloc[int(index)]["text"], Settings()).full
    except ValueError as e:
        analyses[side] = e
# the two maps share one colour scale, so that the same colour is the same p in both
top = relevance_zmax(
    [a.relevance for a in analyses.values() if not isinstance(a, ValueError)], n_heads_of(name)
)
maps = []  # (relevance, heads that ran, panel title) of each text that could be analysed
for side, col, index in zip("ab", st.columns(2, gap="large"), indices, strict=True):
    row, a = table.iloc[int(index)], analyses[side]
    if isinstance(a, ValueError):
        col.error(f"Text #{int(index)} cannot be analysed: {md_escape(a)}")
        continue
    col.caption(
        f"Test text #{int(index)} · true **{md_escape(row['true'])}**, predicted "
        f"**{md_escape(row['predicted'])}** ({row['confidence']:.1%}) · mean {method.symbol} "
        f"**{row['mean_s']:.3f}** · heads run per layer {' / '.join(str(k) for k in a.k)} · "
        f"{int(row['tokens'])} tokens"
    )
    with col.expander("Text"):
        st.text(excerpt(row["text"]))
    maps.append((a.relevance, a.selected_heads, f"{side.upper()}: #{int(index)}"))
if maps:  # both maps in one figure: one colour bar, one legend, and one chart for the browser to draw
    show_chart(
        st,
        head_heatmaps(
            maps,
            method.description.relevance_name,
            zmax=top,
            colorbar_title=method.relevance_symbol,
            text_size=12,  # half a page wide each: 8 heads' numbers fit only smaller
            cut=method.chosen_by_relevance(),
        ),
        key="chart_eh_heads",
    )
st.caption(
    f"★ = the head ran (the top k by {method.description.ranked_by}); "
    "grey cells = heads that were not computed. Both maps use one colour scale."
)
