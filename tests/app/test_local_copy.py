"""The sidebar's local copy: a visitor can make the server read only under the operator's folders.

The operator lists the folders in ``$BUDGETFORMER_DATA_DIRS`` (:func:`app.copies.local_copy`);
whatever a visitor types — an absolute path, ``..``, a link that points out, a sibling folder
whose name starts like an allowed one — nothing outside them is read, and the page shows none
of it (checked through the real sidebar with Streamlit's AppTest).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app import local_copy as copies
from app import models, sources

SECRET = "my diary entry 7f3c"
"""The text of the private file: it must never reach a page."""


@pytest.fixture
def roots(tmp_path, monkeypatch):
    allowed, private = tmp_path / "data", tmp_path / "private"
    (allowed / "mine").mkdir(parents=True)
    private.mkdir()
    (private / "secret.csv").write_text(f"text,label\n{SECRET},World\n")
    monkeypatch.setenv(copies.DATA_ROOTS_ENV, str(allowed))
    return allowed, private


def test_paths_outside_the_operators_list_are_never_used(roots):
    allowed, private = roots
    assert copies.local_copy(str(allowed / "mine")) == (allowed / "mine").resolve()
    for typed in (str(private), str(private / "secret.csv"), str(allowed / ".." / "private"), "/etc", "/",
                  "precomputed", "", "bad\0name", str(allowed / "missing")):
        assert copies.local_copy(typed) is None, typed
    (allowed / "link").symlink_to(private)  # a link inside that points out
    assert copies.local_copy(str(allowed / "link")) is None
    assert copies.local_copy(str(allowed / "link" / "secret.csv")) is None


def test_several_roots_and_the_default(roots, monkeypatch, tmp_path):
    allowed, private = roots
    monkeypatch.setenv(copies.DATA_ROOTS_ENV, os.pathsep.join([str(allowed), str(private)]))
    assert copies.local_copy(str(private / "secret.csv")) == (private / "secret.csv").resolve()
    monkeypatch.delenv(copies.DATA_ROOTS_ENV)
    assert copies.allowed_data_roots() == [(copies.ROOT.parent / "shared" / "data").resolve()]
    assert copies.local_copy(str(private)) is None


def test_a_single_csv_file_is_read_whole_with_the_datasets_classes(roots):
    allowed, _ = roots
    rows = pd.DataFrame({"text": [f"news item {i}" for i in range(12)],
                         "label": ["Sports", "World", "Sci/Tech"] * 4})
    f = allowed / "ag_test.csv"
    rows.to_csv(f, index=False)
    samples = sources.read_split("ag_news", "test", str(copies.local_copy(str(f))), 0)
    assert samples.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert samples.texts == rows["text"].tolist() and samples.labels == [1, 0, 3] * 4
    assert "shared/data" in copies.LOCAL_COPY_HELP and copies.DATA_ROOTS_ENV in copies.LOCAL_COPY_HELP


def test_dot_dot_links_and_look_alike_names(roots, tmp_path):
    allowed, private = roots
    mine = (allowed / "mine").resolve()
    inside = [str(allowed / "mine" / ".." / "mine"), str(allowed) + "//mine/", str(allowed / "." / "mine"),
              os.path.relpath(allowed / "mine", copies.ROOT)]  # relative paths start at the project
    for typed in inside:
        assert copies.local_copy(typed) == mine, typed
    look_alike = tmp_path / (allowed.name + "-private")  # a string prefix of it is not inside
    look_alike.mkdir()
    (look_alike / "secret.csv").write_text(f"text,label\n{SECRET},World\n")
    (allowed / "secret.csv").symlink_to(private / "secret.csv")  # a file link that points out
    (allowed / "up").symlink_to("..")  # a relative link that climbs out
    (allowed / "in").symlink_to(allowed / "mine")  # a link that stays inside is fine
    outside = [str(look_alike), str(look_alike / "secret.csv"), str(allowed / "secret.csv"),
               str(allowed / "up"), str(allowed / "up" / "private" / "secret.csv"),
               os.path.relpath(private / "secret.csv", copies.ROOT), "../" * 40 + "etc/passwd",
               str(allowed / "mine" / ".." / ".." / "private"), "/etc/passwd", "//etc", "~", "~/.ssh",
               str(allowed / "in" / ".." / ".." / "private")]
    for typed in outside:
        assert copies.local_copy(typed) is None, typed
    assert copies.local_copy(str(allowed / "in")) == mine
    # ``..`` is taken in the typed text, so it is the folder the check saw that is read
    assert copies.local_copy(str(allowed / "in" / "..")) == allowed.resolve()


def test_an_operators_folder_may_itself_be_a_link(tmp_path, monkeypatch):
    real = tmp_path / "real"
    (real / "ag_news").mkdir(parents=True)
    (tmp_path / "data").symlink_to(real)
    monkeypatch.setenv(copies.DATA_ROOTS_ENV, str(tmp_path / "data"))
    assert copies.allowed_data_roots() == [real.resolve()]
    assert copies.local_copy(str(tmp_path / "data" / "ag_news")) == (real / "ag_news").resolve()
    assert copies.local_copy(str(real / "ag_news")) == (real / "ag_news").resolve()
    assert copies.local_copy(str(tmp_path)) is None


AG_NEWS = "ag_news-budgetformer"
MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"


def everything_rendered(at: AppTest) -> bytes:
    """Every element of the page as the browser would receive it (its protobuf message)."""
    return b"".join(n.proto.SerializeToString() for n in at if getattr(n, "proto", None) is not None)


@pytest.mark.skipif(AG_NEWS not in models.available_models(), reason="no shipped ag_news model")
def test_the_sidebar_never_shows_a_file_outside_the_list(roots):
    """A visitor types paths into the sidebar's "Local copy of ag_news": the private file's text
    is on no page; a CSV file inside the operator's folder is read whole."""
    allowed, private = roots
    (allowed / "secret.csv").symlink_to(private / "secret.csv")
    mine = pd.DataFrame({"text": [f"public item {i}" for i in range(12)],
                         "label": ["Sports", "World", "Sci/Tech"] * 4})
    mine.to_csv(allowed / "mine" / "test.csv", index=False)

    def visit(path: str) -> AppTest:
        at.sidebar.text_input(key="data_dir_ag_news").set_value(path)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.run()
    at.sidebar.selectbox(key="dataset").set_value("ag_news").run()
    at.sidebar.selectbox(key="model_for_ag_news").set_value(AG_NEWS).run()
    for typed in (str(private), str(private / "secret.csv"), str(allowed / ".." / "private" / "secret.csv"),
                  str(allowed / "secret.csv"), os.path.relpath(private / "secret.csv", copies.ROOT)):
        visit(typed)
        assert any("could be read" in w.value for w in at.sidebar.warning), typed
        assert any("no samples to pick" in i.value for i in at.info), typed
        assert SECRET.encode() not in everything_rendered(at), typed
    visit(str(allowed / "mine" / "test.csv"))
    assert not at.sidebar.warning
    at.radio(key="pick_how").set_value("By index").run()
    at.number_input(key="pick_index").set_value(11).run()
    at.button(key="pick_index_go").click().run()
    assert at.text_area(key="text").value == "public item 11"
    assert any("Test text #11 of ag_news" in c.value.replace("\\", "") for c in at.caption)  # md-escaped
    assert at.radio(key="pick_how").label == "Pick one of the 12 test texts"
