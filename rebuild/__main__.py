"""``python -m rebuild``: train, evaluate, time and list every model of ``precomputed/``.

    python -m rebuild                              # every dataset whose data is here
    python -m rebuild --datasets bbc --dry-run     # what would be trained, and why
    python -m rebuild --models 'static-*' bba      # a subset; the other rows of sweeps.csv are kept
    python -m rebuild --retime --datasets bbc      # only time bbc's rows of sweeps.csv again
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time

import pandas as pd

from budgetformer_core.shipped import histories, relative, sweeps_csv

from . import __doc__ as PACKAGE_DOC
from .jobs import NOT_NEEDED, ROOT, dry_run, plan, run_all, select
from .manifest import write_manifest
from .measure import TEXT_BASELINE, accuracy_changes, evaluate_all, local_copy, retime, text_baseline, untimed_partners
from .recipes import DATA_ROOT, RECIPES


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rebuild", description=PACKAGE_DOC.split("\n")[0].replace("``", ""))
    p.add_argument("--datasets", nargs="+", default=list(RECIPES), choices=list(RECIPES),
                   help="the datasets to rebuild (default: all)")
    p.add_argument("--data-root", default=str(DATA_ROOT),
                   help=f"folder holding the local copies of the hub datasets, e.g. ag_news/, relative to the "
                   f"project root or absolute (default: {DATA_ROOT}); a dataset whose copy is not there is skipped")
    p.add_argument("--workers", type=int, default=2, help="parallel one-thread jobs")
    p.add_argument("--skip-train", action="store_true", help="only evaluate and write the manifest")
    p.add_argument("--force", action="store_true", help="retrain every model, even unchanged ones")
    p.add_argument("--models", nargs="+", help="only these models (names or patterns, e.g. budgetformer* bba; "
                   f"{TEXT_BASELINE}: TF-IDF + logistic regression); only their rows of sweeps.csv are evaluated and "
                   "timed (each beside its dense reference: every timed row beside the same dense model must be among "
                   "them, or give --skip-timing), the other rows are kept as they are")
    p.add_argument("--skip-timing", action="store_true",
                   help="leave the latency columns of the rows evaluated now empty (time them later with --retime)")
    p.add_argument("--retime", action="store_true",
                   help="only time the rows of sweeps.csv of these datasets again (no training, no accuracy) "
                   "and rewrite their latency columns and the manifest")
    p.add_argument("--dry-run", action="store_true",
                   help="list every model the options select and whether it is current or would be trained "
                   "(and why); runs and writes nothing")
    return p


def print_plan(jobs, force: bool) -> None:
    """The dry run's listing: one line per model, ``current`` or why it would be built."""
    listing = dry_run(jobs, force)
    for job, why in listing:
        kind = "shipped " if job.shipped else "stage   " if job.stage else "baseline"
        print(f"{job.key:34} {kind}  {why}")
    built = sum(why != "current" and not why.startswith(NOT_NEEDED) for _, why in listing)
    print(f"{len(jobs) - built} of {len(jobs)} current; {built} would be trained")


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.retime and (args.models or args.force or args.skip_train or args.skip_timing or args.dry_run):
        p.error("--retime times whole datasets: it takes only --datasets and --data-root")
    copies = {d: local_copy(d, args.data_root) for d in args.datasets}
    datasets = [d for d in args.datasets if copies[d] is None or copies[d].is_dir()]
    for d in set(args.datasets) - set(datasets):
        print(f"skipping {d}: {copies[d]} is not there (see --data-root)", file=sys.stderr)
    path = ROOT / relative(sweeps_csv())
    t0 = time.perf_counter()
    if args.retime:
        if not path.is_file():
            p.error(f"{path.relative_to(ROOT)} is not there: run the whole rebuild first")
        sweeps, timing = retime(pd.read_csv(path, dtype={"budget": str}), datasets, args.data_root)
        sweeps.round(6).to_csv(path, index=False)
        write_manifest(plan(list(RECIPES), args.data_root), timing, args.data_root)
        print(f"re-timed {', '.join(timing) or 'nothing'} in {time.perf_counter() - t0:.0f} s (wall)", flush=True)
        return 0
    # TF-IDF + LR is a row of its own (no checkpoint): made when no --models is given or one matches it
    baseline = not args.models or any(fnmatch.fnmatchcase(TEXT_BASELINE, m) for m in args.models)
    models = [m for m in args.models or () if m != TEXT_BASELINE]
    jobs = select(plan(datasets, args.data_root), models or None) if models or not args.models else []
    if args.dry_run:
        print_plan(jobs, args.force)
        return 0
    if args.models and not args.skip_timing and path.is_file():
        missing = untimed_partners(pd.read_csv(path, dtype={"budget": str}), {j.key for j in jobs})
        if missing:
            p.error(f"timing these models alone would leave rows beside the same dense model timed in other "
                    f"rounds: time them with {' '.join(missing)} (dataset-model), or give --skip-timing")
    if not args.skip_train:
        jobs = run_all(jobs, args.workers, args.force)
    jobs = [j for j in jobs if not j.stage]  # a first stage is not evaluated
    print(f"training done in {time.perf_counter() - t0:.0f} s; evaluating", flush=True)
    history = ROOT / relative(histories())
    history.mkdir(parents=True, exist_ok=True)
    for job in jobs:  # shipped checkpoints hold their own history.json
        if not job.shipped:
            (history / f"{job.key}.json").write_bytes((ROOT / job.out / "history.json").read_bytes())
    sweeps = pd.concat([evaluate_all(jobs, args.workers, args.data_root),
                        pd.DataFrame([text_baseline(d, copies[d]) for d in datasets if baseline])],
                       ignore_index=True)
    if path.is_file():  # keep the rows of the models not rebuilt now
        old = pd.read_csv(path, dtype={"budget": str})
        changes = accuracy_changes(old, sweeps)
        print("test accuracy (%) against the results this run replaces; largest_change: over all budgets")
        print(changes.round(2).replace(-0.0, 0.0).to_string(index=False))  # no "-0.0"
        print(f"largest change: {changes['largest_change'].max():.2f} points", flush=True)
        rebuilt = old["dataset"].isin(datasets)
        if args.models:
            rebuilt &= (old["dataset"] + "-" + old["model"]).isin({j.key for j in jobs}) | (
                (old["model"] == TEXT_BASELINE) & baseline)
        sweeps = pd.concat([old[~rebuilt], sweeps], ignore_index=True)
    # timing, a phase of its own: the models rebuilt now (every model of a dataset rebuilt whole),
    # each beside its dense reference; the other rows keep their latency
    print(f"evaluation done in {time.perf_counter() - t0:.0f} s; {'no ' if args.skip_timing else ''}timing", flush=True)
    keys = {j.key for j in jobs} if args.models else None
    sweeps, timing = (sweeps, {}) if args.skip_timing else retime(sweeps, sorted({j.dataset for j in jobs}),
                                                                  args.data_root, keys)
    sweeps.round(6).to_csv(path, index=False)
    write_manifest(plan(list(RECIPES), args.data_root), timing, args.data_root)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
