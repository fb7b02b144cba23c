"""A researcher's own classifier in the app: the operator lists its folder at start
($BUDGETFORMER_MODEL_DIRS), the app offers it under the dataset with its classes, ranks its heads
zero-shot on that dataset's validation split and draws its budget sweep, errors and easy-vs-hard
pages from that ranking; a listed folder that is not a classifier gets a one-line error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.models import MODEL_ROOTS_ENV, available_models
from budgetformer_core.analysis.infer import evaluate_split
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.model.budget import Control
from budgetformer_core.train.rank import rank_heads

from .apptest import MAIN, TIMEOUT, chart, metric, open_page, run

pytestmark = pytest.mark.skipif("bbc-dense" not in available_models(), reason="the bbc checkpoints are not shipped")


@pytest.fixture
def listed(hf_classifier, tmp_path, monkeypatch) -> Path:
    """The operator's folder: the classifier and, beside it, a BERT encoder without a classifier."""
    root = tmp_path / "models"
    shutil.copytree(hf_classifier, root / "my-bert")
    shutil.copytree(hf_classifier, root / "just-an-encoder")
    config = json.loads((root / "just-an-encoder" / "config.json").read_text())
    (root / "just-an-encoder" / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    (root / "notes").mkdir()  # not a model: not listed
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(root))
    return root


def pick(at: AppTest, dataset: str, name: str) -> AppTest:
    at.sidebar.selectbox(key="dataset").set_value(dataset)
    run(at)
    at.sidebar.selectbox(key=f"model_for_{dataset}").set_value(name)
    return run(at)


def test_only_the_operators_folders_are_listed(listed, monkeypatch):
    assert {"my-bert", "just-an-encoder"} <= set(available_models()) and "notes" not in available_models()
    monkeypatch.delenv(MODEL_ROOTS_ENV)
    assert "my-bert" not in available_models()


def test_the_app_opens_it_and_its_sweep_comes_from_the_zero_shot_ranking(listed):
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    assert "my-bert" in at.sidebar.selectbox(key="model_for_bbc").options  # its id2label are bbc's classes
    pick(at, "bbc", "my-bert")
    assert not at.error
    assert any("BertForSequenceClassification" in c.value for c in at.sidebar.caption)
    assert metric(at, "Heads run") == "4 / 4"  # the default budget is the whole classifier

    # what the sweep must show: the heads ranked on the validation split, the test split at k / H
    data = load_dataset("bbc")
    ranked = rank_heads(load_checkpoint(listed / "my-bert"), data.split("validation").texts,
                        data.split("validation").labels)
    expected = [evaluate_split(ranked, data.split("test"), Control(budget=k / 4)).accuracy for k in (1, 2, 3, 4)]
    open_page(at, "sweep")
    assert not at.error
    accuracy = {t["name"]: t for t in chart(at, "Accuracy vs budget")["data"]}
    assert accuracy["my-bert"]["x"] == [0.25, 0.5, 0.75, 1.0]
    assert accuracy["my-bert"]["y"] == pytest.approx(expected)
    assert "post-hoc (zero-shot)" in accuracy  # the shipped models of bbc beside it
    assert metric(at, "Accuracy") == f"{expected[1]:.1%}" and metric(at, "Heads run") == "50%"

    for view, title in (("errors", "Errors"), ("easy_hard", "Easy vs hard")):
        open_page(at, view)
        assert at.title[0].value.startswith(title) and not at.error, [e.value for e in at.error]


def test_a_listed_folder_that_is_not_a_classifier_gets_one_line(listed):
    at = run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT))
    pick(at, "just-an-encoder", "just-an-encoder")
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and "names no sequence classifier" in errors[0] and "\n" not in errors[0]
    open_page(at, "sweep")
    assert any("names no sequence classifier" in e.value for e in at.error)
