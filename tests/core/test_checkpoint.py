"""Checkpoints round-trip bit-exactly and bad ones fail with a clear message."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from budgetformer_core.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def test_round_trip_is_bit_exact(tiny_checkpoint, tmp_path):
    a = load_checkpoint(tiny_checkpoint)
    save_checkpoint(tmp_path / "copy", a.model, a.tokenizer, a.label_names, a.meta, a.history)
    b = load_checkpoint(tmp_path / "copy")
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    for name in ("model.safetensors", "config.json", "tokenizer.json", "history.json"):
        assert (tiny_checkpoint / name).read_bytes() == (tmp_path / "copy" / name).read_bytes(), name
    ids = torch.tensor([[5, 6, 7, 8]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    assert torch.equal(a.model(ids, mask).logits, b.model(ids, mask).logits)


def test_history_and_metadata_are_kept(tiny_checkpoint):
    c = load_checkpoint(tiny_checkpoint)
    assert [h["epoch"] for h in c.history] == [1, 2]
    assert {"loss", "task_loss", "budget_loss", "entropy", "beta", "val_accuracy",
            "val_mean_budget_per_layer", "val_head_entropy"} <= set(c.history[0])
    assert c.meta["dataset"] == "synthetic"
    assert 0.0 <= c.meta["test"]["accuracy"] <= 1.0


@pytest.fixture
def broken(tiny_checkpoint, tmp_path):
    dst = tmp_path / "broken"
    shutil.copytree(tiny_checkpoint, dst)
    return dst


def test_truncated_weights(broken):
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(broken)


def test_garbage_weights(broken):
    (broken / "model.safetensors").write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(broken)


def test_mismatched_config(broken):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"]["d_ff"] *= 2
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="shape"):
        load_checkpoint(broken)


def test_unknown_config_key(broken):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"]["turbo"] = True
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="turbo"):
        load_checkpoint(broken)


def test_bad_json_missing_files_and_wrong_path(broken, tmp_path):
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json"):
        load_checkpoint(broken)
    (broken / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        load_checkpoint(broken)
    with pytest.raises(CheckpointError, match="not a directory"):
        load_checkpoint(tmp_path / "nowhere")
