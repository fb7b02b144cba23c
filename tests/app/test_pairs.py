"""A model that reads pairs of texts in the app: Explore shows two boxes named after its columns
and predicts what the engine predicts, marking the second text's tokens; Batch reads a file's two
text columns.

Through Streamlit's AppTest: real widgets and a real model (a tiny one trained on the synthetic
pair task, on the app's shelf of checkpoints beside the default model).
"""

from __future__ import annotations

import pytest

from app.logic.pairs import SECOND_MARK
from app.models import DEFAULT_MODEL
from budgetformer_core import shipped
from budgetformer_core.analysis.infer import analyze, predict_rows
from budgetformer_core.io.inputs import read_text_table
from budgetformer_core.io.loader import load_checkpoint

from .apptest import all_markdown, metric, open_page, run, start

PAIRS = "synthetic_pairs-budgetformer"


@pytest.fixture
def shelf(pair_checkpoint, tmp_path, monkeypatch) -> str:
    """The app's checkpoints: the default model and the pair model (its name)."""
    good = shipped.CHECKPOINTS / DEFAULT_MODEL
    if not good.is_dir():
        pytest.skip(f"{good} is missing")
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    (folder / DEFAULT_MODEL).symlink_to(good)
    (folder / PAIRS).symlink_to(pair_checkpoint)
    monkeypatch.setattr(shipped, "CHECKPOINTS", folder)
    return PAIRS


def test_explore_shows_two_boxes_and_predicts_the_pair(shelf, pair_checkpoint):
    at = start(shelf)
    first, second = at.text_area(key="text"), at.text_area(key="text_pair")
    assert (first.label, second.label) == ("premise (first text)", "hypothesis (second text)")
    assert first.value and second.value  # a session starts from a pair
    pair = ("w1 t2 w3", "w4 t2 w5")
    first.input(pair[0])
    second.input(pair[1])
    run(at)
    [expected] = analyze(load_checkpoint(pair_checkpoint), [pair])
    assert metric(at, "Prediction") == expected.label
    assert metric(at, "Heads run") == " / ".join(map(str, expected.k))
    read = [t.value for t in at.get("text") if "[SEP]" in str(t.value)]
    assert read and f"{SECOND_MARK}w4" in read[0] and f"{SECOND_MARK}w1" not in read[0]
    assert any("marked ²" in m for m in all_markdown(at))

    at.toggle(key="explain_on").set_value(True)
    run(at)
    shown = " ".join(el.proto.body for el in at.get("html"))
    assert f"{SECOND_MARK}w4" in shown and f"{SECOND_MARK}w3" not in shown  # the attribution's tokens, marked

    at.text_area(key="text_pair").input("   ")
    run(at)
    assert any("this model reads pairs, so type both texts" in m for m in all_markdown(at))
    assert not [m for m in at.metric if m.label == "Prediction"]


def test_batch_reads_both_columns_of_a_csv(shelf, pair_checkpoint):
    at = open_page(start(shelf), "batch")
    data = b"premise,hypothesis,label\nw1 t2 w3,w4 t2 w5,same\nw7 t1,w8 w9,none\nw5 t3,,other\n"
    at.file_uploader(key="batch_file").set_value(("pairs.csv", data, "text/csv"))
    run(at)
    table = at.dataframe[0].value
    expected = list(predict_rows(load_checkpoint(pair_checkpoint), read_text_table(data, "pairs.csv")))
    assert table["text"].tolist() == ["w1 t2 w3", "w7 t1", "w5 t3"]
    assert table["text_pair"].tolist() == ["w4 t2 w5", "w8 w9", ""]
    assert table["prediction"].tolist()[:2] == [p.row["label"] for p in expected[:2]]
    assert table["error"].tolist()[2] == "the line has an empty second text: a pair needs both texts"
    assert metric(at, "Texts classified") == "2 of 3"

    at.file_uploader(key="batch_file").set_value(("single.csv", b"text\nw1 t2 w3\n", "text/csv"))
    run(at)
    assert any("reads pairs of texts" in e.value for e in at.error) and not at.dataframe
