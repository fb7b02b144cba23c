"""The benchmark table is well formed (rows per budget, consistent columns, JSON that parses).

Timed with very few repeats: nothing here asserts how fast anything is.
"""

from __future__ import annotations

import json

import pytest
import torch

from budgetformer_core.cli import main
from budgetformer_core.measure.bench import (
    BUDGETS,
    PER_INPUT,
    bench,
    bench_lengths,
    length_curve,
    per_input_ks,
    read_length_sweep,
)
from budgetformer_core.model.encoder import BudgetFormer

from ..conftest import small_config

QUICK = dict(repeats=2, warmup=1, min_sample_s=0.0005)


@pytest.fixture(scope="module")
def result():
    torch.manual_seed(0)
    return bench(BudgetFormer(small_config()).eval(), batch_size=3, seq_len=16, **QUICK)


def test_one_row_per_budget_then_the_per_input_row(result):
    assert [r.budget for r in result.rows] == [f"{b:g}" for b in BUDGETS] + [PER_INPUT]
    assert result.batch_size == 3 and result.seq_len == 16 and result.repeats == 2


def test_rows_are_consistent(result):
    budget_rows = result.rows[:-1]
    ks = [r.k_per_layer for r in budget_rows]
    assert ks == sorted(ks) and ks[0] == [1, 1] and ks[-1] == [4, 4]  # H = 4, monotone in b
    for r in result.rows:
        assert r.flops_ratio == pytest.approx(r.flops / result.dense_flops)
        assert r.ideal_speedup == pytest.approx(1 / r.flops_ratio)
        assert r.efficiency == pytest.approx(r.measured_speedup / r.ideal_speedup)
        assert r.measured_speedup > 0 and r.latency.median_ms > 0 and r.peak_memory_mb > 0
    for r in budget_rows[:-1]:
        assert r.ideal_speedup > 1 and r.masked_latency is not None and r.masked_speedup > 0
    assert budget_rows[-1].ideal_speedup <= 1  # all heads plus f_θ and g_φ
    assert result.rows[-1].masked_latency is None


def test_budgeting_cost_and_machine_are_reported(result):
    assert result.nets_ms > 0 and result.allocation_ms > 0
    assert result.nets_frac == pytest.approx(result.nets_ms / result.dense_latency.median_ms)
    assert result.machine.threads == 1 and result.machine.cpu_model
    assert 0 < result.attention_share < 1


def test_table_and_json_render(result):
    table = result.table()
    assert table.count("\n| ") == 1 + len(result.rows)  # header row + one per row
    per_layer = result.allocation_ms * 1e3 / result.model["n_layers"]
    assert f"allocation per layer: {per_layer:.1f} µs = {result.allocation_frac:.1%} of a dense layer" in table
    eager = result.allocation_eager_ms * 1e3 / result.model["n_layers"]  # what the compiled call saves
    note = f"(eager path: {eager:.1f} µs)" if result.compiled else "(eager: the compiled allocation is not built)"
    assert note in table
    data = json.loads(json.dumps(result.to_dict()))
    assert len(data["rows"]) == len(result.rows) and data["rows"][0]["latency"]["median_ms"] > 0


def test_per_input_ks_deal_every_budget():
    ks = per_input_ks(BUDGETS, 8, 16, seed=1)
    assert sorted(ks) == sorted(list(range(1, 9)) * 2)
    assert per_input_ks(BUDGETS, 8, 16, seed=1) == ks


def test_cli_bench_json_on_a_checkpoint(tiny_checkpoint, capsys):
    assert main(["bench", "--checkpoint", str(tiny_checkpoint), "--seq-len", "8", "--repeats", "2",
                 "--warmup", "0", "--budgets", "0.5,1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["budget"] for r in data["rows"]] == ["0.5", "1"]
    assert data["seq_len"] == 8 and data["source"] == str(tiny_checkpoint)


def test_cli_bench_table_on_a_random_model_of_a_given_shape(capsys):
    shape = ["--set", "d_model=32", "--set", "n_heads=4", "--set", "max_len=12"]
    assert main(["bench", *shape, "--repeats", "1", "--warmup", "0", "--budgets", "0.25",
                 "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "| 0.25 | 1/1 |" in out and f"| {PER_INPUT} |" in out and "d_model=32" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "method=dense"], "dense model"),
        (["--set", "max_len=8", "--seq-len", "9"], "seq_len"),
        (["--set", "epochs=3"], "only model keys"),
        (["--checkpoint", "/no/such/dir"], "not a directory"),
        (["--set", "max_len=8", "--seq-lens", "4,9"], "seq_len"),
        (["--set", "max_len=8", "--seq-len", "4", "--seq-lens", "4,8"], "not both"),
    ],
)
def test_cli_bench_errors_are_one_line(argv, message, capsys):
    assert main(["bench", "--repeats", "1", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def lengths():
    torch.manual_seed(0)
    return bench_lengths(BudgetFormer(small_config()).eval(), [16, 4, 8, 16], batch_size=2,
                         budgets=(0.25, 1.0), **QUICK)


def test_length_sweep_runs_each_length_once_shortest_first(lengths):
    assert lengths.seq_lens == [4, 8, 16]
    for r, length in zip(lengths.results, [4, 8, 16], strict=True):
        assert r.seq_len == length and [x.budget for x in r.rows] == ["0.25", "1", PER_INPUT]
    assert lengths.results[0].dense_flops < lengths.results[-1].dense_flops  # longer inputs cost more


def test_crossover_is_the_length_from_which_budgeting_keeps_paying(lengths):
    def crossover(*speedups):  # the 0.25 row's measured speed-up at 4, 8 and 16 tokens
        for r, x in zip(lengths.results, speedups, strict=True):
            r.rows[0].measured_speedup = x
        return lengths.crossover()["0.25"]

    assert crossover(0.8, 1.1, 1.3) == 8
    assert crossover(1.2, 0.9, 1.1) == 16  # a dip resets it
    assert crossover(1.0, 1.2, 1.3) == 4
    assert crossover(1.2, 1.3, 0.9) is None  # slower at the longest length


def test_length_sweep_table_and_json(lengths, capsys):
    table = lengths.table()
    assert table.count("\n| 4 |") == 2 and "crossover" in table  # structural and masked rows
    data = json.loads(json.dumps(lengths.to_dict()))
    assert data["seq_lens"] == [4, 8, 16] and set(data["crossover"]) == {"0.25", "1", PER_INPUT}
    shape = ["--set", "d_model=32", "--set", "n_heads=4", "--set", "max_len=12"]
    assert main(["bench", *shape, "--repeats", "1", "--warmup", "0", "--budgets", "0.5",
                 "--seq-lens", "6,12", "--clock", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seq_lens"] == [6, 12] and {r["clock"] for r in data["results"]} == {"cpu"}


def test_a_saved_sweep_reads_back_into_the_length_curve(lengths, tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(lengths.to_dict()))
    curve = length_curve(read_length_sweep(path), budget=0.3)  # nearest saved budget: 0.25
    assert [p["tokens"] for p in curve] == [4, 8, 16] and {p["budget"] for p in curve} == {"0.25"}
    for p, r in zip(curve, lengths.results, strict=True):
        assert p["dense_ms"] == r.dense_latency.median_ms and p["budgeted_ms"] == r.rows[0].latency.median_ms
        assert p["ideal_ms"] == pytest.approx(p["dense_ms"] * r.rows[0].flops_ratio)
    assert {p["budget"] for p in length_curve(read_length_sweep(path), budget=0.9)} == {"1"}


@pytest.mark.parametrize("content", ["", "{not json", '{"seq_lens": [4]}', '{"seq_lens": [8], "results": []}',
                                     "\udcff"])
def test_a_bad_saved_sweep_is_a_clear_error(tmp_path, content):
    path = tmp_path / "sweep.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match="not a saved length sweep"):
        read_length_sweep(path)
    with pytest.raises(FileNotFoundError):
        read_length_sweep(tmp_path / "missing.json")
