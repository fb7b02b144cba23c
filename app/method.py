"""How the pages name a model's method: its budget, head choice and head weights in its own
words (no Streamlit here).

The words of each method are its description's (:mod:`budgetformer_core.methods`, torch-free);
:class:`Method` completes them with what a checkpoint's config says.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from budgetformer_core.methods import METHOD_DESCRIPTIONS, MethodDescription

if TYPE_CHECKING:
    from budgetformer_core.config import ModelConfig

NO_F = "fixed by its config (no f_θ)"
"""Where a BudgetFormer without f_θ gets its budget s."""
GATED_WEIGHT_TITLE = "Head weight w = 1 on the heads that ran"
GATED_WEIGHT_NOTE = ("Each head that runs has weight **w = 1** (the adaptive recipe: soft gates in "
                     "training, so s decides *which* heads contribute, not how loud they are).")
"""The head weights of a BudgetFormer trained with the adaptive recipe (``head_weighting="gated"``)."""


@dataclass(frozen=True)
class Method:
    """How the pages name a model's budget, head choice and head weights: its method's
    :attr:`description` (BudgetFormer: s from f_θ, relevance p from g_φ; bba: a requested budget
    b, gate scores z, weights 1 or 0), completed by what the checkpoint's config says."""

    kind: str = "budgetformer"
    """``dense``, ``budgetformer`` or ``bba`` (the config's ``method``)."""
    has_f: bool = True
    """A budget network f_θ predicts s (BudgetFormer with ``use_budget_net``)."""
    has_g: bool = True
    """A head scorer g_φ rates the heads (BudgetFormer with ``head_choice="learned"``)."""
    gated: bool = False
    """w = 1 on the heads that run (the adaptive recipe, ``head_weighting="gated"``), not s·H·p."""
    head_choice: str = "learned"
    default_budget: float = 0.5
    """bba: the budget b run when none is requested."""

    @property
    def description(self) -> MethodDescription:
        """What the method is and the words that name it, the same for every checkpoint of it."""
        return METHOD_DESCRIPTIONS[self.kind]

    @property
    def is_dense(self) -> bool:
        """Every head runs on every input: no budget, no head choice."""
        return self.kind == "dense"

    @property
    def is_bba(self) -> bool:
        """A requested budget b gates nested head sets (no f_θ, no g_φ)."""
        return self.kind == "bba"

    @property
    def is_budgetformer(self) -> bool:
        """f_θ's budget s and g_φ's relevance p choose the heads (or their ablations)."""
        return self.kind == "budgetformer"

    @property
    def budgeted(self) -> bool:
        """The model has a budget to set and a choice of heads to show (not dense)."""
        return self.description.budgeted

    @property
    def predicts_budget(self) -> bool:
        """A BudgetFormer: its budget and head choice are networks that can be ablated."""
        return self.description.predicts_budget

    @property
    def requested(self) -> bool:
        """The budget is the caller's request b, the same for every input (bba)."""
        return self.description.requested

    @property
    def symbol(self) -> str:
        """The budget's name: b (bba), s (the others)."""
        return self.description.symbol

    @property
    def budget_name(self) -> str:
        return self.description.budget_name

    @property
    def key_line(self) -> str:
        """One line that names the page's symbols (markdown), for the first screen."""
        return self.description.key_line

    @property
    def own_budget(self) -> str:
        """Where the budget comes from when nothing overrides it."""
        if self.is_budgetformer and not self.has_f:
            return NO_F
        return self.description.own_budget.format(default_budget=self.default_budget)

    @property
    def controls_note(self) -> str:
        """What "Explore an input" says in place of the ablation switches ("" where it shows them)."""
        return self.description.controls_note.format(default_budget=self.default_budget)

    @property
    def mode_labels(self) -> dict[str, str]:
        """Labels of the budget modes of :data:`app.settings.BUDGET_MODES`."""
        learned = NO_F if self.is_budgetformer and not self.has_f else self.description.learned_label
        return {"learned": learned, "slider": self.description.slider_label, "force_k": "force k heads"}

    def relevance_title(self, head_ablation: str | None = None) -> str:
        if self.is_budgetformer and head_ablation is not None:
            return f"Head relevance p (g_φ off: {head_ablation} heads)"
        if self.is_budgetformer and not self.has_g:
            return f"Head relevance p (no g_φ: {self.head_choice} heads)"
        return self.description.relevance_title

    def chosen_by_relevance(self, head_ablation: str | None = None) -> bool:
        """The heads that run are the top k by the relevance map (bba: by z; a BudgetFormer with
        g_φ in use), so that heads can be tied at the cut."""
        return self.kind == "bba" or (self.kind == "budgetformer" and self.has_g and head_ablation is None)

    @property
    def relevance_symbol(self) -> str:
        return self.description.relevance_symbol

    @property
    def weight_title(self) -> str:
        return GATED_WEIGHT_TITLE if self.gated else self.description.weight_title

    @property
    def weight_note(self) -> str:
        """One sentence on what w is (the heads that ran are scaled by it)."""
        return GATED_WEIGHT_NOTE if self.gated else self.description.weight_note


def method_of(cfg: ModelConfig) -> Method:
    """The :class:`Method` of a checkpoint's model config, as the engine reads config.json
    (:func:`budgetformer_core.config.model_config_from_dict`: its defaults, its checks)."""
    method = Method(kind=cfg.method, head_choice=cfg.head_choice, default_budget=cfg.default_budget)
    if not method.is_budgetformer:
        return replace(method, has_f=False, has_g=False)
    return replace(method, has_f=cfg.use_budget_net, has_g=cfg.head_choice == "learned",
                   gated=cfg.head_weighting == "gated")
