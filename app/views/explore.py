"""Explore an input: prediction, per-layer budget, the heads that ran, cost, and ablations.

Thin on purpose: widgets are read into an :class:`app.analysis.Settings`, the (cached) work is
done by :func:`app.state.explore`, and the figures come from :mod:`app.charts`.
"""

from __future__ import annotations

import json
import logging

import pandas as pd
import streamlit as st

from app import charts
from app.analysis import (
    Settings,
    comparison_rows,
    export_record,
    metric_cards,
    prepare_text,
    probability_rows,
    tokens_read,
)
from app.components import TEXT_KEY, loaded_sample, md_escape, sample_picker
from app.state import (
    ROOT,
    dataset_of,
    explore,
    get_checkpoint,
    model_config,
    model_sha256,
    selected_model,
    test_samples,
)

log = logging.getLogger(__name__)

DEFAULT_TEXT = (
    "The striker scored twice in the second half as the champions came from behind to win the "
    "cup final, and the manager praised his players after the match."
)
MODE_LABELS = {
    "learned": "learned by f_θ",
    "slider": "set s with the slider",
    "force_k": "force k heads",
}


def set_budget_mode(mode: str) -> None:
    """Moving a slider switches the budget to that slider (a callback, run before the script)."""
    st.session_state["budget_mode"] = mode


st.title("Explore an input")
st.caption(
    "Type a text or pick one from the test set. See what the model predicts, how much of its "
    "attention each layer spends on it (the budget s), which heads ran, and what that cost next "
    "to the dense model."
)

name = selected_model()
mcfg = model_config(name)
if not isinstance(mcfg.get("n_heads"), int):  # config.json unreadable: loading says why
    try:
        get_checkpoint(name)
        st.error(f"The model {md_escape(name)} has no usable config.json.")
    except ValueError as e:
        st.error(f"The model {md_escape(name)} cannot be loaded: {md_escape(e)}")
    st.stop()
H, max_len = mcfg["n_heads"], mcfg.get("max_len", 512)
budgeted = mcfg.get("variant") != "dense"
is_bba = mcfg.get("variant") == "bba"  # a requested budget b; gates, not f_θ / g_φ
has_f = budgeted and not is_bba and mcfg.get("use_budget_net", True)
has_g = budgeted and not is_bba and mcfg.get("head_choice", "learned") == "learned"
dataset = dataset_of(name)

# ----------------------------------------------------------------------------- input
st.session_state.setdefault(TEXT_KEY, DEFAULT_TEXT)
left, right = st.columns([3, 2], gap="large")
with left:
    raw = st.text_area(
        "Text to classify",
        key=TEXT_KEY,
        height=180,
        persist_state="session",
        placeholder="Type or paste any text…",
    )

# ----------------------------------------------------------------------------- controls
st.subheader("Budget and ablations")
if not budgeted:
    st.info(
        "This is a **dense** model: every layer runs all of its heads on every input, so there is "
        "no budget to move and nothing to ablate. Pick a BudgetFormer model in the sidebar to use "
        "the slider and the ablations."
    )
c_mode, c_slider, c_ablate = st.columns([2, 3, 3], gap="large")
with c_ablate:
    no_f = st.toggle(
        "Ablation: no f_θ (fixed budget)",
        key="no_f",
        disabled=not has_f,
        persist_state="session",
        help="Replace the budget network by a constant s, the same for every input and layer: the "
        "model's mean s on its validation split (as `budgetformer eval --ablation no-budget-net`).",
    )
    no_g = st.toggle(
        "Ablation: no g_φ (no learned head choice)",
        key="no_g",
        disabled=not has_g,
        persist_state="session",
        help="Keep the budget but choose which heads run without the head-scoring network.",
    )
    head_ablation = st.radio(
        "Heads chosen without g_φ",
        ["uniform", "random"],
        format_func=lambda c: "first k heads (no g_φ)" if c == "uniform" else "random heads",
        horizontal=True,
        key="head_ablation",
        disabled=not (has_g and no_g),
        persist_state="session",
        help="no g_φ: always heads 0…k−1 (the `no-head-scorer` ablation); random heads: k heads "
        "drawn at random for this input (`random-heads`).",
    )
with c_mode:
    budget_mode = st.radio(
        "Budget s per layer",
        list(MODE_LABELS),
        format_func=lambda m: "the model's default b" if is_bba and m == "learned" else MODE_LABELS[m],
        key="budget_mode",
        disabled=not budgeted or no_f,
        persist_state="session",
    )
with c_slider:
    s = st.slider(
        "Budget s (share of heads each layer may run)",
        0.05,
        1.0,
        0.5,
        0.05,
        key="budget_s",
        disabled=not budgeted or no_f,
        on_change=set_budget_mode,
        args=("slider",),
        persist_state="session",
    )
    k = st.slider(
        f"Heads per layer k (of {H})",
        1,
        max(H, 2),  # a slider needs two values; k is capped at H anyway
        max(1, H // 4),
        1,
        key="force_k",
        disabled=not budgeted or no_f,
        on_change=set_budget_mode,
        args=("force_k",),
        persist_state="session",
    )
settings = (
    Settings(
        budget_mode=budget_mode,
        budget=float(s),
        k=int(k),
        no_budget_net=bool(no_f and has_f),
        head_ablation=head_ablation if (no_g and has_g) else None,
    )
    if budgeted
    else Settings()
)
if is_bba:
    st.caption(
        f"A budgeted-attention-allocation (bba) model: the slider is the requested budget b; each "
        f"layer runs the ⌊b·H⌋ heads its gates rank highest, nested across budgets (no b requested: "
        f"b = {mcfg.get('default_budget', 0.5):g}). It has no f_θ or g_φ to ablate."
    )
elif budgeted and not has_f:
    st.caption("This checkpoint has no budget network f_θ: its s is fixed by its config.")
if budgeted and not is_bba and not has_g:
    st.caption(
        f"This checkpoint has no head-scoring network g_φ (its head choice is "
        f"{md_escape(mcfg.get('head_choice'))})."
    )

# ----------------------------------------------------------------------------- samples
with right:
    samples = test_samples(dataset)
    sample_picker(samples, dataset)
with left:
    sample = loaded_sample(samples, dataset, raw)
    if sample:
        st.caption(
            f"Test text #{sample[0]} of {md_escape(dataset)} · "
            f"true label: **{md_escape(sample[1])}**"
        )

# ----------------------------------------------------------------------------- analysis
prepared = prepare_text(raw)
if not prepared.text.strip():
    st.info(
        "The text is empty. Type something above, or pick a test text, to see what the "
        "model does with it."
    )
    st.stop()
if prepared.cut:
    st.warning(
        f"This text has {prepared.n_chars:,} characters: only the first {prepared.limit:,} "
        f"were kept (the model reads only its first {max_len} tokens anyway)."
    )
try:
    ckpt = get_checkpoint(name)
except ValueError as e:  # CheckpointError: missing, corrupt or mismatched files
    st.error(f"The model {md_escape(name)} cannot be loaded: {md_escape(e)}")
    st.stop()
cfg = ckpt.config
try:
    res = explore(name, prepared.text, settings.canonical())
except ValueError as e:
    st.error(f"This input cannot be analysed: {md_escape(e)}")
    st.stop()
except Exception as e:  # never a traceback on the page; the server log keeps the details
    log.exception("analysis failed")
    st.error(
        f"Something went wrong while analysing this input ({type(e).__name__}). Try another text."
    )
    st.stop()
a, full, timing = res.current, res.full, res.timing
changed = not settings.is_full_model
if sample and sample[1] in ckpt.label_names and sample[1] != a.label:
    st.warning(
        f"Misclassified: test text #{sample[0]} is labelled **{md_escape(sample[1])}**, "
        f"the model says **{md_escape(a.label)}**."
    )

# ----------------------------------------------------------------------------- results
st.subheader("What the model did" + (f" — {settings.describe()}" if changed else ""))
for col, card in zip(st.columns(5), metric_cards(a, timing, settings, H), strict=True):
    col.metric(
        card.label, card.value, card.note, delta_color="off", delta_arrow="off", help=card.help
    )
notes = [f"The model read {a.n_tokens} tokens"]
if a.truncated or prepared.cut:
    notes.append(f"**truncated**: the text is longer than the {cfg.max_len} tokens the model reads")
st.caption("; ".join(notes) + ".")

c1, c2 = st.columns(2, gap="large")
c1.plotly_chart(charts.probabilities_bar(ckpt.label_names, a.probs), key="chart_probs")
if budgeted:
    c2.plotly_chart(
        charts.budget_bars(a.budget, a.k, H, reference=full.budget if changed else None),
        key="chart_budget",
    )
    st.caption(
        "★ = the head ran (top-k by relevance). Heads without a star were not computed at all."
    )
    c3, c4 = st.columns(2, gap="large")
    c3.plotly_chart(
        charts.head_heatmap(
            a.relevance,
            a.selected_heads,
            (
                "Head relevance p (g_φ)"
                if settings.head_ablation is None
                else f"Head relevance p (g_φ off: {settings.head_ablation} heads)"
            ),
        ),
        key="chart_relevance",
    )
    c4.plotly_chart(
        charts.head_heatmap(
            a.head_weights, a.selected_heads, "Head weight w = s·H·p", colorscale="Oranges"
        ),
        key="chart_weights",
    )
else:
    c2.plotly_chart(
        charts.head_heatmap(
            a.head_weights,
            a.selected_heads,
            "Dense: every head runs, weight 1",
            colorscale=charts.LIGHT,
            zmax=1.0,
        ),
        key="chart_weights",
    )

# ----------------------------------------------------------------------------- comparison
if changed:
    st.subheader("Compared with the full model on this input")
    if a.label_id != full.label_id:
        st.warning(
            f"The prediction changed: **{md_escape(full.label)}** → **{md_escape(a.label)}**."
        )
    else:
        st.success(
            f"Same prediction (**{md_escape(a.label)}**); confidence {max(full.probs):.1%} → "
            f"{max(a.probs):.1%}."
        )
    if settings.no_budget_net:
        st.caption(
            f"No f_θ: s is fixed at {a.budget[0]:.3f}, the model's mean s on its validation split."
        )
    d1, d2 = st.columns([3, 2], gap="large")
    d1.table(pd.DataFrame(comparison_rows(full, a, "this setting")).set_index(""))
    d2.plotly_chart(
        charts.selection_diff(full.selected_heads, a.selected_heads, H), key="chart_diff"
    )

# ----------------------------------------------------------------------------- export & details
st.subheader("Export")
record = export_record(
    prepared=prepared,
    checkpoint_name=name,
    checkpoint_path=str(ckpt.path.relative_to(ROOT))
    if ckpt.path and ckpt.path.is_relative_to(ROOT)
    else str(ckpt.path),
    checkpoint_sha256=model_sha256(name),
    label_names=ckpt.label_names,
    settings=settings,
    control=res.control_repr,
    current=a,
    full=full,
    timing=timing,
)
probs_df = pd.DataFrame(probability_rows(ckpt.label_names, a.probs))
e1, e2 = st.columns(2)
e1.download_button(
    "Export this analysis (JSON)",
    json.dumps(record, indent=1, ensure_ascii=False),
    file_name=f"analysis-{name}.json",
    mime="application/json",
    on_click="ignore",
    key="export_json",
)
e2.download_button(
    "Probabilities (CSV)",
    probs_df.to_csv(index=False),
    file_name=f"probabilities-{name}.csv",
    mime="text/csv",
    on_click="ignore",
    key="export_csv",
)

with st.expander(f"What the model read ({a.n_tokens} tokens)"):
    st.text(" ".join(tokens_read(ckpt, prepared.text)))  # plain text: markup stays text
with st.expander("What am I looking at?"):
    st.markdown(
        f"""
- In every layer, two small networks look at a summary of the input
  (the mean of its token vectors).
- **f_θ** predicts the **budget s** ∈ (0, 1): the share of the layer's {H} heads this input gets;
  the layer runs **k = ⌊s·{H}⌋** heads (at least 1).
- **g_φ** scores the heads: the **relevance p** (sums to 1 per layer).
  The k most relevant heads run (★); the others are not computed at all —
  that is where the FLOPs and time are saved.
- Each head that runs is scaled by its **weight w = s·H·p**.
- **Ablations**: *no f_θ* fixes s (at this input's mean s) instead of predicting it per layer;
  *no g_φ* picks the heads at random or always the first ones instead of by relevance.
- Latency is measured live on this server with one CPU thread, so it varies from run to run;
  on very short texts the bookkeeping of choosing heads can cost more than the heads it saves.
"""
    )
