"""README's results table and the app's sidebar tell the same figures about the model the app opens on.

The sidebar's card (:func:`app.components.model_card`) is read from a real run of the app
(AppTest, on the light "Training dynamics" page); README's first row, written by
``scripts/results_page.py``, must name the same model with the same test accuracy and share of
heads run, at the sidebar's precision.
"""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from app.models import DEFAULT_MODEL, available_models

from .apptest import MAIN, ROOT, TIMEOUT, run

pytestmark = pytest.mark.skipif(DEFAULT_MODEL not in available_models(), reason=f"{DEFAULT_MODEL} is not shipped")


def readme_row(model: str) -> dict[str, str]:
    table = (ROOT / "README.md").read_text(encoding="utf-8").split("<!-- The table is written by")[1]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    [row] = [r for r in rows if f"`{model}`" in r]
    assert rows.index(row) == 1, "the app's model is the table's first row"  # after the header
    return dict(zip(header, [c.strip() for c in row.strip("|").split("|")], strict=True))


def test_readme_shows_the_sidebars_figures_of_the_default_model():
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.switch_page("views/dynamics.py")  # a page that runs no model: the sidebar is what is read
    run(at)
    card = " ".join(c.value for c in at.sidebar.caption)
    accuracy = re.search(r"test accuracy \*\*([\d.]+)%\*\*", card).group(1)
    heads = re.search(r"(\d+)% of heads run", card).group(1)
    row = readme_row(DEFAULT_MODEL)
    assert f"{float(row['BudgetFormer'].removesuffix(' %')):.1f}" == accuracy, (row, card)
    assert f"{float(row['heads run'].removesuffix(' %')):.0f}" == heads, (row, card)
