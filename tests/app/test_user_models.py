"""A user's own classifier whose classes are no data set's on this machine: the operator lists its
folder ($BUDGETFORMER_MODEL_DIRS) and it runs typed text and Batch at once, with every head; the
sidebar says which data set the pages that need one want and how to give it; a local copy labelled
with its class names ranks its heads; folders that were not offered are listed with their reason;
the Errors page does not send an import to a training history it does not have.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.local_copy import DATA_ROOTS_ENV
from app.models import MODEL_ROOTS_ENV, available_models

from .apptest import BUSINESS, MAIN, SPORT, TIMEOUT, all_markdown, metric, open_page, run, type_text

pytestmark = pytest.mark.skipif("bbc-dense" not in available_models(), reason="the bbc checkpoints are not shipped")

NEWS = ["sport", "business", "tech"]
"""Not bbc's classes, byte for byte (bbc has "sports"): the dataset key is the model's own name."""
NLI = ["entailment", "neutral", "contradiction"]
"""snli's classes, whose texts are not shipped."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """The operator's folder: three classifiers, and folders that are not offered."""
    from tests.conftest import write_hf_classifier

    root = tmp_path_factory.mktemp("models")
    write_hf_classifier(root / "my-news", NEWS)
    write_hf_classifier(root / "my-nli", NLI)
    write_hf_classifier(root / "my-bbc", ["business", "entertainment", "politics", "sport", "tech"])
    ours = root / "bbc-dense"  # a shipped model's name: not offered
    ours.mkdir()
    (ours / "config.json").write_text(json.dumps({"model_type": "bert"}))
    weights_only = root / "weights-only"  # a model without its config.json
    weights_only.mkdir()
    (weights_only / "model.safetensors").write_bytes(b"")
    notes = root / "notes"  # neither: not mentioned
    notes.mkdir()
    return root


@pytest.fixture
def listed(folders, monkeypatch) -> Path:
    monkeypatch.setenv(MODEL_ROOTS_ENV, f"{folders}{os.pathsep}{folders / 'missing'}")
    return folders


def pick(at: AppTest, name: str) -> AppTest:
    at.sidebar.selectbox(key="dataset").set_value("snli" if name == "my-nli" else name)
    run(at)
    [picker] = [s for s in at.sidebar.selectbox if s.key.startswith("model_for_")]
    picker.set_value(name)
    return run(at)


def opened(name: str) -> AppTest:
    return pick(run(AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)), name)


@pytest.mark.parametrize(("name", "classes"), [("my-news", NEWS), ("my-nli", NLI)])
def test_explore_runs_typed_text_on_a_classifier_whose_data_is_not_here(listed, name, classes):
    at = type_text(opened(name), SPORT)
    assert not at.error, [e.value for e in at.error]
    assert metric(at, "Prediction") in classes
    assert metric(at, "Heads run") == "4 / 4"  # every head: nothing ranks them here
    [need] = [i.value for i in at.main.info if "rank" in i.value]  # one line: what it needs, and how to give it
    assert "\n" not in need and "Local copy" in need and all(c in need for c in classes)


def test_batch_classifies_a_file_for_it_and_names_an_unknown_label(listed):
    at = opened("my-news")
    open_page(at, "batch")
    data = f'text,label\n"{SPORT}",sport\n"{BUSINESS}",Business\n"{SPORT}",sports\n'.encode()
    at.file_uploader(key="batch_file").set_value(("labelled.csv", data, "text/csv"))
    run(at)
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert table["label"].tolist() == ["sport", "business", ""]  # by name, any case
    assert set(table["prediction"]) <= set(NEWS) and metric(at, "Texts classified") == "3 of 3"
    [note] = [c.value.replace("\\", "") for c in at.caption if "“sports”" in c.value]
    assert "sport, business, tech" in note


def test_the_sidebar_says_what_data_it_needs_and_lists_the_folders_not_offered(listed):
    at = opened("my-news")
    sidebar = [c.value.replace("\\", "") for c in at.sidebar.caption]
    [card] = [c for c in sidebar if "BertForSequenceClassification" in c]
    assert "every head" in card and "sport, business, tech" in card and "Local copy of my-news" in card
    refused = [c for c in sidebar if "Not offered" in c and str(listed) not in c]  # names, not paths
    assert any("bbc-dense" in c and "shipped model" in c for c in refused)
    assert any("weights-only" in c and "config.json" in c for c in refused)
    assert any("missing" in c and "not a folder" in c for c in refused)
    assert not any("notes" in c for c in sidebar)

    at = pick(at, "my-nli")
    [card] = [c.value.replace("\\", "") for c in at.sidebar.caption if "BertForSequenceClassification" in c.value]
    assert "snli's texts" in card and "Local copy of snli" in card
    at = pick(at, "my-bbc")  # bbc's classes but one: the renaming that reads bbc's texts
    [card] = [c.value.replace("\\", "") for c in at.sidebar.caption if "BertForSequenceClassification" in c.value]
    assert "rename sport to sports in its config.json's id2label to use bbc's texts" in card


def test_a_local_copy_labelled_with_its_names_ranks_its_heads(listed, tmp_path, monkeypatch):
    rows = [(SPORT, "sport"), (BUSINESS, "business"), ("new phone software", "tech")] * 4
    (tmp_path / "news.csv").write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows))
    monkeypatch.setenv(DATA_ROOTS_ENV, str(tmp_path))
    at = opened("my-news")
    at.sidebar.text_input(key="data_dir_my-news").input(str(tmp_path / "news.csv"))
    run(at)
    assert not at.sidebar.warning, [w.value for w in at.sidebar.warning]
    [card] = [c.value for c in at.sidebar.caption if "BertForSequenceClassification" in c.value]
    assert "ranked" in card and "every head" not in card
    at.radio(key="budget_mode").set_value("force_k")
    run(at)
    at.slider(key="force_k").set_value(2)
    at = type_text(at, SPORT)
    assert not at.error, [e.value for e in at.error]
    assert metric(at, "Heads run") == "2 / 2"


def test_errors_does_not_send_an_import_to_its_training_history(listed):
    at = opened("my-news")
    open_page(at, "errors")
    shown = " ".join(all_markdown(at)).replace("\\", "")
    assert "Training dynamics" not in shown
    assert "Local copy of my-news" in shown and "sport, business, tech" in shown
