"""The boxes of a model that reads pairs of texts: both filled before they are drawn (a test pair
loaded, or the first pair of a session on the model), and the second box.

Not a page (its name starts with "_"): :mod:`app.views.explore` calls it around its text box, and
:mod:`app.views.compare` around each of its own (``keys``: the session-state keys of a first and a
second box; Explore's by default). The labels and the input the boxes make come from
:mod:`app.logic.pairs`.
"""

from __future__ import annotations

import streamlit as st

from app.components import TEXT_KEY
from app.logic.pairs import DEFAULT_PAIR, PAIR_KEY, PairBoxes, split_pair


def fill_boxes(boxes: PairBoxes | None, fresh: bool, keys: tuple[str, str] = (TEXT_KEY, PAIR_KEY)) -> None:
    """Before the boxes are drawn: a pair put in the first box (a test sample) goes into both, and
    a model that reads pairs only starts from :data:`~app.logic.pairs.DEFAULT_PAIR` when it is
    ``fresh`` (first shown) with its second box empty. ``keys``: the first and the second box's."""
    first, second = keys
    pair = split_pair(st.session_state.get(first))
    if pair is None and boxes is not None and boxes.required and fresh and not st.session_state.get(second):
        pair = DEFAULT_PAIR
    if pair is not None:
        st.session_state[first], st.session_state[second] = pair


def second_text(boxes: PairBoxes | None, key: str = PAIR_KEY) -> str | None:
    """The second box (session-state ``key``), labelled with the model's second column, and what it
    holds; None (no box) for a model of single texts."""
    if boxes is None:
        return None
    return st.text_area(boxes.second, key=key, height=90, persist_state="session",
                        placeholder="Type the second text…" if boxes.required else "Optional",
                        help="The model reads the two texts together, as one input: the second text's tokens "
                             "get their own segment.")
