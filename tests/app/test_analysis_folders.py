"""Analysis folders of ``budgetformer analyze`` that the operator lists ($BUDGETFORMER_ANALYSIS_DIRS)
open on the Head atlas, Errors and Easy vs hard as rows of their own, through AppTest.

The folder is made here by the engine (BBC's validation split, 60 rows, through
``bbc-budgetformer``); a copy whose summary names other weights stands beside it and is offered
for no model. Assertions are on rendered values: the atlas's usage map against counts made here
from the folder's records, the inputs listed for a head set against the records' indices.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app.components import md_escape
from app.local_copy import ANALYSIS_DIRS_ENV
from app.models import available_models
from budgetformer_core import shipped
from budgetformer_core.analysis.corpus import read_corpus, read_records
from budgetformer_core.analysis.runs import analyze_corpus
from budgetformer_core.io.loader import load_checkpoint

from .apptest import BF, MAIN, TIMEOUT, chart, metric, run
from .test_atlas import counts, listed, send_selection

ROWS = 60
NAME = "bbc-validation"

pytestmark = pytest.mark.skipif(not {BF, "bbc-bba"} <= set(available_models()), reason="the bbc models are missing")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The operator's folder: one analysis of ``bbc-budgetformer`` and one of other weights."""
    root = tmp_path_factory.mktemp("analyses")
    ckpt = load_checkpoint(shipped.checkpoint_dir(BF))
    corpus = read_corpus(ckpt, "bbc", split="validation", limit=ROWS)
    analyze_corpus(ckpt, corpus, root / NAME, batch_size=32, progress=False)
    other = shutil.copytree(root / NAME, root / "other-weights")
    summary = json.loads((other / "summary.json").read_text())
    (other / "summary.json").write_text(json.dumps({**summary, "model_sha256": "0" * 64}))
    return root


@pytest.fixture
def listed_folders(folders, monkeypatch):
    monkeypatch.setenv(ANALYSIS_DIRS_ENV, str(folders))
    return folders


def open_page(model: str, view: str) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params["model"] = model
    at.switch_page(f"views/{view}.py")
    return run(at)


def test_the_atlas_opens_an_analysis_folder_from_the_operators_list(listed_folders):
    at = open_page(BF, "atlas")
    rows = at.selectbox(key="atlas_rows")
    assert rows.options == ["the test split", f"analysis: {NAME}"]  # not the other weights' folder
    rows.set_value(f"analysis: {NAME}")
    run(at)
    records = read_records(listed_folders / NAME)
    assert len(records) == ROWS and records["label"].notna().all()
    assert any(f"the {ROWS} labelled rows of the analysis {md_escape(NAME)}" in c.value for c in at.caption)
    whole = np.array(chart(at, "Share of inputs that ran each head")["data"][0]["z"])  # (L, H)
    np.testing.assert_allclose(whole, counts(records, 2, 8) / ROWS, atol=1e-12)

    at.session_state["atlas_section"] = "Head sets"
    run(at)
    [sets] = [t.value for t in at.dataframe if "heads" in t.value.columns]
    send_selection(at, "atlas_sets", {"selection": {"rows": [0], "columns": [], "cells": []}})
    shown = listed(at)
    top = sets["heads"].iloc[0]
    assert shown["index"].tolist() == records.loc[records["heads0"] == top, "index"].tolist()
    assert shown["explore"].isna().all()  # a row of the analysed input is not the test split's


def test_errors_and_easy_vs_hard_read_the_folder_and_other_models_are_offered_none(listed_folders):
    records = read_records(listed_folders / NAME)
    at = open_page(BF, "errors")
    at.selectbox(key="errors_rows").set_value(f"analysis: {NAME}")
    run(at)
    assert metric(at, "Misclassified") == str(int((~records["correct"].astype(bool)).sum()))
    at = open_page(BF, "easy_hard")
    at.selectbox(key="eh_rows").set_value(f"analysis: {NAME}")
    run(at)
    assert metric(at, "Accuracy") == f"{records['correct'].astype(bool).mean():.1%}"
    assert not [s for s in open_page("bbc-bba", "atlas").selectbox if s.key == "atlas_rows"]


def test_without_the_operators_list_the_pages_offer_only_the_test_split(monkeypatch):
    monkeypatch.delenv(ANALYSIS_DIRS_ENV, raising=False)
    assert not [s for s in open_page(BF, "atlas").selectbox if s.key == "atlas_rows"]
