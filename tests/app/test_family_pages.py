"""Every page of the app on a Hugging Face classifier of each encoder family, BERT's on text pairs.

The operator lists a folder of tiny random-weight classifiers ($BUDGETFORMER_MODEL_DIRS), one per
family (``conftest.write_family_classifier``): a BERT with SNLI's classes, which reads premise and
hypothesis as a pair (its segments into its token-type embeddings), and the others with the
classes of a hub data set of single texts (IMDb's); the texts of neither ship. A link opens each
with a small local copy of its data set (``copy=``, under $BUDGETFORMER_DATA_DIRS), on which its
heads are ranked; then every page the app registers is opened in turn. Each page must run
without an exception or an error and show that model: its prediction and heads, its sweep, its
errors, its predictions of a file; a page that needs what the model lacks (a training history,
precomputed results) says so in words.

Through Streamlit's AppTest: real widgets and the real models.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.local_copy import DATA_ROOTS_ENV
from app.models import MODEL_ROOTS_ENV, available_models, dataset_of
from budgetformer_core.analysis.infer import analyze, predict_rows
from budgetformer_core.io.checkpoint import Checkpoint
from budgetformer_core.io.inputs import read_text_table
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.tokenizer import Text

from ..conftest import FAMILY_TYPES, write_family_classifier
from .apptest import MAIN, TIMEOUT, VIEWS, all_markdown, chart, charts, metric, open_page, run

pytestmark = pytest.mark.skipif("bbc-dense" not in available_models(), reason="the bbc checkpoints are not shipped")

SENTIMENT = ["negative", "positive"]
"""IMDb's classes: a data set whose texts do not ship."""
NLI = ["entailment", "neutral", "contradiction"]
"""SNLI's classes: a data set of pairs."""
PAIRS = "bert"
"""The family whose classifier reads pairs."""
MODELS = {family: (NLI, "snli") if family == PAIRS else (SENTIMENT, "imdb") for family in FAMILY_TYPES}
"""Family (``model_type``, the folder's name) → (its classes, the data set they are)."""
WORDS = ["the market rose", "shares fell after the vote", "a goal in the match", "new phone software",
         "the film music won", "the election"]
N_TEST = 12
"""Rows of each local copy: all of them are its test (and validation) split."""


@pytest.fixture(scope="module")
def listed(tmp_path_factory) -> tuple[Path, Path]:
    """The operator's folders: the classifiers, and the local copies of their data sets."""
    models, data = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("data")
    for name, (classes, _) in MODELS.items():
        write_family_classifier(models / name, name, classes)
    texts = [WORDS[i % len(WORDS)] for i in range(N_TEST)]
    pd.DataFrame({"text": texts, "label": [SENTIMENT[i % 2] for i in range(N_TEST)]}).to_csv(data / "imdb.csv",
                                                                                            index=False)
    pd.DataFrame({"premise": texts, "hypothesis": texts[::-1],
                  "label": [NLI[i % 3] for i in range(N_TEST)]}).to_csv(data / "snli.csv", index=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODEL_ROOTS_ENV, str(models))
        patch.setenv(DATA_ROOTS_ENV, str(data))
        yield models, data


@dataclass
class Case:
    """One model, what the engine makes of its local copy, and what the pages should show of it."""

    name: str
    ckpt: Checkpoint
    """The classifier as it is (every head: what the pages run at b = 1)."""
    architecture: str
    """What its config.json's ``architectures`` names (``RobertaForSequenceClassification``)."""
    classes: list[str]
    dataset: str
    copy: Path
    texts: list[Text]
    labels: list[str]


def case(listed: tuple[Path, Path], name: str) -> Case:
    models, data = listed
    classes, dataset = MODELS[name]
    copy = data / f"{dataset}.csv"
    rows = read_text_table(copy.read_bytes(), copy.name)
    [architecture] = json.loads((models / name / "config.json").read_text())["architectures"]
    return Case(name, load_checkpoint(models / name), architecture, classes, dataset, copy, [t for _, t in rows],
                pd.read_csv(copy)["label"].tolist())


def words(at: AppTest) -> str:
    """What the page says (markdown escapes and bold dropped), its metrics and its charts' titles."""
    shown = [*all_markdown(at), *(f"{m.label} {m.value}" for m in at.metric), *charts(at)]
    return " ".join(shown).replace("\\", "").replace("**", "")


def check_explore(at: AppTest, c: Case) -> None:
    assert at.title[0].value == "Explore an input"
    text = at.text_area(key="text").value
    if c.name == PAIRS:  # a test pair in the two boxes; the second text's tokens marked
        text = (text, at.text_area(key="text_pair").value)
        assert text in c.texts and any("²" in str(t.value) for t in at.get("text"))
    [expected] = analyze(c.ckpt, [text])
    assert metric(at, "Prediction") == expected.label
    assert metric(at, "Heads run") == " / ".join(["4"] * c.ckpt.config.n_layers)  # b = 1: every head


def check_sweep(at: AppTest, c: Case) -> None:
    traces = {t["name"]: t for t in chart(at, "Accuracy vs budget")["data"]}
    assert traces[c.name]["x"] == [0.25, 0.5, 0.75, 1.0]  # its heads ranked: 1 … 4 of 4
    right = sum(a.label == y for a, y in zip(analyze(c.ckpt, c.texts), c.labels, strict=True))
    assert traces[c.name]["y"][-1] == pytest.approx(right / N_TEST)


def check_compare(at: AppTest, c: Case) -> None:
    assert at.selectbox(key="sbs_model_A").value == c.name and f"A: {c.name}" in words(at)
    assert [len(metric(at, f"{side} · Heads run").split(" / ")) for side in "AB"] == [c.ckpt.config.n_layers] * 2


def check_easy_hard(at: AppTest, c: Case) -> None:
    assert f"all {N_TEST} test texts get b = 1.00" in words(at)  # a ranked classifier's b: the same for all


def check_ablations(at: AppTest, c: Case) -> None:
    # no shipped ablations of its data set to set beside it: said, naming the data set the app takes its
    # classes for (IMDb's negative / positive are also SST-2's, whose MiniLM models ship)
    named = (c.dataset, dataset_of(c.name))
    assert any(d in i.value for i in at.info for d in named), [i.value for i in at.info]


def check_errors(at: AppTest, c: Case) -> None:
    matrix = chart(at, "Confusion matrix")["data"][0]
    assert matrix["x"] == c.classes == matrix["y"]
    predicted = [a.label for a in analyze(c.ckpt, c.texts)]
    assert matrix["z"] == [[sum(p == x and y == t for p, y in zip(predicted, c.labels, strict=True)) for x in c.classes]
                           for t in c.classes]


def check_batch(at: AppTest, c: Case) -> None:
    at.file_uploader(key="batch_file").set_value((c.copy.name, c.copy.read_bytes(), "text/csv"))
    run(at)
    expected = [p.row["label"] for p in predict_rows(c.ckpt, read_text_table(c.copy.read_bytes(), c.copy.name))]
    assert at.dataframe[0].value["prediction"].tolist() == expected
    assert metric(at, "Texts classified") == f"{N_TEST} of {N_TEST}"


def check_atlas(at: AppTest, c: Case) -> None:
    whole = chart(at, "Share of inputs that ran each head")["data"][0]["z"]  # the whole split's map
    assert whole == [[1.0] * 4] * c.ckpt.config.n_layers and "Every input ran the same heads" in words(at)


def check_dynamics(at: AppTest, c: Case) -> None:
    assert f"The model {c.name} has no training history" in words(at)


CHECKS = {"explore": check_explore, "sweep": check_sweep, "compare": check_compare, "easy_hard": check_easy_hard,
          "ablations": check_ablations, "errors": check_errors, "batch": check_batch, "atlas": check_atlas,
          "dynamics": check_dynamics}
"""What each page must show of the model, by the page's file in app/views."""


def test_every_registered_page_is_checked():
    registered = re.findall(r'st\.Page\("views/(\w+)\.py"', MAIN.read_text())
    assert sorted(registered) == sorted(CHECKS) == sorted(v.stem for v in VIEWS)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_page_on_each_family(listed, name):
    c = case(listed, name)
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model=name, copy=c.copy.name)
    run(at)
    card = " ".join(caption.value for caption in at.sidebar.caption).replace("\\", "")
    assert c.architecture in card and "ranked" in card
    for view, check in CHECKS.items():
        if view != "explore":
            open_page(at, view)
        assert at.session_state["model"] == name and not at.error, (view, [e.value for e in at.error])
        check(at, c)
