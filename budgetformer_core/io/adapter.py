"""Adapters: allocation networks fitted on top of a frozen model, stored apart from it.

``budgetformer fit-budget`` (:mod:`budgetformer_core.train.fit`) trains only a model's allocation
networks — BudgetFormer's f_θ and g_φ per layer, or bba's gates — on a base that stays exactly as
it is: one of our dense checkpoints or a Hugging Face classifier's folder. What it writes is an
adapter folder:

* ``model.safetensors``: the allocators' tensors alone (``layers.<l>.alloc.…``, float32: a few
  hundred kB), never a tensor of the base;
* ``config.json``: ``format_version``, the fitted model's config (``model``: the base's shape
  with the method's settings), ``label_names`` (the base's), the sha256 of ``model.safetensors``,
  and ``adapter.base``: the base's ``name`` (its folder's name, a shipped model's name for a
  shipped base), its ``path`` relative to the adapter's folder, and the ``sha256`` of its
  ``model.safetensors``; beside them what the fit recorded (command, data, settings, test);
* ``history.json``: a row per epoch of the fit.

:func:`~budgetformer_core.io.loader.load_checkpoint` opens an adapter folder as it opens a model:
it finds the base (:func:`read_adapter`), refuses it in one line if its weights are not those the
adapter was fitted on, loads it, and puts the adapter's networks on it (:func:`attach`). The
model is then a BudgetFormer (or bba) model like a trained one, whose logits at a budget that
buys every head are the base's.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..config import model_config_from_dict, to_dict
from ..model.encoder import BudgetFormer
from .checkpoint import FORMAT_VERSION, Checkpoint, _sibling, _swap_in
from .files import CheckpointError, file_sha256, json_safe, read_json

ADAPTER_KEY = "adapter"
"""The config.json entry that makes a folder an adapter (it holds ``base``)."""
WEIGHTS = "model.safetensors"
WRITTEN = (WEIGHTS, "config.json", "history.json")
"""Every file :func:`save_adapter` writes; a folder holding anything else is not replaced."""
BACKBONE_KEYS = ("source", "package", "path", "sha256")
"""What an adapter's config.json repeats of its base's ``backbone`` entry (the pretrained encoder
under the base), so that the pages name it without opening the base."""
INPUT_KEYS = ("backbone", "pair_columns", "classifier")
"""What an opened adapter takes from its base's config.json: how the base reads its input (the
pretrained encoder under it, a pair task's two columns, a Hugging Face classifier's text handling)."""
ALLOCATION_FIELDS = ("budget_hidden", "tau", "summary_norm", "gate_temperature", "shared_budget", "gate_input",
                     "gate_source", "default_budget", "use_budget_net", "head_choice", "fixed_budget",
                     "head_weighting")
"""The ModelConfig fields in which an adapter's model may differ from its base (besides its
method): how its allocators are built and run. Every other field is the base's."""


def allocator_tensors(model: BudgetFormer) -> dict[str, torch.Tensor]:
    """The tensors of ``model``'s allocators (f_θ, g_φ, their summary norm, bba's gates), by
    their names in the model, as separate float32 copies (layers that share one network each
    get their own copy, which safetensors requires)."""
    return {name: (t.float() if t.is_floating_point() else t).detach().cpu().clone().contiguous()
            for name, t in model.state_dict().items() if ".alloc." in name}


def is_adapter(path: Path) -> bool:
    """True when ``path/config.json`` is an adapter's (a JSON object with an ``adapter`` entry)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and ADAPTER_KEY in config


def base_record(base: Checkpoint, adapter_dir: Path) -> dict[str, str]:
    """How an adapter at ``adapter_dir`` names ``base``: its folder's name, its path relative to
    the adapter's folder, and the sha256 of its weights."""
    if base.path is None:
        raise ValueError("the base was not opened from a folder: an adapter names its base by its folder")
    where = os.path.relpath(os.path.abspath(base.path), os.path.abspath(adapter_dir))
    return {"name": Path(os.path.abspath(base.path)).name, "path": Path(where).as_posix(),
            "sha256": file_sha256(Path(base.path) / WEIGHTS)}


def check_out(path: str | Path, force: bool = False) -> Path:
    """Raise :class:`CheckpointError` unless an adapter can be written to ``path``: an existing
    file, a folder holding other files than an adapter's, or (without ``force``) an adapter
    already there are refused."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"--out {path} is an existing file, not a folder")
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if names and not names <= set(WRITTEN):
        raise CheckpointError(f"--out {path} is a folder holding other files; choose a new or empty folder")
    if names and not force:
        raise CheckpointError(f"--out {path} already holds an adapter; pass --force to replace it")
    return path


def save_adapter(path: str | Path, model: BudgetFormer, base: Checkpoint, meta: dict[str, Any],
                 history: list[dict[str, Any]]) -> Path:
    """Write ``model``'s allocators as an adapter of ``base`` to ``path`` (see the module
    docstring). The files go to a folder beside ``path`` first and are renamed into place, so an
    interrupted save leaves an earlier adapter whole."""
    path = Path(path)
    check_out(path, force=True)
    tensors = allocator_tensors(model)
    if not tensors:
        raise ValueError(f"a {model.cfg.method} model has no allocation networks to store")
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"weight {bad[0]} holds NaN or infinity; nothing was written")
    backbone = base.meta.get("backbone")
    config = {"format_version": FORMAT_VERSION, "model": to_dict(model.cfg), "label_names": list(base.label_names),
              **meta, ADAPTER_KEY: {"base": base_record(base, path)}}
    if isinstance(backbone, dict):
        config["backbone"] = {k: backbone[k] for k in BACKBONE_KEYS if k in backbone}
    # how it reads its input, said in its own config.json for readers that do not open the base (the app)
    config.update({k: base.meta[k] for k in INPUT_KEYS if k != "backbone" and k in base.meta})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    tmp.mkdir()
    try:
        save_file(tensors, str(tmp / WEIGHTS), metadata={"format_version": str(FORMAT_VERSION)})
        (tmp / "history.json").write_text(json.dumps(json_safe(history), indent=1) + "\n")
        os.chmod(tmp / WEIGHTS, (tmp / "history.json").stat().st_mode & 0o777)
        config["sha256"] = {WEIGHTS: file_sha256(tmp / WEIGHTS)}
        (tmp / "config.json").write_text(json.dumps(json_safe(config), indent=2, sort_keys=True) + "\n")
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


@dataclass
class Adapter:
    """An adapter folder as read, before its base is opened (:func:`read_adapter`)."""

    path: Path
    config: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    base: Path
    """Where its base lies (the recorded path, from the adapter's folder)."""


def read_adapter(path: Path) -> Adapter:
    """The adapter at ``path``, its base found and checked: the base's weights must be the ones
    the adapter was fitted on (their sha256), so a changed base is refused here, in one line.

    Raises:
        CheckpointError: a file missing, damaged or changed; a base that is not there, is an
            adapter itself, or has other weights than recorded.
    """
    config = read_json(path / "config.json")
    record = config.get(ADAPTER_KEY, {}).get("base") if isinstance(config.get(ADAPTER_KEY), dict) else None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("path", "sha256")):
        raise CheckpointError(f"{path / 'config.json'}: adapter.base must give the base's path and sha256")
    weights = path / WEIGHTS
    if not weights.is_file():
        raise CheckpointError(f"adapter {path} lacks {WEIGHTS}")
    recorded = (config.get("sha256") or {}).get(WEIGHTS)
    if recorded is not None and file_sha256(weights) != recorded:
        raise CheckpointError(f"{weights} has changed since the adapter was written: its sha256 is not the one "
                              "config.json records")
    try:
        tensors = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{weights} is corrupt or truncated: {e}") from None
    base = path / record["path"]
    name = record.get("name") or base.name
    if not (base / WEIGHTS).is_file():
        raise CheckpointError(f"adapter {path}: its base {name} is not at {base} (no {WEIGHTS}); put the model "
                              f"whose weights have sha256 {record['sha256'][:16]}… there")
    if is_adapter(base):
        raise CheckpointError(f"adapter {path}: its base {base} is an adapter itself; an adapter sits on a model")
    digest = file_sha256(base / WEIGHTS)
    if digest != record["sha256"]:
        raise CheckpointError(f"adapter {path} was fitted on another {name}: {base / WEIGHTS} has sha256 "
                              f"{digest[:16]}…, the adapter's base {record['sha256'][:16]}…; fit it again on "
                              "this base (budgetformer fit-budget) or restore the base")
    return Adapter(path, config, tensors, base)


def attach(adapter: Adapter, base: Checkpoint) -> Checkpoint:
    """``base`` (opened from ``adapter.base``) with the adapter's networks: a model of the
    adapter's config holding the base's weights and the adapter's allocators.

    Raises:
        CheckpointError: a base of another shape, classes or method than the adapter's, or
            tensors that do not match the adapter's config.
    """
    path, config = adapter.path, adapter.config
    try:
        cfg = model_config_from_dict(config["model"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path / 'config.json'} is not a valid adapter config: {e}") from None
    if base.model.method.budgeted or base.config.kept_heads is not None:
        raise CheckpointError(f"adapter {path}: its base {adapter.base} is not a dense model with all its heads")
    if _shape(cfg) != _shape(base.config) or config.get("label_names") != list(base.label_names):
        raise CheckpointError(f"adapter {path}: its base {adapter.base} has another shape or other classes "
                              "than the adapter was fitted on")
    model = BudgetFormer(cfg)
    expected = {k: v for k, v in model.state_dict().items() if ".alloc." in k}
    if set(adapter.tensors) != set(expected) or any(v.shape != expected[k].shape for k, v in adapter.tensors.items()):
        raise CheckpointError(f"{path / WEIGHTS}: its tensors do not match config.json's model")
    state = {**base.model.state_dict(), **{k: v.to(expected[k].dtype) for k, v in adapter.tensors.items()}}
    model.load_state_dict(state)  # strict: the base's tensors and the adapter's are all of them
    history_path = path / "history.json"
    history = read_json(history_path) if history_path.is_file() else []
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise CheckpointError(f"{history_path} must be a list of per-epoch records (JSON objects)")
    meta = {k: v for k, v in config.items() if k not in ("model", "label_names", "format_version", "sha256")}
    # how the base reads its input: its encoder, the two columns of a pair task, a classifier's text handling
    meta.update({k: base.meta[k] for k in INPUT_KEYS if k in base.meta})
    return Checkpoint(model.eval(), base.tokenizer, list(base.label_names), meta, history, path)


def _shape(cfg) -> dict[str, Any]:
    """What of a model config an adapter takes from its base: all but the method and
    :data:`ALLOCATION_FIELDS`."""
    return {k: v for k, v in to_dict(cfg).items() if k not in ("variant", *ALLOCATION_FIELDS)}
