"""What the "Side by side" page computes: the differences between two analyses and each side's
headline numbers (no Streamlit here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.cards import Card
from app.logic.explore import metric_cards

if TYPE_CHECKING:
    from app.method import Method
    from app.settings import Settings
    from budgetformer_core.analysis.infer import Analysis


# --------------------------------------------------------------------------- side by side


def _heads(heads) -> str:
    return "{" + ",".join(str(h) for h in sorted(heads)) + "}"


def side_differences(
    a: Analysis, b: Analysis, method_a: Method, method_b: Method, names: tuple[str, str] = ("A", "B")
) -> list[str]:
    """What differs between two analyses shown side by side, a line each (markdown-free): the
    prediction, then per layer k, the budget (each side's own: s, or bba's b; none for dense) and
    the heads only one side ran ("layer 1: k 3 vs 5; heads {1,2} only in A")."""
    na, nb = names
    conf_a, conf_b = max(a.probs), max(b.probs)
    if a.label == b.label:
        lines = [f"same prediction: {a.label} ({conf_a:.1%} in {na}, {conf_b:.1%} in {nb})"]
    else:
        lines = [f"prediction: {a.label} ({conf_a:.1%}) in {na}, {b.label} ({conf_b:.1%}) in {nb}"]

    def budget(m: Method, x: float) -> str | None:
        return f"{m.symbol} {x:.2f}" if m.budgeted else None

    for layer in range(max(len(a.k), len(b.k))):
        if layer >= len(a.k) or layer >= len(b.k):
            lines.append(f"layer {layer}: only {na if layer < len(a.k) else nb} has it")
            continue
        parts = [f"k {a.k[layer]} vs {b.k[layer]}" if a.k[layer] != b.k[layer] else f"k {a.k[layer]} in both"]
        ba, bb = budget(method_a, a.budget[layer]), budget(method_b, b.budget[layer])
        if (ba or bb) and ba != bb:
            parts.append(f"{ba or 'no budget'} vs {bb or 'no budget'}")
        sa, sb = set(a.selected_heads[layer]), set(b.selected_heads[layer])
        if sa == sb:
            parts.append(f"the same heads {_heads(sa)}")
        else:
            parts += [f"heads {_heads(s)} only in {n}" for s, n in ((sa - sb, na), (sb - sa, nb)) if s]
        lines.append(f"layer {layer}: " + "; ".join(parts))
    return lines


def side_cards(a: Analysis, settings: Settings, n_heads: int, method: Method, side: str) -> list[Card]:
    """The headline numbers of one side (:func:`app.logic.explore.metric_cards` without latency,
    labelled with the side; a dense model has no budget card: it has no budget). For bba the budget card reads
    "Budget b per layer", as on Explore (its note says where b comes from)."""
    cards = metric_cards(a, None, settings, n_heads, method)[:4]
    if not method.budgeted:
        cards = [c for c in cards if not c.label.startswith(f"Budget {method.symbol} ")]
    return [Card(f"{side} · {c.label}", c.value, c.note, c.help) for c in cards]


def empty_side_note(side: str, pairs_only: bool = False) -> str:
    """What a side says while its text is empty; ``pairs_only``: the model reads pairs, and one of
    the two texts is empty."""
    if pairs_only:
        return f"Text {side} is empty: this model reads pairs, so type both texts, or draw a test pair."
    return f"Text {side} is empty: type something, or draw a test text."


def scale_note(methods: tuple[Method, Method], zmax: float, names: tuple[str, str] = ("A", "B")) -> str:
    """What the colours of the two maps mean, in one line: one scale shared by two relevance maps
    (0 to ``zmax``), or, where one side is a dense model (a map of its weights w = 1, on 0 to 1),
    two scales, each named."""
    budgeted = [m.budgeted for m in methods]
    if all(budgeted):
        return (f"The two relevance maps share one colour scale, 0 to {zmax:.2f} (the larger of both maps' "
                "largest value): the same colour is the same value on both sides.")
    if not any(budgeted):
        return "Both sides are dense: each map is the weight w = 1 of every head, on one colour scale, 0 to 1."
    i = budgeted.index(True)
    m = methods[i]
    return (f"Two colour scales: {names[i]}'s map is its {m.relevance_symbol} on 0 to {zmax:.2f}; {names[1 - i]}'s, "
            "a dense model's, is the weight w = 1 of every head on 0 to 1 (a dense model ranks no heads, so "
            "its map has nothing to set beside a relevance).")
