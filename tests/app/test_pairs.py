"""A model that reads pairs of texts in the app: Explore shows two boxes named after its columns
and predicts what the engine predicts, marking the second text's tokens; its address carries both
texts and reopens the pair; its offline report shows both; Side by side takes a pair for both
sides, and a pair per side; Batch reads a file's two text columns; tables and searches of test
texts read a pair as its two texts.

Through Streamlit's AppTest: real widgets and a real model (a tiny one trained on the synthetic
pair task, on the app's shelf of checkpoints beside the default model).
"""

from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from app.links import LINK_TEXT_LIMIT, link_params, read_link
from app.local_copy import DATA_ROOTS_ENV
from app.logic.examples import excerpt, preview, search_texts
from app.logic.explore import offline_report
from app.logic.pairs import SECOND_MARK
from app.method import Method
from app.models import DEFAULT_MODEL
from app.settings import Settings
from budgetformer_core import shipped
from budgetformer_core.analysis.infer import analyze, predict_rows
from budgetformer_core.io.inputs import read_text_table
from budgetformer_core.io.loader import load_checkpoint

from .apptest import MAIN, TIMEOUT, all_markdown, metric, open_page, run, start

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


def test_side_by_side_reads_a_pair_for_both_sides_and_a_pair_per_side(shelf, pair_checkpoint, tmp_path, monkeypatch):
    copy = tmp_path / "data" / "synthetic_pairs.csv"  # a local copy of its test pairs, for "Random test text"
    copy.parent.mkdir()
    copy.write_text("premise,hypothesis,label\nw1 t3 w2,w5 t3 w6,same\nw2 t1 w4,w7 w8,none\n")
    monkeypatch.setenv(DATA_ROOTS_ENV, str(copy.parent))
    at = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    at.query_params.update(model=shelf, copy=copy.name)
    open_page(run(at), "compare")
    first, second = at.text_area(key="sbs_text"), at.text_area(key="sbs_text_pair")
    assert second.label == "hypothesis (second text)" and first.label.startswith("premise (first text)")
    assert first.value and second.value and not at.error  # a session starts from a pair
    ckpt = load_checkpoint(pair_checkpoint)
    pair, other = ("w1 t2 w3", "w4 t2 w5"), ("w7 t1 w2", "w8 w9")
    first.input(pair[0])
    second.input(pair[1])
    run(at)
    [expected] = analyze(ckpt, [pair])
    for side in "AB":  # one model, both sides on the pair
        assert metric(at, f"{side} · Prediction") == expected.label
        assert metric(at, f"{side} · Heads run") == " / ".join(map(str, expected.k))

    at.radio(key="sbs_mode").set_value("texts")
    run(at)
    assert at.text_area(key="sbs_text_A_pair").label == "hypothesis (second text)"
    for side, (a, b) in zip("AB", (pair, other), strict=True):
        at.text_area(key=f"sbs_text_{side}").input(a)
        at.text_area(key=f"sbs_text_{side}_pair").input(b)
    run(at)
    for side, analysis in zip("AB", analyze(ckpt, [pair, other]), strict=True):
        assert metric(at, f"{side} · Prediction") == analysis.label
        assert metric(at, f"{side} · Heads run") == " / ".join(map(str, analysis.k))

    at.text_area(key="sbs_text_B_pair").input(" ")
    run(at)
    assert any("Text B" in i.value and "both texts" in i.value for i in at.info) and not at.error
    at.button(key="sbs_draw_B").click()  # a test pair: into both of B's boxes
    run(at)
    drawn = (at.text_area(key="sbs_text_B").value, at.text_area(key="sbs_text_B_pair").value)
    assert all(drawn) and not at.error
    assert drawn in [("w1 t3 w2", "w5 t3 w6"), ("w2 t1 w4", "w7 w8")]
    [analysis] = analyze(ckpt, [drawn])
    assert metric(at, "B · Prediction") == analysis.label


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


def test_a_link_to_a_pair_reopens_the_pair(shelf, pair_checkpoint):
    pair = ("w1 t2 w3", "w4 t2 w5")
    at = start(shelf)
    at.text_area(key="text").input(pair[0])
    at.text_area(key="text_pair").input(pair[1])
    run(at)
    link = {key: at.query_params[key] for key in at.query_params}
    assert (link["model"], link["text"], link["text_pair"]) == (shelf, *pair)
    assert any("both texts" in c.value for c in at.caption)  # the line that says what the address holds

    again = AppTest.from_file(str(MAIN), default_timeout=TIMEOUT)
    again.query_params.update(link)
    run(again)
    assert (again.text_area(key="text").value, again.text_area(key="text_pair").value) == pair
    assert metric(again, "Prediction") == metric(at, "Prediction") and not again.warning


def test_a_link_reads_a_second_text_only_for_a_model_of_pairs():
    method = Method()
    params = link_params("m", ("a premise", "a hypothesis"), None, Settings(), method)
    assert (params["text"], params["text_pair"]) == ("a premise", "a hypothesis")
    view, notes = read_link(params, method, 4, None, reads_pairs=True)
    assert view.text == ("a premise", "a hypothesis") and not notes
    view, [note] = read_link(params, method, 4, None)
    assert view.text == "a premise" and "text_pair ('a hypothesis') is left out" in note
    for index, pair in ((None, ("x" * LINK_TEXT_LIMIT, "y")), (3, ("a", "b"))):  # too long; a test pair
        assert {"text", "text_pair"}.isdisjoint(link_params("m", pair, index, Settings(), method))


def test_the_offline_report_of_a_pair_shows_both_texts(shelf, pair_checkpoint):
    at = start(shelf)
    [button] = [b for b in at.get("download_button") if b.proto.label == "Offline report (HTML)"]
    assert not button.proto.disabled  # a pair too
    pair = (at.text_area(key="text").value, at.text_area(key="text_pair").value)
    page = offline_report(load_checkpoint(pair_checkpoint), pair, Settings(), shelf)  # what the button makes
    for column, text in zip(("premise", "hypothesis"), pair, strict=True):
        assert f'text: {column}</h3>\n<pre class="text">{html.escape(text)}</pre>' in page
    assert f'title="{SECOND_MARK}' in page  # the second text's tokens marked in why-this-budget


def test_tables_and_searches_read_a_pair_as_its_two_texts():
    pairs = [("the vote", "a goal"), ("Shares &amp; bonds", "fell")]
    assert preview(pairs[1]) == "Shares & bonds ‖ fell" and excerpt(pairs[0]) == "the vote ‖ a goal"
    assert search_texts([*pairs, "a goal alone"], "GOAL") == [0, 2]
