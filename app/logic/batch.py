"""What the "Batch analysis" page computes: the table of a file's predictions and their accuracy
against the file's labels (no Streamlit here). A file with two text columns (premise and
hypothesis, …) holds a pair per row, for a model that reads pairs."""

from __future__ import annotations

BATCH_MAX_MB = 2
"""The largest file the batch page takes, in MiB: the server's limit (``server.maxUploadSize`` in
.streamlit/config.toml: a larger upload is refused before it is buffered) and its upload widget's,
which counts a MB as 10^6 bytes (2^20 on Windows)."""
BATCH_MAX_BYTES = BATCH_MAX_MB * 2**20
"""The same limit in bytes: the largest file the batch page reads."""
BATCH_MAX_ROWS = 500
"""The most texts the batch page classifies from one file."""


def kind_problem(config: dict, rows: list) -> str | None:
    """Why a file's rows cannot go to the model whose config.json is ``config``: pairs for a model of
    ours trained on single texts, or single texts for one trained on pairs (a Hugging Face
    classifier reads both); None when they can. A file holds one kind: its first row tells."""
    columns = config.get("pair_columns")
    pair = bool(rows) and isinstance(rows[0][1], tuple)
    if pair and not columns and "classifier" not in config:
        return ("its rows are pairs of texts (two text columns), but this model reads single texts: give one "
                "text column")
    if rows and not pair and columns:
        return (f"its rows are single texts, but this model reads pairs of texts: give a CSV or JSONL file with "
                f"both columns, {columns[0]} and {columns[1]}")
    return None


def true_label(value: str | None, label_names: list[str]) -> str | None:
    """A file's ``label`` cell as one of the model's classes: its name (any case) or its index;
    None when it names none of them."""
    if value is None:
        return None
    lowered = {n.lower(): n for n in label_names}
    if value.lower() in lowered:
        return lowered[value.lower()]
    return label_names[int(value)] if value.isdigit() and int(value) < len(label_names) else None


def batch_table(predictions: list, symbol: str = "s", labels: dict[int, str] | None = None,
                label_names: list[str] | None = None):
    """A DataFrame, a row per input of :func:`budgetformer_core.analysis.infer.predict_rows`: its number, the text
    (a pair's first text, its second as ``text_pair``), why it was not classified (``error``, "" when it
    was), prediction, confidence, per layer the budget (``symbol``: s, or bba's b), k and the heads that
    ran, tokens read and FLOPs vs dense.
    With ``labels`` (a file's label per row number, :func:`budgetformer_core.io.inputs.read_labels`)
    it has the true ``label`` (one of ``label_names``, or "" when the cell names no class) and
    whether the prediction is ``correct``."""
    import pandas as pd

    rows = []
    for p in predictions:
        pair = isinstance(p.text, tuple)
        first, second = (p.text if pair else (p.text, None))
        row = {"row": p.line, "text": shown_text(first),
               **({"text_pair": shown_text(second)} if pair else {}), "error": p.error or ""}
        if labels:
            row["label"] = true_label(labels.get(p.line), label_names or []) or ""
        if p.row is not None:
            r = p.row
            row |= {"prediction": r["label"], "confidence": max(r["probs"].values())}
            for layer, (s, k, heads) in enumerate(zip(r["budget"], r["k"], r["selected_heads"], strict=True)):
                row |= {f"{symbol}{layer}": s, f"k{layer}": k, f"heads{layer}": " ".join(map(str, heads))}
            row |= {"tokens": r["n_tokens"], "truncated": r["truncated"],
                    "flops_vs_dense": r["flops"] / r["dense_flops"]}
            if labels and row["label"]:
                row["correct"] = row["label"] == r["label"]
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in [c for c in table.columns if c[:1] == "k" and c[1:].isdigit()] + ["tokens"]:
        if column in table:  # whole numbers, blank where a row has none
            table[column] = table[column].astype("Int64")
    n_layers = max((len(p.row["k"]) for p in predictions if p.row is not None), default=0)
    layers = [c for layer in range(n_layers) for c in (f"{symbol}{layer}", f"k{layer}", f"heads{layer}")]
    order = ["row", "text", "text_pair", "error", "label", "prediction", "correct", "confidence", *layers, "tokens",
             "truncated", "flops_vs_dense"]
    return table[[c for c in order if c in table.columns]]


def batch_accuracy(table, label_names: list[str]) -> tuple[float, int, list[list[int]]] | None:
    """(accuracy, rows judged, confusion counts true × predicted in ``label_names`` order) of the
    rows of :func:`batch_table` that have a true label and a prediction; None when none has."""
    if "correct" not in table:
        return None
    judged = table[table["correct"].notna()]
    if judged.empty:
        return None
    index = {n: i for i, n in enumerate(label_names)}
    matrix = [[0] * len(label_names) for _ in label_names]
    for true, predicted in zip(judged["label"], judged["prediction"], strict=True):
        matrix[index[true]][index[predicted]] += 1
    return float(judged["correct"].astype(bool).mean()), len(judged), matrix


def _listed(values: list[str], shown: int, width: int = 30, quote: bool = False) -> str:
    """The first ``shown`` of ``values``, each on one line and cut to ``width`` characters, and how
    many more (plain text)."""
    cut = [" ".join(v.split()) for v in values[:shown]]
    cut = [v if len(v) <= width else v[: width - 1] + "…" for v in cut]
    more = f" and {len(values) - shown} more" if len(values) > shown else ""
    return ", ".join(f"“{v}”" if quote else v for v in cut) + more


def label_notes(table, labels: dict[int, str], label_names: list[str]) -> list[str]:
    """Plain-text notes on the rows of :func:`batch_table` that the accuracy leaves out for their
    label: those whose label (``labels``, the file's cells) is none of ``label_names``, naming those
    labels and the classes, and those with no label. The labels are the user's text: shown escaped,
    never as markup."""
    if "label" not in table:
        return []
    unknown: dict[str, int] = {}
    for row in table.loc[table["label"] == "", "row"]:
        given = labels.get(int(row), "")
        unknown[given] = unknown.get(given, 0) + 1
    blank = unknown.pop("", 0)
    notes = []
    if unknown:
        classes = (f" The model's classes: {_listed(label_names, 12)}, or their numbers 0 to {len(label_names) - 1}."
                   if label_names else "")
        notes.append(f"{sum(unknown.values())} row(s) not counted: their label is none of the model's classes "
                     f"({_listed(list(unknown), 5, quote=True)}).{classes}")
    if blank:
        notes.append(f"{blank} row(s) have no label: not counted.")
    return notes


def shown_text(text: str) -> str:
    """``text`` as the table shows and downloads it: a lone surrogate (bytes that were never
    UTF-8, which no table or CSV can hold) becomes U+FFFD "�"; its row's error names it."""
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
