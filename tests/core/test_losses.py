"""L_budget is a quadratic hinge on [s_min, s_max]; β(t) goes from explore to exploit."""

from __future__ import annotations

import math

import pytest
import torch

from budgetformer_core.model.losses import beta_at, budget_loss, head_entropy


def test_budget_loss_zero_inside_band():
    s = torch.linspace(0.2, 0.5, 31)
    assert budget_loss(s, 0.2, 0.5).item() == 0.0


@pytest.mark.parametrize("d", [0.01, 0.05, 0.2])
def test_budget_loss_quadratic_outside(d):
    above = budget_loss(torch.tensor([0.5 + d]), 0.2, 0.5).item()
    below = budget_loss(torch.tensor([0.2 - d]), 0.2, 0.5).item()
    assert above == pytest.approx(d**2, rel=1e-4)
    assert below == pytest.approx(d**2, rel=1e-4)
    # doubling the distance quadruples the loss
    assert budget_loss(torch.tensor([0.5 + 2 * d]), 0.2, 0.5).item() == pytest.approx(4 * above, rel=1e-4)


def test_head_entropy_bounds():
    assert head_entropy(torch.full((3, 8), 1 / 8)).item() == pytest.approx(math.log(8), rel=1e-6)
    assert head_entropy(torch.eye(8)).item() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("schedule", ["linear", "cosine", "step"])
def test_beta_goes_from_explore_to_exploit(schedule):
    values = [beta_at(t / 10, -1.0, 2.0, schedule) for t in range(11)]
    assert values[0] == pytest.approx(-1.0) and values[-1] == pytest.approx(2.0)
    assert all(a <= b + 1e-12 for a, b in zip(values, values[1:]))


def test_unknown_schedule():
    with pytest.raises(ValueError, match="schedule"):
        beta_at(0.5, -1, 1, "zigzag")


@pytest.mark.parametrize("recipe", ["adaptive", "paper"])
def test_the_adaptive_recipe_prices_heads(recipe):
    from budgetformer_core.config import TrainConfig
    from budgetformer_core.model.encoder import BudgetFormer
    from budgetformer_core.model.losses import total_loss

    from ..conftest import small_config

    torch.manual_seed(0)
    model = BudgetFormer(small_config()).train()
    ids = torch.randint(3, 50, (4, 7))
    out = model(ids, torch.ones_like(ids, dtype=torch.bool))
    y = torch.tensor([0, 1, 2, 0])
    cfg = TrainConfig(recipe=recipe, lambda_cost=0.5)
    terms = total_loss(out, y, cfg, 0.5, task_only=False)
    base = total_loss(out, y, TrainConfig(recipe="paper"), 0.5, task_only=False)
    mean_s = torch.stack([t.budget for t in out.layers]).mean().item()
    expected = base.total.item() + (0.5 * mean_s if recipe == "adaptive" else 0.0)
    assert terms.total.item() == pytest.approx(expected, rel=1e-6)
    assert terms.cost == (pytest.approx(mean_s) if recipe == "adaptive" else 0.0)


def test_difficulty_targets_map_loss_ranks_onto_the_band():
    from budgetformer_core.model.losses import difficulty_targets

    targets = difficulty_targets(torch.tensor([0.3, 0.01, 2.0, 0.3]), 0.1, 0.7)
    assert targets.tolist() == pytest.approx([0.3, 0.1, 0.7, 0.5])  # ranks 1, 0, 3, 2 of 3
    assert difficulty_targets(torch.tensor([1.0]), 0.1, 0.7).tolist() == pytest.approx([0.1])


def test_a_given_difficulty_sets_the_targets_instead_of_the_models_own_loss():
    """λ_d's term ranks the losses it is given (the warm start's), not the model's: the term is
    mean (s − target)² with the targets of the given ranks, and the ranks reversed change it."""
    from budgetformer_core.config import TrainConfig
    from budgetformer_core.model.encoder import BudgetFormer
    from budgetformer_core.model.losses import difficulty_targets, total_loss

    from ..conftest import small_config

    torch.manual_seed(0)
    out = BudgetFormer(small_config()).train()(torch.randint(3, 50, (4, 7)), torch.ones(4, 7, dtype=torch.bool))
    y, cfg = torch.tensor([0, 1, 2, 0]), TrainConfig(lambda_difficulty=2.0, s_min=0.1, s_max=0.7)
    s = torch.stack([t.budget for t in out.layers]).detach()  # (L, B)
    given = torch.tensor([1e-9, 3e-9, 2e-9, 4e-9], dtype=torch.float64)  # apart only in float64
    for d in (given, -given):
        terms = total_loss(out, y, cfg, 0.5, task_only=False, difficulty=d)
        target = difficulty_targets(d, cfg.s_min, cfg.s_max).float()
        assert terms.difficulty == pytest.approx(((s - target) ** 2).mean().item(), rel=1e-5)
    own = total_loss(out, y, cfg, 0.5, task_only=False)
    assert own.difficulty != pytest.approx(total_loss(out, y, cfg, 0.5, False, difficulty=given).difficulty)


def test_head_load_is_one_when_inputs_spread_over_heads_and_h_when_they_agree():
    from budgetformer_core.model.losses import head_load

    spread = torch.eye(4)[None]  # (L=1, B=4, H=4): each input favours its own head
    agree = torch.eye(4)[[0, 0, 0, 0]][None]  # every input favours head 0
    assert head_load(spread).item() == pytest.approx(1.0)
    assert head_load(agree).item() == pytest.approx(4.0)


ENTERED = [  # settings; the terms that enter the total with either recipe; those that enter with adaptive only
    ({"lambda_difficulty": 2.0, "lambda_balance": 0.3}, {"task", "budget", "entropy_term"},
     {"cost", "difficulty", "balance"}),
    ({"lambda_budget": 0.0}, {"task", "entropy_term"}, {"cost"}),
    ({"lambda_entropy": 0.0}, {"task", "budget"}, {"cost"}),
]  # fmt: skip


@pytest.mark.parametrize("recipe", ["adaptive", "paper"])
def test_the_recorded_terms_add_up_to_the_total(recipe):
    """Each term the loss reports, weighted as the history weighs it (``loss_weights``), adds up
    to the total, and a term with no weight is not listed; a model trained on the task loss
    alone (dense, bba) has that term alone."""
    from budgetformer_core.config import TrainConfig, to_dict
    from budgetformer_core.model.encoder import BudgetFormer
    from budgetformer_core.model.losses import total_loss
    from budgetformer_core.train.history import loss_weights

    from ..conftest import small_config

    torch.manual_seed(0)
    out = BudgetFormer(small_config()).train()(torch.randint(3, 50, (4, 7)), torch.ones(4, 7, dtype=torch.bool))
    labels = torch.tensor([0, 1, 2, 0])
    for settings, both, adaptive in ENTERED:
        cfg = TrainConfig(recipe=recipe, lambda_cost=0.5, s_min=0.6, s_max=0.7, **settings)
        t = total_loss(out, labels, cfg, 0.2, task_only=False)
        weights = loss_weights(to_dict(cfg), task_only=False)
        assert set(weights) == both | (adaptive if recipe == "adaptive" else set()), settings
        assert t.total.item() == pytest.approx(sum(w * getattr(t, term) for term, w in weights.items()), abs=1e-6)
    cfg = TrainConfig(recipe=recipe, lambda_cost=0.5, lambda_difficulty=2.0, lambda_balance=0.3, s_min=0.6, s_max=0.7)
    t = total_loss(out, labels, cfg, 0.2, task_only=False)
    assert t.entropy_term == pytest.approx(cfg.lambda_entropy * t.beta * t.entropy, rel=1e-5)
    assert (t.difficulty > 0 and t.balance >= 1) == (recipe == "adaptive")
    alone = total_loss(out, labels, cfg, 0.2, task_only=True)
    assert loss_weights(to_dict(cfg), task_only=True) == {"task": 1.0} and alone.total.item() == alone.task


def test_loss_weights_name_a_setting_the_config_does_not_record():
    """A training config written before a setting existed does not stand in a default for it."""
    from budgetformer_core.config import TrainConfig, to_dict
    from budgetformer_core.train.history import loss_weights

    old = {k: v for k, v in to_dict(TrainConfig()).items() if k != "lambda_cost"}
    with pytest.raises(KeyError, match="lambda_cost"):
        loss_weights(old, task_only=False)
    with pytest.raises(KeyError, match="recipe"):  # recorded as null: not recorded either
        loss_weights({**old, "lambda_cost": 0.05, "recipe": None}, task_only=False)
    assert loss_weights(old, task_only=True) == {"task": 1.0}  # the task loss alone needs no λ
    assert loss_weights({**old, "recipe": "paper"}, task_only=False) == {"task": 1.0, "budget": 1.0,
                                                                        "entropy_term": 1.0}
