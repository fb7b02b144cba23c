"""Train a dataset's dense and BudgetFormer models over several seeds; print the README table.

    python scripts/seed_table.py --dataset bbc --seeds 0 1 2 [--out runs/seeds]

Each run is an ordinary ``budgetformer train`` (same recipe, only ``seed`` differs); the table
reports test accuracy, mean budget s, heads used and FLOPs, averaged over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def train(dataset: str, variant: str, seed: int, out: Path) -> dict:
    if not (out / "config.json").is_file() or "test" not in json.loads((out / "config.json").read_text()):
        subprocess.run([sys.executable, "-m", "budgetformer_core.cli", "train", "--dataset", dataset,
                        "--variant", variant, "--out", str(out), "--set", f"seed={seed}", "--quiet"], check=True)
    meta = json.loads((out / "config.json").read_text())
    return {**meta["test"], "seconds": meta.get("train_seconds", float("nan"))}


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
