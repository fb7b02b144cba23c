"""The "Batch analysis" page: a file of texts, each row the engine's prediction; labels give the
accuracy.

Through Streamlit's AppTest: real widgets and the real models; assertions on rendered values.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest

from app.models import available_models

from .apptest import (
    BBA,
    BF,
    BUSINESS,
    MARKUP,
    SPORT,
    chart,
    config,
    metric,
    open_page,
    pick_model,
    requires_default_model,
    run,
    start,
)

pytestmark = requires_default_model


@pytest.mark.parametrize("model", [BF, BBA])
def test_batch_page_rows_are_the_engines(model):
    from app.logic.batch import BATCH_MAX_BYTES
    from app.state import get_checkpoint
    from budgetformer_core.analysis.infer import predict_rows
    from budgetformer_core.io.inputs import read_text_table

    if model not in available_models():
        pytest.skip(f"no {model}")
    at = pick_model(start(), model)
    open_page(at, "batch")
    data = f'id,text\n1,"{SPORT}"\n2,"{BUSINESS}"\n3,{MARKUP}\n4,"   "\n'.encode()
    at.file_uploader(key="batch_file").set_value(("texts.csv", data, "text/csv"))
    run(at)
    table = at.dataframe[0].value
    expected = list(predict_rows(get_checkpoint(model), read_text_table(data, "texts.csv")))
    done = [p for p in expected if p.row]
    assert table["row"].tolist() == [1, 2, 3, 4] and table["text"].tolist()[2] == MARKUP  # markup as text
    assert table["prediction"].tolist()[:3] == [p.row["label"] for p in done]
    assert table["confidence"].tolist()[:3] == pytest.approx([max(p.row["probs"].values()) for p in done])
    sym = "b" if config(model)["model"]["variant"] == "bba" else "s"
    for layer in range(config(model)["model"]["n_layers"]):
        assert table[f"k{layer}"].tolist()[:3] == [p.row["k"][layer] for p in done]
        assert table[f"{sym}{layer}"].tolist()[:3] == pytest.approx([p.row["budget"][layer] for p in done])
        assert table[f"heads{layer}"].tolist()[:3] == [" ".join(map(str, p.row["selected_heads"][layer])) for p in done]
    assert table["error"].tolist() == ["", "", "", "blank line"]
    assert metric(at, "Texts classified") == "3 of 4" and metric(at, "Not classified") == "1"
    assert "Download this table (4 rows, CSV)" in [b.label for b in at.get("download_button")]
    for name, content, message in (
        ("empty.csv", b"", "is empty"),
        ("big.txt", b"x" * (BATCH_MAX_BYTES + 1), "the limit is"),
        ("broken.jsonl", b'{"text": "ok"}\n{"text": ', "line 2 is not JSON"),
        ("latin1.csv", "text\ncaf\u00e9\n".encode("latin-1"), "not valid UTF-8"),
    ):
        at.file_uploader(key="batch_file").set_value((name, content, "text/plain"))
        run(at)
        assert any(message in e.value.replace("\\", "") for e in at.error), (name, [e.value for e in at.error])
        assert not at.dataframe


def test_batch_accuracy_from_a_label_column(downloads):
    """A ``label`` column (class names or indices) gives the accuracy and a confusion matrix of the
    rows it labels, and is carried into the table and its CSV; an empty row says so in its row."""
    from app.state import get_checkpoint
    from budgetformer_core.analysis.infer import predict_rows
    from budgetformer_core.io.inputs import read_text_table

    labels = config()["label_names"]
    sport, business = labels.index("sports"), labels.index("business")
    data = (f'text,label\n"{SPORT}",Sports\n"{BUSINESS}",{business}\n"{SPORT}",business\n"  ",sports\n'
            f'"{BUSINESS}",weather\n').encode()
    at = start()
    open_page(at, "batch")
    at.file_uploader(key="batch_file").set_value(("labelled.csv", data, "text/csv"))
    run(at)
    predicted = [p.row["label"] if p.row else None
                 for p in predict_rows(get_checkpoint(BF), read_text_table(data, "labelled.csv"))]
    truth = ["sports", labels[business], "business", "sports", ""]
    judged = [(t, p) for t, p in zip(truth, predicted, strict=True) if t and p]  # row 4 empty, row 5 no class
    expected = sum(t == p for t, p in judged) / len(judged)
    assert metric(at, "Accuracy against the file's labels") == f"{expected:.1%}" and len(judged) == 3
    matrix = chart(at, "Confusion")["data"][0]["z"]
    assert sum(map(sum, matrix)) == 3 and matrix[sport][labels.index(predicted[0])] >= 1
    table = at.dataframe[0].value
    assert table.columns.tolist()[:4] == ["row", "text", "error", "label"]  # the reason is seen first
    assert table["label"].tolist() == truth and table["error"].tolist()[3] == "blank line"
    carried = pd.read_csv(io.BytesIO(downloads[f"batch-{BF}.csv"]), keep_default_na=False)
    assert carried["label"].tolist() == truth
    assert carried["correct"].tolist()[:3] == [str(t == p) for t, p in zip(truth[:3], predicted[:3], strict=True)]
    assert any("“weather”" in c.value for c in at.caption)


def test_batch_names_the_labels_it_leaves_out_and_the_classes():
    """A label that is none of the model's classes is left out of the accuracy with a note that
    names it (cut when long, markup shown as text) and the model's classes; so is a file whose
    labels name no class at all."""
    classes = ", ".join(config()["label_names"])
    long = "y" * 200
    data = f'text,label\n"{SPORT}",sports\n"{BUSINESS}",weather\n"{SPORT}",<b>sport</b>\n"{SPORT}",{long}\n'
    at = start()
    open_page(at, "batch")
    at.file_uploader(key="batch_file").set_value(("labelled.csv", data.encode(), "text/csv"))
    run(at)
    assert metric(at, "Accuracy against the file's labels").endswith("%")
    [note] = [c.value for c in at.caption if "weather" in c.value]
    assert "<b>" not in note  # escaped: the label is shown, not rendered
    shown = note.replace("\\", "")
    assert "3 row(s)" in shown and "“weather”" in shown and "“<b>sport</b>”" in shown
    assert "y" * 20 in shown and "y" * 40 not in shown and "…" in shown  # a long label is cut
    assert classes in shown

    at.file_uploader(key="batch_file").set_value(("other.csv", f'text,label\n"{SPORT}",sport\n'.encode(), "text/csv"))
    run(at)
    [note] = [c.value.replace("\\", "") for c in at.caption if "sport”" in c.value]
    assert "no accuracy" in note.lower() and classes in note
