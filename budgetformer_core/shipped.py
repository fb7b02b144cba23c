"""The shipped models: what precomputed/manifest.json lists, found by name from any folder."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from .model.budget import ABLATIONS

PRECOMPUTED = Path(__file__).resolve().parents[1] / "precomputed"
"""The shipped models (manifest.json, checkpoints/) and their results (results/sweeps.csv)."""

PRETRAINED = ("minilm",)
"""Model-name prefixes of the models built on a pretrained encoder (``<dataset>-minilm-bba``, …)."""

CHECKPOINT_OPTIONS = ("checkpoint", "init", "reference")
"""The options that name a checkpoint: a folder, or a shipped model by name."""


def dense_reference(dataset: str, name: str) -> str:
    """The dense model a model of ``dataset`` is timed and compared with (its name in sweeps.csv):
    the dense fine-tune of the same pretrained encoder for a model built on one
    (``minilm-bba`` → ``minilm-dense``), else the dataset's dense model trained from scratch."""
    family = name.split("-")[0]
    return f"{family}-dense" if family in PRETRAINED else "dense"


def shipped_runs() -> dict[str, dict]:
    """The runs precomputed/manifest.json lists, by model name (empty without a manifest)."""
    manifest = PRECOMPUTED / "manifest.json"
    return dict(sorted(json.loads(manifest.read_text())["runs"].items())) if manifest.is_file() else {}


def shipped_models() -> dict[str, Path]:
    """Name → folder of every shipped model."""
    return {name: PRECOMPUTED.parent / run["path"] for name, run in shipped_runs().items()}


def resolve_checkpoint(value: str) -> str:
    """``value`` itself when it exists (a folder, or a file the loader then refuses), else the
    folder of the shipped model of that name; neither is a one-line error listing the names."""
    if Path(value).exists():
        return value
    shipped = shipped_models()
    if value in shipped:
        return str(shipped[value])
    raise ValueError(f"checkpoint {value} is not a directory nor a shipped model; the shipped models are: "
                     f"{', '.join(shipped) or 'none (precomputed/manifest.json is missing)'}")


def resolve_checkpoints(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every checkpoint option given resolved by :func:`resolve_checkpoint`."""
    for name in CHECKPOINT_OPTIONS:
        if getattr(args, name, None):
            setattr(args, name, resolve_checkpoint(getattr(args, name)))
    return args


def model_table() -> list[dict]:
    """A row per shipped model: its name, dataset, method, test accuracy and share of heads run,
    read from precomputed/manifest.json and the model's own row of results/sweeps.csv."""
    sweeps = PRECOMPUTED / "results" / "sweeps.csv"
    own = {}
    if sweeps.is_file():
        with sweeps.open(newline="") as f:
            own = {f"{r['dataset']}-{r['model']}": r for r in csv.DictReader(f) if r["budget"] == "own"}
    rows = []
    for name, run in shipped_runs().items():
        r = own.get(name, {})
        model, variant = r.get("model"), r.get("variant")
        detail = ABLATIONS[model].split(":")[0] if model in ABLATIONS else (model or "").removeprefix(f"{variant}-")
        rows.append({"name": name, "dataset": r.get("dataset"),
                     "method": None if not r else variant if model == variant else f"{variant} ({detail})",
                     "accuracy": run.get("test_accuracy"),
                     "heads_run": float(r["heads_fraction"]) if r.get("heads_fraction") else None,
                     "path": run["path"]})
    return rows
