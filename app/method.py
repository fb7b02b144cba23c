"""How the pages name a model's method: its budget, head choice and head weights in its own
words (no Streamlit here)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from budgetformer_core.config import ModelConfig
    from budgetformer_core.io.checkpoint import Checkpoint


@dataclass(frozen=True)


class Method:
    """How the pages name a model's budget, head choice and head weights: each method in its own
    words (BudgetFormer: s from f_θ, relevance p from g_φ; bba: a requested budget b, gate
    scores z, weights 1 or 0)."""

    kind: str = "budgetformer"
    """``dense``, ``budgetformer`` or ``bba`` (the config's ``variant``)."""
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
    def symbol(self) -> str:
        """The budget's name: b (bba), s (the others)."""
        return "b" if self.is_bba else "s"

    @property
    def budget_name(self) -> str:
        return "Requested budget b" if self.is_bba else "Budget s"

    @property
    def key_line(self) -> str:
        """One line that names the page's symbols (markdown), for the first screen."""
        if self.is_bba:
            return ("**Key** · b: the budget you request (share of heads) · z: the gates' score of each head "
                    "(softmax(z) on the map) · ★: the head ran · grey: not computed")
        if self.is_dense:
            return "**Key** · w: a head's weight (1: every head runs in a dense model)"
        return ("**Key** · s: the budget, the share of heads a layer runs, from the budget network f_θ · "
                "p: each head's relevance, from the head scorer g_φ · ★: the head ran (the top k = ⌊s·H⌋ "
                "by p) · grey: not computed")

    @property
    def own_budget(self) -> str:
        """Where the budget comes from when nothing overrides it."""
        if self.is_bba:
            return f"the model's default b = {self.default_budget:g}"
        return "predicted by f_θ" if self.has_f else "fixed by its config (no f_θ)"

    @property
    def mode_labels(self) -> dict[str, str]:
        """Labels of the budget modes of :data:`app.settings.BUDGET_MODES`."""
        if self.is_bba:
            return {"learned": "the model's default b", "slider": "request b with the slider",
                    "force_k": "force k heads"}
        return {"learned": "learned by f_θ" if self.has_f else "fixed by its config (no f_θ)",
                "slider": "set s with the slider", "force_k": "force k heads"}

    def relevance_title(self, head_ablation: str | None = None) -> str:
        if self.is_bba:
            return "Gate scores z (softmax over the heads)"
        if head_ablation is not None:
            return f"Head relevance p (g_φ off: {head_ablation} heads)"
        return "Head relevance p (g_φ)" if self.has_g else f"Head relevance p (no g_φ: {self.head_choice} heads)"

    def chosen_by_relevance(self, head_ablation: str | None = None) -> bool:
        """The heads that run are the top k by the relevance map (bba: by z; a BudgetFormer with
        g_φ in use), so that heads can be tied at the cut."""
        return self.kind == "bba" or (self.kind == "budgetformer" and self.has_g and head_ablation is None)

    @property
    def relevance_symbol(self) -> str:
        return "softmax(z)" if self.is_bba else "p"

    @property
    def weight_title(self) -> str:
        if self.is_dense:
            return "Dense: every head runs, weight 1"
        if self.is_bba:
            return "Head weight w: 1 on the heads that ran, 0 elsewhere"
        return "Head weight w = 1 on the heads that ran" if self.gated else "Head weight w = s·H·p"

    @property
    def weight_note(self) -> str:
        """One sentence on what w is (the heads that ran are scaled by it)."""
        if self.is_bba:
            return "Each head that runs has weight **w = 1**, the others 0: the gates only choose."
        if self.gated:
            return ("Each head that runs has weight **w = 1** (the adaptive recipe: soft gates in "
                    "training, so s decides *which* heads contribute, not how loud they are).")
        return "Each head that runs is scaled by its **weight w = s·H·p**."


def method_of(cfg: ModelConfig) -> Method:
    """The :class:`Method` of a checkpoint's model config, as the engine reads config.json
    (:func:`budgetformer_core.config.model_config_from_dict`: its defaults, its checks)."""
    method = Method(kind=cfg.variant, head_choice=cfg.head_choice, default_budget=cfg.default_budget)
    if not method.is_budgetformer:
        return replace(method, has_f=False, has_g=False)
    return replace(method, has_f=cfg.use_budget_net, has_g=cfg.head_choice == "learned",
                   gated=cfg.head_weighting == "gated")


def is_budgeted(ckpt: Checkpoint) -> bool:
    """False for a dense checkpoint (no budget, no head choice)."""
    return not method_of(ckpt.config).is_dense
