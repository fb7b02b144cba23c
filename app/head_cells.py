"""What the cells of a layers × heads map say: the value as written, the ★ of a head that ran,
and which heads are tied at the cut.

A layer runs the k heads with the largest relevance. Two heads on either side of that cut can
have the same relevance as a map writes it (``0.13`` ran, ``0.13`` did not): such heads are
*tied at the cut*, marked with :data:`TIE` in their cells, and their hover text gives the digits
that tell them apart (or says that they are exactly equal, when the lower index ran).
"""

from __future__ import annotations

from collections.abc import Sequence

STAR = "★"
TIE = "="
DIGITS = 2
"""Decimals of a value written in a cell."""


def written(value: float) -> str:
    """``value`` as a cell writes it."""
    return f"{value:.{DIGITS}f}"


def tied_at_cut(values: Sequence[Sequence[float]], selected: Sequence[Sequence[int]]) -> list[set[int]]:
    """Per layer, the heads tied at the cut: a head that ran whose value, as written, equals that
    of a head that did not run, and that head too.

    Args:
        values: L × H relevance of the heads (the values the heads were chosen by).
        selected: per layer, the heads that ran.
    """
    tied = []
    for row, sel in zip(values, selected, strict=True):
        ran = set(sel)
        inside = {written(row[h]) for h in ran}
        outside = {written(v) for h, v in enumerate(row) if h not in ran}
        both = inside & outside
        tied.append({h for h, v in enumerate(row) if written(v) in both})
    return tied


def apart(a: float, b: float) -> str:
    """``a`` and ``b`` with the fewest decimals (from 3) that tell them apart, or "exactly equal"."""
    if a == b:
        return f"exactly equal ({a:.4f})"
    for digits in range(DIGITS + 1, 10):
        if f"{a:.{digits}f}" != f"{b:.{digits}f}":
            return f"{a:.{digits}f} vs {b:.{digits}f}"
    return f"{a!r} vs {b!r}"


def tie_note(row: Sequence[float], ran: set[int], head: int) -> str:
    """The hover note of a head tied at the cut: the nearest head on the other side of the cut
    and the digits that tell the two apart."""
    others = [h for h in range(len(row)) if (h in ran) != (head in ran) and written(row[h]) == written(row[head])]
    other = min(others, key=lambda h: abs(row[h] - row[head]))
    side = "did not run" if head in ran else "ran"
    return f"tied at the cut with h{other}, which {side}: {apart(row[head], row[other])}"


def cell_texts(
    values: Sequence[Sequence[float]],
    selected: Sequence[Sequence[int]],
    numbers: bool,
    unrun_values: bool,
    ties: Sequence[set[int]],
) -> tuple[list[list[str]], list[list[str]]]:
    """The texts of the ran cells and of the grey (not run) cells, L × H each ("" where the
    other trace draws the cell).

    Args:
        numbers: write each value in its cell (else ★, "—" and :data:`TIE` alone).
        unrun_values: write the values of the heads that did not run in brackets.
        ties: per layer, the heads tied at the cut (:func:`tied_at_cut`; empty sets for none).
    """
    ran_text, grey_text = [], []
    for row, sel, tied in zip(values, selected, ties, strict=True):
        ran = set(sel)
        ran_row, grey_row = [], []
        for h, v in enumerate(row):
            mark = TIE if h in tied else ""
            if h in ran:
                ran_row.append(f"{STAR}{mark}<br>{written(v)}" if numbers else f"{STAR}{mark}")
                grey_row.append("")
            else:
                ran_row.append("")
                value = f"({written(v)})" if unrun_values and numbers else ""
                grey_row.append(f"{mark}<br>{value}" if mark and value else mark or value or "—")
        ran_text.append(ran_row)
        grey_text.append(grey_row)
    return ran_text, grey_text


def hover_texts(
    values: Sequence[Sequence[float]],
    selected: Sequence[Sequence[int]],
    symbol: str,
    unrun_values: bool,
    ties: Sequence[set[int]],
) -> list[list[str]]:
    """Per cell, what hovering it says: the layer, the head, its value and whether it ran."""
    out = []
    for layer, (row, sel, tied) in enumerate(zip(values, selected, ties, strict=True)):
        ran = set(sel)
        cells = []
        for h, v in enumerate(row):
            if h in ran:
                text = f"layer {layer}, h{h}: {symbol} = {v:.3f} (ran)"
            elif unrun_values:
                text = f"layer {layer}, h{h}: {symbol} = {v:.3f}, not computed"
            else:
                text = f"layer {layer}, h{h}: not computed"
            cells.append(text + (f"<br>{tie_note(row, ran, h)}" if h in tied else ""))
        out.append(cells)
    return out
