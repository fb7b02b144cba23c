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

    def show(self, where) -> None:
        """Draw the card with ``where.metric`` (a Streamlit column, container or placeholder); the
        note is grey text under the value, not a change with an arrow."""
        where.metric(self.label, self.value, self.note, delta_color="off", delta_arrow="off", help=self.help)
