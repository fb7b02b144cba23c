"""The adaptivity measure: exact arithmetic on hand-built arrays, consistent figures on the shipped
BBC checkpoints, valid JSON and clear errors from ``budgetformer adaptivity``."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from budgetformer_core.analysis.adaptivity import (
    adaptivity,
    default_reference,
    from_arrays,
    from_frames,
    hard_easy_ratio,
    layer_adaptivity,
)
from budgetformer_core.analysis.infer import evaluate_split, spearman
from budgetformer_core.cli import main
from budgetformer_core.io.data import load_dataset
from budgetformer_core.io.loader import load_checkpoint
from budgetformer_core.io.splits import Split

from ..conftest import PRECOMPUTED

KEYS = {"n", "accuracy", "mean_heads_fraction", "layers", "rho_s_reference_loss", "heads_ratio_hard_easy",
        "rho_k_needed", "frac_k_at_least_needed", "notes"}
LAYER_KEYS = {"k_hist", "distinct_head_sets", "head_set_entropy_bits", "k_values_over_5pct"}


def _no_nan(token: str):
    raise AssertionError(f"bare {token} in the JSON")


def n_heads(name: str) -> int:
    return json.loads((PRECOMPUTED / name / "config.json").read_text())["model"]["n_heads"]


def run_json(*argv: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["adaptivity", *argv, "--json"]) == 0
    return json.loads(out.getvalue(), parse_constant=_no_nan)


@pytest.fixture(scope="module")
def bbc() -> dict:
    """The whole BBC test split (426 texts) against bbc-dense, found by default."""
    return run_json("--checkpoint", str(PRECOMPUTED / "bbc-budgetformer"))


def test_json_keys_and_types(bbc):
    assert KEYS <= set(bbc)
    assert bbc["n"] == 426 and bbc["reference"].endswith("bbc-dense")
    assert 0 <= bbc["accuracy"] <= 1 and 0 < bbc["mean_heads_fraction"] <= 1
    for key in ("rho_s_reference_loss", "heads_ratio_hard_easy"):
        assert isinstance(bbc[key], float)
    assert -1 <= bbc["rho_s_reference_loss"] <= 1 and bbc["heads_ratio_hard_easy"] > 0
    assert bbc["rho_k_needed"] is None and bbc["frac_k_at_least_needed"] is None  # BBC has no needs
    assert isinstance(bbc["notes"], list)


def test_layer_figures_are_consistent(bbc):
    assert len(bbc["layers"]) == 2
    for layer in bbc["layers"]:
        assert set(layer) == LAYER_KEYS
        ks = [int(k) for k in layer["k_hist"]]
        assert ks == sorted(ks) and all(1 <= k <= n_heads("bbc-budgetformer") for k in ks)
        assert sum(layer["k_hist"].values()) == bbc["n"]
        d, bits = layer["distinct_head_sets"], layer["head_set_entropy_bits"]
        assert 1 <= d <= bbc["n"] and isinstance(bits, float)
        assert (bits == 0.0) == (d == 1)
        assert bits <= math.log2(d) + 1e-9
        assert d >= len(ks)  # a different k is a different head set
        assert 1 <= layer["k_values_over_5pct"] <= len(ks)


def test_dense_against_itself_runs_one_head_set():
    result = run_json("--checkpoint", str(PRECOMPUTED / "bbc-dense"), "--limit", "90")
    assert result["n"] == 90 and result["mean_heads_fraction"] == 1.0
    for layer in result["layers"]:
        assert layer["distinct_head_sets"] == 1 and layer["head_set_entropy_bits"] == 0.0
        assert layer["k_hist"] == {str(n_heads("bbc-dense")): 90} and layer["k_values_over_5pct"] == 1
    assert result["heads_ratio_hard_easy"] == 1.0
    assert result["rho_s_reference_loss"] is None
    assert any("dense" in note for note in result["notes"])


def test_bba_constant_budget_gives_null_rho_and_a_note():
    result = run_json("--checkpoint", str(PRECOMPUTED / "bbc-bba"), "--budget", "0.25", "--limit", "30")
    assert result["rho_s_reference_loss"] is None
    assert any("0.25" in note for note in result["notes"])
    k = max(1, int(0.25 * n_heads("bbc-bba")))
    assert all(layer["k_hist"] == {str(k): 30} for layer in result["layers"])


@pytest.mark.artifacts
def test_precomputed_tables_give_the_same_figures(bbc):
    tables = PRECOMPUTED.parent / "results" / "per_example"
    frame, reference = (pd.read_parquet(tables / f"bbc-{m}.parquet") for m in ("budgetformer", "dense"))
    result = from_frames(frame, n_heads("bbc-budgetformer"), reference).to_dict()
    assert result["layers"] == bbc["layers"] and result["n"] == bbc["n"]
    assert result["accuracy"] == bbc["accuracy"]
    # the tables keep losses to 6 decimals: near-zero dense losses tie there, and a tie at a
    # third's edge can swap one input between the thirds (one input of 142 moves the ratio ~0.005)
    assert result["heads_ratio_hard_easy"] == pytest.approx(bbc["heads_ratio_hard_easy"], abs=0.01)
    assert result["rho_s_reference_loss"] == pytest.approx(bbc["rho_s_reference_loss"], abs=1e-3)  # 6 decimals
    with pytest.raises(ValueError, match="same inputs"):
        from_frames(frame, n_heads("bbc-budgetformer"), reference.head(10))


def test_needed_heads_are_read_from_the_split(bbc_budgetformer):
    split = load_dataset("bbc").split("test").head(45)
    needed = [1, 2, 3] * 15
    result = adaptivity(bbc_budgetformer, dataclasses.replace(split, needed_heads=needed))
    k = evaluate_split(bbc_budgetformer, split).selected.sum(-1)  # (N, L)
    assert result.frac_k_at_least_needed == pytest.approx((k >= np.array(needed)[:, None]).all(-1).mean())
    assert result.rho_k_needed == spearman(k.mean(-1), needed)
    assert result.rho_s_reference_loss is None and result.heads_ratio_hard_easy is None  # no reference


def test_missing_reference_exits_2_with_a_message(tmp_path, capsys):
    lone = tmp_path / "bbc-budgetformer"
    shutil.copytree(PRECOMPUTED / "bbc-budgetformer", lone)
    assert main(["adaptivity", "--checkpoint", str(lone), "--json"]) == 2
    err = capsys.readouterr().err
    assert "no reference model" in err and "--reference" in err and "Traceback" not in err
    assert main(["adaptivity", "--checkpoint", str(lone), "--reference", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- pure arithmetic


def heads(*sets: tuple[int, ...], n_heads: int = 4) -> np.ndarray:
    """(N, H) bool rows from head-index tuples."""
    rows = np.zeros((len(sets), n_heads), dtype=bool)
    for i, s in enumerate(sets):
        rows[i, list(s)] = True
    return rows


def test_layer_adaptivity_by_hand():
    layer = layer_adaptivity(heads((0,), (0,), (1,), (0, 1), (0, 1), (0, 1), (2, 3), (0, 1, 2)))
    assert layer.k_hist == {"1": 3, "2": 4, "3": 1}
    assert layer.distinct_head_sets == 5
    counts = np.array([2, 1, 3, 1, 1]) / 8  # {0} {1} {0,1} {2,3} {0,1,2}
    assert layer.head_set_entropy_bits == pytest.approx(-(counts * np.log2(counts)).sum())
    assert layer.k_values_over_5pct == 3
    one = layer_adaptivity(heads((1, 2), (1, 2), (1, 2)))
    assert one.distinct_head_sets == 1 and one.head_set_entropy_bits == 0.0


def test_head_sets_of_many_heads_and_two_digit_indices():
    # a frame's "heads" cells with indices ≥ 10 (" 1 " is not read inside " 10 "), a missing cell
    frame = pd.DataFrame({"label": [0, 0, 1], "prediction": [0, 1, 1], "s0": [0.1, 0.2, 0.3],
                          "heads0": ["1 10 11", "0 1", None]})  # fmt: skip
    [layer] = from_frames(frame, 12).layers
    assert layer.k_hist == {"0": 1, "2": 1, "3": 1} and layer.distinct_head_sets == 3
    # head sets packed into more than 8 bytes (72 heads) are counted as with 64: the same figures
    sets = [(0,), (0,), (1, 63), (0, 1), (0, 1), (63,)]
    few, many = layer_adaptivity(heads(*sets, n_heads=64)), layer_adaptivity(heads(*sets, n_heads=72))
    assert (few.k_hist, few.distinct_head_sets) == (many.k_hist, many.distinct_head_sets) == ({"1": 3, "2": 3}, 4)
    assert few.head_set_entropy_bits == pytest.approx(many.head_set_entropy_bits)
    assert layer_adaptivity(heads((70,), (71,), (70,), n_heads=72)).distinct_head_sets == 2


def test_k_values_over_5pct_counts_only_common_k():
    rows = heads(*([(0,)] * 39 + [(0, 1)]))  # k = 2 on 1 of 40 inputs: 2.5 %
    assert layer_adaptivity(rows).k_values_over_5pct == 1
    assert layer_adaptivity(heads(*([(0,)] * 19 + [(0, 1)]))).k_values_over_5pct == 2  # exactly 5 %


def test_hard_easy_ratio_by_hand():
    loss = np.array([0.1, 5.0, 0.2, 3.0, 0.3, 4.0, 1.0])  # thirds of 2: easiest 0, 2; hardest 5, 1
    per_input = np.array([1.0, 4.0, 2.0, 1.0, 9.0, 2.0, 9.0])
    assert hard_easy_ratio(per_input, loss) == pytest.approx((4 + 2) / (1 + 2))
    assert hard_easy_ratio(np.array([1.0, 2.0]), np.array([0.0, 1.0])) is None  # fewer than 3 inputs


def test_from_arrays_by_hand():
    # 6 inputs, 2 layers, 4 heads; input i needs needed[i] heads
    layer0 = heads((0,), (0, 1), (0, 1), (0, 1, 2), (0, 1, 2, 3), (1,))
    layer1 = heads((2,), (2, 3), (0, 2), (0, 1, 2), (0, 1, 2, 3), (1, 2))
    selected = np.stack([layer0, layer1], 1)  # (N, L, H)
    k = selected.sum(-1).mean(-1)  # 1, 2, 2, 3, 4, 1.5
    budgets = np.array([[0.2, 0.3], [0.4, 0.5], [0.5, 0.5], [0.7, 0.8], [0.9, 1.0], [0.3, 0.4]])
    loss = np.array([0.05, 0.5, 0.4, 1.5, 2.0, 0.1])
    needed = np.array([1, 2, 2, 3, 4, 2])
    result = from_arrays(selected, budgets, np.arange(6) % 2, np.array([0, 1, 0, 0, 0, 1]), loss, needed)
    assert result.n == 6 and result.accuracy == pytest.approx(5 / 6)
    assert result.mean_heads_fraction == pytest.approx(k.sum() / (6 * 4))
    # mean s ranks 1, 3, 4, 5, 6, 2 and loss ranks 1, 4, 3, 5, 6, 2: ρ = 1 − 6·Σd² / (n(n² − 1))
    assert result.rho_s_reference_loss == pytest.approx(1 - 6 * 2 / (6 * 35))
    assert result.heads_ratio_hard_easy == pytest.approx((3 + 4) / (1 + 1.5))
    # k ranks 1, 3.5, 3.5, 5, 6, 2 against needed ranks 1, 3, 3, 5, 6, 3: Pearson of the ranks
    assert result.rho_k_needed == pytest.approx(np.corrcoef([1, 3.5, 3.5, 5, 6, 2], [1, 3, 3, 5, 6, 3])[0, 1])
    assert result.frac_k_at_least_needed == pytest.approx(5 / 6)  # input 5: k = 1 < 2 in layer 0
    assert [layer.k_hist for layer in result.layers] == [{"1": 2, "2": 2, "3": 1, "4": 1},
                                                        {"1": 1, "2": 3, "3": 1, "4": 1}]
    json.dumps(result.to_dict(), allow_nan=False)


def test_from_arrays_without_reference_or_needs_and_with_constant_s():
    selected = np.stack([heads((0,), (1,), (0, 1))], 1)
    result = from_arrays(selected, np.full((3, 1), 0.5), [0, 1, 1], [0, 1, 0],
                         reference_loss=np.array([0.1, 0.2, 0.3]))
    assert result.rho_s_reference_loss is None and any("same for every input" in n for n in result.notes)
    assert result.rho_k_needed is None and result.frac_k_at_least_needed is None
    assert from_arrays(selected, np.ones((3, 1)), [0, 1, 1], [0, 1, 0]).heads_ratio_hard_easy is None
    same_need = from_arrays(selected, np.ones((3, 1)), [0, 1, 1], [0, 1, 0], needed_heads=[2, 2, 2])
    assert same_need.rho_k_needed is None and same_need.frac_k_at_least_needed == pytest.approx(1 / 3)
    assert same_need.notes == ["rho_k_needed is null: every input needs 2 heads"]
    with pytest.raises(ValueError, match="needed-head counts"):
        from_arrays(selected, np.ones((3, 1)), [0, 1, 1], [0, 1, 0], needed_heads=[1, 2])


ANCHOR = re.compile(r"\bq[01]{4}\b")  # synthetic_var's anchor q{mask}: the slots in use


@pytest.mark.skipif(not (PRECOMPUTED / "synthetic_var-budgetformer").is_dir(), reason="no shipped model")
def test_synthetic_var_budget_is_read_from_the_anchor():
    """The anchor names the slots an input uses, so a budget that follows the need because it
    reads the need should move with the anchor alone: the same 400 test inputs with the anchor
    rewritten to name one slot, then all four, run more heads the second time."""
    ckpt = load_checkpoint(PRECOMPUTED / "synthetic_var-budgetformer")
    texts = load_dataset("synthetic_var").split("test").texts[:400]

    def mean_k(anchor: str) -> float:
        split = Split([ANCHOR.sub(anchor, t) for t in texts], [0] * len(texts))
        return float(evaluate_split(ckpt, split).selected.sum(-1).mean())  # (N, L) -> one number

    one, four = mean_k("q1000"), mean_k("q1111")
    print(f"\nmean k with the anchor naming 1 slot: {one:.2f}, all 4: {four:.2f}")
    assert four - one > 1.5


def test_the_default_reference_is_the_dense_model_of_the_same_encoder(tmp_path):
    for name in ("bbc-dense", "bbc-minilm-dense", "bbc-budgetformer", "bbc-minilm-budgetformer"):
        (tmp_path / name).mkdir()
    assert default_reference(tmp_path / "bbc-budgetformer") == tmp_path / "bbc-dense"
    assert default_reference(tmp_path / "bbc-minilm-budgetformer") == tmp_path / "bbc-minilm-dense"
    with pytest.raises(FileNotFoundError, match="ag_news-minilm-dense"):
        default_reference(tmp_path / "ag_news-minilm-bba")
