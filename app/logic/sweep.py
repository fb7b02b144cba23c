"""The words of the "Budget sweep" page (no Streamlit here): each says only what the charts beside
it draw, read from what :func:`app.logic.results.budget_series` and
:func:`app.logic.results.method_series` give them; the tables are :mod:`app.logic.results`'."""

from __future__ import annotations

from app.logic.results import METHOD_NAMES, POSTHOC, SPECIALISTS


def listing(parts: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def intro(drawn: dict, symbol: str, budgets: list[float]) -> str:
    """The page's opening line for a model that takes a budget: what it was run at and what its
    curves are drawn against — dense, the zero-shot post-hoc sweep and the per-budget specialists
    only where ``drawn`` (:func:`~app.logic.results.budget_series` of the model) has them."""
    subject = "The model asked for a budget b" if symbol == "b" else "The model run with its budget s set"
    span = f" from {min(budgets):g} to {max(budgets):g}" if budgets else ""
    beside = []
    if drawn.get("reference"):
        beside.append("dense (dotted)")
    if METHOD_NAMES[POSTHOC] in drawn.get("lines", {}):
        beside.append("the zero-shot post-hoc sweep")
    specialists = [name for name in SPECIALISTS.values() if name in drawn.get("points", {})]
    if specialists:
        beside.append(f"the per-budget specialists ({', '.join(specialists)}), each trained for one budget")
    against = f" against {listing(beside)}" if beside else ""
    own = any(name.endswith(" at its own point") for name in drawn.get("points", {}))
    return (f"{subject} (the fraction of heads it may use){span}, on the held-out test split: accuracy "
            f"and cost at each budget{against}" + ("; the star is its own operating point." if own else "."))


def methods_caption(drawn: dict) -> str:
    """The caption of *Every method against its cost*: a sentence for each kind of curve or point
    ``drawn`` (:func:`~app.logic.results.method_series`) holds, and the error bars where there are some."""
    names = {*drawn.get("lines", {}), *drawn.get("points", {})}
    said = []
    if "BBA (one checkpoint)" in names:
        said.append("BBA is one checkpoint asked for every budget")
    if METHOD_NAMES[POSTHOC] in names:
        said.append("post-hoc pruning is the dense model with its lowest-ranked heads cut, without training")
    specialists = [name for name in SPECIALISTS.values() if name in names]
    if specialists:
        said.append(f"the {' and '.join(specialists)} specialists are a model per budget")
    if "BudgetFormer (its own point)" in names:
        said.append("BudgetFormer sits at the cost it chose itself")
    if "dense" in names:
        said.append("dense runs every head")
    text = "; ".join(said)
    text = text[:1].upper() + text[1:] + "." if text else ""
    if drawn.get("errors"):
        text += " Error bars: 95% bootstrap intervals over the test inputs, where a per-example table is shipped."
    return text.strip()
