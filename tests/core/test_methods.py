"""The methods' descriptions: torch-free, one per method, and what the allocator classes carry."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

from budgetformer_core.config import MethodName
from budgetformer_core.methods import METHOD_DESCRIPTIONS
from budgetformer_core.model.allocators import METHOD_FACTS, METHODS, FixedHeads


def test_the_descriptions_import_without_torch():
    code = "import sys, budgetformer_core.methods; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_one_description_and_one_allocator_class_per_method():
    assert set(METHOD_DESCRIPTIONS) == set(METHODS) == set(get_args(MethodName))
    for name, cls in METHODS.items():
        assert cls.description is METHOD_DESCRIPTIONS[name]
        assert all(getattr(cls, fact) == getattr(cls.description, fact) for fact in METHOD_FACTS)
    assert FixedHeads.description is None  # a pruned layer of any method


def test_who_sets_the_budget():
    dense, budgetformer, bba = (METHOD_DESCRIPTIONS[m] for m in ("dense", "budgetformer", "bba"))
    assert not dense.budgeted and dense.default_mode == dense.training_mode == "dense"
    assert budgetformer.predicts_budget and not budgetformer.requested and budgetformer.symbol == "s"
    assert bba.requested and bba.symbol == "b" and bba.attributes_margin
    assert "{default_budget:g}" in bba.own_budget and not dense.explain_title
