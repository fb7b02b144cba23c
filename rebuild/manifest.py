"""``precomputed/manifest.json``: every file with its sha256 and size, and every shipped run.

Each shipped run is listed with its command, seed and accuracy on a slice of the test split
(which ``tests/core/test_manifest.py`` reproduces); beside them how each dataset was timed,
library versions and the machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from budgetformer_core.shipped import MANIFEST, relative

from .jobs import OUT, ROOT, Job
from .measure import local_copy
from .recipes import DATA_ROOT

SLICE = 200
"""Test rows each shipped checkpoint is re-evaluated on by the manifest test."""
MADE_BY = "make precompute (python -m rebuild)"


def slice_accuracy(path: Path, data: Path | None) -> float:
    """The checkpoint's accuracy on the first :data:`SLICE` rows of its test split."""
    from budgetformer_core.analysis.infer import evaluate_split
    from budgetformer_core.io.data import load_dataset
    from budgetformer_core.io.loader import load_checkpoint

    ckpt = load_checkpoint(ROOT / path)
    split = load_dataset(ckpt.meta["dataset"], data, seed=ckpt.meta.get("split_seed", 0)).split("test")
    return evaluate_split(ckpt, split.head(SLICE)).accuracy


def merged_timing(old: dict, new: dict) -> dict:
    """The manifest's timing entries: ``new`` over ``old``. An entry is a dataset timed whole
    (``bbc``) or one model re-timed alone beside its dense reference (``bbc-minilm-dense``); a
    dataset timed whole drops the older entries of its models."""
    whole = [name for name in new if "-" not in name]
    kept = {name: e for name, e in old.items() if not any(name.startswith(f"{ds}-") for ds in whole)}
    return {**kept, **new}


def write_manifest(jobs: list[Job], timing: dict | None = None, data_root: str | Path = DATA_ROOT) -> dict:
    """precomputed/manifest.json: every file with sha256 and size, every run with its command, and
    how latency was timed (``timing``: this run's entries, merged into the old ones by
    :func:`merged_timing`).

    A run whose checkpoint files and command are those the old manifest lists keeps its slice
    accuracy (the same files give the same predictions); the others are evaluated afresh."""
    import platform

    import safetensors
    import tokenizers
    import torch

    from budgetformer_core.io.files import file_sha256
    from budgetformer_core.measure.timing import machine_info

    path = ROOT / relative(MANIFEST)
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    files = {}
    for file in sorted((ROOT / OUT).rglob("*")):
        rel = file.relative_to(ROOT).as_posix()
        if file.is_file() and rel != relative(MANIFEST).as_posix():
            files[rel] = {"sha256": file_sha256(file), "bytes": file.stat().st_size}
    runs = {}
    for job in jobs:
        if not job.shipped or not (ROOT / job.out / "config.json").is_file():
            continue
        config = json.loads((ROOT / job.out / "config.json").read_text())
        before = old.get("runs", {}).get(job.key, {})
        mine = {k: v for k, v in files.items() if k.startswith(f"{job.out.as_posix()}/")}
        same = bool(mine) and before.get("command") == config.get("command") and all(
            old.get("files", {}).get(k) == v for k, v in mine.items())
        accuracy = before["slice_accuracy"] if same and "slice_accuracy" in before else round(
            slice_accuracy(job.out, local_copy(job.dataset, data_root)), 6)
        runs[job.key] = {
            "path": str(job.out), "command": config.get("command"), "seed": config.get("train", {}).get("seed", 0),
            "split_seed": config.get("split_seed", 0), "test_accuracy": config.get("test", {}).get("accuracy"),
            "slice_rows": SLICE, "slice_accuracy": accuracy,
        }
    manifest = {
        "made_by": MADE_BY,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__,
                     "numpy": np.__version__, "pandas": pd.__version__},
        "machine": machine_info(1).cpu_model,
        "timing": merged_timing(old.get("timing", {}), timing or {}),
        "total_bytes": sum(f["bytes"] for f in files.values()),
        "runs": runs,
        "files": files,
    }
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest
