"""The Explore page's latency and ``budgetformer bench`` time the same computation the same way.

On one fixed text and budget the page's timing (:func:`app.analysis.time_input`) and the
benchmark at that text's length run the same heads per layer and the same FLOPs, each on the
engine's timer with both paths taken in turn. How far two timings agree on a machine is measured
by ``budgetformer latency-check`` and ``budgetformer bench``, never asserted in a test.
"""

from __future__ import annotations

from app import analysis as an
from budgetformer_core.bench import bench
from budgetformer_core.budget import Control
from budgetformer_core.timing import MIN_ROUNDS, TimingStats

TEXT = ("The striker scored twice as the champions won the cup final after extra time in London, "
        "and the manager praised a young side that had lost only once all season.")


def test_explore_latency_and_bench_time_the_same_computation_on_a_fixed_text(bbc_budgetformer):
    ckpt, budget = bbc_budgetformer, 0.5
    analysis = an.run_analysis(ckpt, TEXT, Control(budget=budget))
    page = an.time_input(ckpt, TEXT, Control(budget=budget))
    result = bench(ckpt.model, seq_len=analysis.n_tokens, budgets=(budget,), repeats=3,
                   source="bbc-budgetformer", clock="cpu")  # the page's clock
    row = result.rows[0]
    assert row.k_per_layer == analysis.k  # the same heads run
    assert row.flops == analysis.flops and result.dense_flops == analysis.dense_flops  # the same work
    assert page.repeats >= MIN_ROUNDS and len(page.speedups()) == page.repeats
    assert page.structural is not None and len(page.structural.samples_ms) == page.repeats  # paired rounds


def test_slower_note_only_where_budgeting_is_slower():
    def timing(dense, structural):
        return an.Timing(TimingStats.from_samples(dense, 1), TimingStats.from_samples(structural, 1))

    slow = timing([1.0, 1.1, 0.9], [1.4, 1.5, 1.3])
    assert slow.speedup < 1 and "32 tokens" in an.slower_note(slow, 32)
    assert "slower" in an.speed_note(slow) and "cost vs input length" in an.slower_note(slow, 32)
    fast = timing([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert an.slower_note(fast, 32) is None and "2.00× faster" in an.speed_note(fast)
    assert an.slower_note(None, 32) is None
