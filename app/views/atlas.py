"""Head atlas: a whole split's allocation at a glance, and from a selection to its inputs.

Thin on purpose: the per-example table (:func:`app.state.per_example`) says which heads each
input ran; the relevance p is shipped beside it (:func:`app.state.relevance`; at another budget, one
pass of the model over the split); the input map and a head's attention profile come from the engine
(:mod:`budgetformer_core.analysis.atlas`, cached in :mod:`app.live`); the figures from :mod:`app.charts`.
Each tab runs only when open.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.analyses import analysis_or_stop, rows_picker
from app.charts import atlas as charts
from app.components import md_escape, per_example_or_stop, show_chart
from app.links import BUDGET_STEPS, explore_link
from app.live import PROFILE_SAMPLE, attention_profile, input_map
from app.local_copy import copy_name
from app.logic.atlas import default_slices
from app.logic.examples import LISTED, input_listing, selected_rows
from app.models import dataset_of, model_config, model_method, selected_model
from app.settings import Settings
from app.sources import data_dir
from app.state import heads_ran, relevance, relevance_is_shipped, test_samples
from budgetformer_core.analysis.atlas import head_sets, head_usage, ranked, rows_with_heads, slice_rows

SECTIONS = ["Head usage", "Head sets", "Input map", "Head card"]

st.title("Head atlas")
name = selected_model()
mcfg = model_config(name)
if mcfg is None:
    st.error(f"The model {md_escape(name)} has no usable config.json.")
    st.stop()
L, H = mcfg.n_layers, mcfg.n_heads
method = model_method(name)
sym = method.symbol
dataset = dataset_of(name)
if st.query_params.to_dict() != {"model": name}:  # the address reopens this page on this model
    st.query_params.from_dict({"model": name})
st.caption(
    "Where a model's heads go over the whole test split: how often each head runs (for any slice), "
    "which heads run together, every input placed by its allocation, and one head up close."
)

# ----------------------------------------------------------------------------- the split's table
budget = None
analysis = rows_picker(name, "atlas_rows")  # None: the test split; else an analysis folder, at its own budget
has_texts = analysis is None and test_samples(dataset) is not None
if method.requested and analysis is None:  # the split at the b asked for
    b = st.select_slider(
        "Requested budget b",
        BUDGET_STEPS,
        value=min(BUDGET_STEPS, key=lambda v: abs(v - method.default_budget)),
        key="atlas_b",
        disabled=not has_texts,
        help="Every input runs at this b: each layer runs the ⌊b·H⌋ heads its gates rank highest. "
        + ("" if has_texts else "Other budgets than the model's own need the texts (a local copy in the sidebar)."),
    )
    budget = None if abs(b - method.default_budget) < 1e-9 else float(b)
if analysis is None:
    table, samples = per_example_or_stop(
        name, dataset, "The **Training dynamics** page still shows how this model trained.", budget
    )
else:
    table, samples = analysis_or_stop(name, analysis)
if table.empty:
    st.info("The test split is empty.")
    st.stop()
n = len(table)
label_names = samples.label_names
try:
    selected = heads_ran(table[[c for c in table.columns if c.startswith("heads")]], L, H)  # (N, L, H)
except ValueError as e:
    st.error(f"The per-example table of {md_escape(name)} cannot be read: {md_escape(e)}")
    st.stop()
settings = Settings() if budget is None else Settings(budget_mode="slider", budget=budget)
copy = copy_name(data_dir(dataset))  # links name the local copy the texts come from
at_b = f" at b = {budget if budget is not None else method.default_budget:g}" if method.requested else ""
if not method.budgeted:
    st.info("A dense model runs every head on every input: its atlas is all ones. Pick a BudgetFormer or bba model.")


def split_relevance():
    """The (N, L, H) relevance p of the split's inputs at this page's budget (shipped, or one pass
    of the model over the split, with a spinner while it runs); None when it cannot be had here
    (no shipped file and no texts) or does not match the table."""
    if analysis is not None:  # an analysis folder holds no relevance p
        return None
    if relevance_is_shipped(name, budget):
        p = relevance(name, budget)
    elif not has_texts:
        return None
    else:
        with st.spinner(f"Running {name} over the {n} test inputs to read the relevance p of every head "
                        "(once for every visitor; a model on a pretrained encoder takes about a minute)…"):
            p = relevance(name, budget)
    return p if p is not None and p.shape == (n, L, H) else None


def listing(rows: list[int], key: str, extra: dict | None = None) -> None:
    """The inputs at ``rows`` with their accuracy and mean k, each opening in "Explore an input"
    (from the same local copy of the texts)."""
    links = [None if analysis is not None else explore_link(name, int(table["index"].iloc[r]), settings, method, copy)
             for r in rows[:LISTED]]  # an analysis's rows are not the test split's
    shown = input_listing(table, rows, links, extra)
    st.dataframe(
        shown,
        hide_index=True,
        key=key,
        column_config={
            "mean k": st.column_config.NumberColumn(format="%.2f"),
            "mean s": st.column_config.NumberColumn(f"mean {sym}", format="%.3f"),
            "explore": st.column_config.LinkColumn("open", display_text="Explore →",
                                                   help="Opens the input in “Explore an input”"),
        },
    )
    if len(rows) > len(shown):
        st.caption(f"The first {len(shown)} of {len(rows)} inputs are listed.")


usage_tab, sets_tab, map_tab, card_tab = st.tabs(SECTIONS, key="atlas_section", on_change="rerun")

# ----------------------------------------------------------------------------- head usage
if usage_tab.open:
    with usage_tab:
        st.caption(
            f"The share of the {n} test inputs on which each head ran{at_b} (count ÷ inputs), for the "
            "whole split and for two slices; below, slice A minus slice B."
        )

        opening = dict(zip("AB", default_slices(table), strict=True))  # right vs wrong, or two classes

        def slice_controls(tag: str, class_col, outcome_col, range_col) -> tuple[np.ndarray, str]:
            """One slice's widgets (its class and outcome in a row, its ranges folded away): its rows
            and a short description."""
            classes, outcomes = [None, *range(len(label_names))], ["any", "right", "wrong"]
            label = class_col.selectbox(f"Slice {tag}: true class", classes, key=f"atlas_{tag}_class",
                                        index=classes.index(opening[tag].label),
                                        format_func=lambda i: "any class" if i is None else label_names[i])
            outcome = outcome_col.selectbox(f"Slice {tag}: outcome", outcomes, key=f"atlas_{tag}_outcome",
                                            index=outcomes.index(opening[tag].outcome))
            s, tokens = table["mean_s"], table["tokens"]
            budget_range = token_range = None
            if s.max() - s.min() > 1e-6:
                lo, hi = float(np.floor(s.min() * 100) / 100), float(np.ceil(s.max() * 100) / 100)
                budget_range = range_col.slider(f"Slice {tag}: mean {sym}", lo, hi, (lo, hi), 0.01,
                                                key=f"atlas_{tag}_budget")
            if tokens.max() > tokens.min():
                token_range = range_col.slider(f"Slice {tag}: tokens read", int(tokens.min()), int(tokens.max()),
                                               (int(tokens.min()), int(tokens.max())), key=f"atlas_{tag}_tokens")
            rows = slice_rows(table, label, {"any": None, "right": True, "wrong": False}[outcome],
                              budget_range, token_range)
            parts = [label_names[label] if label is not None else "", "" if outcome == "any" else outcome]
            if budget_range is not None and budget_range != (lo, hi):
                parts.append(f"{sym} {budget_range[0]:.2f}–{budget_range[1]:.2f}")
            if token_range is not None and token_range != (int(tokens.min()), int(tokens.max())):
                parts.append(f"{token_range[0]}–{token_range[1]} tokens")
            return rows, ", ".join(p for p in parts if p) or "all inputs"

        columns = st.columns(4)
        with st.expander(f"Slice ranges: mean {sym} and tokens read"):
            ranges = st.columns(2, gap="large")
        rows_a, name_a = slice_controls("A", columns[0], columns[1], ranges[0])
        rows_b, name_b = slice_controls("B", columns[2], columns[3], ranges[1])
        whole, share_a, share_b = head_usage(selected), head_usage(selected[rows_a]), head_usage(selected[rows_b])
        show_chart(
            st,
            charts.usage_heatmaps(
                [(whole, f"whole split ({n})"), (share_a, f"A: {name_a} ({int(rows_a.sum())})"),
                 (share_b, f"B: {name_b} ({int(rows_b.sum())})")],
                f"Share of inputs that ran each head{at_b}",
            ),
            key="atlas_usage",
        )
        for tag, rows in (("A", rows_a), ("B", rows_b)):
            if not rows.any():
                st.warning(f"Slice {tag} holds no input: its map is empty (all 0).")
        show_chart(
            st,
            charts.usage_difference(share_a - share_b, "Slice A − slice B (points of %): red, A ran the head more "
                                    "often", "A − B"),
            key="atlas_usage_diff",
        )
        if ((whole == 0) | (whole == 1)).all():
            st.caption(f"Every input ran the same heads{at_b}: no slice can differ from another, so the "
                       "difference is 0 everywhere.")

# ----------------------------------------------------------------------------- head sets
if sets_tab.open:
    with sets_tab:
        layer = st.selectbox("Layer", range(L), format_func=lambda i: f"layer {i}", key="atlas_sets_layer")
        sets = head_sets(table, layer)
        distinct = table[f"heads{layer}"].nunique()
        st.caption(
            f"Layer {layer} ran {distinct} distinct head set{'s' if distinct != 1 else ''} over the {n} inputs"
            f"{at_b}; the {len(sets)} most frequent below. Select a row to list its inputs."
        )
        event = st.dataframe(
            sets,
            hide_index=True,
            key="atlas_sets",
            on_select="rerun",
            selection_mode="single-row",
            column_config={
                "share": st.column_config.NumberColumn(format="percent"),
                "accuracy": st.column_config.NumberColumn(format="percent"),
                "mean_loss": st.column_config.NumberColumn("mean loss", format="%.3f"),
            },
        )
        picked = event.selection.rows
        if picked and picked[0] < len(sets):
            heads = sets["heads"].iloc[picked[0]]
            rows = np.flatnonzero(rows_with_heads(table, layer, heads)).tolist()
            st.markdown(f"**Inputs that ran heads {md_escape(heads or 'none')} in layer {layer}** ({len(rows)})")
            listing(rows, "atlas_sets_inputs")

# ----------------------------------------------------------------------------- input map
if map_tab.open:
    with map_tab:
        p = split_relevance()
        placed = input_map(name, budget) if p is not None else None
        if placed is None:
            st.info("The input map places inputs by their relevance p, which needs the test texts here "
                    "(give a local copy in the sidebar).")
        else:
            color_by = st.radio("Colour by", ["class", "right or wrong", sym, "k"], horizontal=True,
                                key="atlas_color")
            names = [f"#{i} · {t} → {q}" for i, t, q in zip(table["index"], table["true"], table["predicted"],
                                                           strict=True)]
            k_mean = table[[f"k{i}" for i in range(L)]].to_numpy(dtype=float).mean(1)
            if color_by == "class":
                colour, categories = table["label"].to_numpy(), label_names
            elif color_by == "right or wrong":
                colour, categories = (~table["correct"].to_numpy(dtype=bool)).astype(int), ["right", "wrong"]
            else:
                colour, categories = (table["mean_s"].to_numpy() if color_by == sym else k_mean), None
            ratio = ", ".join(f"{v:.0%}" for v in placed.explained)
            event = st.plotly_chart(
                charts.input_map(placed.xy, colour, f"mean {color_by}" if categories is None else color_by, names,
                                 f"Inputs placed by their relevance p{at_b}", categories),
                key="atlas_map",
                on_select="rerun",
                selection_mode=("box", "lasso"),
                theme=None,
            )
            st.caption(
                f"Each of the {n} inputs is a point: the first two principal components of its relevance p "
                f"over all {L} layers × {H} heads (they explain {ratio} of its variance). Inputs close together "
                "rank the heads alike. Drag a box or a lasso to list the inputs inside."
            )
            rows = selected_rows(event.selection.points)
            if rows:
                picked = table.iloc[rows]
                k_columns = [f"k{i}" for i in range(L)]
                st.markdown(
                    f"**{len(rows)} selected input{'s' if len(rows) != 1 else ''}** · accuracy "
                    f"**{picked['correct'].mean():.1%}** · mean k **{picked[k_columns].to_numpy(float).mean():.2f}** "
                    f"of {H}"
                )
                listing(rows, "atlas_map_inputs")

# ----------------------------------------------------------------------------- head card
if card_tab.open:
    with card_tab:
        c1, c2 = st.columns(2)
        layer = c1.selectbox("Layer", range(L), format_func=lambda i: f"layer {i}", key="atlas_card_layer")
        busiest = int(selected[:, layer].sum(0).argmax())  # first shown: the head the layer runs most
        head = c2.selectbox("Head", range(H), index=busiest, format_func=lambda h: f"head {h}", key="atlas_card_head")
        ran = np.flatnonzero(selected[:, layer, head])
        st.markdown(f"**Layer {layer}, head {head}** ran on **{len(ran)} of {n}** inputs ({len(ran) / n:.1%}){at_b}.")
        p = split_relevance()
        if p is None:
            st.info("Which inputs ranked this head highest, and where it attends, need the test texts "
                    "(give a local copy in the sidebar).")
        else:
            top = ranked(p, layer, head).tolist()
            st.markdown(f"**The inputs that ranked it highest** ({method.description.relevance_origin})")
            listing(top, "atlas_card_top", {"p": [float(p[r, layer, head]) for r in top]})
            if not has_texts:
                st.info("Where this head attends needs the test texts (give a local copy in the sidebar).")
            elif not len(ran):
                st.info(f"Head {head} of layer {layer} ran on no input{at_b}: it has no attention to show.")
            else:
                sample = ran[:PROFILE_SAMPLE].tolist()
                with st.spinner("Running the sample with this head's attention kept…"):
                    profile = attention_profile(name, budget, layer, head, sample)
                show_chart(
                    st,
                    charts.attention_profile_bars(profile.shares, f"Where layer {layer}, head {head} attends"),
                    key="atlas_profile",
                )
                st.caption(
                    f"Averaged over the {profile.queries} tokens of the first {profile.inputs} test inputs on which "
                    "it ran, from the attention the budgeted (structural) path computed: for each token, the share "
                    "of its attention on the first token, on itself, on its neighbours and on punctuation (the "
                    "parts overlap, so they need not add up to 100%)."
                )
