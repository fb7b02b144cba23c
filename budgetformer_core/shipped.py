"""The shipped models and precomputed/'s layout: what manifest.json lists, found by name from any
folder, where each file of precomputed/ and benchmarks/ is, and the dense reference of a model.

Every reader and writer of precomputed/ (the CLI, the app, the rebuild, the scripts) asks here
for its paths; the functions read :data:`CHECKPOINTS`, :data:`RESULTS` and :data:`MANIFEST` when
they are called, so a test can point one of them elsewhere.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The project folder: precomputed/ and benchmarks/ are in it, and the rebuild records its paths
relative to it (:func:`relative`)."""
PRECOMPUTED = ROOT / "precomputed"
"""The shipped models (manifest.json, checkpoints/) and their results (results/sweeps.csv)."""
MANIFEST = PRECOMPUTED / "manifest.json"
"""What the rebuild wrote: every file under precomputed/ with its sha256, and every shipped run."""
CHECKPOINTS = PRECOMPUTED / "checkpoints"
"""One folder per shipped model, named ``<dataset>-<model>`` (:func:`model_name`)."""
RESULTS = PRECOMPUTED / "results"
"""The measured results: sweeps.csv, seeds.csv, run_times.csv, per_example/ (tables and relevance), history/."""
BENCHMARKS = ROOT / "benchmarks"
"""Shipped measurements beside precomputed/: length sweeps, batch breakdowns, latency-check.json."""

PRETRAINED = ("minilm",)
"""Model-name prefixes of the models built on a pretrained encoder (``<dataset>-minilm-bba``, …)."""

CHECKPOINT_OPTIONS = ("checkpoint", "init", "reference")
"""The options that name a checkpoint: a folder, or a shipped model by name."""


def model_name(dataset: str, model: str) -> str:
    """The full name of ``model`` of ``dataset`` (its name in sweeps.csv): ``bbc`` and
    ``minilm-bba`` → ``bbc-minilm-bba``, the name of its folder under checkpoints/ and of its
    per-example table, as the CLI and the app call it."""
    return f"{dataset}-{model}"


def dense_reference(dataset: str, name: str, full: bool = False) -> str:
    """The dense model a model of ``dataset`` is timed and compared with (its name in sweeps.csv):
    the dense fine-tune of the same pretrained encoder for a model built on one
    (``minilm-bba`` → ``minilm-dense``), else the dataset's dense model trained from scratch.

    ``name`` is the model's name in sweeps.csv or its full name (``bbc-minilm-bba``); ``full``:
    the reference's full name (``bbc-minilm-dense``, :func:`model_name`)."""
    family = name.removeprefix(f"{dataset}-").split("-")[0]
    reference = f"{family}-dense" if family in PRETRAINED else "dense"
    return model_name(dataset, reference) if full else reference


def checkpoint_dir(name: str) -> Path:
    """The folder of shipped model ``name`` (a full name) under checkpoints/."""
    return CHECKPOINTS / name


def sweeps_csv() -> Path:
    """results/sweeps.csv: a row per model and budget (accuracy, cost, latency)."""
    return RESULTS / "sweeps.csv"


def seeds_csv() -> Path:
    """results/seeds.csv: the test accuracy of the seed runs (``scripts/seed_table.py``)."""
    return RESULTS / "seeds.csv"


def run_times_csv() -> Path:
    """results/run_times.csv: the wall time of every run the rebuild made."""
    return RESULTS / "run_times.csv"


def histories() -> Path:
    """results/history/: each shipped model's history.json, as ``<name>.json``."""
    return RESULTS / "history"


def per_example_dir() -> Path:
    """results/per_example/: a table per shipped model, a row per test input."""
    return RESULTS / "per_example"


def per_example_path(name: str) -> Path:
    """The per-example test table of shipped model ``name`` (a full name)."""
    return per_example_dir() / f"{name}.parquet"


def relevance_path(name: str) -> Path:
    """The head relevance p of shipped model ``name`` on its test split, beside its per-example
    table: an (N, L, H) float16 ``.npy`` array (input, layer, head), its rows those of the table."""
    return per_example_dir() / f"{name}.relevance.npz"


def length_sweep_path(name: str) -> Path:
    """benchmarks/<name>-lengths.json: ``budgetformer bench --seq-lens … --json`` of shipped model
    ``name``, its cost at each input length."""
    return BENCHMARKS / f"{name}-lengths.json"


def relative(path: Path) -> Path:
    """``path`` relative to the project folder, as the rebuild runs its commands and records them."""
    return path.relative_to(ROOT)


def shipped_runs() -> dict[str, dict]:
    """The runs precomputed/manifest.json lists, by model name (empty without a manifest)."""
    return dict(sorted(json.loads(MANIFEST.read_text())["runs"].items())) if MANIFEST.is_file() else {}


def shipped_models() -> dict[str, Path]:
    """Name → folder of every shipped model."""
    return {name: ROOT / run["path"] for name, run in shipped_runs().items()}


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
    from .model.budget import ABLATIONS  # torch: only when the table is asked for

    sweeps = sweeps_csv()
    own = {}
    if sweeps.is_file():
        with sweeps.open(newline="") as f:
            own = {model_name(r["dataset"], r["model"]): r for r in csv.DictReader(f) if r["budget"] == "own"}
    rows = []
    for name, run in shipped_runs().items():
        r = own.get(name, {})
        model, method = r.get("model"), r.get("variant")  # sweeps.csv's column of the method
        detail = ABLATIONS[model].split(":")[0] if model in ABLATIONS else (model or "").removeprefix(f"{method}-")
        rows.append({"name": name, "dataset": r.get("dataset"),
                     "method": None if not r else method if model == method else f"{method} ({detail})",
                     "accuracy": run.get("test_accuracy"),
                     "heads_run": float(r["heads_fraction"]) if r.get("heads_fraction") else None,
                     "path": run["path"]})
    return rows
