"""Write the live-check section of docs/performance.md from benchmarks/latency-check.json.

    budgetformer latency-check --datasets bbc ag_news --data-dir ../shared/data --json benchmarks/latency-check.json
    python scripts/performance_page.py            # rewrite the section from that file
    python scripts/performance_page.py --check    # exit 1 if the section is not what it would write

The section lies between the two markers below; the rest of the page is written by hand.
tests/test_docs.py checks that the committed section is what this script writes, and that the
file's shipped figures are those of precomputed/results/sweeps.csv (a re-time asks for a new check).
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

INTRO = """`budgetformer latency-check` times shipped models again, now, exactly as the rebuild's timing
phase timed them (`budgetformer_core.measure.latency.time_dataset`: the same evenly spaced test texts,
batch 1 and batch 32, one thread, every point and the dataset's dense model in the same
interleaved rounds) and sets the result beside `precomputed/results/sweeps.csv`. Absolute
latencies follow the machine and its load; a speed-up over dense is a ratio of two latencies
taken in the same rounds, so it should not. The command exits with status 1 when a live batch-1
speed-up differs from the shipped one by more than {tolerance:.0%}.

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


def render(page: str | None = None, check: dict | None = None) -> str:
    """docs/performance.md with its live-check section written from ``check``."""
    page = PAGE.read_text(encoding="utf-8") if page is None else page
    check = load() if check is None else check
    if START not in page or END not in page:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no {START} … {END} section")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{render_section(check)}{END}{tail}"


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
