"""What the Errors page computes from its widgets (no Streamlit here): the class filter a click
on a confusion-matrix cell asks for, and the table as the page shows it."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from app.logic.examples import preview

CONFIDENCE_DIGITS = 1
"""Decimals of a confidence in percent, the same in the table, the picker and the captions."""


def percent(p: float) -> str:
    """A confidence as every part of the page writes it: "99.9%"."""
    return f"{p:.{CONFIDENCE_DIGITS}%}"


def clicked_cell(points: Sequence[dict], label_names: Sequence[str]) -> tuple[str, str] | None:
    """(true class, predicted class) of the confusion-matrix cell a click selected (its marker's
    ``customdata`` holds the row and column), or None when nothing is selected."""
    for point in points:
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and len(data) == 2:
            true, predicted = (int(v) for v in data)
            if 0 <= true < len(label_names) and 0 <= predicted < len(label_names):
                return label_names[true], label_names[predicted]
    return None


def shown_table(view: pd.DataFrame) -> pd.DataFrame:
    """The filtered per-example rows as the table shows them: the text first (its start, on one
    line), the confidence in percent (rounded as :func:`percent` rounds it)."""
    shown = view.drop(columns=["text"]).assign(confidence=(view["confidence"] * 100).round(CONFIDENCE_DIGITS))
    return shown.assign(text=[preview(t) for t in view["text"]])
