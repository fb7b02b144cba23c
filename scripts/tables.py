"""The results tables, from precomputed/results (what `make precompute` measured).

    python scripts/tables.py            # every dataset in sweeps.csv

Per dataset: the claims of the BudgetFormer paper (accuracy against dense, heads used, both
ablations, easy vs hard), and the budgeted-attention-allocation table — one bba checkpoint at
b = 0.25 / 0.5 / 0.75 / 1 against the per-budget baselines. Any cell can be re-measured with
`budgetformer eval --checkpoint DIR [--budget B] --json` (the run directories are in
precomputed/manifest.json and runs/precompute/).
"""

from __future__ import annotations

import pandas as pd

from budgetformer_core.analysis.infer import spearman
from budgetformer_core.shipped import checkpoint_dir, dense_reference, model_name, per_example_path, sweeps_csv

BUDGETS = ("0.25", "0.5", "0.75", "1")


def row(sweeps: pd.DataFrame, model: str, budget: str) -> pd.Series | None:
    rows = sweeps[(sweeps.model == model) & (sweeps.budget == budget)]
    return rows.iloc[0] if len(rows) else None


def cell(r: pd.Series | None) -> str:
    """accuracy % (exact attention cost, measured batch-32 speed-up vs the dataset's dense model, same rounds)."""
    if r is None:
        return "—"
    return f"{r.accuracy * 100:.1f} ({r.heads_fraction:.2f}, {times(r.speedup_b32)})"


def times(speedup: float) -> str:
    """A speed-up as ``1.23×``; "not timed" when the timing phase has not measured it."""
    return "not timed" if pd.isna(speedup) else f"{speedup:.2f}×"


def bba_table(sweeps: pd.DataFrame) -> str:
    rows = {
        "BBA (one checkpoint)": lambda b: row(sweeps, "bba", b),
        "static gates (a model per budget)": lambda b: row(sweeps, f"static-{b}", b),
        "post-hoc pruning of dense (zero-shot)": lambda b: row(sweeps, "posthoc", b),
        "post-hoc + 1 recovery epoch": lambda b: row(sweeps, f"recovery-{b}", b),
        "dense": lambda b: row(sweeps, "dense", "own") if b == "1" else None,
    }
    lines = ["| model | " + " | ".join(f"b = {b}" for b in BUDGETS) + " |", "|---|" + "---|" * len(BUDGETS)]
    lines += [f"| {name} | " + " | ".join(cell(pick(b)) for b in BUDGETS) + " |" for name, pick in rows.items()]
    return "\n".join(lines)


def claims(dataset: str, sweeps: pd.DataFrame) -> str:
    def acc(model: str, budget: str = "own") -> str:
        r = row(sweeps, model, budget)
        return "—" if r is None else f"{r.accuracy * 100:.1f}"

    bf = row(sweeps, "budgetformer", "own")
    lines = [f"* dense {acc('dense')} %, BudgetFormer {acc('budgetformer')} %"]
    if bf is not None:
        lines[0] += (f" with mean s {bf.mean_s:.3f}, {bf.heads_fraction:.1%} of heads run, "
                     f"{bf.flops_ratio:.2f} of dense FLOPs")
    nbn = row(sweeps, "no-budget-net", "own")
    lines.append(f"* ablations: no f_θ {acc('no-budget-net')} %"
                 + (f" (fixed s {nbn.mean_s:.3f})" if nbn is not None else "")
                 + f", no g_φ {acc('no-head-scorer')} %")
    examples = per_example_path(model_name(dataset, "budgetformer"))
    if examples.is_file():
        t = pd.read_parquet(examples)
        rhos = {c: spearman(t["mean_s"], t[c]) for c in ("entropy", "loss", "tokens")}
        rho = {c: "n/a (constant)" if r is None else f"{r:+.2f}" for c, r in rhos.items()}
        lines.append(f"* easy vs hard: Spearman ρ(s, prediction entropy) = {rho['entropy']}, "
                     f"ρ(s, loss) = {rho['loss']}, ρ(s, length) = {rho['tokens']}")
    return "\n".join(lines)


ADAPTIVE = ("budgetformer", "budgetformer-paper", "no-budget-net", "no-head-scorer", "bba")


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def adaptivity_table(dataset: str) -> str:
    """How much each shipped model's heads follow the input (``budgetformer adaptivity``), from the
    per-example tables: difficulty is the dense model's per-example loss; on the synthetic tasks
    also each input's built-in need."""
    import json

    from budgetformer_core.analysis.adaptivity import from_frames
    from budgetformer_core.io.data import load_dataset

    dense = per_example_path(dense_reference(dataset, "budgetformer", full=True))
    if not dense.is_file():
        return ""
    reference = pd.read_parquet(dense)
    needed = None
    if dataset.startswith("synthetic"):
        needed = load_dataset(dataset).split("test").needed_heads
    lines = ["| model | accuracy | heads run | ρ(s, dense loss) | heads hard / easy | per layer: k values ≥ 5 %, "
             "head sets | ρ(k, need) | k ≥ need |", "|---|---|---|---|---|---|---|---|"]
    for model in ADAPTIVE:
        path = per_example_path(model_name(dataset, model))
        if not path.is_file():
            continue
        config = json.loads((checkpoint_dir(model_name(dataset, model)) / "config.json").read_text())
        a = from_frames(pd.read_parquet(path), config["model"]["n_heads"], reference, needed)
        per_layer = " · ".join(f"{la.k_values_over_5pct}, {la.distinct_head_sets}" for la in a.layers)
        lines.append(f"| {model} | {a.accuracy:.1%} | {a.mean_heads_fraction:.1%} | "
                     f"{_fmt(a.rho_s_reference_loss, '+.2f')} | {_fmt(a.heads_ratio_hard_easy, '.2f')}× | "
                     f"{per_layer} | {_fmt(a.rho_k_needed, '+.2f')} | {_fmt(a.frac_k_at_least_needed, '.1%')} |")
    return "\n".join(lines)


def need_table(sweeps: pd.DataFrame) -> str:
    """Accuracy per built-in need n (synthetic tasks): dense models of 1, 2, 3 heads and the rest."""
    cols = sorted(c for c in sweeps.columns if c.startswith("acc_need") and sweeps[c].notna().any())
    own = sweeps[sweeps.budget == "own"]
    if not cols or own[cols].isna().all().all():
        return ""
    lines = ["| model | " + " | ".join(f"n = {c[8:]}" for c in cols) + " | all |", "|---|" + "---|" * (len(cols) + 1)]
    for _, r in own.iterrows():
        lines.append(f"| {r.model} | " + " | ".join(f"{r[c] * 100:.1f}" for c in cols) + f" | {r.accuracy * 100:.1f} |")
    return "\n".join(lines)


INTERVAL_PAIRS = (("budgetformer", "dense"), ("budgetformer-paper", "dense"), ("no-budget-net", "budgetformer"),
                  ("no-head-scorer", "budgetformer"), ("bba", "dense"))
"""The accuracy differences given a paired bootstrap interval (docs/results.md, the app's pages)."""


def interval_table(dataset: str) -> str:
    """Accuracy differences between the shipped models with their paired bootstrap 95 % interval
    over the test inputs (``budgetformer_core.measure.bootstrap``, 2,000 resamples, seed 0), from the
    per-example tables; "" when the dataset has none."""
    from budgetformer_core.measure.bootstrap import RESAMPLES, SEED, compare

    tables = {m: pd.read_parquet(p) for m in {m for pair in INTERVAL_PAIRS for m in pair}
              if (p := per_example_path(model_name(dataset, m))).is_file()}
    if len(tables) < 2:
        return ""
    rows = compare(tables, list(INTERVAL_PAIRS))
    lines = [f"**{dataset}** ({rows['n'].iloc[0]} test inputs, {RESAMPLES:,} resamples, seed {SEED})", "",
             "| difference | accuracy | points | 95 % interval | only the first / second right | verdict |",
             "|---|---|---|---|---|---|"]
    for r in rows.itertuples():
        lines.append(f"| {r.a} − {r.b} | {r.accuracy_a:.1%} vs {r.accuracy_b:.1%} | {r.difference * 100:+.2f} | "
                     f"[{r.low * 100:+.2f}, {r.high * 100:+.2f}] | {r.only_a} / {r.only_b} | "
                     f"{'beyond noise' if r.beyond_noise else 'within noise'} |")
    return "\n".join(lines)


def main() -> None:
    sweeps = pd.read_csv(sweeps_csv(), dtype={"budget": str})
    for dataset, rows in sweeps.groupby("dataset", sort=False):
        print(f"### {dataset}\n")
        print(claims(dataset, rows) + "\n")
        for table in (adaptivity_table(dataset), need_table(rows)):
            if table:
                print(table + "\n")
        print("Accuracy % (exact attention cost, single-thread speed-up vs the dataset's dense model timed "
              "in the same rounds, batch 32):\n")
        print(bba_table(rows) + "\n")
    print("### Error bars: paired bootstrap intervals of the accuracy differences\n")
    for dataset in sweeps["dataset"].unique():
        if table := interval_table(dataset):
            print(table + "\n")


if __name__ == "__main__":
    main()
