"""Train a dataset's dense and BudgetFormer models over several seeds; print the README table.

    python scripts/seed_table.py --dataset bbc --seeds 0 1 2 [--out runs/seeds]

Each run is an ordinary ``budgetformer train`` (same recipe, only ``seed`` differs); the table
reports test accuracy, mean budget s, heads used and FLOPs, averaged over the seeds, and the
wall-clock time of each training subprocess as timed by this script.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def train(dataset: str, variant: str, seed: int, out: Path) -> dict:
    """Train one run unless its checkpoint exists; its test metrics and wall-clock training time.

    The time is measured here, around the subprocess, and kept in ``train_seconds.json`` beside
    the run folders (checkpoints hold no time-dependent values); a run trained before it was
    recorded reports NaN.
    """
    times_file = out.parent / "train_seconds.json"
    times = json.loads(times_file.read_text()) if times_file.is_file() else {}
    if not (out / "config.json").is_file() or "test" not in json.loads((out / "config.json").read_text()):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "budgetformer_core.cli", "train", "--dataset", dataset,
                        "--variant", variant, "--out", str(out), "--set", f"seed={seed}", "--quiet", "--force"],
                       check=True)
        times[out.name] = time.perf_counter() - start
        times_file.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    meta = json.loads((out / "config.json").read_text())
    return {**meta["test"], "seconds": times.get(out.name, float("nan"))}


def fmt(values: list[float], pct: bool = True) -> str:
    scale = 100 if pct else 1
    mean = statistics.mean(values) * scale
    sd = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {sd:.2f}" if pct else f"{mean:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="bbc")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("runs/seeds"))
    args = ap.parse_args()
    print("| model | test accuracy % (mean ± sd) | per seed | mean s | heads used | FLOPs vs dense | train time (s) |")
    print("|---|---|---|---|---|---|---|")
    for variant in ("dense", "budgetformer"):
        runs = [train(args.dataset, variant, s, args.out / f"{args.dataset}-{variant}-seed{s}") for s in args.seeds]
        acc = [r["accuracy"] for r in runs]
        mean = {k: fmt([r[k] for r in runs], False) for k in ("mean_budget", "mean_heads_fraction", "flops_ratio")}
        print(f"| {variant} | {fmt(acc)} | {', '.join(f'{a * 100:.1f}' for a in acc)} | {mean['mean_budget']} | "
              f"{mean['mean_heads_fraction']} | {mean['flops_ratio']} | "
              f"{statistics.mean(r['seconds'] for r in runs):.0f} |")


if __name__ == "__main__":
    main()
