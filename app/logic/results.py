"""Tables of the "Budget sweep" and "Ablations" pages, from precomputed results (no Streamlit here).

Both pages read what ``make precompute`` wrote under precomputed/results: sweeps.csv (a row per
dataset, model and budget point); see docs/reproduce.md for how it is measured.
:func:`live_sweep` re-measures a few budgets on this machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from app.cards import Card
from app.speed import HOW, NOT_TIMED, baseline_of, latency_versus, with_references
from budgetformer_core.shipped import PRETRAINED

if TYPE_CHECKING:
    from budgetformer_core.io.checkpoint import Checkpoint

SWEEP_KEYS = ("dataset", "model", "budget", "accuracy")
"""Columns sweeps.csv must have; the other numeric ones become NaN when absent."""
SWEEP_NUMBERS = (
    "accuracy",
    "macro_f1",
    "n",
    "mean_s",
    "heads_fraction",
    "attention_cost_estimated",
    "flops_ratio",
)
"""sweeps.csv's numeric columns besides the timing ones (:data:`app.speed.TIMED_COLUMNS`)."""
TABLE_BUDGETS = (0.25, 0.5, 0.75, 1.0)
"""The budgets of the per-budget comparison (the specialists exist at the first three)."""
LIVE_BUDGETS = (0.1, 0.25, 0.5, 0.75, 1.0)
"""The budgets the sweep page re-measures live."""
SPECIALISTS = {"static-": "static gates", "recovery-": "post-hoc + recovery"}
"""Per-budget models by name prefix: one row each, at the budget they were trained for."""
POSTHOC = "posthoc"
METHOD_NAMES = {"bba": "BBA", POSTHOC: "post-hoc (zero-shot)", "dense": "dense"}
ABLATIONS = {
    "budgetformer": "BudgetFormer (full)",
    "no-budget-net": "no budget net (no f_θ)",
    "no-head-scorer": "no head scorer (no g_φ)",
    "dense": "dense",
    "bba": "BBA (own point)",
}
"""The models the ablation page compares at their own operating point, in its order."""
RESULT_COLUMNS = [
    "accuracy",
    "macro_f1",
    "heads_fraction",
    "mean_s",
    "flops_ratio",
    "latency_ms",
    "dense_latency_ms",
    "speedup_b1",
    "speedup_b32",
    "ideal_speedup",
    "reference",
]
"""The columns the result tables show (and download): each row's latency beside its dense
reference's, timed in the same rounds, and the speed-ups computed from them."""


def read_sweeps(path: Path | str) -> pd.DataFrame:
    """sweeps.csv with numeric columns, plus ``b`` (the budget as a number; NaN for "own"),
    ``ideal_speedup`` (1 / flops_ratio) and the timing columns of :func:`app.speed.with_references`
    (the dense reference of each row named in ``reference``; speed-up = its latency / the row's).

    Raises:
        ValueError: not a readable CSV, or without the columns of :data:`SWEEP_KEYS`.
    """
    try:
        frame = pd.read_csv(path, dtype={"budget": str, "dataset": str, "model": str})
    except (OSError, ValueError, UnicodeDecodeError) as e:  # pandas' parser errors are ValueErrors
        raise ValueError(f"not a readable CSV file ({e})") from e
    missing = [c for c in SWEEP_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"the column(s) {', '.join(missing)} are missing")
    for column in SWEEP_NUMBERS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else np.nan
    frame["budget"] = frame["budget"].fillna("").str.strip()
    frame["b"] = pd.to_numeric(frame["budget"].where(frame["budget"] != "own"), errors="coerce")
    ratio = frame["flops_ratio"].where(frame["flops_ratio"] > 0)
    frame["ideal_speedup"] = 1.0 / ratio
    return with_references(frame)


def backbone_of(model: str) -> str:
    """The name prefix of the models built on the same encoder as ``model`` (``"minilm-"`` for
    ``minilm-bba``; ``""`` for a model trained from scratch)."""
    return next((f"{p}-" for p in PRETRAINED if model.startswith(f"{p}-")), "")


def same_backbone(rows: pd.DataFrame, model: str) -> pd.DataFrame:
    """The rows of the models built on ``model``'s encoder, named without the encoder's prefix,
    so that a fine-tuned model meets the dense model, post-hoc sweep and per-budget specialists
    of its own encoder (``minilm-dense`` as ``dense``), never those trained from scratch."""
    prefix = backbone_of(model)
    names = rows["model"].astype(str)
    if prefix:
        return rows[names.str.startswith(prefix)].assign(model=names.str.removeprefix(prefix))
    return rows[~names.str.startswith(tuple(f"{p}-" for p in PRETRAINED))]


def sweep_curve(rows: pd.DataFrame, model: str) -> pd.DataFrame:
    """The rows of ``model`` at a numeric budget, by budget."""
    return rows[(rows["model"] == model) & rows["b"].notna()].sort_values("b")


def own_point(rows: pd.DataFrame, model: str) -> pd.Series | None:
    """The row of ``model`` at its own operating point, or None."""
    own = rows[(rows["model"] == model) & (rows["budget"] == "own")]
    return None if own.empty else own.iloc[0]


def at_budget(curve: pd.DataFrame, budget: float) -> pd.Series:
    """The row of a (non-empty) sweep curve whose budget is nearest to ``budget``."""
    return curve.iloc[int(np.argmin(np.abs(curve["b"].to_numpy() - budget)))]


def specialist_rows(rows: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The per-budget models named ``prefix``…, by budget."""
    return rows[rows["model"].str.startswith(prefix) & rows["b"].notna()].sort_values("b")


def series_xy(frame: pd.DataFrame, column: str, x: str = "b") -> tuple[list[float], list[float]]:
    """(x, y) lists of one column against the budget (or ``x``), for a chart."""
    return frame[x].tolist(), frame[column].tolist()


def budget_series(rows: pd.DataFrame, model: str, column: str) -> dict:
    """What the sweep page draws for one metric: keyword arguments of
    :func:`app.charts.sweep.budget_curves`.

    ``lines``: the model's sweep and the zero-shot post-hoc sweep; ``points``: the model's own
    operating point (at its mean s) and the per-budget specialists; ``reference``: dense.
    """
    lines = {model: series_xy(sweep_curve(rows, model), column)}
    if model != POSTHOC:
        lines[METHOD_NAMES[POSTHOC]] = series_xy(sweep_curve(rows, POSTHOC), column)
    own = own_point(rows, model)
    points = {f"{model} at its own point": ([own["mean_s"]], [own[column]])} if own is not None else {}
    points |= {name: series_xy(specialist_rows(rows, p), column) for p, name in SPECIALISTS.items()}
    dense = own_point(rows, "dense")
    reference = {"dense": dense[column]} if dense is not None else {}
    if column in ("latency_ms", "latency_b32_ms"):  # the reference the model was timed against
        reference = dense_level(sweep_curve(rows, model), column)
    lines = {k: v for k, v in lines.items() if v[0]}
    points = {k: v for k, v in points.items() if v[0]}
    errors = {}
    if column == "accuracy":  # each point's 95% interval over its test inputs
        frames = {model: sweep_curve(rows, model), METHOD_NAMES[POSTHOC]: sweep_curve(rows, POSTHOC)}
        frames |= {name: specialist_rows(rows, p) for p, name in SPECIALISTS.items()}
        if own is not None:
            frames[f"{model} at its own point"] = own.to_frame().T
        errors = {name: accuracy_interval(frame) for name, frame in frames.items() if name in lines | points}
    return dict(lines=lines, points=points, reference={k: v for k, v in reference.items() if pd.notna(v)},
                errors=errors)


def accuracy_interval(frame: pd.DataFrame) -> tuple[list[float], list[float]]:
    """(above, below) lengths of each row's 95% accuracy interval over its ``n`` test inputs
    (normal approximation, 1.96 · √(acc·(1 − acc) / n); 0 where n is unknown)."""
    acc = pd.to_numeric(frame["accuracy"], errors="coerce").to_numpy(dtype=float)
    n = pd.to_numeric(frame["n"], errors="coerce").to_numpy(dtype=float)
    half = np.where(n > 0, 1.96 * np.sqrt(np.clip(acc * (1 - acc), 0, None) / np.where(n > 0, n, 1)), 0.0)
    half = np.nan_to_num(half).tolist()
    return half, half


def dense_level(rows: pd.DataFrame, column: str = "latency_ms") -> dict[str, float]:
    """The dense reference's latency the rows were timed against, as a chart's reference line
    named after it ({} when not timed, or when the rows have several references)."""
    ref = baseline_of(rows)
    dense = rows["dense_" + column].dropna() if ref is not None else []
    return {f"{ref} (same rounds)": float(dense.median())} if len(dense) else {}


def speedup_series(curve: pd.DataFrame) -> dict:
    """Ideal (1 / FLOPs ratio) and measured speed-ups of a sweep against its dense reference, for
    :func:`budget_curves` (each measured one from the row's two latencies)."""
    b32 = curve[curve["speedup_b32"].notna()]
    lines = {
        "ideal (1 / FLOPs ratio)": series_xy(curve, "ideal_speedup"),
        "measured, batch 1": series_xy(curve, "speedup_b1"),
        "measured, batch 32": series_xy(b32, "speedup_b32"),
    }
    return dict(lines={k: v for k, v in lines.items() if v[0]}, reference={"dense reference": 1.0})


def speedup_title(reference: str | None) -> str:
    """The speed-up chart's title, naming its baseline (the batch sizes are its lines' names, how
    it was timed its axis and caption: a title that fits the page at 1280 px)."""
    return f"Speed-up over dense ({reference or 'its dense reference'}): ideal vs measured"


def method_of(model: str, chosen: str) -> str | None:
    """The comparison table's name for a model (None: not in the table)."""
    if model == chosen and model not in METHOD_NAMES:
        return model
    for prefix, name in SPECIALISTS.items():
        if model.startswith(prefix):
            return name
    return METHOD_NAMES.get(model)


def comparison_table(rows: pd.DataFrame, chosen: str) -> pd.DataFrame:
    """Every method at the budgets of :data:`TABLE_BUDGETS`: the chosen model, BBA, static gates,
    post-hoc, post-hoc + recovery, and dense (at budget 1). A row per budget and method."""
    at = rows[np.isclose(rows["b"].to_numpy()[:, None], TABLE_BUDGETS).any(1)]
    dense = rows[(rows["model"] == "dense") & (rows["budget"] == "own")].assign(b=1.0)
    table = pd.concat([at[at["model"] != "dense"], dense]).assign(
        method=lambda t: [method_of(m, chosen) for m in t["model"]]
    )
    table = table[table["method"].notna()]
    order = [chosen, "BBA", "static gates", METHOD_NAMES[POSTHOC], "post-hoc + recovery", "dense"]
    rank = {name: i for i, name in enumerate(order)}
    table = table.assign(rank=table["method"].map(rank)).sort_values(["b", "rank"])
    return table.rename(columns={"b": "budget_b"})[
        ["budget_b", "method", "model", *RESULT_COLUMNS]
    ].reset_index(drop=True)


def own_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every model of a dataset at its own operating point (specialists at their budget)."""
    own = rows[(rows["budget"] == "own") | rows["model"].str.startswith(tuple(SPECIALISTS))]
    return own[["model", "budget", *RESULT_COLUMNS]].reset_index(drop=True)


def ablation_table(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The models of :data:`ABLATIONS` at their own point, in that order, and those missing."""
    found = [(m, own_point(rows, m)) for m in ABLATIONS]
    table = pd.DataFrame(
        [{"model": ABLATIONS[m], **r[RESULT_COLUMNS].to_dict()} for m, r in found if r is not None],
        columns=["model", *RESULT_COLUMNS],
    )
    return table, [m for m, r in found if r is None]


def sweep_cards(row: pd.Series, dense: pd.Series | None, symbol: str = "s") -> list[Card]:
    """The sweep page's headline numbers at one budget (``symbol``: the model's budget, s or bba's
    b): accuracy and macro-F1 against the dense model's own point (``dense``), latency and
    speed-up against the row's dense reference timed in the same rounds (both from the row)."""

    def versus(column: str, fmt) -> str | None:
        if dense is None or pd.isna(dense[column]) or pd.isna(row[column]):
            return None
        return fmt(row[column] - dense[column])

    def show(value: float, fmt: str) -> str:
        return NOT_TIMED if pd.isna(value) else format(value, fmt)

    ref = row["reference"]
    return [
        Card(
            "Accuracy",
            show(row["accuracy"], ".1%"),
            versus("accuracy", lambda d: f"{d * 100:+.1f} pts vs dense"),
        ),
        Card(
            "Macro-F1",
            show(row["macro_f1"], ".3f"),
            versus("macro_f1", lambda d: f"{d:+.3f} vs dense"),
        ),
        Card(
            "Heads run",
            show(row["heads_fraction"], ".0%"),
            None if pd.isna(row["mean_s"]) else f"mean {symbol} {row['mean_s']:.2f}",
        ),
        Card("FLOPs vs dense", show(row["flops_ratio"], ".0%"), None),
        Card(
            "Latency (batch 1)",
            show(row["latency_ms"], ".2f") + ("" if pd.isna(row["latency_ms"]) else " ms"),
            latency_versus(row["latency_ms"], row["dense_latency_ms"], ref),
            f"Median single-thread time per input, batch 1, timed in the same interleaved rounds as "
            f"{ref} on the same test texts.",
        ),
        Card(
            "Speed-up vs dense",
            show(row["speedup_b1"], ".2f") + ("" if pd.isna(row["speedup_b1"]) else "×"),
            f"vs {ref}, batch 1",
            f"{ref}'s latency / this latency ({HOW}, batch 1), from the two latencies of this row. "
            + ("" if pd.isna(row["ideal_speedup"]) else f"The FLOP ideal is {row['ideal_speedup']:.2f}× "
               "(1 / FLOPs ratio)."),
        ),
    ]


LIVE_TIMED = 4
"""Texts the live re-measure times one at a time (batch 1) at each budget."""
LIVE_SEED = 0
"""Seed of the live re-measure's sample of the test texts."""


def live_sample(texts: list[str], labels: list[int], n: int) -> tuple[list[str], list[int]]:
    """``n`` of a split's texts and their labels for the live re-measure: a stratified sample
    (:func:`budgetformer_core.io.splits.stratified_sample`, seed :data:`LIVE_SEED`), every class
    in its share of the split and the same texts each time, not the split's first texts (BBC's
    first 50 are all business)."""
    from budgetformer_core.io.splits import stratified_sample

    rows = stratified_sample(labels, n, LIVE_SEED)
    return [texts[i] for i in rows], [labels[i] for i in rows]


def live_sweep(
    ckpt: Checkpoint, texts: list[str], labels: list[int], budgets=LIVE_BUDGETS,
    reference: tuple[str, Checkpoint] | None = None,
) -> Iterator[dict]:
    """Evaluate ``ckpt`` on the texts at each requested budget, and time it; a row per budget,
    as it is done.

    Latency is re-measured here the way sweeps.csv's is (:func:`budgetformer_core.measure.latency.time_points`):
    up to :data:`LIVE_TIMED` of the texts, evenly spaced, one at a time (batch 1, one thread),
    the model at budget b and its dense ``reference`` (name, checkpoint) in the same interleaved
    rounds; ``speedup_b1`` = the reference's latency / the model's (NaN without a reference).
    ``macro_f1`` is over the classes present in ``labels``: a class the sample lacks is left out
    rather than counted as F1 = 0 (a text called that class still costs its true class's F1).
    """
    from sklearn.metrics import f1_score  # slow import, only when evaluating

    from budgetformer_core.analysis.infer import evaluate_split
    from budgetformer_core.io.splits import Split
    from budgetformer_core.io.tokenizer import encode
    from budgetformer_core.measure.latency import Point, time_points, timed_rows
    from budgetformer_core.model.budget import Control

    split = Split(list(texts), list(labels))
    timed = [texts[i] for i in timed_rows(len(texts), LIVE_TIMED)]

    def ids(c: Checkpoint) -> list[list[int]]:
        return encode(c.tokenizer, timed, c.config.max_len)[0]  # one id list per timed text

    for b in budgets:
        t0 = time.perf_counter()
        ev = evaluate_split(ckpt, split, Control(budget=b))
        points = {"model": Point(ckpt.model, b, ids(ckpt))}
        if reference is not None:
            points["reference"] = Point(reference[1].model, None, ids(reference[1]))
        latency = time_points(points)
        dense = latency["reference"].ms if reference is not None else np.nan
        yield {
            "budget_b": b,
            "accuracy": ev.accuracy,
            "macro_f1": float(f1_score(ev.labels, ev.predictions, labels=np.unique(ev.labels), average="macro",
                                       zero_division=0)),
            "heads_fraction": ev.mean_heads_fraction,
            "flops_ratio": ev.flops_ratio,
            "latency_ms": latency["model"].ms,
            "dense_latency_ms": dense,
            "speedup_b1": dense / latency["model"].ms,
            "reference": None if reference is None else reference[0],
            "n": ev.n,
            "timed": len(timed),
            "seconds": time.perf_counter() - t0,
        }


def head_budgets(n_heads: int) -> list[float]:
    """One budget per number of heads, k / H for k = 1 … H: every distinct point of a model
    that runs ⌊b·H⌋ heads."""
    return [k / n_heads for k in range(1, n_heads + 1)]


def sweep_rows(done: list[dict], dataset: str, model: str) -> pd.DataFrame:
    """Rows of :func:`live_sweep` as :func:`read_sweeps` gives sweeps.csv's, for ``model`` of ``dataset``."""
    frame = pd.DataFrame(done).rename(columns={"budget_b": "b"})
    frame = frame.assign(dataset=dataset, model=model, budget=[f"{b:.3g}" for b in frame["b"]])
    for column in SWEEP_NUMBERS:
        if column not in frame:
            frame[column] = np.nan
    frame["ideal_speedup"] = 1.0 / frame["flops_ratio"].where(frame["flops_ratio"] > 0)
    frame["dense_model"] = [None if r is None else r.removeprefix(f"{dataset}-") for r in frame["reference"]]
    return with_references(frame)


# --------------------------------------------------------------------------- error bars

INTERVAL_MODELS = ("budgetformer", "budgetformer-paper", "no-budget-net", "no-head-scorer", "dense", "bba")
"""The shipped models with a per-example test table: the ones paired bootstrap intervals exist for
(the per-budget specialists ship only their accuracy, so they get none)."""
ABLATION_PAIRS = (
    ("budgetformer", "dense"),
    ("no-budget-net", "budgetformer"),
    ("no-head-scorer", "budgetformer"),
    ("bba", "dense"),
    ("bba", "budgetformer"),
)
"""The differences the Ablations page puts an interval on: each ablation against the full model,
the full model and BBA against dense."""


def sweep_pairs(chosen: str) -> tuple[tuple[str, str], ...]:
    """The differences the sweep page puts an interval on: the chosen model at its own point
    against every other model with a per-example table."""
    return tuple((chosen, other) for other in INTERVAL_MODELS if other != chosen)


def difference_table(compared: pd.DataFrame, names: dict[str, str] | None = None) -> pd.DataFrame:
    """:func:`budgetformer_core.measure.bootstrap.compare`'s rows as the pages show them: points, the
    interval written out, and whether it excludes 0 (``names``: how to call each model)."""
    name = (lambda m: names.get(m, m)) if names else (lambda m: m)
    return pd.DataFrame({
        "model": [name(m) for m in compared["a"]],
        "against": [name(m) for m in compared["b"]],
        "accuracy": compared["accuracy_a"],
        "its accuracy": compared["accuracy_b"],
        "difference (points)": (compared["difference"] * 100).round(2),
        "95% interval (points)": [f"[{lo * 100:+.2f}, {hi * 100:+.2f}]" for lo, hi in
                                  zip(compared["low"], compared["high"], strict=True)],
        "only model right": compared["only_a"],
        "only other right": compared["only_b"],
        "verdict": ["beyond noise" if b else "within noise" for b in compared["beyond_noise"]],
    })  # fmt: skip


def interval_note(compared: pd.DataFrame, n: int, resamples: int, seed: int) -> str:
    """One line under an interval table: how it was made and how many differences are noise."""
    within = int((~compared["beyond_noise"]).sum())
    return (
        f"Paired bootstrap over the {n} test inputs ({resamples:,} resamples, seed {seed}): each resample "
        "draws the inputs once and scores both models on it, so only the inputs where they disagree "
        f"move the difference. {within} of these {len(compared)} differences are within noise (their "
        "95% interval holds 0)."
    )


def accuracy_error_bars(intervals: dict, models: list[str]) -> tuple[list[float | None], list[float | None]]:
    """(above, below) lengths of each model's accuracy error bar, None where it has no interval."""
    above = [None if m not in intervals else intervals[m].high - intervals[m].estimate for m in models]
    below = [None if m not in intervals else intervals[m].estimate - intervals[m].low for m in models]
    return above, below


def seed_table(spread: pd.DataFrame) -> pd.DataFrame:
    """:func:`budgetformer_core.measure.bootstrap.seed_spread` as the pages show it, in points."""
    return pd.DataFrame({
        "model": spread["model"], "seeds": spread["seeds"],
        "accuracy (mean)": spread["mean"],
        "sd (points)": (spread["sd"] * 100).round(2),
        "range (points)": ((spread["max"] - spread["min"]) * 100).round(2),
        "per seed (%)": spread["per_seed"],
    })  # fmt: skip


COST_AXES = {"heads_fraction": "heads run (exact attention cost)", "flops_ratio": "FLOPs vs dense"}
"""The cost axes of the every-method chart."""


def method_series(
    rows: pd.DataFrame, column: str, cost: str = "heads_fraction", intervals: dict | None = None
) -> dict:
    """Every method of a dataset against the cost, for :func:`app.charts.sweep.budget_curves`:
    ``lines`` BBA (one checkpoint, every budget) and zero-shot post-hoc pruning; ``points``
    BudgetFormer at its own operating point, the static-gate and post-hoc + recovery specialists
    (one model per budget) and dense at cost 1; ``errors`` the accuracy intervals of the points
    that have one (``column == "accuracy"``)."""
    def xy(frame: pd.DataFrame) -> tuple[list[float], list[float]]:
        return frame[cost].tolist(), frame[column].tolist()

    lines = {"BBA (one checkpoint)": xy(sweep_curve(rows, "bba")),
             METHOD_NAMES[POSTHOC]: xy(sweep_curve(rows, POSTHOC))}
    own = {"budgetformer": "BudgetFormer (its own point)", "dense": "dense"}
    points = {}
    for model, name in own.items():
        row = own_point(rows, model)
        if row is not None:
            points[name] = ([row[cost]], [row[column]])
    points |= {name: xy(specialist_rows(rows, p)) for p, name in SPECIALISTS.items()}
    errors = {}
    if column == "accuracy" and intervals:
        for model, name in own.items():
            if model in intervals and name in points:
                iv = intervals[model]
                errors[name] = ([iv.high - iv.estimate], [iv.estimate - iv.low])
    return dict(
        lines={k: v for k, v in lines.items() if v[0]},
        points={k: v for k, v in points.items() if v[0]},
        errors=errors,
    )
