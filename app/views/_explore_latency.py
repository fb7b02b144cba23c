"""Explore's latency card timed on request: the shipped figures until "Time it" times this input.

Not a page (its name starts with "_"): :mod:`app.views.explore` calls :func:`time_on_request`
after the rest of its page is drawn. Timing an input with its dense reference in interleaved
rounds costs more than the rest of the page, so it never runs on a slider's move.
"""

from __future__ import annotations

import logging

import streamlit as st

from app.live import timing, was_timed
from app.logic.explore import latency_card
from app.settings import Settings

log = logging.getLogger(__name__)


def time_on_request(name: str, text: str, settings: Settings, column, slot, precomputed):
    """The button "Time it" in ``column`` (absent once this input was timed at this setting, whose
    timing is then shown from the cache) and, when timed, the card in ``slot``; the timing or None."""
    timed_before = was_timed(name, text, settings.canonical())
    ask = column.empty()
    asked = not timed_before and ask.button(
        "Time it", key="time_it",
        help="Times this input at this setting and its dense reference in the same interleaved rounds, one "
        "thread, on this server now (a second or so on a long text).",
    )
    if not (timed_before or asked):
        return None
    measured = None
    try:
        with column, st.spinner("Timing this input and its dense reference…"):
            measured = timing(name, text, settings.canonical())
    except Exception:  # never a traceback on the page; the server log keeps the details
        log.exception("timing failed")
    ask.empty()  # timed: nothing more to ask for at this setting
    latency_card(measured, precomputed, failed=measured is None).show(slot)
    return measured
