"""The shipped BBC checkpoints load and reproduce the test figures stored with them (README)."""

from __future__ import annotations

import pytest

from budgetformer_core.checkpoint import load_checkpoint
from budgetformer_core.data import load_bbc
from budgetformer_core.infer import evaluate_split

from ..conftest import PRECOMPUTED


@pytest.fixture(scope="module")
def bbc_test():
    return load_bbc().split("test")


@pytest.mark.parametrize("name", ["bbc-dense", "bbc-budgetformer"])
def test_checkpoint_reproduces_stored_test_accuracy(name, bbc_test):
    ckpt = load_checkpoint(PRECOMPUTED / name)
    stored = ckpt.meta["test"]
    result = evaluate_split(ckpt, bbc_test)
    assert result.n == stored["n"] == len(bbc_test)
    assert result.accuracy == pytest.approx(stored["accuracy"], abs=1e-9)
    assert result.mean_budget == pytest.approx(stored["mean_budget"], abs=1e-4)
    assert result.flops_ratio == pytest.approx(stored["flops_ratio"], abs=1e-6)


def test_budgetformer_meets_the_bar(bbc_test):
    meta = load_checkpoint(PRECOMPUTED / "bbc-budgetformer").meta
    assert meta["test"]["accuracy"] >= 0.97
    assert meta["test"]["mean_budget"] <= 0.5
