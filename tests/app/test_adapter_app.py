"""Budgets fitted on a frozen model in the app: an adapter folder (``budgetformer fit-budget``) the
operator lists in $BUDGETFORMER_MODEL_DIRS joins the model list under its folder's name, as a
BudgetFormer of the dataset whose classes it has, and Explore runs it with its own budgets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.models import MODEL_ROOTS_ENV, available_models, dataset_of, is_classifier, model_config, model_dir
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.train.fit import FitData, Texts, fit_budget

from .apptest import BUSINESS, MAIN, SPORT, TIMEOUT, metric, run

pytestmark = pytest.mark.skipif("bbc-dense" not in available_models(), reason="the bbc checkpoints are not shipped")


@pytest.fixture
def listed(hf_classifier, tmp_path, monkeypatch) -> Path:
    """The operator's folder: a user's classifier and, beside it, budgets fitted on it from texts alone."""
    root = tmp_path / "models"
    shutil.copytree(hf_classifier, root / "my-bert")
    base = load_checkpoint(root / "my-bert")
    texts = [SPORT, BUSINESS, "the market rose", "a goal in the match", "new phone software"] * 2
    fit_budget(base, FitData("texts", Texts(texts, None)), overrides={"epochs": 1, "batch_size": 5},
               out=root / "my-bert-budgets", progress=False)
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(root))
    return root


def test_the_operators_adapter_is_offered_under_its_classes_dataset(listed, monkeypatch):
    name = "my-bert-budgets"
    assert {"my-bert", name} <= set(available_models())
    assert not is_classifier(name) and model_dir(name) == listed / name
    assert model_config(name).method == "budgetformer" and dataset_of(name) == "bbc"
    monkeypatch.delenv(MODEL_ROOTS_ENV)
    assert name not in available_models()


def test_explore_runs_the_adapter_with_its_own_budgets(listed):
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    at.sidebar.selectbox(key="dataset").set_value("bbc")
    run(at)
    assert "my-bert-budgets" in at.sidebar.selectbox(key="model_for_bbc").options
    at.sidebar.selectbox(key="model_for_bbc").set_value("my-bert-budgets")
    run(at)
    assert not at.error, [e.value for e in at.error]
    per_layer = [int(k) for k in metric(at, "Heads run").split(" / ")]  # of 4 heads, in each of 2 layers
    assert len(per_layer) == 2 and all(1 <= k <= 4 for k in per_layer)
