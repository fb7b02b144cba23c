"""The Errors page's helpers: the class filter a confusion-matrix click asks for, the table's
column order and the one rounding of a confidence."""

from __future__ import annotations

import pandas as pd

from app.charts.errors import confusion_heatmap
from app.logic.errors import clicked_cell, percent, shown_table
from app.logic.examples import example_label


def test_a_click_on_a_cell_names_its_true_and_predicted_class():
    names = ["business", "sport", "tech"]
    figure = confusion_heatmap([[5, 1, 0], [0, 7, 2], [1, 0, 4]], names)
    cells = figure.data[1]  # the markers a click selects, one per cell
    assert len(cells.x) == 9 and list(cells.customdata[5]) == [1, 2]  # row 1 (sport), column 2 (tech)
    assert (cells.y[5], cells.x[5], cells.text[5]) == ("sport", "tech", "2")
    assert clicked_cell([{"x": "tech", "y": "sport", "customdata": [1, 2]}], names) == ("sport", "tech")
    assert clicked_cell([], names) is None
    assert clicked_cell([{"customdata": [7, 0]}], names) is None  # not a cell of this matrix


def test_the_table_starts_with_the_text_and_rounds_a_confidence_one_way():
    view = pd.DataFrame({"index": [3], "true": ["sport"], "predicted": ["tech"], "confidence": [0.99871],
                         "text": ["A  long\ntext"]})
    shown = shown_table(view)
    assert shown["confidence"].tolist() == [99.9] and shown["text"].tolist() == ["A long text"]
    assert percent(0.99871) == "99.9%"
    assert example_label(view.iloc[0]) == "#3 · sport → tech (99.9%)"
