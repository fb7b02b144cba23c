"""BudgetFormer Explorer's engine: adaptive attention-head budgeting, trained and measured.

The engine never imports streamlit; the app in ``app/`` is a thin layer over it.
"""

__version__ = "0.1.0"
