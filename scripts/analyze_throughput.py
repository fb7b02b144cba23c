"""Throughput of ``budgetformer analyze``: texts per second with the local engine and with Ray Data,
on 1 and 2 workers, over a 50,000-row file; printed as the Markdown table of docs/performance.md.

    python scripts/analyze_throughput.py                                  # ag_news-budgetformer, 50,000 rows
    python scripts/analyze_throughput.py --checkpoint ag_news-minilm-bba --rows 5000
    python scripts/analyze_throughput.py --engines local --workers 1 2 4

The file is AG News's training pool (``--data-dir``, by default ../shared/data/ag_news) repeated
until it has ``--rows`` rows, written as Parquet to a temporary folder; each run is the command
itself, in a process of its own, writing a fresh analysis folder there. A run's texts/s is rows over
its engine's wall time (model loading on the actors and Ray's start-up included, reading the file
not); per worker is that over the workers. The last column is the cluster arithmetic: workers
needed for 1,000,000 texts in 10 minutes = ⌈1e6 / (600 × per-worker texts/s)⌉.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TARGET_TEXTS, TARGET_SECONDS = 1_000_000, 600


def corpus(data_dir: Path, rows: int, out: Path) -> Path:
    """AG News's training pool repeated to ``rows`` rows (text, label) as one Parquet file."""
    pool = pd.read_csv(data_dir / "train_pool.csv", usecols=["text", "label"], keep_default_na=False)
    repeats = math.ceil(rows / len(pool))
    frame = pd.concat([pool] * repeats, ignore_index=True).head(rows)
    path = out / f"ag_news-{rows}.parquet"
    frame.to_parquet(path, index=False)
    return path


def run(checkpoint: str, data: Path, out: Path, engine: str, workers: int, batch_size: int) -> dict:
    """One ``budgetformer analyze`` run; its summary (the JSON line it prints)."""
    argv = [sys.executable, "-m", "budgetformer_core.cli", "analyze", "--checkpoint", checkpoint, "--dataset",
            str(data), "--out", str(out), "--engine", engine, "--workers", str(workers), "--batch-size",
            str(batch_size), "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{engine} × {workers} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    lines = ["| engine | workers | rows | seconds | texts/s | texts/s per worker | workers for 1M texts in 10 min |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        per_worker = r["texts_per_second"] / r["workers"]
        needed = math.ceil(TARGET_TEXTS / (TARGET_SECONDS * per_worker))
        lines.append(f"| {r['engine']} | {r['workers']} | {r['rows']:,} | {r['seconds']:.1f} | "
                     f"{r['texts_per_second']:.1f} | {per_worker:.1f} | {needed} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="ag_news-budgetformer", help="a model of AG News's classes")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "ag_news",
                        help="the folder holding AG News's train_pool.csv")
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--engines", nargs="+", choices=("local", "ray"), default=["local", "ray"])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="analyze-throughput-") as tmp:
        data = corpus(args.data_dir, args.rows, Path(tmp))
        results = []
        for engine in args.engines:
            for workers in args.workers:
                results.append(run(args.checkpoint, data, Path(tmp) / f"{engine}-{workers}", engine, workers,
                                   args.batch_size))
                print(f"{engine} × {workers}: {results[-1]['texts_per_second']:.1f} texts/s", file=sys.stderr)
    print(f"`{args.checkpoint}`, {args.rows:,} rows of AG News, batch {args.batch_size}:\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
