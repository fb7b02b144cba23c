"""The model: an encoder classifier whose attention layers decide per input which heads run.

``encoder`` (the classifier), ``attention`` (executing a layer's head set: dense, weighted,
masked, structural), ``allocators`` (one allocator class per method: dense, BudgetFormer, bba),
``trace`` (what a layer decided, and what the layers of one forward pass share), ``budget`` (f_θ,
g_φ, bba's gates, top-k selection, :class:`~budgetformer_core.model.budget.Control` and the
ablations), ``losses`` (the BudgetFormer objective). Nothing here reads or writes files.
"""
