"""Bad input to the app gets a correct page or a clear message, never a traceback, and no good
file changes: texts that are empty, odd or over the one length limit
(:data:`budgetformer_core.io.inputs.MAX_CHARS`), hostile links, folders outside the operator's
list, class names and texts that look like markup or spreadsheet formulas, checkpoints that
cannot be read. The engine's cases are in tests/core/test_bad_input.py.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from budgetformer_core.io.inputs import MAX_CHARS

from ..conftest import HOSTILE_TEXTS, PRECOMPUTED, no_formula, read_back, snapshot
from .apptest import AG_NEWS, MAIN

# --------------------------------------------------------------------------- the app


def test_app_reads_no_folder_outside_the_operators_list(tmp_path, monkeypatch):
    from app import local_copy as copies

    allowed, private = tmp_path / "data", tmp_path / "private"
    allowed.mkdir()
    private.mkdir()
    (private / "secret.csv").write_text("text,label\nmy diary,World\n")
    (allowed / "one.csv").write_text("text,label\na text,World\n")
    monkeypatch.setenv(copies.DATA_ROOTS_ENV, str(allowed))
    before = snapshot(tmp_path)
    for typed in (str(private), str(private / "secret.csv"), str(allowed / ".." / "private"), "/etc", "bad\0name"):
        assert copies.local_copy(typed) is None, typed
    assert copies.local_copy(str(allowed / "one.csv")) == (allowed / "one.csv").resolve()  # a single file is fine
    assert snapshot(tmp_path) == before


APP_TEXTS = {
    "empty": ("", "text is empty"),
    "white space": (" \n\t ", "text is empty"),
    "markup": ("<script>alert(1)</script><b>x</b>", None),
    "emoji, RTL, zero-width, NUL": ("🚀 שלום مرحبا \u200b \x00 x", None),
    "over the limit": ("The minister spoke about the election. " * (MAX_CHARS // 39 + 10),
                       f"only the first {MAX_CHARS:,} were kept"),
}


@pytest.fixture(scope="module")
def explore():
    from streamlit.testing.v1 import AppTest

    from app.models import DEFAULT_MODEL, available_models
    from budgetformer_core.shipped import CHECKPOINTS

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"{CHECKPOINTS / DEFAULT_MODEL} is missing")
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.run(timeout=120)
    assert not at.exception
    return at


@pytest.mark.parametrize("name", list(APP_TEXTS))
def test_app_explore_page(explore, name):
    text, message = APP_TEXTS[name]
    before = snapshot(PRECOMPUTED)
    explore.text_area(key="text").input(text).run(timeout=120)
    assert not explore.exception, [e.value for e in explore.exception]
    shown = [str(el.value) for kind in ("info", "warning", "error") for el in explore.get(kind)]
    if message:
        assert any(message in s for s in shown), shown
    else:  # a prediction, and the text never rendered as markup
        assert [m for m in explore.metric if m.label == "Prediction"]
        assert not any("<script>" in str(m.value) for m in explore.markdown)
    assert not any("Traceback" in s for s in shown)
    assert snapshot(PRECOMPUTED) == before


# --------------------------------------------------------------------------- hostile links, exports

NINES = "9" * 5000
HOSTILE_LINKS = {  # query parameters → the link value that falls back to its default, with its message
    "k superscript two": ({"mode": "force_k", "k": "\u00b2"}, "k", "is not a number of heads from 1 to"),
    "k of 5,000 digits": ({"mode": "force_k", "k": NINES}, "k", "is not a number of heads from 1 to"),
    "k full-width": ({"mode": "force_k", "k": "\uff13"}, "k", "is not a number of heads from 1 to"),
    "seed superscript one": ({"ablation": "random-heads", "seed": "\u00b9"}, "seed", "is not a whole number"),
    "seed of 5,000 digits": ({"ablation": "random-heads", "seed": NINES}, "seed", "is not a whole number"),
    "index of 5,000 digits": ({"index": NINES}, "index", "is not a test text's index"),
    "index Arabic-Indic": ({"index": "\u0663"}, "index", "is not a test text's index"),
    "budget of 5,000 digits": ({"mode": "slider", "budget": NINES}, "budget", "is not a number in"),
}


@pytest.mark.parametrize("name", list(HOSTILE_LINKS))
def test_link_reader_falls_back_on_hostile_numbers(name):
    from app.links import LinkView, read_link
    from app.method import Method

    params, field, message = HOSTILE_LINKS[name]
    view, notes = read_link(params, Method(), n_heads=8, n_texts=100)
    assert getattr(view, field) == getattr(LinkView(), field)  # the default
    [note] = notes
    assert note.startswith(f"The link's {field} (") and message in note and note.endswith("using the default instead.")
    assert len(note) < 200  # 5,000 digits are not repeated back


def test_link_reader_says_when_it_cuts_a_long_text():
    from app.links import LINK_TEXT_READ, read_link
    from app.method import Method

    text = "w" * (LINK_TEXT_READ + 500)
    view, [note] = read_link({"text": text}, Method(), 8, None)
    assert view.text == text[:LINK_TEXT_READ]
    assert f"{len(text):,} characters" in note and f"at most {LINK_TEXT_READ:,}" in note
    view, notes = read_link({"text": text[:LINK_TEXT_READ], "k": "3", "mode": "force_k"}, Method(), 8, None)
    assert (view.text, view.k, notes) == (text[:LINK_TEXT_READ], 3, [])  # a good link reads as before


def test_class_names_are_text_in_charts():
    from app.charts.easy_hard import budget_by_class
    from app.charts.errors import confusion_heatmap
    from app.charts.explore import probabilities_bar

    names = ["<b>bold</b>", "<a href='https://x'>link</a>", "R&D", "plain"]
    bar = probabilities_bar(names, [0.1, 0.2, 0.3, 0.4]).to_dict()["data"][0]
    assert list(bar["y"]) == ["&lt;b&gt;bold&lt;/b&gt;", "&lt;a href='https://x'&gt;link&lt;/a&gt;", "R&amp;D", "plain"]
    confusion = confusion_heatmap([[1] * 4] * 4, names).to_dict()["data"][0]
    assert list(confusion["x"]) == list(confusion["y"]) == list(bar["y"])
    boxes = budget_by_class(names, [0.5] * 4, names).to_dict()
    assert all("<" not in str(b["x0"]) + str(b["name"]) for b in boxes["data"])


# --------------------------------------------------------------------------- the app, hostile

def app_run(at):
    at.run(timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    return at


def warnings_of(at) -> list[str]:
    return [str(w.value).replace("\\", "") for w in at.warning]


def test_app_hostile_link():
    """An Explore link with k = "²", a seed of 5,000 digits and a text longer than a link carries:
    a note for each, the analysis at the defaults, no traceback (``read_link``'s cases above)."""
    from streamlit.testing.v1 import AppTest

    from app.models import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    query = {"model": DEFAULT_MODEL, "mode": "force_k", "k": "\u00b2", "ablation": "random-heads", "seed": NINES,
             "text": "w " * 5000}
    at = AppTest.from_file(str(MAIN), default_timeout=180)
    at.query_params.update(query)
    app_run(at)
    shown = warnings_of(at)
    for start in ("The link's k ('²')", "The link's seed ('9999", "The link's text has 10,000 characters"):
        assert any(w.startswith(start) for w in shown), (start, shown)
    assert at.text_area(key="text").value == query["text"][:8000]
    assert [m for m in at.metric if m.label == "Prediction"]  # the analysis, at the defaults


def test_app_one_bad_checkpoint_disables_itself(tmp_path, monkeypatch):
    """A checkpoint folder whose config.json nests 100,000 lists deep, or names its classes with
    a string, drops out of the model list with a note; the other models and pages work."""
    from streamlit.testing.v1 import AppTest

    from app import models
    from budgetformer_core import shipped

    good = shipped.CHECKPOINTS / models.DEFAULT_MODEL
    if not good.is_dir():
        pytest.skip(f"{good} is missing")
    shelf = tmp_path / "checkpoints"
    shelf.mkdir()
    (shelf / models.DEFAULT_MODEL).symlink_to(good)
    for name, text in (("bbc-deep", "[" * 100_000 + "]" * 100_000),
                       ("bbc-letters", json.dumps({"model": {"n_layers": 2, "n_heads": 4}, "label_names": "ABCDE"}))):
        (shelf / name).mkdir()
        (shelf / name / "config.json").write_text(text)
    monkeypatch.setattr(shipped, "CHECKPOINTS", shelf)
    before = snapshot(PRECOMPUTED)
    at = app_run(AppTest.from_file(str(MAIN), default_timeout=180))
    notes = [str(c.value).replace("\\", "") for c in at.sidebar.caption if "Not offered" in str(c.value)]
    assert len(notes) == 2 and "bbc-deep" in notes[0] and "label_names" in notes[1], notes
    assert at.sidebar.selectbox(key="model_for_bbc").options == [models.DEFAULT_MODEL]
    assert [m for m in at.metric if m.label == "Prediction"]
    for page in ("dynamics", "batch"):
        at.switch_page(f"views/{page}.py")
        app_run(at)
    assert snapshot(PRECOMPUTED) == before


def test_app_batch_csv_download_of_hostile_texts(downloads):
    from streamlit.testing.v1 import AppTest

    from app.models import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    at = app_run(AppTest.from_file(str(MAIN.parent / "views" / "batch.py"), default_timeout=180))  # the page alone
    upload = pd.DataFrame({"text": HOSTILE_TEXTS}).to_csv(index=False, lineterminator="\r\n").encode()
    at.file_uploader(key="batch_file").set_value(("hostile.csv", upload, "text/csv"))
    app_run(at)
    assert len(at.dataframe[0].value) == len(HOSTILE_TEXTS)
    rows, back = read_back(downloads[f"batch-{DEFAULT_MODEL}.csv"])
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].str.removeprefix("'").tolist() == HOSTILE_TEXTS


def test_app_batch_page_names_the_jsonl_line_that_is_not_json(ws):
    """The Batch page with a JSONL line holding a 5,000-digit number, or 100,000 nested brackets:
    the file's line and why, no traceback (the same reader as ``predict --input-file``)."""
    from streamlit.testing.v1 import AppTest

    from app.models import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    at = app_run(AppTest.from_file(str(MAIN.parent / "views" / "batch.py"), default_timeout=180))  # the page alone
    for name, message in (("bigint.jsonl", "line 2 is not JSON ("),
                          ("nested.jsonl", "line 1 is not JSON (lists or objects nested too deeply)")):
        at.file_uploader(key="batch_file").set_value((name, (ws / name).read_bytes(), "application/json"))
        app_run(at)
        errors = [e.value.replace("\\", "") for e in at.error]
        assert len(errors) == 1 and message in errors[0] and "\n" not in errors[0], errors
        assert not at.dataframe


def test_app_errors_csv_download_of_hostile_texts(downloads, tmp_path, monkeypatch):
    """The Errors page over a local copy of hostile test texts (evaluated live: the precomputed
    table is of the published split)."""
    from streamlit.testing.v1 import AppTest

    from app import models, sources
    from app.local_copy import DATA_ROOTS_ENV
    from budgetformer_core import shipped

    if AG_NEWS not in models.available_models():
        pytest.skip(f"no {AG_NEWS}")
    monkeypatch.setenv(DATA_ROOTS_ENV, str(tmp_path))
    monkeypatch.setattr(shipped, "MANIFEST", tmp_path / "no-manifest.json")  # nothing vouched for: run live
    local = tmp_path / "ag_news_test.csv"
    labels = ["World", "Sports", "Business", "Sci/Tech"] * 2
    pd.DataFrame({"text": HOSTILE_TEXTS, "label": labels}).to_csv(local, index=False, lineterminator="\r\n")
    at = AppTest.from_file(str(MAIN.parent / "views" / "errors.py"), default_timeout=180)  # the page alone
    at.session_state[models.MODEL_KEY] = AG_NEWS  # what the sidebar's picker and local copy field store
    at.session_state[sources.DATA_DIRS_KEY] = {"ag_news": str(local)}
    app_run(at)
    at.toggle(key="err_all").set_value(True)  # every text, not only the misclassified ones
    app_run(at)
    rows, back = read_back(downloads[f"errors-{AG_NEWS}-test.csv"])
    assert len(rows) == len(back) == len(HOSTILE_TEXTS)
    no_formula(rows, back)
    assert back["text"].str.removeprefix("'").tolist() == [t.strip() for t in HOSTILE_TEXTS]  # the loader strips


def test_app_batch_page_names_a_lone_surrogate_and_an_invisible_text():
    """A Batch upload whose JSONL holds a lone surrogate (``"\\ud800"``: bytes that were never
    UTF-8) or a text of only zero-width and direction marks: each row says its own cause, the
    other rows are classified, and nothing claims the model cannot be loaded."""
    from streamlit.testing.v1 import AppTest

    from app.models import DEFAULT_MODEL, available_models

    if DEFAULT_MODEL not in available_models():
        pytest.skip(f"no {DEFAULT_MODEL}")
    at = app_run(AppTest.from_file(str(MAIN.parent / "views" / "batch.py"), default_timeout=180))
    upload = (b'{"text": "shares rose \\ud800 today"}\n{"text": "\\u200b\\u200e\\u0301"}\n'
              b'{"text": "the match ended in a draw"}\n')
    at.file_uploader(key="batch_file").set_value(("odd.jsonl", upload, "application/json"))
    app_run(at)
    shown = " ".join(str(e.value) for e in [*at.error, *at.warning, *at.info]) + " ".join(
        str(df.value.to_dict()) for df in at.dataframe)
    assert "cannot be loaded" not in shown
    assert "U+D800" in shown and "invisible" in shown, shown[:2000]
