"""Rebuild everything under ``precomputed/``: checkpoints, sweeps, per-example analyses, manifest.

``make precompute`` runs ``python -m budgetformer_core.precompute``. It has four stages:

1. **Train.** Every model of every dataset is one job — a ``budgetformer train`` or ``prune``
   command (:func:`plan`). Jobs run in parallel worker processes of one thread each, a job after
   the jobs it starts from. A job whose checkpoint already records the same command (and today's
   tokenizer numbering) is skipped unless what it starts from was rebuilt, so an unchanged model
   is neither retrained nor rewritten (files are deterministic: the same run writes the same
   bytes). The models the app shows (:data:`SHIPPED`) go to
   ``precomputed/checkpoints/<dataset>-<model>/``; the per-budget baselines (static gates,
   post-hoc pruning, recovered specialists) go to ``runs/precompute/`` and only their results
   are shipped.
2. **Evaluate.** Every model on the test split (:func:`evaluate_model`), in parallel workers: its
   own operating point, and for the models that take a budget the sweep 0.05 … 1.0. Accuracy,
   macro-F1, heads run, estimated attention cost and FLOPs (the models on a pretrained encoder:
   the sweep of :data:`PRETRAINED_SWEEP`). Shipped models also get a per-example table. TF-IDF +
   logistic regression on the same training rows (:func:`text_baseline`) is a row beside them.
3. **Time.** A phase of its own, once every other stage is done: one process, one thread, one
   dataset after the other (:func:`time_dataset`). Every operating point of a dataset's models
   and its dense reference (:func:`dense_reference`) are timed in the same interleaved rounds on
   the same test texts, at batch 1 and batch 32 (:mod:`budgetformer_core.latency`); the speed-up
   of a row is its dense reference's latency over its own. ``--retime`` runs this stage alone on
   the rows sweeps.csv has.
4. **Manifest.** ``precomputed/manifest.json``: every file with its sha256 and size, the
   command and seed of every run, each checkpoint's accuracy on a slice of the test split (which
   ``tests/core/test_manifest.py`` reproduces), how each dataset was timed, library versions and
   the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import numpy as np
import pandas as pd

from .shipped import PRETRAINED, dense_reference  # noqa: F401  (the names this module's users read)

ROOT = Path(__file__).resolve().parents[1]
OUT = Path("precomputed")
"""Relative to the project root (the commands recorded in checkpoints use relative paths)."""
SCRATCH = Path("runs") / "precompute"
SWEEP_BUDGETS = tuple(round(0.05 * i, 2) for i in range(1, 21))
PRETRAINED_SWEEP = (0.1, 0.25, 0.5, 0.75, 1.0)
"""The sweep of the models on a pretrained encoder (a pass over AG News's test split takes minutes)."""
TABLE_BUDGETS = (0.25, 0.5, 0.75)
SHIPPED = ("dense", "budgetformer", "budgetformer-paper", "no-budget-net", "no-head-scorer", "bba")
SHIPPED_PRETRAINED = ("minilm-dense", "minilm-budgetformer", "minilm-bba")
"""The models on the pretrained encoder that ship (where a dataset's recipe makes them)."""
SLICE = 200
"""Test rows each shipped checkpoint is re-evaluated on by the manifest test."""
LATENCY_COLUMNS = ("latency_ms", "latency_iqr_ms", "dense_latency_ms", "speedup_b1",
                   "latency_b32_ms", "dense_latency_b32_ms", "speedup_b32", "dense_model")
"""The columns of ``sweeps.csv`` the timing phase writes (``--retime`` rewrites them)."""

SYNTHETIC = (
    "n_layers=1", "max_len=64", "dropout=0.0", "token_dropout=0", "random_crop=false",
    "embed_init=normal", "pos_init=sinusoidal", "lr=3e-3",
)


@dataclass(frozen=True)
class Pretrained:
    """A model fine-tuned from the pretrained encoder ``minilm-l6`` (6 layers × 12 heads)."""

    name: str
    variant: str
    sets: tuple[str, ...]
    init: str | None = None
    """The model of the same dataset it starts from (a warm start); None: the pretrained encoder."""
    budget: float | None = None
    """The budget a per-budget baseline was made for."""
    prune: bool = False
    """A post-hoc baseline: ``init``'s heads ranked on the validation split, no training."""


MINILM = ("max_len=128", "freeze_embeddings=true", "random_crop=false", "token_dropout=0", "dropout=0.1",
          "lr=1e-4", "new_lr=1e-3")
"""Fine-tuning all-MiniLM-L6-v2: 128 tokens, the embeddings kept as pretrained, a small learning
rate for the encoder and a larger one for the networks it does not bring (classifier, f_θ, g_φ,
gates)."""


@dataclass(frozen=True)
class Recipe:
    """How one dataset's models are trained: overrides shared by all of them, and the bba ones'."""

    sets: tuple[str, ...] = ()
    dense_sets: tuple[str, ...] = ()
    """Only for the models trained from scratch (dense, budgetformer, ablations)."""
    budget_sets: tuple[str, ...] = ()
    """Only for budgetformer (the adaptive recipe) and its two ablations (e.g. the budget band)."""
    paper_sets: tuple[str, ...] = ()
    """Only for budgetformer-paper, the paper's recipe (``recipe=paper``)."""
    warm_sets: tuple[str, ...] = ("epochs=5",)
    """Only for the models warm-started from dense (bba and the static-gate baselines)."""
    bba_sets: tuple[str, ...] = ()
    """Only for the bba model."""
    data_dir: str | None = None
    extra: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """More (name, variant, overrides) models trained from scratch, e.g. a one-head model."""
    budget_init: bool = False
    """Start budgetformer, budgetformer-paper and the ablations from the dense model (its weights;
    f_θ and g_φ fresh), as bba does, instead of from scratch."""
    pretrained: tuple[Pretrained, ...] = ()
    """The models on the pretrained encoder, in the order they are made."""


ADAPTIVE = ("lambda_difficulty=10", "s_min=0.05", "s_max=0.65", "lambda_balance=0.2", "structural_from=0")
"""BudgetFormer's adaptive recipe on BBC: gated weights trained straight-through from the start,
the price λ_c·s, s pulled towards each input's difficulty rank (λ_d) over the band [0.05, 0.65]
(k = 1 … 5 of 8; the easiest inputs can run one head per layer), and heads balanced over the
inputs of a batch (λ_u 0.2)."""

AG_NEWS_ADAPTIVE = (*ADAPTIVE, "lambda_cost=0.03")
"""The adaptive recipe with a lower price on heads (λ_c 0.03 instead of 0.05), for AG News."""

MINILM_ADAPTIVE = ("lambda_difficulty=10", "s_min=0.05", "s_max=0.6", "lambda_balance=0.2", "structural_from=0")
"""The adaptive recipe for 12 heads: the band [0.05, 0.6] (k = 1 … 7 of 12)."""

BASELINES_ROWS = ("max_train=4000",)
"""The per-budget baselines on the pretrained encoder train on the first 4,000 rows (a fifth of
AG News's training rows): a full epoch each would take longer than all shipped models together."""

RECIPES: dict[str, Recipe] = {
    "bbc": Recipe(budget_sets=ADAPTIVE, pretrained=(
        Pretrained("minilm-dense", "dense", (*MINILM, "epochs=4")),
        Pretrained("minilm-budgetformer", "budgetformer", (*MINILM, "epochs=5", *MINILM_ADAPTIVE), init="minilm-dense"),
    )),
    "synthetic": Recipe(
        sets=SYNTHETIC,
        dense_sets=("epochs=8",),
        # warm-started from dense. The task needs 2 of 8 heads: a band whose floor buys them
        # (s ≥ 0.25 → k ≥ 2), held firmly
        budget_sets=("epochs=6", "s_min=0.3", "lambda_budget=10", "structural_from=0"),
        paper_sets=("s_min=0.3", "lambda_budget=10"),
        warm_sets=("epochs=16",),
        bba_sets=("gate_input=false", "structural_from=0", "budget_min=0.25"),
        extra=(("dense-1head", "dense", ("epochs=8", "n_heads=1")),),
        budget_init=True,
    ),
    "synthetic_var": Recipe(
        # one layer, heads of width 1 (a head passes on one number), the anchor's state classified
        sets=(*SYNTHETIC, "head_dim=1", "pooling=first"),
        dense_sets=("epochs=6",),
        # warm-started from dense. Rank, then count: for the first half every input runs a random
        # k of 1 … 4 and all but f_θ learn (g_φ which heads first, the heads to read a slot each);
        # then f_θ alone learns how many to run, at a price that makes a head worth its cost only
        # where it reads a slot in use, with half a head of margin
        budget_sets=("epochs=8", "s_min=0.1875", "s_max=0.6", "lambda_budget=10", "structural_from=0",
                     "random_k=0.5", "standardize_scores=true", "k_margin=0.5", "lambda_cost=2.0"),
        paper_sets=("epochs=8", "s_max=0.6", "lambda_budget=10"),
        warm_sets=("epochs=8",),
        bba_sets=("structural_from=0", "budget_min=0.125"),
        # dense models with fewer heads than some inputs need, trained as long as the 8-head one
        extra=tuple((f"dense-{h}head", "dense", ("epochs=6", f"n_heads={h}")) for h in (1, 2, 3)),
        budget_init=True,
    ),
    "ag_news": Recipe(
        sets=("max_len=128", "dropout=0.3", "d_ff=128"),
        budget_sets=AG_NEWS_ADAPTIVE,
        dense_sets=("epochs=3",),
        warm_sets=("epochs=3",),
        data_dir="../shared/data/ag_news",
        pretrained=(
            Pretrained("minilm-dense", "dense", (*MINILM, "epochs=1")),
            # warm-started from the dense fine-tune, as the paper does, on the first 8,000 rows
            Pretrained("minilm-bba", "bba", (*MINILM, "epochs=1", "max_train=8000"), init="minilm-dense"),
            *(Pretrained(f"minilm-static-{b:g}", "bba", (*MINILM, "epochs=1", *BASELINES_ROWS, "gate_input=false",
                                                          f"train_budget={b:g}"), init="minilm-dense", budget=b)
              for b in (0.25, 0.5)),
            Pretrained("minilm-posthoc", "dense", (), init="minilm-dense", prune=True),
            *(Pretrained(f"minilm-recovery-{b:g}", "bba", (*MINILM, "epochs=1", *BASELINES_ROWS, "gate_input=false",
                                                            f"train_budget={b:g}", "freeze_gates=true"),
                         init="minilm-posthoc", budget=b)
              for b in (0.25, 0.5)),
        ),
    ),
}


@dataclass
class Job:
    """One model: the ``budgetformer`` command that makes it and the jobs it starts from."""

    dataset: str
    name: str
    argv: list[str]
    after: tuple[str, ...] = ()
    shipped: bool = False
    budget: float | None = None
    """The budget a per-budget specialist was made for (None: any budget / its own)."""
    seconds: float = field(default=0.0, compare=False)

    @property
    def key(self) -> str:
        return f"{self.dataset}-{self.name}"

    @property
    def out(self) -> Path:
        return (OUT / "checkpoints" if self.shipped else SCRATCH) / self.key

    def command(self) -> list[str]:
        quiet = ["--quiet"] if self.argv[0] == "train" else []
        return ["budgetformer", *self.argv, "--out", str(self.out), *quiet]


def out_of(dataset: str, name: str) -> Path:
    return (OUT / "checkpoints" if name in (*SHIPPED, *SHIPPED_PRETRAINED) else SCRATCH) / f"{dataset}-{name}"


def plan(datasets: list[str]) -> list[Job]:
    """Every model of ``datasets``, in an order that respects warm starts."""
    return [job for ds in datasets for job in dataset_jobs(ds)]


def dataset_jobs(ds: str) -> list[Job]:
    r = RECIPES[ds]
    data = ["--data-dir", r.data_dir] if r.data_dir else []
    jobs: list[Job] = []

    def train(name: str, variant: str, groups, init: str | None = None, after=(), budget=None) -> None:
        argv = ["train", "--dataset", ds, *data, "--variant", variant]
        if init:
            argv += ["--init", str(out_of(ds, init))]
        sets = [arg for group in (r.sets, *groups) for s in group for arg in ("--set", s)]
        jobs.append(Job(ds, name, argv + sets, after, name in SHIPPED, budget))

    scratch = (r.dense_sets,)
    train("dense", "dense", scratch)
    dense = (f"{ds}-dense",)
    init, after = ("dense", dense) if r.budget_init else (None, ())
    train("budgetformer-paper", "budgetformer", (r.dense_sets, ("recipe=paper",), r.paper_sets), init, after)
    scratch = (r.dense_sets, r.budget_sets)
    train("budgetformer", "budgetformer", scratch, init, after)
    # the ablations as trained models: f_θ replaced by the full model's mean s (filled in when
    # budgetformer is done), g_φ replaced by the first k heads
    train("no-budget-net", "budgetformer", (*scratch, ("use_budget_net=false",)), init,
          after=(*after, f"{ds}-budgetformer"))
    train("no-head-scorer", "budgetformer", (*scratch, ("head_choice=uniform",)), init, after)
    for name, variant, extra in r.extra:
        train(name, variant, (extra,))
    # gates on the pooled embeddings (nested in every layer), spelt out: earlier bba checkpoints
    # gated on each layer's input under the same command
    train("bba", "bba", (r.warm_sets, r.bba_sets, ("gate_source=embedding",)), init="dense", after=dense)
    for b in TABLE_BUDGETS:
        train(f"static-{b:g}", "bba", (r.warm_sets, ("gate_input=false", f"train_budget={b:g}")),
              init="dense", after=dense, budget=b)
    jobs.append(Job(ds, "posthoc", ["prune", "--checkpoint", str(out_of(ds, "dense")), *data], dense))
    for b in TABLE_BUDGETS:
        train(f"recovery-{b:g}", "bba", (("epochs=1", "gate_input=false", f"train_budget={b:g}", "freeze_gates=true"),),
              init="posthoc", after=(f"{ds}-posthoc",), budget=b)
    for m in r.pretrained:
        after = () if m.init is None else (f"{ds}-{m.init}",)
        if m.prune:
            jobs.append(Job(ds, m.name, ["prune", "--checkpoint", str(out_of(ds, m.init)), *data], after))
            continue
        start = ["--backbone", "minilm-l6"] if m.init is None else ["--init", str(out_of(ds, m.init))]
        sets = [arg for s in m.sets for arg in ("--set", s)]
        argv = ["train", "--dataset", ds, *data, "--variant", m.variant, *start, *sets]
        jobs.append(Job(ds, m.name, argv, after, m.name in SHIPPED_PRETRAINED, m.budget))
    return jobs


def select(jobs: list[Job], patterns: list[str] | None) -> list[Job]:
    """The jobs whose model name matches one of ``patterns`` (shell-style, e.g. ``static-*``);
    all of them for None. A selected job starting from one that is not selected starts from its
    checkpoint as it is (which must be there)."""
    if not patterns:
        return jobs
    chosen = [j for j in jobs if any(fnmatch.fnmatchcase(j.name, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"no model matches {patterns}")
    keys = {j.key for j in chosen}
    by_key = {j.key: j for j in jobs}
    for j in chosen:
        for a in j.after:
            if a not in keys and not (ROOT / by_key[a].out / "config.json").is_file():
                raise SystemExit(f"{j.key} starts from {a}, which is neither selected nor built")
    return [dataclasses.replace(j, after=tuple(a for a in j.after if a in keys)) for j in chosen]


def resolve(job: Job) -> Job:
    """Fill in what depends on finished jobs: the no-f_θ ablation's fixed budget."""
    if job.name == "no-budget-net":
        history = json.loads((ROOT / out_of(job.dataset, "budgetformer") / "history.json").read_text())
        s = history[-1]["val_mean_budget"]  # the full model's mean s on the validation split
        job.argv = [*job.argv, "--set", f"fixed_budget={s:.3f}"]
    return job


def is_current(job: Job, command: str) -> bool:
    """True when ``job.out`` holds a checkpoint made by ``command`` with today's tokenizer ids."""
    from tokenizers import Tokenizer

    from .tokenizer import is_canonical

    try:
        config = json.loads((ROOT / job.out / "config.json").read_text())
        tokenizer = Tokenizer.from_file(str(ROOT / job.out / "tokenizer.json"))
    except Exception:  # missing or unreadable: not current
        return False
    recorded = config.get("command") or ""
    return _without_quiet(recorded) == _without_quiet(command) and is_canonical(tokenizer)


def _without_quiet(command: str) -> list[str]:
    """A recorded command's arguments less ``--quiet`` (which changes what is printed, not the model)."""
    return [a for a in shlex.split(command) if a != "--quiet"]


def run_job(job: Job, force: bool = False) -> tuple[Job, bool]:
    """Run one job in a one-thread subprocess unless it is current (and not ``force``d).

    Returns the job and whether it ran."""
    job = resolve(job)
    command = shlex.join(job.command())
    if not force and is_current(job, command):
        print(f"= {job.key}: unchanged", flush=True)
        return job, False
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    # --force: a stale checkpoint is replaced on purpose (the recorded command leaves the flag out)
    argv = [*job.command()[1:], "--force"]
    state = resumable(job, command)
    if state is not None:  # an interrupted run of the same command: continue it
        argv = ["train", "--resume", str(state), "--quiet"]
    print(f"> {job.key}: {command}{' (resumed)' if state else ''}", flush=True)
    done = subprocess.run([sys.executable, "-m", "budgetformer_core.cli", *argv], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{job.key} failed:\n{done.stderr[-2000:]}")
    job.seconds = time.perf_counter() - t0
    print(f"< {job.key}: {job.seconds:.0f} s", flush=True)
    record_time(job.key, job.seconds, resumed=state is not None)
    return job, True


def resumable(job: Job, command: str) -> Path | None:
    """The saved state of an interrupted run of ``command`` (``train``'s ``<out>.resume``), if any."""
    from .train import resume_dir

    state = ROOT / resume_dir(job.out)
    try:
        recorded = json.loads((state / "run.json").read_text()).get("command") or ""
    except (OSError, ValueError, AttributeError):
        return None
    return resume_dir(job.out) if _without_quiet(recorded) == _without_quiet(command) else None


TIMES = OUT / "results" / "run_times.csv"
"""Wall time of every run that made a shipped model or a baseline, as the rebuild last ran it."""


_TIMES_LOCK = threading.Lock()


def record_time(key: str, seconds: float, resumed: bool = False) -> None:
    """Set ``key``'s row of :data:`TIMES` (one-thread worker; a resumed run's time is the part after the stop)."""
    with _TIMES_LOCK:  # jobs finish on several threads
        _record_time(ROOT / TIMES, key, seconds, resumed)


def _record_time(path: Path, key: str, seconds: float, resumed: bool) -> None:
    rows = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=["model", "seconds", "threads", "resumed"])
    rows = rows[rows["model"] != key]
    rows = pd.concat([rows, pd.DataFrame([{"model": key, "seconds": round(seconds), "threads": 1,
                                           "resumed": resumed}])], ignore_index=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows.sort_values("model").to_csv(path, index=False)


def run_all(jobs: list[Job], workers: int, force: bool = False) -> list[Job]:
    """Run the jobs on ``workers`` parallel workers, each job after those it depends on; a job
    whose source was rebuilt is rebuilt too (``force``: every job)."""
    by_key = {j.key: j for j in jobs}
    unknown = sorted({a for j in jobs for a in j.after} - set(by_key))
    if unknown:
        raise RuntimeError(f"cannot order the jobs: they start from {unknown}, which are not among them")
    order = TopologicalSorter({j.key: j.after for j in jobs})
    try:
        order.prepare()
    except CycleError as e:
        raise RuntimeError(f"cannot order the jobs {e.args[1]}") from e
    finished, rebuilt, running = {}, set(), {}
    with ThreadPoolExecutor(workers) as pool:
        while order.is_active():
            for key in order.get_ready():
                stale = force or any(a in rebuilt for a in by_key[key].after)
                running[pool.submit(run_job, by_key[key], stale)] = key
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                key = running.pop(future)
                job, ran = future.result()
                finished[key] = job
                if ran:
                    rebuilt.add(key)
                order.done(key)
    return [finished[j.key] for j in jobs]


# --------------------------------------------------------------------------- evaluation


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def evaluate_model(dataset: str, name: str, path: str, budget: float | None, data_dir: str | None,
                   per_example_path: str | None) -> list[dict]:
    """Rows of ``sweeps.csv`` for one model, without latency (run in a one-thread worker process;
    :func:`time_dataset` times them afterwards, alone)."""
    import torch

    from .budget import Control
    from .checkpoint import load_checkpoint
    from .data import load_dataset
    from .infer import evaluate
    from .tokenizer import encode

    ckpt = load_checkpoint(ROOT / path)
    split = load_dataset(dataset, data_dir, seed=ckpt.meta.get("split_seed", 0)).split("test")
    ids, _ = encode(ckpt.tokenizer, split.texts, ckpt.config.max_len)
    variant = ckpt.config.variant
    sweeps = (variant == "bba" and budget is None) or variant == "budgetformer"
    points: list[float | None] = [budget] if budget is not None else [None]
    if sweeps:
        points += list(PRETRAINED_SWEEP if ckpt.meta.get("backbone") else SWEEP_BUDGETS)
    out = []
    with torch.inference_mode():
        for b in points:
            control = Control(budget=b) if b is not None and variant != "dense" else None
            ev = evaluate(ckpt.model, ids, split.labels, control)
            if b is None and per_example_path:
                frame = ev.to_frame([len(x) for x in ids])
                frame.round(6).to_parquet(ROOT / per_example_path, index=False)
            out.append({
                "dataset": dataset, "model": name, "variant": variant,
                "budget": "own" if b is None else f"{b:g}",
                "accuracy": ev.accuracy, "macro_f1": ev.macro_f1, "n": ev.n,
                "mean_s": ev.mean_budget, "heads_fraction": ev.mean_heads_fraction,
                "attention_cost_estimated": ev.attention_cost_estimated, "flops_ratio": ev.flops_ratio,
                **accuracy_by_need(ev, split.needed_heads),
            })
    return out


TEXT_BASELINE = "tfidf-lr"
"""The row of sweeps.csv for TF-IDF + logistic regression (no checkpoint, not timed)."""


def text_baseline(dataset: str, data_dir: str | None) -> dict:
    """The row of sweeps.csv for TF-IDF + logistic regression trained on the dataset's training
    split (the rows the dense models train on) and scored on its test split: word 1- and
    2-grams seen in at least two texts, sublinear term frequency, L2-regularised logistic
    regression (C = 10, lbfgs), one model for all classes. No heads: its cost columns are empty."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    from .data import load_dataset

    data = load_dataset(dataset, data_dir, seed=0)
    train, test = data.split("train"), data.split("test")
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    classifier = LogisticRegression(C=10.0, max_iter=2000).fit(vectorizer.fit_transform(train.texts), train.labels)
    predicted = classifier.predict(vectorizer.transform(test.texts))
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


def evaluate_all(jobs: list[Job], workers: int) -> pd.DataFrame:
    """Accuracy rows of every job, on ``workers`` parallel one-thread processes (no latency)."""
    results = OUT / "results"
    (ROOT / results / "per_example").mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(workers, initializer=_one_thread) as pool:
        futures = []
        for job in jobs:
            per_example = str(results / "per_example" / f"{job.key}.parquet") if job.shipped else None
            futures.append(pool.submit(evaluate_model, job.dataset, job.name, str(job.out), job.budget,
                                       RECIPES[job.dataset].data_dir, per_example))
        rows = [row for f in futures for row in f.result()]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- timing


def time_dataset(dataset: str, rows: pd.DataFrame, jobs: list[Job]) -> pd.DataFrame:
    """``rows`` (one dataset's rows of sweeps.csv) with the columns of :data:`LATENCY_COLUMNS`.

    Every operating point of the rows (a model at a budget) and every dense reference is timed
    in the same interleaved rounds by :func:`budgetformer_core.latency.time_points` on the same
    test texts: at batch 1 over :data:`~budgetformer_core.latency.TIMED_INPUTS` texts, at batch 32
    at the budgets of :data:`~budgetformer_core.latency.BATCH_BUDGETS` and the own points. A row
    whose checkpoint is not on this machine gets no latency (NaN) and a line on stderr.
    """
    from .checkpoint import load_checkpoint
    from .data import load_dataset
    from .latency import BATCH, BATCH_BUDGETS, Point, time_points, timed_rows
    from .tokenizer import encode

    by_name = {j.name: j for j in jobs if j.dataset == dataset}
    rows = rows.reset_index(drop=True).copy()
    rows["dense_model"] = [dense_reference(dataset, m) for m in rows["model"]]
    names = sorted(set(rows["model"]) - {TEXT_BASELINE} | set(rows["dense_model"]))
    missing = {n for n in names if n not in by_name or not (ROOT / by_name[n].out / "config.json").is_file()}
    for n in sorted(missing):
        print(f"no latency for {dataset}-{n}: its checkpoint is not on this machine", file=sys.stderr)
    missing.add(TEXT_BASELINE)  # no heads to time
    ckpts = {n: load_checkpoint(ROOT / by_name[n].out) for n in names if n not in missing}
    any_ckpt = next(iter(ckpts.values()), None)
    if any_ckpt is None:
        return rows.assign(**{c: np.nan for c in LATENCY_COLUMNS if c != "dense_model"})
    data_dir = RECIPES[dataset].data_dir
    split = load_dataset(dataset, data_dir and ROOT / data_dir, seed=any_ckpt.meta.get("split_seed", 0)).split("test")
    picked = timed_rows(len(split.texts))
    texts_b1 = [split.texts[i] for i in picked]
    texts_b32 = split.texts[:BATCH]

    def point(model: str, budget: str, texts: list[str]) -> Point:
        ckpt = ckpts[model]
        return Point(ckpt.model, None if budget == "own" else float(budget),
                     encode(ckpt.tokenizer, texts, ckpt.config.max_len)[0])

    def key(model: str, budget: str) -> str:
        return f"{model}@{budget}"

    timed = rows[~rows["model"].isin(missing) & ~rows["dense_model"].isin(missing)]
    refs = sorted(set(timed["dense_model"]))
    b1 = {key(m, b): point(m, b, texts_b1) for m, b in zip(timed["model"], timed["budget"], strict=True)}
    b1 |= {key(r, "own"): point(r, "own", texts_b1) for r in refs}
    batched = timed[(timed["budget"] == "own") | pd.to_numeric(timed["budget"], errors="coerce").isin(BATCH_BUDGETS)]
    b32 = {key(m, b): point(m, b, texts_b32) for m, b in zip(batched["model"], batched["budget"], strict=True)}
    b32 |= {key(r, "own"): point(r, "own", texts_b32) for r in refs}
    print(f"timing {dataset}: {len(b1)} points at batch 1, {len(b32)} at batch {BATCH}", flush=True)
    one, many = time_points(b1), time_points(b32, batch=True)

    def column(latencies, what: str, ref: bool = False) -> list[float]:
        out = []
        for m, b, r in zip(rows["model"], rows["budget"], rows["dense_model"], strict=True):
            lat = latencies.get(key(r, "own") if ref else key(m, b))
            out.append(np.nan if lat is None or key(m, b) not in latencies else getattr(lat, what))
        return out

    rows["latency_ms"] = column(one, "ms")
    rows["latency_iqr_ms"] = column(one, "iqr_ms")
    rows["dense_latency_ms"] = column(one, "ms", ref=True)
    rows["latency_b32_ms"] = column(many, "ms")
    rows["dense_latency_b32_ms"] = column(many, "ms", ref=True)
    return with_speedups(rows)


def with_speedups(rows: pd.DataFrame) -> pd.DataFrame:
    """Latencies rounded as sweeps.csv stores them, and ``speedup_b1`` / ``speedup_b32`` the dense
    reference's latency over the row's, computed from those stored values (so the identity
    holds in the file)."""
    rows = rows.copy()
    for column in ("latency_ms", "latency_iqr_ms", "dense_latency_ms", "latency_b32_ms", "dense_latency_b32_ms"):
        rows[column] = rows[column].astype(float).round(6)
    rows["speedup_b1"] = rows["dense_latency_ms"] / rows["latency_ms"]
    rows["speedup_b32"] = rows["dense_latency_b32_ms"] / rows["latency_b32_ms"]
    return rows


def time_all(frame: pd.DataFrame, jobs: list[Job]) -> pd.DataFrame:
    """:func:`time_dataset` for each dataset of ``frame``, one after the other in this process, on
    one thread, after every other stage is done (nothing of ours runs beside it)."""
    from .timing import machine_info

    _one_thread()
    parts = [time_dataset(ds, part, jobs) for ds, part in frame.groupby("dataset", sort=False)]
    timed = pd.concat(parts, ignore_index=True)
    timed["machine"] = machine_info(1).cpu_model
    return timed


CHECK_MODELS = ("budgetformer", "bba")
"""The models :func:`live_check` re-measures by default (with their dense reference)."""
CHECK_BUDGETS = ("own", "0.25", "0.5", "0.75", "1")
"""Their points re-measured: the own operating point and the budgets timed at batch 32 too."""
CHECK_TOLERANCE = 0.25
"""A live speed-up agrees with the shipped one when their ratio is within 1 ± this."""


def live_check(frame: pd.DataFrame, datasets: list[str], models=CHECK_MODELS,
               budgets=CHECK_BUDGETS) -> pd.DataFrame:
    """Time ``models`` of ``datasets`` again now, exactly as the timing phase did
    (:func:`time_dataset`: the same test texts, the same rounds, against the same dense
    reference), and set the result beside the shipped rows of ``frame`` (sweeps.csv).

    Returns one row per dataset, model and budget: the shipped and live latency (ms per input,
    batch 1) and speed-up over the dense reference at batch 1 and batch 32, and ``ratio`` =
    live / shipped speed-up at batch 1. Absolute latencies follow the machine; the speed-ups,
    both taken against a dense model timed in the same rounds, should not.
    """
    chosen = frame[frame["dataset"].isin(datasets) & frame["model"].isin(models) & frame["budget"].isin(budgets)]
    if chosen.empty:
        raise ValueError(f"sweeps.csv has no rows of {', '.join(models)} on {', '.join(datasets)}")
    keys = ["dataset", "model", "budget"]
    parts = []
    for ds, rows in chosen.groupby("dataset", sort=False):
        _one_thread()
        live = time_dataset(ds, rows[keys], plan([ds]))
        parts.append(rows[keys + ["latency_ms", "speedup_b1", "speedup_b32"]].merge(
            live[keys + ["latency_ms", "speedup_b1", "speedup_b32"]], on=keys, suffixes=("", "_live")))
    out = pd.concat(parts, ignore_index=True)
    out["ratio"] = out["speedup_b1_live"] / out["speedup_b1"]
    return out


def agrees(check: pd.DataFrame, tolerance: float = CHECK_TOLERANCE) -> pd.Series:
    """Per row of :func:`live_check`: is the live speed-up within ``tolerance`` of the shipped one?"""
    return (check["ratio"] - 1).abs() <= tolerance


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


# --------------------------------------------------------------------------- manifest


def slice_accuracy(path: Path, data_dir: str | None) -> float:
    from .checkpoint import load_checkpoint
    from .data import load_dataset
    from .infer import evaluate_split

    ckpt = load_checkpoint(ROOT / path)
    split = load_dataset(ckpt.meta["dataset"], data_dir, seed=ckpt.meta.get("split_seed", 0)).split("test")
    return evaluate_split(ckpt, split.head(SLICE)).accuracy


def write_manifest(jobs: list[Job], timing: dict | None = None) -> dict:
    """precomputed/manifest.json: every file with sha256 and size, every run with its command, and
    how latency was timed (``timing``: this run's entries by dataset, merged into the old ones).

    A run whose checkpoint files and command are those the old manifest lists keeps its slice
    accuracy (the same files give the same predictions); the others are evaluated afresh."""
    import platform

    import safetensors
    import tokenizers
    import torch

    from .checkpoint import file_sha256
    from .timing import machine_info

    path = ROOT / OUT / "manifest.json"
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    files = {}
    for file in sorted((ROOT / OUT).rglob("*")):
        rel = file.relative_to(ROOT).as_posix()
        if file.is_file() and rel != f"{OUT.as_posix()}/manifest.json":
            files[rel] = {"sha256": file_sha256(file), "bytes": file.stat().st_size}
    runs = {}
    for job in jobs:
        if not job.shipped or not (ROOT / job.out / "config.json").is_file():
            continue
        config = json.loads((ROOT / job.out / "config.json").read_text())
        before = old.get("runs", {}).get(job.key, {})
        mine = {k: v for k, v in files.items() if k.startswith(f"{job.out.as_posix()}/")}
        same = bool(mine) and before.get("command") == config.get("command") and all(
            old.get("files", {}).get(k) == v for k, v in mine.items())
        accuracy = before["slice_accuracy"] if same and "slice_accuracy" in before else round(
            slice_accuracy(job.out, RECIPES[job.dataset].data_dir), 6)
        runs[job.key] = {
            "path": str(job.out), "command": config.get("command"), "seed": config.get("train", {}).get("seed", 0),
            "split_seed": config.get("split_seed", 0), "test_accuracy": config.get("test", {}).get("accuracy"),
            "slice_rows": SLICE, "slice_accuracy": accuracy,
        }
    manifest = {
        "made_by": "make precompute (python -m budgetformer_core.precompute)",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__,
                     "numpy": np.__version__, "pandas": pd.__version__},
        "machine": machine_info(1).cpu_model,
        "timing": {**old.get("timing", {}), **(timing or {})},
        "total_bytes": sum(f["bytes"] for f in files.values()),
        "runs": runs,
        "files": files,
    }
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def retime(frame: pd.DataFrame, datasets: list[str]) -> tuple[pd.DataFrame, dict]:
    """``frame`` (all of sweeps.csv) with the rows of ``datasets`` timed again (:func:`time_all`),
    and the manifest's timing entries of those datasets."""
    from .latency import BATCH, CLOCK, ROUNDS, TIMED_INPUTS
    from .timing import machine_info

    chosen = frame["dataset"].isin(datasets)
    entries = {}
    parts = []
    for ds in [d for d in datasets if (frame["dataset"] == d).any()]:
        t0 = time.perf_counter()
        load = machine_info(1).load_average
        parts.append(time_all(frame[frame["dataset"] == ds], plan([ds])))
        entries[ds] = {"clock": CLOCK, "threads": 1, "rounds": ROUNDS, "timed_inputs": TIMED_INPUTS,
                       "batch": BATCH, "load_average": load, "seconds": round(time.perf_counter() - t0, 1),
                       "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    timed = pd.concat([frame[~chosen], *parts], ignore_index=True)
    order = [c for c in frame.columns if c not in LATENCY_COLUMNS and c != "machine"]
    first = [c for c in order if not c.startswith("acc_need")]
    need = [c for c in order if c.startswith("acc_need")]
    return timed.reindex(columns=first + [*LATENCY_COLUMNS, "machine"] + need), entries


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m budgetformer_core.precompute", description=__doc__.split("\n")[0])
    p.add_argument("--datasets", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--workers", type=int, default=2, help="parallel one-thread jobs")
    p.add_argument("--skip-train", action="store_true", help="only evaluate and write the manifest")
    p.add_argument("--force", action="store_true", help="retrain every model, even unchanged ones")
    p.add_argument("--models", nargs="+", help="only these models (names or patterns, e.g. budgetformer* bba; "
                   f"{TEXT_BASELINE}: TF-IDF + logistic regression); the other rows of sweeps.csv are kept")
    p.add_argument("--skip-timing", action="store_true",
                   help="leave the latency columns of the rows evaluated now empty (time them later with --retime)")
    p.add_argument("--retime", action="store_true",
                   help="only time the rows of sweeps.csv of these datasets again (no training, no accuracy) "
                   "and rewrite their latency columns and the manifest")
    args = p.parse_args(argv)
    if args.retime and (args.models or args.force or args.skip_train or args.skip_timing):
        p.error("--retime times whole datasets: it takes only --datasets")
    datasets = [d for d in args.datasets if RECIPES[d].data_dir is None or (ROOT / RECIPES[d].data_dir).is_dir()]
    for d in set(args.datasets) - set(datasets):
        print(f"skipping {d}: {RECIPES[d].data_dir} is not there", file=sys.stderr)
    results = ROOT / OUT / "results"
    path = results / "sweeps.csv"
    t0 = time.perf_counter()
    if args.retime:
        if not path.is_file():
            p.error(f"{path.relative_to(ROOT)} is not there: run the whole precompute first")
        sweeps, timing = retime(pd.read_csv(path, dtype={"budget": str}), datasets)
        sweeps.round(6).to_csv(path, index=False)
        write_manifest(plan(list(RECIPES)), timing)
        print(f"re-timed {', '.join(timing) or 'nothing'} in {time.perf_counter() - t0:.0f} s (wall)", flush=True)
        return 0
    # TF-IDF + LR is a row of its own (no checkpoint): made when no --models is given or one matches it
    baseline = not args.models or any(fnmatch.fnmatchcase(TEXT_BASELINE, m) for m in args.models)
    models = [m for m in args.models or () if m != TEXT_BASELINE]
    jobs = select(plan(datasets), models or None) if models or not args.models else []
    if not args.skip_train:
        jobs = run_all(jobs, args.workers, args.force)
    print(f"training done in {time.perf_counter() - t0:.0f} s; evaluating", flush=True)
    history = ROOT / OUT / "results" / "history"
    history.mkdir(parents=True, exist_ok=True)
    for job in jobs:  # shipped checkpoints hold their own history.json
        if not job.shipped:
            (history / f"{job.key}.json").write_bytes((ROOT / job.out / "history.json").read_bytes())
    sweeps = pd.concat([evaluate_all(jobs, args.workers),
                        pd.DataFrame([text_baseline(d, RECIPES[d].data_dir) for d in datasets if baseline])],
                       ignore_index=True)
    if path.is_file():  # keep the rows of the models not rebuilt now
        old = pd.read_csv(path, dtype={"budget": str})
        changes = accuracy_changes(old, sweeps)
        print("test accuracy (%) against the results this run replaces; largest_change: over all budgets")
        print(changes.round(2).replace(-0.0, 0.0).to_string(index=False))  # no "-0.0"
        print(f"largest change: {changes['largest_change'].max():.2f} points", flush=True)
        rebuilt = old["dataset"].isin(datasets)
        if args.models:
            rebuilt &= (old["dataset"] + "-" + old["model"]).isin({j.key for j in jobs}) | (
                (old["model"] == TEXT_BASELINE) & baseline)
        sweeps = pd.concat([old[~rebuilt], sweeps], ignore_index=True)
    # timing, a phase of its own: every model of each dataset rebuilt now and its dense reference
    print(f"evaluation done in {time.perf_counter() - t0:.0f} s; {'no ' if args.skip_timing else ''}timing", flush=True)
    sweeps, timing = (sweeps, {}) if args.skip_timing else retime(sweeps, sorted({j.dataset for j in jobs}))
    sweeps.round(6).to_csv(path, index=False)
    write_manifest(plan(list(RECIPES)), timing)
    print(f"done in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
