"""The seeds' benchmarks ship and keep their promises: DBpedia-14, SST-2 and SNLI (text pairs) on
MiniLM, a dense fine-tune stored as low-rank factors, with bba and BudgetFormer made from it:
fitted on it frozen (adapters) or trained with the encoder adapting (factors of their own). Read
from the shipped files (nothing is trained here); where the shared copies of the datasets are on
this machine, ``budgetformer eval`` re-measures every model on its whole test split and finds the
accuracy its config.json records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from budgetformer_core.cli import main
from budgetformer_core.io.files import file_sha256
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.shipped import checkpoint_dir, per_example_path, sweeps_csv
from rebuild.recipes import BENCHMARKS

pytestmark = pytest.mark.artifacts

DATASETS = ("dbpedia", "sst2", "snli")
METHODS = ("dense", "bba", "budgetformer")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
MB = 2**20


def config(name: str) -> dict:
    path = checkpoint_dir(name) / "config.json"
    if not path.is_file():
        pytest.skip(f"{name} is not shipped here")
    return json.loads(path.read_text())


@pytest.mark.parametrize("dataset", DATASETS)
def test_each_benchmark_ships_a_low_rank_dense_model_and_two_models_made_from_it(dataset):
    """The dense model stores rank-8 factors; bba and BudgetFormer are adapters of it where they
    were fitted on it frozen, and where they were trained with the encoder adapting
    (:attr:`rebuild.recipes.Benchmark.adapting`) they store their own rank-r factors stacked on
    its (rank 8 + r in all), never a whole matrix."""
    from safetensors import safe_open

    dense = config(f"{dataset}-minilm-dense")
    assert dense["backbone"]["source"] == "minilm-l6" and len(dense["backbone"]["lowrank"]) == 24
    assert dense["train"]["lora_rank"] == 8
    folder = checkpoint_dir(f"{dataset}-minilm-dense")
    assert sum(p.stat().st_size for p in folder.iterdir()) < 1.5 * MB  # a full fine-tune's changes: 11 MB
    benchmark = BENCHMARKS[dataset]
    for method in ("bba", "budgetformer"):
        name = f"{dataset}-minilm-{method}"
        made = config(name)
        assert made["model"]["variant"] == method and per_example_path(name).is_file()
        size = sum(p.stat().st_size for p in checkpoint_dir(name).iterdir())
        if benchmark.adapting is None or method not in benchmark.adapted:
            base = made["adapter"]["base"]
            assert base["name"] == f"{dataset}-minilm-dense"
            assert base["sha256"] == file_sha256(folder / "model.safetensors")
            assert size < 1 * MB
            continue
        rank = made["train"]["lora_rank"]
        assert "adapter" not in made and made["init"] == f"precomputed/checkpoints/{dataset}-minilm-dense"
        assert made["backbone"]["lowrank"] == dense["backbone"]["lowrank"] and rank in (8, 16, 32)
        # its own factors stored, the dense model's named (loading puts them first: rank 8 + r in all)
        assert made["backbone"]["lowrank_init"] == {"path": f"../{dataset}-minilm-dense", "rank": 8,
                                                    "sha256": file_sha256(folder / "model.safetensors")}
        with safe_open(checkpoint_dir(name) / "model.safetensors", "pt") as stored:
            assert {stored.get_slice(n + ".lora_a").get_shape()[0] for n in made["backbone"]["lowrank"]} == {rank}
        assert {a.shape[0] for a, _ in load_checkpoint(checkpoint_dir(name)).model.low_rank.values()} == {8 + rank}
        assert size < (0.5 + 0.07 * rank) * MB  # fp16 factors: about 69 kB per unit of rank, beside the nets


BARS = {"dbpedia": 0.97, "sst2": 0.88, "snli": 0.76}
"""The dense fine-tune's least test accuracy per benchmark (the bars the benchmarks were set)."""
NOT_MET: dict[str, tuple[str, ...]] = {"bba": (), "budgetformer": ()}
"""The benchmarks whose bba, or BudgetFormer, misses its bar: what was tried and measured is in
docs/pretrained.md (the seeds' benchmarks). Strict: the test fails the day a bar is met."""


def bar_cases(method: str) -> list:
    reason = "missed: what was tried and measured is in docs/pretrained.md (the seeds' benchmarks)"
    return [pytest.param(d, marks=pytest.mark.xfail(strict=True, reason=reason)) if d in NOT_MET[method] else d
            for d in DATASETS]


@pytest.mark.parametrize("dataset", DATASETS)
def test_each_dense_fine_tune_meets_its_bar(dataset):
    assert config(f"{dataset}-minilm-dense")["test"]["accuracy"] >= BARS[dataset]


@pytest.mark.parametrize("dataset", bar_cases("bba"))
def test_bba_at_half_the_heads_stays_within_a_point_of_dense(dataset):
    dense = config(f"{dataset}-minilm-dense")["test"]
    sweeps = pd.read_csv(sweeps_csv(), dtype={"budget": str})
    bba = sweeps[(sweeps.dataset == dataset) & (sweeps.model == "minilm-bba") & (sweeps.budget == "0.5")]
    assert len(bba) == 1 and bba.accuracy.item() >= dense["accuracy"] - 0.01


@pytest.mark.parametrize("dataset", bar_cases("budgetformer"))
def test_budgetformer_stays_within_a_point_of_dense_on_at_most_half_the_heads(dataset):
    """The recorded figures are the per-example table's own."""
    dense = config(f"{dataset}-minilm-dense")["test"]
    own = config(f"{dataset}-minilm-budgetformer")["test"]
    frame = pd.read_parquet(per_example_path(f"{dataset}-minilm-budgetformer"))
    assert len(frame) == own["n"] == dense["n"] and own["accuracy"] == pytest.approx(frame.correct.mean())
    assert own["mean_heads_fraction"] <= 0.5
    assert own["accuracy"] >= dense["accuracy"] - 0.01


def test_snli_reads_pairs_from_the_command_line_and_a_jsonl_file(tmp_path, capsys):
    config("snli-minilm-budgetformer")
    assert main(["predict", "--checkpoint", "snli-minilm-budgetformer", "--pair", "A man plays a guitar.",
                 "A man is playing music."]) == 0
    typed = capsys.readouterr().out
    assert any(label in typed for label in ("entailment", "neutral", "contradiction"))
    rows = [{"premise": "A man plays a guitar.", "hypothesis": "A man is playing music."},
            {"premise": "Two dogs run on the beach.", "hypothesis": "The dogs are asleep indoors."}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["predict", "--checkpoint", "snli-minilm-budgetformer", "--input-file", str(path), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(out) == 2


@pytest.mark.parametrize("dataset", DATASETS)
def test_eval_on_the_shared_copy_gives_the_recorded_accuracy(dataset, capsys):
    if not (SHARED / dataset).is_dir():
        pytest.skip(f"no shared copy of {dataset} at {SHARED / dataset}")
    for method in METHODS:
        name = f"{dataset}-minilm-{method}"
        recorded = config(name)["test"]
        assert main(["eval", "--checkpoint", name, "--data-dir", str(SHARED / dataset), "--split", "test",
                     "--json"]) == 0
        measured = json.loads(capsys.readouterr().out)
        assert measured["n"] == recorded["n"] and measured["accuracy"] == pytest.approx(recorded["accuracy"]), name
