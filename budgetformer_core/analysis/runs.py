"""An analysis folder of ``budgetformer analyze``, and the engines that fill it.

:func:`analyze_corpus` writes ``run.json`` (what is analysed, written first: a rerun with other
settings is refused), has an engine write the records of :func:`~budgetformer_core.analysis.corpus.records`
as ``part-00000.parquet``, …, and once every row is done writes ``summary.json``
(:func:`~budgetformer_core.analysis.corpus.summarize`, with the run's settings and throughput):

* :func:`run_local` (the default): this process, a progress bar, one shard per batch written
  atomically (a temporary file, then a rename). A run that was killed continues where it
  stopped: a shard already there is whole, and is skipped, never written again;
* :func:`budgetformer_core.analysis.ray_engine.run_ray`: Ray Data, one model replica per actor,
  on this machine or a cluster.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..io.checkpoint import Checkpoint
from ..io.files import CheckpointError, file_sha256, json_safe
from ..io.outputs import write_atomic
from ..model.budget import Control
from .corpus import SHARD, SHARD_PATTERN, Corpus, read_records, records, summarize

RUN, SUMMARY = "run.json", "summary.json"
"""What analysis is in a folder (written first), and its figures (written last, once every row is done)."""
TEMPORARY = re.compile(r"\..+\.tmp|\.ray-[0-9a-f]+")
"""A shard or JSON file being written (:func:`~budgetformer_core.io.outputs.write_atomic`), or a Ray
run's staging folder: what a killed run leaves, removed when the folder is written again."""
BATCH_SIZE = 1024
"""Rows per batch, and per shard of the local engine."""


def check_out(out: str | Path) -> Path:
    """Raise :class:`CheckpointError` unless ``out`` may hold an analysis: a new or empty folder,
    or one holding only an analysis's files (to resume or to find complete)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CheckpointError(f"--out {out} is a file, not a folder")
    if out.is_dir():
        names = [p.name for p in out.iterdir() if not TEMPORARY.fullmatch(p.name)]
        other = sorted(n for n in names if n not in (RUN, SUMMARY) and not SHARD_PATTERN.fullmatch(n))
        if other or (names and RUN not in names):
            raise CheckpointError(f"--out {out} is a folder holding other files ({', '.join((other or names)[:3])}); "
                                  "choose a new or empty folder, or an analysis folder to resume")
    return out


def run_record(ckpt: Checkpoint, corpus: Corpus, budget: float | None, batch_size: int) -> dict:
    """What ``run.json`` says is analysed: model, data (and a digest of its rows), budget and
    batch size. A folder is resumed only by a run whose record is the same."""
    digest = hashlib.sha256(pd.util.hash_pandas_object(corpus.frame, index=False).to_numpy().tobytes()).hexdigest()
    return {"model": ckpt.path.name if ckpt.path else None, "checkpoint": str(ckpt.path),
            "model_sha256": file_sha256(ckpt.path / "model.safetensors"), "dataset": corpus.name,
            "split": corpus.split, "rows": len(corpus.frame), "skipped": corpus.skipped, "input_sha256": digest,
            "budget": budget, "batch_size": batch_size}


def start_run(out: Path, run: dict) -> None:
    """Write ``run.json`` in a new folder, or check that the folder's is the same run's (a
    stranded temporary file of a killed run is removed).

    Raises:
        CheckpointError: the folder holds another analysis.
    """
    check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN
    if path.is_file():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"--out {out}: {RUN} cannot be read ({e}); choose a new folder") from None
        before = before if isinstance(before, dict) else {}
        differ = [k for k in run if k != "checkpoint" and before.get(k) != run[k]]
        if differ:
            raise CheckpointError(f"--out {out} holds an analysis of another run ({', '.join(differ)} differ); "
                                  "choose a new folder, or rerun with its settings to resume it")
    for leftover in (p for p in out.iterdir() if TEMPORARY.fullmatch(p.name)):
        if leftover.is_dir() and not leftover.is_symlink():  # a Ray run's staging folder
            shutil.rmtree(leftover)
        else:
            leftover.unlink()
    if not path.is_file():
        write_atomic(path, json.dumps(json_safe(run), indent=1) + "\n")


def shard_index(path: Path) -> np.ndarray | None:
    """The ``index`` column of a shard already written (None when there is none)."""
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["index"]).column("index").to_numpy()


def run_local(ckpt: Checkpoint, corpus: Corpus, out: Path, control: Control | None, batch_size: int,
              workers: int | None = None, progress: bool = True) -> int:
    """Write the records shard by shard (rows ``[i·batch_size, (i+1)·batch_size)`` to
    ``part-{i:05d}.parquet``), skipping the shards already there; ``workers``: torch threads
    (None: torch's default). Returns the rows analysed now.

    Raises:
        CheckpointError: a shard there holds other rows than its share (another run's).
    """
    from tqdm.auto import tqdm

    n = len(corpus.frame)
    starts = range(0, n, batch_size)
    threads = torch.get_num_threads()
    if workers:
        torch.set_num_threads(workers)
    done = 0
    try:
        bar = tqdm(total=n, unit="text", desc="analyze", disable=not progress, leave=False)
        for shard, start in enumerate(starts):
            part = corpus.frame.iloc[start : start + batch_size]
            path = out / SHARD.format(shard)
            have = shard_index(path)
            if have is None:
                buffer = io.BytesIO()
                records(ckpt, part, control).to_parquet(buffer, index=False)
                write_atomic(path, buffer.getvalue())  # a kill leaves no half shard
                done += len(part)
            elif not np.array_equal(have, part["index"].to_numpy()):
                raise CheckpointError(f"{path} holds other rows than rows {start}–{start + len(part) - 1} of the "
                                      "input: the folder is not this run's; choose a new folder")
            bar.update(len(part))
        bar.close()
    finally:
        torch.set_num_threads(threads)
    return done


def analyze_corpus(ckpt: Checkpoint, corpus: Corpus, out: str | Path, engine: str = "local",
                   budget: float | None = None, batch_size: int = BATCH_SIZE, workers: int | None = None,
                   address: str | None = None, progress: bool = True) -> dict:
    """Analyse every row of ``corpus`` into ``out`` with ``engine`` (``local`` or ``ray``) and
    write ``summary.json``; return it. A folder already complete is left as it is (its summary
    is returned); an interrupted local run is resumed.

    Raises:
        CheckpointError: ``out`` holds other files or another analysis.
    """
    out = Path(out)
    run = run_record(ckpt, corpus, budget, batch_size)
    start_run(out, run)
    if (out / SUMMARY).is_file():
        return {**json.loads((out / SUMMARY).read_text(encoding="utf-8")), "note": "already complete: nothing to do"}
    control = None if budget is None else Control(budget=budget)
    began = time.perf_counter()
    if engine == "ray":
        from .ray_engine import run_ray

        if any(SHARD_PATTERN.fullmatch(p.name) for p in out.iterdir()):
            raise CheckpointError(f"--out {out} holds the shards of an unfinished run: resume it with --engine "
                                  "local, or choose a new folder for a Ray run")
        workers = run_ray(ckpt.path, corpus.frame, out, budget, batch_size, workers, address)
        analysed = len(corpus.frame)
    else:
        analysed = run_local(ckpt, corpus, out, control, batch_size, workers, progress)
    seconds = time.perf_counter() - began
    shards = sum(SHARD_PATTERN.fullmatch(p.name) is not None for p in out.iterdir())
    summary = {**{k: v for k, v in run.items() if k != "input_sha256"}, "engine": engine,
               "workers": workers or torch.get_num_threads(), "shards": shards, "analysed_now": analysed,
               "seconds": round(seconds, 2), "texts_per_second": round(analysed / seconds, 1) if seconds > 0 else None,
               **summarize(read_records(out), ckpt.config.n_heads)}
    write_atomic(out / SUMMARY, json.dumps(json_safe(summary), indent=1) + "\n")
    return summary
