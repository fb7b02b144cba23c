"""The Batch analysis page's logic (app/logic/batch.py): its upload limit is the server's."""

from __future__ import annotations

from ...conftest import ROOT


def test_the_upload_limit_is_the_batch_pages():
    import tomllib

    from app.logic.batch import BATCH_MAX_BYTES, BATCH_MAX_MB

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == BATCH_MAX_MB  # MB: Streamlit's unit
    assert BATCH_MAX_BYTES == BATCH_MAX_MB * 2**20  # what the server refuses, the page refuses too
