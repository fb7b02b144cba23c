"""The budget setting a page's controls ask for (app/settings.py): the engine's control it
maps to, its canonical form (the fields not in effect dropped) and its description."""

from __future__ import annotations

import pytest

from app.settings import Settings, control_for


def test_settings_map_to_controls(bbc_budgetformer):
    s_val = bbc_budgetformer.validation_budget
    assert s_val == bbc_budgetformer.history[-1]["val_mean_budget"]
    assert control_for(Settings(), s_val) is None
    assert control_for(Settings("slider", budget=0.3), s_val).budget == 0.3
    assert control_for(Settings("force_k", k=3), s_val).k == 3
    no_f = control_for(Settings("slider", budget=0.9, no_budget_net=True), s_val)
    assert no_f.budget == pytest.approx(s_val) and no_f.k is None  # as eval --ablation no-budget-net
    no_g = control_for(Settings(head_ablation="random"), s_val)
    assert no_g.head_choice == "random" and no_g.budget is None
    with pytest.raises(ValueError):
        Settings("nonsense")
    with pytest.raises(ValueError):
        Settings(head_ablation="learned-ish")


def test_canonical_settings_drop_unused_fields():
    assert Settings("learned", budget=0.8, k=5).canonical() == Settings()
    assert Settings("slider", budget=0.8, k=5).canonical() == Settings("slider", budget=0.8)
    assert Settings("force_k", budget=0.8, k=5, no_budget_net=True).canonical() == Settings(
        no_budget_net=True
    )
    assert Settings(head_ablation="random", seed=3).describe() == "random heads (seed 3)"
    assert Settings(head_ablation="uniform").describe() == "no g_φ (first k heads)"
