"""The Explore page's latency and ``budgetformer bench`` time the same computation the same way.

On one fixed text and budget the page's timing (:func:`app.speed.time_input`, the engine's
:func:`budgetformer_core.measure.latency.time_points`) and the benchmark at that text's length run the same
heads per layer and the same FLOPs. How far two timings agree on a machine is measured by
``budgetformer latency-check`` and ``budgetformer bench``, never asserted in a test.
"""

from __future__ import annotations

from app import speed
from app.logic.explore import run_analysis
from budgetformer_core.measure.bench import bench
from budgetformer_core.measure.latency import Latency
from budgetformer_core.model.budget import Control

TEXT = ("The striker scored twice as the champions won the cup final after extra time in London, "
        "and the manager praised a young side that had lost only once all season.")


def test_explore_latency_and_bench_time_the_same_computation_on_a_fixed_text(bbc_budgetformer):
    ckpt, budget = bbc_budgetformer, 0.5
    analysis = run_analysis(ckpt, TEXT, Control(budget=budget))
    page = speed.time_input(ckpt, TEXT, Control(budget=budget))
    result = bench(ckpt.model, seq_len=analysis.n_tokens, budgets=(budget,), repeats=3,
                   source="bbc-budgetformer", clock="cpu")  # the page's clock
    row = result.rows[0]
    assert row.k_per_layer == analysis.k  # the same heads run
    assert row.flops == analysis.flops and result.dense_flops == analysis.dense_flops  # the same work
    assert page.latency.ms > 0
    assert page.reference is None and page.speedup is None  # no reference given: no speed-up


def test_slower_note_only_where_the_run_is_slower_than_its_reference():
    def live(ms: float, dense_ms: float) -> speed.LiveSpeed:
        return speed.LiveSpeed(Latency(ms, 0.1), "bbc-dense", Latency(dense_ms, 0.1))

    slow = live(1.4, 1.0)
    assert slow.speedup < 1 and "32 tokens" in speed.slower_note(slow, 32)
    assert "bbc-dense" in speed.slower_note(slow, 32) and "cost vs input length" in speed.slower_note(slow, 32)
    fast = live(1.0, 2.0)
    assert speed.slower_note(fast, 32) is None and "2.00× live" in speed.speed_note(fast, None)
    assert speed.slower_note(None, 32) is None
