"""The sidebar's local copy: a visitor can make the server read only under the operator's folders."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from app import state


@pytest.fixture
def roots(tmp_path, monkeypatch):
    allowed, private = tmp_path / "data", tmp_path / "private"
    (allowed / "mine").mkdir(parents=True)
    private.mkdir()
    (private / "secret.csv").write_text("text,label\nmy diary,World\n")
    monkeypatch.setenv(state.DATA_ROOTS_ENV, str(allowed))
    return allowed, private


def test_paths_outside_the_operators_list_are_never_used(roots):
    allowed, private = roots
    assert state.local_copy(str(allowed / "mine")) == (allowed / "mine").resolve()
    for typed in (str(private), str(private / "secret.csv"), str(allowed / ".." / "private"), "/etc", "/",
                  "precomputed", "", "bad\0name", str(allowed / "missing")):
        assert state.local_copy(typed) is None, typed
    (allowed / "link").symlink_to(private)  # a link inside that points out
    assert state.local_copy(str(allowed / "link")) is None
    assert state.local_copy(str(allowed / "link" / "secret.csv")) is None


def test_several_roots_and_the_default(roots, monkeypatch, tmp_path):
    allowed, private = roots
    monkeypatch.setenv(state.DATA_ROOTS_ENV, os.pathsep.join([str(allowed), str(private)]))
    assert state.local_copy(str(private / "secret.csv")) == (private / "secret.csv").resolve()
    monkeypatch.delenv(state.DATA_ROOTS_ENV)
    assert state.allowed_data_roots() == [(state.ROOT.parent / "shared" / "data").resolve()]
    assert state.local_copy(str(private)) is None


def test_a_single_csv_file_is_read_whole_with_the_datasets_classes(roots):
    allowed, _ = roots
    rows = pd.DataFrame({"text": [f"news item {i}" for i in range(12)],
                         "label": ["Sports", "World", "Sci/Tech"] * 4})
    f = allowed / "ag_test.csv"
    rows.to_csv(f, index=False)
    samples = state._split_samples("ag_news", "test", str(state.local_copy(str(f))), 0)
    assert samples.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert samples.texts == rows["text"].tolist() and samples.labels == [1, 0, 3] * 4
    assert "shared/data" in state.LOCAL_COPY_HELP and state.DATA_ROOTS_ENV in state.LOCAL_COPY_HELP
