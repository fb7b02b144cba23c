"""How a model's test accuracy stands against its dataset's dense model (no Streamlit here).

The sidebar's model picker marks a full method that has not learned its task as well as dense,
and says which models are built to lose (ablations, smaller dense models); the numbers are
config.json's ``test`` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from budgetformer_core.config import stored_method
from budgetformer_core.shipped import dense_reference

FLAG_POINTS = 3.0
"""A full method more than this many points of test accuracy below its dataset's dense model is flagged."""


@dataclass(frozen=True)
class Standing:
    """How a model's test accuracy stands against its dataset's dense model (config.json's ``test``)."""

    kind: Literal["reference", "fine", "flagged", "expected"]
    """``reference``: the dense model itself; ``fine``: a full method within :data:`FLAG_POINTS`;
    ``flagged``: a full method further below; ``expected``: an ablation or a smaller dense model,
    built to lose."""
    note: str
    """One line for the page ("" for ``reference`` and ``fine``)."""
    mark: str = ""
    """A few characters for the model picker's option ("" when there is nothing to say)."""


def standing(name: str, cfg: dict, dense_accuracy: float | None) -> Standing:
    """Where checkpoint ``name`` (its config.json ``cfg``) stands against its dense model
    (:func:`budgetformer_core.shipped.dense_reference`), whose test accuracy is ``dense_accuracy``
    (None when it is not shipped).

    Ablations (no f_θ: ``use_budget_net`` false; no g_φ: ``head_choice`` not ``learned``) and a
    dense model other than that reference are built to lose; every other model is a full
    method, flagged when it is more than :data:`FLAG_POINTS` points below dense.
    """
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    accuracy = (cfg.get("test") or {}).get("accuracy") if isinstance(cfg.get("test"), dict) else None
    dataset = str(cfg.get("dataset") or "unknown")
    versus = (
        f" ({accuracy:.1%} against dense {dense_accuracy:.1%})"
        if isinstance(accuracy, (int, float)) and dense_accuracy is not None
        else ""
    )
    reference = dense_reference(dataset, name, full=True)
    if stored_method(model) == "dense":
        if name == reference:
            return Standing("reference", "")
        return Standing("expected", f"A smaller dense model: it is expected to lose to {reference}{versus}.",
                        "smaller dense")
    if model.get("use_budget_net") is False or model.get("head_choice", "learned") != "learned":
        missing = "f_θ" if model.get("use_budget_net") is False else "g_φ"
        return Standing("expected", f"An ablation (no {missing}): it is expected to lose to the full model{versus}.",
                        "ablation")
    if not isinstance(accuracy, (int, float)) or dense_accuracy is None:
        return Standing("fine", "")
    gap = (dense_accuracy - accuracy) * 100
    if gap <= FLAG_POINTS:
        return Standing("fine", "")
    return Standing(
        "flagged",
        f"This model has not learned the task as well as dense: {accuracy:.1%} against dense "
        f"{dense_accuracy:.1%} ({gap:.1f} points below; a full method is expected within {FLAG_POINTS:g}).",
        f"⚑ {accuracy:.1%} vs dense {dense_accuracy:.1%}",
    )
