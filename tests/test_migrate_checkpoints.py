"""scripts/migrate_checkpoints.py: a checkpoint of the older layout, rewritten, loads to the same
weights and states its layout; a current checkpoint is left as it is."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from budgetformer_core.io.loader import load_checkpoint
from tests.core.test_checkpoint import older_layout

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import migrate_checkpoints  # noqa: E402  (scripts/ is not a package)


def test_an_older_checkpoint_is_rewritten_to_the_same_weights(tiny_checkpoint, tmp_path):
    path = tmp_path / "older"
    shutil.copytree(tiny_checkpoint, path)
    older_layout(path)
    changes = migrate_checkpoints.migrate(path)
    assert changes[:2] == ["head_weighting=scaled", "gate_source=layer"] and "budget_nets.0." in changes[2]
    cfg = json.loads((path / "config.json").read_text())
    assert (cfg["model"]["head_weighting"], cfg["model"]["gate_source"]) == ("scaled", "layer")
    before, after = load_checkpoint(tiny_checkpoint).model.state_dict(), load_checkpoint(path).model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    files = {p.name: p.read_bytes() for p in path.iterdir()}
    assert migrate_checkpoints.migrate(path) == [] and files == {p.name: p.read_bytes() for p in path.iterdir()}
    assert migrate_checkpoints.migrate(tiny_checkpoint) == []  # today's layout: nothing to do
