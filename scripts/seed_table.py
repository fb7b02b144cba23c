"""Train shipped models again with other seeds; print their seed table and save it.

    python scripts/seed_table.py --dataset bbc --seeds 0 1 2 [--models dense budgetformer] [--out runs/seeds]
                                 [--csv precomputed/results/seeds.csv]

Each run is the shipped checkpoint's own recorded ``budgetformer train`` command (its recipe, so
``bbc-budgetformer`` keeps ``ADAPTIVE``) with ``--set seed=S`` added and another ``--out``;
seed 0 is the shipped checkpoint itself (every shipped model is trained with seed 0), so it is
not trained again. The table reports test accuracy (mean ± sd over the seeds and each seed's),
heads run and FLOPs, and the wall-clock time of each training subprocess as timed here.
``--csv`` writes a row per model and seed (the file the app's error bars read, see
``budgetformer_core.measure.bootstrap.read_seed_runs``); the rows of other datasets and models in it are
kept, so models run by separate invocations (e.g. side by side, each with its own ``--out``) end
up in one file.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from budgetformer_core.shipped import checkpoint_dir, model_name

ROOT = Path(__file__).resolve().parents[1]


def seed_command(shipped: Path, seed: int, out: Path) -> list[str]:
    """The shipped checkpoint's recorded train command with ``seed`` and ``out`` (no other change)."""
    argv = shlex.split(json.loads((shipped / "config.json").read_text())["command"])[1:]  # drop "budgetformer"
    if "--out" not in argv:
        raise ValueError(f"{shipped}/config.json records no --out in its command")
    argv[argv.index("--out") + 1] = str(out)
    if any(a.startswith("seed=") for a in argv):
        raise ValueError(f"{shipped}/config.json already sets a seed: {shlex.join(argv)}")
    return [*argv, "--set", f"seed={seed}", *(["--quiet"] if "--quiet" not in argv else []), "--force"]


def train(shipped: Path, seed: int, out: Path) -> dict:
    """One run's test metrics and wall-clock training time (seed 0: the shipped checkpoint).

    The time is measured here, around the subprocess, and kept in ``train_seconds.json`` beside
    the run folders (checkpoints hold no time-dependent values); a run trained before it was
    recorded, or the shipped one, reports NaN.
    """
    meta = json.loads((shipped / "config.json").read_text())
    if seed == meta["train"].get("seed", 0):
        return {**meta["test"], "seconds": float("nan"), "checkpoint": shipped.relative_to(ROOT).as_posix()}
    times_file = out.parent / "train_seconds.json"
    times = json.loads(times_file.read_text()) if times_file.is_file() else {}
    if not (out / "config.json").is_file() or "test" not in json.loads((out / "config.json").read_text()):
        out.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "budgetformer_core.cli", *seed_command(shipped, seed, out)],
                       check=True, cwd=ROOT)
        times[out.name] = time.perf_counter() - start
        times_file.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    run = json.loads((out / "config.json").read_text())
    where = out.resolve()
    where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where  # the CSV names no machine
    return {**run["test"], "seconds": times.get(out.name, float("nan")), "checkpoint": where.as_posix()}


def fmt(values: list[float], pct: bool = True) -> str:
    scale = 100 if pct else 1
    mean = statistics.mean(values) * scale
    sd = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {sd:.2f}" if pct else f"{mean:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="bbc")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=["dense", "budgetformer"])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "seeds")
    ap.add_argument("--csv", type=Path, help="write a row per model and seed here (other models' rows kept)")
    args = ap.parse_args()
    print("| model | test accuracy % (mean ± sd) | per seed | heads run | FLOPs vs dense | train time (s) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for model in args.models:
        shipped = checkpoint_dir(model_name(args.dataset, model))
        runs = [train(shipped, s, args.out / f"{args.dataset}-{model}-seed{s}") for s in args.seeds]
        acc = [r["accuracy"] for r in runs]
        rows += [{"dataset": args.dataset, "model": model, "seed": s, "accuracy": r["accuracy"],
                  "macro_f1": r.get("macro_f1"), "heads_fraction": r["mean_heads_fraction"],
                  "flops_ratio": r["flops_ratio"], "n": r["n"], "checkpoint": r["checkpoint"]}
                 for s, r in zip(args.seeds, runs, strict=True)]
        seconds = [r["seconds"] for r in runs if r["seconds"] == r["seconds"]]
        heads = fmt([r["mean_heads_fraction"] for r in runs], False)
        flops = fmt([r["flops_ratio"] for r in runs], False)
        print(f"| {model} | {fmt(acc)} | {', '.join(f'{a * 100:.1f}' for a in acc)} | {heads} | {flops} | "
              f"{statistics.mean(seconds) if seconds else float('nan'):.0f} |")
    if args.csv:
        frame = pd.DataFrame(rows)
        if args.csv.is_file():
            kept = pd.read_csv(args.csv)
            rerun = (kept["dataset"] == args.dataset) & kept["model"].isin(args.models)
            frame = pd.concat([kept[~rerun], frame], ignore_index=True)
        frame.to_csv(args.csv, index=False, float_format="%.6f")


if __name__ == "__main__":
    main()
