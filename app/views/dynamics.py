"""Training dynamics: how budget, head entropy, β(t), accuracy and loss moved epoch by epoch.

Everything here comes from the checkpoint's history.json (no model, no dataset), so the page
works for any checkpoint, including ones whose texts are not on this machine.
"""

from __future__ import annotations

import math

import streamlit as st

from app.charts import dynamics as charts
from app.charts.style import HALF_WIDTH
from app.components import md_escape, show_chart
from app.logic.dynamics import bba_dynamics_story, dynamics_story, history_frame, history_layers, loss_terms
from app.models import checkpoint_history, dataset_of, model_config, model_method, selected_model, train_config

st.title("Training dynamics")

name = selected_model()
method = model_method(name)
requested = method.requested  # a requested budget b (bba): its own story, no band, no β(t)
st.caption(
    "How the model learned to choose its heads for a requested budget b: the heads run, the "
    "spread of its gate scores, accuracy and the task loss, epoch by epoch (from the "
    "checkpoint's training history)."
    if requested
    else "How the model learned to spend its heads: the budget s per layer, the entropy of the "
    "head relevance p, the entropy weight β(t), accuracy and the loss terms, epoch by epoch "
    "(from the checkpoint's training history)."
)
history = checkpoint_history(name)
frame = history_frame(history)
if frame.empty:
    st.info(
        f"The model {md_escape(name)} has no training history (history.json is missing or "
        "empty), so there is nothing to plot."
    )
    st.stop()

mcfg, tcfg = model_config(name), train_config(name)
dense = not method.budgeted
losses = loss_terms(history, frame, tcfg, task_only=not method.predicts_budget)
terms = losses.terms  # they add up to the total
n_heads = None if mcfg is None else mcfg.n_heads
s_min, s_max = tcfg.get("s_min"), tcfg.get("s_max")
band = (
    (s_min, s_max) if isinstance(s_min, (int, float)) and isinstance(s_max, (int, float)) else None
)
epochs = frame["epoch"].tolist()
n_layers = history_layers(frame)

facts = [f"{len(frame)} epochs", f"dataset {md_escape(dataset_of(name))}"]
if requested:
    facts.append(
        f"b drawn per batch in [{tcfg.get('budget_min', 0.1):g}, 1]"
        if not tcfg.get("train_budget")
        else f"trained at b = {tcfg['train_budget']:g}"
    )
if band and method.predicts_budget:
    facts.append(f"target band s ∈ [{band[0]:g}, {band[1]:g}]")
if method.predicts_budget and "beta_start" in tcfg:
    facts.append(
        f"β(t): {md_escape(tcfg.get('beta_schedule', '?'))} from {tcfg['beta_start']:+g} to "
        f"{tcfg.get('beta_end', float('nan')):+g}"
    )
st.caption(" · ".join(facts))

# ----------------------------------------------------------------------------- budget & heads
if dense:
    st.info(
        "This is a **dense** model: every layer ran all of its heads in every epoch, so there "
        "are no budget curves, no head choice and no entropy term (β(t) played no part). "
        "Below are its accuracy and loss; pick a BudgetFormer model in the sidebar to see the "
        "budget move from exploration to exploitation."
    )
elif requested:
    st.markdown(bba_dynamics_story(frame, tcfg, mcfg))
    b1, b2 = st.columns(2, gap="large")
    show_chart(
        b1,
        charts.epoch_lines(
            epochs,
            {"validation (default b)": frame["val_mean_heads_fraction"].tolist()},
            "Share of heads run",
            "heads run",
            y_range=[0, 1.02],
            percent=True,
            reference={f"default b = {method.default_budget:g}": method.default_budget},
            width=HALF_WIDTH,
        ),
        key="chart_dyn_heads",
    )
    show_chart(
        b2,
        charts.epoch_lines(
            epochs,
            {"validation": frame["val_head_entropy"].tolist()},
            "Gate score spread (nats)",  # half a page: the axis says what it is
            "entropy of softmax(z)",
            reference={f"maximum ln {n_heads}": math.log(n_heads)} if n_heads else None,
            y_range=[0, 1.05 * math.log(n_heads)] if n_heads and n_heads > 1 else None,
            width=HALF_WIDTH,
        ),
        key="chart_dyn_gates",
    )
    st.caption(
        "Left: the share of heads run on the validation split, at the model's default b. Right: "
        "how evenly the gates score the heads: the entropy of softmax(z) (at the maximum every head looks alike)."
    )
else:
    st.markdown(dynamics_story(frame, n_heads or 1, *(band or (None, None)), terms))
    if n_layers:
        show_chart(
            st,
            charts.training_budget(
                epochs,
                [frame[f"train_s{i}"].tolist() for i in range(n_layers) if f"train_s{i}" in frame],
                [frame[f"val_s{i}"].tolist() for i in range(n_layers) if f"val_s{i}" in frame],
                *(band or (None, None)),
            ),
            key="chart_dyn_budget",
        )
        st.caption(
            "Solid: mean s on the validation split; dashed: on the training batches. The shaded "
            "band is [s_min, s_max], where the budget loss is zero."
        )
    else:
        st.caption("This history has no per-layer budgets.")
    c1, c2 = st.columns(2, gap="large")
    entropy = {"validation H(p)": frame["val_head_entropy"].tolist()}
    if frame["entropy"].notna().any():
        entropy["training H(p)"] = frame["entropy"].tolist()
    show_chart(
        c1,
        charts.epoch_lines(
            epochs,
            entropy,
            "Head entropy H(p) (nats)",
            "entropy of p",
            reference={f"maximum ln {n_heads}": math.log(n_heads)} if n_heads else None,
            y_range=[0, 1.05 * math.log(n_heads)] if n_heads and n_heads > 1 else None,  # 0 to ln H
            width=HALF_WIDTH,
        ),
        key="chart_dyn_entropy",
    )
    show_chart(
        c2,
        charts.epoch_lines(
            epochs,
            {"β(t)": frame["beta"].tolist()},
            "Entropy weight β(t)",
            "β",
            reference={"0": 0.0},
            width=HALF_WIDTH,
        ),
        key="chart_dyn_beta",
    )

# ----------------------------------------------------------------------------- accuracy & loss
show_chart(
    st,
    charts.epoch_lines(
        epochs,
        {
            "training": frame["train_accuracy"].tolist(),
            "validation": frame["val_accuracy"].tolist(),
        },
        "Accuracy",
        "accuracy",
        percent=True,
    ),
    key="chart_dyn_accuracy",
)
show_chart(st, charts.loss_terms(epochs, terms, frame["loss"].tolist()), key="chart_dyn_loss")
st.caption(
    "Per-epoch means over the training batches, each term weighted as it was added to the loss: "
    + (
        "a dense or bba model trains on the task loss alone."
        if not method.predicts_budget
        else "bars below zero lower the total (λ_e·β(t)·H(p) while β(t) < 0). A term the history does "
        "not hold by itself is drawn as the total minus the others, named after the terms it stands for."
    )
    + " "
    + losses.note
)
with st.expander("The numbers"):
    st.dataframe(frame, hide_index=True)
