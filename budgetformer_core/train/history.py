"""What a run's history.json holds: a row per epoch with the mean of every loss term over the
epoch's training inputs, the same terms as they entered the total loss (``loss_terms``: each
times its weight λ), accuracy, the budget per layer and the validation figures.

Torch-free: the app reads a history, and derives the weighted terms of one written before
``loss_terms`` existed from its run's recorded training config (:func:`loss_weights`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SUMS = ("loss", "task", "budget", "entropy", "cost", "entropy_term", "difficulty", "balance")
"""The loss terms an epoch sums over its inputs (``correct`` counts beside them)."""

TERM_COLUMNS = {"task": "task_loss", "budget": "budget_loss", "entropy_term": "entropy_term", "cost": "cost",
                "difficulty": "difficulty_loss", "balance": "balance_loss"}
"""Each term of the loss (named as in :class:`~budgetformer_core.model.losses.LossTerms`) and the
history column of its epoch mean before weighting (``entropy_term`` is λ_e·β(t)·H(p) already:
β(t) moves within an epoch, so it cannot be weighted afterwards)."""


def loss_weights(train: Mapping[str, Any], task_only: bool) -> dict[str, float]:
    """The weight each term of :func:`~budgetformer_core.model.losses.total_loss` entered the total
    with, for a run whose training config is ``train`` (``to_dict(TrainConfig)``, as config.json
    records it); a term with no weight did not enter.

    ``task_only`` (a dense or bba model): the task loss alone. Otherwise also ``budget`` (λ_b),
    ``entropy_term`` (1: λ_e·β(t) is inside it; absent when λ_e is 0) and, in the ``adaptive``
    recipe, ``cost`` (λ_c), ``difficulty`` (λ_d) and ``balance`` (λ_u) where they are not 0.

    Raises:
        KeyError: ``train`` does not record a setting the weights depend on (a config written
            before that setting existed, or one that records it as null).
    """
    if task_only:
        return {"task": 1.0}

    def recorded(key: str) -> Any:
        if train.get(key) is None:
            raise KeyError(key)
        return train[key]

    weights = {"task": 1.0, "budget": float(recorded("lambda_budget")),
               "entropy_term": 1.0 if recorded("lambda_entropy") else 0.0}
    if recorded("recipe") == "adaptive":
        weights.update(cost=float(recorded("lambda_cost")), difficulty=float(recorded("lambda_difficulty")),
                       balance=float(recorded("lambda_balance")))
    return {term: weight for term, weight in weights.items() if weight}


def epoch_summary(epoch: int, sums: dict[str, float], s_sum: torch.Tensor, n_train: int, terms, lr: float,
                  val, weights: Mapping[str, float]) -> dict[str, Any]:
    """The history row of an epoch: its mean training losses, the terms that made up the total
    (``weights``: :func:`loss_weights`), accuracy and budget, and validation."""
    mean = {key: sums[key] / n_train for key in SUMS}
    return {
        "epoch": epoch + 1,
        "loss": mean["loss"],
        "task_loss": mean["task"],
        "budget_loss": mean["budget"],
        "entropy": mean["entropy"],
        "cost": mean["cost"],
        "entropy_term": mean["entropy_term"],
        "difficulty_loss": mean["difficulty"],
        "balance_loss": mean["balance"],
        "loss_terms": {term: weight * mean[term] for term, weight in weights.items()},
        "beta": terms.beta,
        "lr": lr,
        "train_accuracy": sums["correct"] / n_train,
        "train_mean_budget_per_layer": (s_sum / n_train).tolist(),
        "val_accuracy": val.accuracy,
        "val_mean_budget": val.mean_budget,
        "val_mean_budget_per_layer": val.mean_budget_per_layer,
        "val_mean_heads_fraction": val.mean_heads_fraction,
        "val_head_entropy": val.head_entropy,
    }
