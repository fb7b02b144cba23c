"""``budgetformer analyze --engine ray``: the records of :func:`~budgetformer_core.analysis.corpus.records`
computed by Ray Data, on this machine or on a Ray cluster.

The input rows go to Ray as pandas blocks of ``batch_size`` rows (``ray.data.from_pandas``);
``map_batches`` hands each block to one of a pool of ``workers`` actors of :class:`RecordMaker`,
each of which loads the model once and runs one torch thread on one CPU; ``write_parquet`` writes
the records into a staging folder inside ``--out``, whose files are then renamed ``part-00000.parquet``,
… in the order Ray numbered them. ``address`` joins a running cluster (``auto``: the one this
machine belongs to); without one, a local Ray instance with ``workers`` CPUs is started, and
stopped at the end.

On a cluster, the checkpoint folder and ``--out`` must be paths every node sees (a shared file
system), and every node needs this package with its ``ray`` extra. Ray is optional: without it,
:func:`import_ray` says how to install it, in one line.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pandas as pd
import torch

from ..io.loader import load_checkpoint
from ..model.budget import Control
from .corpus import SHARD, records

RAY_EXTRA = "pip install -e '.[ray]'"
"""How Ray is installed: the project's optional extra (pinned in pyproject.toml)."""


def import_ray():
    """The ``ray`` module with Ray Data; ``ValueError`` (one line naming the extra) without it."""
    try:
        import ray
        import ray.data  # noqa: F401  (the part this engine uses)
    except ImportError:
        raise ValueError(f"--engine ray needs Ray, an optional extra: {RAY_EXTRA}") from None
    return ray


class RecordMaker:
    """The callable class of ``map_batches``: one model replica per Ray actor, loaded once when the
    actor starts, run on one torch thread (the actor holds one CPU)."""

    def __init__(self, checkpoint: str, budget: float | None):
        torch.set_num_threads(1)
        self.ckpt = load_checkpoint(checkpoint)
        self.control = None if budget is None else Control(budget=budget)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        return records(self.ckpt, batch, self.control)


def run_ray(checkpoint: Path, frame: pd.DataFrame, out: Path, budget: float | None, batch_size: int,
            workers: int | None = None, address: str | None = None) -> int:
    """Write the records of every row of ``frame`` (:func:`~budgetformer_core.analysis.corpus.corpus_frame`)
    as Parquet shards in ``out`` with Ray Data; returns the number of actors that ran.

    Raises:
        ValueError: Ray is not installed.
        RuntimeError: Ray could not start or join the cluster, or an actor failed (the reason, in one line).
    """
    ray = import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report from a command line run
    started = not ray.is_initialized()
    try:
        if started:  # a cluster has its own CPUs; a local instance gets --workers of this machine's
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     logging_level=logging.WARNING)
        workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        blocks = [frame.iloc[start : start + batch_size] for start in range(0, len(frame), batch_size)]
        staging = out / f".ray-{uuid.uuid4().hex[:12]}"
        analysed = ray.data.from_pandas(blocks).map_batches(
            RecordMaker, fn_constructor_args=(str(checkpoint), budget), batch_size=batch_size,
            batch_format="pandas", compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1,
        )  # `compute=` is Ray 2.51+'s name for `concurrency=workers`
        # the writes hold no CPU: every CPU is an actor's, and shards are written while the actors run
        analysed.write_parquet(str(staging), ray_remote_args={"num_cpus": 0})
    except (ray.exceptions.RayError, ConnectionError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RuntimeError(f"the Ray run failed: {reason}") from None
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    for shard, path in enumerate(sorted(staging.glob("*.parquet"))):  # Ray's names sort by its write task
        os.replace(path, out / SHARD.format(shard))
    staging.rmdir()
    return workers
