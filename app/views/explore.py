"""Explore an input: prediction, per-layer budget, and the heads that ran."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.state import DEFAULT_MODEL, available_models, get_checkpoint
from budgetformer_core.budget import Control
from budgetformer_core.infer import analyze

st.title("Explore an input")
models = available_models()
if not models:
    st.error("No trained checkpoints found under precomputed/checkpoints. Run `make precompute`.")
    st.stop()
name = st.sidebar.selectbox("Model", models, index=models.index(DEFAULT_MODEL) if DEFAULT_MODEL in models else 0)
ckpt = get_checkpoint(name)

text = st.text_area("Text to classify", "Shares in the bank rose after it reported record annual profits.", height=120)
budgeted = ckpt.config.variant != "dense"
override = st.checkbox("Override the predicted budget", disabled=not budgeted)
budget = st.slider("Budget s", 0.05, 1.0, 0.5, 0.05, disabled=not (budgeted and override))

if not text.strip():
    st.info("Type some text to classify.")
    st.stop()
try:
    [a] = analyze(ckpt, [text], Control(budget=budget) if budgeted and override else None)
except ValueError as e:
    st.error(str(e))
    st.stop()

c1, c2, c3 = st.columns(3)
c1.metric("Prediction", a.label, f"{max(a.probs):.1%} confident", delta_color="off")
c2.metric("Heads run per layer", " / ".join(str(k) for k in a.k), f"of {ckpt.config.n_heads}", delta_color="off")
c3.metric("FLOPs vs dense", f"{a.flops / a.dense_flops:.1%}")
if a.truncated:
    st.caption(f"Only the first {a.n_tokens} tokens were read.")

st.subheader("Head relevance p per layer (★ = head ran)")
H = ckpt.config.n_heads
marks = [["★" if h in sel else "" for h in range(H)] for sel in a.selected_heads]
fig = go.Figure(go.Heatmap(z=a.relevance, x=[f"head {h}" for h in range(H)],
                           y=[f"layer {i} (s={s:.2f})" for i, s in enumerate(a.budget)],
                           text=marks, texttemplate="%{text}", colorscale="Blues"))
fig.update_layout(height=120 + 60 * len(a.relevance), margin=dict(l=10, r=10, t=10, b=10))
st.plotly_chart(fig, use_container_width=True)
st.dataframe(pd.DataFrame({"class": ckpt.label_names, "probability": a.probs}), hide_index=True)
