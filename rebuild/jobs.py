"""The training jobs of the rebuild: one ``budgetformer`` command per model, run in order.

:func:`plan` turns :data:`~rebuild.recipes.RECIPES` into jobs; :func:`run_all` runs them on
parallel one-thread workers, each after the jobs it starts from, skipping a job whose checkpoint
already records an equivalent command (:func:`is_current`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import pandas as pd

from budgetformer_core.config import ModelConfig, TrainConfig
from budgetformer_core.overrides import apply_overrides, parse_overrides
from budgetformer_core.shipped import CHECKPOINTS, PRECOMPUTED, dense_reference, model_name, relative, run_times_csv

from .recipes import DATA_ROOT, RECIPES, SHIPPED, SHIPPED_PRETRAINED, TABLE_BUDGETS, Overrides, data_dir

ROOT = Path(__file__).resolve().parents[1]
"""The project root: commands run here and record paths relative to it."""
OUT = relative(PRECOMPUTED)
SCRATCH = Path("runs") / "precompute"
"""Where the per-budget baselines go (only their results ship)."""
TIMES = relative(run_times_csv())
"""Wall time of every run that made a shipped model or a baseline, as the rebuild last ran it."""


@dataclass
class Job:
    """One model: the ``budgetformer`` command that makes it and the jobs it starts from."""

    dataset: str
    name: str
    argv: list[str]
    """The command's arguments up to its ``--set`` overrides (``train --dataset … --variant …``)."""
    after: tuple[str, ...] = ()
    shipped: bool = False
    budget: float | None = None
    """The budget a per-budget specialist was made for (None: any budget / its own)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Typed config overrides, passed as ``--set key=value``."""
    stage: bool = False
    """A first stage (:attr:`rebuild.recipes.Pretrained.stage`)."""
    seconds: float = field(default=0.0, compare=False)

    @property
    def key(self) -> str:
        return f"{self.dataset}-{self.name}"

    @property
    def out(self) -> Path:
        return out_of(self.dataset, self.name)

    def command(self) -> list[str]:
        quiet = ["--quiet"] if self.argv[0] == "train" else []
        return ["budgetformer", *self.argv, *set_args(self.overrides), "--out", str(self.out), *quiet]


def set_args(overrides: Overrides) -> list[str]:
    """``--set key=value`` arguments for typed overrides (true/false for a bool)."""
    def text(value) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return [arg for key, value in overrides.items() for arg in ("--set", f"{key}={text(value)}")]


def out_of(dataset: str, name: str) -> Path:
    return (relative(CHECKPOINTS) if name in (*SHIPPED, *SHIPPED_PRETRAINED) else SCRATCH) / model_name(dataset, name)


def plan(datasets: list[str], data_root: str | Path = DATA_ROOT) -> list[Job]:
    """Every model of ``datasets``, in an order that respects warm starts."""
    return [job for ds in datasets for job in dataset_jobs(ds, data_root)]


def dataset_jobs(ds: str, data_root: str | Path = DATA_ROOT) -> list[Job]:
    r = RECIPES[ds]
    local = data_dir(ds, data_root)
    data = ["--data-dir", str(local)] if local else []
    jobs: list[Job] = []

    def job(name: str, argv: list[str], overrides: Overrides | None = None, after=(), budget=None,
            stage=False) -> None:
        overrides = dict(overrides or {})
        if argv[0] == "fit-budget":  # a typo or a wrong type fails here
            from budgetformer_core.train.fit import fit_settings  # torch: only for a recipe that fits budgets

            fit_settings(argv[argv.index("--method") + 1], overrides)
        else:
            apply_overrides(ModelConfig(), TrainConfig(), overrides)
        jobs.append(Job(ds, name, argv, tuple(after), name in (*SHIPPED, *SHIPPED_PRETRAINED), budget, overrides,
                        stage))

    def train(name: str, method: str, *groups: Overrides, init: str | None = None, after=(), budget=None) -> None:
        start = ["--init", str(out_of(ds, init))] if init else []
        merged = {k: v for group in (r.common, *groups) for k, v in group.items()}
        job(name, ["train", "--dataset", ds, *data, "--variant", method, *start], merged, after, budget)

    if r.from_scratch:  # the models trained from scratch, or warm-started from their dense one
        dense = (dense_reference(ds, "budgetformer", full=True),)  # what the models trained from scratch start from
        train("dense", "dense", r.scratch)
        init, after = ("dense", dense) if r.budget_init else (None, ())
        train("budgetformer-paper", "budgetformer", r.scratch, {"recipe": "paper"}, r.paper, init=init, after=after)
        train("budgetformer", "budgetformer", r.scratch, r.adaptive, init=init, after=after)
        # the ablations as trained models: f_θ replaced by the full model's mean s (filled in when
        # budgetformer is done), g_φ replaced by the first k heads
        train("no-budget-net", "budgetformer", r.scratch, r.adaptive, {"use_budget_net": False}, init=init,
              after=(*after, f"{ds}-budgetformer"))
        train("no-head-scorer", "budgetformer", r.scratch, r.adaptive, {"head_choice": "uniform"}, init=init,
              after=after)
        for extra in r.extra:
            train(extra.name, extra.method, extra.overrides)
        # gates on the pooled embeddings (nested in every layer), spelt out: earlier bba checkpoints
        # gated on each layer's input under the same command; a recipe's bba overrides may restate it
        train("bba", "bba", r.warm, {"gate_source": "embedding"}, r.bba, init="dense", after=dense)
        for b in TABLE_BUDGETS:
            train(f"static-{b:g}", "bba", r.warm, {"gate_input": False, "train_budget": b},
                  init="dense", after=dense, budget=b)
        job("posthoc", ["prune", "--checkpoint", str(out_of(ds, "dense")), *data], after=dense)
        for b in TABLE_BUDGETS:
            train(f"recovery-{b:g}", "bba", {"epochs": 1, "gate_input": False, "train_budget": b, "freeze_gates": True},
                  init="posthoc", after=(f"{ds}-posthoc",), budget=b)
    for m in r.pretrained:
        after = () if m.init is None else (f"{ds}-{m.init}",)
        if m.prune:
            job(m.name, ["prune", "--checkpoint", str(out_of(ds, m.init)), *data], after=after)
            continue
        if m.fit:
            job(m.name, ["fit-budget", "--checkpoint", str(out_of(ds, m.init)), "--dataset", ds, *data,
                         "--method", m.method], m.overrides, after)
            continue
        start = ["--backbone", "minilm-l6"] if m.init is None else ["--init", str(out_of(ds, m.init))]
        job(m.name, ["train", "--dataset", ds, *data, "--variant", m.method, *start], m.overrides, after, m.budget,
            m.stage)
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
        job.overrides = {**job.overrides, "fixed_budget": float(f"{s:.3f}")}
    return job


def meaning(command: str) -> tuple[list[str], dict[str, Any]]:
    """What a command makes: its arguments less ``--quiet`` (what is printed) and ``--data-dir``
    (where the data lies), and its ``--set`` overrides as typed values (a key's last value; a
    ``fit-budget`` command's as :func:`~budgetformer_core.train.fit.parse_fit_overrides` types them).

    Raises:
        ValueError: an override the configs do not know (a field that is gone).
    """
    args, sets, words = [], [], iter(shlex.split(command))
    for word in words:
        if word in ("--set", "--data-dir"):
            value = next(words, "")
            if word == "--set":
                sets.append(value)
        elif word != "--quiet":
            args.append(word)
    if args[1:2] == ["fit-budget"]:
        from budgetformer_core.train.fit import parse_fit_overrides

        return args, parse_fit_overrides(sets)
    return args, parse_overrides(sets)


def difference(recorded: str, command: str, config: dict | None = None) -> str | None:
    """How ``recorded`` makes another model than ``command`` does, in a few words; None: it does not.

    A value ``command`` sets that ``recorded`` left to its default is compared with the value the
    checkpoint's ``config`` (its config.json) holds, when given: setting a field to the value it
    already had makes the same model."""
    try:
        (was_args, was), (now_args, now) = meaning(recorded), meaning(command)
    except ValueError as e:
        return f"its command no longer parses ({e})"
    config = config or {}
    stored = {**config.get("train", {}), **config.get("model", {}), **config.get("distill", {})}
    was = {**{k: stored[k] for k in now if k not in was and k in stored}, **was}
    gone = [a for a in was_args if a not in now_args]
    added = [a for a in now_args if a not in was_args]
    changed = [f"{k}: {was.get(k, '-')} → {now.get(k, '-')}" for k in dict.fromkeys([*was, *now])
               if was.get(k, "-") != now.get(k, "-")]
    if was_args != now_args:  # other arguments, or the same in another order
        changed.insert(0, f"arguments {' '.join(gone) or '-'} → {' '.join(added) or '-'}")
    return "; ".join(changed) or None


def staleness(job: Job, command: str) -> str | None:
    """Why ``job.out`` does not hold the model ``command`` makes; None when it does (it is current).

    A checkpoint is current when its recorded command is equivalent (:func:`difference`) and,
    for a tokenizer trained here (not a pretrained encoder's), its ids are numbered canonically."""
    from tokenizers import Tokenizer

    from budgetformer_core.io.checkpoint import TOKENIZER_FROM_BASE
    from budgetformer_core.io.tokenizer import is_canonical

    try:
        config = json.loads((ROOT / job.out / "config.json").read_text())
        # (an adapter has no tokenizer of its own, nor has a fine-tune that keeps its backbone's: theirs)
        own = "adapter" not in config and config.get("tokenizer") != TOKENIZER_FROM_BASE
        tokenizer = Tokenizer.from_file(str(ROOT / job.out / "tokenizer.json")) if own else None
    except Exception:  # missing or unreadable
        return "missing"
    if tokenizer is not None and not config.get("backbone") and not is_canonical(tokenizer):
        return "its tokenizer's ids are not numbered canonically"
    return difference(config.get("command") or "", command, config)


def is_current(job: Job, command: str) -> bool:
    """True when ``job.out`` holds a checkpoint made by a command equivalent to ``command``."""
    return staleness(job, command) is None


NOT_NEEDED = "not needed"
"""How a first stage that need not be made is listed."""


def unneeded(job: Job, jobs: list[Job], force: bool = False) -> str | None:
    """Why a first stage that is not here need not be made: every job going on from it is current
    or a first stage that need not be made either (None: it is needed, or it is here, or it is
    no first stage)."""
    if force or not job.stage or (ROOT / job.out / "config.json").is_file():
        return None
    after = [j for j in jobs if job.key in j.after]
    if not after or not all(unneeded(j, jobs) or is_current(resolve(dataclasses.replace(j)), shlex.join(j.command()))
                            for j in after):
        return None
    return f"{NOT_NEEDED}: what goes on from it is current ({', '.join(j.key for j in after)})"


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
    from budgetformer_core.train.loop import resume_dir

    state = ROOT / resume_dir(job.out)
    try:
        recorded = json.loads((state / "run.json").read_text()).get("command") or ""
    except (OSError, ValueError, AttributeError):
        return None
    return resume_dir(job.out) if difference(recorded, command) is None else None


_TIMES_LOCK = threading.Lock()


def record_time(key: str, seconds: float, resumed: bool = False) -> None:
    """Set ``key``'s row of :data:`TIMES` (one-thread worker; a resumed run's time is the part after the stop)."""
    with _TIMES_LOCK:  # jobs finish on several threads
        path = ROOT / TIMES
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
                if why := unneeded(by_key[key], jobs, force):
                    print(f"= {key}: {why}", flush=True)
                    finished[key] = by_key[key]
                    order.done(key)
                    continue
                stale = force or any(a in rebuilt for a in by_key[key].after)
                running[pool.submit(run_job, by_key[key], stale)] = key
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                key = running.pop(future)
                job, ran = future.result()
                finished[key] = job
                if ran:
                    rebuilt.add(key)
                order.done(key)
    return [finished[j.key] for j in jobs]


def dry_run(jobs: list[Job], force: bool = False) -> list[tuple[Job, str]]:
    """What :func:`run_all` would do with ``jobs``, without running anything: per job ``current``,
    why it would be (re)built — missing, stale (and how), or starting from a rebuilt job — or
    why a first stage need not be made (:data:`NOT_NEEDED`)."""
    rebuilt: set[str] = set()
    out = []
    for job in jobs:  # plan order: a job comes after those it starts from
        sources = [a for a in job.after if a in rebuilt]
        try:
            resolved = resolve(dataclasses.replace(job))
            why = staleness(resolved, shlex.join(resolved.command()))
        except OSError:  # what it depends on is not built yet
            why = "missing" if not (ROOT / job.out / "config.json").is_file() else "waits for its source"
        if force:
            why = "forced"
        elif why is None and sources:
            why = f"rebuilt after {', '.join(sources)}"
        elif skip := unneeded(job, jobs):
            out.append((job, skip))
            continue
        if why is not None:
            rebuilt.add(job.key)
        out.append((job, "current" if why is None else why))
    return out
