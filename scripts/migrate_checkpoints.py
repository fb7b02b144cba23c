"""Rewrite checkpoints of the older layout so that they state it explicitly.

    python scripts/migrate_checkpoints.py [CHECKPOINT ...]   # default: precomputed/checkpoints/*

The engine reads a checkpoint only when config.json's ``model`` section states ``head_weighting``
and ``gate_source`` and model.safetensors names every tensor as :class:`BudgetFormer` does. An
older checkpoint lacks one or both:

- ``model`` without ``head_weighting`` / ``gate_source``: it was trained with w = s·H·p and
  gates on each layer's input, so they are written as ``"scaled"`` and ``"layer"``;
- tensors ``budget_nets.i.*``, ``scorers.i.*``, ``gates.i.*`` (the networks of pair i) are
  renamed ``layers.j.alloc.budget_net.*``, ``layers.j.alloc.scorer.*``, ``layers.j.alloc.gate.*``
  for the layer j that uses them (every layer, for f_θ and g_φ shared by all layers). The
  tensors themselves are unchanged.

config.json then records the sha256 of the rewritten files. A checkpoint that needs neither
change is not written, so running the script twice changes nothing the second time. It prints
one line per checkpoint it rewrites.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save_file

from budgetformer_core.io.checkpoint import HASHED
from budgetformer_core.io.files import file_sha256
from budgetformer_core.shipped import CHECKPOINTS

OLDER_FIELDS = {"head_weighting": "scaled", "gate_source": "layer"}
"""What a model section without these keys was trained with."""
OLDER_PREFIXES = {"budget_nets.": "alloc.budget_net.", "scorers.": "alloc.scorer.", "gates.": "alloc.gate."}
"""Tensor name prefixes of the older layout → the name under each layer."""


def renamed_tensors(tensors: dict, n_layers: int, shared_budget: bool) -> dict:
    """``tensors`` under today's names (a network shared by every layer: one copy per layer)."""
    out = {}
    for key, tensor in tensors.items():
        old = next((o for o in OLDER_PREFIXES if key.startswith(o)), None)
        if old is None:
            out[key] = tensor
            continue
        pair, _, name = key[len(old):].partition(".")
        shared = shared_budget and old != "gates."  # the gates are per layer even then
        for j in range(n_layers) if shared else [int(pair)]:
            out[f"layers.{j}.{OLDER_PREFIXES[old]}{name}"] = tensor.clone()
    return out


def migrate(path: Path) -> list[str]:
    """Rewrite the checkpoint folder ``path`` in place if it is of the older layout; returns what changed."""
    config_path, weights_path = path / "config.json", path / "model.safetensors"
    config = json.loads(config_path.read_text())
    model = config["model"]
    changes = [f"{k}={v}" for k, v in OLDER_FIELDS.items() if k not in model]
    model.update({k: v for k, v in OLDER_FIELDS.items() if k not in model})
    tensors = load_file(str(weights_path))
    renamed = renamed_tensors(tensors, model["n_layers"], model.get("shared_budget", False))
    if set(renamed) != set(tensors):
        changes.append(f"tensors {sorted(set(tensors) - set(renamed))} -> {sorted(set(renamed) - set(tensors))}")
        with safe_open(str(weights_path), "pt") as f:
            metadata = f.metadata()
        mode = weights_path.stat().st_mode & 0o777
        tmp = weights_path.with_name(".model.safetensors.tmp")
        save_file(renamed, str(tmp), metadata=metadata)
        os.chmod(tmp, mode)
        os.replace(tmp, weights_path)
    if not changes:
        return []
    config["sha256"] = {name: file_sha256(path / name) for name in HASHED}
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return changes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="checkpoint folders (default: every shipped one)")
    args = p.parse_args(argv)
    folders = args.checkpoints or sorted(c.parent for c in CHECKPOINTS.glob("*/config.json"))
    for folder in folders:
        if "backbone" in json.loads((folder / "config.json").read_text()):
            continue  # fine-tuned from a pretrained encoder: written in today's layout
        changes = migrate(folder)
        if changes:
            print(f"{folder}: {'; '.join(changes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
