"""The headline numbers the pages show with ``st.metric``, as data (no Streamlit here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """One headline number of the page (shown with ``st.metric``)."""

    label: str
    value: str
    note: str | None = None
    help: str | None = None
