"""``python -m budgetformer_core.model.native``: build the compiled allocation (``make`` does)."""

from . import LIBRARY, build

problem = build()
print(f"compiled head allocation: {problem}; the eager path will run" if problem
      else f"compiled head allocation built: {LIBRARY.name}")
