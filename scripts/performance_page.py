"""Write the generated sections of docs/performance.md: the live latency check from
benchmarks/latency-check.json, and the batch-1 speed-ups per input length from the length sweeps
benchmarks/*-lengths.json (:data:`SWEEPS`).

    budgetformer latency-check --datasets bbc ag_news --data-dir ../shared/data --json benchmarks/latency-check.json
    budgetformer bench --checkpoint NAME --seq-lens ... --clock cpu --json > benchmarks/NAME-lengths.json
    python scripts/performance_page.py            # rewrite the sections from those files
    python scripts/performance_page.py --check    # exit 1 if a section is not what it would write

Each section lies between its two markers; the rest of the page is written by hand.
tests/test_docs.py checks that the committed sections are what this script writes, and that the
check's shipped figures are those of precomputed/results/sweeps.csv (a re-time asks for a new check).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from budgetformer_core.shipped import BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
CHECK = BENCHMARKS / "latency-check.json"
START = "<!-- latency-check: written by scripts/performance_page.py from benchmarks/latency-check.json -->"
END = "<!-- /latency-check -->"
LENGTHS_START = "<!-- lengths: written by scripts/performance_page.py from benchmarks/*-lengths.json and *-b32.json -->"
LENGTHS_END = "<!-- /lengths -->"

SWEEPS = {
    "bbc-budgetformer": "16,32,64,128,256,512",
    "ag_news-budgetformer": "16,32,64,128",
    "bbc-minilm-budgetformer": "16,32,64,128,256",
    "ag_news-minilm-bba": "16,32,64,128",
}
"""The shipped models whose length sweeps the page shows, and the lengths each is timed at."""
BUDGETS = ("0.125", "0.25", "0.375", "0.5", "1")
BATCH = ("bbc-minilm-budgetformer", "--batch-size 32 --seq-len 128 --threads 1 --budgets 0.25,0.5,1 --repeats 10")
"""A shipped model timed at batch 32 with a head set per input, and the bench options."""

INTRO = """`budgetformer latency-check` times shipped models again, now, exactly as the rebuild's timing
phase timed them (`budgetformer_core.measure.latency.time_dataset`: the same evenly spaced test
texts, batch 1 and batch 32, one thread, every point and its dense model in the same interleaved
rounds, each dense model's points in rounds of their own) and sets the result beside
`precomputed/results/sweeps.csv`. Absolute latencies follow the machine and its load; a speed-up
over dense is a ratio of two latencies taken in the same rounds, so it should not. The command
exits with status 1 when a live batch-1 speed-up differs from the shipped one by more than
{tolerance:.0%}.

```bash
budgetformer latency-check --datasets bbc ag_news --data-dir ../shared/data --json benchmarks/latency-check.json
python scripts/performance_page.py      # this table, from that file
```

ms: per input at batch 1; ×dense: the dense model's latency over this one (> 1: faster than
dense), at batch 1 and batch 32; live/shipped: the ratio of the two batch-1 speed-ups.
"""


def load(path: Path = CHECK) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _num(value, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def render_section(check: dict) -> str:
    """The section's text between the markers (without them)."""
    rows = check["rows"]
    lines = [INTRO.format(tolerance=check["tolerance"]),
             "| dataset | model | budget | shipped ms | live ms | shipped ×dense | live ×dense | live/shipped "
             "| shipped ×dense b32 | live ×dense b32 |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['budget']} | {_num(r['latency_ms'])} | {_num(r['latency_ms_live'])} "
            f"| {_num(r['speedup_b1'])} | {_num(r['speedup_b1_live'])} | {_num(r['ratio'])} "
            f"| {_num(r['speedup_b32'])} | {_num(r['speedup_b32_live'])} |")
    agree = sum(bool(r["agrees"]) for r in rows)
    lines.append("")
    lines.append(f"{agree} of {len(rows)} live batch-1 speed-ups within {check['tolerance']:.0%} of the shipped ones.")
    return "\n".join(lines) + "\n"


def sweep_path(name: str) -> Path:
    return BENCHMARKS / f"{name}-lengths.json"


def render_lengths(sweeps: dict[str, dict], batch: dict) -> str:
    """One table per length sweep: per input length the dense latency, the allocation per layer
    (compiled, and on the eager path) and, per budget, the measured speed-up over dense with
    its efficiency (measured / FLOP ideal); then the batch-32 run ``batch`` (:data:`BATCH`)."""
    lines = ["```bash"]
    lines += [f"budgetformer bench --checkpoint {name} --seq-lens {lens} --clock cpu --json > "
              f"benchmarks/{name}-lengths.json" for name, lens in SWEEPS.items()]
    lines.append("```")
    for name, sweep in sweeps.items():
        first = sweep["results"][0]
        m = first["machine"]
        lines += ["", f"`{name}`, batch 1, {first['repeats']} interleaved rounds, {first['clock']} clock, "
                  f"{m['threads']} thread, {m['cpu_model']}; measured × dense (efficiency):", "",
                  "| tokens | dense ms | allocation per layer | "
                  + " | ".join(f"b = {b}" for b in BUDGETS) + " |",
                  "|---|---|---|" + "---|" * len(BUDGETS)]
        for r in sweep["results"]:
            per_layer = 1e3 / r["model"]["n_layers"]
            eager = r.get("allocation_eager_ms")
            alloc = f"{r['allocation_ms'] * per_layer:.0f} µs" + (
                f" (eager {eager * per_layer:.0f})" if eager is not None and r.get("compiled") else "")
            rows = {row["budget"]: row for row in r["rows"]}
            cells = [f"{rows[b]['measured_speedup']:.2f}" + ("" if b == "1" else f" ({rows[b]['efficiency']:.2f})")
                     if b in rows else "—" for b in BUDGETS]
            lines.append(f"| {r['seq_len']} | {r['dense_latency']['median_ms']:.2f} | {alloc} | "
                         + " | ".join(cells) + " |")
    name, options = BATCH
    lines += ["", f"`{name}` at batch {batch['batch_size']} × {batch['seq_len']} tokens, each input ranking its heads "
              f"by its own scores, {batch['repeats']} interleaved rounds, {batch['clock']} clock "
              f"({batch['machine']['cpu_model']}):", "",
              "```bash", f"budgetformer bench --checkpoint {name} {options} --json > benchmarks/{name}-b32.json", "```",
              "", "| budget | heads per layer | measured × dense | efficiency |", "|---|---|---|---|"]
    for row in batch["rows"]:
        lines.append(f"| {row['budget']} | {sum(row['k_per_layer']) / len(row['k_per_layer']):.3g} "
                     f"| {row['measured_speedup']:.2f} | {row['efficiency']:.2f} |")
    return "\n".join(lines) + "\n"


def _section(page: str, start: str, end: str, text: str) -> str:
    if start not in page or end not in page:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no {start} … {end} section")
    head, rest = page.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{text}{end}{tail}"


def render(page: str | None = None) -> str:
    """docs/performance.md with its generated sections written from the benchmark files."""
    page = PAGE.read_text(encoding="utf-8") if page is None else page
    sweeps = {name: load(sweep_path(name)) for name in SWEEPS}
    batch = load(BENCHMARKS / f"{BATCH[0]}-b32.json")
    page = _section(page, START, END, render_section(load()))
    return _section(page, LENGTHS_START, LENGTHS_END, render_lengths(sweeps, batch))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the page is not what this script writes")
    args = p.parse_args(argv)
    page = render()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") == page
        print("docs/performance.md is current" if current else "docs/performance.md is out of date")
        return 0 if current else 1
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
