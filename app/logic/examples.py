"""Per-example tables for the "Errors", "Easy vs hard" and "Ablations" pages (no Streamlit here).

The pages work on one table: a row per text of a split, built from
:meth:`budgetformer_core.analysis.infer.Evaluation.to_frame` (predictions, probabilities, s per layer),
computed live or read from the precomputed per-example tables; :func:`per_example_table` adds the
class names and texts. The filters, confusion matrix, extremes and the models' disagreements are
computed from those tables, and so is the reading of the adaptivity figures
(:func:`budgetformer_core.analysis.adaptivity.from_frames` on a model's table and its dense reference's).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from budgetformer_core.io.tokenizer import Text

_BARE_ENTITY = re.compile(r"(?<!&)(#\d+);|(?<![&\w])(quot|amp|lt|gt|apos);")
"""An HTML entity that lost its "&" ("it#39;s", " quot;no quot;"), as AG News' texts have them."""


PAIR_JOIN = " ‖ "
"""Between the two texts of a pair shown as one (a table cell, an option)."""


def readable(text: Text) -> str:
    """``text`` with AG News' HTML-entity leftovers decoded ("it#39;s" → "it's", "#36;10" → "$10",
    "&lt;b&gt;" → "<b>") and its backslashes (lost line breaks) as spaces; a pair's two texts so,
    joined by :data:`PAIR_JOIN`. The result is still shown as plain text, never rendered as HTML."""
    if isinstance(text, tuple):
        return PAIR_JOIN.join(map(readable, text))

    def restore(m: re.Match) -> str:  # a control character's number stays as it is ("item #1;")
        return m.group(0) if m.group(1) and int(m.group(1)[1:]) < 32 else f"&{m.group(1) or m.group(2)};"

    restored = _BARE_ENTITY.sub(restore, text)
    return html.unescape(restored).replace("\\", " ")


def search_texts(texts: list[Text], query: str, limit: int = 50) -> list[int]:
    """Indices of the texts (pairs: either text) containing ``query`` (case-insensitive), at most ``limit``."""
    q = query.strip().lower()
    if not q:
        return []
    parts = [t if isinstance(t, tuple) else (t,) for t in texts]
    return [i for i, p in enumerate(parts) if any(q in part.lower() for part in p)][:limit]


def per_example_table(frame: pd.DataFrame, texts: list[str] | None, label_names: list[str]) -> pd.DataFrame:
    """The pages' table: a per-example frame plus class names and texts.

    ``frame`` is :meth:`budgetformer_core.analysis.infer.Evaluation.to_frame`'s (columns ``index``,
    ``label``, ``prediction``, ``correct``, ``confidence``, ``p_true``, ``loss``, ``entropy``,
    ``mean_s``, ``s{l}`` / ``k{l}`` / ``heads{l}`` per layer, ``tokens``), computed live or read
    from precomputed/results. Adds ``true`` and ``predicted`` (class names) and ``text`` (empty
    when the split's texts are not on this machine).

    Raises:
        ValueError: texts of another length than the frame, or a label outside ``label_names``.
    """
    if texts is not None and len(texts) != len(frame):
        raise ValueError(f"{len(texts)} texts for {len(frame)} rows")
    names = np.asarray(label_names, dtype=object)
    ids = np.concatenate([frame["label"].to_numpy(), frame["prediction"].to_numpy()]).astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(names)):
        raise ValueError(f"class ids outside the {len(names)} classes")
    table = frame.copy()
    table.insert(1, "true", names[frame["label"].to_numpy(dtype=np.int64)])
    table.insert(2, "predicted", names[frame["prediction"].to_numpy(dtype=np.int64)])
    table["text"] = list(texts) if texts is not None else [""] * len(frame)
    return table


def layer_columns(table: pd.DataFrame) -> list[str]:
    """The per-layer budget columns ``s0``, ``s1``, … of a :func:`per_example_table`."""
    return [c for c in table.columns if c[:1] == "s" and c[1:].isdigit()]


def filter_examples(
    table: pd.DataFrame,
    *,
    true: list[str] | None = None,
    predicted: list[str] | None = None,
    s_range: tuple[float, float] | None = None,
    confidence_range: tuple[float, float] | None = None,
    errors_only: bool = True,
) -> pd.DataFrame:
    """The rows matching every filter; an empty or ``None`` class list means "any class".

    Ranges are closed intervals (a little slack so a slider at 1.00 keeps s = 0.99999…).
    """
    keep = np.ones(len(table), dtype=bool)
    if errors_only:
        keep &= ~table["correct"].to_numpy()
    if true:
        keep &= table["true"].isin(true).to_numpy()
    if predicted:
        keep &= table["predicted"].isin(predicted).to_numpy()
    eps = 1e-6
    for column, bounds in (("mean_s", s_range), ("confidence", confidence_range)):
        if bounds is not None:
            lo, hi = bounds
            values = table[column].to_numpy()
            keep &= (values >= lo - eps) & (values <= hi + eps)
    return table[keep]


def confusion_matrix(table: pd.DataFrame, label_names: list[str]) -> list[list[int]]:
    """Counts by true class (rows) and predicted class (columns), in ``label_names`` order."""
    if table.empty:  # scikit-learn refuses an empty split
        return [[0] * len(label_names) for _ in label_names]
    from sklearn.metrics import confusion_matrix as counts  # slow import, only on the Errors page

    return counts(table["true"], table["predicted"], labels=label_names).tolist()


def extremes(
    table: pd.DataFrame, n: int = 10, column: str = "mean_s"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``n`` rows with the lowest and the ``n`` with the highest ``column`` (ties by index)."""
    ordered = table.sort_values([column, "index"], kind="stable")
    return ordered.head(n), ordered.tail(n).iloc[::-1]


def example_label(row) -> str:
    """A one-line name of a per-example row for pickers: "#12 · sport → politics (64.3%)" (a
    confidence rounded as the tables round it)."""
    return f"#{int(row['index'])} · {row['true']} → {row['predicted']} ({row['confidence']:.1%})"


def preview(text: Text, width: int = 160) -> str:
    """The start of ``text`` on one line, :func:`readable`, for table cells."""
    flat = " ".join(readable(text[: width * 3]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def excerpt(text: Text, limit: int = 3000) -> str:
    """``text`` to read on a page (shown with ``st.text``): :func:`readable`, cut at ``limit``."""
    return readable(text[:limit]) + ("…" if len(text) > limit else "")


PER_EXAMPLE_KEYS = ("index", "label", "prediction")


def read_per_example(path: Path | str) -> pd.DataFrame:
    """A precomputed per-example table (a row per test input, no text).

    Raises:
        ValueError: not a readable parquet file, or without the columns of :data:`PER_EXAMPLE_KEYS`.
    """
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as e:  # pyarrow's errors are one or the other
        raise ValueError(f"not a readable parquet file ({e})") from e
    missing = [c for c in PER_EXAMPLE_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"the column(s) {', '.join(missing)} are missing")
    return frame


def disagreements(
    tables: dict[str, pd.DataFrame],
    label_names: list[str],
    texts: list[str] | None = None,
    labels: list[int] | None = None,
) -> tuple[pd.DataFrame, int]:
    """The test inputs on which the models' predictions differ, and how many inputs all share.

    Joins the per-example tables on ``index``. Columns: ``index``, ``true``, one column per model
    with its predicted class, ``right`` ("2 of 3": models that got it right), and ``text`` when
    ``texts`` / ``labels`` (the split) are given and agree with the tables' labels.
    """
    def name(i: int) -> str:
        return label_names[i] if 0 <= i < len(label_names) else str(i)

    joined = None
    for model, t in tables.items():
        part = t[["index", "label", "prediction"]].rename(columns={"prediction": model})
        joined = part if joined is None else joined.merge(part.drop(columns="label"), on="index")
    if joined is None:
        return pd.DataFrame(columns=["index", "true", "right"]), 0
    models = list(tables)
    preds = joined[models].to_numpy()
    differ = joined[(preds != preds[:, :1]).any(1)]
    right = (differ[models].to_numpy() == differ[["label"]].to_numpy()).sum(1)
    out = pd.DataFrame({"index": differ["index"].astype(int), "true": differ["label"].map(name)})
    for model in models:
        out[model] = differ[model].map(name)
    out["right"] = [f"{r} of {len(models)}" for r in right]
    if texts is not None and labels is not None:
        idx = joined["index"].to_numpy()
        known = len(idx) == 0 or (idx.min() >= 0 and idx.max() < min(len(texts), len(labels)))
        if known and all(labels[i] == y for i, y in zip(idx, joined["label"], strict=True)):
            out["text"] = [texts[i] for i in out["index"]]
    return out.reset_index(drop=True), len(joined)


# --------------------------------------------------------------------------- adaptivity

FOLLOWS_RHO = 0.2
"""|ρ(s, reference loss)| from which the reading says the budget follows difficulty."""
FOLLOWS_RATIO = 1.1
"""Hardest / easiest third heads ratio from which the reading says harder inputs get more heads."""


def figure_text(value: float | None, fmt: str) -> str:
    """An adaptivity figure for display: "n/a" for a null (or non-finite) figure, never "nan"."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return format(float(value), fmt).replace("-", "−")


_NULL_NAMES = re.compile(r"^[\w ]+ (?:is|are) null: |: [\w ]+ (?:is|are) null$")
"""The "<figure> is null" part of a note (the figure's field name), left out of the reason."""


def null_reason(notes: list[str], figure: str, default: str) -> str:
    """Why ``figure`` (e.g. ``"rho_s_reference_loss"``) is null, in plain words: the first note
    naming it without the field names ("s is the same for every input, so it cannot correlate
    with difficulty"), else ``default``."""
    note = next((note for note in notes if figure in note), None)
    return default if note is None else _NULL_NAMES.sub("", note)


def k_histogram_frame(k_hists: list[dict[str, int]]) -> pd.DataFrame:
    """Per layer, how many inputs ran each number of heads k (``LayerAdaptivity.k_hist``).

    Columns ``layer``, ``k`` (a string, for a categorical axis), ``inputs`` and ``share``; every
    layer lists every k from the fewest to the most heads any layer ran, 0 where none did, so the
    layers' charts share one axis.
    """
    ks = [int(k) for hist in k_hists for k in hist]
    rows = []
    if ks:
        for layer, hist in enumerate(k_hists):
            total = sum(hist.values())
            for k in range(min(ks), max(ks) + 1):
                count = int(hist.get(str(k), 0))
                rows.append({"layer": layer, "k": str(k), "inputs": count, "share": count / total if total else 0.0})
    return pd.DataFrame(rows, columns=["layer", "k", "inputs", "share"])


def k_by_need(table: pd.DataFrame, needed: list[int]) -> pd.DataFrame:
    """Mean heads run per layer, by the heads an input needs (a synthetic task with known needs).

    ``table`` has the per-layer ``k{l}`` columns; ``needed`` is in its row order. Columns
    ``needed``, ``layer``, ``mean_k`` and ``inputs``, in increasing need then layer.
    """
    if len(needed) != len(table):
        raise ValueError(f"{len(needed)} needed-head counts for {len(table)} rows")
    k_columns = sorted((c for c in table.columns if c[:1] == "k" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    need = np.asarray(needed, dtype=np.int64)
    rows = []
    for n in np.unique(need):
        rows += [
            {"needed": int(n), "layer": int(c[1:]), "mean_k": float(table[c].to_numpy()[need == n].mean()),
             "inputs": int((need == n).sum())}
            for c in k_columns
        ]
    return pd.DataFrame(rows, columns=["needed", "layer", "mean_k", "inputs"])


def in_terms_of(text: str, symbol: str) -> str:
    """``text`` with the budget called ``symbol`` where it says s (a word of its own): the
    engine's notes name the budget s, which for a bba model is its requested budget b."""
    return text if symbol == "s" else re.sub(r"\bs\b", symbol, text)


def adaptivity_reading(figures) -> str:
    """One line in plain words of what an :class:`~budgetformer_core.analysis.adaptivity.Adaptivity` says.

    Difficulty is the reference model's loss: "harder inputs get more heads: 1.4× on the hardest
    third (ρ = +0.41)" or "the budget does not follow difficulty here: ρ = +0.06"; with known
    needs, whether k follows them.
    """
    rho, ratio = figures.rho_s_reference_loss, figures.heads_ratio_hard_easy
    ratio_text = "n/a" if ratio is None else f"{ratio:.2f}×"
    if rho is None:
        reason = null_reason(figures.notes, "rho_s_reference_loss", "there is no reference model")
        parts = [f"the budget cannot follow difficulty here: {reason}"]
    elif rho >= FOLLOWS_RHO and ratio is not None and ratio >= FOLLOWS_RATIO:
        parts = [f"harder inputs get more heads: {ratio:.1f}× on the hardest third (ρ = {figure_text(rho, '+.2f')})"]
    elif rho >= FOLLOWS_RHO:
        parts = [f"s rises with difficulty (ρ = {figure_text(rho, '+.2f')}) but the heads run barely do: "
                 f"{ratio_text} on the hardest third"]
    elif rho <= -FOLLOWS_RHO:
        parts = [f"harder inputs get fewer heads: {ratio_text} on the hardest third (ρ = {figure_text(rho, '+.2f')})"]
    else:
        parts = [f"the budget does not follow difficulty here: ρ = {figure_text(rho, '+.2f')}"]
    rho_k, frac = figures.rho_k_needed, figures.frac_k_at_least_needed
    enough = "" if frac is None else f", k ≥ needed in every layer on {frac:.0%} of inputs"
    if rho_k is not None:
        follows = "follows" if rho_k >= 0.5 else "does not follow"
        parts.append(f"k {follows} the heads an input needs: ρ = {figure_text(rho_k, '+.2f')}{enough}")
    elif frac is not None:
        parts.append(null_reason(figures.notes, "rho_k_needed", "rho_k_needed is null") + enough)
    sentence = "; ".join(parts)
    return sentence[:1].upper() + sentence[1:] + "."


def adaptivity_figures(
    table: pd.DataFrame,
    n_heads: int,
    reference: pd.DataFrame | None = None,
    needed: list[int] | None = None,
    reference_name: str = "the dense model",
):
    """:func:`budgetformer_core.analysis.adaptivity.from_frames` of a model's table, with a note for every
    figure left null because the reference or the needed heads are missing or do not fit.

    Imports the engine (and torch) on the first call only, so the pages can draw before that.
    """
    from budgetformer_core.analysis.adaptivity import from_frames

    notes = []
    if reference is None:
        notes.append(f"no reference model ({reference_name}) to judge difficulty by: "
                     "rho_s_reference_loss and heads_ratio_hard_easy are null")
    elif len(reference) != len(table) or not np.array_equal(reference["label"], table["label"]):
        notes.append(f"{reference_name} was evaluated on other inputs than this model: "
                     "rho_s_reference_loss and heads_ratio_hard_easy are null")
        reference = None
    if needed is not None and len(needed) != len(table):
        notes.append(f"the split lists {len(needed)} needed-head counts for {len(table)} inputs: "
                     "rho_k_needed and frac_k_at_least_needed are null")
        needed = None
    elif needed is None:
        notes.append("the task does not say how many heads each input needs: "
                     "rho_k_needed and frac_k_at_least_needed are null")
    return from_frames(table, n_heads, reference, None if needed is None else np.asarray(needed), notes)


# --------------------------------------------------------------------------- head atlas


def selected_rows(points: list[dict]) -> list[int]:
    """The table rows of a plotly selection's points (``st.plotly_chart``'s
    ``event.selection.points``): each point of the input map carries its row as ``customdata``.
    Sorted, each row once; points without a row (none on the map) are left out."""
    rows = set()
    for point in points:
        data = point.get("customdata")
        data = data[0] if isinstance(data, list) and data else data
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            rows.add(int(data))
    return sorted(rows)


LISTED = 500
"""Inputs a listing shows at most (the rest are counted, not listed)."""


def input_listing(table: pd.DataFrame, rows: list[int], links: list[str], extra: dict | None = None) -> pd.DataFrame:
    """A table of the inputs at positions ``rows`` of a per-example ``table``, in that order:
    ``index``, ``explore`` (the address that opens the input in "Explore an input", from
    ``links``, one per row), ``true``, ``predicted``, ``correct``, ``mean k`` (over layers),
    ``mean s``, the columns of ``extra`` (name → a value per listed row) and a ``text`` preview.
    At most :data:`LISTED` rows."""
    rows = list(rows)[:LISTED]
    picked = table.iloc[rows]
    k_columns = [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()]
    out = pd.DataFrame({
        "index": picked["index"].astype(int).to_numpy(),
        "explore": list(links)[: len(rows)],
        "true": picked["true"].to_numpy(),
        "predicted": picked["predicted"].to_numpy(),
        "correct": picked["correct"].astype(bool).to_numpy(),
        "mean k": picked[k_columns].to_numpy(dtype=np.float64).mean(1) if k_columns else np.zeros(len(rows)),
        "mean s": picked["mean_s"].to_numpy(dtype=np.float64),
    })
    for column, values in (extra or {}).items():
        out[column] = list(values)[: len(rows)]
    out["text"] = [preview(t, 120) for t in picked["text"]]
    return out


def per_class_adaptivity(table: pd.DataFrame, reference: pd.DataFrame | None, label_names: list[str]) -> pd.DataFrame:
    """Within each true class: inputs, mean budget, Spearman ρ of an input's mean budget with the
    reference (dense) model's loss on it, and heads run on the class's hardest third / its
    easiest (by that loss) — so a budget that follows difficulty can be told from one that
    follows the class. ``table`` is :func:`per_example_table`'s (``label``, ``mean_s``, ``k{l}``);
    ``reference`` the dense model's on the same inputs, or None (ρ and the ratio are then None)."""
    from budgetformer_core.analysis.adaptivity import hard_easy_ratio
    from budgetformer_core.analysis.infer import spearman

    ks = [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()]
    heads = table[ks].to_numpy(dtype=float).mean(axis=1)  # (N,) mean k over layers
    loss = None if reference is None else reference["loss"].to_numpy(dtype=float)
    rows = []
    for label, name in enumerate(label_names):
        rows_of = np.flatnonzero(table["label"].to_numpy() == label)
        if not rows_of.size:
            continue
        s = table["mean_s"].to_numpy()[rows_of]
        rows.append({
            "class": name,
            "inputs": int(rows_of.size),
            "mean s": float(s.mean()),
            "ρ(s, dense loss)": None if loss is None else spearman(s, loss[rows_of]),
            "heads run, hard / easy third": None if loss is None else hard_easy_ratio(heads[rows_of], loss[rows_of]),
        })
    return pd.DataFrame(rows, columns=["class", "inputs", "mean s", "ρ(s, dense loss)", "heads run, hard / easy third"])


def class_reading(class_rhos: list[float | None], overall: float | None) -> str:
    """One sentence that compares ρ(s, dense loss) inside the classes (their median) with the
    overall ρ: a budget that follows difficulty keeps its ρ inside a class, one that follows the
    class loses it there. "" when either is missing."""
    rhos = [r for r in class_rhos if r is not None and not np.isnan(r)]
    if overall is None or np.isnan(overall) or not rhos:
        return ""
    inside, n = float(np.median(rhos)), len(rhos)
    figures = f"ρ = {inside:+.2f} inside the classes (median of {n}) against {overall:+.2f} overall"
    if overall < FOLLOWS_RHO:
        return f"{figures}: s follows difficulty neither across the classes nor inside them."
    if inside >= FOLLOWS_RHO:
        return f"{figures}: s follows how hard an input is, not only its class."
    return f"{figures}: s mostly follows the class (harder classes get more heads), not the input."


def fixed_budget_sentence(table: pd.DataFrame, symbol: str, n_heads: int, requested: bool) -> str | None:
    """The one sentence for a model whose budget is the same for every input (the same s, or
    requested b, and the same k in every layer), or None when it varies. ``requested``: a bba
    model, whose b the caller sets."""
    ks = [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()]
    if table["mean_s"].nunique() != 1 or any(table[k].nunique() != 1 for k in ks):
        return None
    heads = sorted({int(table[k].iloc[0]) for k in ks})
    runs = f"{heads[0]} of {n_heads} heads in every layer" if len(heads) == 1 else (
        " / ".join(str(int(table[k].iloc[0])) for k in ks) + f" of {n_heads} heads per layer")
    return (
        f"This model's budget does not vary per input: all {len(table):,} test texts get {symbol} = "
        f"{table['mean_s'].iloc[0]:.2f} and run {runs}"
        + (" (the requested b sets it, not the text)" if requested else "")
        + ", so no input is easy or hard by its budget."
    )
