"""The budget setting a page's controls ask for, as data (no Streamlit here).

A page reads its budget mode, budget, forced k and ablations into a :class:`Settings` (hashable,
so results are cached by it); :func:`control_for` turns it into the engine's
:class:`budgetformer_core.model.budget.Control`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from budgetformer_core.model.budget import Control

BUDGET_MODES = ("learned", "slider", "force_k")
"""``learned``: s from f_θ; ``slider``: s from the slider for every layer; ``force_k``: k heads."""

HEAD_ABLATIONS = ("random", "uniform")


@dataclass(frozen=True)


class Settings:
    """What the page's controls ask for; hashable so results can be cached by it."""

    budget_mode: str = "learned"
    """One of :data:`BUDGET_MODES`."""
    budget: float = 0.5
    """s used in ``slider`` mode."""
    k: int = 2
    """Heads per layer in ``force_k`` mode."""
    no_budget_net: bool = False
    """Ablation "no f_θ" (``budget.ABLATIONS``): a constant s in every layer and for every input,
    the model's mean s on its validation split."""
    head_ablation: str | None = None
    """Heads chosen without g_φ: ``uniform`` (ablation "no g_φ": the first k heads) or
    ``random`` (ablation "random heads": k heads drawn at random)."""
    seed: int = 0
    """Seed of the random head choice."""

    def __post_init__(self) -> None:
        if self.budget_mode not in BUDGET_MODES:
            raise ValueError(f"budget_mode must be one of {BUDGET_MODES}, got {self.budget_mode!r}")
        if self.head_ablation not in (None, *HEAD_ABLATIONS):
            raise ValueError(
                f"head_ablation must be random, uniform or None, got {self.head_ablation!r}"
            )

    @property
    def is_full_model(self) -> bool:
        """True when nothing overrides the model's own f_θ and g_φ."""
        return (
            self.budget_mode == "learned" and not self.no_budget_net and self.head_ablation is None
        )

    def canonical(self) -> Settings:
        """The same setting with the fields it does not use reset (one cache entry per setting)."""
        default = Settings()
        return Settings(
            budget_mode="learned" if self.no_budget_net else self.budget_mode,
            budget=self.budget
            if self.budget_mode == "slider" and not self.no_budget_net
            else default.budget,
            k=self.k if self.budget_mode == "force_k" and not self.no_budget_net else default.k,
            no_budget_net=self.no_budget_net,
            head_ablation=self.head_ablation,
            seed=self.seed if self.head_ablation == "random" else default.seed,
        )

    def in_effect(self, symbol: str = "s") -> dict:
        """The fields that decide this run, as JSON-ready data: a greyed-out control's value is
        left out (the budget outside ``slider`` mode, k outside ``force_k``, the seed without
        random heads); the budget under its method's name (``symbol``: s, or bba's b)."""
        used = self.canonical()
        out: dict = {"budget_mode": used.budget_mode, "no_budget_net": used.no_budget_net,
                     "head_ablation": used.head_ablation}
        if used.budget_mode == "slider":
            out[f"budget_{symbol}"] = used.budget
        elif used.budget_mode == "force_k":
            out["k"] = used.k
        if used.head_ablation == "random":
            out["seed"] = used.seed
        return out | {"description": used.describe(symbol)}

    def describe(self, symbol: str = "s") -> str:
        """A short human-readable name of this setting (``symbol``: the budget's name, s or b)."""
        parts = []
        if self.no_budget_net:
            parts.append("no f_θ (s = validation mean)")
        elif self.budget_mode == "slider":
            parts.append(f"{symbol} = {self.budget:.2f}")
        elif self.budget_mode == "force_k":
            parts.append(f"k = {self.k}")
        if self.head_ablation:
            parts.append(
                "no g_φ (first k heads)" if self.head_ablation == "uniform" else f"random heads (seed {self.seed})"
            )
        return ", ".join(parts) or "full model"


def control_for(settings: Settings, validation_budget: float) -> Control | None:
    """The :class:`budgetformer_core.model.budget.Control` implementing ``settings`` (``None`` for the full model).

    ``validation_budget`` is the model's mean s on its validation split, the "no f_θ" constant
    (``Checkpoint.validation_budget``), as in ``budgetformer eval --ablation no-budget-net``.
    """
    from budgetformer_core.model.budget import Control, ablation

    if settings.is_full_model:
        return None
    if settings.no_budget_net:  # the engine's ablation, its constant s kept inside (0, 1]
        control = ablation("no-budget-net", min(1.0, max(validation_budget, 1e-3)))
    elif settings.budget_mode == "slider":
        control = Control(budget=settings.budget)
    elif settings.budget_mode == "force_k":
        control = Control(k=settings.k)
    else:
        control = Control()
    return dataclasses.replace(control, head_choice=settings.head_ablation, seed=settings.seed)
