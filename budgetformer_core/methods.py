"""What each method is, in one torch-free record: the facts the engine acts on and the words that
name its budget, heads and weights.

A model's method is its config's ``method``: ``dense`` (every head runs), ``budgetformer`` (f_θ
predicts the budget s, g_φ the head relevance p) or ``bba`` (budgeted attention allocation: the
caller requests a budget b, and gates choose nested head sets). Each method's allocator class
(:mod:`budgetformer_core.model.allocators`) reads its facts from here, and the app
(:class:`app.method.Method`) its words, so that no page branches on the method to name it.
Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MethodDescription:
    """One method: what the engine does differently for it, and how tables and pages name it.

    Words that depend on a checkpoint's config (a BudgetFormer without f_θ or g_φ, the adaptive
    recipe's gated weights, bba's default b, written ``{default_budget}``) are completed by
    :class:`app.method.Method`. The words of a budget are empty for a method without one.
    """

    name: str
    """``dense``, ``budgetformer`` or ``bba`` (``ModelConfig.method``)."""
    budgeted: bool
    """The model has a budget: a caller may request one, and an explanation has something to attribute."""
    predicts_budget: bool
    """s is predicted per input by f_θ (BudgetFormer): the budget losses train it, a requested
    budget forces it, and the ablations of :data:`~budgetformer_core.model.budget.ABLATIONS` apply.
    False where the budget is the caller's request b (bba) or there is none (dense)."""
    default_mode: str
    """The execution mode at inference (:data:`budgetformer_core.model.encoder.MODES`)."""
    training_mode: str
    """The execution mode of a forward pass in training."""
    attributed: str
    """What :func:`budgetformer_core.analysis.explain.explain` attributes to the tokens ("" where nothing)."""
    attributed_name: str
    """Its short name, as a heading says it."""

    symbol: str
    """The budget's symbol in tables and pages: s (predicted), b (requested)."""
    budget_name: str
    """The budget as a control or a card names it."""
    key_line: str
    """One line that names the page's symbols (markdown), for the first screen."""
    explore_shows: str
    """What "Explore an input" shows of a text besides its prediction (its text box's help)."""
    weight_title: str
    """The title of the head-weight map."""
    weight_note: str
    """One sentence on what a head's weight w is (markdown)."""

    own_budget: str = ""
    """Where the budget comes from when nothing overrides it (a card's note)."""
    own_budget_name: str = ""
    """The same budget in two words ("the model uses its own …")."""
    learned_label: str = ""
    """The budget control's label for the model's own budget."""
    slider_label: str = ""
    """The budget control's label for a budget set with the slider."""
    controls_note: str = ""
    """What "Explore an input" says in place of the ablation switches of f_θ and g_φ ("" where it shows them)."""
    relevance_title: str = ""
    """The title of the head-relevance map."""
    relevance_name: str = ""
    """The relevance map's title where the map stands alone."""
    relevance_symbol: str = ""
    """The relevance's symbol (a colour bar's title)."""
    relevance_origin: str = ""
    """What an input's ranking of a head is, said in a heading."""
    ranked_by: str = ""
    """What the heads that run are the top k of."""
    attributed_symbol: str = ""
    """The attributed quantity as one layer's value is labelled."""
    attributes_margin: bool = False
    """The attributed quantity compares the heads that ran with the others (bba's gate margin):
    a layer that runs every head has none."""
    explain_title: str = ""
    """The heading of the token attribution."""
    explain_toggle: str = ""
    """The switch that computes it."""
    explain_effect: str = ""
    """What a token's number there is, the middle of that switch's help."""
    ablation_note: str = ""
    """What the Ablations page says in place of its ablations ("" where they apply)."""

    @property
    def requested(self) -> bool:
        """The budget is the caller's request b, the same for every input (bba)."""
        return self.budgeted and not self.predicts_budget


DENSE = MethodDescription(
    name="dense",
    budgeted=False,
    predicts_budget=False,
    default_mode="dense",
    training_mode="dense",
    attributed="",
    attributed_name="",
    symbol="s",
    budget_name="Budget s",
    key_line="**Key** · w: a head's weight (1: every head runs in a dense model)",
    explore_shows="and how a dense model spends its heads (all of them)",
    weight_title="Dense: every head runs, weight 1",
    weight_note="Every head runs with weight **w = 1**.",
    ablation_note=("A dense model runs every head on every input: it has no budget and no head choice to "
                   "ablate. Here it stands beside the budgeted models of its encoder, each at its own "
                   "operating point."),
)

BUDGETFORMER = MethodDescription(
    name="budgetformer",
    budgeted=True,
    predicts_budget=True,
    default_mode="structural",
    training_mode="soft",
    attributed="s: the budget f_θ predicts in the layer",
    attributed_name="s",
    symbol="s",
    budget_name="Budget s",
    key_line=("**Key** · s: the budget, the share of heads a layer runs, from the budget network f_θ · "
              "p: each head's relevance, from the head scorer g_φ · ★: the head ran (the top k = ⌊s·H⌋ "
              "by p) · grey: not computed"),
    explore_shows="the share of heads each layer spends on it (the budget s) and which heads ran",
    weight_title="Head weight w = s·H·p",
    weight_note="Each head that runs is scaled by its **weight w = s·H·p**.",
    own_budget="predicted by f_θ",
    own_budget_name="s",
    learned_label="learned by f_θ",
    slider_label="set s with the slider",
    relevance_title="Head relevance p (g_φ)",
    relevance_name="Head relevance p",
    relevance_symbol="p",
    relevance_origin="its relevance p",
    ranked_by="relevance p",
    attributed_symbol="s",
    explain_title="Why this budget?",
    explain_toggle="Which tokens raised or lowered s (occlusion)",
    explain_effect="is how much s falls without it (positive: the token raised s, asking for more heads).",
)

BBA = MethodDescription(
    name="bba",
    budgeted=True,
    predicts_budget=False,
    default_mode="structural",
    training_mode="soft",
    attributed="gate margin: mean gate score z of the heads that ran at b minus that of the heads that did not",
    attributed_name="the gate margin",
    symbol="b",
    budget_name="Requested budget b",
    key_line=("**Key** · b: the budget you request (share of heads) · z: the gates' score of each head "
              "(softmax(z) on the map) · ★: the head ran · grey: not computed"),
    explore_shows="the heads each layer runs for the budget b you request (its gates choose which)",
    weight_title="Head weight w: 1 on the heads that ran, 0 elsewhere",
    weight_note="Each head that runs has weight **w = 1**, the others 0: the gates only choose.",
    own_budget="the model's default b = {default_budget:g}",
    own_budget_name="default b",
    learned_label="the model's default b",
    slider_label="request b with the slider",
    controls_note=("A budgeted-attention-allocation (bba) model: the slider is the requested budget b; each "
                   "layer runs the ⌊b·H⌋ heads its gates rank highest, nested across budgets (no b "
                   "requested: b = {default_budget:g}). It has no budget network or head scorer to ablate."),
    relevance_title="Gate scores z (softmax over the heads)",
    relevance_name="Gate scores softmax(z)",
    relevance_symbol="softmax(z)",
    relevance_origin="its relevance p from the gates",
    ranked_by="gate score z",
    attributed_symbol="gate margin",
    attributes_margin=True,
    explain_title="What the gates depend on",
    explain_toggle="Which tokens moved the gates (occlusion)",
    explain_effect=("is how much the gate margin — the mean gate score of the heads that ran at this b minus "
                    "that of the others — falls without it. The requested b itself comes from you, not the text."),
    ablation_note=("BBA has no f_θ or g_φ to take away: the caller requests its budget b and its gates choose "
                   "nested head sets, so no ablation runs on it. Here it stands beside the other models of its "
                   "encoder, each at its own operating point."),
)

METHOD_DESCRIPTIONS: dict[str, MethodDescription] = {m.name: m for m in (DENSE, BUDGETFORMER, BBA)}
"""The description of each method, by ``ModelConfig.method``."""
