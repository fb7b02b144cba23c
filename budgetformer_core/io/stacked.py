"""Low-rank changes stacked on a warm start's, stored once.

A low-rank fine-tune warm-started from another low-rank checkpoint (``train --init D --set
lora_rank=r``: bba or BudgetFormer trained from a dense fine-tune with the encoder adapting)
carries both changes side by side, [A₀; A] and [B₀ B] (:func:`budgetformer_core.model.low_rank.merge`).
A₀ and B₀ are exactly what D stores, so the checkpoint stores only A and B and names D in
config.json's ``backbone.lowrank_init``: D's folder relative to its own, the sha256 of D's
``model.safetensors`` and D's rank. Loading reads D's factors (and, should D stack on another,
that one's) and puts the two side by side again: the weights are those of a checkpoint that
stored both. As an adapter does with its base, a checkpoint that stacks on D needs D where it
names it, unchanged; a missing or changed D is refused in one line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from ..model.low_rank import LOW_RANK_A, LOW_RANK_B, Factors
from .files import CheckpointError, file_sha256, read_json

KEY = "lowrank_init"
"""The entry of config.json's ``backbone`` that names the checkpoint whose factors come first."""
MAX_DEPTH = 8
"""How many checkpoints a chain of stacked changes may pass through (a loop is refused)."""


def stored_factors(folder: Path, sha256: str | None = None, depth: int = 0) -> Factors:
    """Every low-rank factor pair the checkpoint ``folder`` stands for: its own, after those of
    the checkpoint it stacks on. ``sha256``: what its ``model.safetensors`` must hash to."""
    if depth > MAX_DEPTH:
        raise CheckpointError(f"{folder}: more than {MAX_DEPTH} checkpoints stack their low-rank changes (a loop?)")
    weights = folder / "model.safetensors"
    try:
        if sha256 is not None and file_sha256(weights) != sha256:
            raise CheckpointError(f"{weights} is not the one the low-rank changes were stacked on (its sha256 differs)")
        config = read_json(folder / "config.json")
        backbone = config.get("backbone") if isinstance(config, dict) else None
        names = backbone.get("lowrank") if isinstance(backbone, dict) else None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CheckpointError(f"{folder / 'config.json'} lists no low-rank changes (backbone.lowrank)")
        with safe_open(str(weights), "pt") as f:
            own = {n: (f.get_tensor(n + LOW_RANK_A).float(), f.get_tensor(n + LOW_RANK_B).float()) for n in names}
    except (OSError, SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{folder}: its low-rank changes cannot be read: {e}") from None
    return join(folder, backbone, own, depth)


def join(folder: Path, backbone: dict[str, Any], own: Factors, depth: int = 0) -> Factors:
    """``own`` (read from ``folder``) after the factors of the checkpoint that ``backbone``'s
    :data:`KEY` names; ``own`` itself without one."""
    entry = backbone.get(KEY)
    if entry is None:
        return own
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not isinstance(
            entry.get("sha256"), str) or not isinstance(entry.get("rank"), int):
        raise CheckpointError(f"{folder / 'config.json'}: backbone.{KEY} must give the path, sha256 and rank of "
                              "the checkpoint its low-rank changes stack on")
    init = folder / entry["path"]
    if not (init / "model.safetensors").is_file():
        raise CheckpointError(f"{folder}: its low-rank changes stack on {init}'s, which is not there "
                              f"(keep {Path(entry['path']).name} where it was)")
    earlier = stored_factors(init, entry["sha256"], depth + 1)
    out = {}
    for name, (a, b) in own.items():
        if name not in earlier or earlier[name][0].shape[0] != entry["rank"] or \
                earlier[name][0].shape[1] != a.shape[1] or earlier[name][1].shape[0] != b.shape[0]:
            raise CheckpointError(f"{folder}: {init} holds no rank-{entry['rank']} change to {name} to stack on")
        out[name] = (torch.cat([earlier[name][0], a]), torch.cat([earlier[name][1], b], dim=1))
    return out


def split(model: Any, factors: Factors, path: Path, dtype: torch.dtype) -> tuple[dict[str, Any] | None, Factors]:
    """The :data:`KEY` entry and the factors to store for ``factors`` (the model's, to be saved
    in ``path``): where the model was warm-started from a low-rank checkpoint
    (``model.low_rank_from``) whose factors, as ``dtype``, begin each of ``factors`` exactly, only
    what follows them; otherwise (None, ``factors``)."""
    init = getattr(model, "low_rank_from", None)
    if init is None or not factors:
        return None, factors
    try:
        earlier = stored_factors(Path(init))
    except CheckpointError:  # gone or changed since: everything is stored
        return None, factors
    ranks = {e[0].shape[0] for e in earlier.values()}
    if len(ranks) != 1:
        return None, factors
    r = ranks.pop()
    for name, (a, b) in factors.items():
        if name not in earlier or a.shape[0] <= r or not (
                torch.equal(a[:r].to(dtype), earlier[name][0].to(dtype))
                and torch.equal(b[:, :r].to(dtype), earlier[name][1].to(dtype))):
            return None, factors
    entry = {"path": Path(os.path.relpath(os.path.abspath(init), os.path.abspath(path))).as_posix(),
             "sha256": file_sha256(Path(init) / "model.safetensors"), "rank": r}
    return entry, {name: (a[r:], b[:, r:]) for name, (a, b) in factors.items()}
