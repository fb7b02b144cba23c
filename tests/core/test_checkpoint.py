"""Checkpoints round-trip bit-exactly and bad ones fail with a clear message."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from budgetformer_core.io.checkpoint import check_out_dir, save_checkpoint
from budgetformer_core.io.files import CheckpointError
from budgetformer_core.io.loader import load_checkpoint


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


def test_config_json_with_nan_is_refused(broken):
    text = (broken / "config.json").read_text()
    cfg = json.loads(text)
    cfg["model"]["tau"] = float("nan")
    (broken / "config.json").write_text(json.dumps(cfg))  # json writes a bare NaN
    with pytest.raises(CheckpointError, match="NaN"):
        load_checkpoint(broken)


@pytest.mark.parametrize("field, value, message", [
    ("max_len", 8_000_000, "max_len must be <= 65,536"),
    ("n_heads", "4", "n_heads must be an integer"),
    ("vocab_size", 1, "vocab_size must be >= 3"),
])
def test_config_json_sizes_and_types_are_checked_at_load(broken, field, value, message):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"][field] = value
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(broken)


def test_save_replaces_a_checkpoint_atomically_and_refuses_nan_weights(broken):
    c = load_checkpoint(broken)
    before = {p.name: p.read_bytes() for p in broken.iterdir()}
    with torch.no_grad():
        next(c.model.parameters()).fill_(float("nan"))
    with pytest.raises(CheckpointError, match="NaN or infinity"):
        save_checkpoint(broken, c.model, c.tokenizer, c.label_names, c.meta, c.history)
    assert {p.name: p.read_bytes() for p in broken.iterdir()} == before  # the good checkpoint is whole
    good = load_checkpoint(broken)
    save_checkpoint(broken, good.model, good.tokenizer, good.label_names, {**good.meta, "note": "again"}, good.history)
    assert load_checkpoint(broken).meta["note"] == "again"
    assert sorted(p.name for p in broken.parent.iterdir()) == ["broken"]  # no temporary folders left


def test_save_never_replaces_a_folder_of_other_files(tiny_checkpoint, tmp_path):
    c = load_checkpoint(tiny_checkpoint)
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match="other than a checkpoint"):
        save_checkpoint(tmp_path, c.model, c.tokenizer, c.label_names)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_check_out_dir(tiny_checkpoint, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="existing file"):
        check_out_dir(tmp_path / "file")
    with pytest.raises(CheckpointError, match="is a file, not a folder"):
        check_out_dir(tmp_path / "file" / "ckpt")
    with pytest.raises(CheckpointError, match="already holds a checkpoint"):
        check_out_dir(tiny_checkpoint)
    assert check_out_dir(tiny_checkpoint, force=True) == tiny_checkpoint
    with pytest.raises(CheckpointError, match="holding other files"):
        check_out_dir(tmp_path, force=True)
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):
        pytest.skip("running as a user who may write anywhere")
    with pytest.raises(CheckpointError, match="not writable"):
        check_out_dir(locked / "ckpt")


def test_config_records_the_sha256_of_weights_and_tokenizer(tiny_checkpoint):
    from budgetformer_core.io.checkpoint import HASHED
    from budgetformer_core.io.files import file_sha256

    recorded = json.loads((tiny_checkpoint / "config.json").read_text())["sha256"]
    assert recorded == {name: file_sha256(tiny_checkpoint / name) for name in HASHED}
    assert "sha256" not in load_checkpoint(tiny_checkpoint).meta  # a re-save records its own files' hashes


def test_a_bit_flipped_weight_file_is_refused_by_name(broken):
    weights = broken / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # one bit of the last weight: the file still parses
    weights.write_bytes(bytes(data))
    from safetensors.torch import load_file

    load_file(str(weights))  # a valid safetensors file, only the hash tells
    with pytest.raises(CheckpointError, match=r"model\.safetensors has changed since the checkpoint was written"):
        load_checkpoint(broken)


def test_a_tokenizer_from_another_checkpoint_is_refused_by_name(broken):
    from budgetformer_core.io.tokenizer import train_tokenizer

    other = train_tokenizer(["shares rose after record profits", "the match ended in a draw"] * 5, vocab_size=200)
    (broken / "tokenizer.json").write_text(other.to_str(pretty=False) + "\n")
    with pytest.raises(CheckpointError, match=r"tokenizer\.json has changed since the checkpoint was written"):
        load_checkpoint(broken)
    cfg = json.loads((broken / "config.json").read_text())
    del cfg["sha256"]
    (broken / "config.json").write_text(json.dumps(cfg))
    assert load_checkpoint(broken).tokenizer.to_str() == other.to_str()  # only the hash tells


def test_checkpoints_without_recorded_hashes_still_load(broken):
    cfg = json.loads((broken / "config.json").read_text())
    del cfg["sha256"]  # as the shipped checkpoints, written before the hashes were recorded
    (broken / "config.json").write_text(json.dumps(cfg))
    assert load_checkpoint(broken).label_names == cfg["label_names"]
    cfg["sha256"] = {"config.json": "0" * 64}
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="sha256 must map"):
        load_checkpoint(broken)


def test_shipped_checkpoints_load_without_hashes():
    from tests.conftest import PRECOMPUTED

    path = PRECOMPUTED / "bbc-bba"
    assert "sha256" not in json.loads((path / "config.json").read_text())  # built before the hashes
    assert load_checkpoint(path).config.method == "bba"


def older_layout(path) -> None:
    """Rewrite the checkpoint at ``path`` as the older layout wrote it: no ``head_weighting`` and
    ``gate_source`` in config.json, f_θ's tensors as ``budget_nets.<layer>.*``, no hashes."""
    from safetensors.torch import load_file, save_file

    cfg = json.loads((path / "config.json").read_text())
    del cfg["model"]["head_weighting"], cfg["model"]["gate_source"], cfg["sha256"]
    (path / "config.json").write_text(json.dumps(cfg))
    tensors = load_file(str(path / "model.safetensors"))
    older = {}
    for key, tensor in tensors.items():
        layer, _, rest = key.removeprefix("layers.").partition(".alloc.budget_net.")
        older[f"budget_nets.{layer}.{rest}" if rest else key] = tensor
    save_file(older, str(path / "model.safetensors"), metadata={"format_version": "1"})


def test_a_checkpoint_of_the_older_layout_is_refused_in_one_line(broken):
    older_layout(broken)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(broken)
    assert "does not state head_weighting and gate_source" in str(e.value) and "\n" not in str(e.value)
    cfg = json.loads((broken / "config.json").read_text())
    cfg["model"].update(head_weighting="gated", gate_source="embedding")  # the fields, not the tensor names
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"weights do not match config.json \(extra \['budget_nets.0.") as e:
        load_checkpoint(broken)
    assert "\n" not in str(e.value)
