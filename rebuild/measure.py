"""The figures of ``precomputed/results/sweeps.csv``: accuracy and cost per model and budget, then latency.

:func:`evaluate_all` evaluates every model on the test split in parallel one-thread processes
(no latency); :func:`retime` times a dataset's rows afterwards, alone, with the engine's
:func:`budgetformer_core.measure.latency.time_dataset`.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from budgetformer_core.measure.latency import LATENCY_COLUMNS, time_dataset
from budgetformer_core.shipped import model_name, per_example_dir, per_example_path, relative, relevance_path

from .jobs import ROOT, Job, plan
from .recipes import DATA_ROOT, data_dir

SWEEP_BUDGETS = tuple(round(0.05 * i, 2) for i in range(1, 21))
PRETRAINED_SWEEP = (0.1, 0.25, 0.5, 0.75, 1.0)
"""The sweep of the models on a pretrained encoder (a pass over AG News's test split takes minutes)."""
TEXT_BASELINE = "tfidf-lr"
"""The row of sweeps.csv for TF-IDF + logistic regression (no checkpoint, not timed)."""


def local_copy(dataset: str, data_root: str | Path = DATA_ROOT) -> Path | None:
    """The local copy of ``dataset`` as a path from here (None: built in)."""
    folder = data_dir(dataset, data_root)
    return None if folder is None else ROOT / folder


def one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def evaluate_model(dataset: str, name: str, path: str, budget: float | None, data: Path | None,
                   per_example_path: str | None) -> list[dict]:
    """Rows of ``sweeps.csv`` for one model, without latency (run in a one-thread worker process;
    :func:`retime` times them afterwards, alone): its own operating point, and for the models
    that take a budget the sweep (:data:`SWEEP_BUDGETS`; on a pretrained encoder
    :data:`PRETRAINED_SWEEP`)."""
    import torch

    from budgetformer_core.analysis.infer import evaluate
    from budgetformer_core.io.data import load_dataset
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import encode
    from budgetformer_core.model.budget import Control

    ckpt = load_checkpoint(ROOT / path)
    split = load_dataset(dataset, data, seed=ckpt.meta.get("split_seed", 0)).split("test")
    ids, _ = encode(ckpt.tokenizer, split.texts, ckpt.config.max_len)
    method = ckpt.config.method
    sweeps = (method == "bba" and budget is None) or method == "budgetformer"
    points: list[float | None] = [budget] if budget is not None else [None]
    if sweeps:
        points += list(PRETRAINED_SWEEP if ckpt.meta.get("backbone") else SWEEP_BUDGETS)
    out = []
    with torch.inference_mode():
        for b in points:
            control = Control(budget=b) if b is not None else None
            ev = evaluate(ckpt.model, ids, split.labels, control)
            if b is None and per_example_path:
                frame = ev.to_frame([len(x) for x in ids])
                # (zstd at its highest level: a fifth smaller than the default snappy, read as before)
                frame.round(6).to_parquet(ROOT / per_example_path, index=False, compression="zstd",
                                          compression_level=19)
                save_relevance(ROOT / relevance_path(model_name(dataset, name)), ev.relevance)
            out.append({
                "dataset": dataset, "model": name, "variant": method,
                "budget": "own" if b is None else f"{b:g}",
                "accuracy": ev.accuracy, "macro_f1": ev.macro_f1, "n": ev.n,
                "mean_s": ev.mean_budget, "heads_fraction": ev.mean_heads_fraction,
                "attention_cost_estimated": ev.attention_cost_estimated, "flops_ratio": ev.flops_ratio,
                **accuracy_by_need(ev, split.needed_heads),
            })
    return out


def save_relevance(path: Path, relevance: np.ndarray) -> None:
    """The (N, L, H) head relevance p of a shipped model's test split beside its per-example table
    (:func:`budgetformer_core.shipped.relevance_path`), as float16 under the name ``relevance`` of
    a compressed .npz (less than half of a plain .npy): the Head atlas places the inputs and ranks
    them per head from it without running the model over the split."""
    np.savez_compressed(path, relevance=np.asarray(relevance, dtype=np.float16))


def text_baseline(dataset: str, data: Path | None) -> dict:
    """The row of sweeps.csv for TF-IDF + logistic regression trained on the dataset's training
    split (the rows the dense models train on) and scored on its test split: word 1- and
    2-grams seen in at least two texts, sublinear term frequency, L2-regularised logistic
    regression (C = 10, lbfgs), one model for all classes; a pair task's words marked by the text
    they come from (the hypothesis's prefixed ``h_``), so the two texts are two bags. No heads: its
    cost columns are empty."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    from budgetformer_core.io.data import load_dataset

    loaded = load_dataset(dataset, data, seed=0)
    train, test = loaded.split("train"), loaded.split("test")

    def words(text) -> str:
        if isinstance(text, str):
            return text
        first, second = text
        return " ".join([first, *(f"h_{w}" for w in second.split())])

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    fitted = vectorizer.fit_transform([words(t) for t in train.texts])
    classifier = LogisticRegression(C=10.0, max_iter=2000).fit(fitted, train.labels)
    predicted = classifier.predict(vectorizer.transform([words(t) for t in test.texts]))
    labels = np.asarray(test.labels)
    return {"dataset": dataset, "model": TEXT_BASELINE, "variant": "tfidf", "budget": "own",
            "accuracy": float((predicted == labels).mean()),
            "macro_f1": float(f1_score(labels, predicted, average="macro")), "n": len(labels)}


def accuracy_by_need(ev, needed_heads: list[int] | None) -> dict[str, float]:
    """``acc_need{n}``: accuracy on the inputs built to need n heads (synthetic tasks only)."""
    if needed_heads is None:
        return {}
    need = np.asarray(needed_heads)
    correct = ev.predictions == ev.labels
    return {f"acc_need{n}": float(correct[need == n].mean()) for n in sorted(set(need.tolist()))}


def evaluate_all(jobs: list[Job], workers: int, data_root: str | Path = DATA_ROOT) -> pd.DataFrame:
    """Accuracy rows of every job, on ``workers`` parallel one-thread processes (no latency).
    Shipped models also get a per-example table."""
    (ROOT / relative(per_example_dir())).mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(workers, initializer=one_thread) as pool:
        futures = []
        for job in jobs:
            per_example = str(relative(per_example_path(job.key))) if job.shipped else None
            futures.append(pool.submit(evaluate_model, job.dataset, job.name, str(job.out), job.budget,
                                       local_copy(job.dataset, data_root), per_example))
        rows = [row for f in futures for row in f.result()]
    return pd.DataFrame(rows)


def accuracy_changes(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """How far a rebuild moved each model's test accuracy, in points, from the sweeps it replaces.

    One row per (dataset, model) present in both: accuracy at its own operating point before and
    after (when it has one), and the largest absolute change over every budget it was evaluated at.
    """
    keys = ["dataset", "model", "budget"]
    both = old[keys + ["accuracy"]].merge(new[keys + ["accuracy"]], on=keys, suffixes=("_before", "_after"))
    both["change"] = 100 * (both["accuracy_after"] - both["accuracy_before"])
    own = both[both["budget"] == "own"].set_index(["dataset", "model"])
    own = pd.DataFrame({"before": 100 * own["accuracy_before"], "after": 100 * own["accuracy_after"],
                        "change": own["change"]})
    largest = both.groupby(["dataset", "model"])["change"].apply(lambda c: c.abs().max()).rename("largest_change")
    return own.join(largest, how="right").reset_index()  # a per-budget baseline has no own point


def time_all(frame: pd.DataFrame, jobs: list[Job], data_root: str | Path = DATA_ROOT) -> pd.DataFrame:
    """:func:`~budgetformer_core.measure.latency.time_dataset` for each dataset of ``frame``, one after the
    other in this process, on one thread, after every other stage is done (nothing of ours runs
    beside it)."""
    from budgetformer_core.measure.timing import machine_info

    one_thread()
    parts = []
    for ds, part in frame.groupby("dataset", sort=False):
        checkpoints = {j.name: ROOT / j.out for j in jobs if j.dataset == ds}
        parts.append(time_dataset(ds, part, checkpoints, local_copy(ds, data_root), untimed={TEXT_BASELINE}))
    timed = pd.concat(parts, ignore_index=True)
    timed["machine"] = machine_info(1).cpu_model
    return timed


def untimed_partners(frame: pd.DataFrame, keys: Collection[str]) -> list[str]:
    """The models (``dataset-model``) that must be timed with ``keys`` and are not among them.

    A row's ``dense_latency_ms`` is its dense model's own latency from the same rounds
    (tests/test_precomputed.py), so the rows sharing a dense model — and that model's own row —
    are timed together or not at all: timing some of them would give the dense row a latency
    the others were not measured against."""
    timed = frame[frame["latency_ms"].notna() & frame["dense_model"].notna()]
    touched = {(d, ref) for d, m, ref in zip(timed["dataset"], timed["model"], timed["dense_model"], strict=True)
               if f"{d}-{m}" in keys}
    partners = {f"{d}-{m}" for d, m, ref in zip(timed["dataset"], timed["model"], timed["dense_model"], strict=True)
                if (d, ref) in touched} | {f"{d}-{ref}" for d, ref in touched}
    return sorted(partners - set(keys))


def retime(frame: pd.DataFrame, datasets: list[str], data_root: str | Path = DATA_ROOT,
           keys: Collection[str] | None = None) -> tuple[pd.DataFrame, dict]:
    """``frame`` (all of sweeps.csv) with the rows of ``datasets`` timed again (:func:`time_all`),
    and the manifest's timing entries: one per dataset timed whole, or with ``keys``
    (``dataset-model``) only those models' rows are timed, each beside its dense reference in the
    same rounds, and each gets an entry of its own; the other rows keep their latency."""
    from budgetformer_core.measure.latency import BATCH, CLOCK, ROUNDS, TIMED_INPUTS
    from budgetformer_core.measure.timing import machine_info

    chosen = frame["dataset"].isin(datasets)
    if keys is not None:
        chosen &= (frame["dataset"] + "-" + frame["model"]).isin(keys)
    entries = {}
    parts = []
    for ds in [d for d in datasets if (chosen & (frame["dataset"] == d)).any()]:
        t0 = time.perf_counter()
        load = machine_info(1).load_average
        rows = frame[chosen & (frame["dataset"] == ds)]
        parts.append(time_all(rows, plan([ds], data_root), data_root))
        entry = {"clock": CLOCK, "threads": 1, "rounds": ROUNDS, "timed_inputs": TIMED_INPUTS,
                 "batch": BATCH, "load_average": load, "seconds": round(time.perf_counter() - t0, 1),
                 "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        names = [ds] if keys is None else sorted(set(ds + "-" + rows["model"]))
        entries |= {name: entry for name in names}
    timed = pd.concat([frame[~chosen], *parts], ignore_index=True)
    order = [c for c in frame.columns if c not in LATENCY_COLUMNS and c != "machine"]
    first = [c for c in order if not c.startswith("acc_need")]
    need = [c for c in order if c.startswith("acc_need")]
    return timed.reindex(columns=first + [*LATENCY_COLUMNS, "machine"] + need), entries
