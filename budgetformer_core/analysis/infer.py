"""Inference: per-input analyses and whole-split evaluation.

:func:`analyze` answers "what did the model do with this text": label, probabilities, and per
layer the budget s, relevance p, weights w, the heads that ran and the FLOPs of that forward
pass. :func:`evaluate` runs a split and returns accuracy plus the budget statistics, and
:meth:`Evaluation.to_frame` turns that into a row per input; :func:`spearman` relates two of its
columns.

An input is a text or a pair of texts (:data:`~budgetformer_core.io.tokenizer.Text`); a pair's
segments go to the model as its token types. :func:`pair_columns` says whether a model reads
pairs, and :func:`check_kind` refuses an input of the other kind.

Every surface (the CLI, the app) refuses or cuts a text at :data:`MAX_CHARS` characters (each
text of a pair).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch

from ..io.checkpoint import Checkpoint
from ..io.inputs import MAX_CHARS
from ..io.splits import Split
from ..io.tokenizer import Text, encode, encode_batch, is_pair, pad, reading_prefix
from ..measure.flops import dense_flops, forward_flops
from ..model.budget import Control
from ..model.encoder import BudgetFormer, ModelOutput
from ..model.losses import head_entropy


@dataclass
class Analysis:
    """What the model did with one input."""

    text: Text
    label: str
    label_id: int
    probs: list[float]
    budget: list[float]
    """s per layer."""
    relevance: list[list[float]]
    """p per layer and head (L × H)."""
    head_weights: list[list[float]]
    """w = s·H·p per layer and head."""
    selected_heads: list[list[int]]
    """Indices of the heads that ran, per layer."""
    k: list[int]
    n_tokens: int
    """Tokens the model read (after truncation)."""
    truncated: bool
    flops: int
    dense_flops: int

    def to_dict(self) -> dict:
        return asdict(self)


def check_texts(texts: list[Text]) -> None:
    """Raise ``ValueError`` with a clear message for anything that is not a usable text or pair
    of texts."""
    if isinstance(texts, (str, tuple)):
        raise ValueError("texts must be a list of strings (or of pairs), not a single one")
    if not texts:
        raise ValueError("no texts given")
    for i, t in enumerate(texts):
        if is_pair(t):
            if len(t) != 2 or not all(isinstance(part, str) for part in t):
                raise ValueError(f"input {i} is a tuple of {len(t)}, not a pair of two texts")
        elif not isinstance(t, str):
            raise ValueError(f"input {i} is a {type(t).__name__}, not text")
        for which, part in zip(("first ", "second "), t) if is_pair(t) else (("", t),):
            problem = text_problem(part)
            if problem and which and is_blank(part):
                raise ValueError(f"input {i} has an empty {which}text: a pair needs both texts")
            if problem:
                raise ValueError(f"input {i}'s {which}text {problem}" if which else f"input {i} {problem}")


VISIBLE = ("L", "N", "P", "S")
"""Unicode categories of what a reader sees: letters, numbers, punctuation, symbols."""


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: no letter, number, punctuation or symbol (only spaces,
    zero-width or direction marks, combining marks alone)."""
    return not any(unicodedata.category(c).startswith(VISIBLE) for c in text[:MAX_CHARS])


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be classified, or None: empty, or only invisible characters
    (spaces, zero-width and direction marks, combining marks alone), a lone surrogate (bytes
    that were not UTF-8, as Python keeps them from a command line), or over :data:`MAX_CHARS`."""
    if is_blank(text):
        kind = "it holds only invisible characters (zero-width, direction or combining marks); " if text.strip() else ""
        return f"is empty: {kind}type some text to classify"
    bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        return (f"holds U+{ord(bad):04X}, a lone surrogate: bytes that are not UTF-8 text (e.g. Latin-1); "
                "save or type it as UTF-8")
    if len(text) > MAX_CHARS:
        return (f"has {len(text):,} characters; the limit is {MAX_CHARS:,} (the model reads only its first "
                "few hundred tokens: cut the text)")
    return None


def pair_columns(ckpt: Checkpoint) -> tuple[str, str] | None:
    """The names of the two texts ``ckpt`` reads as a pair, or None when it reads single texts.

    A model of ours reads pairs when it was trained on a pair task (config.json's
    ``pair_columns``, its data's two columns); a Hugging Face classifier reads single texts and
    pairs, joined by its tokenizer's post-processor as ``transformers`` joins them (named
    ``text`` and ``text_pair``, as ``transformers`` names the two arguments).
    """
    columns = ckpt.meta.get("pair_columns")
    if columns:
        return tuple(columns)
    if "classifier" in ckpt.meta and ckpt.tokenizer.post_processor is not None:
        return ("text", "text_pair")
    return None


def check_kind(ckpt: Checkpoint, texts: list[Text], what: str = "input {}") -> None:
    """Raise ``ValueError`` for an input of a kind ``ckpt`` does not read: a pair for a model
    trained on single texts, a single text for one trained on pairs (a Hugging Face classifier
    reads both). ``what`` names input i in the message (``what.format(i)``)."""
    columns = pair_columns(ckpt)
    for i, t in enumerate(texts):
        if is_pair(t) and columns is None:
            trained = ckpt.meta.get("dataset")
            raise ValueError(f"{what.format(i)} is a pair of texts, but this model reads single texts"
                             + (f" (it was trained on {trained})" if trained else ""))
        if not is_pair(t) and ckpt.meta.get("pair_columns"):
            raise ValueError(f"{what.format(i)} is one text, but this model reads pairs of texts "
                             f"({columns[0]} and {columns[1]}): give both")


def resolve_mode(model: BudgetFormer, mode: str | None) -> str:
    return mode or model.method.default_mode


def heads_run(model: BudgetFormer, out: ModelOutput, mode: str) -> torch.Tensor:
    """(B, L) heads actually computed per input and layer (all of them unless structural)."""
    if mode == "structural":
        return torch.stack([t.k for t in out.layers], dim=1)
    return torch.full((out.logits.shape[0], model.cfg.n_layers), model.cfg.n_heads)


def input_flops(model: BudgetFormer, n_tokens: int, ks: list[int], mode: str, control: Control | None = None) -> int:
    return forward_flops(model.cfg, n_tokens, None if mode == "dense" else ks, control)


@torch.no_grad()
def analyze(
    ckpt: Checkpoint,
    texts: list[str],
    control: Control | None = None,
    mode: str | None = None,
    batch_size: int = 32,
) -> list[Analysis]:
    """Classify ``texts`` and report, per input, how the heads were budgeted.

    Args:
        ckpt: a loaded checkpoint (model, tokenizer, label names).
        texts: non-empty strings of at most :data:`MAX_CHARS` characters; only their
            :func:`~budgetformer_core.io.tokenizer.reading_prefix` is tokenised, and the model
            reads its first ``max_len`` tokens (``truncated`` says when that is not all); or
            pairs of such texts, for a model that reads pairs (:func:`check_kind`).
        control: overrides of budget / k / head choice (see :class:`Control`); a dense model
            runs without them (:meth:`~budgetformer_core.model.encoder.BudgetFormer.control_in_effect`).
        mode: execution mode (default: ``structural``, ``dense`` for a dense model).

    Raises:
        ValueError: for an empty list, a blank or non-string input, an absurdly long one, or
            one of a kind the model does not read.
    """
    check_texts(texts)
    check_kind(ckpt, texts)
    model = ckpt.model.eval()
    mode = resolve_mode(model, mode)
    control = model.control_in_effect(control)
    results: list[Analysis] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        prefixes = [reading_prefix(ckpt.tokenizer, t, model.cfg.max_len) for t in chunk]
        batch = encode_batch(ckpt.tokenizer, prefixes, model.cfg.max_len)
        out = model(batch.ids, batch.mask, mode=mode, control=control, types=batch.types)
        probs = torch.softmax(out.logits.float(), -1)
        ks = heads_run(model, out, mode)
        for b, text in enumerate(chunk):
            n = int(out.lengths[b])
            label_id = int(probs[b].argmax())
            results.append(
                Analysis(
                    text=text,
                    label=ckpt.label_names[label_id],
                    label_id=label_id,
                    probs=probs[b].tolist(),
                    budget=[float(t.budget[b]) for t in out.layers],
                    relevance=[t.relevance[b].tolist() for t in out.layers],
                    head_weights=[t.head_weights[b].tolist() for t in out.layers],
                    selected_heads=[t.selected[b].nonzero().flatten().tolist() for t in out.layers],
                    k=ks[b].tolist(),
                    n_tokens=n,
                    truncated=batch.truncated[b] or prefixes[b] != text,
                    flops=input_flops(model, n, ks[b].tolist(), mode, control),
                    dense_flops=dense_flops(model.cfg, n),
                )
            )
    return results


PREDICT_BATCH = 32
"""Inputs classified together by :func:`predict_rows`; each batch's rows come out as it is done."""


def prediction_row(ckpt: Checkpoint, a: Analysis) -> dict:
    """One classified input as ``budgetformer predict --json`` prints it (and the batch page
    tabulates it): label, probabilities by class, per layer the budget (s, or bba's b), k and
    the heads that ran, tokens read, truncation and FLOPs."""
    return {"label": a.label, "probs": dict(zip(ckpt.label_names, a.probs, strict=True)), "budget": a.budget,
            "k": a.k, "selected_heads": a.selected_heads, "n_tokens": a.n_tokens, "truncated": a.truncated,
            "flops": a.flops, "dense_flops": a.dense_flops}


@dataclass
class Prediction:
    """What :func:`predict_rows` gives for one numbered input: its row, or why it has none."""

    line: int | None
    """The input's number (a file's line or row; None for a text given directly)."""
    text: Text
    row: dict | None
    """:func:`prediction_row` (None when the input could not be classified)."""
    error: str | None = None


def predict_rows(
    ckpt: Checkpoint,
    inputs: Iterable[tuple[int | None, Text]],
    control: Control | None = None,
    batch_size: int = PREDICT_BATCH,
) -> Iterator[Prediction]:
    """Classify numbered texts as they come (``budgetformer predict`` and the app's batch page).

    Inputs are classified :data:`PREDICT_BATCH` at a time and come out in their order: a
    :class:`Prediction` with its :func:`prediction_row`, or with an ``error`` for a text that
    cannot be classified (a blank line, a pair with an empty text, one over :data:`MAX_CHARS`),
    in its place. A ``ValueError`` raised by ``inputs`` itself (an unreadable file), or an input
    of a kind the model does not read (:func:`check_kind`: a file of pairs for a model of single
    texts), is raised after the rows before it have come out.
    """
    batch: list[tuple[int | None, Text]] = []

    def flush() -> Iterator[Prediction]:
        done = analyze(ckpt, [t for _, t in batch], control) if batch else []
        for (line, text), a in zip(batch, done, strict=True):
            yield Prediction(line, text, prediction_row(ckpt, a))
        batch.clear()

    inputs = iter(inputs)
    while True:
        try:
            line, text = next(inputs)
        except StopIteration:
            break
        except ValueError:  # unreadable input: what came before it first
            yield from flush()
            raise
        try:
            check_kind(ckpt, [text], "the input" if line is None else f"row {line}")
        except ValueError:  # the whole input is of the other kind: no row of it can be read
            yield from flush()
            raise
        try:
            if line is not None and isinstance(text, str) and not text.strip():
                raise ValueError("blank line")
            check_texts([text])
        except ValueError as e:  # a row that says why, in its place
            yield from flush()
            yield Prediction(line, text, None, str(e).replace("input 0 ", "the line "))
            continue
        batch.append((line, text))
        if len(batch) == batch_size:
            yield from flush()
    yield from flush()


@dataclass
class Evaluation:
    """Whole-split results; arrays are per input."""

    accuracy: float
    n: int
    mean_budget: float
    mean_heads_fraction: float
    flops_ratio: float
    """Total FLOPs of this model on the split / those of the dense model of the same shape."""
    mean_budget_per_layer: list[float]
    head_entropy: float
    """Mean entropy (nats) of the head relevance p over inputs and layers."""
    attention_cost: float
    """Exact attention cost: the fraction of head work run (= mean_heads_fraction)."""
    attention_cost_estimated: float
    """Estimated (soft-path) attention cost: mean soft gate (bba) or s (budgetformer)."""
    macro_f1: float
    head_usage: list[list[float]]
    """(L × H) fraction of inputs on which each head ran."""
    predictions: np.ndarray
    labels: np.ndarray
    probs: np.ndarray
    budgets: np.ndarray
    """(N, L) s per input and layer."""
    selected: np.ndarray
    """(N, L, H) bool: the heads that ran per input and layer."""
    relevance: np.ndarray | None = None
    """(N, L, H) head relevance p per input and layer (bba: its gates' p), as the model computed it."""

    def summary(self) -> dict:
        keys = ("accuracy", "macro_f1", "n", "mean_budget", "mean_heads_fraction", "attention_cost",
                "attention_cost_estimated", "flops_ratio", "mean_budget_per_layer", "head_entropy", "head_usage")
        return {k: getattr(self, k) for k in keys}

    def to_frame(self, n_tokens: list[int]) -> pd.DataFrame:
        """One row per input of the split (no text: rows are keyed by their index).

        Args:
            n_tokens: tokens the model read per input, in the split's order.

        Columns: ``index``, ``label``, ``prediction``, ``correct``, ``confidence``, ``p_true``,
        ``loss`` (cross-entropy of the true label, nats), ``entropy`` (of the prediction, nats),
        ``mean_s``, per layer ``s{l}`` (budget), ``k{l}`` (heads run) and ``heads{l}`` (the heads
        that ran, space-separated), and ``tokens`` (tokens read).

        Raises:
            ValueError: ``n_tokens`` and the per-input arrays differ in length.
        """
        probs = np.asarray(self.probs, dtype=np.float64)
        labels = np.asarray(self.labels, dtype=np.int64)
        preds = np.asarray(self.predictions, dtype=np.int64)
        budgets = np.asarray(self.budgets, dtype=np.float64)
        n = len(labels)
        if not len(n_tokens) == n == len(preds) == len(probs) == len(budgets):
            raise ValueError("token counts and evaluation arrays differ in length")
        p_true = probs[np.arange(n), labels]
        table = pd.DataFrame({
            "index": np.arange(n),
            "label": labels,
            "prediction": preds,
            "correct": preds == labels,
            "confidence": probs.max(-1) if n else np.zeros(0),
            "p_true": p_true,
            "loss": -np.log(np.clip(p_true, 1e-12, 1.0)),
            "entropy": -(probs * np.log(np.clip(probs, 1e-12, 1.0))).sum(-1),
            "mean_s": budgets.mean(-1) if n else np.zeros(0),
        })
        selected = np.asarray(self.selected, dtype=bool)  # (N, L, H)
        for layer in range(budgets.shape[1] if budgets.ndim == 2 else 0):
            table[f"s{layer}"] = budgets[:, layer]
            table[f"k{layer}"] = selected[:, layer].sum(-1)
            table[f"heads{layer}"] = [" ".join(map(str, np.flatnonzero(row))) for row in selected[:, layer]]
        table["tokens"] = np.asarray(n_tokens, dtype=np.int64)
        return table


def macro_f1(labels: np.ndarray, predictions: np.ndarray, n_classes: int) -> float:
    """Unweighted mean of the per-class F1 over the classes present in labels or predictions.

    Classes of the model's ``n_classes`` that neither occur nor are predicted are left out
    rather than counted as F1 = 0 (a small test split may lack a class).
    """
    from sklearn.metrics import f1_score  # slow import, only when evaluating

    present = np.union1d(labels, predictions)
    present = present[(present >= 0) & (present < n_classes)]
    if not len(present):
        return 0.0
    return float(f1_score(labels, predictions, labels=present, average="macro", zero_division=0))


def spearman(x, y) -> float | None:
    """Spearman's rank correlation of two columns (ties get average ranks, NaN pairs dropped).

    None when fewer than 3 pairs remain or a side is constant (a dense model's s, say): the
    correlation is undefined there.
    """
    a = pd.Series(np.asarray(x, dtype=np.float64))
    b = pd.Series(np.asarray(y, dtype=np.float64))
    ok = a.notna() & b.notna()
    a, b = a[ok], b[ok]
    if len(a) < 3 or a.nunique() < 2 or b.nunique() < 2:
        return None
    return float(a.corr(b, method="spearman"))


@torch.no_grad()
def evaluate(
    model: BudgetFormer,
    ids: list[list[int]],
    labels: list[int],
    control: Control | None = None,
    mode: str | None = None,
    batch_size: int = 64,
) -> Evaluation:
    """Evaluate pre-tokenised inputs (see :func:`evaluate_split` for texts; a pair's ids carry
    its segments, :class:`~budgetformer_core.io.tokenizer.PairIds`); ``control`` as
    :func:`analyze` takes it."""
    model.eval()
    mode = resolve_mode(model, mode)
    control = model.control_in_effect(control)
    device = next(model.parameters()).device
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths batch together
    preds = np.zeros(len(ids), dtype=np.int64)
    probs = np.zeros((len(ids), model.cfg.n_classes), dtype=np.float32)
    budgets = np.zeros((len(ids), model.cfg.n_layers), dtype=np.float32)
    heads = np.zeros((len(ids), model.cfg.n_layers), dtype=np.int64)
    selected = np.zeros((len(ids), model.cfg.n_layers, model.cfg.n_heads), dtype=bool)
    relevance = np.zeros((len(ids), model.cfg.n_layers, model.cfg.n_heads), dtype=np.float32)
    est_cost = 0.0
    flops = dense = 0
    entropy = 0.0
    for start in range(0, len(ids), batch_size):
        rows = order[start : start + batch_size]
        batch = pad([ids[i] for i in rows])
        types = None if batch.types is None else batch.types.to(device)  # a pair's segments
        out = model(batch.ids.to(device), batch.mask.to(device), mode=mode, control=control, types=types)
        p = torch.softmax(out.logits.float(), -1).cpu()
        probs[rows], preds[rows] = p.numpy(), p.argmax(-1).numpy()
        budgets[rows] = torch.stack([t.budget for t in out.layers], 1).cpu().numpy()
        ks = heads_run(model, out, mode).cpu()
        heads[rows] = ks.numpy()
        if mode == "structural":
            selected[rows] = torch.stack([t.selected for t in out.layers], 1).cpu().numpy()  # (B, L, H)
        else:  # every head runs
            selected[rows] = True
        relevance[rows] = torch.stack([t.relevance for t in out.layers], 1).float().cpu().numpy()  # (B, L, H)
        est_cost += float(torch.stack([t.est_cost for t in out.layers]).mean(0).sum())
        entropy += float(head_entropy(torch.stack([t.relevance for t in out.layers]))) * len(rows)
        for b, i in enumerate(rows):
            flops += input_flops(model, len(ids[i]), ks[b].tolist(), mode, control)
            dense += dense_flops(model.cfg, len(ids[i]))
    y = np.asarray(labels)
    heads_fraction = float(heads.mean() / model.cfg.n_heads)
    return Evaluation(
        accuracy=float((preds == y).mean()),
        n=len(ids),
        mean_budget=float(budgets.mean()),
        mean_heads_fraction=heads_fraction,
        flops_ratio=flops / dense,
        mean_budget_per_layer=budgets.mean(0).tolist(),
        head_entropy=entropy / len(ids),
        attention_cost=heads_fraction,
        attention_cost_estimated=est_cost / len(ids),
        macro_f1=macro_f1(y, preds, model.cfg.n_classes),
        head_usage=selected.mean(0).tolist(),
        predictions=preds,
        labels=y,
        probs=probs,
        budgets=budgets,
        selected=selected,
        relevance=relevance,
    )


def evaluate_split(
    ckpt: Checkpoint, split: Split, control: Control | None = None, mode: str | None = None
) -> Evaluation:
    """Tokenise a split (texts, or pairs for a model that reads them) with the checkpoint's
    tokenizer and evaluate it."""
    check_kind(ckpt, split.texts[:1], "each row of the split")  # a split holds one kind
    ids, _ = encode(ckpt.tokenizer, split.texts, ckpt.model.cfg.max_len)
    return evaluate(ckpt.model, ids, split.labels, control, mode)
