"""The "Errors" page: the confusion matrix, the misclassified texts, their filters and the
click-through to Explore.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import pytest

from .apptest import chart, config, metric, open_page, requires_default_model, run, start

pytestmark = requires_default_model


@pytest.mark.artifacts
def test_errors_page(at):
    cfg = config()
    labels, test = cfg["label_names"], cfg["test"]
    open_page(at, "errors")
    assert at.title[0].value == "Errors"

    confusion = chart(at, "Confusion matrix")["data"][0]
    z = confusion["z"]
    assert len(z) == len(labels) and all(len(row) == len(labels) for row in z)
    assert confusion["y"] == labels and confusion["x"] == labels
    assert sum(map(sum, z)) == test["n"]
    wrong = sum(z[i][j] for i in range(len(labels)) for j in range(len(labels)) if i != j)
    # the live evaluation reproduces the figures measured at training time
    assert int(metric(at, "Misclassified")) == wrong == round((1 - test["accuracy"]) * test["n"])
    assert metric(at, "Test accuracy") == f"{test['accuracy']:.1%}"
    table = at.dataframe[0].value
    assert len(table) == wrong and not table["correct"].any()
    assert (table["true"] != table["predicted"]).all()
    assert at.get("download_button")[0].label == f"Download these {wrong} rows (CSV)"

    # filters: one true class, then a confidence range nothing falls in
    cls = table["true"].value_counts().index[0]
    at.multiselect(key="err_true").set_value([cls])
    run(at)
    filtered = at.dataframe[0].value
    assert set(filtered["true"]) == {cls} and len(filtered) == (table["true"] == cls).sum()
    assert any(c.value.startswith(f"{len(filtered)} of {wrong} misclassified") for c in at.caption)
    at.multiselect(key="err_true").set_value([])
    at.slider(key="err_conf").set_value((0.0, 0.0))
    run(at)
    assert at.dataframe[0].value.empty
    at.slider(key="err_conf").set_value((0.0, 1.0))
    at.toggle(key="err_all").set_value(True)
    run(at)
    assert len(at.dataframe[0].value) == test["n"]
    at.toggle(key="err_all").set_value(False)
    run(at)

    # click-through: the picked text opens in "Explore an input", with its test index
    index = int(table["index"].iloc[-1])
    at.selectbox(key="errors_pick").set_value(index)
    run(at)
    at.button(key="err_open").click()
    run(at)
    assert at.title[0].value == "Explore an input"
    assert any(c.value.startswith(f"Test text #{index} of bbc") for c in at.caption)
    assert any(w.value.startswith(f"Misclassified: test text #{index}") for w in at.warning)
    assert metric(at, "Prediction") == table.set_index("index").loc[index, "predicted"]


def test_errors_keeps_its_filters_and_picked_text_across_pages(at):
    open_page(at, "errors")
    table = at.dataframe[0].value
    cls = table["true"].value_counts().index[0]
    at.multiselect(key="err_true").set_value([cls])
    at.slider(key="err_conf").set_value((0.2, 1.0))
    at.toggle(key="err_all").set_value(True)
    run(at)
    picked = int(at.dataframe[0].value["index"].iloc[-1])
    at.selectbox(key="errors_pick").set_value(picked)
    run(at)
    shown = at.dataframe[0].value
    for view in ("dynamics", "explore", "errors"):  # away and back
        open_page(at, view)
    assert at.multiselect(key="err_true").value == [cls] and at.slider(key="err_conf").value == (0.2, 1.0)
    assert at.toggle(key="err_all").value and at.selectbox(key="errors_pick").value == picked
    assert at.dataframe[0].value.equals(shown)
    other = start()  # another session: its own
    open_page(other, "errors")
    assert other.multiselect(key="err_true").value == [] and not other.toggle(key="err_all").value
