"""Side by side: two models (or one model at two budgets) on one text, or one model on two texts.

Each side is :func:`app.live.explore` of its model, text and budget setting (the Explore page's
cached analysis); the relevance maps share one colour scale and the differences are listed. For a
model that reads pairs of texts each text is a pair, typed in two boxes as on Explore
(:mod:`app.views._explore_pair`).
"""

from __future__ import annotations

import logging
import random

import streamlit as st

from app.charts.heads import head_heatmap, relevance_zmax
from app.charts.style import LIGHT
from app.components import TEXT_KEY, budget_slider, md_escape, show_chart
from app.live import explore
from app.logic import pairs
from app.logic.compare import empty_side_note, scale_note, side_cards, side_differences
from app.logic.explore import prepare_text
from app.models import available_models, checkpoint_config, dataset_of, model_config, model_method, selected_model
from app.settings import Settings
from app.state import test_samples
from app.views._explore_pair import fill_boxes, second_text
from budgetformer_core.shipped import dense_reference

log = logging.getLogger(__name__)
DEFAULT_TEXT = (
    "The striker scored twice in the second half as the champions came from behind to win the "
    "cup final, and the manager praised his players after the match."
)
SIDES = ("A", "B")

st.title("Side by side")
name = selected_model()
dataset = dataset_of(name)
models = [m for m in available_models() if dataset_of(m) == dataset] or [name]
boxes = pairs.pair_boxes(checkpoint_config(name))  # a model that reads pairs: two boxes per text
mode = st.radio(
    "Compare",
    ["models", "texts"],
    format_func={"models": "two models (or two budgets) on one text", "texts": "one model on two texts"}.get,
    horizontal=True,
    key="sbs_mode",
)


def budget_controls(where, model: str, key: str) -> Settings:
    """The model's own budget or one set with a slider (nothing for a dense model)."""
    method = model_method(model)
    if not method.budgeted:
        where.caption("A dense model: every head runs, nothing to set.")
        return Settings()
    how = where.radio(
        method.budget_name,
        ["learned", "slider"],
        format_func=method.mode_labels.get,
        horizontal=True,
        key=f"{key}_how",
    )
    value = budget_slider(method.budget_name, f"{key}_budget", where, disabled=how != "slider")
    return Settings(budget_mode=how, budget=float(value))


def draw_random(key: str) -> None:
    samples = test_samples(dataset)
    if samples is not None and samples.texts:
        st.session_state[key] = random.choice(samples.texts)  # a pair: split into both boxes by fill_boxes


def text_boxes(key: str, whose: str, start: tuple, placeholder: str | None = None) -> tuple[str, str | None]:
    """The text box ``key`` ("Text ``whose``") and, for a model that reads pairs, its second box
    (``key`` + ``_pair``): the first text and the second (:func:`app.logic.pairs.second_part`:
    None for a single text). Boxes new on the page start from ``start`` (the first text, and the
    second or None); a pair put in the first box goes into both, and a model that reads pairs
    starts from the default pair where no second text was given
    (:func:`app.views._explore_pair.fill_boxes`)."""
    pair_key = f"{key}_pair"
    if key not in st.session_state:
        st.session_state[key] = start[0]
        if start[1] is None:
            st.session_state.pop(pair_key, None)
        else:
            st.session_state[pair_key] = start[1]
    fill_boxes(boxes, pair_key not in st.session_state, keys=(key, pair_key))
    label = f"Text {whose}" if boxes is None else f"{boxes.first} · {whose}"
    first = st.text_area(label, key=key, height=100, placeholder=placeholder)
    return first, pairs.second_part(boxes, second_text(boxes, pair_key))


if mode == "models":
    explored = st.session_state.get(pairs.PAIR_KEY)  # Explore's text, and a pair's second text
    start = (st.session_state.get(TEXT_KEY) or DEFAULT_TEXT, explored if isinstance(explored, str) else None)
    text = text_boxes("sbs_text", "for both sides", start)
    columns = st.columns(2, gap="large")
    dense = dense_reference(dataset, name, full=True)  # the dense model of the same encoder
    other = dense if name != dense else dense.removesuffix("dense") + "budgetformer"
    defaults = (name, other if other in models else name)
    sides = []
    for col, side, default in zip(columns, SIDES, defaults, strict=True):
        st.session_state.setdefault(f"sbs_model_{side}", default)
        if st.session_state[f"sbs_model_{side}"] not in models:  # another dataset picked in the sidebar
            st.session_state[f"sbs_model_{side}"] = default
        model = col.selectbox(f"Model {side}", models, key=f"sbs_model_{side}")
        sides.append((model, text, budget_controls(col, model, f"sbs_{side}")))
else:
    settings = budget_controls(st, name, "sbs_one")
    columns = st.columns(2, gap="large")
    sides = []
    for col, side in zip(columns, SIDES, strict=True):
        key = f"sbs_text_{side}"
        with col:  # B starts empty, both of a pair's boxes too
            text = text_boxes(key, side, (DEFAULT_TEXT, None) if side == "A" else ("", ""),
                              placeholder="Type a text, or draw one from the test split")
        col.button(f"Random test text for {side}", key=f"sbs_draw_{side}", on_click=draw_random, args=(key,),
                   disabled=test_samples(dataset) is None)
        sides.append((name, text, settings))

results = []
for col, side, (model, text, settings) in zip(columns, SIDES, sides, strict=True):
    prepared = prepare_text(*text)
    if pairs.is_empty(prepared.text):
        col.info(empty_side_note(side, boxes is not None and boxes.required))
        results.append(None)
        continue
    try:
        results.append(explore(model, prepared.text, settings.canonical()).current)
    except ValueError as e:
        col.error(f"{md_escape(model)} cannot analyse text {side}: {md_escape(e)}")
        results.append(None)
    except Exception as e:  # never a traceback on the page
        log.exception("side-by-side analysis failed")
        col.error(f"Something went wrong while analysing text {side} ({type(e).__name__}).")
        results.append(None)
if None in results:
    st.stop()

methods = [model_method(model) for model, _, _ in sides]
n_heads = [model_config(model).n_heads for model, _, _ in sides]  # each loaded: its config.json reads
# one colour scale for both relevance maps (p, or bba's softmax of its gate scores z)
zmax = relevance_zmax([a.relevance for a, m in zip(results, methods) if m.budgeted], max(n_heads))
for col, side, (model, _, settings), a, method, H in zip(columns, SIDES, sides, results, methods, n_heads):
    col.markdown(f"**{side}: {md_escape(model)}** · {md_escape(settings.describe(method.symbol))}")
    cards = side_cards(a, settings, H, method, side)
    for i in range(0, len(cards), 2):  # two to a row: half a page holds "0.43 / 0.36" at a metric's size
        for c, card in zip(col.columns(2), cards[i : i + 2]):
            card.show(c)
    # half a page at 1280 px leaves a head's cell ~20 px: ★ and "—" alone, the values on hover
    if not method.budgeted:
        fig = head_heatmap(a.head_weights, a.selected_heads, f"{side}: {method.weight_title}",
                                  colorscale=LIGHT, zmax=1.0, colorbar_title="w", text_size=13,
                                  cell_values=False)
    else:
        fig = head_heatmap(a.relevance, a.selected_heads, f"{side}: {method.relevance_title()}", zmax=zmax,
                                  colorbar_title=method.relevance_symbol, unrun_values=True, text_size=13,
                                  cell_values=False, cut=method.chosen_by_relevance())
    show_chart(col, fig, key=f"chart_sbs_{side}")

st.subheader("What differs")
lines = side_differences(results[0], results[1], methods[0], methods[1])
st.markdown("\n".join(f"- {md_escape(line)}" for line in lines))
st.caption(scale_note((methods[0], methods[1]), zmax))
