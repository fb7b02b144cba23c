"""``python -m budgetformer_core.model.native``: build the compiled allocation and attention (``make`` does)."""

from . import LIBRARY, build

problem = build()
print(f"compiled head allocation and attention: {problem}; the eager path will run" if problem
      else f"compiled head allocation and attention built: {LIBRARY.name}")
