"""Fixtures of the app's AppTests: a session on the default page, made-up precomputed results,
the files the download buttons hand the browser."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from .apptest import WRONG, fake_per_example, fake_sweeps, start


@pytest.fixture
def at() -> AppTest:
    """A session on Explore with ``bbc-budgetformer`` (:data:`apptest.BF`)."""
    return start()


@pytest.fixture
def default_at() -> AppTest:
    """A session as a visitor first sees the app: Explore on the default model."""
    return start(None)


@pytest.fixture
def results(tmp_path, monkeypatch) -> pd.DataFrame:
    """Made-up precomputed results under tmp_path; returns sweeps.csv as written."""
    from budgetformer_core import shipped
    from budgetformer_core.io.data import load_dataset

    frame = fake_sweeps()
    frame.to_csv(tmp_path / "sweeps.csv", index=False)
    labels = list(load_dataset("bbc").split("test").labels)
    (tmp_path / "per_example").mkdir()
    for model, wrong in WRONG.items():
        fake_per_example(labels, wrong).to_parquet(tmp_path / "per_example" / f"bbc-{model}.parquet")
    monkeypatch.setattr(shipped, "RESULTS", tmp_path)
    return frame


@pytest.fixture
def downloads(monkeypatch) -> dict[str, bytes]:
    """What the page's download buttons hand the browser, by file name (Streamlit's in-memory
    media store, which AppTest drops after each run, read as the files are added)."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files: dict[str, bytes] = {}
    add = MemoryMediaFileStorage.load_and_get_id

    def keep(self, path_or_data, mimetype, kind, filename=None):
        if filename is not None and not isinstance(path_or_data, str):
            files[filename] = path_or_data
        return add(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return files
