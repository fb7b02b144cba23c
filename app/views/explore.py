"""Explore an input: prediction, per-layer budget, the heads that ran, cost, and ablations.

Thin on purpose: widgets are read into an :class:`app.settings.Settings`, the (cached) work is
done by :func:`app.live.explore`, the cards, notes and export by :mod:`app.logic.explore`, links by
:mod:`app.links`, the deeper views (why this budget, one head's attention) by
:mod:`app.views._explore_deeper`, and the figures come from :mod:`app.charts.explore` and
:mod:`app.charts.heads`.
"""

from __future__ import annotations

import json
import logging

import pandas as pd
import streamlit as st

from app.charts.explore import budget_bars, probabilities_bar, selection_diff
from app.charts.heads import head_heatmap, relevance_zmax
from app.charts.style import LIGHT
from app.components import (
    SAMPLE_KEY,
    TEXT_KEY,
    budget_slider,
    foreign_sample,
    loaded_sample,
    md_escape,
    sample_picker,
    show_chart,
)
from app.links import link_caption, link_params, link_state, read_link
from app.live import explore, precomputed_speed
from app.local_copy import copy_name
from app.logic import pairs
from app.logic.explore import (
    DEFAULT_TEXT,
    UNKNOWN_WARN,
    comparison_rows,
    explanation,
    export_record,
    metric_cards,
    offline_report,
    prepare_text,
    probability_rows,
    same_run,
    shown_path,
    starting_sample,
    text_help,
    unknown_share,
    why_s_moves,
)
from app.models import (
    checkpoint_config,
    dataset_of,
    is_classifier,
    model_config,
    model_method,
    ranking_note,
    selected_model,
)
from app.settings import Settings
from app.sources import data_dir
from app.speed import slower_note
from app.state import get_checkpoint, model_sha256, test_samples
from app.views._explore_deeper import one_head_attention, why_this_budget
from app.views._explore_latency import time_on_request
from app.views._explore_pair import fill_boxes, second_text
from budgetformer_core.io.inputs import table_csv
from budgetformer_core.shipped import ROOT

log = logging.getLogger(__name__)

MODEL_SHOWN = "explore_model"  # session-state key: the model the controls were last drawn for
DATASET_SHOWN = "explore_dataset"  # session-state key: the dataset the text box was last filled for
LINK_READ = "explore_link_read"  # session-state key: the page's address was read (first load only)


st.title("Explore an input")

name = selected_model()
mcfg = model_config(name)
if mcfg is None:  # config.json unreadable: loading says why
    try:
        get_checkpoint(name)
        st.error(f"The model {md_escape(name)} has no usable config.json.")
    except ValueError as e:
        st.error(f"The model {md_escape(name)} cannot be loaded: {md_escape(e)}")
    st.stop()
H, max_len = mcfg.n_heads, mcfg.max_len
method = model_method(name)  # each method in its own words: s, f_θ, g_φ, or bba's b and gates
budgeted = method.budgeted
has_f, has_g, sym = method.has_f, method.has_g, method.symbol
dataset = dataset_of(name)
boxes = pairs.pair_boxes(checkpoint_config(name))  # a model that reads pairs: two text boxes
fresh = st.session_state.get(MODEL_SHOWN) != name
if fresh:
    # another model starts from its own behaviour: no override or ablation carried over
    st.session_state.update(budget_mode="learned", no_f=False, no_g=False)
    st.session_state[MODEL_SHOWN] = name
if st.session_state.get(DATASET_SHOWN) != dataset:
    # a session's start or another dataset: the text box starts from a text of this dataset
    st.session_state[DATASET_SHOWN] = dataset
    start = starting_sample(dataset, test_samples(dataset), st.session_state.get(SAMPLE_KEY))
    if start is not None:
        st.session_state[TEXT_KEY], st.session_state[SAMPLE_KEY] = start
link_notes: list[str] = []
if not st.session_state.get(LINK_READ):
    # a link reopens a view: the model and local copy (read by the sidebar's picker), text, budget,
    # ablation and the deeper views
    st.session_state[LINK_READ] = True
    params = st.query_params.to_dict()
    linked_samples = test_samples(dataset) if "index" in params else None
    view, link_notes = read_link(params, method, H, None if linked_samples is None else len(linked_samples.texts),
                                 reads_pairs=boxes is not None)
    if view.index is not None:
        st.session_state[TEXT_KEY] = linked_samples.texts[view.index]
        st.session_state[SAMPLE_KEY] = (dataset, view.index)
    elif view.text is not None:
        st.session_state[TEXT_KEY] = view.text
        st.session_state.pop(SAMPLE_KEY, None)
    if budgeted:
        st.session_state.update(link_state(view, mcfg.n_layers))

# The teaching layout: at 1280×720 the input and the budget control (left) and the prediction,
# the budget and heads per layer and the heatmap (right) are on screen together, without
# scrolling; ablations, comparison, cost details and export follow below.
for note in link_notes:
    st.warning(md_escape(note))
left, right = st.columns([4, 9], gap="medium")
below = st.container()  # drawn under both columns, filled before the analysis runs

# ----------------------------------------------------------------------------- input
st.session_state.setdefault(TEXT_KEY, DEFAULT_TEXT)  # a dataset whose texts are not here
with left:
    fill_boxes(boxes, fresh)
    raw = st.text_area(boxes.first if boxes else "Text to classify", key=TEXT_KEY, height=130,
                       persist_state="session", placeholder="Type or paste any text…", help=text_help(method))
    raw_pair = second_text(boxes)
    samples = test_samples(dataset)
    with st.popover("Pick a test text…", icon=":material/library_books:"):
        sample_picker(samples, dataset)
    sample = loaded_sample(samples, dataset, pairs.box_input(boxes, raw, raw_pair))
    if sample:
        st.caption(
            f"Test text #{sample[0]} of {md_escape(dataset)} · "
            f"true label: **{md_escape(sample[1])}**"
        )

# ----------------------------------------------------------------------------- controls
no_f = no_g = False
head_ablation = "uniform"
seed = 0
with below:
    if method.controls_note:  # no f_θ or g_φ (bba): no toggles named after them
        st.caption(method.controls_note)
    elif budgeted:
        # the two switches sit on the first screen, beside the prediction and the map they change;
        # the choice of heads without g_φ and its seed below
        left.markdown("**Ablations**")
        a1 = left
        a2, a3 = st.columns([3, 2], gap="medium", vertical_alignment="bottom")
        no_f = a1.toggle(
            "No f_θ (fixed budget)",  # under "Ablations", in a column a third of the page wide
            key="no_f",
            disabled=not has_f,
            persist_state="session",
            help="Replace the budget network by a constant s, the same for every input and layer: "
            "the model's mean s on its validation split (as `budgetformer eval --ablation "
            "no-budget-net`).",
        )
        no_g = a1.toggle(
            "No g_φ (heads not scored)",
            key="no_g",
            disabled=not has_g,
            persist_state="session",
            help="Keep the budget but choose which heads run without the head-scoring network.",
        )
        head_ablation = a2.radio(
            "Heads chosen without g_φ",
            ["uniform", "random"],
            format_func=lambda c: "first k heads (no g_φ)" if c == "uniform" else "random heads",
            horizontal=True,
            key="head_ablation",
            disabled=not (has_g and no_g),
            persist_state="session",
            help="no g_φ: always heads 0…k−1 (the `no-head-scorer` ablation); random heads: k "
            "heads drawn at random for this input (`random-heads`), from the seed on the right.",
        )
        random_live = has_g and no_g and head_ablation == "random"
        # no value= here: it starts at its minimum, 0, and a link or the button below sets it
        # through Session State (a widget given both makes Streamlit log a warning)
        seed = a3.number_input("Seed of the random heads", 0, 10**6, step=1, key="head_seed",
                               disabled=not random_live, persist_state="session")
        a3.button(
            "Draw other heads",
            key="head_redraw",
            disabled=not random_live,
            on_click=lambda: st.session_state.update(head_seed=st.session_state.get("head_seed", 0) + 1),
            help="The next seed: k other heads drawn at random.",
        )
settings = Settings()  # a dense model: nothing to set
with left:
    if not budgeted and is_classifier(name):  # its heads not ranked in this session: say what would
        st.info(f"**{md_escape(name)}** {md_escape(ranking_note(name))}.")
    elif not budgeted:
        st.info(
            "This is a **dense** model: every layer runs all of its heads on every input, so there "
            "is no budget to move and nothing to ablate. Pick a BudgetFormer model in the sidebar to "
            "use the slider and the ablations."
        )
    else:
        budget_mode = st.radio(
            f"{method.budget_name} per layer",
            list(method.mode_labels),
            format_func=method.mode_labels.get,
            key="budget_mode",
            horizontal=True,
            disabled=no_f,
            persist_state="session",
        )
        live = not no_f  # a slider is live only in its own mode
        s = budget_slider(
            f"{method.budget_name} (share of heads)",
            "budget_s",
            disabled=not (live and budget_mode == "slider"),
            persist_state="session",
            help=f"Live in the mode “{method.mode_labels['slider']}”.",
        )
        st.session_state.setdefault("force_k", max(1, H // 4))  # its only default: a link sets it too
        k = st.slider(
            f"Heads per layer k (of {H})", 1, max(H, 2), step=1,  # a slider needs two values; k ≤ H anyway
            key="force_k",
            disabled=not (live and budget_mode == "force_k"),
            persist_state="session",
            help="Live in the mode “force k heads”.",
        )
        if live and budget_mode == "learned":
            st.caption(
                f"The sliders are off: the model uses its own {method.description.own_budget_name} "
                "(on the right). Pick another mode to set it."
            )
        settings = Settings(budget_mode=budget_mode, budget=float(s), k=int(k), no_budget_net=bool(no_f and has_f),
                            head_ablation=head_ablation if (no_g and has_g) else None, seed=int(seed))


def write_link() -> None:
    """The address holds this view, so that a link to it reopens it (a long text goes in by index
    only, with the name of the local copy it comes from)."""
    shown = st.session_state.get("attention_on") and st.session_state.get("att_head") is not None
    shared = link_params(
        name, pairs.box_input(boxes, raw, raw_pair), sample[0] if sample else None, settings, method,
        copy=copy_name(data_dir(dataset)) if sample else None,
        why=bool(st.session_state.get("explain_on")),
        attention=(st.session_state.get("att_layer", 0), st.session_state["att_head"]) if shown else None,
    )
    if st.query_params.to_dict() != shared:
        st.query_params.from_dict(shared)


write_link()
with below:
    if method.predicts_budget and not has_f:
        st.caption("This checkpoint has no budget network f_θ: its s is fixed by its config.")
    if method.predicts_budget and not has_g:
        st.caption(
            f"This checkpoint has no head-scoring network g_φ (its head choice is "
            f"{md_escape(mcfg.head_choice)})."
        )

# ----------------------------------------------------------------------------- analysis
with left:
    other = foreign_sample(dataset, pairs.box_input(boxes, raw, raw_pair))
    if other:
        st.warning(
            f"This text is a test text of **{md_escape(other)}**, but the model was trained on "
            f"**{md_escape(dataset)}**: its prediction means little. Pick a text of "
            f"{md_escape(dataset)} above."
        )
prepared = prepare_text(raw, pairs.second_part(boxes, raw_pair))
if pairs.is_empty(prepared.text):
    right.info(pairs.empty_note(boxes))
    st.stop()
if prepared.cut:
    left.warning(
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
a, full = res.current, res.full
# a setting that runs just what the model runs on its own (bba at its default b) changes nothing
changed = not settings.is_full_model and not same_run(full, a)
read, segments = pairs.tokens_and_segments(ckpt, prepared.text)
shown_tokens = pairs.marked(read, segments)  # the second text's tokens marked
unknown = unknown_share(read)
precomputed = precomputed_speed(name, settings.canonical(), sym)
cards = metric_cards(a, None, settings, H, method, precomputed)  # latency: timed at the end
relevance_top = relevance_zmax([a.relevance, full.relevance], H)  # one scale for both runs

# ----------------------------------------------------------------------------- results
with right:
    if unknown > UNKNOWN_WARN:
        st.warning(
            f"{round(unknown * len(read))} of the {len(read)} tokens the model read are unknown to "
            f"its vocabulary ([UNK]): this text is not like the {md_escape(dataset)} texts it "
            "learned from, so its prediction and confidence mean little."
        )
    if sample and sample[1] in ckpt.label_names and sample[1] != a.label:
        st.warning(
            f"Misclassified: test text #{sample[0]} is labelled **{md_escape(sample[1])}**, "
            f"the model says **{md_escape(a.label)}**."
        )
    st.caption(method.key_line)
    if changed and a.label_id != full.label_id:
        st.warning(
            f"The prediction changed: **{md_escape(full.label)}** → **{md_escape(a.label)}** "
            f"({md_escape(settings.describe(sym))}; compared with the full model below)."
        )
    elif changed:
        st.caption(f"This run: **{md_escape(settings.describe(sym))}** — compared with the full model below.")
    elif not settings.is_full_model:
        st.caption(
            f"This setting ({md_escape(settings.describe(sym))}) runs exactly what the model runs on "
            "its own, so there is nothing to compare."
        )
    # widths that fit the longest class name, "0.43 / 0.36" and "3 / 2" at a metric's size
    for col, card in zip(st.columns([13, 10, 7], gap="small"), cards[:3], strict=True):
        card.show(col)
    if budgeted:
        show_chart(
            st,
            head_heatmap(
                a.relevance,
                a.selected_heads,
                method.relevance_title(settings.head_ablation),
                zmax=relevance_top,
                colorbar_title=method.relevance_symbol,
                unrun_values=True,
                cut=method.chosen_by_relevance(settings.head_ablation),
            ),
            key="chart_relevance",
        )
    else:
        show_chart(
            st,
            head_heatmap(
                a.head_weights,
                a.selected_heads,
                method.weight_title,
                colorscale=LIGHT,
                zmax=1.0,
                colorbar_title="w",
            ),
            key="chart_weights",
        )

st.subheader("What the model did" + (f" — {settings.describe(sym)}" if changed else ""))
flops_col, latency_col = st.columns(2)
slots = [flops_col.empty(), latency_col.empty()]  # FLOPs, latency (its "Time it" under it)
for slot, card in zip(slots, cards[3:], strict=True):
    card.show(slot)
slower_slot = st.empty()
if a.truncated or prepared.cut:  # said beside the text itself
    left.caption(f"This text is **truncated to {cfg.max_len} tokens**, all the model reads: the rest plays no part.")
st.caption(f"The model read {a.n_tokens} tokens.")

c1, c2 = st.columns(2, gap="large")
show_chart(c1, probabilities_bar(ckpt.label_names, a.probs), key="chart_probs")
if budgeted:
    show_chart(
        c2,
        budget_bars(a.budget, a.k, H, reference=full.budget if changed else None, symbol=sym),
        key="chart_budget",
    )
    c3, _ = st.columns([3, 2], gap="large")  # wide enough for a number in each head's cell
    show_chart(
        c3,
        head_heatmap(
            a.head_weights,
            a.selected_heads,
            method.weight_title,
            colorscale="Oranges",
            zmax=None if method.is_budgetformer and not method.gated else 1.0,
            colorbar_title="w",
        ),
        key="chart_weights",
    )

# ----------------------------------------------------------------------------- comparison
if changed:
    st.subheader("Compared with the full model on this input")
    if a.label_id == full.label_id:  # a changed prediction is said beside the prediction itself
        st.success(
            f"Same prediction (**{md_escape(a.label)}**); only the confidence moved: "
            f"{max(full.probs):.1%} → {max(a.probs):.1%}."
            if f"{max(full.probs):.1%}" != f"{max(a.probs):.1%}"
            else f"Same prediction (**{md_escape(a.label)}**), same confidence ({max(a.probs):.1%})."
        )
    if settings.no_budget_net:
        st.caption(
            f"No f_θ: s is fixed at {a.budget[0]:.3f}, the model's mean s on its validation split."
        )
    if moves := why_s_moves(full, a, settings):
        st.caption(moves)
    d1, d2 = st.columns([3, 2], gap="large")
    d1.table(pd.DataFrame(comparison_rows(full, a, "this setting", sym)).set_index(""))
    show_chart(
        d2,
        selection_diff(full.selected_heads, a.selected_heads, H), key="chart_diff"
    )

# ----------------------------------------------------------------------------- why this budget, what the heads saw
explained = attention_shown = None  # drawn when their switches are on; the export holds them
if budgeted:
    explained = why_this_budget(name, prepared.text, settings, method, a, H)
    attention_shown = one_head_attention(name, prepared.text, settings, a, cfg.n_layers, H, shown_tokens)

write_link()  # with the head whose attention is drawn, picked above

measured = time_on_request(name, prepared.text, settings, latency_col, slots[1], precomputed)
if why_slower := slower_note(measured, a.n_tokens):
    slower_slot.caption(why_slower)

# ----------------------------------------------------------------------------- export & details
st.subheader("Export")
record = export_record(
    prepared=prepared,
    checkpoint_name=name,
    checkpoint_path=shown_path(ckpt.path, ROOT),
    checkpoint_sha256=model_sha256(name),
    label_names=ckpt.label_names,
    settings=settings,
    control=res.control_repr,
    current=a,
    full=full,
    timing=measured,
    tokens=read,
    segments=segments,
    explanation=explained,
    symbol=sym,
    source={"dataset": dataset, "test_index": sample[0], "true_label": sample[1],
            "local_copy": copy_name(data_dir(dataset))} if sample else None,
    attention=attention_shown,
)
probs_df = pd.DataFrame(probability_rows(ckpt.label_names, a.probs))
e1, e2, e3 = st.columns(3)
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
    table_csv(probs_df),
    file_name=f"probabilities-{name}.csv",
    mime="text/csv",
    on_click="ignore",
    key="export_csv",
)
e3.download_button(  # made when clicked: the why-this-budget pass costs a second or so
    "Offline report (HTML)",
    lambda: offline_report(ckpt, prepared.text, settings, name, sym, measured.to_dict() if measured else None,
                           attention_shown),
    file_name=f"report-{name}.html",
    mime="text/html",
    on_click="ignore",
    key="export_html",
    help="One HTML file that opens without the network: the text, prediction, budget and heads per layer, "
    "the latency and speed-up above, the relevance map, the head's attention shown, why this budget, and the "
    "settings.",
)

st.caption(link_caption(bool(sample), pairs.box_input(boxes, raw, raw_pair), explained is not None, budgeted))

with st.expander(f"What the model read ({a.n_tokens} tokens)"):
    st.text(" ".join(shown_tokens))  # plain text: markup stays text
    if note := pairs.segments_caption(boxes, segments):
        st.caption(note)
with st.expander("What am I looking at?"):
    st.markdown(explanation(method, H))
