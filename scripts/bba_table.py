"""Accuracy per requested budget for a bba checkpoint and its baselines; prints the README table.

    python scripts/bba_table.py --dataset bbc --dense DIR --bba DIR --posthoc DIR \
        --static 0.25=DIR 0.5=DIR 0.75=DIR --recovered 0.25=DIR 0.5=DIR 0.75=DIR

Rows: the one bba checkpoint at every budget; the static-gate model trained for each budget;
the post-hoc pruned dense model (zero-shot) at every budget; the same after one recovery epoch
at each budget; the dense model. Cells: test accuracy % (exact attention cost = heads run / H).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from budgetformer_core.budget import Control
from budgetformer_core.checkpoint import load_checkpoint
from budgetformer_core.data import load_dataset
from budgetformer_core.infer import evaluate_split

BUDGETS = (0.25, 0.5, 0.75, 1.0)


def per_budget(values: list[str]) -> dict[float, Path]:
    return {float(b): Path(d) for b, d in (v.split("=", 1) for v in values)}


def cell(ckpt, split, budget: float | None) -> str:
    r = evaluate_split(ckpt, split, Control(budget=budget) if budget else None)
    return f"{r.accuracy * 100:.1f} ({r.mean_heads_fraction:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="bbc")
    ap.add_argument("--data-dir")
    ap.add_argument("--dense", required=True)
    ap.add_argument("--bba", required=True)
    ap.add_argument("--posthoc", required=True)
    ap.add_argument("--static", nargs="*", default=[])
    ap.add_argument("--recovered", nargs="*", default=[])
    args = ap.parse_args()
    split = load_dataset(args.dataset, args.data_dir).split("test")
    bba, posthoc = load_checkpoint(args.bba), load_checkpoint(args.posthoc)
    static, recovered = per_budget(args.static), per_budget(args.recovered)
    rows = {
        "BBA (one checkpoint)": [cell(bba, split, b) for b in BUDGETS],
        "static gates (one model per budget)": [
            cell(load_checkpoint(static[b]), split, b) if b in static else "—" for b in BUDGETS],
        "post-hoc pruning of dense (zero-shot)": [cell(posthoc, split, b) for b in BUDGETS],
        "post-hoc + 1 recovery epoch": [
            cell(load_checkpoint(recovered[b]), split, b) if b in recovered else "—" for b in BUDGETS],
        "dense": ["—"] * 3 + [cell(load_checkpoint(args.dense), split, None)],
    }
    print("| model | " + " | ".join(f"b = {b}" for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
