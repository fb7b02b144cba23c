"""Easy vs hard: which test texts get a small budget s and which a large one, and why.

The paper's claim is that easy inputs get small budgets and hard or noisy ones larger. This page
checks it on the held-out test split: the distribution of s, s against the model's uncertainty
(prediction entropy), its error (loss) and the text's length, s by class, and two texts side by
side with their head relevance.
"""

from __future__ import annotations

import streamlit as st

from app import charts
from app.analysis import Settings
from app.components import md_escape, per_example_or_stop
from app.examples import example_label, extremes, preview
from app.state import (
    dataset_of,
    explore,
    is_dense,
    selected_model,
    train_config,
)
from budgetformer_core.infer import spearman

N_EXTREMES = 10

st.title("Easy vs hard")
st.caption(
    "Does the model give easy texts a small budget s and hard ones a large one? Here s is the "
    "budget averaged over layers, for every text of the held-out test split."
)

name = selected_model()
dataset = dataset_of(name)
if is_dense(name):
    st.info(
        "This is a **dense** model: it runs every head of every layer on every input, so its "
        "budget is **s = 1 everywhere** and there is nothing to tell easy from hard inputs by. "
        "Pick a BudgetFormer model in the sidebar to compare budgets."
    )
    st.stop()
table, samples = per_example_or_stop(
    name, dataset, "The **Training dynamics** page still shows how this model's budget moved during training."
)
if table is None or len(table) < 2:
    st.info("The test split has too few texts to compare.")
    st.stop()

tcfg = train_config(name)
band = (tcfg.get("s_min"), tcfg.get("s_max"))
band = band if all(isinstance(v, (int, float)) for v in band) else (None, None)
s = table["mean_s"].to_numpy()
hover = [
    example_label(r) for r in table[["index", "true", "predicted", "confidence"]].to_dict("records")
]

# ----------------------------------------------------------------------------- numbers
rho_entropy = spearman(s, table["entropy"])
rho_loss = spearman(s, table["loss"])
rho_len = spearman(s, table["tokens"])


def rho_text(rho: float | None) -> str:
    return "—" if rho is None else f"{rho:+.2f}"


c = st.columns(4)
c[0].metric(
    "Mean s on the test split",
    f"{s.mean():.3f}",
    f"range {s.min():.3f} – {s.max():.3f}",
    delta_color="off",
    delta_arrow="off",
)
c[1].metric(
    "Spearman ρ(s, prediction entropy)",
    rho_text(rho_entropy),
    help="Rank correlation of the mean budget s with the entropy of the predicted class "
    "distribution: > 0 means less certain texts get more heads.",
)
c[2].metric(
    "Spearman ρ(s, loss)",
    rho_text(rho_loss),
    help="Rank correlation of the mean budget s with the cross-entropy of the true class: "
    "> 0 means texts the model gets (more) wrong get more heads.",
)
c[3].metric("Spearman ρ(s, length)", rho_text(rho_len), help="Length = tokens the model read.")
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
g1.plotly_chart(charts.budget_histogram(s, *band), key="chart_eh_hist")
g2.plotly_chart(
    charts.budget_by_class(table["true"].tolist(), s, samples.label_names), key="chart_eh_class"
)
g3, g4, g5 = st.columns(3, gap="medium")
g3.plotly_chart(
    charts.budget_scatter(
        table["entropy"],
        s,
        table["correct"],
        hover,
        "s vs prediction entropy",
        "prediction entropy (nats)",
    ),
    key="chart_eh_entropy",
)
g4.plotly_chart(
    charts.budget_scatter(
        table["loss"],
        s,
        table["correct"],
        hover,
        "s vs loss",
        "loss −log p(true), log scale",
        log_x=True,
    ),
    key="chart_eh_loss",
)
g5.plotly_chart(
    charts.budget_scatter(
        table["tokens"], s, table["correct"], hover, "s vs length", "tokens read"
    ),
    key="chart_eh_length",
)

# ----------------------------------------------------------------------------- extremes
lowest, highest = extremes(table, N_EXTREMES)
columns = ["index", "true", "predicted", "confidence", "loss", "mean_s", "tokens", "text"]
config = {
    "index": st.column_config.NumberColumn("#"),
    "confidence": st.column_config.NumberColumn("confidence", format="percent"),
    "loss": st.column_config.NumberColumn("loss", format="%.3f"),
    "mean_s": st.column_config.NumberColumn("mean s", format="%.3f"),
    "text": st.column_config.TextColumn("text (start)", width="large"),
}
t1, t2 = st.columns(2, gap="large")
for col, title, rows in ((t1, "Lowest budgets", lowest), (t2, "Highest budgets", highest)):
    col.subheader(title)
    col.dataframe(
        rows[columns].assign(text=[preview(t, 100) for t in rows["text"]]),
        hide_index=True,
        column_config=config,
        key=f"eh_table_{title.split()[0].lower()}",
    )

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
for side, col, index in zip("ab", st.columns(2, gap="large"), indices, strict=True):
    row = table.iloc[int(index)]
    try:
        a = explore(name, row["text"], Settings(), measure=False).full
    except ValueError as e:
        col.error(f"Text #{int(index)} cannot be analysed: {md_escape(e)}")
        continue
    col.caption(
        f"Test text #{int(index)} · true **{md_escape(row['true'])}**, predicted "
        f"**{md_escape(row['predicted'])}** ({row['confidence']:.1%}) · mean s "
        f"**{row['mean_s']:.3f}** · heads run per layer {' / '.join(str(k) for k in a.k)} · "
        f"{int(row['tokens'])} tokens"
    )
    col.plotly_chart(
        charts.head_heatmap(a.relevance, a.selected_heads, f"#{int(index)}: head relevance p"),
        key=f"chart_eh_heads_{side}",
    )
    with col.expander("Text"):
        st.text(row["text"][:3000] + ("…" if len(row["text"]) > 3000 else ""))
st.caption("★ = the head ran (top-k by relevance p); the other heads were not computed.")
