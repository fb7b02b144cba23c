"""The Explore page's latency and ``budgetformer bench`` measure the same thing the same way.

On one fixed text and budget the page's timing (:func:`app.speed.time_input`, the engine's
:func:`budgetformer_core.latency.time_points`) and the benchmark at that text's length are taken
side by side; the figures are printed and written to ``test-artifacts/latency_vs_bench.json``,
and only their structure is asserted — times depend on the machine and its load.
"""

from __future__ import annotations

import json
from pathlib import Path

from app import analysis as an
from app import speed
from budgetformer_core.bench import bench
from budgetformer_core.budget import Control
from budgetformer_core.latency import Latency

TEXT = ("The striker scored twice as the champions won the cup final after extra time in London, "
        "and the manager praised a young side that had lost only once all season.")
ARTIFACT = Path(__file__).resolve().parents[2] / "test-artifacts" / "latency_vs_bench.json"


def test_explore_latency_and_bench_agree_on_a_fixed_text(bbc_budgetformer):
    ckpt, budget = bbc_budgetformer, 0.5
    analysis = an.run_analysis(ckpt, TEXT, Control(budget=budget))
    page = speed.time_input(ckpt, TEXT, Control(budget=budget))
    result = bench(ckpt.model, seq_len=analysis.n_tokens, budgets=(budget,), repeats=10,
                   source="bbc-budgetformer", clock="cpu")  # the page's clock
    row = result.rows[0]
    assert row.k_per_layer == analysis.k  # the same heads run: the same computation
    assert page.reference is None and page.speedup is None  # no reference given: no speed-up
    figures = {
        "tokens": analysis.n_tokens,
        "budget": budget,
        "explore_ms": page.latency.ms,
        "bench_ms": row.latency.median_ms,
        "explore_over_bench": page.latency.ms / row.latency.median_ms,
        "load_average": result.machine.load_average,
    }
    assert all(v > 0 for k, v in figures.items() if k != "load_average")
    ARTIFACT.parent.mkdir(exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))
    print("\nExplore vs bench:", json.dumps(figures))


def test_slower_note_only_where_the_run_is_slower_than_its_reference():
    def live(ms: float, dense_ms: float) -> speed.LiveSpeed:
        return speed.LiveSpeed(Latency(ms, 0.1), "bbc-dense", Latency(dense_ms, 0.1))

    slow = live(1.4, 1.0)
    assert slow.speedup < 1 and "32 tokens" in speed.slower_note(slow, 32)
    assert "bbc-dense" in speed.slower_note(slow, 32) and "cost vs input length" in speed.slower_note(slow, 32)
    fast = live(1.0, 2.0)
    assert speed.slower_note(fast, 32) is None and "live 2.00×" in speed.speed_note(fast, None)
    assert speed.slower_note(None, 32) is None
