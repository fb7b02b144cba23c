"""Links from the Head atlas to "Explore an input" name the local copy their texts come from.

A listed input opens in a new session (a new tab): the link must carry ``copy=NAME`` as
Explore's own links do, so that the new session reads the same copy and shows that input's own
text, not its fallback. Checked through AppTest on the shipped AG News bba model at a budget of
its own (so the atlas runs the model over the copy's texts) with a 12-text copy of AG News under
the operator's folder, given to the page by a link that names it.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import local_copy, models

from .test_atlas import MAIN, TIMEOUT, listed, run, send_selection

MODEL = "ag_news-bba"

pytestmark = pytest.mark.skipif(MODEL not in models.available_models(), reason="no shipped ag_news bba model")


@pytest.fixture
def copy(tmp_path, monkeypatch) -> pd.DataFrame:
    """A local copy of AG News, ``mine/test.csv`` under the operator's only folder: its rows."""
    root = tmp_path / "data"
    (root / "mine").mkdir(parents=True)
    rows = pd.DataFrame({"text": [f"copy item {i}: the team won the cup, shares fell, a new chip ships"
                                  for i in range(12)],
                         "label": ["Sports", "Business", "Sci/Tech", "World"] * 3})
    rows.to_csv(root / "mine" / "test.csv", index=False)
    monkeypatch.setenv(local_copy.DATA_ROOTS_ENV, str(root))
    return rows


def test_atlas_links_carry_the_local_copy_and_open_its_text(copy):
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model=MODEL, copy="mine/test.csv")  # a link names the model and the copy
    at.switch_page("views/atlas.py")
    at.session_state["atlas_section"] = "Head sets"
    run(at)
    at.select_slider(key="atlas_b").set_value(0.25)  # not the model's own b: the atlas runs the copy's texts
    run(at)
    send_selection(at, "atlas_sets", {"selection": {"rows": [0], "columns": [], "cells": []}})
    shown = listed(at)
    assert len(shown) > 0
    for link, index in zip(shown["explore"], shown["index"], strict=True):
        params = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
        assert params["copy"] == "mine/test.csv" and params["index"] == str(index), link

    # the link opens in a new session: Explore reads the copy and shows that input's own text
    index = int(shown["index"].iloc[-1])
    fresh = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    fresh.query_params.update({k: v[0] for k, v in parse_qs(urlsplit(shown["explore"].iloc[-1]).query).items()})
    run(fresh)
    assert fresh.text_area(key="text").value == copy["text"][index]
    assert not [w.value for w in fresh.warning if "local copy" in w.value or "test texts" in w.value]
